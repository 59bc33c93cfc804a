//! Reports, rendered from records only.
//!
//! [`CampaignView::load`] reads `campaign.json` and every step record of a system's output
//! folder; [`Results`] condenses it into the machine-readable figures. Each output format
//! is one file behind the [`Renderer`] trait: [`markdown`] (`reports/<sub>.md`,
//! `reports/index.md`), [`csv`] (`reports/results.csv`), [`json`] (`reports/results.json`)
//! and [`html`] (`site/index.html`, `site/<sub>.html`, with [`svg`] charts). The section
//! content shared by Markdown and HTML is built once in [`content`] as a [`doc::Doc`].
//! [`compare`] compares two systems' folders, [`history`] a series of campaigns.
//! [`integrity`] decides which operations' figures contradict each other and are not
//! trusted.
//!
//! Rendering is deterministic: the same records give byte-identical files (no clock reads,
//! ordered maps, fixed number formats).

pub mod compare;
pub mod content;
pub mod csv;
pub mod doc;
pub mod format;
pub mod history;
pub mod html;
pub mod integrity;
pub mod json;
pub mod markdown;
pub mod results;
pub mod schema;
pub mod svg;
pub mod view;

use std::io;
use std::path::{Path, PathBuf};

pub use compare::{compare, compare_csv, compare_markdown, compare_with, Comparison};
pub use history::{history, history_csv, history_markdown, History};
pub use schema::{Results, RESULTS_SCHEMA, RESULTS_SCHEMA_DOC};
pub use view::CampaignView;

/// One output format. Paths returned are relative to the system's output folder.
pub trait Renderer {
    /// Files for one submission (none by default).
    fn render_submission(
        &self,
        _view: &CampaignView,
        _submission: &str,
    ) -> Vec<(PathBuf, Vec<u8>)> {
        Vec::new()
    }

    /// Campaign-wide files (none by default).
    fn render_campaign(&self, _view: &CampaignView, _results: &Results) -> Vec<(PathBuf, Vec<u8>)> {
        Vec::new()
    }
}

fn renderers() -> [&'static dyn Renderer; 4] {
    [&markdown::Markdown, &csv::Csv, &json::Json, &html::Html]
}

/// `reports/<sub>.md` and `site/<sub>.html`; nothing for an unknown submission.
pub fn render_submission(view: &CampaignView, submission: &str) -> Vec<(PathBuf, Vec<u8>)> {
    renderers()
        .iter()
        .flat_map(|r| r.render_submission(view, submission))
        .collect()
}

/// `reports/index.md`, `reports/results.csv`, `reports/results.json`, `site/index.html`.
pub fn render_campaign(view: &CampaignView) -> Vec<(PathBuf, Vec<u8>)> {
    let results = Results::from_view(view);
    renderers()
        .iter()
        .flat_map(|r| r.render_campaign(view, &results))
        .collect()
}

/// Every file of every submission plus the campaign files.
pub fn render_all(view: &CampaignView) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = view
        .submissions
        .iter()
        .flat_map(|s| render_submission(view, &s.id))
        .collect();
    files.extend(render_campaign(view));
    files
}

/// Write rendered files under `out_dir`, each atomically. Paths must be relative and stay
/// inside `out_dir`.
pub fn write_all(out_dir: &Path, files: &[(PathBuf, Vec<u8>)]) -> io::Result<()> {
    for (rel, bytes) in files {
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "report path `{}` is not a plain relative path",
                    rel.display()
                ),
            ));
        }
        crate::record::write_atomic(&out_dir.join(rel), bytes)?;
    }
    Ok(())
}
