//! Lowering of a submission manifest (`submissions/<id>/manifest.kdl`): report metadata,
//! source, primitives (inline or included), KAT settings, size catalog, and the matrix
//! expansion of `instance` templates with `when` blocks.

use std::collections::BTreeMap;
use std::path::Path;

use kdl::{KdlDocument, KdlEntry, KdlNode};
use miette::SourceSpan;

use super::diag::{backticked, did_you_mean, Diagnostic, SourceFile};
use super::fs::normalize;
use super::load::{missing_file, Loader};
use super::pipeline::words;
use super::reader::{args, name, name_span, Cx};
use super::template::{parse_template, undefined_var, Template};
use crate::model::{
    CatalogSizes, Instance, KatRng, KatSettings, PrimitiveFn, Primitives, ReportMeta, Source,
    Submission,
};

const SUBMISSION_NODES: [&str; 14] = [
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
];
const REPEATABLE: [&str; 5] = ["note", "link", "instance", "when", "nist-category"];
const PRIMITIVES_NODES: [&str; 5] = ["sources", "include", "header", "hash", "drng"];
const WHEN_NODES: [&str; 4] = ["cflags", "sources", "requires-cpu", "exclude"];
/// A matrix larger than this is refused (it is surely a mistake, and memory is finite).
const MAX_MATRIX: usize = 100_000;

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
                let mut instances =
                    expand_instances(cx, &all("instance"), &all("when"), matrix, sub_span, &what);
                super::category::apply(cx, &all("nist-category"), matrix, &mut instances);
                instances
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

fn lower_primitives_node(
    cx: &mut Cx<'_>,
    loader: &mut Loader<'_>,
    n: &KdlNode,
    dir: &Path,
) -> Option<Primitives> {
    cx.no_args(n, "primitives");
    let props = cx.props(n, "`primitives`", &["include"]);
    match (props.get("include"), n.children()) {
        (Some(e), Some(_)) => {
            let s = cx.value_span(e);
            cx.error(
                s,
                "include given here",
                "`primitives` takes either `include=` or a block, not both",
            );
            None
        }
        (Some(e), None) => {
            let rel = cx.expect_string(e, "include")?;
            let abs = normalize(&dir.join(&rel));
            if let Some(cached) = loader.primitives.get(&abs) {
                return cached.clone();
            }
            let span = cx.value_span(e);
            let result = match loader.load_named(&abs, cx.file, span, "primitives file", &rel) {
                Some((pfile, pdoc)) => {
                    let mut pdiags = Vec::new();
                    let p = {
                        let mut pcx = Cx::new(&pfile, &mut pdiags);
                        lower_primitives_file(&mut pcx, &pdoc)
                    };
                    let ok = pdiags.is_empty();
                    loader.diags.append(&mut pdiags);
                    p.filter(|_| ok)
                }
                None => None,
            };
            loader.primitives.insert(abs, result.clone());
            result
        }
        (None, Some(c)) => lower_primitives_block(cx, c),
        (None, None) => {
            cx.error(
                name_span(n),
                "empty",
                "`primitives` needs `include=\"file.kdl\"` or a `{ ... }` block",
            );
            None
        }
    }
}

fn lower_primitives_file(cx: &mut Cx<'_>, doc: &KdlDocument) -> Option<Primitives> {
    let mut found: Option<&KdlNode> = None;
    for n in doc.nodes() {
        if name(n) != "primitives" {
            cx.unknown_node(n, "a primitives file", &["primitives"]);
        } else if let Some(first) = found {
            cx.duplicate_node(first, n, "a primitives file");
        } else {
            found = Some(n);
        }
    }
    let Some(n) = found else {
        cx.missing_node(
            SourceSpan::new(0.into(), 0),
            "primitives",
            "a primitives file",
        );
        return None;
    };
    cx.no_args(n, "primitives");
    cx.props(n, "`primitives` in an included file", &[]);
    let c = cx.expect_children(n, "primitives")?;
    lower_primitives_block(cx, c)
}

