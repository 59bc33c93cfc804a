//! The appendix's whole build matrix: every cell of every implementation built several
//! ways (compiler × flag profile) in one table, with what each analysis found in it — KAT,
//! cycles, counted instructions, memcheck locations, variable-latency instructions — and
//! the cell the cross-scheme table picks (lowest enc + dec), so a reader sees what the
//! choice was made from. Built from `results.json`'s rows ([`Results::from_view`]), the
//! same figures the results files carry.

use crate::model::Op;
use crate::report::doc::{code, Doc, Table};
use crate::report::format::{self as fmt, DASH};
use crate::report::schema::{ResultInstance, Results};
use crate::report::view::{CampaignView, SubmissionView};

/// The headline cycles of an operation, or why there is none.
fn cycles(inst: &ResultInstance, op: Op) -> String {
    match inst.op(op) {
        Some(o) => match (o.cycles(), &o.reason) {
            (Some(c), _) => fmt::cycles(c),
            (None, Some(why)) if why.starts_with(crate::model::NOT_BEST_CELL) => {
                "not timed (another cell is better)".to_string()
            }
            (None, _) => o
                .status
                .map(|s| s.name().to_string())
                .unwrap_or_else(|| DASH.to_string()),
        },
        None => DASH.to_string(),
    }
}

/// Counted instructions of enc and dec together.
fn counted(inst: &ResultInstance) -> String {
    let n = |op| inst.op(op).and_then(|o| o.instructions);
    match (n(Op::Enc), n(Op::Dec)) {
        (Some(e), Some(d)) => fmt::cycles(e + d),
        _ => DASH.to_string(),
    }
}

/// memcheck locations over the checked operations ("3 (keygen 1, dec 2)"), or a dash.
fn locations(inst: &ResultInstance) -> String {
    per_op(inst, |c| c.locations)
}

fn latency(inst: &ResultInstance) -> String {
    per_op(inst, |c| c.variable_latency)
}

fn per_op(
    inst: &ResultInstance,
    n: impl Fn(&crate::report::schema::ResultCt) -> Option<usize>,
) -> String {
    let each: Vec<(Op, usize)> = inst
        .constant_time
        .iter()
        .filter_map(|c| n(c).map(|k| (c.op, k)))
        .collect();
    if each.is_empty() {
        return DASH.to_string();
    }
    let total: usize = each.iter().map(|(_, k)| k).sum();
    let nonzero: Vec<String> = each
        .iter()
        .filter(|(_, k)| *k > 0)
        .map(|(op, k)| format!("{} {k}", op.name()))
        .collect();
    if nonzero.is_empty() {
        "0".to_string()
    } else {
        format!("{total} ({})", nonzero.join(", "))
    }
}

/// The appendix section: one row per cell, grouped by implementation. Nothing when no
/// implementation of the submission is built more than one way.
pub(super) fn build_matrix(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    let results = Results::from_view(view);
    let Some(rs) = results.submissions.iter().find(|s| s.id == sub.id) else {
        return;
    };
    let cells: Vec<&ResultInstance> = rs
        .instances
        .iter()
        .filter(|i| i.implementation.is_some())
        .collect();
    if cells.is_empty() {
        return;
    }
    let best = super::categories::best_cells(&rs.instances);
    doc.h(2, "The build matrix");
    doc.p(
        "Every cell of every implementation built several ways: the compiler, the flag \
         profile, and what each step found in that build. Cycles are the time step's \
         headline (median of the interleaved rounds); instructions are the count step's, \
         enc + dec; constant time gives memcheck's locations and the variable-latency \
         instructions over the checked operations. The best cell (lowest enc + dec cycles) \
         is the one the cross-scheme table and the index name.",
    );
    let mut t = Table::new(&[
        "implementation",
        "compiler",
        "flags",
        "KAT",
        "keygen cycles",
        "enc cycles",
        "dec cycles",
        "enc + dec instructions",
        "memcheck locations",
        "variable-latency instructions",
        "best",
    ]);
    for i in cells {
        t.row(vec![
            code(i.implementation.as_deref().unwrap_or(&i.id)),
            i.compiler
                .as_deref()
                .map(code)
                .unwrap_or_else(|| "cc".into()),
            i.build_flags
                .as_deref()
                .map(code)
                .unwrap_or_else(|| DASH.into()),
            i.kat.clone().unwrap_or_else(|| DASH.into()),
            cycles(i, Op::Keygen),
            cycles(i, Op::Enc),
            cycles(i, Op::Dec),
            counted(i),
            locations(i),
            latency(i),
            if best.contains_key(i.id.as_str()) {
                "best".into()
            } else {
                String::new()
            },
        ]);
    }
    doc.table(t);
}
