//! `cells="best"` on `time` and `profile`: of the cells of one implementation (compilers ×
//! flag profiles, see [`super::cells`]) only the one with the fewest counted instructions
//! for enc + dec is measured on the bench core. The choice reads the `count` step's
//! records, so a pipeline that asks for it must count enc and dec.

use kdl::KdlEntry;

use super::reader::NodeReader;
use crate::model::{Op, StepKind, StepSpec};

/// `cells="all"` (the default) or `cells="best"`: whether only the best cell is measured.
pub(super) fn lower_cells(cx: &mut NodeReader<'_>, e: &KdlEntry) -> bool {
    let Some(v) = cx.expect_string(e, "cells") else {
        return false;
    };
    match v.as_str() {
        "all" => false,
        "best" => true,
        _ => {
            let span = cx.value_span(e);
            cx.error(
                span,
                "unknown value",
                format!("unknown value `{v}` in `cells`, expected `all` or `best`"),
            );
            false
        }
    }
}

/// Every step with `cells="best"` needs a `count` step that counts enc and dec: `steps` are
/// the pipeline's steps with their `cells=` entries.
pub(super) fn check_best_cell(cx: &mut NodeReader<'_>, steps: &[(&StepSpec, Option<&KdlEntry>)]) {
    let counts_enc_dec = steps.iter().any(|(s, _)| {
        s.kind == StepKind::Count
            && [Op::Enc, Op::Dec]
                .iter()
                .all(|op| s.params.ops.contains(op))
    });
    if counts_enc_dec {
        return;
    }
    for (s, cells) in steps.iter().filter(|(s, _)| s.params.best_cell) {
        let Some(e) = cells else { continue };
        let span = cx.value_span(e);
        let d = cx
            .diag(format!(
                "`cells=\"best\"` on step `{}` chooses each implementation's cell by its \
                 counted instructions, but no `count` step counts enc and dec",
                s.kind
            ))
            .label(span, "needs a `count` step")
            .help("add `step \"count\" ops=\"keygen enc dec\"`, or drop `cells`");
        cx.push(d);
    }
}
