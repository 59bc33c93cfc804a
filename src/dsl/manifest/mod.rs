//! Lowering of a submission manifest (`submissions/<id>/manifest.kdl`): report metadata and
//! source here; primitives (inline or included) in [`primitives`], the KAT settings and the
//! size catalog in [`catalog`], the matrix expansion of `instance` templates with `when`
//! blocks in [`matrix`].

mod catalog;
mod matrix;
mod primitives;

use std::collections::BTreeMap;
use std::path::Path;

use kdl::{KdlDocument, KdlEntry, KdlNode};
use miette::SourceSpan;

use super::diag::SourceFile;
use super::fs::normalize;
use super::load::Loader;
use super::reader::{args, name, name_span, Cx};
use crate::model::{Primitives, ReportMeta, Source, Submission};
use catalog::{lower_kat, lower_sizes};
use matrix::{expand_instances, lower_matrix};
use primitives::lower_primitives_node;

const SUBMISSION_NODES: [&str; 13] = [
    "algorithm",
    "category",
    "function",
    "versions",
    "note",
    "link",
    "source",
    "primitives",
    "kat",
    "sizes",
    "matrix",
    "instance",
    "when",
];
const REPEATABLE: [&str; 4] = ["note", "link", "instance", "when"];

/// Lowers one manifest; returns the submission and the span of its id, or `None` when
/// something was wrong (reported).
pub(crate) fn lower_manifest(
    loader: &mut Loader<'_>,
    file: &SourceFile,
    doc: &KdlDocument,
) -> Option<(Submission, SourceSpan)> {
    let mut diags = Vec::new();
    let before = loader.diags.len();
    let out = {
        let mut cx = Cx::new(file, &mut diags);
        lower_doc(&mut cx, loader, doc)
    };
    let clean = diags.is_empty() && loader.diags.len() == before;
    loader.diags.append(&mut diags);
    if clean {
        out
    } else {
        None
    }
}

fn lower_doc(
    cx: &mut Cx<'_>,
    loader: &mut Loader<'_>,
    doc: &KdlDocument,
) -> Option<(Submission, SourceSpan)> {
    let mut sub: Option<&KdlNode> = None;
    for n in doc.nodes() {
        if name(n) != "submission" {
            cx.unknown_node(n, "the manifest", &["submission"]);
        } else if let Some(first) = sub {
            cx.duplicate_node(first, n, "the manifest (one submission per manifest)");
        } else {
            sub = Some(n);
        }
    }
    let Some(n) = sub else {
        cx.missing_node(SourceSpan::new(0.into(), 0), "submission", "the manifest");
        return None;
    };
    cx.props(n, "`submission`", &[]);
    let id = cx.one_string_arg(n, "submission");
    let what = match &id {
        Some((id, _)) => format!("`submission \"{id}\"`"),
        None => "`submission`".to_string(),
    };
    if let Some((id, e)) = &id {
        check_id(cx, id, e, "submission id");
    }
    let children = cx.expect_children(n, "submission")?;
    let dir = cx
        .file
        .path()
        .parent()
        .unwrap_or(Path::new("/"))
        .to_path_buf();

    // Sort children by name; report unknown and repeated ones.
    let mut nodes: BTreeMap<&str, Vec<&KdlNode>> = BTreeMap::new();
    // Names that a misspelt node probably meant: not reported again as missing.
    let mut typos: Vec<&str> = Vec::new();
    for c in children.nodes() {
        let nm = name(c);
        if !SUBMISSION_NODES.contains(&nm) {
            typos.extend(cx.unknown_node(c, &what, &SUBMISSION_NODES));
            continue;
        }
        let list = nodes.entry(nm).or_default();
        if !REPEATABLE.contains(&nm) && !list.is_empty() {
            cx.duplicate_node(list[0], c, &what);
            continue;
        }
        list.push(c);
    }
    let one = |k: &str| nodes.get(k).and_then(|v| v.first().copied());
    let all = |k: &str| nodes.get(k).cloned().unwrap_or_default();
    let sub_span = name_span(n);

    let mut meta = ReportMeta::default();
    match one("algorithm") {
        Some(a) => {
            meta.algorithm = simple_string(cx, a).unwrap_or_default();
        }
        None if typos.contains(&"algorithm") => {}
        None => cx.missing_node(sub_span, "algorithm", &what),
    }
    meta.category = one("category").and_then(|c| simple_string(cx, c));
    meta.function = one("function").and_then(|c| simple_string(cx, c));
    if let Some(v) = one("versions") {
        plain_node(cx, v);
        meta.versions = cx
            .string_args(v, "versions", 1)
            .into_iter()
            .map(|(s, _)| s)
            .collect();
    }
    for note in all("note") {
        if let Some(s) = simple_string(cx, note) {
            meta.notes.push(s);
        }
    }
    for link in all("link") {
        plain_node(cx, link);
        let a: Vec<&KdlEntry> = args(link).collect();
        if a.len() != 2 {
            cx.error(
                name_span(link),
                "expected a title and a URL",
                format!(
                    "`link` takes two arguments (a title and a URL), found {}",
                    a.len()
                ),
            );
            continue;
        }
        if let (Some(t), Some(u)) = (
            cx.expect_string(a[0], "link"),
            cx.expect_string(a[1], "link"),
        ) {
            meta.links.push((t, u));
        }
    }

    let source = match one("source") {
        Some(s) => lower_source(cx, loader, s, &dir),
        None => {
            if !typos.contains(&"source") {
                cx.missing_node(sub_span, "source", &what);
            }
            None
        }
    };
    let primitives = match one("primitives") {
        Some(p) => lower_primitives_node(cx, loader, p, &dir),
        None => Some(Primitives::default()),
    };
    let kat = lower_kat(cx, loader, one("kat"), sub_span, &dir);
    let sizes = match one("sizes") {
        Some(s) => lower_sizes(cx, loader, s, &dir),
        None => BTreeMap::new(),
    };
    let matrix = match one("matrix") {
        Some(m) => lower_matrix(cx, m),
        None => Some(Vec::new()),
    };
    let instances = match &matrix {
        Some(matrix) => {
            if meta.versions.is_empty() {
                if let Some((_, vals)) = matrix.iter().find(|(k, _)| k == "impl") {
                    meta.versions = vals.clone();
                }
            }
            if typos.contains(&"instance") {
                Vec::new()
            } else {
                expand_instances(cx, &all("instance"), &all("when"), matrix, sub_span, &what)
            }
        }
        None => Vec::new(),
    };

    let (id, id_entry) = id?;
    let id_span = cx.value_span(id_entry);
    Some((
        Submission {
            id,
            manifest_path: cx.file.path().to_path_buf(),
            dir,
            meta,
            source: source?,
            primitives: primitives?,
            kat: kat?,
            sizes,
            instances,
        },
        id_span,
    ))
}

