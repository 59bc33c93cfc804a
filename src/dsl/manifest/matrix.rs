//! The `matrix` of a manifest and its expansion: `instance` templates over every
//! combination of matrix values, with `when` blocks (`when.rs`) adding flags, sources and
//! CPU needs, or giving another folder.

use std::collections::BTreeMap;

use kdl::{KdlEntry, KdlNode};
use miette::SourceSpan;

use super::super::diag::backticked;
use super::super::reader::{name_span, NodeReader};
use super::super::template::Template;
use super::super::values::words;
use super::source::root_path_problem;
use super::templates::{kat_template, template_value, Matrix};
use super::when::{lower_when, When};
use super::wide::pos_of;
use super::wide::Wide;
use super::{check_id, id_problem};
use crate::model::{Api, Instance, Origin, PROFILE_VAR};

/// A matrix larger than this is refused (it is surely a mistake, and memory is finite).
const MAX_MATRIX: usize = 100_000;

pub(super) fn lower_matrix(cx: &mut NodeReader<'_>, n: &KdlNode) -> Option<Matrix> {
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
        if k == PROFILE_VAR {
            cx.error(
                key.span(),
                "reserved name",
                format!(
                    "matrix variable `{k}` is reserved: it holds the flag profile when the \
                     build step names several"
                ),
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

/// What the submission gives every instance, and where it is (for messages).
pub(super) struct Shared<'a, 'n> {
    pub sub_span: SourceSpan,
    pub what: &'a str,
    pub wide: &'a Wide,
    /// `kat submitted=`'s entry, when given.
    pub kat_submitted: Option<&'n KdlEntry>,
}

/// An instance declaration; `dir`/`namespace` are `None` when broken (reported), and the
/// id is still expanded so duplicates are found.
struct InstanceTpl<'n> {
    id_entry: &'n KdlEntry,
    id: Template,
    dir: Option<Template>,
    namespace: Option<Template>,
    origin: Origin,
}

pub(super) fn expand_instances(
    cx: &mut NodeReader<'_>,
    nodes: &[&KdlNode],
    whens: &[&KdlNode],
    m: &Matrix,
    shared: &Shared<'_, '_>,
) -> (Vec<Instance>, bool) {
    if nodes.is_empty() {
        cx.missing_node(shared.sub_span, "instance", shared.what);
    }
    let kat_submitted = match shared.kat_submitted {
        Some(e) => match kat_template(cx, e, "submitted", m) {
            Some(t) => Some(t),
            None => return (Vec::new(), false),
        },
        None => None,
    };
    let tpls = instance_templates(cx, nodes, m, shared.wide.api == Api::Nist);
    let whens: Vec<When> = whens.iter().filter_map(|w| lower_when(cx, w, m)).collect();
    let combos = combinations(m);
    let mut out: Vec<Instance> = Vec::new();
    // For duplicate detection: id -> (template index, combination).
    let mut seen: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut reported: Vec<String> = Vec::new();
    let mut self_reported: Vec<usize> = Vec::new();
    let mut bad_ids: Vec<usize> = Vec::new();
    // Positions of `dir` values already reported as leaving the source.
    let mut bad_dirs: Vec<usize> = Vec::new();
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
            // One report per template (it is the same mistake in every combination).
            if id_problem(&id).is_some() {
                if !bad_ids.contains(&ti) {
                    bad_ids.push(ti);
                    let s = cx.value_span(t.id_entry);
                    check_id(cx, &id, s, "instance id");
                }
                continue;
            }
            let combo = Combo {
                id,
                vars,
                whens: &whens,
                kat_submitted: kat_submitted.as_ref(),
            };
            out.extend(instance(cx, t, combo, shared, &mut bad_dirs));
        }
    }
    // Every declared id expanded (so catalog keys can be checked against them).
    let complete = tpls.len() == nodes.len()
        && tpls
            .iter()
            .all(|t| t.dir.is_some() && t.namespace.is_some())
        && bad_ids.is_empty()
        && bad_dirs.is_empty()
        && reported.is_empty();
    (out, complete)
}

