//! Submission-wide settings that every instance gets: `api "nist"`, `exclude` and the
//! system libraries of `link "crypto"` (a `link` with one argument; with two it is a link
//! shown in the report). `when` blocks add to the last two per instance.

use kdl::{KdlEntry, KdlNode};
use miette::SourceSpan;

use super::super::diag::{did_you_mean, line_col};
use super::super::reader::{args, name_span, NodeReader};
use super::plain_node;
use crate::model::{Api, Pos};

/// What a submission gives all of its instances.
#[derive(Debug, Default)]
pub(super) struct Wide {
    pub api: Api,
    pub exclude: Vec<String>,
    /// System libraries, with where each is named (for `check --deep`).
    pub libraries: Vec<(String, Pos)>,
}

/// `api "nist"`; `None` when wrong (reported).
pub(super) fn lower_api(cx: &mut NodeReader<'_>, n: &KdlNode) -> Option<Api> {
    plain_node(cx, n);
    let (v, e) = cx.one_string_arg(n, "api")?;
    match v.as_str() {
        "nist" => Some(Api::Nist),
        "namespaced" => Some(Api::Namespaced),
        other => {
            let s = cx.value_span(e);
            let d = cx
                .diag(format!(
                    "unknown api `{other}`, expected `nist` (a NIST-round package: un-prefixed `crypto_kem_*`, NIST's `randombytes`) or `namespaced` (PQClean: every instance has a `namespace`)"
                ))
                .label(s, "unknown api")
                .maybe_help(did_you_mean(other, ["nist", "namespaced"]));
            cx.push(d);
            None
        }
    }
}

/// What is wrong with a system library name (`crypto`, `gmp`), if anything.
pub(crate) fn library_problem(name: &str) -> Option<String> {
    let plain = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '.' | '-'));
    let stem = name.strip_prefix("-l").unwrap_or(name);
    let stem = stem.rsplit('/').next().unwrap_or(stem);
    let stem = stem.strip_prefix("lib").unwrap_or(stem);
    let stem = stem.split(".so").next().unwrap_or(stem);
    let stem = stem.strip_suffix(".a").unwrap_or(stem);
    let guess = |what: &str| {
        if !stem.is_empty() && stem != name && library_problem(stem).is_none() {
            format!("{what}; write `link \"{stem}\"`")
        } else {
            what.to_string()
        }
    };
    if name.starts_with('-') {
        Some(guess("is a linker option, not a library name"))
    } else if name.contains('/') {
        Some(guess("is a path, not a library name"))
    } else if !plain {
        Some("is not a plain library name (letters, digits, `_`, `+`, `.`, `-`)".to_string())
    } else if name.starts_with("lib") || name.contains(".so") || name.ends_with(".a") {
        Some(guess("names a file, not a library"))
    } else {
        None
    }
}

/// The position of `s` in the file `cx` reads.
pub(super) fn pos_of(cx: &NodeReader<'_>, s: SourceSpan) -> Pos {
    let (line, col) = line_col(cx.file.text(), s.offset());
    Pos {
        offset: s.offset(),
        len: s.len(),
        line,
        col,
    }
}

/// Checks one library name at `e`; the name when it is plain, with where it is written.
pub(super) fn library(cx: &mut NodeReader<'_>, e: &KdlEntry) -> Option<(String, Pos)> {
    let name = cx.expect_string(e, "link")?;
    let s = cx.value_span(e);
    match library_problem(&name) {
        None => Some((name, pos_of(cx, s))),
        Some(p) => {
            let d = cx
                .diag(format!("`link` `{name}` {p}"))
                .label(s, "not a library name")
                .help("`link \"crypto\"` links a system library by name (as `-lcrypto`): the engine finds its file with pkg-config or the compiler's search path");
            cx.push(d);
            None
        }
    }
}

/// One `link` node: a system library (one argument) goes into `libraries`; a report link
/// (a title and a URL) into `links`.
pub(super) fn lower_link(
    cx: &mut NodeReader<'_>,
    n: &KdlNode,
    libraries: &mut Vec<(String, Pos)>,
    links: &mut Vec<(String, String)>,
) {
    plain_node(cx, n);
    let a: Vec<&KdlEntry> = args(n).collect();
    match a.len() {
        1 => {
            if let Some(l) = library(cx, a[0]) {
                if !libraries.iter().any(|(x, _)| *x == l.0) {
                    libraries.push(l);
                }
            }
        }
        2 => {
            if let (Some(t), Some(u)) = (cx.expect_string(a[0], "link"), cx.expect_string(a[1], "link")) {
                if !u.contains("://") {
                    let s = cx.value_span(a[1]);
                    let d = cx
                        .diag(format!("`link` `{u}` is not a URL"))
                        .label(s, "not a URL")
                        .help("`link \"Title\" \"https://...\"` is a link shown in the report; to link system libraries write one `link \"name\"` per library");
                    cx.push(d);
                } else {
                    links.push((t, u));
                }
            }
        }
        k => cx.error(
            name_span(n),
            "expected a library, or a title and a URL",
            format!(
                "`link` takes a system library name (`link \"crypto\"`) or a title and a URL (`link \"Source\" \"https://...\"`), found {k} arguments"
            ),
        ),
    }
}

/// `exclude "rng.c" "PQCgenKAT_kem.c"`: glob patterns over the file names of every
/// instance's folder.
pub(super) fn lower_exclude(cx: &mut NodeReader<'_>, n: &KdlNode, out: &mut Vec<String>) {
    plain_node(cx, n);
    for (p, e) in cx.string_args(n, "exclude", 1) {
        if let Err(err) = globset::Glob::new(&p) {
            let s = cx.value_span(e);
            cx.error(
                s,
                "not a pattern",
                format!("bad `exclude` pattern `{p}`: {err}"),
            );
        } else {
            out.push(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_names_are_plain() {
        assert_eq!(library_problem("crypto"), None);
        assert_eq!(library_problem("gmp"), None);
        assert_eq!(library_problem("stdc++"), None);
        for (bad, hint) in [
            ("-lcrypto", "write `link \"crypto\"`"),
            (
                "/usr/lib/x86_64-linux-gnu/libcrypto.so",
                "write `link \"crypto\"`",
            ),
            ("libcrypto.so.3", "write `link \"crypto\"`"),
            ("-Wl,--wrap=x", "linker option"),
            ("crypto gmp", "not a plain library name"),
        ] {
            let p = library_problem(bad).unwrap_or_default();
            assert!(p.contains(hint), "{bad}: {p}");
        }
    }
}
