//! `source`: find a submission's code. A folder is checked; a crate is fetched with cargo
//! into a throwaway manifest under the output folder (checksum-verified by cargo, reused
//! offline once cached) and located with `cargo metadata`.

use std::path::{Path, PathBuf};
use std::process::Command;

use std::collections::BTreeMap;

use super::{Done, KindSpec, Step};
use crate::graph::Node;
use crate::model::{Campaign, Source, StepScope, StepSpec};
use crate::record::{SourceData, StepData};
use crate::run::keys::{json, Facts};

/// The `source` kind: per submission.
pub struct Kind;

impl KindSpec for Kind {
    fn name(&self) -> &'static str {
        "source"
    }

    fn scope(&self) -> StepScope {
        StepScope::Submission
    }

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

fn run(step: &mut Step) -> Done {
    match &step.submission().source {
        Source::Path { path } => {
            if path.is_dir() {
                Done::ok(StepData::Source(SourceData {
                    root: path.clone(),
                    origin: "path".to_string(),
                    checksum: None,
                }))
            } else {
                Done::failed(format!("source folder {} does not exist", path.display()))
            }
        }
        Source::Crate {
            name,
            version,
            root,
        } => match fetch(step, name, version) {
            Ok((dir, checksum)) => {
                let root_dir = dir.join(root);
                if !root_dir.is_dir() {
                    return Done::failed(format!(
                        "crate `{name}` {version} has no folder `{root}` (looked in {})",
                        dir.display()
                    ));
                }
                Done::ok(StepData::Source(SourceData {
                    root: root_dir,
                    origin: format!("crate {name} {version} (checksum verified by cargo)"),
                    checksum,
                }))
            }
            Err(e) => Done::failed(format!("could not fetch crate `{name}` {version}: {e}")),
        },
    }
}

/// Write a throwaway cargo project under `scratch` whose only dependency is `name` at
/// exactly `version`; returns its manifest.
fn fetch_project(scratch: &Path, name: &str, version: &str) -> Result<PathBuf, String> {
    let leaf = format!("{name}-{version}");
    if !super::stays_inside(Path::new(&leaf)) || leaf.contains('/') {
        return Err(format!("refused: `{leaf}` is not a plain folder name"));
    }
    let dir = scratch.join(leaf);
    std::fs::create_dir_all(dir.join("src")).map_err(|e| format!("{}: {e}", dir.display()))?;
    let manifest = dir.join("Cargo.toml");
    let text = format!(
        "# Written by ngcc-pipe to fetch `{name}` {version}; safe to delete.\n\
         [package]\nname = \"ngcc-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [dependencies]\n{name} = \"={version}\"\n\n[workspace]\n"
    );
    std::fs::write(&manifest, text).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("src/lib.rs"), "").map_err(|e| e.to_string())?;
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
fn crate_dir(metadata: &[u8], name: &str, version: &str) -> Result<PathBuf, String> {
    let meta: serde_json::Value =
        serde_json::from_slice(metadata).map_err(|e| format!("cargo metadata: {e}"))?;
    let pkg = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name && p["version"] == version)
        .ok_or("cargo metadata does not list the crate")?;
    let path = pkg["manifest_path"].as_str().ok_or("no manifest_path")?;
    Path::new(path)
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| "manifest_path has no folder".to_string())
}

/// Fetch `name` at exactly `version` with cargo (offline first, then from the registry)
/// and return its unpacked folder. For tests and tools; the `source` step does the same
/// with logging.
pub fn fetch_crate(scratch: &Path, name: &str, version: &str) -> Result<PathBuf, String> {
    let manifest = fetch_project(scratch, name, version)?;
    let mut last_err = String::new();
    for offline in [true, false] {
        let out = metadata_command(&manifest, offline)
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if out.status.success() {
            return crate_dir(&out.stdout, name, version);
        }
        last_err = crate::run::exec::tail(&out.stderr, 3);
    }
    Err(format!(
        "could not fetch crate `{name}` {version}: {last_err}"
    ))
}

/// The folder a submission's instance `dir`s are relative to: the `path` folder, or the
/// crate fetched like the `source` step does (under `scratch`) joined with its `root`.
/// For `check --deep`.
pub fn resolve_root(source: &Source, scratch: &Path) -> Result<PathBuf, String> {
    match source {
        Source::Path { path } => Ok(path.clone()),
        Source::Crate {
            name,
            version,
            root,
        } => {
            let dir = fetch_crate(scratch, name, version)?.join(root);
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
fn fetch(step: &mut Step, name: &str, version: &str) -> Result<(PathBuf, Option<String>), String> {
    let manifest = fetch_project(&step.ctx.out.join("cache").join("crates"), name, version)?;
    let mut log = step
        .open_log(Path::new("logs").join(step.slug()).join("source.log"))
        .map_err(|e| e.to_string())?;
    let mut last_err = String::new();
    for offline in [true, false] {
        let out = step
            .exec(&mut metadata_command(&manifest, offline), &mut log)
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if out.exit.success() {
            let lock = manifest.with_file_name("Cargo.lock");
            return Ok((
                crate_dir(&out.stdout, name, version)?,
                lock_checksum(&lock, name, version),
            ));
        }
        last_err = crate::run::exec::tail(&out.stderr, 3);
    }
    Err(last_err)
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
