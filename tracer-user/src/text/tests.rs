//! One test group per escaper, and the abbreviation fixtures.
use super::{
    command::{abbreviate, short_path},
    display_lines, display_text, html, markdown as md, one_line, strip_ansi, terminal,
};

fn argv(s: &[&str]) -> Vec<String> {
    s.iter().map(|a| a.to_string()).collect()
}

#[test]
fn one_line_makes_every_hazard_visible() {
    assert_eq!(one_line("a\nb\rc\td"), "a\\nb\\rc\\td");
    assert_eq!(one_line("\x1b[31mred"), "\\e[31mred");
    assert_eq!(one_line("\x7f\u{85}\u{9b}"), "\\x7f\\u{85}\\u{9b}");
    assert_eq!(one_line("\u{202e}gnp.exe"), "\\u{202e}gnp.exe");
    assert_eq!(one_line("a\u{2028}b"), "a\\u{2028}b");
    assert_eq!(one_line("plain é ✓"), "plain é ✓");
}

/// Unicode's whole Bidi_Control set and the invisible format characters:
/// `rm` and `r` U+200B `m` are different commands and must not look alike;
/// U+061C reorders like the other marks. Each format shows each of them.
const INVISIBLE: &[(char, &str)] = &[
    ('\u{061C}', "\\u{61c}"),
    ('\u{200B}', "\\u{200b}"),
    ('\u{200C}', "\\u{200c}"),
    ('\u{200D}', "\\u{200d}"),
    ('\u{200E}', "\\u{200e}"),
    ('\u{200F}', "\\u{200f}"),
    ('\u{202A}', "\\u{202a}"),
    ('\u{202E}', "\\u{202e}"),
    ('\u{2060}', "\\u{2060}"),
    ('\u{2061}', "\\u{2061}"),
    ('\u{2062}', "\\u{2062}"),
    ('\u{2063}', "\\u{2063}"),
    ('\u{2064}', "\\u{2064}"),
    ('\u{2066}', "\\u{2066}"),
    ('\u{2069}', "\\u{2069}"),
    ('\u{FEFF}', "\\u{feff}"),
];

#[test]
fn bidi_marks_and_invisible_characters_are_shown_in_every_format() {
    for &(c, shown) in INVISIBLE {
        let raw = format!("r{c}m");
        let want = format!("r{shown}m");
        assert_eq!(one_line(&raw), want, "U+{:04X}", c as u32);
        assert_eq!(terminal::line(&raw), want, "terminal U+{:04X}", c as u32);
        assert_eq!(
            md::code(&raw),
            format!("`{want}`"),
            "md code U+{:04X}",
            c as u32
        );
        // In prose the backslash is itself escaped: it renders as `\u{..}`.
        assert_eq!(
            md::text(&raw),
            format!("r\\{}m", shown),
            "md text U+{:04X}",
            c as u32
        );
        assert_eq!(
            md::fence(&raw, ""),
            format!("```\n{want}\n```\n"),
            "md fence U+{:04X}",
            c as u32
        );
        assert_eq!(display_text(&raw), want, "last words U+{:04X}", c as u32);
        assert_eq!(html::esc(&raw), "r\u{FFFD}m", "html U+{:04X}", c as u32);
        assert_ne!(one_line(&raw), one_line("rm"), "looks like `rm`");
    }
    // Visible format characters and ordinary non-ASCII text stay as they are.
    for s in ["\u{00AD}", "é ✓ 日本", "\u{0627}\u{0644}"] {
        assert_eq!(one_line(s), s);
        assert_eq!(html::esc(s), s);
    }
}

#[test]
fn one_line_never_hands_the_runner_a_command() {
    assert_eq!(one_line("::error::pwned"), "\\::error::pwned");
    assert_eq!(
        one_line("  ::set-output name=x::y"),
        "\\  ::set-output name=x::y"
    );
    assert_eq!(one_line("x ##[error]y"), "x #\\#[error]y");
    assert_eq!(one_line("a::b"), "a::b", "only a line start is a command");
    assert_eq!(
        terminal::line("\x1b]0;title\x07x\n::warning::w"),
        "\\e]0;title\\x07x\\n::warning::w"
    );
}

#[test]
fn ansi_sequences_are_removed() {
    // The field case: a vitest error in colour.
    let raw = "\x1b[31m\x1b[1mCaused by: Error\x1b[22m: Worker exited unexpectedly\x1b[39m";
    assert_eq!(
        strip_ansi(raw),
        "Caused by: Error: Worker exited unexpectedly"
    );
    assert_eq!(strip_ansi("a\x1b[2K\x1b[1Gb"), "ab", "cursor moves");
    assert_eq!(
        strip_ansi("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"),
        "link",
        "OSC 8"
    );
    assert_eq!(strip_ansi("\x1b]0;title\x07t"), "t", "OSC ended by BEL");
    assert_eq!(
        strip_ansi("\x1b(Bx\x1b7y\x1b8"),
        "xy",
        "charset, save/restore"
    );
    assert_eq!(strip_ansi("\u{9b}31mc"), "c", "8-bit CSI");
    // An unterminated string stops at the line end: it hides nothing after.
    assert_eq!(strip_ansi("\x1b]0;never ended\nnext"), "\nnext");
    assert_eq!(strip_ansi("trailing \x1b"), "trailing ");
}

