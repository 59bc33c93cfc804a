//! Reading a NIST-round package: its implementations (`<Kind>_Implementation/crypto_kem/
//! <param>/`), each parameter set's `api.h` (sizes and `CRYPTO_ALGNAME`, evaluated by the
//! compiler when api.h defines them through a params header), the `-m` options and
//! libraries of its Makefile or CMakeLists.txt, the libraries its compiled sources include
//! headers of, and the files the harness leaves out.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kem_native::output::ApiSizes;

use crate::model::Api;

/// One parameter set of one implementation.
#[derive(Debug, Clone)]
pub struct Param {
    /// The folder name under `crypto_kem/` (`ml-kem-512`).
    pub name: String,
    /// Relative to the package root (`Reference_Implementation/crypto_kem/ml-kem-512`).
    pub dir: String,
    pub api: ApiSizes,
    /// `-m` options of the build file (`-mavx2`), in order.
    pub cflags: Vec<String>,
    /// The build file these came from, relative to the package root.
    pub build_file: Option<String>,
    /// Libraries the build file links (`-lcrypto`, `OpenSSL::Crypto`).
    pub build_libs: Vec<String>,
    /// Libraries the compiled sources need: library -> "`aes.c` includes <openssl/evp.h>".
    pub source_libs: Vec<(String, String)>,
    /// Files left out (they define `main`, `randombytes`, `randombytes_init`).
    pub left_out: Vec<(String, Vec<String>)>,
    /// `#define randombytes <other>` in a header of the folder.
    pub drng_rename: Option<String>,
}

/// One implementation: `Reference` for `Reference_Implementation/`, or one of
/// `Additional_Implementations/` (`avx2` for `Additional_Implementations/avx2/`).
#[derive(Debug, Clone)]
pub struct Implementation {
    pub kind: String,
    /// The folder that holds its `crypto_kem/` (`Reference_Implementation`,
    /// `Additional_Implementations/avx2`).
    pub tree: String,
    /// Whether it comes from `Additional_Implementations/` (its folder is not
    /// `<kind>_Implementation`).
    pub additional: bool,
    pub params: Vec<Param>,
}

