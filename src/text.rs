//! Text that came from outside the engine (a manifest, an `api.h`, a KEM's output, a file a
//! KEM wrote) made safe to show: control characters become visible escapes, and excerpts
//! are bounded.
//!
//! [`clean`] is applied to every human-readable reason before it is recorded and to every
//! line the engine prints about a step; the report renderers escape for their own format on
//! top of it (`report/doc.rs`, `report/html.rs`).

/// `s` with every control character except newline and tab shown as an escape (`\x1b`,
/// `\r`, `\u{9b}`): C0 controls, ESC, DEL and the C1 range, so no terminal sequence
/// (colour, cursor movement, window title, line erase) survives.
pub fn clean(s: &str) -> String {
    if !s.chars().any(needs_escape) {
        return s.to_string();
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push_char(c, &mut o);
    }
    o
}

/// [`clean`], with newlines and tabs escaped too: one line.
pub fn clean_line(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => o.push_str("\\n"),
            '\t' => o.push_str("\\t"),
            c => push_char(c, &mut o),
        }
    }
    o
}

/// At most `max` characters of `s` on one line ([`clean_line`]), with `…` where it was cut:
/// what a reason may quote of a file or stream a KEM controls.
pub fn excerpt(s: &str, max: usize) -> String {
    let cut = s.chars().count() > max;
    let head: String = s.chars().take(max).collect();
    let mut o = clean_line(&head);
    if cut {
        o.push('…');
    }
    o
}

/// Whether `c` is shown escaped by [`clean`].
pub fn needs_escape(c: char) -> bool {
    c != '\n' && c != '\t' && c.is_control()
}

fn push_char(c: char, o: &mut String) {
    if !needs_escape(c) {
        o.push(c);
        return;
    }
    match c {
        '\r' => o.push_str("\\r"),
        c if (c as u32) < 0x80 => o.push_str(&format!("\\x{:02x}", c as u32)),
        c => o.push_str(&format!("\\u{{{:x}}}", c as u32)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_become_visible_escapes() {
        assert_eq!(clean("plain\ttext\n"), "plain\ttext\n");
        assert_eq!(
            clean("\x1b]0;pwned\x07red\x1b[31m\r\u{9b}2K\x7f"),
            "\\x1b]0;pwned\\x07red\\x1b[31m\\r\\u{9b}2K\\x7f"
        );
        assert!(!clean("a\x1bb").contains('\x1b'));
        assert_eq!(clean_line("a\nb\tc"), "a\\nb\\tc");
    }

    #[test]
    fn excerpts_are_bounded_and_marked() {
        assert_eq!(excerpt("short", 10), "short");
        assert_eq!(excerpt("root:$y$j9T$abcdef", 5), "root:…");
        assert_eq!(excerpt("\x1b[2Jx", 3), "\\x1b[2…");
        assert_eq!(excerpt("é".repeat(50).as_str(), 2), "éé…");
    }
}
