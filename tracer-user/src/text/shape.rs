//! Command "shapes": a command line with its volatile parts (pids, numbers,
//! temp paths, hex ids, uuids, ports) replaced by placeholders, so the same
//! defect in different runs reads the same; and the death signature built
//! from them, which names a death the same way in every run (JUnit test
//! cases, `tracer summarize`).
use std::sync::OnceLock;

use regex::Regex;

/// Shapes are cut to this many characters.
const MAX: usize = 120;

struct Rules {
    tmp: Regex,
    uuid: Regex,
    hex: Regex,
    port: Regex,
    num: Regex,
}

fn rules() -> &'static Rules {
    static R: OnceLock<Rules> = OnceLock::new();
    R.get_or_init(|| Rules {
        tmp: Regex::new(
            r"(?:/private)?(?:/tmp|/var/tmp|/dev/shm|/var/folders|/run/user/\d+)/[^\s'\x22]*",
        )
        .unwrap(),
        uuid: Regex::new(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
        )
        .unwrap(),
        hex: Regex::new(r"\b(?:0x[0-9a-fA-F]+|[0-9a-fA-F]{7,})\b").unwrap(),
        port: Regex::new(r":\d{2,5}\b").unwrap(),
        num: Regex::new(r"\b\d+\b").unwrap(),
    })
}

/// Replaces the volatile parts of free text.
pub fn normalize(s: &str) -> String {
    let r = rules();
    let s = r.tmp.replace_all(s, "<tmp>");
    let s = r.uuid.replace_all(&s, "<uuid>");
    // Hex ids: long runs of hex digits with at least one digit (a plain word
    // like "deadbeef" stays) or a 0x prefix.
    let s = r.hex.replace_all(&s, |c: &regex::Captures| {
        let m = &c[0];
        if m.starts_with("0x") || (m.bytes().any(|b| b.is_ascii_digit()) && m.len() >= 7) {
            if m.bytes().all(|b| b.is_ascii_digit()) {
                "<n>".to_string()
            } else {
                "<hex>".to_string()
            }
        } else {
            m.to_string()
        }
    });
    let s = r.port.replace_all(&s, ":<port>");
    r.num.replace_all(&s, "<n>").into_owned()
}

/// The shape of a command: its short name (as headlines name it:
/// [`super::command::abbreviate`]) with the volatile parts of each argument
/// replaced. Falls back to the joined command when argv is unknown.
pub fn command(argv: &[String], joined: &str) -> String {
    let Some((prog, rest)) = argv.split_first() else {
        return cut(&normalize(joined));
    };
    // Each argument normalized before it is shortened: a temp path is
    // `<tmp>` whole, not the last components of a random directory.
    let mut v = vec![super::command::program(prog).to_string()];
    v.extend(rest.iter().map(|a| normalize(a)));
    cut(&normalize(&super::command::abbreviate(&v)))
}

/// What a death signature is made of, each part already a stable string
/// (shapes, names of kinds and relations as report.json spells them).
#[derive(Debug, Clone, Copy, Default)]
pub struct Death<'a> {
    /// The victim's shape ([`command`]).
    pub victim: &'a str,
    /// `cause.kind` (`killed_in_run`, `oom`, ...).
    pub cause: &'a str,
    /// The fatal signal's name.
    pub signal: Option<&'a str>,
    /// The exit code, for a death without a signal.
    pub exit_code: Option<i32>,
    /// The killer's relation to the victim (`sibling`, `self`, ...).
    pub relation: Option<&'a str>,
    /// The killer's shape.
    pub killer: Option<&'a str>,
}

/// A death named by what stays the same from run to run: the victim's
/// short name, the cause, the killer's relation and short name; never a
/// pid, a time or a temp path. `sleep <n> killed by SIGKILL from a sibling
/// (sh -c <n>)`, `a.out died of SIGSEGV (fault)`, `make exited 2 (nonzero
/// exit)`.
/// A killer's shape with the test it ran ("pkill, test `a::b`"), so a
/// signature across runs keys on the killer's test.
pub fn with_test(shape: String, test: Option<&str>) -> String {
    match test {
        Some(t) => format!("{shape}, test {t}"),
        None => shape,
    }
}