/// Ids end up in step ids `submission/instance/step`: no `/`, not empty.
fn check_id(cx: &mut Cx<'_>, id: &str, e: &KdlEntry, what: &str) {
    if id.trim().is_empty() || id.contains('/') {
        let s = cx.value_span(e);
        cx.error(
            s,
            "invalid id",
            format!("{what} `{id}` must be non-empty and must not contain `/`"),
        );
    }
}

/// A node with only arguments (no properties, no children).
fn plain_node(cx: &mut Cx<'_>, n: &KdlNode) {
    let nm = name(n).to_string();
    cx.props(n, &format!("`{nm}`"), &[]);
    cx.no_children(n, &nm);
}

/// A node holding one string argument and nothing else.
fn simple_string(cx: &mut Cx<'_>, n: &KdlNode) -> Option<String> {
    plain_node(cx, n);
    let nm = name(n).to_string();
    cx.one_string_arg(n, &nm).map(|(s, _)| s)
}

fn lower_source(cx: &mut Cx<'_>, loader: &Loader<'_>, n: &KdlNode, dir: &Path) -> Option<Source> {
    cx.no_args(n, "source");
    cx.no_children(n, "source");
    let props = cx.props(n, "`source`", &["path", "crate", "version", "root"]);
    match (props.get("path"), props.get("crate")) {
        (Some(_), Some(c)) => {
            let span = c.name().map(|i| i.span()).unwrap_or(c.span());
            cx.error(
                span,
                "second kind of source",
                "`source` takes either `path` or `crate`, not both",
            );
            None
        }
        (Some(p), None) => {
            for k in ["version", "root"] {
                if let Some(e) = props.get(k) {
                    let span = e.name().map(|i| i.span()).unwrap_or(e.span());
                    cx.error(
                        span,
                        "only for crates",
                        format!("property `{k}` applies only to `source crate=...`"),
                    );
                }
            }
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
            Some(Source::Path { path: abs })
        }
        (None, Some(c)) => {
            let name = cx.expect_string(c, "crate");
            let version = match props.get("version") {
                Some(v) => cx.expect_string(v, "version"),
                None => {
                    cx.missing_prop(n, "version", "`source crate=...`");
                    None
                }
            };
            let root = match props.get("root") {
                Some(r) => cx.expect_string(r, "root"),
                None => Some(String::new()),
            };
            Some(Source::Crate {
                name: name?,
                version: version?,
                root: root?,
            })
        }
        (None, None) => {
            cx.error(
                name_span(n),
                "`path` or `crate` missing",
                "missing required property `path` or `crate` on `source`",
            );
            None
        }
    }
}
