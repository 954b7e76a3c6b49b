use super::{list, rules::pkill_pattern};

fn argv(s: &str) -> Vec<String> {
    s.split(' ').map(str::to_string).collect()
}

#[test]
fn pkill_full_match_is_read_from_its_flags() {
    for (cmd, want) in [
        ("pkill -f worker", Some("worker")),
        ("/usr/bin/pkill -TERM -f worker", Some("worker")),
        ("pkill --full -9 worker", Some("worker")),
        ("pkill -ef worker", Some("worker")),
        // Matched by name only: the pattern met the process name, not a
        // command line.
        ("pkill worker", None),
        ("pkill -9 worker", None),
        // -x matches the whole command line: anchoring changes nothing.
        ("pkill -f -x worker", None),
        ("pkill -fx worker", None),
        // Anchored already: what it matched, it was written to match.
        ("pkill -KILL -f ^tn-py-11103", None),
        ("pgrep -f worker", None),
        ("pkill -f", None),
    ] {
        assert_eq!(pkill_pattern(&argv(cmd)), want, "{cmd}");
    }
}

#[test]
fn lists_are_cut_with_a_count() {
    let items: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
    assert_eq!(list(&items[..1], 3), "a");
    assert_eq!(list(&items[..2], 3), "a and b");
    assert_eq!(list(&items, 3), "a, b, c and 1 more");
}
