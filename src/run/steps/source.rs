//! `source`: find a submission's code. A folder is checked; a crate is fetched with cargo
//! into a throwaway manifest under the output folder (checksum-verified by cargo, reused
//! offline once cached) and located with `cargo metadata`.

use std::path::{Path, PathBuf};
use std::process::Command;

use std::collections::BTreeMap;

use super::{Done, KindSpec, Step};
use crate::graph::Node;
use crate::model::{Campaign, Source, StepSpec};
use crate::record::{SourceData, StepData};
use crate::run::keys::{json, Facts};

/// The `source` kind: per submission.
pub struct Kind;

impl KindSpec for Kind {
    fn inputs(
        &self,
        c: &Campaign,
        node: &Node,
        _spec: &StepSpec,
        _facts: &Facts,
        m: &mut BTreeMap<String, String>,
    ) {
        m.insert(
            "source".into(),
            json(&c.submissions[node.submission].source),
        );
    }

    fn run(&self, step: &mut Step) -> Done {
        run(step)
    }
}

/// Why the `source` step found no code.
#[derive(Debug, thiserror::Error)]
enum SourceError {
    /// The `path` folder is not there.
    #[error("source folder {} does not exist", .0.display())]
    NoFolder(PathBuf),
    /// The crate has no `root` folder.
    #[error("crate `{name}` {version} has no folder `{root}` (looked in {})", dir.display())]
    NoRoot {
        /// The crate.
        name: String,
        /// Its version.
        version: String,
        /// The folder asked for.
        root: String,
        /// The crate's folder.
        dir: PathBuf,
    },
    /// The archive does not hash to its pin, or cannot be unpacked.
    #[error("{0}")]
    Archive(String),
    /// The archive has no `root` folder.
    #[error("archive {} has no folder `{root}`", archive.display())]
    NoArchiveRoot {
        /// The archive.
        archive: PathBuf,
        /// The folder asked for.
        root: String,
    },
    /// The crate cannot be fetched.
    #[error("could not fetch crate `{name}` {version}: {source}")]
    Fetch {
        /// The crate.
        name: String,
        /// Its version.
        version: String,
        /// Why.
        source: FetchError,
    },
}

fn run(step: &mut Step) -> Done {
    match locate(step) {
        Ok(data) => Done::ok(StepData::Source(data)),
        Err(e) => Done::failed(e.to_string()),
    }
}

fn locate(step: &mut Step) -> Result<SourceData, SourceError> {
    match &step.submission().source {
        Source::Path { path } => {
            if path.is_dir() {
                Ok(SourceData {
                    root: path.clone(),
                    origin: "path".to_string(),
                    checksum: None,
                })
            } else {
                Err(SourceError::NoFolder(path.clone()))
            }
        }
        Source::Archive { path, sha256, root } => {
            let dir = unpack_archive(path, sha256, &step.ctx.out.join("cache").join("archives"))
                .map_err(SourceError::Archive)?;
            let root_dir = dir.join(root);
            if !root_dir.is_dir() {
                return Err(SourceError::NoArchiveRoot {
                    archive: path.clone(),
                    root: root.clone(),
                });
            }
            Ok(SourceData {
                root: root_dir,
                origin: format!(
                    "archive {} (sha256 {sha256} verified; every entry checked when unpacked)",
                    path.display()
                ),
                checksum: Some(sha256.clone()),
            })
        }
        Source::Crate {
            name,
            version,
            root,
        } => match fetch(step, name, version) {
            Ok((dir, checksum)) => {
                let root_dir = dir.join(root);
                if !root_dir.is_dir() {
                    return Err(SourceError::NoRoot {
                        name: name.clone(),
                        version: version.clone(),
                        root: root.clone(),
                        dir,
                    });
                }
                Ok(SourceData {
                    root: root_dir,
                    origin: format!("crate {name} {version} (checksum verified by cargo)"),
                    checksum,
                })
            }
            Err(source) => Err(SourceError::Fetch {
                name: name.clone(),
                version: version.clone(),
                source,
            }),
        },
    }
}

