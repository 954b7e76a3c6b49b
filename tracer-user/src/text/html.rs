//! The HTML escaper (report.html): element content and quoted attributes.

use super::is_hazard;

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
