//! `check --deep`: what only the fetched sources can tell. Per instance: its `dir` exists
//! in the source, its `api.h` defines the `CRYPTO_*` sizes under the declared namespace
//! (else the namespace it does use is named), and the `.c`/`.s`/`.S` files a build would
//! compile are listed, then compiled and their symbols resolved by a [`Linker`] (the build's
//! link predicted, see [`super::deep_link`]). Problems point at the manifest's `dir=` or
//! `namespace=` value, or at the instance's line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use miette::SourceSpan;

use super::deep_link::{link_problems, Linker};
use super::diag::{Diagnostic, Diagnostics, SourceFile};
use super::fs::SourceFs;
use crate::model::{Api, Campaign, Pos};

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
/// submission id -> folder, or why it could not be fetched); `linker` compiles each
/// instance's sources and resolves their symbols.
pub fn deep_check(
    campaign: &Campaign,
    roots: &BTreeMap<String, Result<PathBuf, String>>,
    fs: &dyn SourceFs,
    linker: &dyn Linker,
) -> DeepReport {
    let mut problems = Vec::new();
    let mut listing_lines = Vec::new();
    // Each library once: name -> where `cc` finds it, or why not.
    let mut found = Libraries::default();
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
            missing_libraries(&file, &campaign.system.cc, o, &mut found, &mut problems);
            let dir = match instance_folder(&file, root, inst) {
                Ok(d) => d,
                Err(d) => {
                    problems.push(*d);
                    continue;
                }
            };
            api_h_checks(&file, root, &dir, sub, inst, &mut problems);
            match crate::sources::instance_files(root, inst, sub.api) {
                Ok(listing) => {
                    listing_lines.push(listing_line(sub, inst, root, &dir, &listing));
                    source_notes(&file, sub, inst, &listing.files, &mut problems);
                    let prediction = linker.link(campaign, sub, inst, root, &listing.files);
                    problems.extend(link_problems(&file, inst, prediction));
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
        listing: listing_lines,
    }
}

fn at(p: &Pos) -> SourceSpan {
    SourceSpan::new(p.offset.into(), p.len)
}

/// The instance's folder under the source root, or why it cannot be used: it leaves the
/// root through a link, or does not exist.
fn instance_folder(
    file: &SourceFile,
    root: &Path,
    inst: &crate::model::Instance,
) -> Result<PathBuf, Box<Diagnostic>> {
    let o = &inst.origin;
    let dir = root.join(&inst.dir);
    if crate::safe_fs::inside(root, &dir).is_err() {
        return Err(Box::new(Diagnostic::new(
            file,
            format!(
                "instance `{}`: folder `{}` resolves outside the source root through a link",
                inst.id, inst.dir
            ),
        )
        .label(at(&o.dir), "leaves the source")
        .help("the compiler would be shown what the link points to: keep the instance's folder inside the source")));
    }
    if !dir.is_dir() {
        return Err(Box::new(
            Diagnostic::new(
                file,
                format!(
                    "instance `{}`: folder `{}` does not exist in the source ({})",
                    inst.id,
                    inst.dir,
                    dir.display()
                ),
            )
            .label(at(&o.dir), "no such folder")
            .help(folders_hint(&dir)),
        ));
    }
    Ok(dir)
}

/// What the instance's `api.h` says against its manifest: the namespace of its macros,
/// and the submitted KAT file it names.
fn api_h_checks(
    file: &SourceFile,
    root: &Path,
    dir: &Path,
    sub: &crate::model::Submission,
    inst: &crate::model::Instance,
    problems: &mut Vec<Diagnostic>,
) {
    let o = &inst.origin;
    let api_h = dir.join("api.h");
    let text = match std::fs::read_to_string(&api_h) {
        Ok(t) => t,
        Err(e) => {
            problems.push(
                Diagnostic::new(
                    file,
                    format!(
                        "instance `{}`: cannot read {}: {e}",
                        inst.id,
                        api_h.display()
                    ),
                )
                .label(at(&o.dir), "this folder"),
            );
            return;
        }
    };
    let defines = api_defines(dir, &text);
    if let Some(msg) = namespace_problem(&defines, &inst.namespace, sub.api, &api_h) {
        let help = if inst.namespace.is_empty() {
            "`api \"nist\"` means an un-prefixed api.h (`CRYPTO_SECRETKEYBYTES`); for a namespaced tree remove it and give each instance its `namespace=`"
        } else {
            "the namespace is the prefix of `CRYPTO_SECRETKEYBYTES` and the other `CRYPTO_*` macros in api.h; a NIST package's api.h has none: use `api \"nist\"` and no `namespace=`"
        };
        let span = if inst.namespace.is_empty() {
            at(&o.instance)
        } else {
            at(&o.namespace)
        };
        problems.push(
            Diagnostic::new(file, format!("instance `{}`: {msg}", inst.id))
                .label(span, "declared here")
                .help(help),
        );
    }
    submitted_file(file, root, inst, &text, problems);
}

/// The listing line of one instance: `<submission>/<instance>: <files>`, and the files left
/// out because they define what the harness provides.
fn listing_line(
    sub: &crate::model::Submission,
    inst: &crate::model::Instance,
    root: &Path,
    dir: &Path,
    listing: &crate::sources::Listing,
) -> String {
    let shown = |f: &Path| {
        f.strip_prefix(dir)
            .or_else(|_| f.strip_prefix(root))
            .unwrap_or(f)
            .display()
            .to_string()
    };
    let names: Vec<String> = listing.files.iter().map(|f| shown(f)).collect();
    let mut line = format!("{}/{}: {}", sub.id, inst.id, names.join(" "));
    if !listing.left_out.is_empty() {
        let out: Vec<String> = listing
            .left_out
            .iter()
            .map(|l| format!("{} ({})", shown(&l.file), l.defines.join(", ")))
            .collect();
        line.push_str(&format!(
            " [left out, defining what the harness provides: {}]",
            out.join(", ")
        ));
    }
    line
}

/// What `check --deep` learnt about libraries: name -> where `cc` finds it or why not,
/// and the `link` values already reported (manifest, offset).
#[derive(Default)]
struct Libraries {
    found: BTreeMap<String, Result<PathBuf, String>>,
    said: Vec<(PathBuf, usize)>,
}

/// A `link "<name>"` whose library the build would not find (`crate::libs`, as the
/// build resolves it), said once at the `link` value that names it.
fn missing_libraries(
    file: &SourceFile,
    cc: &str,
    o: &crate::model::Origin,
    libs: &mut Libraries,
    problems: &mut Vec<Diagnostic>,
) {
    for (name, at) in &o.links {
        let r = libs
            .found
            .entry(name.clone())
            .or_insert_with(|| crate::libs::find(cc, name));
        let Err(why) = r else { continue };
        let key = (file.path().to_path_buf(), at.offset);
        if libs.said.contains(&key) {
            continue;
        }
        libs.said.push(key);
        problems.push(
            Diagnostic::new(file, format!("`link \"{name}\"`: {why}"))
                .label(SourceSpan::new(at.offset.into(), at.len), "not found")
                .help(format!(
                    "the build links lib{name}.so as `{cc} -print-file-name=lib{name}.so` or pkg-config's libdir finds it; install the library's development package, or remove the `link` if the sources do not need it"
                )),
        );
    }
}

/// The macros api.h defines, with those of the local headers it includes (`#include
/// "params.h"`, looked up beside it, three levels deep): name -> replacement text.
fn api_defines(dir: &Path, api_h: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![(api_h.to_string(), 0)];
    let mut seen: Vec<String> = Vec::new();
    while let Some((text, depth)) = todo.pop() {
        for line in crate::csource::strip(&text).lines() {
            let t = line.trim_start();
            let Some(rest) = t.strip_prefix('#') else {
                continue;
            };
            if let Some(rest) = rest.trim_start().strip_prefix("define") {
                let mut words = rest.split_whitespace();
                if let Some(name) = words.next() {
                    let name = name.split('(').next().unwrap_or(name);
                    out.entry(name.to_string())
                        .or_insert_with(|| words.collect::<Vec<_>>().join(" "));
                }
            }
        }
        if depth < 3 {
            for (h, angle) in crate::csource::includes(&text) {
                if !angle && !seen.contains(&h) {
                    seen.push(h.clone());
                    if let Ok(t) = std::fs::read_to_string(dir.join(&h)) {
                        todo.push((t, depth + 1));
                    }
                }
            }
        }
    }
    out
}

/// The prefixes api.h gives `CRYPTO_SECRETKEYBYTES` (`PQCLEAN_MLKEM512_CLEAN_`; empty for
/// a NIST package's plain name).
fn namespaces_in(defines: &BTreeMap<String, String>) -> Vec<String> {
    defines
        .keys()
        .filter_map(|k| k.strip_suffix("CRYPTO_SECRETKEYBYTES"))
        .map(str::to_string)
        .collect()
}

/// What is wrong with the declared namespace, if anything: api.h must define
/// `<namespace>CRYPTO_SECRETKEYBYTES` itself (no fallback to the plain name).
fn namespace_problem(
    defines: &BTreeMap<String, String>,
    namespace: &str,
    api: Api,
    api_h: &Path,
) -> Option<String> {
    let key = format!("{namespace}CRYPTO_SECRETKEYBYTES");
    if defines.contains_key(&key) {
        return None;
    }
    let used = namespaces_in(defines);
    let shown = |u: &String| {
        if u.is_empty() {
            "no namespace (plain `CRYPTO_SECRETKEYBYTES`)".to_string()
        } else {
            format!("namespace `{u}`")
        }
    };
    let declared = match (api, namespace.is_empty()) {
        (Api::Nist, _) => "`api \"nist\"` (no namespace)".to_string(),
        (_, true) => "no namespace".to_string(),
        (_, false) => format!("namespace `{namespace}`"),
    };
    Some(if used.is_empty() {
        format!(
            "{} defines no `{key}` (declared: {declared})",
            api_h.display()
        )
    } else {
        format!(
            "{declared} is not what {} uses: it has {}",
            api_h.display(),
            used.iter().map(shown).collect::<Vec<_>>().join(", ")
        )
    })
}

/// The instance's submitted KAT file (`kat submitted=`) must be there, when api.h gives
/// the sizes its name uses as plain numbers.
fn submitted_file(
    file: &SourceFile,
    root: &Path,
    inst: &crate::model::Instance,
    api_h: &str,
    problems: &mut Vec<Diagnostic>,
) {
    if inst.kat_submitted.is_none() {
        return;
    }
    let Ok(api) = kem_native::api::parse_api_h(api_h, &inst.namespace) else {
        return;
    };
    let Some(Ok(rel)) = super::submitted_kat_path(inst, &api) else {
        return;
    };
    if !root.join(&rel).is_file() {
        let o = &inst.origin;
        problems.push(
            Diagnostic::new(
                file,
                format!(
                    "instance `{}`: submitted KAT file `{rel}` does not exist in the source",
                    inst.id
                ),
            )
            .label(
                SourceSpan::new(o.instance.offset.into(), o.instance.len),
                "this instance",
            )
            .help(folders_hint(&root.join(&rel))),
        );
    }
}

/// Warnings about what an instance compiles: files defining `main` or the DRNG symbol
/// (a test driver, or a collision with the harness's shim), and headers of system
/// libraries (OpenSSL, GMP, NTL) that the instance does not `link`.
fn source_notes(
    file: &SourceFile,
    sub: &crate::model::Submission,
    inst: &crate::model::Instance,
    files: &[PathBuf],
    problems: &mut Vec<Diagnostic>,
) {
    let o = &inst.origin;
    let at = SourceSpan::new(o.instance.offset.into(), o.instance.len);
    let drng = sub
        .primitives
        .drng
        .clone()
        .unwrap_or_else(|| match sub.api {
            Api::Nist => "randombytes".into(),
            Api::Namespaced => "PQCLEAN_randombytes".into(),
        });
    let mut missing: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    for f in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "c"))
    {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let wanted = ["main", drng.as_str(), "randombytes_init"];
        for d in crate::csource::defined_functions(&text, &wanted) {
            let (msg, help) = if d == "main" {
                (
                    format!("instance `{}`: `{name}` defines `main` and is compiled into the KEM's object", inst.id),
                    "a test or KAT driver (`PQCgenKAT_kem.c`)? leave it out with `exclude`, or use `api \"nist\"`, which does".to_string(),
                )
            } else {
                (
                    format!("instance `{}`: `{name}` defines `{d}`, which the harness provides: the link will fail with a duplicate symbol", inst.id),
                    "leave the package's own DRBG (`rng.c`) out with `exclude`, or use `api \"nist\"`, which does".to_string(),
                )
            };
            problems.push(
                Diagnostic::new(file, msg)
                    .label(at, "this instance")
                    .help(help),
            );
        }
        for (h, angle) in crate::csource::includes(&text) {
            if let Some(lib) = crate::csource::library_for_header(&h).filter(|_| angle) {
                if !inst.libraries.iter().any(|l| l == lib) {
                    missing
                        .entry(lib)
                        .or_default()
                        .push(format!("`{name}` includes <{h}>"));
                }
            }
        }
    }
    for (lib, why) in missing {
        problems.push(
            Diagnostic::new(
                file,
                format!(
                    "instance `{}` does not link `{lib}`, but {}",
                    inst.id,
                    why.join(", ")
                ),
            )
            .label(at, "this instance")
            .help(format!(
                "add `link \"{lib}\"` to the submission (or to a `when` block for these instances)"
            ))
            .note(),
        );
    }
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
        let d = tempfile::tempdir().unwrap();
        let h = "#define PQCLEAN_X_CLEAN_CRYPTO_SECRETKEYBYTES 1\n#define PQCLEAN_X_CLEAN_CRYPTO_BYTES 2\n";
        let defs = api_defines(d.path(), h);
        assert_eq!(namespaces_in(&defs), ["PQCLEAN_X_CLEAN_"]);
        let api = Path::new("api.h");
        assert!(namespace_problem(&defs, "PQCLEAN_X_CLEAN_", Api::Namespaced, api).is_none());
        let p = namespace_problem(&defs, "", Api::Nist, api).unwrap();
        assert!(p.contains("namespace `PQCLEAN_X_CLEAN_`"), "{p}");
        // A NIST api.h with sizes from a params header, and a namespace declared anyway.
        std::fs::write(d.path().join("params.h"), "#define KYBER_SK 1632\n").unwrap();
        let nist = "#include \"params.h\"\n#define CRYPTO_SECRETKEYBYTES KYBER_SK\n";
        let defs = api_defines(d.path(), nist);
        assert_eq!(defs["KYBER_SK"], "1632");
        assert!(namespace_problem(&defs, "", Api::Nist, api).is_none());
        let p = namespace_problem(&defs, "PQCLEAN_X_", Api::Namespaced, api).unwrap();
        assert!(p.contains("no namespace (plain"), "{p}");
    }
}
