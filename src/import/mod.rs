//! `ngcc-pipe import PACKAGE --into DIR`: turn a NIST-round submission package (a folder,
//! or a `.tar`/`.tar.gz`/`.zip` archive, unpacked with every entry checked) into
//! `DIR/<name>/manifest.kdl`, `kat.sha256` and `sizes.csv`.
//!
//! What it reads ([`scan`]): `<Kind>_Implementation/crypto_kem/<param>/` folders, each
//! one's `api.h` (sizes and `CRYPTO_ALGNAME`), Makefile or CMakeLists.txt (`-m` options,
//! libraries) and sources (headers of system libraries, files defining what the harness
//! provides); the `PQCkemKAT_<sk>.rsp` files ([`kat`]), matched by name and size. What it
//! cannot decide is said, never guessed: each such decision is returned for printing.
//!
//! The package is untrusted, and this is the first command run on it: nothing of it is
//! evaluated on the host ([`probe`]: the compiler runs in the build jail, or not at all),
//! every file is read defensively ([`read`]: no link out of the package, regular files only,
//! bounded) and whatever was not read is named ([`Imported::skipped`]); temporary folders
//! are removed however import ends ([`guard`]), and the submission folder appears whole or
//! not at all.

mod category;
mod defines;
mod guard;
mod kat;
mod probe;
mod read;
mod root;
mod scan;
mod subfolders;
mod write;

use std::path::{Component, Path, PathBuf};

use guard::Guard;
use read::Package;
use write::{kdl_str, Manifest, Pair};

/// What to import and where.
#[derive(Debug, Clone)]
pub struct Options {
    /// The package: a folder or an archive.
    pub package: PathBuf,
    /// The folder the submission's folder is made in.
    pub into: PathBuf,
    /// The submission id (default: from the package's name).
    pub name: Option<String>,
    /// Replace an existing manifest.
    pub force: bool,
    /// The C compiler that evaluates api.h sizes made of macros.
    pub cc: String,
    /// The package's folder inside the folder or archive (default: found, see [`root`]).
    pub root: Option<PathBuf>,
}

/// What the import wrote and could not decide.
#[derive(Debug, Default)]
pub struct Imported {
    /// Files written, in order.
    pub written: Vec<PathBuf>,
    /// Decisions left to the user, and what was left out.
    pub decisions: Vec<String>,
    /// Files and folders of the package not read, each with why (`path: reason`).
    pub skipped: Vec<String>,
}

