//! HTML site: `site/index.html` and `site/<submission>.html`, self-contained.
//!
//! Inline CSS, inline SVG charts, no scripts and no external URL at all (a manifest's web
//! links are shown as their label only; the Markdown report keeps the address). Links to
//! other reports are rewritten from `.md` to `.html` (and `reports/` to `site/`); evidence
//! links point at the records beside the site (`../records/...`). When the outputs root
//! holds other systems with a `results.json`, the index shows every system side by side,
//! each in its own `<section id="system-NAME">`, with a "system: a · b" switch on top.

use std::path::PathBuf;

use super::content;
use super::doc::{href_kind, parse_inline, Block, Doc, Href, Inline, Table};
use super::results::Results;
use super::svg::{self, esc};
use super::view::CampaignView;
use super::Renderer;

/// The HTML site renderer.
pub struct Html;

const CSS: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1500px;padding:1rem 2rem;color:#1d2430;line-height:1.45;overflow-wrap:break-word}\
h1{font-size:1.5rem;margin:.6rem 0}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #d5dae1;padding-bottom:.2rem}h3{font-size:1.05rem;margin:1.4rem 0 .4rem}\
.scroll{overflow-x:auto;margin:.6rem 0}table{border-collapse:collapse;font-size:.88rem}th,td{border:1px solid #d5dae1;padding:.25rem .5rem;text-align:left;vertical-align:top}\
th{background:#eef1f5}tbody tr:nth-child(even){background:#f8f9fb}code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85em;background:#f1f3f6;padding:0 .2em;border-radius:3px}td code{white-space:nowrap}\
.crumb{color:#5b6575;font-size:.9rem}.systems{display:flex;gap:2rem;overflow-x:auto;align-items:flex-start}.systems>section{flex:1 1 0;min-width:640px}\
figure{margin:1.2rem 0;overflow-x:auto}figcaption{font-size:.85rem;color:#5b6575;margin-top:.3rem}\
svg.chart{display:block;font-family:inherit;background:#fff;width:100%;height:auto}svg.narrow{display:none}svg .ebar{stroke:#1d2430;stroke-width:1.2;fill:none}svg .grid{stroke:#e3e7ec;stroke-width:1}svg .axis{stroke:#8a94a3}svg .gline{stroke:#8a94a3;stroke-width:2}svg .leader{stroke:#8a94a3;stroke-width:.8}\
svg .tick{fill:#4a5260}svg .lbl{fill:#1d2430}svg .grp{font-weight:600;fill:#1d2430}svg .ct{font-weight:600;fill:#1d2430}\
@media (max-width:719.98px){body{padding:.5rem .75rem}h1{font-size:1.3rem}.systems{display:block}.systems>section{min-width:0}svg.wide{display:none}svg.narrow{display:block}table{font-size:.82rem}th,td{white-space:nowrap}td.long{white-space:normal;min-width:16rem}}";

/// Rewrite a report link for the site.
fn site_href(href: &str) -> String {
    match href.strip_suffix(".md") {
        Some(stem) => format!("{}.html", stem.replace("/reports/", "/site/")),
        None => href.to_string(),
    }
}

fn inline(s: &str) -> String {
    let mut o = String::new();
    write_inline(&parse_inline(s), &mut o);
    o
}

fn write_inline(parts: &[Inline], o: &mut String) {
    for p in parts {
        match p {
            Inline::Text(t) => o.push_str(&esc(t)),
            Inline::Code(c) => {
                o.push_str("<code>");
                o.push_str(&esc(c));
                o.push_str("</code>");
            }
            // The site links only to its own pages and records: a web address shows its
            // label, and a target no report may hold (`javascript:`, `data:`) too.
            Inline::Link { text, href } => match href_kind(href) {
                Href::Relative => {
                    o.push_str(&format!("<a href=\"{}\">", esc(&site_href(href))));
                    write_inline(text, o);
                    o.push_str("</a>");
                }
                Href::External | Href::Refused => write_inline(text, o),
            },
        }
    }
}

fn table(t: &Table, o: &mut String) {
    // wide tables scroll in their own box, never the page
    o.push_str("<div class=\"scroll\"><table><thead><tr>");
    for h in &t.head {
        o.push_str(&format!("<th>{}</th>", inline(h)));
    }
    o.push_str("</tr></thead><tbody>\n");
    for r in &t.rows {
        o.push_str("<tr>");
        for c in r {
            // prose cells may wrap on a phone; short figures stay on one line there
            let class = if c.chars().count() > 40 {
                " class=\"long\""
            } else {
                ""
            };
            o.push_str(&format!("<td{class}>{}</td>", inline(c)));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n");
}

/// The body of a document (no `<html>` wrapper).
pub fn body(doc: &Doc) -> String {
    let mut o = String::new();
    for (i, b) in doc.blocks.iter().enumerate() {
        match b {
            Block::Heading(l, t) => {
                let l = (*l).clamp(1, 6);
                o.push_str(&format!("<h{l}>{}</h{l}>\n", inline(t)));
            }
            Block::Para(t) => {
                // a paragraph opening a document is its breadcrumb
                if i == 0 {
                    o.push_str(&format!("<p class=\"crumb\">{}</p>\n", inline(t)));
                } else {
                    o.push_str(&format!("<p>{}</p>\n", inline(t)));
                }
            }
            Block::List(items) => {
                o.push_str("<ul>\n");
                for i in items {
                    o.push_str(&format!("<li>{}</li>\n", inline(i)));
                }
                o.push_str("</ul>\n");
            }
            Block::Table(t) => table(t, &mut o),
            Block::Chart { caption, svg } => {
                o.push_str(&format!(
                    "<figure>{svg}<figcaption>{}</figcaption></figure>\n",
                    inline(caption)
                ));
            }
            Block::SectionStart(id) => o.push_str(&format!("<section id=\"{}\">\n", esc(id))),
            Block::SectionEnd => o.push_str("</section>\n"),
        }
    }
    o
}

/// A complete page.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        esc(title)
    )
}

/// Both drawings of a chart in one figure (the CSS shows the one that fits the screen).
fn chart_block(caption: String, draw: impl Fn(svg::Layout) -> Option<String>) -> Option<Block> {
    let wide = draw(svg::Layout::Wide)?;
    let narrow = draw(svg::Layout::Narrow)?;
    Some(Block::Chart {
        caption,
        svg: wide + &narrow,
    })
}

fn charts(results: &Results, doc: &mut Doc) {
    let spread = svg::Spread::for_results(results);
    match chart_block(
        format!(
            "{} on {}, log scale; error bars: {}. Hover a bar for its figures.",
            spread.value(),
            results.system,
            spread.describe()
        ),
        |l| svg::cycles_chart(results, spread, l),
    ) {
        Some(b) => doc.blocks.push(b),
        None => doc.p("No operation was timed: no cycles chart."),
    }
    match chart_block(
        format!(
            "Public key + ciphertext bytes against decapsulation cycles on {}; hover a point \
             for its figures (a label that would overlap another is left out).",
            results.system
        ),
        |l| svg::size_scatter(results, spread, l),
    ) {
        Some(b) => doc.blocks.push(b),
        None => doc.p("No instance has both sizes and decapsulation timing: no scatter chart."),
    }
}

/// One system's column of the index (its campaign dates too when there are several: the
/// header above already gives this system's).
fn system_section(results: &Results, this: bool, several: bool) -> Doc {
    let mut d = Doc::default();
    d.blocks
        .push(Block::SectionStart(format!("system-{}", results.system)));
    d.h(2, format!("system {} ({})", results.system, results.arch));
    if let (true, Some(s), f) = (several, &results.started, &results.finished) {
        d.p(format!(
            "Campaign start / end (UTC): {} / {}.",
            super::format::utc(s),
            f.as_deref()
                .map(super::format::utc)
                .unwrap_or_else(|| "unknown".into())
        ));
    }
    d.table(if this {
        content::this_system_table(results)
    } else {
        content::other_system_table(results)
    });
    charts(results, &mut d);
    d.blocks.push(Block::SectionEnd);
    d
}

impl Renderer for Html {
    fn render_submission(&self, view: &CampaignView, submission: &str) -> Vec<(PathBuf, Vec<u8>)> {
        let Some(sub) = view.submission(submission) else {
            return Vec::new();
        };
        let mut doc = content::submission_doc(view, sub, "#appendix");
        let appendix = content::appendix_doc(view, sub, &format!("{}.md", sub.id));
        // the submission's own cycles chart, at the end of section 4
        let results = Results::from_view(view);
        let mine = Results {
            submissions: results
                .submissions
                .into_iter()
                .filter(|s| s.id == sub.id)
                .collect(),
            ..results
        };
        let spread = svg::Spread::for_results(&mine);
        let caption = format!(
            "{} of {}, log scale; error bars: {}.",
            spread.value(),
            sub.id,
            spread.describe()
        );
        if let Some(chart) = chart_block(caption, |l| svg::cycles_chart(&mine, spread, l)) {
            let at = doc
                .blocks
                .iter()
                .position(|b| matches!(b, Block::Heading(2, t) if t.starts_with("5.")))
                .unwrap_or(doc.blocks.len());
            doc.blocks.insert(at, chart);
        }
        // The appendix, collapsed: what a specialist opens, below what a reader needs.
        let html = format!(
            "{}<details id=\"appendix\">\n<summary>Appendix: distributions, single-call \
             samples, instruction counts, survey evidence, environment and the evidence \
             index</summary>\n{}</details>\n",
            body(&doc),
            body(&appendix)
        );
        vec![(
            PathBuf::from("site").join(format!("{}.html", sub.id)),
            page(&doc.title, &html).into_bytes(),
        )]
    }

    fn render_campaign(&self, view: &CampaignView, results: &Results) -> Vec<(PathBuf, Vec<u8>)> {
        let index = content::index_doc(view, results);
        // header: breadcrumb + title + intro paragraphs of the Markdown index
        let mut head = Doc::default();
        let mut rest = Doc::default();
        let mut in_head = true;
        for b in &index.blocks {
            if in_head && matches!(b, Block::Table(_)) {
                in_head = false;
                continue; // this system's table: replaced by the per-system sections
            }
            if in_head {
                head.blocks.push(b.clone());
            } else {
                rest.blocks.push(b.clone());
            }
        }
        let mut all: Vec<(&Results, bool)> =
            view.other_systems.iter().map(|r| (r, false)).collect();
        // the page opens on its own system; the others follow by name
        all.sort_by(|a, b| a.0.system.cmp(&b.0.system));
        all.insert(0, (results, true));
        let mut html = body(&head);
        if all.len() > 1 {
            let links: Vec<String> = all
                .iter()
                .map(|(r, _)| {
                    format!(
                        "<a href=\"#system-{}\">{}</a>",
                        esc(&r.system),
                        esc(&r.system)
                    )
                })
                .collect();
            html.push_str(&format!(
                "<nav class=\"switch\">system: {}</nav>\n",
                links.join(" · ")
            ));
        }
        html.push_str("<div class=\"systems\">\n");
        for (r, this) in &all {
            html.push_str(&body(&system_section(r, *this, all.len() > 1)));
        }
        html.push_str("</div>\n");
        html.push_str(&body(&rest));
        vec![(
            PathBuf::from("site").join("index.html"),
            page(&index.title, &html).into_bytes(),
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_rewritten_and_external_dropped() {
        assert_eq!(
            inline("[a](ml-kem.md) [`r`](../records/x.json) [w](https://example.org)"),
            "<a href=\"ml-kem.html\">a</a> <a href=\"../records/x.json\"><code>r</code></a> w"
        );
        assert_eq!(
            site_href("../../arm_1/reports/x.md"),
            "../../arm_1/site/x.html"
        );
        assert_eq!(inline("<b>"), "&lt;b&gt;");
        assert_eq!(
            inline("[a](javascript:alert(1)) [b](data:text/html,x) \x1b[31m"),
            "a) b \\x1b[31m"
        );
    }
}
