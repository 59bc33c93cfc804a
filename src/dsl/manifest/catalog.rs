//! The manifest's catalogs of expected values: the `kat` settings (with the `kat.sha256`
//! file) and the `sizes` catalog (`sizes.csv` or an inline block).

use std::collections::BTreeMap;
use std::path::Path;

use kdl::KdlNode;
use miette::SourceSpan;

use super::super::diag::{did_you_mean, Diagnostic, SourceFile};
use super::super::fs::normalize;
use super::super::load::{missing_file, Loader};
use super::super::reader::{name, name_span, Cx};
use crate::model::{CatalogSizes, KatRng, KatSettings};

pub(super) fn lower_kat(
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

pub(super) fn lower_sizes(
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
