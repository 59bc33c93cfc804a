//! `ngcc-pipe report`: re-render every report from the records, without measuring again.

use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::model::Campaign;

pub(super) fn exec(pipeline: &Path, outputs: Option<&Path>) -> Result<(), Error> {
    let c = super::load(pipeline, outputs)?;
    let out = c.outputs.clone();
    let files = render(&c, &out)?;
    let mut text = String::new();
    for f in files {
        text.push_str(&format!("{}\n", out.join(f).display()));
    }
    super::print(&text)
}

/// Render every report from the records in `out` with the renderers' own
/// [`crate::report::render_all`] and write them; returns the files written (relative to
/// `out`). Also used by `run` once the campaign's end is known.
pub(super) fn render(c: &Campaign, out: &Path) -> Result<Vec<PathBuf>, Error> {
    let view = crate::report::CampaignView::load(c, out).map_err(Error::io(format_args!(
        "reading records in {}",
        out.display()
    )))?;
    let files = crate::report::render_all(&view);
    crate::report::write_all(out, &files).map_err(Error::io(format_args!(
        "writing reports in {}",
        out.display()
    )))?;
    Ok(files.into_iter().map(|(p, _)| p).collect())
}
