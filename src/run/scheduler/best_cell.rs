//! `cells="best"` (time, profile): of an implementation's cells (compilers × flag
//! profiles) only the one with the fewest counted instructions for enc + dec is measured;
//! the others are skipped with the figures they were compared by. The graph orders these
//! steps after every cell's `count`, their own cell's too (`graph::cell_edges`); those
//! edges order and never block ([`blocks`]).

use petgraph::graph::NodeIndex;

use crate::graph::step_id;
use crate::model::{Op, StepKind, NOT_BEST_CELL};
use crate::record::{Status, StepData};
use crate::run::Ctx;

/// Whether dependency `dep` of `ix` holds it back when it fails: not when they belong to
/// two instances (a sibling cell's count, [`not_best`]), nor when it is a count that a
/// best-cell step waits for only to compare (its own cell's: without it, the step is
/// measured).
pub(super) fn blocks(ctx: &Ctx, ix: NodeIndex, dep: NodeIndex) -> bool {
    let (a, b) = (ctx.node(ix), ctx.node(dep));
    let sibling = a.instance.is_some() && b.instance.is_some() && a.instance != b.instance;
    let compared = b.kind == StepKind::Count
        && a.kind != StepKind::Count
        && ctx.spec(a.kind).is_some_and(|s| s.params.best_cell);
    !(sibling || compared)
}

/// Counted instructions for enc + dec of one instance, from its ok `count` records.
fn counted(ctx: &Ctx, sub: &str, instance: &str) -> Option<f64> {
    [Op::Enc, Op::Dec]
        .iter()
        .map(|&op| {
            let id = step_id(sub, Some(instance), StepKind::Count, Some(op));
            let node = ctx.node(*ctx.plan.by_id.get(&id)?);
            match ctx.read_record(node)? {
                r if r.status == Status::Ok => match r.data {
                    Some(StepData::Count(d)) => Some(d.instructions_mean),
                    _ => None,
                },
                _ => None,
            }
        })
        .sum()
}

/// Why step `ix` is not measured: its step asks for the best cell only and another cell
/// of its implementation counted fewer instructions for enc + dec (ties: the first cell).
/// `None` when it is the best, is no cell, or has no count to compare.
pub(super) fn not_best(ctx: &Ctx, ix: NodeIndex) -> Option<String> {
    let node = ctx.node(ix);
    if !ctx.spec(node.kind)?.params.best_cell {
        return None;
    }
    let sub = ctx.submission(node);
    let me = ctx.instance(node)?;
    let own = counted(ctx, &sub.id, &me.id)?;
    let (best, fewest) = sub
        .instances
        .iter()
        .filter(|i| i.manifest_id() == me.manifest_id())
        .filter_map(|i| counted(ctx, &sub.id, &i.id).map(|n| (i, n)))
        .fold(
            None,
            |acc: Option<(&crate::model::Instance, f64)>, (i, n)| match acc {
                Some((_, m)) if m <= n => acc,
                _ => Some((i, n)),
            },
        )?;
    (best.id != me.id).then(|| {
        format!(
            "{NOT_BEST_CELL} (`cells=\"best\"`): `{}` counted fewer instructions for enc + \
             dec, {fewest:.0} against {own:.0} here",
            best.id
        )
    })
}
