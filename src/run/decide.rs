//! Decisions: whether a step runs, and why — shared by the scheduler, the dry run and
//! `explain`, so all three always agree. [`decide_node`] decides one step given which of
//! its dependencies run; the scheduler calls it as steps become ready (with what really
//! ran), [`decide_all`] for a whole selection in execution order (with what it decided).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::time::Duration;

use globset::GlobMatcher;
use petgraph::graph::NodeIndex;

use super::{keys, Ctx};
use crate::model::StepKind;
use crate::record::{Status, StepData};

/// Why a step would run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    Forced,
    NoRecord,
    /// The last run ended this way.
    LastRun(Status),
    InputsChanged(Vec<String>),
    /// A step it depends on runs in this run.
    UpstreamRuns(String),
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Forced => f.write_str("forced"),
            Why::NoRecord => f.write_str("no record"),
            Why::LastRun(s) => write!(f, "last run {}", s.name()),
            Why::InputsChanged(names) => write!(f, "inputs changed: {}", names.join(", ")),
            Why::UpstreamRuns(id) => write!(f, "upstream runs: {id}"),
        }
    }
}

/// Run it, or keep the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Run(Why),
    UpToDate(Status),
}

/// Decide for one node; `runs(dep)` says whether a dependency runs (or ran) in this run.
pub fn decide_node(
    ctx: &Ctx,
    ix: NodeIndex,
    force: &[GlobMatcher],
    runs: impl Fn(NodeIndex) -> bool,
) -> Decision {
    let upstream = ctx
        .plan
        .deps(ix)
        .find(|&d| runs(d))
        .map(|d| ctx.node(d).id.clone());
    decide(ctx, ix, is_forced(ctx, ix, force), upstream.as_deref())
}

/// Decide every node of `selected`, in execution order, each seeing which of its
/// dependencies were decided to run.
pub fn decide_all(
    ctx: &Ctx,
    selected: &BTreeSet<NodeIndex>,
    force: &[GlobMatcher],
) -> BTreeMap<NodeIndex, Decision> {
    let mut out: BTreeMap<NodeIndex, Decision> = BTreeMap::new();
    for ix in ctx.plan.execution_order() {
        if !selected.contains(&ix) {
            continue;
        }
        let d = decide_node(ctx, ix, force, |dep| {
            matches!(out.get(&dep), Some(Decision::Run(_)))
        });
        out.insert(ix, d);
    }
    out
}

/// Decide for one node. `upstream_runs` names a dependency that runs in this run, if any.
fn decide(ctx: &Ctx, ix: NodeIndex, forced: bool, upstream_runs: Option<&str>) -> Decision {
    if forced {
        return Decision::Run(Why::Forced);
    }
    let node = ctx.node(ix);
    let Some(rec) = ctx.read_record(node) else {
        return Decision::Run(Why::NoRecord);
    };
    if !matches!(rec.status, Status::Ok | Status::Unsupported) && !soft_kat_failure(&rec.data) {
        return Decision::Run(Why::LastRun(rec.status));
    }
    let current = &ctx.inputs[ix.index()];
    if rec.cache_key != ctx.key(ix) {
        let names = keys::changed(&rec.inputs, current);
        return Decision::Run(Why::InputsChanged(if names.is_empty() {
            vec!["(record format)".to_string()]
        } else {
            names
        }));
    }
    if let Some(up) = upstream_runs {
        return Decision::Run(Why::UpstreamRuns(up.to_string()));
    }
    Decision::UpToDate(rec.status)
}

/// A KAT step that failed only because hashes did not match (the code ran and dec(enc)
/// agreed): its dependents still run, as in the reference reports ("timed anyway").
pub fn soft_kat_failure(data: &Option<StepData>) -> bool {
    use crate::record::KatStatus;
    match data {
        Some(StepData::Kat(k)) => {
            !k.modes.is_empty() && k.modes.iter().all(|m| m.status != KatStatus::Fail)
        }
        _ => false,
    }
}

/// Whether a node matches any `--force` pattern.
fn is_forced(ctx: &Ctx, ix: NodeIndex, force: &[GlobMatcher]) -> bool {
    force.iter().any(|m| m.is_match(&ctx.node(ix).id))
}

/// Estimated bench-lane time of an exclusive step (see [`super::steps::KindSpec::estimate`]).
pub fn estimate(ctx: &Ctx, ix: NodeIndex) -> Option<Duration> {
    super::steps::behaviour(ctx.node(ix).kind).estimate(ctx, ix)
}

fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 3600.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s >= 60.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{s:.1} s")
    }
}

/// The dry-run text: every selected step in execution order with its decision, the
/// estimated bench-lane time, then a count table per step kind.
pub fn dry_run(ctx: &Ctx, selected: &BTreeSet<NodeIndex>, force: &[GlobMatcher]) -> String {
    let mut out = String::new();
    let decisions = decide_all(ctx, selected, force);
    let mut counts: BTreeMap<StepKind, (usize, usize, usize)> = BTreeMap::new();
    let mut bench_total = Duration::ZERO;
    let mut bench_unknown = 0usize;
    let mut per_instance: BTreeMap<String, Duration> = BTreeMap::new();
    let _ = writeln!(
        out,
        "plan for system `{}` ({} steps selected; outputs in {})",
        ctx.campaign.system.name,
        selected.len(),
        ctx.out.display()
    );
    for ix in ctx.plan.execution_order() {
        let Some(decision) = decisions.get(&ix) else {
            continue;
        };
        let node = ctx.node(ix);
        let entry = counts.entry(node.kind).or_default();
        entry.0 += 1;
        let lane = if node.exclusive {
            "exclusive"
        } else {
            "parallel"
        };
        match decision {
            Decision::Run(why) => {
                entry.1 += 1;
                let mut line = format!("  run        {:<60} {lane:<9}  {why}", node.id);
                if node.exclusive {
                    match estimate(ctx, ix) {
                        Some(d) => {
                            bench_total += d;
                            let inst = format!(
                                "{}/{}",
                                ctx.submission(node).id,
                                ctx.instance(node).map_or("-", |i| i.id.as_str())
                            );
                            *per_instance.entry(inst).or_default() += d;
                            let _ = write!(line, "  (~{})", fmt_duration(d));
                        }
                        None => {
                            bench_unknown += 1;
                            line.push_str("  (time unknown until timed once)");
                        }
                    }
                }
                out.push_str(&line);
                out.push('\n');
            }
            Decision::UpToDate(status) => {
                entry.2 += 1;
                let _ = writeln!(
                    out,
                    "  up-to-date {:<60} {lane:<9}  last run {}",
                    node.id,
                    status.name()
                );
            }
        }
    }
    if !per_instance.is_empty() {
        let _ = writeln!(out, "\nestimated bench-lane (exclusive) time per instance:");
        for (inst, d) in &per_instance {
            let _ = writeln!(out, "  {inst:<50} {}", fmt_duration(*d));
        }
    }
    let _ = write!(
        out,
        "\nestimated bench-lane time in total: {}",
        fmt_duration(bench_total)
    );
    if bench_unknown > 0 {
        let _ = write!(out, " + {bench_unknown} exclusive steps of unknown length");
    }
    out.push_str("\n\nstep kind   steps   run   up-to-date\n");
    for (kind, (n, r, u)) in &counts {
        let _ = writeln!(out, "{:<10} {n:>6} {r:>5} {u:>12}", kind.name());
    }
    out.push_str("(dry run: nothing was built, fetched or run)\n");
    out
}
