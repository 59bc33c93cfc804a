//! Lowering of a submission manifest (`submissions/<id>/manifest.kdl`): report metadata and
//! source here; primitives (inline or included) in [`primitives`], the KAT settings and the
//! size catalog in [`catalog`], the matrix expansion of `instance` templates with `when`
//! blocks in [`matrix`], known-benign constant-time findings in [`ct_benign`].

mod catalog;
mod confine;
mod ct_benign;
mod matrix;
mod primitives;
mod source;
mod templates;
mod when;
mod wide;

pub(crate) use wide::library_problem;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kdl::{KdlDocument, KdlEntry, KdlNode};
use miette::SourceSpan;

use super::diag::SourceFile;
use super::loader::Loader;
use super::reader::{name, name_span, NodeReader};
use crate::model::{Api, Primitives, ReportMeta, Submission};
use crate::safe_fs::normalize;
use catalog::{check_kat_file, check_size_keys, lower_kat, lower_sizes};
use matrix::{expand_instances, lower_matrix, Shared};
use primitives::lower_primitives_node;
use source::lower_source;
use wide::{lower_api, lower_exclude, lower_link, Wide};

const SUBMISSION_NODES: [&str; 17] = [
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
    "nist-category",
    "ct-benign",
    "api",
    "exclude",
];
const REPEATABLE: [&str; 7] = [
    "note",
    "link",
    "instance",
    "when",
    "nist-category",
    "ct-benign",
    "exclude",
];

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
        let mut cx = NodeReader::new(file, &mut diags);
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

/// A `submission` node's children sorted by name, with the names a misspelt node probably
/// meant (not reported again as missing).
struct Children<'a> {
    nodes: BTreeMap<&'a str, Vec<&'a KdlNode>>,
    typos: Vec<&'a str>,
}

impl<'a> Children<'a> {
    /// Sort `children` by name; report unknown and repeated ones.
    fn sort(cx: &mut NodeReader<'_>, children: &'a KdlDocument, what: &str) -> Self {
        let mut nodes: BTreeMap<&str, Vec<&KdlNode>> = BTreeMap::new();
        let mut typos = Vec::new();
        for c in children.nodes() {
            let nm = name(c);
            if !SUBMISSION_NODES.contains(&nm) {
                typos.extend(cx.unknown_node(c, what, &SUBMISSION_NODES));
                continue;
            }
            let list = nodes.entry(nm).or_default();
            if !REPEATABLE.contains(&nm) && !list.is_empty() {
                cx.duplicate_node(list[0], c, what);
                continue;
            }
            list.push(c);
        }
        Children { nodes, typos }
    }

    fn one(&self, k: &str) -> Option<&'a KdlNode> {
        self.nodes.get(k).and_then(|v| v.first().copied())
    }

    fn all(&self, k: &str) -> Vec<&'a KdlNode> {
        self.nodes.get(k).cloned().unwrap_or_default()
    }

    fn misspelt(&self, k: &str) -> bool {
        self.typos.contains(&k)
    }
}

/// The manifest's one `submission` node (others and unknown nodes reported).
fn submission_node<'a>(cx: &mut NodeReader<'_>, doc: &'a KdlDocument) -> Option<&'a KdlNode> {
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
    if sub.is_none() {
        cx.missing_node(SourceSpan::new(0.into(), 0), "submission", "the manifest");
    }
    sub
}

