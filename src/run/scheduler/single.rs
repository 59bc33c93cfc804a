//! The scheduler's single steps: whether a step may start, running one (or the timing
//! session) and turning its record into an outcome, releasing what waited for it. The
//! loop that calls them is in `mod.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use petgraph::graph::NodeIndex;

use super::super::decide::soft_kat_failure;
use super::super::exec;
use super::super::steps;
use super::super::Ctx;
use super::*;
use crate::model::{KindFacts, StepKind};
use crate::record::{self, Status, StepRecord};

/// Whether a step may start now, given how many parallel and exclusive steps run, the
/// parallel workers, and whether an exclusive step (or the timing session) waits to start.
/// A step is handed over only when it can start at once: a parallel one when a worker is
/// free, an exclusive one when the bench lane is idle, so nothing waits in the pool's or the
/// lane's queue that `--fail-fast` or Ctrl-C could not hold back. The isolation policy:
/// `core` (`machine` false) runs both lanes side by side (the pool off the bench core);
/// `machine` starts an exclusive step only when nothing runs, and a parallel one only when
/// no exclusive step runs or waits.
pub(super) fn may_start(
    machine: bool,
    exclusive: bool,
    running_parallel: usize,
    running_exclusive: usize,
    jobs: usize,
    exclusive_waits: bool,
) -> bool {
    if exclusive {
        running_exclusive == 0 && (!machine || running_parallel == 0)
    } else {
        running_parallel < jobs && (!machine || (running_exclusive == 0 && !exclusive_waits))
    }
}

/// Run one step and fill in its record's common fields.
pub(super) fn run_one(ctx: &Ctx, ix: NodeIndex, why: &str) -> StepRecord {
    let started = super::super::utc_now();
    let t0 = Instant::now();
    let mut rec = steps::run(ctx, ix);
    release_job(ctx, ix, &mut rec);
    rec.started = started;
    rec.finished = super::super::utc_now();
    rec.duration_s = t0.elapsed().as_secs_f64();
    rec.ran_because = Some(why.to_string());
    rec
}

/// Whether a step is measured in the campaign's timing session: exclusive `time` steps.
pub(super) fn in_session(ctx: &Ctx, ix: NodeIndex) -> bool {
    let node = ctx.node(ix);
    node.kind == StepKind::Time && node.exclusive
}

/// Run `steps` as one timing session, the coordinating thread kept off the bench core, and
/// fill in each record's common fields (the session's times, each step's own reason to run).
pub(super) fn run_session(
    ctx: &Ctx,
    steps: &[(NodeIndex, String)],
    others: &[usize],
) -> Vec<(NodeIndex, StepRecord)> {
    if !others.is_empty() {
        let _ = kem_native::sys::set_thread_affinity(others);
    }
    let started = super::super::utc_now();
    let t0 = Instant::now();
    let ixs: Vec<NodeIndex> = steps.iter().map(|(ix, _)| *ix).collect();
    let recs = match session_job(ctx, &ixs) {
        Ok(()) => {
            let mut recs = steps::run_time_session(ctx, &ixs);
            for (ix, rec) in ixs.iter().zip(&mut recs) {
                release_job(ctx, *ix, rec);
            }
            recs
        }
        Err(e) => ixs
            .iter()
            .map(|&ix| {
                let why = format!("could not start the timing session's Slurm job: {e}");
                steps::not_run(ctx, ix, Status::Failed, why)
            })
            .collect(),
    };
    let finished = super::super::utc_now();
    let secs = t0.elapsed().as_secs_f64();
    steps
        .iter()
        .zip(recs)
        .map(|((ix, why), mut rec)| {
            rec.started = started.clone();
            rec.finished = finished.clone();
            rec.duration_s = secs;
            rec.ran_because = Some(why.clone());
            (*ix, rec)
        })
        .collect()
}

/// With the Slurm executor, the timing session is one exclusive job: every runner of the
/// session is a job step in it (`srun` forwards the served runners' stdin and stdout).
/// Its `--time` allows every member the step's timeout, and one more.
pub(super) fn session_job(ctx: &Ctx, ixs: &[NodeIndex]) -> std::io::Result<()> {
    let (Some(slurm), Some(spec)) = (&ctx.slurm, ctx.spec(StepKind::Time)) else {
        return Ok(());
    };
    let keys: Vec<usize> = ixs.iter().map(|ix| ix.index()).collect();
    let time = spec.timeout * (keys.len() as u32 + 1);
    slurm.job_for_all(&keys, "time-session", true, time)?;
    Ok(())
}