fn lower_primitives_block(cx: &mut Cx<'_>, doc: &KdlDocument) -> Option<Primitives> {
    let mut p = Primitives::default();
    let mut drng: Option<&KdlNode> = None;
    for n in doc.nodes() {
        let nm = name(n);
        if !PRIMITIVES_NODES.contains(&nm) {
            cx.unknown_node(n, "`primitives`", &PRIMITIVES_NODES);
            continue;
        }
        cx.no_children(n, nm);
        match nm {
            "hash" => {
                let props = cx.props(n, "`hash`", &["family"]);
                let family = match props.get("family") {
                    Some(e) => cx.expect_string(e, "family"),
                    None => {
                        cx.missing_prop(n, "family", "`hash`");
                        None
                    }
                };
                let syms = cx.string_args(n, "hash", 1);
                if let Some(family) = family {
                    for (symbol, _) in syms {
                        p.functions.push(PrimitiveFn {
                            symbol,
                            family: family.clone(),
                        });
                    }
                }
            }
            "drng" => {
                if let Some(first) = drng {
                    cx.duplicate_node(first, n, "`primitives`");
                    continue;
                }
                drng = Some(n);
                cx.props(n, "`drng`", &[]);
                p.drng = cx.one_string_arg(n, "drng").map(|(s, _)| s);
            }
            _ => {
                cx.props(n, &format!("`{nm}`"), &[]);
                let vals = cx.string_args(n, nm, 1).into_iter().map(|(s, _)| s);
                match nm {
                    "sources" => p.sources.extend(vals),
                    "include" => p.includes.extend(vals),
                    _ => p.headers.extend(vals),
                }
            }
        }
    }
    Some(p)
}

fn lower_kat(
    cx: &mut Cx<'_>,
    loader: &Loader<'_>,
    n: Option<&KdlNode>,
    sub_span: SourceSpan,
    dir: &Path,
) -> Option<KatSettings> {
    let mut rng = Some(KatRng::Nist);
    let mut manifest_rel = "kat.sha256".to_string();
    let mut manifest_span = sub_span;
    let mut all_count = Some(100u32);
    let mut reference_dir = None;
    if let Some(n) = n {
        cx.no_args(n, "kat");
        cx.no_children(n, "kat");
        manifest_span = name_span(n);
        let props = cx.props(n, "`kat`", &["rng", "manifest", "all-count", "reference"]);
        if let Some(e) = props.get("rng") {
            rng = match cx.expect_string(e, "rng").as_deref() {
                Some("nist") => Some(KatRng::Nist),
                Some("hqc") => Some(KatRng::Hqc),
                Some(other) => {
                    let s = cx.value_span(e);
                    let d = cx
                        .diag(format!(
                            "unknown kat rng `{other}`, expected one of `nist`, `hqc`"
                        ))
                        .label(s, "unknown rng")
                        .maybe_help(did_you_mean(other, ["nist", "hqc"]));
                    cx.push(d);
                    None
                }
                None => None,
            };
        }
        if let Some(e) = props.get("manifest") {
            manifest_rel = cx.expect_string(e, "manifest")?;
            manifest_span = cx.value_span(e);
        }
        if let Some(e) = props.get("all-count") {
            all_count = cx.expect_int_as::<u32>(e, "all-count", 1);
        }
        if let Some(e) = props.get("reference") {
            reference_dir = cx
                .expect_string(e, "reference")
                .map(|r| normalize(&dir.join(r)));
        }
    }
    let manifest = normalize(&dir.join(&manifest_rel));
    if !loader.fs.exists(&manifest) || loader.fs.is_dir(&manifest) {
        let e = std::io::Error::new(std::io::ErrorKind::NotFound, "not found");
        let d = missing_file(
            loader.fs,
            cx.file,
            manifest_span,
            "kat manifest",
            &manifest_rel,
            &manifest,
            &e,
        )
        .help("the kat manifest (sha256sum format, one line per instance and mode) is relative to the manifest; set it with `kat manifest=\"...\"`");
        cx.push(d);
        return None;
    }
    Some(KatSettings {
        rng: rng?,
        manifest,
        all_count: all_count?,
        reference_dir,
    })
}

