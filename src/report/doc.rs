//! A tiny document model shared by the Markdown and HTML renderers.
//!
//! Report content is built once as [`Doc`] blocks; each format only decides how a heading,
//! paragraph, list or table is written (hyperfine's `MarkupExporter` idea). Text uses two
//! inline constructs only: `` `code` `` and `[text](href)`.

/// One block of a document.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Level (1..=3) and text.
    Heading(u8, String),
    Para(String),
    List(Vec<String>),
    Table(Table),
    /// An inline SVG chart with a caption (HTML only; Markdown writes the caption).
    Chart {
        caption: String,
        svg: String,
    },
    /// Start of a named anchor section (HTML `<section id>`; nothing in Markdown).
    SectionStart(String),
    SectionEnd,
}

/// A table: header cells and rows of cells.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    pub head: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(head: &[&str]) -> Table {
        Table {
            head: head.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
}

/// A document: its title (HTML `<title>`) and blocks.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Doc {
    pub title: String,
    pub blocks: Vec<Block>,
}

impl Doc {
    pub fn h(&mut self, level: u8, text: impl Into<String>) {
        self.blocks.push(Block::Heading(level, text.into()));
    }

    pub fn p(&mut self, text: impl Into<String>) {
        self.blocks.push(Block::Para(text.into()));
    }

    pub fn list(&mut self, items: Vec<String>) {
        if !items.is_empty() {
            self.blocks.push(Block::List(items));
        }
    }

    pub fn table(&mut self, t: Table) {
        self.blocks.push(Block::Table(t));
    }
}

/// Inline code span, choosing a fence longer than any backtick run inside. The text is
/// kept on one line with control characters shown escaped (`crate::text::clean_line`).
pub fn code(s: &str) -> String {
    let s = crate::text::clean_line(s);
    if s.contains('`') {
        format!("`` {s} ``")
    } else {
        format!("`{s}`")
    }
}

/// A link; when `href` is not one a report may hold ([`href_kind`]), the text alone.
pub fn link(text: &str, href: &str) -> String {
    match href_kind(href) {
        Href::Refused => text.to_string(),
        _ => format!("[{text}]({href})"),
    }
}

/// What a link target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Href {
    /// `http://`, `https://` or `mailto:`.
    External,
    /// A path relative to the report, or a `#fragment`.
    Relative,
    /// Anything else (`javascript:`, `data:`, `file:`, `//host`, spaces or controls):
    /// rendered as text, never as a link.
    Refused,
}

/// The kind of a link target: only web and mail addresses and relative paths are links.
pub fn href_kind(href: &str) -> Href {
    if href.is_empty()
        || href.chars().any(|c| {
            c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | '"' | '\\' | '(' | ')')
        })
    {
        return Href::Refused;
    }
    let lower = href.to_ascii_lowercase();
    if ["http://", "https://", "mailto:"]
        .iter()
        .any(|p| lower.starts_with(p) && lower.len() > p.len())
    {
        return Href::External;
    }
    // A scheme is what stands before the first `:` when no `/`, `?` or `#` comes first.
    let scheme_end = href.find(':');
    let path_end = href.find(['/', '?', '#']);
    let has_scheme = match (scheme_end, path_end) {
        (Some(c), Some(p)) => c < p,
        (Some(_), None) => true,
        _ => false,
    };
    if has_scheme || href.starts_with("//") {
        Href::Refused
    } else {
        Href::Relative
    }
}

/// Inline pieces of a text, for renderers that need structure (HTML).
#[derive(Debug, Clone, PartialEq)]
pub enum Inline {
    Text(String),
    Code(String),
    Link { text: Vec<Inline>, href: String },
}

/// Split a text into inline pieces. Unbalanced markup is kept as text.
pub fn parse_inline(s: &str) -> Vec<Inline> {
    let mut out = Vec::new();
    let mut text = String::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < s.len() {
        if b[i] == b'`' {
            // fence length
            let run = b[i..].iter().take_while(|&&c| c == b'`').count();
            let fence = &s[i..i + run];
            if let Some(end) = s[i + run..].find(fence) {
                let inner = &s[i + run..i + run + end];
                if !text.is_empty() {
                    out.push(Inline::Text(std::mem::take(&mut text)));
                }
                let inner = if run > 1 { inner.trim() } else { inner };
                out.push(Inline::Code(inner.to_string()));
                i += run + end + run;
                continue;
            }
        } else if b[i] == b'[' {
            if let Some((label, href, len)) = parse_link(&s[i..]) {
                if !text.is_empty() {
                    out.push(Inline::Text(std::mem::take(&mut text)));
                }
                out.push(Inline::Link {
                    text: parse_inline(label),
                    href: href.to_string(),
                });
                i += len;
                continue;
            }
        }
        let ch = s[i..].chars().next().unwrap_or(' ');
        text.push(ch);
        i += ch.len_utf8();
    }
    if !text.is_empty() {
        out.push(Inline::Text(text));
    }
    out
}

/// `[label](href)` at the start of `s`: label, href and total length.
fn parse_link(s: &str) -> Option<(&str, &str, usize)> {
    let mut depth = 0usize;
    let mut in_code = false;
    let mut close = None;
    for (i, c) in s.char_indices() {
        match c {
            '`' => in_code = !in_code,
            '[' if !in_code => depth += 1,
            ']' if !in_code => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close?;
    let rest = &s[close + 1..];
    if !rest.starts_with('(') {
        return None;
    }
    let end = rest.find(')')?;
    let href = &rest[1..end];
    if href.contains(char::is_whitespace) {
        return None;
    }
    Some((&s[1..close], href, close + 1 + end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_parsing() {
        let v = parse_inline("a `b|c` [`x.json`](../x.json) d [e] (f)");
        assert_eq!(
            v,
            vec![
                Inline::Text("a ".into()),
                Inline::Code("b|c".into()),
                Inline::Text(" ".into()),
                Inline::Link {
                    text: vec![Inline::Code("x.json".into())],
                    href: "../x.json".into()
                },
                Inline::Text(" d [e] (f)".into()),
            ]
        );
        assert_eq!(parse_inline("x ` y"), vec![Inline::Text("x ` y".into())]);
        assert_eq!(parse_inline(&code("a`b")), vec![Inline::Code("a`b".into())]);
    }

    #[test]
    fn only_web_mail_and_relative_links() {
        for ok in [
            "https://x.org/a",
            "http://x",
            "mailto:a@b",
            "../r/x.json",
            "x.md#s",
            "#top",
        ] {
            assert_ne!(href_kind(ok), Href::Refused, "{ok}");
        }
        for bad in [
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            "data:text/html,<b>",
            "vbscript:x",
            "file:///etc/shadow",
            "//evil.example",
            "https://",
            "a b",
            "x\u{1b}y",
            "",
        ] {
            assert_eq!(href_kind(bad), Href::Refused, "{bad}");
        }
        assert_eq!(link("Spec", "javascript:alert(1)"), "Spec");
        assert_eq!(link("Spec", "https://x.org"), "[Spec](https://x.org)");
        assert_eq!(code("a\x1b[2Jb\nc"), "`a\\x1b[2Jb\\nc`");
    }
}
