//! The manifest's catalogs of expected values: the `kat` settings (with the `kat.sha256`
//! file) and the `sizes` catalog (`sizes.csv` or an inline block).

use std::collections::BTreeMap;
use std::path::Path;

use kdl::{KdlEntry, KdlNode};
use miette::SourceSpan;

use super::super::diag::{closest, did_you_mean, Diagnostic, SourceFile};
use super::super::loader::{missing_file, Loader};
use super::super::reader::{name, name_span, NodeReader};
use super::confined_path;
use crate::model::{CatalogSizes, Instance, KatMode, KatRng, KatSettings};
use crate::safe_fs::normalize;

/// Where a catalog names an instance: the key, its file (the manifest or a catalog file)
/// and its span there.
pub(super) struct KeyAt {
    pub key: String,
    pub file: SourceFile,
    pub span: SourceSpan,
}

/// The `kat` node: the settings, and the `submitted=` entry (its template is expanded with
/// the instances).
pub(super) fn lower_kat<'n>(
    cx: &mut NodeReader<'_>,
    loader: &Loader<'_>,
    n: Option<&'n KdlNode>,
    sub_span: SourceSpan,
    dir: &Path,
) -> (Option<KatSettings>, Option<&'n KdlEntry>) {
    let mut submitted = None;
    let kat = lower_kat_settings(cx, loader, n, sub_span, dir, &mut submitted);
    (kat, submitted)
}

fn lower_kat_settings<'n>(
    cx: &mut NodeReader<'_>,
    loader: &Loader<'_>,
    n: Option<&'n KdlNode>,
    sub_span: SourceSpan,
    dir: &Path,
    submitted: &mut Option<&'n KdlEntry>,
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
        let props = cx.props(
            n,
            "`kat`",
            &["rng", "manifest", "all-count", "reference", "submitted"],
        );
        *submitted = props.get("submitted").copied();
        if let (Some(r), Some(_)) = (props.get("reference"), props.get("submitted")) {
            let span = r.name().map(|i| i.span()).unwrap_or(r.span());
            cx.error(
                span,
                "not with `submitted`",
                "`kat reference=` is for `.rsp` files of the tool's own layouts; with `submitted=` the submitted files are the reference",
            );
        }
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
            confined_path(cx, loader, dir, &manifest_rel, e, "kat manifest")?;
        }
        if let Some(e) = props.get("all-count") {
            all_count = cx.expect_int_as::<u32>(e, "all-count", 1);
        }
        if let Some(e) = props.get("reference") {
            reference_dir = cx
                .expect_string(e, "reference")
                .and_then(|r| confined_path(cx, loader, dir, &r, e, "kat reference folder"));
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
        submitted: submitted.is_some(),
    })
}

pub(super) fn lower_sizes(
    cx: &mut NodeReader<'_>,
    loader: &mut Loader<'_>,
    n: &KdlNode,
    dir: &Path,
    keys: &mut Vec<KeyAt>,
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
            let Some(abs) = confined_path(cx, loader, dir, &rel, e, "size catalog") else {
                return out;
            };
            match loader.read(&abs) {
                Ok(csv) => parse_catalog(&csv, &mut loader.diags, &mut out, keys),
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
                    keys.push(KeyAt {
                        key: id.clone(),
                        file: cx.file.clone(),
                        span: cx.value_span(e),
                    });
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
    keys: &mut Vec<KeyAt>,
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
                let at = content.find(cell).unwrap_or(0);
                keys.push(KeyAt {
                    key: cell.to_string(),
                    file: file.clone(),
                    span: SourceSpan::new((start + at).into(), cell.len()),
                });
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

/// One line of a `kat.sha256` file: `<64 hex digits>  <name>` (sha256sum format, `*name`
/// accepted); `None` for blank and `#` comment lines. The name's byte range is returned.
fn kat_line(line: &str) -> Option<Result<(String, std::ops::Range<usize>), String>> {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') {
        return None;
    }
    let lead = line.len() - line.trim_start().len();
    let Some((hash, rest)) = t.split_once(char::is_whitespace) else {
        return Some(Err(
            "expected `<sha256>  <name>` (two fields separated by spaces)".to_string(),
        ));
    };
    if hash.len() != 64 || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
        let shown: String = hash.chars().take(70).collect();
        return Some(Err(format!(
            "`{shown}` is not a SHA-256 digest (64 hexadecimal digits)"
        )));
    }
    let name = rest.trim_start().trim_start_matches('*').trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Some(Err(
            "expected one instance name after the digest (`<instance>` or `<instance>.all`)"
                .to_string(),
        ));
    }
    let at = lead + t.len() - rest.len() + rest.find(name).unwrap_or(0);
    Some(Ok((name.to_string(), at..at + name.len())))
}