/// Why a crate cannot be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// A name and version that would not make a plain folder name.
    #[error("refused: `{0}` is not a plain folder name")]
    Refused(String),
    /// The fetch project's folder cannot be made.
    #[error("{}: {source}", dir.display())]
    Folder {
        /// The folder.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file of the fetch project, or the log, cannot be written.
    #[error("{0}")]
    File(std::io::Error),
    /// cargo cannot be started.
    #[error("cannot run cargo: {0}")]
    Cargo(std::io::Error),
    /// cargo's metadata is not JSON.
    #[error("cargo metadata: {0}")]
    Metadata(serde_json::Error),
    /// The metadata lacks the crate or its folder.
    #[error("{0}")]
    NotListed(&'static str),
    /// cargo failed, offline and online (the last lines of its stderr).
    #[error("{0}")]
    Failed(String),
    /// As [`FetchError::Failed`], naming the crate (for callers without a step record).
    #[error("could not fetch crate `{name}` {version}: {tail}")]
    NotFetched {
        /// The crate.
        name: String,
        /// Its version.
        version: String,
        /// The last lines of cargo's stderr.
        tail: String,
    },
}

/// Write a throwaway cargo project under `scratch` whose only dependency is `name` at
/// exactly `version`; returns its manifest.
fn fetch_project(scratch: &Path, name: &str, version: &str) -> Result<PathBuf, FetchError> {
    let leaf = format!("{name}-{version}");
    if !super::stays_inside(Path::new(&leaf)) || leaf.contains('/') {
        return Err(FetchError::Refused(leaf));
    }
    let dir = scratch.join(leaf);
    std::fs::create_dir_all(dir.join("src")).map_err(|source| FetchError::Folder {
        dir: dir.clone(),
        source,
    })?;
    let manifest = dir.join("Cargo.toml");
    let text = format!(
        "# Written by ngcc-pipe to fetch `{name}` {version}; safe to delete.\n\
         [package]\nname = \"ngcc-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [dependencies]\n{name} = \"={version}\"\n\n[workspace]\n"
    );
    std::fs::write(&manifest, text).map_err(FetchError::File)?;
    std::fs::write(dir.join("src/lib.rs"), "").map_err(FetchError::File)?;
    Ok(manifest)
}

/// `cargo metadata` on a fetch project: downloads (checksum-verified) what is missing.
fn metadata_command(manifest: &Path, offline: bool) -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut cmd = Command::new(cargo);
    cmd.args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(manifest);
    if offline {
        cmd.arg("--offline");
    }
    cmd
}

/// The unpacked folder of `name` `version` from `cargo metadata` output.
fn crate_dir(metadata: &[u8], name: &str, version: &str) -> Result<PathBuf, FetchError> {
    let meta: serde_json::Value = serde_json::from_slice(metadata).map_err(FetchError::Metadata)?;
    let pkg = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name && p["version"] == version)
        .ok_or(FetchError::NotListed(
            "cargo metadata does not list the crate",
        ))?;
    let path = pkg["manifest_path"]
        .as_str()
        .ok_or(FetchError::NotListed("no manifest_path"))?;
    Path::new(path)
        .parent()
        .map(Path::to_path_buf)
        .ok_or(FetchError::NotListed("manifest_path has no folder"))
}

/// Fetch `name` at exactly `version` with cargo (offline first, then from the registry)
/// and return its unpacked folder. For tests and tools; the `source` step does the same
/// with logging.
pub fn fetch_crate(scratch: &Path, name: &str, version: &str) -> Result<PathBuf, FetchError> {
    let manifest = fetch_project(scratch, name, version)?;
    let mut last_err = String::new();
    for offline in [true, false] {
        let out = metadata_command(&manifest, offline)
            .output()
            .map_err(FetchError::Cargo)?;
        if out.status.success() {
            return crate_dir(&out.stdout, name, version);
        }
        last_err = crate::run::exec::tail(&out.stderr, 3);
    }
    Err(FetchError::NotFetched {
        name: name.to_string(),
        version: version.to_string(),
        tail: last_err,
    })
}