fn lower_sizes(
    cx: &mut Cx<'_>,
    loader: &mut Loader<'_>,
    n: &KdlNode,
    dir: &Path,
) -> BTreeMap<String, CatalogSizes> {
    cx.no_args(n, "sizes");
    let props = cx.props(n, "`sizes`", &["catalog"]);
    let mut out = BTreeMap::new();
    match (props.get("catalog"), n.children()) {
        (Some(e), Some(_)) => {
            let s = cx.value_span(e);
            cx.error(
                s,
                "catalog given here",
                "`sizes` takes either `catalog=` or a block, not both",
            );
        }
        (Some(e), None) => {
            let Some(rel) = cx.expect_string(e, "catalog") else {
                return out;
            };
            let abs = normalize(&dir.join(&rel));
            match loader.read(&abs) {
                Ok(csv) => parse_catalog(&csv, &mut loader.diags, &mut out),
                Err(err) => {
                    let s = cx.value_span(e);
                    let d = missing_file(loader.fs, cx.file, s, "size catalog", &rel, &abs, &err);
                    cx.push(d);
                }
            }
        }
        (None, Some(c)) => {
            for i in c.nodes() {
                if name(i) != "instance" {
                    cx.unknown_node(i, "`sizes`", &["instance"]);
                    continue;
                }
                cx.no_children(i, "instance");
                let id = cx.one_string_arg(i, "instance");
                let props = cx.props(i, "`instance` in `sizes`", &["pk", "sk", "ct", "ss"]);
                let mut sz = CatalogSizes::default();
                for (k, slot) in [
                    ("pk", &mut sz.pk),
                    ("sk", &mut sz.sk),
                    ("ct", &mut sz.ct),
                    ("ss", &mut sz.ss),
                ] {
                    if let Some(e) = props.get(k) {
                        *slot = cx.expect_int_as::<u64>(e, k, 0);
                    }
                }
                if let Some((id, e)) = id {
                    if out.insert(id.clone(), sz).is_some() {
                        let s = cx.value_span(e);
                        cx.error(
                            s,
                            "listed again",
                            format!("instance `{id}` is listed twice in `sizes`"),
                        );
                    }
                }
            }
        }
        (None, None) => cx.error(
            name_span(n),
            "empty",
            "`sizes` needs `catalog=\"sizes.csv\"` or a `{ ... }` block",
        ),
    }
    out
}

/// Parses `instance,pk,sk,ct,ss` CSV (header first; columns besides `instance` optional).
fn parse_catalog(
    file: &SourceFile,
    diags: &mut Vec<Diagnostic>,
    out: &mut BTreeMap<String, CatalogSizes>,
) {
    let text = file.text();
    let mut header: Option<Vec<String>> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let content = line.trim_end_matches(['\n', '\r']);
        let span = SourceSpan::new(start.into(), content.len());
        if content.trim().is_empty() || content.trim_start().starts_with('#') {
            continue;
        }
        let cells: Vec<&str> = content.split(',').map(str::trim).collect();
        let Some(cols) = &header else {
            let cols: Vec<String> = cells.iter().map(|c| c.to_lowercase()).collect();
            let bad: Vec<&String> = cols
                .iter()
                .filter(|c| !["instance", "pk", "sk", "ct", "ss"].contains(&c.as_str()))
                .collect();
            if !cols.iter().any(|c| c == "instance") || !bad.is_empty() {
                diags.push(
                    Diagnostic::new(
                        file,
                        "size catalog header must name the columns `instance`, `pk`, `sk`, `ct`, `ss`",
                    )
                    .label(span, "header"),
                );
                return;
            }
            header = Some(cols);
            continue;
        };
        if cells.len() != cols.len() {
            diags.push(
                Diagnostic::new(
                    file,
                    format!(
                        "size catalog row has {} cells, the header has {}",
                        cells.len(),
                        cols.len()
                    ),
                )
                .label(span, "this row"),
            );
            continue;
        }
        let mut id = None;
        let mut sz = CatalogSizes::default();
        for (col, cell) in cols.iter().zip(&cells) {
            if col == "instance" {
                id = Some(cell.to_string());
                continue;
            }
            let v = if cell.is_empty() {
                None
            } else {
                match cell.parse::<u64>() {
                    Ok(v) => Some(v),
                    Err(_) => {
                        diags.push(
                            Diagnostic::new(
                                file,
                                format!(
                                    "size catalog `{col}` must be a whole number, found `{cell}`"
                                ),
                            )
                            .label(span, "this row"),
                        );
                        None
                    }
                }
            };
            match col.as_str() {
                "pk" => sz.pk = v,
                "sk" => sz.sk = v,
                "ct" => sz.ct = v,
                _ => sz.ss = v,
            }
        }
        if let Some(id) = id {
            out.insert(id, sz);
        }
    }
}

/// Matrix variables in declaration order with their values.
type Matrix = Vec<(String, Vec<String>)>;