/// Checks a `kat.sha256` file against the declared instances: malformed lines and names
/// that no instance has are errors (with a did-you-mean), instances without a line for a
/// mode the pipeline runs are notes. Reads the file through the loader (so it is shown
/// in diagnostics); a file that cannot be read was already reported.
pub(super) fn check_kat_file(
    loader: &mut Loader<'_>,
    manifest: &SourceFile,
    kat: &KatSettings,
    instances: &[Instance],
) {
    let Ok(file) = loader.read(&kat.manifest) else {
        return;
    };
    let modes = loader.kat_modes.clone();
    let mut names: Vec<String> = Vec::new();
    for i in instances {
        names.push(i.id.clone());
        if !kat.submitted {
            names.push(format!("{}.all", i.id));
        }
    }
    let mut seen: BTreeMap<String, SourceSpan> = BTreeMap::new();
    let mut offset = 0;
    for line in file.text().split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let content = line.trim_end_matches(['\n', '\r']);
        match kat_line(content) {
            None => {}
            Some(Err(msg)) => {
                let span = SourceSpan::new(start.into(), content.len());
                loader.diags.push(
                    Diagnostic::new(&file, format!("malformed kat manifest line: {msg}"))
                        .label(span, "this line")
                        .help("each line is `<sha256 of the .rsp>  <instance>` or `<sha256>  <instance>.all`"),
                );
            }
            Some(Ok((name, r))) => {
                let span = SourceSpan::new((start + r.start).into(), r.len());
                if let Some(first) = seen.get(&name) {
                    loader.diags.push(
                        Diagnostic::new(&file, format!("`{name}` is listed twice"))
                            .label(span, "listed again")
                            .label(*first, "first listed here"),
                    );
                    continue;
                }
                seen.insert(name.clone(), span);
                if !names.contains(&name) {
                    loader
                        .diags
                        .push(unknown_key(&file, span, &name, "kat manifest", &names));
                }
            }
        }
    }
    if kat.submitted {
        for i in instances.iter().filter(|i| !seen.contains_key(&i.id)) {
            let at = &i.origin.instance;
            let shown = loader.fs.display(&kat.manifest);
            loader.notes.push(
                Diagnostic::new(
                    manifest,
                    format!(
                        "instance `{}` has no line in {shown} pinning the SHA-256 of its submitted KAT file: its KAT will be NOKAT",
                        i.id
                    ),
                )
                .label(SourceSpan::new(at.offset.into(), at.len), "declared here")
                .help("`ngcc-pipe import` writes these lines; `sha256sum` of the submitted .rsp gives one")
                .note(),
            );
        }
        return;
    }
    for i in instances {
        for mode in &modes {
            let key = match mode {
                KatMode::Single => i.id.clone(),
                KatMode::All => format!("{}.all", i.id),
            };
            if !seen.contains_key(&key) {
                let what = match mode {
                    KatMode::Single => "single",
                    KatMode::All => "all",
                };
                let at = &i.origin.instance;
                let shown = loader.fs.display(&kat.manifest);
                loader.notes.push(
                    Diagnostic::new(
                        manifest,
                        format!(
                            "instance `{}` has no `{key}` line in {shown}: its `{what}` KAT will be NOKAT",
                            i.id
                        ),
                    )
                    .label(SourceSpan::new(at.offset.into(), at.len), "declared here")
                    .note(),
                );
            }
        }
    }
}

/// Checks that every instance a size catalog names is declared.
pub(super) fn check_size_keys(loader: &mut Loader<'_>, keys: &[KeyAt], instances: &[Instance]) {
    let names: Vec<String> = instances.iter().map(|i| i.id.clone()).collect();
    for k in keys {
        if !names.contains(&k.key) {
            loader
                .diags
                .push(unknown_key(&k.file, k.span, &k.key, "size catalog", &names));
        }
    }
}

/// "`name` in the kat manifest names no declared instance", with a did-you-mean.
fn unknown_key(
    file: &SourceFile,
    span: SourceSpan,
    name: &str,
    what: &str,
    names: &[String],
) -> Diagnostic {
    let guess = closest(name, names.iter().map(String::as_str)).or_else(|| {
        // Case slips (`kyber512-clean`) are further than two edits apart.
        names
            .iter()
            .find(|n| n.eq_ignore_ascii_case(name))
            .map(String::as_str)
    });
    let help = match guess {
        Some(g) => format!("did you mean `{g}`?"),
        None => format!(
            "the declared instances are {}",
            super::super::diag::backticked(
                names
                    .iter()
                    .filter(|n| !n.ends_with(".all"))
                    .take(12)
                    .map(String::as_str)
            )
        ),
    };
    Diagnostic::new(
        file,
        format!("`{name}` in the {what} names no declared instance"),
    )
    .label(span, "no such instance")
    .help(help)
}
