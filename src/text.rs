//! Text that came from outside the engine (a manifest, an `api.h`, a KEM's output, a file a
//! KEM wrote, a package's file names) made safe to show: control characters and the
//! characters that reorder or break what a reader sees (bidi overrides and isolates, line
//! and paragraph separators) become visible escapes, and excerpts are bounded.
//!
//! [`clean`] is applied to every human-readable reason before it is recorded and to every
//! line the engine prints about a step; the report renderers escape for their own format on
//! top of it (`report/doc.rs`, `report/html.rs`).

/// `s` with every control character except newline and tab shown as an escape (`\x1b`,
/// `\r`, `\u{9b}`): C0 controls, ESC, DEL and the C1 range, so no terminal sequence
/// (colour, cursor movement, window title, line erase) survives; and the bidi controls
/// (U+202A–202E embeddings and overrides, U+2066–2069 isolates, U+200E/200F/061C marks)
/// and U+2028/2029 separators (`\u{202e}`), so no text shows reversed or on a line it is
/// not on.
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

/// `s` with each character [`clean`] would escape replaced by one visible character of the
/// same UTF-8 length (`?`, `¿`, `\u{fffd}`), and a carriage return not followed by a
/// newline by `?`: for showing a file's lines where byte offsets into the original must
/// stay valid (diagnostic snippets).
pub fn same_length(s: &str) -> String {
    if !s.chars().any(needs_escape) {
        return s.to_string();
    }
    let mut o = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() == Some(&'\n') {
            o.push(c);
        } else if needs_escape(c) {
            o.push(match c.len_utf8() {
                1 => '?',
                2 => '¿',
                _ => '\u{fffd}',
            });
        } else {
            o.push(c);
        }
    }
    o
}

/// Whether `c` is shown escaped by [`clean`].
pub fn needs_escape(c: char) -> bool {
    (c != '\n' && c != '\t' && c.is_control()) || is_bidi_or_separator(c)
}

/// A bidi control (embedding, override, isolate, mark) or a line/paragraph separator.
pub fn is_bidi_or_separator(c: char) -> bool {
    matches!(
        c,
        '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{061c}'
            | '\u{2028}'
            | '\u{2029}'
    )
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
    fn bidi_controls_and_separators_become_visible_escapes() {
        // "PASS" written reversed behind an override shows as the escape and the text as
        // it is stored.
        assert_eq!(clean("FAIL \u{202e}SSAP"), "FAIL \\u{202e}SSAP");
        for c in [
            '\u{202a}', '\u{202d}', '\u{2066}', '\u{2069}', '\u{200f}', '\u{2028}', '\u{2029}',
        ] {
            let out = clean_line(&format!("a{c}b"));
            assert!(!out.contains(c), "{c:?}: {out}");
            assert!(out.starts_with("a\\u{"), "{out}");
        }
        // Letters of right-to-left scripts are text, not controls.
        assert_eq!(clean("שלום"), "שלום");
        assert_eq!(excerpt("\u{2067}x", 5), "\\u{2067}x");
    }

    #[test]
    fn same_length_keeps_every_offset() {
        let s = "a\x1b[2Jb\u{9b}c\u{202e}d\re\r\nf";
        let o = same_length(s);
        assert_eq!(o.len(), s.len());
        assert_eq!(o.chars().count(), s.chars().count());
        assert_eq!(o, "a?[2Jb¿c\u{fffd}d?e\r\nf");
        assert!(!o.chars().any(|c| needs_escape(c) && c != '\r'));
    }

    #[test]
    fn excerpts_are_bounded_and_marked() {
        assert_eq!(excerpt("short", 10), "short");
        assert_eq!(excerpt("root:$y$j9T$abcdef", 5), "root:…");
        assert_eq!(excerpt("\x1b[2Jx", 3), "\\x1b[2…");
        assert_eq!(excerpt("é".repeat(50).as_str(), 2), "éé…");
    }
}