fn lower_matrix(cx: &mut Cx<'_>, n: &KdlNode) -> Option<Matrix> {
    cx.no_args(n, "matrix");
    cx.no_children(n, "matrix");
    let mut m: Matrix = Vec::new();
    let mut spans: BTreeMap<String, SourceSpan> = BTreeMap::new();
    let mut ok = true;
    for e in n.entries() {
        let Some(key) = e.name() else { continue };
        let k = key.value().to_string();
        if let Some(prev) = spans.get(&k) {
            let d = cx
                .diag(format!("matrix variable `{k}` is given twice"))
                .label(key.span(), "given again here")
                .label(*prev, "first given here");
            cx.push(d);
            ok = false;
            continue;
        }
        spans.insert(k.clone(), key.span());
        if k.is_empty()
            || !k
                .chars()
                .all(|c| c.is_alphanumeric() || c == '-' || c == '_')
        {
            cx.error(
                key.span(),
                "invalid name",
                format!("matrix variable `{k}` must use only letters, digits, `-` and `_`"),
            );
            ok = false;
            continue;
        }
        let Some(v) = cx.expect_string(e, &k) else {
            ok = false;
            continue;
        };
        let mut vals: Vec<String> = Vec::new();
        for (w, r) in words(&v) {
            if vals.iter().any(|x| x == w) {
                let s = cx.sub_span(e, &r);
                cx.error(
                    s,
                    "listed again",
                    format!("value `{w}` is listed twice in matrix variable `{k}`"),
                );
                ok = false;
            } else {
                vals.push(w.to_string());
            }
        }
        if vals.is_empty() {
            let s = cx.value_span(e);
            cx.error(
                s,
                "no values",
                format!("matrix variable `{k}` has no values"),
            );
            ok = false;
            continue;
        }
        m.push((k, vals));
    }
    let total = m
        .iter()
        .try_fold(1usize, |acc, (_, v)| acc.checked_mul(v.len()));
    if total.is_none_or(|t| t > MAX_MATRIX) {
        cx.error(
            name_span(n),
            "too large",
            format!("matrix expands to more than {MAX_MATRIX} instances"),
        );
        ok = false;
    }
    ok.then_some(m)
}

/// Every combination of matrix values, first variable outermost.
fn combinations(m: &Matrix) -> Vec<BTreeMap<String, String>> {
    let mut out = vec![BTreeMap::new()];
    for (k, vals) in m {
        let mut next = Vec::with_capacity(out.len() * vals.len());
        for base in &out {
            for v in vals {
                let mut c = base.clone();
                c.insert(k.clone(), v.clone());
                next.push(c);
            }
        }
        out = next;
    }
    out
}

/// A `when` block: conditions (variable -> accepted values) and what it adds.
struct When {
    cond: Vec<(String, Vec<String>)>,
    cflags: Vec<String>,
    sources: Vec<String>,
    requires_cpu: Vec<String>,
    exclude: Vec<String>,
}

fn lower_when(cx: &mut Cx<'_>, n: &KdlNode, m: &Matrix) -> Option<When> {
    cx.no_args(n, "when");
    let vars: Vec<&str> = m.iter().map(|(k, _)| k.as_str()).collect();
    let mut ok = true;
    let mut cond = Vec::new();
    if n.entries().iter().all(|e| e.name().is_none()) {
        cx.error(
            name_span(n),
            "no condition",
            "`when` needs at least one condition, e.g. `when impl=\"avx2\" { ... }`",
        );
        ok = false;
    }
    for e in n.entries() {
        let Some(key) = e.name() else { continue };
        let k = key.value();
        let Some((_, vals)) = m.iter().find(|(v, _)| v == k) else {
            let list = backticked(vars.iter().copied());
            let msg = if list.is_empty() {
                format!("unknown matrix variable `{k}` in `when`, no matrix variables are defined")
            } else {
                format!("unknown matrix variable `{k}` in `when`, expected one of {list}")
            };
            let d = cx
                .diag(msg)
                .label(key.span(), "unknown variable")
                .maybe_help(did_you_mean(k, vars.iter().copied()));
            cx.push(d);
            ok = false;
            continue;
        };
        let Some(text) = cx.expect_string(e, k) else {
            ok = false;
            continue;
        };
        let mut accepted = Vec::new();
        for (w, r) in words(&text) {
            if !vals.iter().any(|v| v == w) {
                let s = cx.sub_span(e, &r);
                let d = cx
                    .diag(format!(
                        "`{w}` is not a value of matrix variable `{k}`, expected one of {}",
                        backticked(vals.iter().map(|s| s.as_str()))
                    ))
                    .label(s, "no such value")
                    .maybe_help(did_you_mean(w, vals.iter().map(|s| s.as_str())));
                cx.push(d);
                ok = false;
            } else {
                accepted.push(w.to_string());
            }
        }
        cond.push((k.to_string(), accepted));
    }
    let mut w = When {
        cond,
        cflags: Vec::new(),
        sources: Vec::new(),
        requires_cpu: Vec::new(),
        exclude: Vec::new(),
    };
    let children = cx.expect_children(n, "when")?;
    for c in children.nodes() {
        let nm = name(c);
        if !WHEN_NODES.contains(&nm) {
            cx.unknown_node(c, "`when`", &WHEN_NODES);
            ok = false;
            continue;
        }
        plain_node(cx, c);
        let vals = cx.string_args(c, nm, 1).into_iter().map(|(s, _)| s);
        match nm {
            "cflags" => w.cflags.extend(vals),
            "sources" => w.sources.extend(vals),
            "requires-cpu" => w.requires_cpu.extend(vals),
            _ => w.exclude.extend(vals),
        }
    }
    ok.then_some(w)
}

