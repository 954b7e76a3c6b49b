//! The HTML escaper (report.html): element content and quoted attributes.

use super::is_hazard;

/// A sentence tracer composed, with its code spans (a backtick run, the
/// text, a run as long) shown as `<code>`, everything escaped: a headline
/// or the verdict in a heading shows no raw Markdown backticks. A run that
/// closes nothing stays, as text.
pub fn inline(s: &str) -> String {
    let c: Vec<char> = s.chars().collect();
    let mut o = String::with_capacity(s.len() + 16);
    let mut plain = String::new();
    let mut i = 0;
    while i < c.len() {
        if c[i] != '`' {
            plain.push(c[i]);
            i += 1;
            continue;
        }
        let n = c[i..].iter().take_while(|&&x| x == '`').count();
        // The next run of exactly n closes it.
        let mut j = i + n;
        let mut close = None;
        while j < c.len() {
            if c[j] == '`' {
                let m = c[j..].iter().take_while(|&&x| x == '`').count();
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                o.push_str(&esc(&plain));
                plain.clear();
                let inner: String = c[i + n..j].iter().collect();
                // CommonMark strips one space each side when both are there.
                let inner = match inner.strip_prefix(' ').and_then(|x| x.strip_suffix(' ')) {
                    Some(x) if !x.trim().is_empty() => x.to_string(),
                    _ => inner,
                };
                o.push_str("<code>");
                o.push_str(&esc(&inner));
                o.push_str("</code>");
                i = j + n;
            }
            None => {
                plain.extend(&c[i..i + n]);
                i += n;
            }
        }
    }
    o.push_str(&esc(&plain));
    o
}

/// HTML-escapes text for element content and quoted attributes. Hazards
/// (control characters, bidi overrides, line separators: never meaningful
/// in argv shown to a person) become U+FFFD; `\n` and `\t` stay, as
/// whitespace. There is no raw-text context (`<script>`, `<style>`) with
/// data in it, so `</script>` is just text here.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            '\n' | '\t' => o.push(c),
            c if is_hazard(c) => o.push('\u{FFFD}'),
            c => o.push(c),
        }
    }
    o
}