fn lower_doc(
    cx: &mut NodeReader<'_>,
    loader: &mut Loader<'_>,
    doc: &KdlDocument,
) -> Option<(Submission, SourceSpan)> {
    let n = submission_node(cx, doc)?;
    cx.props(n, "`submission`", &[]);
    let id = cx.one_string_arg(n, "submission");
    let what = match &id {
        Some((id, _)) => format!("`submission \"{id}\"`"),
        None => "`submission`".to_string(),
    };
    if let Some((id, e)) = &id {
        let s = cx.value_span(e);
        check_id(cx, id, s, "submission id");
    }
    let children = cx.expect_children(n, "submission")?;
    let dir = cx
        .file
        .path()
        .parent()
        .unwrap_or(Path::new("/"))
        .to_path_buf();
    let ch = Children::sort(cx, children, &what);
    let sub_span = name_span(n);
    let (mut meta, wide, api) = lower_meta(cx, &ch, sub_span, &what);
    let source = match ch.one("source") {
        Some(s) => lower_source(cx, loader, s, &dir),
        None => {
            if !ch.misspelt("source") {
                cx.missing_node(sub_span, "source", &what);
            }
            None
        }
    };
    let primitives = match ch.one("primitives") {
        Some(p) => lower_primitives_node(cx, loader, p, &dir),
        None => Some(Primitives::default()),
    };
    let (kat, kat_submitted) = lower_kat(cx, loader, ch.one("kat"), sub_span, &dir);
    let ct_benign = ct_benign::lower_ct_benign(cx, &ch.all("ct-benign"));
    let mut size_keys = Vec::new();
    let sizes = match ch.one("sizes") {
        Some(s) => lower_sizes(cx, loader, s, &dir, &mut size_keys),
        None => BTreeMap::new(),
    };
    let shared = Shared {
        sub_span,
        what: &what,
        wide: &wide,
        kat_submitted,
    };
    let (instances, ids_complete) = lower_instances(cx, &ch, &shared, &mut meta);
    // `when ... { kat-submitted ... }` alone also makes the package's files the answer.
    let mut kat = kat;
    if let Some(k) = &mut kat {
        k.submitted |= instances.iter().any(|i| i.kat_submitted.is_some());
    }
    // Catalog keys are checked against the instances when they all expanded.
    if ids_complete {
        if let Some(kat) = &kat {
            check_kat_file(loader, cx.file, kat, &instances);
        }
        check_size_keys(loader, &size_keys, &instances);
    }
    if let (Some(crate::model::Source::Path { path }), Some(p)) = (&source, &primitives) {
        let nodes = confine::Nodes {
            source: ch.one("source"),
            primitives: ch.one("primitives"),
            kat: ch.one("kat"),
            whens: ch.all("when"),
        };
        if !confine::check_links(cx, loader, path, &nodes, p, &instances) {
            return None;
        }
    }
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
            ct_benign,
            api: api?,
        },
        id_span,
    ))
}

/// The report metadata (`algorithm`, `category`, `function`, `versions`, `note`, `link`),
/// what applies to every instance (`link`, `exclude`, `api`) and the API (`None` when
/// wrong, reported).
fn lower_meta(
    cx: &mut NodeReader<'_>,
    ch: &Children<'_>,
    sub_span: SourceSpan,
    what: &str,
) -> (ReportMeta, Wide, Option<Api>) {
    let mut meta = ReportMeta::default();
    match ch.one("algorithm") {
        Some(a) => {
            meta.algorithm = simple_string(cx, a).unwrap_or_default();
        }
        None if ch.misspelt("algorithm") => {}
        None => cx.missing_node(sub_span, "algorithm", what),
    }
    meta.category = ch.one("category").and_then(|c| simple_string(cx, c));
    meta.function = ch.one("function").and_then(|c| simple_string(cx, c));
    if let Some(v) = ch.one("versions") {
        plain_node(cx, v);
        meta.versions = cx
            .string_args(v, "versions", 1)
            .into_iter()
            .map(|(s, _)| s)
            .collect();
    }
    for note in ch.all("note") {
        if let Some(s) = simple_string(cx, note) {
            meta.notes.push(s);
        }
    }
    let mut wide = Wide::default();
    for link in ch.all("link") {
        lower_link(cx, link, &mut wide.libraries, &mut meta.links);
    }
    for ex in ch.all("exclude") {
        lower_exclude(cx, ex, &mut wide.exclude);
    }
    let api = match ch.one("api") {
        Some(a) => lower_api(cx, a),
        None => Some(Api::Namespaced),
    };
    wide.api = api.unwrap_or_default();
    (meta, wide, api)
}

