//! `ct-benign "function" reason="..."` in a manifest: a function whose secret-dependent
//! branches or indexes are known to be harmless (rejection sampling on a public seed, say).
//! The `ct` step labels findings in it with the reason; they are shown, never hidden.

use kdl::KdlNode;

use super::super::reader::{name_span, NodeReader};
use crate::model::CtBenign;

/// A C identifier: letters, digits and `_`, not starting with a digit.
fn c_identifier(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Lowers every `ct-benign` node; reports a name that is not a C function name, a missing
/// or empty reason, and a function declared twice.
pub(super) fn lower_ct_benign(cx: &mut NodeReader<'_>, nodes: &[&KdlNode]) -> Vec<CtBenign> {
    let mut out: Vec<(CtBenign, &KdlNode)> = Vec::new();
    for &n in nodes {
        cx.no_children(n, "ct-benign");
        let props = cx.props(n, "`ct-benign`", &["reason"]);
        let function = cx.one_string_arg(n, "ct-benign").and_then(|(f, e)| {
            if c_identifier(&f) {
                return Some(f);
            }
            let s = cx.value_span(e);
            let d = cx
                .diag(format!("`{f}` is not a C function name"))
                .label(s, "not a function name")
                .help("name the function as the source defines it (letters, digits and `_`), e.g. `rej_uniform`");
            cx.push(d);
            None
        });
        let reason = match props.get("reason") {
            Some(e) => cx.expect_string(e, "reason").and_then(|r| {
                if !r.trim().is_empty() {
                    return Some(r);
                }
                let s = cx.value_span(e);
                cx.error(
                    s,
                    "empty reason",
                    "`reason` must say why the function's findings are harmless",
                );
                None
            }),
            None => {
                cx.missing_prop(n, "reason", "`ct-benign`");
                None
            }
        };
        let (Some(function), Some(reason)) = (function, reason) else {
            continue;
        };
        if let Some((_, first)) = out.iter().find(|(b, _)| b.function == function) {
            let d = cx
                .diag(format!("`ct-benign \"{function}\"` is declared twice"))
                .label(name_span(n), "declared again here")
                .label(name_span(first), "first declared here")
                .help("give one reason per function");
            cx.push(d);
            continue;
        }
        out.push((CtBenign { function, reason }, n));
    }
    out.into_iter().map(|(b, _)| b).collect()
}

#[cfg(test)]
mod tests {
    use super::c_identifier;

    #[test]
    fn c_identifiers() {
        assert!(c_identifier("rej_uniform"));
        assert!(c_identifier("_x1"));
        assert!(!c_identifier("1x"));
        assert!(!c_identifier(""));
        assert!(!c_identifier("indcpa.c:128"));
    }
}
