//! Which files an instance compiles: every `.c`, `.S` and `.s` directly in its folder minus
//! `exclude`, plus its extra sources; under `api "nist"` also minus the files that define a
//! function the harness provides (`main`, `randombytes`, `randombytes_init`: the package's
//! `PQCgenKAT_kem.c` and `rng.c`), which [`instance_files`] names. `build` compiles them,
//! `check --deep` lists them and `survey` leaves the others out of its evidence. Every file
//! must lie inside the source root once links are resolved.

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
    /// A source that resolves (through a link) outside the source root.
    #[error("source {} lies outside the source root {} once links are resolved", file.display(), root.display())]
    Outside {
        /// The file.
        file: PathBuf,
        /// The root.
        root: PathBuf,
    },
}

/// A file of an instance's folder that is not compiled because it defines functions the
/// harness provides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// The file.
    pub file: PathBuf,
    /// The functions it defines (`main`, `randombytes`, `randombytes_init`).
    pub defines: Vec<String>,
}

/// What an instance compiles, and what it leaves out.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// Compiled, in order.
    pub files: Vec<PathBuf>,
    /// Left out because they define a harness function.
    pub left_out: Vec<LeftOut>,
}

/// The files `inst` compiles under `api`: [`instance_sources`] minus the files of its
/// folder that define one of `api`'s harness functions. Every file must resolve inside
/// `root`.
pub fn instance_files(
    root: &Path,
    inst: &crate::model::Instance,
    api: crate::model::Api,
) -> Result<Listing, SourcesError> {
    let all = instance_sources(root, &inst.dir, &inst.exclude, &inst.extra_sources)?;
    let real_root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let harness = api.harness_functions();
    let inst_dir = root.join(&inst.dir);
    let mut out = Listing::default();
    for f in all {
        let real = f.canonicalize().unwrap_or_else(|_| f.clone());
        if !real.starts_with(&real_root) {
            return Err(SourcesError::Outside {
                file: f,
                root: root.to_path_buf(),
            });
        }
        // Only the folder's own files: an extra source is named on purpose.
        if !harness.is_empty() && f.parent() == Some(inst_dir.as_path()) {
            let text = std::fs::read(&f).unwrap_or_default();
            let defines =
                crate::csource::defined_functions(&String::from_utf8_lossy(&text), harness);
            if !defines.is_empty() {
                out.left_out.push(LeftOut {
                    file: f,
                    defines: defines.into_iter().map(str::to_string).collect(),
                });
                continue;
            }
        }
        out.files.push(f);
    }
    if out.files.is_empty() {
        return Err(SourcesError::Empty(inst_dir));
    }
    Ok(out)
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
