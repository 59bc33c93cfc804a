//! Reading a NIST-round package: its implementations (`<Kind>_Implementation/crypto_kem/
//! <param>/`, or `<Kind>_Implementation/<param>/src/` with shared code beside it), each parameter set's `api.h` (sizes and `CRYPTO_ALGNAME`; when api.h defines
//! them through a params header, evaluated by the contained compiler or read from the
//! `#define`s, see [`super::probe`]), the `-m` options and libraries of its Makefile or
//! CMakeLists.txt, the libraries its compiled sources include headers of, and the files the
//! harness leaves out. Every folder and file goes through [`Package`] (links that leave
//! the package, special files and oversized files are not read, and are named).

use std::collections::BTreeSet;
use std::path::Path;

use kem_native::output::ApiSizes;

use super::probe::Prober;
use super::read::{join, Package};
use crate::model::Api;

/// One parameter set of one implementation.
#[derive(Debug, Clone)]
pub struct Param {
    /// The folder name under `crypto_kem/` (`ml-kem-512`).
    pub name: String,
    /// Relative to the package root (`Reference_Implementation/crypto_kem/ml-kem-512`).
    pub dir: String,
    /// api.h's sizes, when they were found (else a TODO was said).
    pub api: Option<ApiSizes>,
    /// api.h's `CRYPTO_ALGNAME`, when found.
    pub algname: Option<String>,
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
    /// C and assembly files in its subfolders that the build compiles, relative to the
    /// package root (the manifest's `sources`).
    pub extra_sources: Vec<String>,
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

/// The implementations of the package `pkg`; what was skipped goes to `decisions`.
pub fn implementations(
    pkg: &Package,
    cc: &str,
    decisions: &mut Vec<String>,
) -> Vec<Implementation> {
    let mut out: Vec<Implementation> = Vec::new();
    let mut additional = Vec::new();
    let mut probe = Prober::new(cc);
    for top in pkg.list("").folders {
        if top.starts_with("Additional_Implementation") {
            additional.extend(additional_trees(pkg, &top, decisions));
            continue;
        }
        let Some(kind) = top.strip_suffix("_Implementation") else {
            continue;
        };
        let Some(dirs) = param_dirs(pkg, &top) else {
            decisions.push(format!(
                "{top}/ has no crypto_kem/ folder and no <param>/src/api.h: not imported"
            ));
            continue;
        };
        let params = kem_params(pkg, dirs, &mut probe, decisions);
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
        let params = kem_params(
            pkg,
            param_dirs(pkg, &tree).unwrap_or_default(),
            &mut probe,
            decisions,
        );
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
fn additional_trees(
    pkg: &Package,
    top: &str,
    decisions: &mut Vec<String>,
) -> Vec<(String, String)> {
    if pkg.is_dir(&join(top, "crypto_kem")) {
        return vec![("Additional".to_string(), top.to_string())];
    }
    let mut out = Vec::new();
    let names = pkg.list(top).folders;
    for name in &names {
        let tree = format!("{top}/{name}");
        if param_dirs(pkg, &tree).is_some() {
            out.push((name.clone(), tree));
        } else {
            decisions.push(format!(
                "{tree}/ not imported: it is not laid out as `{top}/<name>/crypto_kem/<param>/`; add an `instance` line for what you want measured"
            ));
        }
    }
    if out.is_empty() && names.is_empty() {
        decisions.push(format!(
            "{top}/ not imported: its layout varies from package to package; add an `instance` line for what you want measured"
        ));
    }
    out
}

/// A parameter set's folders: its name, the folder of its `api.h` and own sources, and the
/// folder whose subfolders may hold more of its sources (the same, or the parameter set's
/// folder above `src/`, with `lib/` beside it).
struct ParamDir {
    name: String,
    dir: String,
    base: String,
}

/// The parameter-set folders of the implementation tree `tree`: `<tree>/crypto_kem/<param>/`
/// (NIST's layout), else each `<tree>/<param>/src/` that holds an `api.h` (its sources in
/// `src/`, shared code in `lib/` or other folders beside it); `None` when it has neither.
fn param_dirs(pkg: &Package, tree: &str) -> Option<Vec<ParamDir>> {
    let kem = join(tree, "crypto_kem");
    if pkg.is_dir(&kem) {
        let dirs = pkg.list(&kem).folders.into_iter().map(|name| {
            let dir = format!("{kem}/{name}");
            ParamDir {
                base: dir.clone(),
                dir,
                name,
            }
        });
        return Some(dirs.collect());
    }
    let dirs: Vec<ParamDir> = pkg
        .list(tree)
        .folders
        .into_iter()
        .filter(|name| pkg.exists(&format!("{tree}/{name}/src/api.h")))
        .map(|name| ParamDir {
            dir: format!("{tree}/{name}/src"),
            base: format!("{tree}/{name}"),
            name,
        })
        .collect();
    (!dirs.is_empty()).then_some(dirs)
}

/// The parameter sets of an implementation tree's folders `dirs` ([`param_dirs`]).
fn kem_params(
    pkg: &Package,
    dirs: Vec<ParamDir>,
    probe: &mut Prober,
    decisions: &mut Vec<String>,
) -> Vec<Param> {
    let mut params = Vec::new();
    for ParamDir { name, dir, base } in dirs {
        if !pkg.exists(&join(&dir, "api.h")) {
            decisions.push(format!("{dir}/ has no api.h: not imported"));
            continue;
        }
        if let Some(p) = crate::dsl::id_problem(&name) {
            decisions.push(format!(
                "{dir}/: the folder name {p} (it becomes part of instance ids): not imported"
            ));
            continue;
        }
        match param(pkg, (&dir, &base), &name, probe) {
            Ok((p, note)) => {
                if let Some(n) = note {
                    decisions.push(format!("{dir}: {n}"));
                }
                params.push(p)
            }
            Err(e) => decisions.push(format!("{dir}/ not imported: {e}")),
        }
    }
    params
}

/// One parameter set in `dir` (more of its sources below `base`), and what import must say
/// about its api.h.
fn param(
    pkg: &Package,
    (dir, base): (&str, &str),
    name: &str,
    probe: &mut Prober,
) -> Result<(Param, Option<String>), String> {
    let (build_file, words) = build_words(pkg, dir);
    // `-Ifolder` and `-I folder`.
    let includes: Vec<String> = words
        .iter()
        .enumerate()
        .filter_map(|(i, w)| match w.strip_prefix("-I") {
            Some("") => words.get(i + 1).cloned(),
            Some(f) => Some(f.to_string()),
            None => None,
        })
        .collect();
    let found = probe.api(pkg, dir, &includes)?;
    let mut cflags = m_flags(&words);
    if let Some(text) = build_file.as_deref().and_then(|b| pkg.read_text(b)) {
        cflags.extend(d_flags(&text));
    }
    if let Some(b) = build_file.as_deref() {
        cflags.extend(i_flags(pkg, b, dir, &includes));
    }
    let build_libs = libraries(&words);
    let mut source_libs = Vec::new();
    let mut left_out = Vec::new();
    let mut drng_rename = None;
    for fname in pkg.list(dir).files {
        let ext = Path::new(&fname).extension().and_then(|e| e.to_str());
        if !matches!(ext, Some("h" | "c")) {
            continue;
        }
        let Some(text) = pkg.read_text(&join(dir, &fname)) else {
            continue;
        };
        match ext {
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
    let (extra_sources, notes) =
        super::subfolders::sources(pkg, (base, dir), build_file.as_deref(), &words);
    let param = Param {
        extra_sources,
        name: name.to_string(),
        dir: dir.to_string(),
        api: found.sizes,
        algname: found.algname,
        cflags,
        build_file,
        build_libs,
        source_libs,
        left_out,
        drng_rename,
    };
    let note = found.note.into_iter().chain(notes).collect::<Vec<_>>();
    Ok((param, (!note.is_empty()).then(|| note.join("; "))))
}

/// The build file that describes `dir` (its own, else the nearest one above it inside the
/// package): a Makefile, CMakeLists.txt, or a shell script of compile lines (`build.sh`,
/// read, never run); and its words, continuation lines joined, quotes and parentheses removed.
fn build_words(pkg: &Package, dir: &str) -> (Option<String>, Vec<String>) {
    let folders = Path::new(dir).ancestors().map(|d| d.display().to_string());
    for d in folders {
        for name in [
            "Makefile",
            "makefile",
            "GNUmakefile",
            "CMakeLists.txt",
            "build.sh",
            "compile.sh",
        ] {
            let rel = join(&d, name);
            if let Some(text) = pkg.read_text(&rel) {
                let text = text.replace("\\\n", " ");
                let words = text
                    .split(|c: char| c.is_whitespace() || "\"'()=".contains(c))
                    .filter(|w| !w.is_empty())
                    .map(str::to_string)
                    .collect();
                return (Some(rel), words);
            }
        }
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

/// `-D` definitions of a build file's text (`-DKYBER_K=3`), in order; one with a make or
/// shell variable, or defined with different values (several targets), is left out.
fn d_flags(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut clash: Vec<String> = Vec::new();
    let text = text.replace("\\\n", " ");
    for w in text.split(|c: char| c.is_whitespace() || "\"'()".contains(c)) {
        let Some(def) = w
            .strip_prefix("-D")
            .filter(|d| !d.is_empty() && !d.contains('$'))
        else {
            continue;
        };
        let name = def.split('=').next().unwrap_or(def);
        let ok = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        match out.iter().find(|o| o[2..].split('=').next() == Some(name)) {
            Some(o) if o != w => clash.push(name.to_string()),
            Some(_) => {}
            None if ok => out.push(w.to_string()),
            None => {}
        }
    }
    out.retain(|o| !clash.iter().any(|c| o[2..].split('=').next() == Some(c)));
    out
}

/// The build file `build`'s `-I` folders (`includes`), relative to its folder, as `-I`
/// options relative to the package root; those outside the package, missing, or the
/// instance's folder `dir` (always included) are left out.
fn i_flags(pkg: &Package, build: &str, dir: &str, includes: &[String]) -> Vec<String> {
    let base = Path::new(build).parent().unwrap_or(Path::new(""));
    let mut out: Vec<String> = Vec::new();
    for i in includes
        .iter()
        .filter(|i| !i.is_empty() && !i.contains('$'))
    {
        let p = crate::safe_fs::normalize(&base.join(i));
        let rel = p.display().to_string();
        let inside = p.is_relative() && !rel.starts_with("..");
        let flag = format!("-I{rel}");
        if inside && rel != dir && pkg.is_dir(&rel) && !out.contains(&flag) {
            out.push(flag);
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
        let text = "CFLAGS=-O3 -DNDEBUG -DKYBER_K=3 -D$(X) \\\n -DN=1\nt2: -DN=2 -DKYBER_K=3";
        assert_eq!(d_flags(text), ["-DNDEBUG", "-DKYBER_K=3"]);
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("R/crypto_kem/k")).unwrap();
        std::fs::create_dir_all(d.path().join("R/common")).unwrap();
        let pkg = Package::new(d.path()).unwrap();
        let inc: Vec<String> = [".", "../../common", "../../../..", "nope", "$(X)"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            i_flags(&pkg, "R/crypto_kem/k/Makefile", "R/crypto_kem/k", &inc),
            ["-IR/common"]
        );
    }
}