/// A template-valued entry, parsed, with every variable checked against the matrix.
fn template_value(cx: &mut Cx<'_>, e: &KdlEntry, what: &str, vars: &[&str]) -> Option<Template> {
    let text = cx.expect_string(e, what)?;
    let t = match parse_template(&text) {
        Ok(t) => t,
        Err(err) => {
            let s = cx.sub_span(e, &err.span);
            let d = cx
                .diag(format!("bad template in `{what}`: {}", err.message))
                .label(s, "here")
                .maybe_help(err.help);
            cx.push(d);
            return None;
        }
    };
    let mut ok = true;
    for (v, r) in t.vars() {
        if !vars.contains(&v) {
            let err = undefined_var(v, vars.iter().copied(), &r);
            let s = cx.sub_span(e, &err.span);
            let d = cx
                .diag(err.message)
                .label(s, "not a matrix variable")
                .maybe_help(err.help);
            cx.push(d);
            ok = false;
        }
    }
    ok.then_some(t)
}

/// An instance declaration; `dir`/`namespace` are `None` when broken (reported), and the
/// id is still expanded so duplicates are found.
struct InstanceTpl<'n> {
    id_entry: &'n KdlEntry,
    id: Template,
    dir: Option<Template>,
    namespace: Option<Template>,
}

