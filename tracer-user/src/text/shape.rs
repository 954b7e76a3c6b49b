//! Command "shapes": a command line with its volatile parts (pids, numbers,
//! temp paths, hex ids, uuids, ports) replaced by placeholders, so the same
//! defect in different runs reads the same.
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

/// The shape of a command: the program's basename, then its arguments,
/// normalized. Falls back to the joined command when argv is unknown.
pub fn command(argv: &[String], joined: &str) -> String {
    let text = match argv.split_first() {
        Some((prog, rest)) => {
            let base = prog.rsplit('/').next().unwrap_or(prog);
            let mut v = vec![base.to_string()];
            v.extend(rest.iter().cloned());
            v.join(" ")
        }
        None => joined.to_string(),
    };
    cut(&normalize(&text))
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
    fn calls_lose_their_pids_not_their_sign() {
        assert_eq!(call("kill(-4242, SIGKILL)"), "kill(-<pid>, SIGKILL)");
        assert_eq!(
            call("tgkill(10, 12, SIGTERM)"),
            "tgkill(<pid>, <pid>, SIGTERM)"
        );
    }
}