pub fn death(d: &Death) -> String {
    let words = d.cause.replace('_', " ");
    match (d.relation, d.signal) {
        (Some(rel), sig) => {
            let sig = sig.unwrap_or("a signal");
            let from = match (rel, d.killer) {
                ("self", _) => "itself".to_string(),
                ("tracer", _) => "tracer".to_string(),
                (rel, killer) => {
                    let who = match rel {
                        "parent" => "its parent",
                        "ancestor" => "an ancestor",
                        "sibling" => "a sibling",
                        "descendant" => "a descendant",
                        "unrelated_in_run" => "an unrelated process of the run",
                        "outside_run" => "a process outside the run",
                        other => other,
                    };
                    match killer {
                        Some(k) if !k.is_empty() => format!("{who} ({k})"),
                        _ => who.to_string(),
                    }
                }
            };
            format!("{} killed by {sig} from {from}", d.victim)
        }
        (None, Some(sig)) => format!("{} died of {sig} ({words})", d.victim),
        (None, None) => match d.exit_code {
            Some(code) => format!("{} exited {code} ({words})", d.victim),
            None => format!("{} ({words})", d.victim),
        },
    }
}

/// A kill-family call with its pids replaced: `kill(-<pid>, SIGKILL)`.
pub fn call(call: &str) -> String {
    rules().num.replace_all(call, "<pid>").into_owned()
}

fn cut(s: &str) -> String {
    if s.chars().count() <= MAX {
        return s.to_string();
    }
    let mut c: String = s.chars().take(MAX - 1).collect();
    c.push('…');
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn volatile_parts_become_placeholders() {
        let cases = [
            ("node worker.js --pool=17", "node worker.js --pool=<n>"),
            (
                "/usr/bin/python3 /tmp/pytest-of-root/pytest-12/test_x0/run.py",
                "python3 <tmp>",
            ),
            (
                "curl http://127.0.0.1:45123/health",
                "curl http://<n>.<n>.<n>.<n>:<port>/health",
            ),
            (
                "worker --id 3f2a9c41e0b7 --job 5d1c1b2e-8f3a-4c7d-9e10-aa0bb1cc2dd3",
                "worker --id <hex> --job <uuid>",
            ),
            ("sleep 30", "sleep <n>"),
            (
                "esbuild --service=0.21.5 --ping",
                "esbuild --service=<n>.<n>.<n> --ping",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(command(&argv(input), input), want, "{input}");
        }
    }

    #[test]
    fn names_with_digits_and_plain_words_stay() {
        assert_eq!(
            command(&argv("python3 seed0.py deadbeef"), ""),
            "python3 seed0.py deadbeef"
        );
        assert_eq!(command(&[], "[kworker/0:1]"), "[kworker/<n>:<n>]");
    }

    #[test]
    fn short_names_leave_interpreter_flags_out() {
        assert_eq!(
            command(
                &argv("/usr/bin/node --max-old-space-size=4096 /home/ci/w/node_modules/vitest/dist/workers/forks.js"),
                ""
            ),
            "node …/vitest/dist/workers/forks.js"
        );
    }

    #[test]
    fn death_signatures_name_no_pid() {
        let d = Death {
            victim: "sleep <n>",
            cause: "killed_in_run",
            signal: Some("SIGKILL"),
            relation: Some("sibling"),
            killer: Some("sh -c <n>"),
            ..Default::default()
        };
        assert_eq!(
            death(&d),
            "sleep <n> killed by SIGKILL from a sibling (sh -c <n>)"
        );
        let oom = Death {
            victim: "node worker.js",
            cause: "oom",
            signal: Some("SIGKILL"),
            ..Default::default()
        };
        assert_eq!(death(&oom), "node worker.js died of SIGKILL (oom)");
        let exit = Death {
            victim: "make",
            cause: "nonzero_exit",
            exit_code: Some(2),
            ..Default::default()
        };
        assert_eq!(death(&exit), "make exited 2 (nonzero exit)");
        let itself = Death {
            relation: Some("self"),
            ..d
        };
        assert_eq!(death(&itself), "sleep <n> killed by SIGKILL from itself");
    }

    #[test]
    fn calls_lose_their_pids_not_their_sign() {
        assert_eq!(call("kill(-4242, SIGKILL)"), "kill(-<pid>, SIGKILL)");
        assert_eq!(
            call("tgkill(10, 12, SIGTERM)"),
            "tgkill(<pid>, <pid>, SIGTERM)"
        );
    }
}
