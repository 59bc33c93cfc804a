//! Template-valued entries of a manifest (`dir=`, `kat submitted=`): parsed, and every
//! variable checked against the matrix's variables (and, for `kat submitted=`, api.h's
//! sizes). The matrix (`matrix.rs`) and its `when` blocks (`when.rs`) both read them.

use std::collections::BTreeMap;

use kdl::KdlEntry;

use super::super::reader::NodeReader;
use super::super::template::{parse_template, undefined_var, Template};
use super::source::check_root_path;

/// Variables of a `kat submitted=` template besides the matrix's: api.h's sizes, known
/// when the instance is built (`PQCkemKAT_{sk}.rsp`).
pub(crate) const SIZE_VARS: [&str; 4] = ["pk", "sk", "ct", "ss"];
/// Matrix variables in declaration order with their values.
pub(super) type Matrix = Vec<(String, Vec<String>)>;

/// A `kat submitted=` template: matrix variables and api.h's sizes.
pub(super) fn kat_template(
    cx: &mut NodeReader<'_>,
    e: &KdlEntry,
    what: &str,
    m: &Matrix,
) -> Option<Template> {
    let mut vars: Vec<&str> = m.iter().map(|(k, _)| k.as_str()).collect();
    for v in SIZE_VARS {
        if vars.contains(&v) {
            let s = cx.value_span(e);
            cx.error(
                s,
                "ambiguous",
                format!("matrix variable `{v}` has the name of an api.h size that `{what}` may use: rename the matrix variable"),
            );
            return None;
        }
    }
    vars.extend(SIZE_VARS);
    let t = template_value(cx, e, what, &vars)?;
    // The path must stay in the source whatever the values: try it with every size `1`.
    let probe: BTreeMap<String, String> = SIZE_VARS
        .iter()
        .map(|v| (v.to_string(), "1".to_string()))
        .chain(m.iter().map(|(k, vals)| (k.clone(), vals[0].clone())))
        .collect();
    let ok = t
        .expand(&probe)
        .is_ok_and(|p| check_root_path(cx, &p, e, "submitted KAT file"));
    ok.then_some(t)
}

/// A template-valued entry, parsed, with every variable checked against the matrix.
pub(super) fn template_value(
    cx: &mut NodeReader<'_>,
    e: &KdlEntry,
    what: &str,
    vars: &[&str],
) -> Option<Template> {
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
