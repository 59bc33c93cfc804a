//! `nist-category N [var="values" ...]` in a manifest: the NIST security category (1-5) of
//! the instances whose matrix values match (all of them without a condition), used by the
//! reports to group and compare instances of equal strength.

use kdl::KdlNode;

use super::diag::{backticked, did_you_mean};
use super::reader::{args, describe, name_span, NodeReader};
use super::values::words;
use crate::model::Instance;

/// Sets `nist_category` on the instances each node matches; reports bad values, unknown
/// variables or values, and an instance given two different categories.
pub(crate) fn apply(
    cx: &mut NodeReader<'_>,
    nodes: &[&KdlNode],
    matrix: &[(String, Vec<String>)],
    instances: &mut [Instance],
) {
    // instance index -> (category, node that gave it)
    let mut given: Vec<Option<(u8, &KdlNode)>> = vec![None; instances.len()];
    for n in nodes {
        cx.no_children(n, "nist-category");
        let a: Vec<_> = args(n).collect();
        let category = match a.as_slice() {
            [e] => match e.value() {
                kdl::KdlValue::Integer(i @ 1..=5) => Some(*i as u8),
                v => {
                    let s = cx.value_span(e);
                    cx.error(
                        s,
                        "not a NIST category",
                        format!(
                            "`nist-category` must be 1, 2, 3, 4 or 5, found {}",
                            describe(v)
                        ),
                    );
                    None
                }
            },
            _ => {
                cx.error(
                    name_span(n),
                    "expected one category",
                    format!(
                        "`nist-category` takes one argument (1-5), found {}",
                        a.len()
                    ),
                );
                None
            }
        };
        let mut cond: Vec<(&str, Vec<&str>)> = Vec::new();
        let mut ok = category.is_some();
        for e in n.entries() {
            let Some(key) = e.name() else { continue };
            let k = key.value();
            let Some((_, vals)) = matrix.iter().find(|(v, _)| v == k) else {
                let vars = matrix.iter().map(|(v, _)| v.as_str());
                let d = cx
                    .diag(format!(
                        "unknown matrix variable `{k}` in `nist-category`, expected one of {}",
                        backticked(vars.clone())
                    ))
                    .label(key.span(), "no such variable")
                    .maybe_help(did_you_mean(k, vars));
                cx.push(d);
                ok = false;
                continue;
            };
            let kdl::KdlValue::String(text) = e.value() else {
                let s = cx.value_span(e);
                cx.error(
                    s,
                    "expected a string",
                    format!("`{k}` must be a string of matrix values"),
                );
                ok = false;
                continue;
            };
            let mut accepted = Vec::new();
            for (w, r) in words(text) {
                if vals.iter().any(|v| v == w) {
                    accepted.push(w);
                } else {
                    let s = cx.sub_span(e, &r);
                    let d = cx
                        .diag(format!(
                            "`{w}` is not a value of matrix variable `{k}`, expected one of {}",
                            backticked(vals.iter().map(String::as_str))
                        ))
                        .label(s, "no such value")
                        .maybe_help(did_you_mean(w, vals.iter().map(String::as_str)));
                    cx.push(d);
                    ok = false;
                }
            }
            cond.push((k, accepted));
        }
        let (true, Some(c)) = (ok, category) else {
            continue;
        };
        // instances that an earlier node gave another category, per earlier node
        let mut clashes: Vec<(u8, &KdlNode, Vec<&str>)> = Vec::new();
        for (i, inst) in instances.iter_mut().enumerate() {
            let matches = cond.iter().all(|(k, vals)| {
                inst.vars
                    .get(*k)
                    .is_some_and(|v| vals.contains(&v.as_str()))
            });
            if !matches {
                continue;
            }
            match given[i] {
                Some((prev, first)) if prev != c => {
                    match clashes.iter_mut().find(|(_, f, _)| std::ptr::eq(*f, first)) {
                        Some((_, _, ids)) => ids.push(&inst.id),
                        None => clashes.push((prev, first, vec![&inst.id])),
                    }
                }
                Some(_) => {}
                None => {
                    given[i] = Some((c, n));
                    inst.nist_category = Some(c);
                }
            }
        }
        for (prev, first, ids) in clashes {
            let d = cx
                .diag(format!(
                    "{} given NIST category {prev} and {c}",
                    if ids.len() == 1 {
                        format!("instance `{}` is", ids[0])
                    } else {
                        format!("instances {} are", backticked(ids.iter().copied()))
                    }
                ))
                .label(name_span(n), format!("category {c} here"))
                .label(name_span(first), format!("category {prev} here"))
                .help("give each instance one category: narrow the matrix condition");
            cx.push(d);
        }
    }
}
