//! Which files an instance compiles: every `.c`, `.S` and `.s` directly in its folder minus
//! `exclude`, plus its extra sources. `build` compiles them and `check --deep` lists them.

use std::io;
use std::path::{Path, PathBuf};

use globset::Glob;

/// Why an instance's source files cannot be listed.
#[derive(Debug, thiserror::Error)]
pub enum SourcesError {
    /// An `exclude` pattern that is not a glob.
    #[error("bad exclude `{pattern}`: {source}")]
    BadExclude {
        /// The pattern.
        pattern: String,
        /// Why.
        source: globset::Error,
    },
    /// The instance folder cannot be read.
    #[error("cannot read instance folder {}: {source}", dir.display())]
    ReadDir {
        /// The folder.
        dir: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// An extra source that is not there.
    #[error("extra source {} does not exist", .0.display())]
    MissingExtra(PathBuf),
    /// Nothing to compile.
    #[error("no .c/.S/.s sources in {}", .0.display())]
    Empty(PathBuf),
}

/// Source files compiled for an instance: its folder's `.c`/`.S`/`.s` minus `exclude`,
/// plus its extra sources.
pub fn instance_sources(
    root: &Path,
    dir: &str,
    exclude: &[String],
    extra: &[String],
) -> Result<Vec<PathBuf>, SourcesError> {
    let inst_dir = root.join(dir);
    let excl = exclude
        .iter()
        .map(|p| {
            Glob::new(p)
                .map(|g| g.compile_matcher())
                .map_err(|source| SourcesError::BadExclude {
                    pattern: p.clone(),
                    source,
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let entries = std::fs::read_dir(&inst_dir).map_err(|source| SourcesError::ReadDir {
        dir: inst_dir.clone(),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("c" | "S" | "s")
            )
        })
        .filter(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            !excl.iter().any(|m| m.is_match(&name))
        })
        .collect();
    files.sort();
    for e in extra {
        let p = root.join(e);
        if !p.is_file() {
            return Err(SourcesError::MissingExtra(p));
        }
        files.push(p);
    }
    if files.is_empty() {
        return Err(SourcesError::Empty(inst_dir));
    }
    Ok(files)
}
