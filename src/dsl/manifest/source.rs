//! The `source` node of a manifest (a folder, a crates.io package or an archive) and the
//! rule every path inside the source must follow: relative, and not climbing out of the
//! source root with `..` ([`root_path_problem`]; with links followed, [`super::confine`]).
//! A `source path=` folder itself must lie, links followed, inside the folders a manifest
//! may name files in: its own folder or the pipeline's `submissions-root`
//! ([`super::confined_path`]), so `source path="../../../.."` with `include "root"` is
//! refused rather than showing `/root` to the compiler.

use std::path::{Component, Path};

use kdl::{KdlEntry, KdlNode};

use super::super::loader::Loader;
use super::super::reader::{name_span, NodeReader};
use super::{confined_path, crate_name_ok, plain_relative};
use crate::model::Source;
use crate::safe_fs::normalize;

/// What is wrong with a path that must stay inside the source root (`sources`, `include`,
/// `header`, instance `dir`s, `kat submitted=`), if anything. `a/../b` is fine; `/x` and
/// `../x` are not.
pub(crate) fn root_path_problem(p: &str) -> Option<&'static str> {
    if p.is_empty() {
        return Some("is empty");
    }
    let mut depth = 0i64;
    for c in Path::new(p).components() {
        match c {
            Component::RootDir | Component::Prefix(_) => return Some("is absolute"),
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return Some("climbs out of the source root with `..`");
                }
            }
            Component::CurDir => {}
            Component::Normal(_) => depth += 1,
        }
    }
    None
}

/// Reports `p` at `e` when it leaves the source root; false then.
pub(crate) fn check_root_path(cx: &mut NodeReader<'_>, p: &str, e: &KdlEntry, what: &str) -> bool {
    let Some(problem) = root_path_problem(p) else {
        return true;
    };
    let s = cx.value_span(e);
    let d = cx
        .diag(format!("{what} `{p}` {problem}"))
        .label(s, "outside the source")
        .help("paths in a manifest's sources are relative to the source root (the `source` folder, crate root or archive root) and stay inside it");
    cx.push(d);
    false
}

/// The span of a property's name, for "this property" errors.
fn prop_span(e: &KdlEntry) -> miette::SourceSpan {
    e.name().map(|i| i.span()).unwrap_or(e.span())
}

pub(super) fn lower_source(
    cx: &mut NodeReader<'_>,
    loader: &Loader<'_>,
    n: &KdlNode,
    dir: &Path,
) -> Option<Source> {
    cx.no_args(n, "source");
    cx.no_children(n, "source");
    let props = cx.props(
        n,
        "`source`",
        &["path", "crate", "archive", "version", "root", "sha256"],
    );
    let kinds: Vec<&str> = ["path", "crate", "archive"]
        .into_iter()
        .filter(|k| props.contains_key(k))
        .collect();
    if kinds.len() > 1 {
        let e = props[kinds[1]];
        cx.error(
            prop_span(e),
            "second kind of source",
            format!(
                "`source` takes one of `path`, `crate` or `archive`, not both `{}` and `{}`",
                kinds[0], kinds[1]
            ),
        );
        return None;
    }
    let only_for = |cx: &mut NodeReader<'_>, keys: &[&str], kind: &str| {
        for k in keys {
            if let Some(e) = props.get(k) {
                cx.error(
                    prop_span(e),
                    "not for this kind",
                    format!("property `{k}` does not apply to `source {kind}=...`"),
                );
            }
        }
    };
    match kinds.first().copied() {
        Some("path") => {
            only_for(cx, &["version", "root", "sha256"], "path");
            let p = props["path"];
            let rel = cx.expect_string(p, "path")?;
            let abs = normalize(&dir.join(&rel));
            if !loader.fs.is_dir(&abs) {
                let span = cx.value_span(p);
                let resolved = loader.fs.display(&abs);
                let msg = if loader.fs.exists(&abs) {
                    format!("source path `{rel}` is not a folder (resolved to {resolved})")
                } else {
                    format!("source path `{rel}` does not exist (resolved to {resolved})")
                };
                let d = cx
                    .diag(msg)
                    .label(span, "no such folder")
                    .help("the path is relative to the manifest's folder");
                cx.push(d);
                return None;
            }
            confined_path(cx, loader, dir, &rel, p, "source path")?;
            Some(Source::Path { path: abs })
        }
        Some("crate") => {
            only_for(cx, &["sha256"], "crate");
            lower_crate(cx, n, &props)
        }
        Some(_) => {
            only_for(cx, &["version"], "archive");
            lower_archive(cx, loader, n, &props, dir)
        }
        None => {
            cx.error(
                name_span(n),
                "`path`, `crate` or `archive` missing",
                "missing required property `path`, `crate` or `archive` on `source`",
            );
            None
        }
    }
}