/// Unpacks the archive at `path` once into `cache/<digest prefix>` after checking that it
/// hashes to `sha256`, and returns that folder (reused when already unpacked: a folder is
/// moved into place only when every entry passed).
pub fn unpack_archive(path: &Path, sha256: &str, cache: &Path) -> Result<PathBuf, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let actual = crate::run::keys::sha256_hex(&bytes);
    if actual != sha256 {
        return Err(format!(
            "archive {} has SHA-256 {actual}, the manifest pins {sha256}: the package changed",
            path.display()
        ));
    }
    let dest = cache.join(&sha256[..16]);
    if dest.is_dir() {
        return Ok(dest);
    }
    std::fs::create_dir_all(cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    match crate::archive::extract(path, &dest) {
        Ok(()) => Ok(dest),
        // Unpacked meanwhile by another step of this run.
        Err(_) if dest.is_dir() => Ok(dest),
        Err(e) => Err(e.to_string()),
    }
}

/// The folder a submission's instance `dir`s are relative to: the `path` folder, or the
/// crate fetched like the `source` step does (under `scratch`) joined with its `root`.
/// For `check --deep`, whose diagnostics take the text.
pub fn resolve_root(source: &Source, scratch: &Path) -> Result<PathBuf, String> {
    match source {
        Source::Path { path } => Ok(path.clone()),
        Source::Archive { path, sha256, root } => {
            let dir = unpack_archive(path, sha256, &scratch.join("archives"))?.join(root);
            if dir.is_dir() {
                Ok(dir)
            } else {
                Err(format!("archive {} has no folder `{root}`", path.display()))
            }
        }
        Source::Crate {
            name,
            version,
            root,
        } => {
            let dir = fetch_crate(scratch, name, version)
                .map_err(|e| e.to_string())?
                .join(root);
            if dir.is_dir() {
                Ok(dir)
            } else {
                Err(format!(
                    "crate `{name}` {version} has no folder `{root}` ({})",
                    dir.display()
                ))
            }
        }
    }
}

/// Fetch `name` at exactly `version`; returns its unpacked folder and its checksum.
fn fetch(
    step: &mut Step,
    name: &str,
    version: &str,
) -> Result<(PathBuf, Option<String>), FetchError> {
    let manifest = fetch_project(&step.ctx.out.join("cache").join("crates"), name, version)?;
    let mut log = step
        .open_log(Path::new("logs").join(step.slug()).join("source.log"))
        .map_err(FetchError::File)?;
    let mut last_err = String::new();
    for offline in [true, false] {
        let out = step
            .exec(&mut metadata_command(&manifest, offline), &mut log)
            .map_err(FetchError::Cargo)?;
        if out.exit.success() {
            let lock = manifest.with_file_name("Cargo.lock");
            return Ok((
                crate_dir(&out.stdout, name, version)?,
                lock_checksum(&lock, name, version),
            ));
        }
        last_err = crate::run::exec::tail(&out.stderr, 3);
    }
    Err(FetchError::Failed(last_err))
}

/// The checksum Cargo.lock records for `name` `version`.
fn lock_checksum(lock: &Path, name: &str, version: &str) -> Option<String> {
    let text = std::fs::read_to_string(lock).ok()?;
    let block = text.split("[[package]]").find(|b| {
        b.contains(&format!("name = \"{name}\"")) && b.contains(&format!("version = \"{version}\""))
    })?;
    block.lines().find_map(|l| {
        l.strip_prefix("checksum = \"")?
            .strip_suffix('"')
            .map(str::to_string)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_checksum_from_lock() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("Cargo.lock");
        std::fs::write(
            &lock,
            "[[package]]\nname = \"a\"\nversion = \"0.1.1\"\nsource = \"x\"\nchecksum = \"abc\"\n\n[[package]]\nname = \"b\"\nversion = \"1.0.0\"\n",
        )
        .unwrap();
        assert_eq!(lock_checksum(&lock, "a", "0.1.1").as_deref(), Some("abc"));
        assert_eq!(lock_checksum(&lock, "b", "1.0.0"), None);
    }
}