/// The `matrix` expanded over the `instance` templates and `when` blocks, with their NIST
/// categories; whether every instance expanded (so that catalog keys can be checked). The
/// matrix's `impl` values are the versions when the manifest names none.
fn lower_instances(
    cx: &mut NodeReader<'_>,
    ch: &Children<'_>,
    shared: &Shared<'_, '_>,
    meta: &mut ReportMeta,
) -> (Vec<crate::model::Instance>, bool) {
    let matrix = match ch.one("matrix") {
        Some(m) => lower_matrix(cx, m),
        None => Some(Vec::new()),
    };
    let Some(matrix) = matrix else {
        return (Vec::new(), false);
    };
    if meta.versions.is_empty() {
        if let Some((_, vals)) = matrix.iter().find(|(k, _)| k == "impl") {
            meta.versions = vals.clone();
        }
    }
    if ch.misspelt("instance") {
        return (Vec::new(), false);
    }
    let mut instances = expand_instances(cx, &ch.all("instance"), &ch.all("when"), &matrix, shared);
    crate::dsl::category::apply(cx, &ch.all("nist-category"), &matrix, &mut instances.0);
    instances
}

/// What is wrong with an id, if anything. Ids name folders under the outputs and appear in
/// step ids `submission/instance/step`: letters, digits and `-_.+`, no `..`.
pub(crate) fn id_problem(id: &str) -> Option<&'static str> {
    if id.is_empty() {
        Some("must not be empty")
    } else if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+'))
    {
        Some("may use only letters, digits, `-`, `_`, `.` and `+`")
    } else if id.contains("..") || id == "." {
        Some("must not be `.` or contain `..`")
    } else {
        None
    }
}

/// Reports an invalid id at `span`; false when it was invalid.
fn check_id(cx: &mut NodeReader<'_>, id: &str, span: SourceSpan, what: &str) -> bool {
    match id_problem(id) {
        Some(p) => {
            let d = cx
                .diag(format!("{what} `{id}` {p}"))
                .label(span, "invalid id")
                .help("ids name folders under the outputs and parts of step ids");
            cx.push(d);
            false
        }
        None => true,
    }
}

/// A path named in a manifest (`kat manifest=`, `sizes catalog=`, `primitives include=`,
/// `kat reference=`), resolved against the manifest's folder. It must stay inside that
/// folder or inside the pipeline's `submissions-root` when one is set; links are followed
/// before comparing. An escape is reported at `e` and gives `None`.
pub(super) fn confined_path(
    cx: &mut NodeReader<'_>,
    loader: &Loader<'_>,
    dir: &Path,
    rel: &str,
    e: &KdlEntry,
    what: &str,
) -> Option<PathBuf> {
    let abs = normalize(&dir.join(rel));
    let fs = loader.fs;
    let real = fs.canonical(&abs);
    let inside = |root: &Path| real.starts_with(fs.canonical(root));
    if inside(dir) || loader.submissions_root.as_deref().is_some_and(inside) {
        return Some(abs);
    }
    let (root, root_name) = match &loader.submissions_root {
        Some(r) => (
            r.as_path(),
            "the manifest's folder and the pipeline's `submissions-root`",
        ),
        None => (dir, "the manifest's folder"),
    };
    let span = cx.value_span(e);
    let help = if loader.submissions_root.is_some() {
        format!("keep the file under {}", fs.display(root))
    } else {
        "keep the file beside the manifest, or let the pipeline allow a wider folder with `submissions-root \"../submissions\"`".to_string()
    };
    let d = cx
        .diag(format!(
            "{what} `{rel}` is outside {root_name} ({})",
            fs.display(root)
        ))
        .label(span, "outside the allowed folder")
        .help(help);
    cx.push(d);
    None
}

/// A crates.io package name: ASCII letters, digits, `-` and `_`, starting with a letter,
/// at most 64 characters (the registry's rule).
fn crate_name_ok(name: &str) -> bool {
    name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A relative path without `..`, `.` or a root: it stays inside the folder it is joined to.
pub(super) fn plain_relative(p: &str) -> bool {
    !p.is_empty()
        && Path::new(p)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// A node with only arguments (no properties, no children).
fn plain_node(cx: &mut NodeReader<'_>, n: &KdlNode) {
    let nm = name(n).to_string();
    cx.props(n, &format!("`{nm}`"), &[]);
    cx.no_children(n, &nm);
}

/// A node holding one string argument and nothing else.
fn simple_string(cx: &mut NodeReader<'_>, n: &KdlNode) -> Option<String> {
    plain_node(cx, n);
    let nm = name(n).to_string();
    cx.one_string_arg(n, &nm).map(|(s, _)| s)
}
