//! Markdown: `reports/<submission>.md` with its `reports/<submission>.appendix.md`, and
//! `reports/index.md`.

use std::path::PathBuf;

use super::content;
use super::doc::{code, href_kind, parse_inline, Block, Doc, Href, Inline, Table};
use super::results::Results;
use super::view::CampaignView;
use super::Renderer;

/// The Markdown renderer.
pub struct Markdown;

impl Renderer for Markdown {
    fn render_submission(&self, view: &CampaignView, submission: &str) -> Vec<(PathBuf, Vec<u8>)> {
        let Some(sub) = view.submission(submission) else {
            return Vec::new();
        };
        let body = format!("{}.md", sub.id);
        let appendix = format!("{}.appendix.md", sub.id);
        let doc = content::submission_doc(view, sub, &appendix);
        let more = content::appendix_doc(view, sub, &body);
        vec![
            (
                PathBuf::from("reports").join(&body),
                to_markdown(&doc).into_bytes(),
            ),
            (
                PathBuf::from("reports").join(&appendix),
                to_markdown(&more).into_bytes(),
            ),
        ]
    }

    fn render_campaign(&self, view: &CampaignView, results: &Results) -> Vec<(PathBuf, Vec<u8>)> {
        let doc = content::index_doc(view, results);
        vec![(
            PathBuf::from("reports").join("index.md"),
            to_markdown(&doc).into_bytes(),
        )]
    }
}

fn cell(s: &str) -> String {
    inline(s).replace('|', "\\|")
}

/// A text as Markdown that renders as the text: its code spans and links are kept (a link
/// only to a target [`href_kind`] allows, else its text), and everything else is escaped
/// where it would be markup — `<` and `>` (raw HTML), `](` and `][` (links), `&` before a
/// name or `#` (entities) — on one line, with control characters shown escaped. Text from
/// a manifest, an `api.h` or a KEM's output thus cannot add a heading, a table, a tag or
/// a link.
pub fn inline(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    write_inline(&parse_inline(s), &mut o);
    o
}

fn write_inline(parts: &[Inline], o: &mut String) {
    for p in parts {
        match p {
            Inline::Text(t) => text(t, o),
            Inline::Code(c) => o.push_str(&code(c)),
            Inline::Link { text: label, href } => match href_kind(href) {
                Href::Refused => write_inline(label, o),
                _ => {
                    o.push('[');
                    write_inline(label, o);
                    o.push_str("](");
                    o.push_str(href);
                    o.push(')');
                }
            },
        }
    }
}

fn text(t: &str, o: &mut String) {
    let one_line = t.replace(['\n', '\r'], " ");
    let clean = crate::text::clean_line(&one_line);
    let mut chars = clean.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            // `](` and `][` would continue a link (`[x]( javascript:…)`, `[x][ref]`).
            ']' if chars.peek().is_some_and(|n| *n == '(' || *n == '[') => o.push_str("]\\"),
            '&' if chars
                .peek()
                .is_some_and(|n| n.is_ascii_alphanumeric() || *n == '#') =>
            {
                o.push_str("&amp;")
            }
            c => o.push(c),
        }
    }
}

/// A block's text, with a first character that would start other markup (a heading, a
/// quote, a list, a rule) escaped.
fn block(s: &str) -> String {
    let t = inline(s);
    let t = t.trim_start();
    // `[ref]: target` would define a link.
    if t.starts_with(['#', '>', '-', '+', '*', '=', '|', '~'])
        || (t.starts_with('[') && t.contains("]:"))
    {
        return format!("\\{t}");
    }
    // `1. ` or `1) ` would start a numbered list.
    let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits > 0 && t[digits..].starts_with(['.', ')']) {
        return format!("{}\\{}", &t[..digits], &t[digits..]);
    }
    t.to_string()
}

fn table(t: &Table, out: &mut String) {
    let width = t
        .head
        .len()
        .max(t.rows.iter().map(Vec::len).max().unwrap_or(0));
    let row = |cells: &[String], out: &mut String| {
        out.push('|');
        for i in 0..width {
            out.push(' ');
            out.push_str(&cell(cells.get(i).map(String::as_str).unwrap_or("")));
            out.push_str(" |");
        }
        out.push('\n');
    };
    row(&t.head, out);
    out.push('|');
    for _ in 0..width {
        out.push_str("---|");
    }
    out.push('\n');
    for r in &t.rows {
        row(r, out);
    }
}

/// Write a document as Markdown (blocks separated by blank lines).
pub fn to_markdown(doc: &Doc) -> String {
    let mut out = String::new();
    for b in &doc.blocks {
        match b {
            Block::Heading(level, text) => {
                out.push_str(&"#".repeat((*level).clamp(1, 6) as usize));
                out.push(' ');
                out.push_str(&inline(text));
                out.push('\n');
            }
            Block::Para(text) => {
                out.push_str(&block(text));
                out.push('\n');
            }
            Block::List(items) => {
                for i in items {
                    out.push_str("- ");
                    out.push_str(&block(i));
                    out.push('\n');
                }
            }
            Block::Table(t) => table(t, &mut out),
            Block::Chart { caption, .. } => {
                out.push_str(&format!(
                    "*Chart: {} (in the HTML site).*\n",
                    inline(caption)
                ));
            }
            Block::SectionStart(_) | Block::SectionEnd => continue,
        }
        out.push('\n');
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_blocks() {
        let mut d = Doc::default();
        d.h(2, "T");
        d.p("a `b`");
        let mut t = Table::new(&["x", "y"]);
        t.row(vec!["1|2".into(), "3".into()]);
        d.table(t);
        d.list(vec!["i".into()]);
        assert_eq!(
            to_markdown(&d),
            "## T\n\na `b`\n\n| x | y |\n|---|---|\n| 1\\|2 | 3 |\n\n- i\n"
        );
    }

    #[test]
    fn untrusted_text_stays_text() {
        let mut d = Doc::default();
        d.p("# fake heading\n| a | b |\n<script>alert(1)</script> [x](javascript:alert(1)) \x1b]0;t\x07 [y]( javascript:z)");
        d.list(vec![
            "1. not a list".into(),
            "[ok](https://x.org) &amp; `c<d>`".into(),
        ]);
        let md = to_markdown(&d);
        assert_eq!(
            md,
            "\\# fake heading | a | b | &lt;script&gt;alert(1)&lt;/script&gt; x) \\x1b]0;t\\x07 [y]\\( javascript:z)\n\n\
             - 1\\. not a list\n- [ok](https://x.org) &amp;amp; `c<d>`\n"
        );
        assert!(!md.contains('\x1b'));
    }
}