/// `root=`: a folder inside the crate or archive; empty when absent.
fn lower_root(
    cx: &mut NodeReader<'_>,
    props: &std::collections::BTreeMap<&str, &KdlEntry>,
    inside: &str,
) -> Option<String> {
    match props.get("root") {
        Some(r) => cx.expect_string(r, "root").filter(|root| {
            let ok = plain_relative(root);
            if !ok {
                let s = cx.value_span(r);
                let label = if inside == "crate" {
                    "leaves the crate"
                } else {
                    "leaves the archive"
                };
                cx.error(
                    s,
                    label,
                    format!(
                        "`root` `{root}` must be a folder inside the {inside} (relative, no `..`)"
                    ),
                );
            }
            ok
        }),
        None => Some(String::new()),
    }
}

fn lower_crate(
    cx: &mut NodeReader<'_>,
    n: &KdlNode,
    props: &std::collections::BTreeMap<&str, &KdlEntry>,
) -> Option<Source> {
    let c = props["crate"];
    let name = cx.expect_string(c, "crate").filter(|name| {
        let ok = crate_name_ok(name);
        if !ok {
            let s = cx.value_span(c);
            cx.error(
                s,
                "not a crate name",
                format!("`{name}` is not a crates.io package name (letters, digits, `-`, `_`; starting with a letter)"),
            );
        }
        ok
    });
    let version = match props.get("version") {
        Some(v) => cx.expect_string(v, "version").filter(|ver| {
            let parsed = semver::Version::parse(ver);
            if let Err(err) = &parsed {
                let s = cx.value_span(v);
                let d = cx
                    .diag(format!(
                        "crate version `{ver}` is not an exact semver version: {err}"
                    ))
                    .label(s, "not a version")
                    .help("give the exact version published on crates.io, e.g. `0.1.1`");
                cx.push(d);
            }
            parsed.is_ok()
        }),
        None => {
            cx.missing_prop(n, "version", "`source crate=...`");
            None
        }
    };
    let root = lower_root(cx, props, "crate");
    Some(Source::Crate {
        name: name?,
        version: version?,
        root: root?,
    })
}

fn lower_archive(
    cx: &mut NodeReader<'_>,
    loader: &Loader<'_>,
    n: &KdlNode,
    props: &std::collections::BTreeMap<&str, &KdlEntry>,
    dir: &Path,
) -> Option<Source> {
    let a = props["archive"];
    let rel = cx.expect_string(a, "archive")?;
    let abs = normalize(&dir.join(&rel));
    let span = cx.value_span(a);
    if crate::archive::kind_of(&abs).is_none() {
        cx.error(
            span,
            "unknown kind of archive",
            format!("archive `{rel}` is not a .tar, .tar.gz, .tgz or .zip file"),
        );
        return None;
    }
    if !loader.fs.exists(&abs) || loader.fs.is_dir(&abs) {
        let d = cx
            .diag(format!(
                "archive `{rel}` does not exist (resolved to {})",
                loader.fs.display(&abs)
            ))
            .label(span, "no such file")
            .help("the path is relative to the manifest's folder");
        cx.push(d);
        return None;
    }
    let sha256 = match props.get("sha256") {
        Some(e) => cx.expect_string(e, "sha256").filter(|h| {
            let ok = h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit());
            if !ok {
                let s = cx.value_span(e);
                cx.error(
                    s,
                    "not a SHA-256",
                    format!("`sha256` `{h}` is not a SHA-256 digest (64 hexadecimal digits)"),
                );
            }
            ok
        }),
        None => {
            cx.missing_prop(n, "sha256", "`source archive=...`");
            None
        }
    }?
    .to_ascii_lowercase();
    if let Some(actual) = loader.fs.sha256(&abs) {
        if actual != sha256 {
            let s = cx.value_span(props["sha256"]);
            let d = cx
                .diag(format!(
                    "archive `{rel}` has SHA-256 {actual}, the manifest pins {sha256}"
                ))
                .label(s, "pinned here")
                .help("the package changed since the manifest was written: check what changed, then pin the new digest (`sha256sum` prints it)");
            cx.push(d);
            return None;
        }
    }
    let root = lower_root(cx, props, "archive")?;
    Some(Source::Archive {
        path: abs,
        sha256,
        root,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_paths_stay_inside() {
        assert_eq!(root_path_problem("common/fips202.c"), None);
        assert_eq!(root_path_problem("a/b/../../c.c"), None);
        assert_eq!(root_path_problem("/etc/hostname.c"), Some("is absolute"));
        assert!(root_path_problem("../../../../../../etc/hostname.c")
            .unwrap()
            .contains("climbs out"));
        assert!(root_path_problem("a/../../b")
            .unwrap()
            .contains("climbs out"));
    }
}