fn expand_instances(
    cx: &mut Cx<'_>,
    nodes: &[&KdlNode],
    whens: &[&KdlNode],
    m: &Matrix,
    sub_span: SourceSpan,
    what: &str,
) -> Vec<Instance> {
    let vars: Vec<&str> = m.iter().map(|(k, _)| k.as_str()).collect();
    if nodes.is_empty() {
        cx.missing_node(sub_span, "instance", what);
    }
    let mut tpls = Vec::new();
    for n in nodes {
        cx.no_children(n, "instance");
        let id = cx.one_string_arg(n, "instance");
        let props = cx.props(n, "`instance`", &["dir", "namespace"]);
        let id_t = id
            .as_ref()
            .and_then(|(_, e)| template_value(cx, e, "instance", &vars));
        let mut get = |k: &str| match props.get(k) {
            Some(e) => template_value(cx, e, k, &vars),
            None => {
                cx.missing_prop(n, k, "`instance`");
                None
            }
        };
        let dir = get("dir");
        let namespace = get("namespace");
        if let (Some((_, e)), Some(id)) = (id, id_t) {
            tpls.push(InstanceTpl {
                id_entry: e,
                id,
                dir,
                namespace,
            });
        }
    }
    let whens: Vec<When> = whens.iter().filter_map(|w| lower_when(cx, w, m)).collect();

    let combos = combinations(m);
    let mut out: Vec<Instance> = Vec::new();
    // For duplicate detection: id -> (template index, combination).
    let mut seen: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut reported: Vec<String> = Vec::new();
    let mut self_reported: Vec<usize> = Vec::new();
    for (ti, t) in tpls.iter().enumerate() {
        for (ci, vars) in combos.iter().enumerate() {
            // Variables were checked above, so expansion cannot fail here.
            let Ok(id) = t.id.expand(vars) else { continue };
            if let Some(&(pti, pci)) = seen.get(&id) {
                // One report per duplicated id, and one per template that repeats itself.
                let same_tpl = pti == ti;
                if !(reported.contains(&id) || same_tpl && self_reported.contains(&ti)) {
                    reported.push(id.clone());
                    if same_tpl {
                        self_reported.push(ti);
                    }
                    duplicate_instance(cx, &id, &tpls, (pti, pci), (ti, ci), &combos, m);
                }
                continue;
            }
            seen.insert(id.clone(), (ti, ci));
            if id.contains('/') || id.trim().is_empty() {
                let s = cx.value_span(t.id_entry);
                cx.error(
                    s,
                    "invalid id",
                    format!("instance id `{id}` must be non-empty and must not contain `/`"),
                );
                continue;
            }
            let expand = |t: &Option<Template>| t.as_ref().and_then(|t| t.expand(vars).ok());
            let (Some(dir), Some(namespace)) = (expand(&t.dir), expand(&t.namespace)) else {
                continue;
            };
            let mut inst = Instance {
                id,
                dir,
                namespace,
                cflags: Vec::new(),
                extra_sources: Vec::new(),
                requires_cpu: Vec::new(),
                exclude: Vec::new(),
                vars: vars.clone(),
                nist_category: None,
            };
            for w in &whens {
                let applies = w
                    .cond
                    .iter()
                    .all(|(k, accepted)| vars.get(k).is_some_and(|v| accepted.contains(v)));
                if applies {
                    inst.cflags.extend(w.cflags.iter().cloned());
                    inst.extra_sources.extend(w.sources.iter().cloned());
                    inst.requires_cpu.extend(w.requires_cpu.iter().cloned());
                    inst.exclude.extend(w.exclude.iter().cloned());
                }
            }
            out.push(inst);
        }
    }
    out
}

fn describe_combo(c: &BTreeMap<String, String>, m: &Matrix) -> String {
    m.iter()
        .map(|(k, _)| format!("{k}={}", c.get(k).map(String::as_str).unwrap_or("")))
        .collect::<Vec<_>>()
        .join(" ")
}

fn duplicate_instance(
    cx: &mut Cx<'_>,
    id: &str,
    tpls: &[InstanceTpl<'_>],
    first: (usize, usize),
    again: (usize, usize),
    combos: &[BTreeMap<String, String>],
    m: &Matrix,
) {
    let again_span = cx.value_span(tpls[again.0].id_entry);
    let first_span = cx.value_span(tpls[first.0].id_entry);
    let mut d = cx.diag(format!("duplicate instance id `{id}`"));
    if first.0 == again.0 {
        // One template gives the same id for two matrix combinations.
        let t = &tpls[again.0].id;
        let unused: Vec<&str> = m
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| !t.vars().any(|(v, _)| v == *k))
            .collect();
        d = d
            .label(
                again_span,
                format!(
                    "expands to `{id}` for both `{}` and `{}`",
                    describe_combo(&combos[first.1], m),
                    describe_combo(&combos[again.1], m)
                ),
            )
            .help(format!(
                "use every matrix variable in the instance id; it does not use {}",
                backticked(unused.iter().copied())
            ));
    } else {
        // Name the matrix values only where the template uses variables.
        let label = |(t, c): (usize, usize)| {
            if tpls[t].id.vars().next().is_none() {
                String::new()
            } else {
                format!(" (for `{}`)", describe_combo(&combos[c], m))
            }
        };
        d = d
            .label(again_span, format!("declared again here{}", label(again)))
            .label(first_span, format!("first declared here{}", label(first)))
            .help("instance ids must be unique within a submission");
    }
    cx.push(d);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_first_variable_outermost() {
        let m: Matrix = vec![
            ("level".into(), vec!["512".into(), "768".into()]),
            ("impl".into(), vec!["clean".into(), "avx2".into()]),
        ];
        let got: Vec<String> = combinations(&m)
            .iter()
            .map(|c| format!("{}-{}", c["level"], c["impl"]))
            .collect();
        assert_eq!(got, ["512-clean", "512-avx2", "768-clean", "768-avx2"]);
        assert_eq!(combinations(&Vec::new()).len(), 1);
    }
}
