//! The campaign DSL: KDL v2 pipeline and manifest files lowered into [`crate::model`].
//!
//! Two stages, as in `just`: the `kdl` crate gives nodes with spans, then hand-written
//! lowering (`pipeline`, `manifest`) validates them into the model, expanding each
//! manifest's `matrix` over its `instance` templates. Every problem in every file is
//! collected as a miette [`Diagnostic`] (file:line:col, source line, caret, lower-case
//! message with names in backticks, "did you mean" help), so `check` shows them all at once.
//! File access goes through [`SourceFs`], so tests and benchmarks can load campaigns held
//! in memory ([`MemFs`]).

#![deny(missing_docs)]

mod best_cell;
mod category;
mod cells;
mod cflags;
mod compilers;
mod cpu_flags;
pub use cpu_flags::cpuinfo_name_of_gcc_flag;
mod deep;
mod deep_link;
mod diag;
mod duration;
mod fs;
mod load;
mod loader;
mod manifest;
pub(crate) use manifest::{id_problem, library_problem};
mod pipeline;
mod reader;
mod step;
mod template;
mod values;

use std::path::Path;

pub use deep::{deep_check, DeepReport};
pub use deep_link::{CpuGap, CpuNeed, LinkOutcome, Linker, NoLinker, Prediction, Unresolved};
pub use diag::{Diagnostic, Diagnostics, Location};
pub use duration::{format_duration, parse_duration};
pub use fs::{find_program, MemFs, RealFs, SourceFs};
pub use template::{
    expand_template, parse_template, submitted_kat_path, Filter, Piece, Template, TemplateError,
};

use crate::model::Campaign;

/// Loads a pipeline file and every manifest its `submissions` globs match, from disk.
/// Relative paths are taken from the working directory; all problems come back together.
pub fn load_campaign(pipeline: &Path) -> Result<Campaign, Diagnostics> {
    load_campaign_with(pipeline, &RealFs::new())
}

/// Like [`load_campaign`], reading through `fs` (e.g. a [`MemFs`] for tests and benchmarks).
pub fn load_campaign_with(pipeline: &Path, fs: &dyn SourceFs) -> Result<Campaign, Diagnostics> {
    load::load(fs, pipeline)
}

/// Like [`check_campaign_with`], from disk.
pub fn check_campaign(pipeline: &Path) -> (Result<Campaign, Diagnostics>, Diagnostics) {
    load::load_with_notes(&RealFs::new(), pipeline)
}

/// Like [`load_campaign_with`], also returning the notes `check` shows (instances with no
/// expected KAT hash, ...): things worth knowing that do not stop a run.
pub fn check_campaign_with(
    pipeline: &Path,
    fs: &dyn SourceFs,
) -> (Result<Campaign, Diagnostics>, Diagnostics) {
    load::load_with_notes(fs, pipeline)
}