#[test]
fn display_lines_is_what_a_terminal_showed() {
    assert_eq!(
        display_lines("\x1b[32mok\x1b[0m\r\nbar 10%\rbar 100%\n\tat f\n"),
        vec!["ok", "bar 10%", "bar 100%", "        at f", ""]
    );
    assert_eq!(display_text("::error::x\n\n"), "\\::error::x");
    assert_eq!(display_text("a\x08b\x00"), "a\\x08b\\x00");
}

#[test]
fn markdown_code_spans_are_balanced_whatever_the_content() {
    assert_eq!(md::code("node a.js"), "`node a.js`");
    assert_eq!(md::code("a`b"), "``a`b``");
    assert_eq!(md::code("``x"), "``` ``x ```");
    assert_eq!(md::code("x`"), "`` x` ``");
    assert_eq!(md::code(" a "), "`  a  `");
    assert_eq!(md::code(""), "` `");
    assert_eq!(md::code("a\nb"), "`a\\nb`");
    assert_eq!(md::cell(&md::code("a|b")), "`a\\|b`");
}

#[test]
fn markdown_text_is_inert() {
    assert_eq!(md::text("<h1>x</h1>"), "\\<h1\\>x\\</h1\\>");
    assert_eq!(md::text("[a](http://e)"), "\\[a\\](http://e)");
    assert_eq!(md::text("*b* ~~s~~ \\"), "\\*b\\* \\~\\~s\\~\\~ \\\\");
    assert_eq!(md::text("SEGV_MAPERR _x_"), "SEGV_MAPERR \\_x\\_");
    assert_eq!(md::text("`x"), "\\`x");
    assert_eq!(md::text("# a\n# b"), "# a\\\\n# b");
    // A character reference is text, not the character it names (a job's
    // frame name `&#x202e;` rendered as a right-to-left override).
    assert_eq!(md::text("f&#x202e;cba &amp;"), "f\\&#x202e;cba \\&amp;");
    assert_eq!(md::inline("in `a&b` &lt;"), "in `a&b` \\&lt;");
}

#[test]
fn markdown_inline_keeps_tracers_spans_and_escapes_the_rest() {
    let h = "`node a.js` (pid 4) killed by SIGKILL from `kill -9 4` (pid 5)";
    assert_eq!(md::inline(h), h, "a plain headline reads unchanged");
    assert_eq!(md::inline("``a`b`` <img>"), "``a`b`` \\<img\\>");
    // A run that closes nothing is literal, so it is escaped.
    assert_eq!(md::inline("a ` b"), "a \\` b");
    // `\n` made visible, then its backslash escaped: it renders as `\n`.
    assert_eq!(md::inline("a\nb"), "a\\\\nb");
}

#[test]
fn markdown_fence_outlasts_any_backtick_run() {
    let f = md::fence("```\n````` x\n", "text");
    assert!(f.starts_with("``````text\n"), "{f}");
    assert!(f.ends_with("\n``````\n"), "{f}");
    assert_eq!(md::fence("a\x1b[1mb\n", ""), "```\nab\n\n```\n");
}

#[test]
fn html_escapes_markup_and_hazards() {
    assert_eq!(
        html::esc("<script>alert('x')</script>&\"\x1b\u{202e}"),
        "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;\u{FFFD}\u{FFFD}"
    );
    assert_eq!(html::esc("a\nb\tc"), "a\nb\tc");
}

