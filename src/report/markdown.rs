//! Markdown: `reports/<submission>.md` and `reports/index.md`.

use std::path::PathBuf;

use super::content;
use super::doc::{Block, Doc, Table};
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
        let doc = content::submission_doc(view, sub);
        vec![(
            PathBuf::from("reports").join(format!("{}.md", sub.id)),
            to_markdown(&doc).into_bytes(),
        )]
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
    s.replace('|', "\\|").replace('\n', " ")
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
                out.push_str(text);
                out.push('\n');
            }
            Block::Para(text) => {
                out.push_str(text);
                out.push('\n');
            }
            Block::List(items) => {
                for i in items {
                    out.push_str("- ");
                    out.push_str(&i.replace('\n', " "));
                    out.push('\n');
                }
            }
            Block::Table(t) => table(t, &mut out),
            Block::Chart { caption, .. } => {
                out.push_str(&format!("*Chart: {caption} (in the HTML site).*\n"));
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
}