/// Sorted names of the entries of `dir` that are folders.
fn folders(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The implementations of the package at `root`; what was skipped goes to `decisions`.
pub fn implementations(root: &Path, cc: &str, decisions: &mut Vec<String>) -> Vec<Implementation> {
    let mut out: Vec<Implementation> = Vec::new();
    let mut additional = Vec::new();
    for top in folders(root) {
        if top.starts_with("Additional_Implementation") {
            additional.extend(additional_trees(root, &top, decisions));
            continue;
        }
        let Some(kind) = top.strip_suffix("_Implementation") else {
            continue;
        };
        if !root.join(&top).join("crypto_kem").is_dir() {
            decisions.push(format!("{top}/ has no crypto_kem/ folder: not imported"));
            continue;
        }
        let params = kem_params(root, &top, cc, decisions);
        if !params.is_empty() {
            out.push(Implementation {
                kind: kind.to_string(),
                tree: top.clone(),
                additional: false,
                params,
            });
        }
    }
    for (kind, tree) in additional {
        if let Some(p) = crate::dsl::id_problem(&kind) {
            decisions.push(format!(
                "{tree}/ not imported: its name {p} (it becomes part of instance ids)"
            ));
            continue;
        }
        if out.iter().any(|i| i.kind.eq_ignore_ascii_case(&kind)) {
            decisions.push(format!(
                "{tree}/ not imported: an implementation named `{kind}` exists already"
            ));
            continue;
        }
        let params = kem_params(root, &tree, cc, decisions);
        if !params.is_empty() {
            out.push(Implementation {
                kind,
                tree,
                additional: true,
                params,
            });
        }
    }
    out
}

/// The implementations in `Additional_Implementations/` (`top`) that have the common
/// layout: `<top>/<name>/crypto_kem/<param>/` (named `<name>`) or `<top>/crypto_kem/
/// <param>/` (named `Additional`); (name, folder) pairs. Anything else is said.
fn additional_trees(root: &Path, top: &str, decisions: &mut Vec<String>) -> Vec<(String, String)> {
    if root.join(top).join("crypto_kem").is_dir() {
        return vec![("Additional".to_string(), top.to_string())];
    }
    let mut out = Vec::new();
    for name in folders(&root.join(top)) {
        let tree = format!("{top}/{name}");
        if root.join(&tree).join("crypto_kem").is_dir() {
            out.push((name, tree));
        } else {
            decisions.push(format!(
                "{tree}/ not imported: it is not laid out as `{top}/<name>/crypto_kem/<param>/`; add an `instance` line for what you want measured"
            ));
        }
    }
    if out.is_empty() && folders(&root.join(top)).is_empty() {
        decisions.push(format!(
            "{top}/ not imported: its layout varies from package to package; add an `instance` line for what you want measured"
        ));
    }
    out
}

/// The parameter sets of `<tree>/crypto_kem/`.
fn kem_params(root: &Path, tree: &str, cc: &str, decisions: &mut Vec<String>) -> Vec<Param> {
    let mut params = Vec::new();
    for name in folders(&root.join(tree).join("crypto_kem")) {
        let dir = format!("{tree}/crypto_kem/{name}");
        if !root.join(&dir).join("api.h").is_file() {
            decisions.push(format!("{dir}/ has no api.h: not imported"));
            continue;
        }
        if let Some(p) = crate::dsl::id_problem(&name) {
            decisions.push(format!(
                "{dir}/: the folder name {p} (it becomes part of instance ids): not imported"
            ));
            continue;
        }
        match param(root, &dir, &name, cc) {
            Ok(p) => params.push(p),
            Err(e) => decisions.push(format!("{dir}/ not imported: {e}")),
        }
    }
    params
}

fn param(root: &Path, dir: &str, name: &str, cc: &str) -> Result<Param, String> {
    let abs = root.join(dir);
    let (build_file, words) = build_words(root, &abs);
    let includes: Vec<String> = words
        .iter()
        .filter_map(|w| w.strip_prefix("-I"))
        .map(str::to_string)
        .collect();
    let api = api_sizes(&abs, &includes, cc)?;
    let cflags = m_flags(&words);
    let build_libs = libraries(&words);
    let mut source_libs = Vec::new();
    let mut left_out = Vec::new();
    let mut drng_rename = None;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&abs)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    for f in files {
        let fname = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        match f.extension().and_then(|e| e.to_str()) {
            Some("h") => {
                if let Some(r) = crate::csource::renamed(&text, "randombytes") {
                    drng_rename = Some(r);
                }
            }
            Some("c") => {
                let defines =
                    crate::csource::defined_functions(&text, Api::Nist.harness_functions());
                if !defines.is_empty() {
                    left_out.push((fname, defines.iter().map(|d| d.to_string()).collect()));
                    continue;
                }
                for (h, angle) in crate::csource::includes(&text) {
                    if let Some(lib) = crate::csource::library_for_header(&h).filter(|_| angle) {
                        source_libs.push((lib.to_string(), format!("`{fname}` includes <{h}>")));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(Param {
        name: name.to_string(),
        dir: dir.to_string(),
        api,
        cflags,
        build_file,
        build_libs,
        source_libs,
        left_out,
        drng_rename,
    })
}

/// The build file that describes `dir` (its own, else the nearest one above it inside
/// `root`) and its words, continuation lines joined, quotes and parentheses removed.
fn build_words(root: &Path, dir: &Path) -> (Option<String>, Vec<String>) {
    let mut at = Some(dir);
    while let Some(d) = at.filter(|d| d.starts_with(root)) {
        for name in ["Makefile", "makefile", "CMakeLists.txt"] {
            let f = d.join(name);
            if let Ok(text) = std::fs::read_to_string(&f) {
                let text = text.replace("\\\n", " ");
                let words = text
                    .split(|c: char| c.is_whitespace() || "\"'()=".contains(c))
                    .filter(|w| !w.is_empty())
                    .map(str::to_string)
                    .collect();
                let rel = f.strip_prefix(root).unwrap_or(&f).display().to_string();
                return (Some(rel), words);
            }
        }
        at = d.parent();
    }
    (None, Vec::new())
}

/// `-m` options that select instruction sets (not `-march`, `-mtune`, `-mno-…`, `-m64`).
fn m_flags(words: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in words {
        let ok = w.starts_with("-m")
            && !w.starts_with("-march")
            && !w.starts_with("-mtune")
            && !w.starts_with("-mno-")
            && !matches!(w.as_str(), "-m32" | "-m64")
            && w[2..]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
        if ok && !out.contains(w) {
            out.push(w.clone());
        }
    }
    out
}

/// Libraries a build file links: `-lcrypto`, CMake's `OpenSSL::Crypto`.
fn libraries(words: &[String]) -> Vec<String> {
    let mut out: BTreeSet<String> = BTreeSet::new();
    for w in words {
        if let Some(l) = w
            .strip_prefix("-l")
            .filter(|l| crate::dsl::library_problem(l).is_none())
        {
            out.insert(l.to_string());
        }
        match w.as_str() {
            "OpenSSL::Crypto" | "${OPENSSL_CRYPTO_LIBRARY}" => {
                out.insert("crypto".into());
            }
            "OpenSSL::SSL" => {
                out.insert("ssl".into());
            }
            _ => {}
        }
    }
    out.into_iter().collect()
}

/// api.h's sizes and name: parsed when they are numbers, else evaluated by `cc` (with the
/// build file's `-I` folders, relative to the parameter set's folder).
fn api_sizes(dir: &Path, includes: &[String], cc: &str) -> Result<ApiSizes, String> {
    let text = std::fs::read_to_string(dir.join("api.h")).map_err(|e| format!("api.h: {e}"))?;
    let err = match kem_native::api::parse_api_h(&text, "") {
        Ok(a) => return Ok(a),
        Err(e) => e,
    };
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let probe = tmp.path().join("probe.c");
    std::fs::write(&probe, crate::run::steps::harness::probe_source(""))
        .map_err(|e| e.to_string())?;
    let obj = tmp.path().join("probe.o");
    let mut cmd = std::process::Command::new(cc);
    cmd.arg("-c")
        .arg(&probe)
        .arg("-o")
        .arg(&obj)
        .arg(format!("-I{}", dir.display()));
    for i in includes {
        cmd.arg(format!("-I{}", dir.join(i).display()));
    }
    let out = cmd.output().map_err(|e| format!("cannot run {cc}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "api.h: {err}; `{cc}` could not evaluate the sizes either: {}",
            crate::run::exec::tail(&out.stderr, 2)
        ));
    }
    let bytes = std::fs::read(&obj).map_err(|e| e.to_string())?;
    crate::run::steps::harness::read_probe(&bytes).map_err(|e| format!("api.h: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_build_file_flags_and_libraries() {
        let words: Vec<String> = "CFLAGS = -O3 -march native -mavx2 -mbmi2 -mno-red-zone -m64 LDFLAGS -lcrypto target_link_libraries kem OpenSSL::Crypto -lm"
            .split_whitespace()
            .map(str::to_string)
            .collect();
        assert_eq!(m_flags(&words), ["-mavx2", "-mbmi2"]);
        assert_eq!(libraries(&words), ["crypto", "m"]);
    }
}