/// Commands as a real runner spawns them, and how headlines name them.
#[test]
fn abbreviation_keeps_entry_point_and_tail() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "/usr/local/bin/node",
                "--experimental-import-meta-resolve",
                "--require",
                "/work/steward/node_modules/tsx/dist/preflight.cjs",
                "--import",
                "file:///work/steward/node_modules/tsx/dist/loader.mjs",
                "/work/steward/node_modules/vitest/dist/workers/forks.js",
            ],
            "node …/vitest/dist/workers/forks.js",
        ),
        (
            &[
                "/usr/bin/python3",
                "-u",
                "-W",
                "ignore",
                "-m",
                "pytest",
                "-n",
                "4",
                "tests/",
            ],
            "python3 -m pytest -n 4 tests/",
        ),
        (
            &["python3.11", "-X", "dev", "/srv/app/run.py", "--port", "80"],
            "python3.11 /srv/app/run.py --port 80",
        ),
        (
            &["python3", "-c", "import os; os.kill(1, 9)"],
            "python3 -c import os; os.kill(1, 9)",
        ),
        (
            &["bash", "-euo", "pipefail", "ci/test.sh", "unit"],
            "bash ci/test.sh unit",
        ),
        (&["sh", "-c", "sleep 1; exit 3"], "sh -c sleep 1; exit 3"),
        (&["bash", "-ec", "make test"], "bash -ec make test"),
        (
            &["node", "--max-old-space-size=4096", "server.js"],
            "node server.js",
        ),
        (
            &["node", "-e", "process.exit(2)"],
            "node -e process.exit(2)",
        ),
        (&["node", "--version"], "node --version"),
        (
            &["java", "-Xmx1g", "-cp", "a.jar:b.jar", "org.Main", "x"],
            "java org.Main x",
        ),
        (
            &["java", "-jar", "/opt/app/app.jar"],
            "java -jar /opt/app/app.jar",
        ),
        (&["/bin/sleep", "300"], "sleep 300"),
        (
            &["cargo", "test", "--", "--nocapture"],
            "cargo test -- --nocapture",
        ),
        (
            &["ruby", "-Ilib", "-r", "bundler/setup", "spec/a_spec.rb"],
            "ruby spec/a_spec.rb",
        ),
    ];
    for (a, want) in cases {
        assert_eq!(abbreviate(&argv(a)), *want, "{a:?}");
    }
}

#[test]
fn workers_of_one_runner_stay_apart() {
    let w = |script: &str| {
        abbreviate(&argv(&[
            "node",
            "--require",
            "/work/a/very/long/path/to/the/project/setup.js",
            script,
        ]))
    };
    let forks = w("/work/project/node_modules/vitest/dist/workers/forks.js");
    let threads = w("/work/project/node_modules/vitest/dist/workers/threads.js");
    assert_ne!(forks, threads);
    assert!(forks.len() < 40, "{forks}");
}

#[test]
fn short_paths_keep_the_file_and_fit() {
    assert_eq!(short_path("/srv/worker.js"), "/srv/worker.js");
    assert_eq!(
        short_path("/a/very/long/prefix/that/nobody/reads/src/main/pkg/mod.rs"),
        "…/that/nobody/reads/src/main/pkg/mod.rs"
    );
    let one = "/x/".to_string() + &"f".repeat(60);
    assert_eq!(short_path(&one), format!("…/{}", "f".repeat(60)));
    assert_eq!(
        short_path("a b/c d/eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"),
        "a b/c d/eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
    );
}

/// XML 1.0 admits no C0 but tab/LF/CR and no U+FFFE/U+FFFF, not even as a
/// character reference: every such character is shown, and markup is
/// entity-escaped, in attributes (one line) and element text.
#[test]
fn xml_escapes_markup_and_shows_what_xml_forbids() {
    let hostile = "a\x1b[31m\x07\u{fffe}\u{ffff}<b>&\"'\u{202e}\nnext";
    let attr = super::xml::attr(hostile);
    let allowed = |c: char| {
        matches!(c, '\t' | '\n' | '\r') || (c >= ' ' && c != '\u{fffe}' && c != '\u{ffff}')
    };
    assert!(attr.chars().all(allowed), "{attr:?}");
    assert!(!attr.contains(['<', '>', '"', '\n']), "{attr}");
    assert!(
        attr.contains("\\e[31m\\x07\\u{fffe}\\u{ffff}&lt;b&gt;&amp;&quot;&apos;\\u{202e}\\nnext"),
        "{attr}"
    );
    let text = super::xml::text(hostile);
    assert!(text.chars().all(allowed), "{text:?}");
    // Element text keeps its lines and loses its colour codes.
    assert_eq!(
        text,
        "a\\x07\\u{fffe}\\u{ffff}&lt;b&gt;&amp;&quot;&apos;\\u{202e}\nnext"
    );
}

#[test]
fn html_inline_shows_code_spans_as_code_and_escapes_the_rest() {
    use super::html::inline;
    assert_eq!(
        inline("`node worker.js` (pid 4) killed by <x>"),
        "<code>node worker.js</code> (pid 4) killed by &lt;x&gt;"
    );
    assert_eq!(inline("`` a`b `` then"), "<code>a`b</code> then");
    // A run that closes nothing is text; nothing from inside escapes.
    assert_eq!(inline("a ` b"), "a ` b");
    assert_eq!(
        inline("`</code><script>alert(1)</script>`"),
        "<code>&lt;/code&gt;&lt;script&gt;alert(1)&lt;/script&gt;</code>"
    );
}