/// The `instance` nodes as templates over the matrix's variables (broken parts reported).
fn instance_templates<'n>(
    cx: &mut NodeReader<'_>,
    nodes: &[&'n KdlNode],
    m: &Matrix,
    nist: bool,
) -> Vec<InstanceTpl<'n>> {
    let vars: Vec<&str> = m.iter().map(|(k, _)| k.as_str()).collect();
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
        let namespace = match (nist, props.get("namespace")) {
            (false, _) => get("namespace"),
            (true, None) => Some(Template { pieces: Vec::new() }),
            (true, Some(e)) => {
                let s = cx.value_span(e);
                let d = cx
                    .diag("`namespace` given under `api \"nist\"`")
                    .label(s, "no namespace in a NIST package")
                    .help("a NIST-round package's api.h and functions carry no prefix (`crypto_kem_keypair`, `CRYPTO_SECRETKEYBYTES`): remove `namespace=`, or remove `api \"nist\"` for a namespaced (PQClean) tree");
                cx.push(d);
                None
            }
        };
        if let (Some((_, e)), Some(id)) = (id, id_t) {
            let at = |e: Option<&&KdlEntry>| {
                pos_of(cx, e.map(|e| cx.value_span(e)).unwrap_or(name_span(n)))
            };
            let origin = Origin {
                manifest: cx.file.display_name().to_string(),
                instance: at(Some(&e)),
                dir: at(props.get("dir")),
                namespace: at(props.get("namespace")),
                links: Vec::new(),
            };
            tpls.push(InstanceTpl {
                id_entry: e,
                id,
                dir,
                namespace,
                origin,
            });
        }
    }
    tpls
}

/// One combination of the matrix's values for one template, with its unique, valid id.
struct Combo<'c> {
    id: String,
    vars: &'c BTreeMap<String, String>,
    whens: &'c [When],
    kat_submitted: Option<&'c Template>,
}

/// The instance of template `t` at one combination, with the `when` blocks that apply;
/// `None` when its parts are broken (reported) or its folder leaves the source (reported
/// once per position, kept in `bad_dirs`).
fn instance(
    cx: &mut NodeReader<'_>,
    t: &InstanceTpl<'_>,
    c: Combo<'_>,
    shared: &Shared<'_, '_>,
    bad_dirs: &mut Vec<usize>,
) -> Option<Instance> {
    let vars = c.vars;
    let expand = |t: &Option<Template>| t.as_ref().and_then(|t| t.expand(vars).ok());
    let applying: Vec<&When> = c
        .whens
        .iter()
        .filter(|w| {
            w.cond
                .iter()
                .all(|(k, accepted)| vars.get(k).is_some_and(|v| accepted.contains(v)))
        })
        .collect();
    let mut origin = t.origin.clone();
    // A `when`'s `dir` replaces the template's (the last one that applies).
    let by_when = applying.iter().rev().find_map(|w| w.dir.as_ref());
    let dir = match by_when {
        Some((d, at)) => {
            origin.dir = *at;
            d.expand(vars).ok()
        }
        None => expand(&t.dir),
    };
    let (Some(dir), Some(namespace)) = (dir, expand(&t.namespace)) else {
        return None;
    };
    if let Some(problem) = root_path_problem(&dir) {
        let p = origin.dir;
        if !bad_dirs.contains(&p.offset) {
            bad_dirs.push(p.offset);
            let d = cx
                .diag(format!("instance folder `{dir}` {problem}"))
                .label(
                    SourceSpan::new(p.offset.into(), p.len),
                    "outside the source",
                )
                .help(if by_when.is_some() {
                    "`dir` in a `when` block is relative to the source root and stays inside it"
                } else {
                    "`dir=` is relative to the source root and stays inside it"
                });
            cx.push(d);
        }
        return None;
    }
    origin.links = shared.wide.libraries.clone();
    let mut inst = Instance {
        id: c.id,
        dir,
        namespace,
        cflags: Vec::new(),
        extra_sources: Vec::new(),
        requires_cpu: Vec::new(),
        exclude: shared.wide.exclude.clone(),
        libraries: Vec::new(),
        kat_submitted: c.kat_submitted.map(|k| k.expand_keeping(vars)),
        vars: vars.clone(),
        nist_category: None,
        origin,
    };
    for w in applying {
        inst.cflags.extend(w.cflags.iter().cloned());
        inst.extra_sources.extend(w.sources.iter().cloned());
        inst.requires_cpu.extend(w.requires_cpu.iter().cloned());
        inst.exclude.extend(w.exclude.iter().cloned());
        for l in &w.libraries {
            if !inst.origin.links.iter().any(|(x, _)| *x == l.0) {
                inst.origin.links.push(l.clone());
            }
        }
        if let Some(k) = &w.kat_submitted {
            inst.kat_submitted = Some(k.expand_keeping(vars));
        }
    }
    inst.libraries = inst.origin.links.iter().map(|(l, _)| l.clone()).collect();
    Some(inst)
}

fn describe_combo(c: &BTreeMap<String, String>, m: &Matrix) -> String {
    m.iter()
        .map(|(k, _)| format!("{k}={}", c.get(k).map(String::as_str).unwrap_or("")))
        .collect::<Vec<_>>()
        .join(" ")
}

fn duplicate_instance(
    cx: &mut NodeReader<'_>,
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