/// The step at `ix` is done: release its Slurm job (if it had one) and note it in the
/// record; a job that ended from outside (scancel, its time limit) fails the step with
/// that reason.
pub(super) fn release_job(ctx: &Ctx, ix: NodeIndex, rec: &mut StepRecord) {
    let Some(slurm) = &ctx.slurm else { return };
    let Some(job) = slurm.take(ix.index()) else {
        return;
    };
    rec.slurm = Some(slurm.record(&job));
    if let exec::slurm::Ended::Outside { timed_out, why } = slurm.release(&job) {
        if rec.status != Status::Ok && !exec::cancelled() {
            rec.status = if timed_out {
                Status::TimedOut
            } else {
                Status::Failed
            };
            rec.reason = Some(match rec.reason.take() {
                Some(r) => format!("{why}: {r}"),
                None => why,
            });
        }
    }
}

/// Write a record and turn it into an outcome.
pub(super) fn finish_record(ctx: &Ctx, ix: NodeIndex, mut rec: StepRecord, ran: bool) -> Outcome {
    // A reason may quote what a KEM or a tool wrote: no control character is kept.
    rec.reason = rec.reason.map(|r| crate::text::clean(&r));
    let path = ctx.record_path(ctx.node(ix));
    if let Err(e) = record::write_json(&path, &rec) {
        return Outcome {
            status: Status::Failed,
            reason: Some(format!("could not write record {}: {e}", path.display())),
            ran,
            soft: false,
            log: None,
        };
    }
    outcome_of(&rec, ran)
}

pub(super) fn outcome_of(rec: &StepRecord, ran: bool) -> Outcome {
    Outcome {
        status: rec.status,
        reason: rec.reason.clone(),
        ran,
        soft: rec.status == Status::Failed && soft_kat_failure(&rec.data),
        log: rec.logs.first().map(|p| p.display().to_string()),
    }
}

/// Whether dependencies keep a step from running: `(status, reason)` to record instead.
pub(super) fn blocked_by(
    ctx: &Ctx,
    deps: &[NodeIndex],
    outcomes: &BTreeMap<NodeIndex, Outcome>,
    kind: StepKind,
) -> Option<(Status, String)> {
    if kind.table().collects {
        // A report renders whatever exists, failures included.
        return None;
    }
    for d in deps {
        let o = &outcomes[d];
        let id = &ctx.node(*d).id;
        match o.status {
            Status::Ok => {}
            Status::Failed if o.soft => {}
            Status::Failed | Status::TimedOut => {
                let why = o.reason.as_deref().unwrap_or("failed");
                return Some((
                    Status::Skipped,
                    format!("`{id}` failed: {}", first_line(why)),
                ));
            }
            Status::Skipped => {
                return Some((Status::Skipped, format!("`{id}` was skipped")));
            }
            Status::Unsupported => {
                return Some((Status::Unsupported, o.reason.clone().unwrap_or_default()));
            }
        }
    }
    None
}

pub(super) fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// A step finished: count down its dependents, queueing those with nothing left to wait for.
pub(super) fn release(
    ctx: &Ctx,
    ix: NodeIndex,
    selected: &BTreeSet<NodeIndex>,
    waiting: &mut BTreeMap<NodeIndex, usize>,
    ready: &mut BTreeSet<NodeIndex>,
) {
    for next in ctx
        .plan
        .graph
        .neighbors_directed(ix, petgraph::Direction::Outgoing)
    {
        if !selected.contains(&next) {
            continue;
        }
        if let Some(n) = waiting.get_mut(&next) {
            *n -= 1;
            if *n == 0 {
                waiting.remove(&next);
                ready.insert(next);
            }
        }
    }
}

/// The instances of `selected` steps that this CPU cannot run (their `requires-cpu`):
/// (`<submission>/<instance>`, why, the ids of their selected steps), in plan order. Their
/// build says unsupported and every step after it follows: the terminal gets one line for
/// each instance instead of one per step.
pub(super) fn planned_away(
    ctx: &Ctx,
    selected: &BTreeSet<NodeIndex>,
) -> Vec<(String, String, Vec<String>)> {
    let mut out: Vec<(String, String, Vec<String>)> = Vec::new();
    for &ix in selected {
        let node = ctx.node(ix);
        let Some(i) = node.instance else { continue };
        let sub = &ctx.campaign.submissions[node.submission];
        let inst = &sub.instances[i];
        let Some(why) = crate::run::steps::build::lacks_cpu(ctx, inst) else {
            continue;
        };
        let name = format!("{}/{}", sub.id, inst.id);
        match out.iter_mut().find(|(n, _, _)| *n == name) {
            Some((_, _, ids)) => ids.push(node.id.clone()),
            None => out.push((name, why, vec![node.id.clone()])),
        }
    }
    out
}