/// Why nothing was imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The package is not there or not readable.
    #[error("{0}")]
    Package(String),
    /// The archive was refused or could not be unpacked.
    #[error(transparent)]
    Archive(#[from] crate::archive::ArchiveError),
    /// Nothing importable.
    #[error("{0}")]
    Empty(String),
    /// The target exists.
    #[error("{} exists: pass --force to replace it", crate::text::clean_line(&.0.display().to_string()))]
    Exists(PathBuf),
    /// Writing failed.
    #[error("cannot write {}: {source}", crate::text::clean_line(&path.display().to_string()))]
    Write {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Where the package came from, for the manifest's `source` line.
enum Origin {
    Folder,
    Archive { sha256: String, top: Option<String> },
}

impl Origin {
    /// The `source` node's properties for `package`, seen from the manifest's folder `dir`.
    fn source(&self, package: &Path, dir: &Path) -> String {
        let rel = kdl_str(&relative(package, dir).display().to_string());
        match self {
            Origin::Folder => format!("path={rel}"),
            Origin::Archive { sha256, top } => {
                let mut s = format!("archive={rel} sha256={}", kdl_str(sha256));
                if let Some(t) = top {
                    s.push_str(&format!(" root={}", kdl_str(t)));
                }
                s
            }
        }
    }
}

/// A submission id made from a package name: invalid characters become `-`.
fn id_from(name: &str) -> String {
    let stem = [".tar.gz", ".tgz", ".tar", ".zip"]
        .iter()
        .fold(name.to_string(), |n, suffix| {
            n.strip_suffix(suffix).map(str::to_string).unwrap_or(n)
        });
    let id: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.+".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    let id = id.trim_matches('-').replace("..", ".");
    if id.is_empty() {
        "package".into()
    } else {
        id
    }
}

/// `to` relative to the folder `from` (both absolute), with `..` where needed.
fn relative(to: &Path, from: &Path) -> PathBuf {
    let t: Vec<Component> = to.components().collect();
    let f: Vec<Component> = from.components().collect();
    let common = t.iter().zip(&f).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..f.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    out
}

/// The algorithm's name: what the parameter sets' names share (`ML-KEM-512`,
/// `ML-KEM-768` -> `ML-KEM`), else `fallback`.
fn family(names: &[&str], fallback: &str) -> String {
    let Some(first) = names.first() else {
        return fallback.into();
    };
    let mut len = first.len();
    for n in &names[1..] {
        len = len.min(
            first
                .bytes()
                .zip(n.bytes())
                .take_while(|(a, b)| a == b)
                .count(),
        );
    }
    let common =
        first[..len].trim_end_matches(|c: char| c == '-' || c == '_' || c.is_ascii_digit());
    if names.len() == 1 {
        (*first).into()
    } else if common.is_empty() {
        fallback.into()
    } else {
        common.into()
    }
}

/// Imports the package; see the module's documentation.
pub fn import(o: &Options) -> Result<Imported, ImportError> {
    let mut done = Imported::default();
    let shown = |p: &Path| crate::text::clean_line(&p.display().to_string());
    let package =
        std::path::absolute(&o.package).map_err(|e| ImportError::Package(e.to_string()))?;
    let into = std::path::absolute(&o.into).map_err(|e| ImportError::Package(e.to_string()))?;
    let given = package
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The folder read, and where the manifest's `source` points; an archive is unpacked in
    // a guarded temporary folder.
    let _unpacked: Option<Guard>;
    let (root, origin) = if package.is_dir() {
        _unpacked = None;
        (package.clone(), Origin::Folder)
    } else if package.is_file() && crate::archive::kind_of(&package).is_some() {
        let sha256 = file_sha256(&package)
            .map_err(|e| ImportError::Package(format!("{}: {e}", shown(&package))))?;
        let (tmp, guard) = Guard::temp_dir().map_err(|e| ImportError::Package(e.to_string()))?;
        _unpacked = Some(guard);
        let dest = tmp.join("p");
        // The path as given: errors name it so.
        crate::archive::extract(&o.package, &dest)?;
        // One folder at the top (the usual `Name/...`): the manifest's `root`.
        let tops: Vec<_> = std::fs::read_dir(&dest)
            .into_iter()
            .flatten()
            .flatten()
            .collect();
        let top = match tops.as_slice() {
            [one] if one.file_type().is_ok_and(|t| t.is_dir()) => {
                one.file_name().to_str().map(str::to_string)
            }
            _ => None,
        };
        let root = top.as_ref().map_or(dest.clone(), |t| dest.join(t));
        (root, Origin::Archive { sha256, top })
    } else {
        return Err(ImportError::Package(format!(
            "{} is neither a folder nor a .tar, .tar.gz, .tgz or .zip archive",
            shown(&o.package)
        )));
    };
    // The package inside: loose files beside it, or a folder or two above it.
    let inner = root::find(
        &Package::new(&root).map_err(ImportError::Package)?,
        o.root.as_deref(),
    )
    .map_err(|e| ImportError::Package(format!("{}: {e}", shown(&o.package))))?;
    let (root, package, origin) = if inner.is_empty() {
        (root, package, origin)
    } else {
        let origin = match origin {
            Origin::Folder => Origin::Folder,
            Origin::Archive { sha256, top } => Origin::Archive {
                sha256,
                top: Some(match top {
                    Some(t) => read::join(&t, &inner),
                    None => inner.clone(),
                }),
            },
        };
        let package = match origin {
            Origin::Folder => package.join(&inner),
            Origin::Archive { .. } => package,
        };
        done.decisions.push(format!(
            "the package is `{inner}` inside {}",
            shown(&o.package)
        ));
        (root.join(&inner), package, origin)
    };
    let name = o.name.clone().unwrap_or_else(|| {
        let top = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        id_from(if package.is_dir() && inner.is_empty() {
            &given
        } else {
            &top
        })
    });
    if let Some(p) = crate::dsl::id_problem(&name) {
        return Err(ImportError::Package(format!(
            "submission id `{}` {p}: choose one with --name",
            crate::text::clean_line(&name)
        )));
    }
    let dir = into.join(&name);
    let manifest_path = dir.join("manifest.kdl");
    if manifest_path.exists() && !o.force {
        return Err(ImportError::Exists(manifest_path));
    }
    let pkg = Package::new(&root).map_err(ImportError::Package)?;
    let result = manifest_of(o, &pkg, &name, &origin, &package, &dir, &mut done);
    done.skipped = pkg
        .skipped()
        .into_iter()
        .map(|(path, why)| format!("{path}: {why}"))
        .collect();
    let files = match result {
        Err(ImportError::Empty(why)) if !done.skipped.is_empty() => {
            return Err(ImportError::Empty(format!(
                "{why}; not read: {}",
                done.skipped.join("; ")
            )))
        }
        other => other?,
    };
    write_atomically(&into, &dir, &files, &mut done)?;
    Ok(done)
}

/// The SHA-256 of a file, read in pieces.
fn file_sha256(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(hex::encode(h.finalize()))
}

/// The files of the submission folder (name, text) for the package `pkg`.
fn manifest_of(
    o: &Options,
    pkg: &Package,
    name: &str,
    origin: &Origin,
    package: &Path,
    dir: &Path,
    done: &mut Imported,
) -> Result<Vec<(&'static str, String)>, ImportError> {
    let mut impls = scan::implementations(pkg, &o.cc, &mut done.decisions);
    if impls.is_empty() {
        return Err(ImportError::Empty(format!(
            "{}: no `<Kind>_Implementation/crypto_kem/<param>/api.h` (the NIST layout) nor `<Kind>_Implementation/<param>/src/api.h` found",
            crate::text::clean_line(&o.package.display().to_string())
        )));
    }
    let params = common_params(&mut impls, &mut done.decisions);
    for i in &impls {
        for p in i.params.iter().filter(|p| !params.contains(&p.name)) {
            done.decisions.push(format!(
                "{}: not imported, as not every implementation has parameter set `{}` (add an `instance` line for it)",
                p.dir, p.name
            ));
        }
    }
    let kats = kat::kat_files(pkg);
    let mut pairs: Vec<Pair> = Vec::new();
    for pname in &params {
        for i in &impls {
            let Some(param) = i.params.iter().find(|p| &p.name == pname) else {
                continue;
            };
            let sk = param.api.as_ref().map(|a| a.sk);
            let pair = Pair {
                kind: &i.kind,
                param,
                kat: match kat::choose(&kats, pname, param.algname.as_deref(), sk) {
                    Ok((k, note)) => {
                        if let Some(n) = note {
                            done.decisions.push(format!("{}: {n}", param.dir));
                        }
                        Some(k)
                    }
                    Err(why) => {
                        done.decisions
                            .push(format!("{}: no submitted KAT file: {why}", param.dir));
                        None
                    }
                },
            };
            explain_libraries(&pair, &mut done.decisions);
            pairs.push(pair);
        }
    }
    let left: Vec<String> = pairs
        .iter()
        .flat_map(|p| {
            p.param
                .left_out
                .iter()
                .map(|(f, d)| format!("{f} ({})", d.join(", ")))
        })
        .fold(Vec::new(), |mut v, x| {
            if !v.contains(&x) {
                v.push(x);
            }
            v
        });
    if !left.is_empty() {
        done.decisions.push(format!(
            "left out of every build, as they define what the harness provides: {}",
            left.join(", ")
        ));
    }
    let renames: Vec<&str> = pairs
        .iter()
        .filter_map(|p| p.param.drng_rename.as_deref())
        .collect();
    let drng = match renames.first() {
        Some(r) if renames.iter().all(|x| x == r) && renames.len() == pairs.len() => {
            done.decisions.push(format!(
                "the package's headers `#define randombytes {r}`: the harness provides `{r}` (`drng`)"
            ));
            Some(*r)
        }
        Some(_) => {
            done.decisions.push(
                "some headers rename randombytes (`#define randombytes ...`) and others do not: set `primitives { drng ... }` yourself".into(),
            );
            None
        }
        None => None,
    };
    // The names api.h gives, else the submitted files' `# <name>` lines.
    let algnames: Vec<&str> = pairs
        .iter()
        .filter_map(|p| {
            p.param
                .algname
                .as_deref()
                .or_else(|| p.kat.and_then(|k| k.algname.as_deref()))
        })
        .collect();
    let categories = category::of_params(pkg, &impls, &params, &mut done.decisions);
    let text = write::manifest(
        &Manifest {
            id: name,
            algorithm: &family(&algnames, name),
            source: origin.source(package, dir),
            from: &o.package.display().to_string(),
            impls: &impls,
            params: &params,
            pairs: &pairs,
            drng,
            categories: &categories,
        },
        &mut done.decisions,
    );
    if !package.starts_with(dir) {
        done.decisions.push(
            "the manifest's `source` lies outside its folder: the pipeline must allow it with a `submissions-root` folder that holds both (e.g. their common parent)".to_string(),
        );
    }
    Ok(vec![
        ("manifest.kdl", text),
        ("kat.sha256", write::kat_sha256(&pairs)),
        ("sizes.csv", write::sizes_csv(&pairs)),
    ])
}

/// Write `files` into the submission folder `dir` (in `into`) so that it appears whole or
/// not at all: a new folder is written beside it under a guard and renamed into place; in an
/// existing one (`--force`) each file is written beside its name and renamed over it.
fn write_atomically(
    into: &Path,
    dir: &Path,
    files: &[(&'static str, String)],
    done: &mut Imported,
) -> Result<(), ImportError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ImportError::Write { path, source }
    };
    std::fs::create_dir_all(into).map_err(err(into))?;
    let fresh = !dir.exists();
    let stage = if fresh {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::Builder::new()
            .prefix(".ngcc-import-")
            .permissions(std::fs::Permissions::from_mode(0o755))
            .tempdir_in(into)
            .map_err(err(into))?
            .keep();
        t
    } else {
        dir.to_path_buf()
    };
    let temp_of = |f: &str| {
        if fresh {
            stage.join(f)
        } else {
            stage.join(format!(".{f}.ngcc-import-{}", std::process::id()))
        }
    };
    let guarded: Vec<PathBuf> = if fresh {
        vec![stage.clone()]
    } else {
        files.iter().map(|(f, _)| temp_of(f)).collect()
    };
    let mut guard = Guard::over(guarded).map_err(err(into))?;
    for (f, body) in files {
        let t = temp_of(f);
        std::fs::write(&t, body).map_err(err(&t))?;
    }
    if fresh {
        std::fs::rename(&stage, dir).map_err(err(dir))?;
        guard.release(&stage);
    } else {
        for (f, _) in files {
            let t = temp_of(f);
            std::fs::rename(&t, dir.join(f)).map_err(err(&dir.join(f)))?;
            guard.release(&t);
        }
    }
    drop(guard);
    done.written = files.iter().map(|(f, _)| dir.join(f)).collect();
    Ok(())
}

/// The parameter sets every implementation has. They are those of the `<Kind>_Implementation`
/// folders; an additional implementation that lacks one of them is not imported (said),
/// rather than taking the parameter set from all the others.
fn common_params(
    impls: &mut Vec<scan::Implementation>,
    decisions: &mut Vec<String>,
) -> Vec<String> {
    let has = |i: &scan::Implementation, p: &String| i.params.iter().any(|q| &q.name == p);
    let base: Vec<&scan::Implementation> = match impls.iter().filter(|i| !i.additional).count() {
        0 => impls.iter().collect(),
        _ => impls.iter().filter(|i| !i.additional).collect(),
    };
    let mut params: Vec<String> = base[0].params.iter().map(|p| p.name.clone()).collect();
    for i in &base[1..] {
        params.retain(|p| has(i, p));
    }
    impls.retain(|i| {
        let lacks: Vec<&str> = params
            .iter()
            .filter(|p| !has(i, p))
            .map(String::as_str)
            .collect();
        if lacks.is_empty() {
            return true;
        }
        decisions.push(format!(
            "{}/ not imported: it has no parameter set {} (add `instance` lines for the ones it has)",
            i.tree,
            lacks
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        false
    });
    params
}

/// Says where the libraries an instance links come from, and which of the build file's are
/// not linked.
fn explain_libraries(p: &Pair<'_>, decisions: &mut Vec<String>) {
    let need = p.needed_libs();
    for l in &need {
        let why: Vec<&str> = p
            .param
            .source_libs
            .iter()
            .filter(|(x, _)| x == l)
            .map(|(_, w)| w.as_str())
            .collect();
        if !p.param.build_libs.contains(l) {
            decisions.push(format!(
                "{}: links `{l}` ({}), although its build file does not say so",
                p.param.dir,
                why.join(", ")
            ));
        }
    }
    for l in p.param.build_libs.iter().filter(|l| !need.contains(l)) {
        decisions.push(format!(
            "{}: its build file links `{l}`, but no compiled source includes its headers (only the files the harness replaces use it?): not linked",
            p.param.dir
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_paths_and_families() {
        assert_eq!(id_from("FrodoKEM-AES.tar.gz"), "FrodoKEM-AES");
        assert_eq!(id_from("My Package (v2)"), "My-Package--v2");
        assert_eq!(
            relative(Path::new("/a/pkgs/x.tgz"), Path::new("/a/subs/x")),
            PathBuf::from("../../pkgs/x.tgz")
        );
        assert_eq!(
            family(&["ML-KEM-512", "ML-KEM-768", "ML-KEM-1024"], "x"),
            "ML-KEM"
        );
        assert_eq!(
            family(&["FrodoKEM-640-AES", "FrodoKEM-976-AES"], "x"),
            "FrodoKEM"
        );
        assert_eq!(
            family(&["FrodoKEM-640-SHAKE"], "frodo"),
            "FrodoKEM-640-SHAKE"
        );
        assert_eq!(family(&["A", "B"], "ab"), "ab");
    }
}
