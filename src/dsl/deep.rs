//! `check --deep`: what only the fetched sources can tell. Per instance: its `dir` exists
//! in the source, its `api.h` defines the `CRYPTO_*` sizes under the declared namespace
//! (else the namespace it does use is named), and the `.c`/`.s`/`.S` files a build would
//! compile are listed. Problems point at the manifest's `dir=` or `namespace=` value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use miette::SourceSpan;

use super::diag::{Diagnostic, Diagnostics, SourceFile};
use super::fs::SourceFs;
use crate::model::{Campaign, Pos};

/// What `check --deep` found: problems (errors), and per instance the files a build
/// compiles (`ml-kem/ML-KEM-512-clean: cbd.c indcpa.c ...`).
#[derive(Debug, Default)]
pub struct DeepReport {
    /// Errors, at the manifest lines that cause them.
    pub problems: Diagnostics,
    /// One line per instance: `<submission>/<instance>: <files>`.
    pub listing: Vec<String>,
}

/// Checks every instance of `campaign` against its submission's source root (`roots`:
/// submission id -> folder, or why it could not be fetched).
pub fn deep_check(
    campaign: &Campaign,
    roots: &BTreeMap<String, Result<PathBuf, String>>,
    fs: &dyn SourceFs,
) -> DeepReport {
    let mut problems = Vec::new();
    let mut listing = Vec::new();
    for (n, sub) in campaign.submissions.iter().enumerate() {
        let Ok(text) = fs.read_to_string(&sub.manifest_path) else {
            continue;
        };
        let file = SourceFile::new(
            n,
            sub.manifest_path.clone(),
            fs.display(&sub.manifest_path),
            text,
        );
        let at = |p: &Pos| SourceSpan::new(p.offset.into(), p.len);
        let root = match roots.get(&sub.id) {
            Some(Ok(r)) => r,
            Some(Err(e)) => {
                problems.push(
                    Diagnostic::new(&file, format!("source of `{}` not available: {e}", sub.id))
                        .label(SourceSpan::new(0.into(), 0), "this submission"),
                );
                continue;
            }
            None => continue,
        };
        for inst in &sub.instances {
            let o = &inst.origin;
            let dir = root.join(&inst.dir);
            if !dir.is_dir() {
                problems.push(
                    Diagnostic::new(
                        &file,
                        format!(
                            "instance `{}`: folder `{}` does not exist in the source ({})",
                            inst.id,
                            inst.dir,
                            dir.display()
                        ),
                    )
                    .label(at(&o.dir), "no such folder")
                    .help(folders_hint(&dir)),
                );
                continue;
            }
            let api_h = dir.join("api.h");
            match std::fs::read_to_string(&api_h) {
                Err(e) => problems.push(
                    Diagnostic::new(
                        &file,
                        format!(
                            "instance `{}`: cannot read {}: {e}",
                            inst.id,
                            api_h.display()
                        ),
                    )
                    .label(at(&o.dir), "this folder"),
                ),
                Ok(text) => {
                    if let Err(e) = kem_native::api::parse_api_h(&text, &inst.namespace) {
                        let used = namespaces_in(&text);
                        let msg = if used.is_empty() {
                            format!(
                                "namespace `{}` not found in {}: {e}",
                                inst.namespace,
                                api_h.display()
                            )
                        } else {
                            format!(
                                "namespace `{}` not found in {}; it uses {}",
                                inst.namespace,
                                api_h.display(),
                                used.iter()
                                    .map(|u| format!("`{u}`"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )
                        };
                        problems.push(
                            Diagnostic::new(&file, msg)
                                .label(at(&o.namespace), "declared here")
                                .help("the namespace is the prefix of `CRYPTO_SECRETKEYBYTES` and the other `CRYPTO_*` macros in api.h"),
                        );
                    }
                }
            }
            match crate::sources::instance_sources(
                root,
                &inst.dir,
                &inst.exclude,
                &inst.extra_sources,
            ) {
                Ok(files) => {
                    let names: Vec<String> = files
                        .iter()
                        .map(|f| {
                            f.strip_prefix(&dir)
                                .or_else(|_| f.strip_prefix(root))
                                .unwrap_or(f)
                                .display()
                                .to_string()
                        })
                        .collect();
                    listing.push(format!("{}/{}: {}", sub.id, inst.id, names.join(" ")));
                }
                Err(e) => problems.push(
                    Diagnostic::new(&file, format!("instance `{}`: {e}", inst.id))
                        .label(at(&o.instance), "this instance"),
                ),
            }
        }
    }
    DeepReport {
        problems: Diagnostics::new(problems),
        listing,
    }
}

/// The prefixes api.h gives `CRYPTO_SECRETKEYBYTES` (`PQCLEAN_MLKEM512_CLEAN_`).
fn namespaces_in(api_h: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in api_h.lines() {
        let mut words = line.split_whitespace();
        let (Some(d), Some(name)) = (words.next(), words.next()) else {
            continue;
        };
        if d == "#define" {
            if let Some(prefix) = name.strip_suffix("CRYPTO_SECRETKEYBYTES") {
                if !out.iter().any(|p| p == prefix) {
                    out.push(prefix.to_string());
                }
            }
        }
    }
    out
}

/// "its parent holds: a, b, c" for a folder that does not exist.
fn folders_hint(dir: &Path) -> String {
    let parent = dir.parent().unwrap_or(dir);
    let mut names: Vec<String> = std::fs::read_dir(parent)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    if names.is_empty() {
        format!("{} does not exist either", parent.display())
    } else {
        names.truncate(20);
        format!("{} holds: {}", parent.display(), names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_namespace_api_h_uses() {
        let h = "#define PQCLEAN_X_CLEAN_CRYPTO_SECRETKEYBYTES 1\n#define PQCLEAN_X_CLEAN_CRYPTO_BYTES 2\n";
        assert_eq!(namespaces_in(h), ["PQCLEAN_X_CLEAN_"]);
    }
}
