//! The scheduler: parallel steps on a rayon pool whose workers avoid the bench core,
//! exclusive steps one at a time on a bench lane of their own, so timing never overlaps
//! another timing step or a build on the bench core while builds go on beside it.
//!
//! Exclusive `time` steps are not run one by one: once every selected `time` step has
//! either an outcome or a decision to run (its KAT done), those to run go to the bench
//! lane together as one timing session ([`super::session`]: interleaved rounds), which
//! then finishes each of them with its own record. Until then they are held aside, so the
//! parallel steps they wait for (other instances' KATs) are not blocked by `machine`.
//!
//! Failure isolation: a failed step's dependents are skipped with the reason, the rest
//! goes on. Every finished step (skips included) writes its record before the next
//! decision is taken, so an interrupted run resumes where it stopped.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Instant;

use globset::GlobMatcher;
use petgraph::graph::NodeIndex;

use super::decide::{decide_node, soft_kat_failure, Decision};
use super::exec;
use super::progress::Progress;
use super::steps;
use super::Ctx;
use crate::model::{Isolation, StepKind};
use crate::record::{self, Status, StepRecord};

/// Options of `ngcc-pipe run`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Parallel workers.
    pub jobs: usize,
    pub force: Vec<GlobMatcher>,
    pub fail_fast: bool,
}

/// What happened to one step in this run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: Status,
    pub reason: Option<String>,
    /// Executed in this run (false: up to date, or skipped without running).
    pub ran: bool,
    /// Failed only by a KAT hash mismatch: dependents still run.
    pub soft: bool,
    pub log: Option<String>,
}

/// The end of a run.
#[derive(Debug)]
pub struct Summary {
    pub outcomes: BTreeMap<NodeIndex, Outcome>,
    pub interrupted: bool,
    pub stopped_early: bool,
}

impl Summary {
    pub fn failed(&self) -> bool {
        self.outcomes.values().any(|o| o.status.is_failure())
    }
}

enum Msg {
    Done(NodeIndex, Box<StepRecord>),
}

/// Work for the bench lane.
enum BenchJob {
    One(NodeIndex, String),
    /// Exclusive `time` steps measured together in one session.
    Session(Vec<(NodeIndex, String)>),
}

/// Run the selected steps. Returns when every selected step has an outcome or the run
/// was stopped (Ctrl-C, `--fail-fast`).
pub fn execute(
    ctx: Arc<Ctx>,
    selected: &BTreeSet<NodeIndex>,
    opts: &RunOptions,
    progress: &Progress,
) -> Summary {
    let bench = ctx.campaign.system.bench_cpu;
    let exclusive = selected.iter().any(|&ix| ctx.node(ix).exclusive);
    let machine = ctx.campaign.system.isolation == Isolation::Machine;
    // Parallel workers (and the compilers they start) stay off the bench core whenever
    // exclusive steps may run beside them.
    let others: Vec<usize> = kem_native::sys::thread_affinity()
        .unwrap_or_default()
        .into_iter()
        .filter(|&c| !exclusive || machine || c != bench)
        .collect();
    let pool = {
        let others = others.clone();
        rayon::ThreadPoolBuilder::new()
            .num_threads(opts.jobs.max(1))
            .thread_name(|i| format!("ngcc-worker-{i}"))
            .start_handler(move |_| {
                if !others.is_empty() {
                    let _ = kem_native::sys::set_thread_affinity(&others);
                }
            })
            .build()
            .expect("thread pool starts")
    };

    let (tx, rx) = mpsc::channel::<Msg>();
    let (bench_tx, bench_rx) = mpsc::channel::<BenchJob>();
    let bench_lane = {
        let ctx = Arc::clone(&ctx);
        let tx = tx.clone();
        let off_bench: Vec<usize> = kem_native::sys::thread_affinity()
            .unwrap_or_default()
            .into_iter()
            .filter(|&c| c != bench)
            .collect();
        std::thread::Builder::new()
            .name("ngcc-bench-lane".into())
            .spawn(move || {
                for job in bench_rx {
                    let done = match job {
                        BenchJob::One(ix, why) => vec![(ix, run_one(&ctx, ix, &why))],
                        BenchJob::Session(steps) => run_session(&ctx, &steps, &off_bench),
                    };
                    for (ix, rec) in done {
                        if tx.send(Msg::Done(ix, Box::new(rec))).is_err() {
                            return;
                        }
                    }
                }
            })
            .expect("bench lane starts")
    };
    let session_steps = selected.iter().filter(|&&ix| in_session(&ctx, ix)).count();
    // Session steps decided to run, held until every session step is decided.
    let mut held: Vec<(NodeIndex, String)> = Vec::new();
    let mut session: Option<Vec<(NodeIndex, String)>> = None;

    let mut waiting: BTreeMap<NodeIndex, usize> = selected
        .iter()
        .map(|&ix| {
            (
                ix,
                ctx.plan.deps(ix).filter(|d| selected.contains(d)).count(),
            )
        })
        .collect();
    let mut outcomes: BTreeMap<NodeIndex, Outcome> = BTreeMap::new();
    let mut ready: BTreeSet<NodeIndex> = waiting
        .iter()
        .filter(|(_, &n)| n == 0)
        .map(|(&ix, _)| ix)
        .collect();
    waiting.retain(|_, n| *n > 0);
    let jobs = opts.jobs.max(1);
    // Steps decided to run, waiting for the isolation policy to let them start.
    let mut queued: VecDeque<(NodeIndex, String)> = VecDeque::new();
    let (mut running_parallel, mut running_exclusive) = (0usize, 0usize);
    let mut stop = false;
    let mut stopped_early = false;

    loop {
        // Take decisions for everything ready; up-to-date and skipped steps finish at once,
        // which may make more steps ready.
        while let Some(ix) = ready.pop_first() {
            if stop {
                continue;
            }
            let node = ctx.node(ix);
            let deps: Vec<NodeIndex> = ctx.plan.deps(ix).filter(|d| selected.contains(d)).collect();
            let outcome = match blocked_by(&ctx, &deps, &outcomes, node.kind) {
                Some((status, reason)) => {
                    let rec = steps::not_run(&ctx, ix, status, reason);
                    Some(finish_record(&ctx, ix, rec, false))
                }
                None => {
                    let ran = |d| outcomes.get(&d).is_some_and(|o: &Outcome| o.ran);
                    match decide_node(&ctx, ix, &opts.force, ran) {
                        Decision::UpToDate(_) => {
                            let rec = ctx
                                .read_record(node)
                                .expect("up-to-date steps have a record");
                            Some(outcome_of(&rec, false))
                        }
                        Decision::Run(why) if in_session(&ctx, ix) => {
                            held.push((ix, why.to_string()));
                            None
                        }
                        Decision::Run(why) => {
                            queued.push_back((ix, why.to_string()));
                            None
                        }
                    }
                }
            };
            if let Some(o) = outcome {
                progress.finished(&node.id, o.status, false, o.reason.as_deref(), 0.0);
                release(&ctx, ix, selected, &mut waiting, &mut ready);
                outcomes.insert(ix, o);
            }
        }

        // Start what the isolation policy allows ([`may_start`]).
        let settled = held.len() + outcomes.keys().filter(|&&ix| in_session(&ctx, ix)).count();
        if !stop && !held.is_empty() && settled == session_steps {
            session = Some(std::mem::take(&mut held));
        }
        if !stop {
            if let Some(steps) = session.take() {
                if may_start(
                    machine,
                    true,
                    running_parallel,
                    running_exclusive,
                    jobs,
                    false,
                ) {
                    for (ix, _) in &steps {
                        progress.started(&ctx.node(*ix).id, true);
                    }
                    running_exclusive += steps.len();
                    bench_tx
                        .send(BenchJob::Session(steps))
                        .expect("bench lane is alive");
                } else {
                    session = Some(steps);
                }
            }
            let mut i = 0;
            while i < queued.len() {
                let ix = queued[i].0;
                let exclusive = ctx.node(ix).exclusive;
                let exclusive_waits =
                    session.is_some() || queued.iter().any(|(q, _)| ctx.node(*q).exclusive);
                let allowed = may_start(
                    machine,
                    exclusive,
                    running_parallel,
                    running_exclusive,
                    jobs,
                    exclusive_waits,
                );
                if !allowed {
                    i += 1;
                    continue;
                }
                let (ix, why) = queued.remove(i).expect("index is in range");
                progress.started(&ctx.node(ix).id, exclusive);
                if exclusive {
                    running_exclusive += 1;
                    bench_tx
                        .send(BenchJob::One(ix, why))
                        .expect("bench lane is alive");
                } else {
                    running_parallel += 1;
                    let ctx = Arc::clone(&ctx);
                    let tx = tx.clone();
                    pool.spawn(move || {
                        let rec = run_one(&ctx, ix, &why);
                        let _ = tx.send(Msg::Done(ix, Box::new(rec)));
                    });
                }
            }
        }
        if running_parallel + running_exclusive == 0 {
            break;
        }
        let Ok(Msg::Done(ix, rec)) = rx.recv() else {
            break;
        };
        let node = ctx.node(ix);
        if node.exclusive {
            running_exclusive -= 1;
        } else {
            running_parallel -= 1;
        }
        if exec::cancelled() && rec.status != Status::Ok {
            // Killed by Ctrl-C: no record, so the next run does it again.
            stop = true;
            continue;
        }
        let secs = rec.duration_s;
        // A KAT that succeeded says its verdicts on its line (a failed one says why).
        let verdicts = match &rec.data {
            Some(crate::record::StepData::Kat(k)) if rec.status == Status::Ok => Some(k.verdicts()),
            _ => None,
        };
        let o = finish_record(&ctx, ix, *rec, true);
        let said = o.reason.as_deref().or(verdicts.as_deref());
        progress.finished(&node.id, o.status, true, said, secs);
        if o.status.is_failure() && opts.fail_fast {
            stop = true;
            stopped_early = true;
        }
        if exec::cancelled() {
            stop = true;
        }
        outcomes.insert(ix, o);
        release(&ctx, ix, selected, &mut waiting, &mut ready);
    }
    drop(bench_tx);
    let _ = bench_lane.join();
    if let Some(slurm) = &ctx.slurm {
        // Whatever is still queued or running (Ctrl-C, a step that panicked) goes.
        slurm.cancel_all();
    }
    Summary {
        outcomes,
        interrupted: exec::cancelled(),
        stopped_early,
    }
}

/// Whether a step may start now, given how many parallel and exclusive steps run, the
/// parallel workers, and whether an exclusive step (or the timing session) waits to start.
/// A step is handed over only when it can start at once: a parallel one when a worker is
/// free, an exclusive one when the bench lane is idle, so nothing waits in the pool's or the
/// lane's queue that `--fail-fast` or Ctrl-C could not hold back. The isolation policy:
/// `core` (`machine` false) runs both lanes side by side (the pool off the bench core);
/// `machine` starts an exclusive step only when nothing runs, and a parallel one only when
/// no exclusive step runs or waits.
fn may_start(
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
fn run_one(ctx: &Ctx, ix: NodeIndex, why: &str) -> StepRecord {
    let started = super::utc_now();
    let t0 = Instant::now();
    let mut rec = steps::run(ctx, ix);
    release_job(ctx, ix, &mut rec);
    rec.started = started;
    rec.finished = super::utc_now();
    rec.duration_s = t0.elapsed().as_secs_f64();
    rec.ran_because = Some(why.to_string());
    rec
}

/// Whether a step is measured in the campaign's timing session: exclusive `time` steps.
fn in_session(ctx: &Ctx, ix: NodeIndex) -> bool {
    let node = ctx.node(ix);
    node.kind == StepKind::Time && node.exclusive
}

/// Run `steps` as one timing session, the coordinating thread kept off the bench core, and
/// fill in each record's common fields (the session's times, each step's own reason to run).
fn run_session(
    ctx: &Ctx,
    steps: &[(NodeIndex, String)],
    others: &[usize],
) -> Vec<(NodeIndex, StepRecord)> {
    if !others.is_empty() {
        let _ = kem_native::sys::set_thread_affinity(others);
    }
    let started = super::utc_now();
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
    let finished = super::utc_now();
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
fn session_job(ctx: &Ctx, ixs: &[NodeIndex]) -> std::io::Result<()> {
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
fn release_job(ctx: &Ctx, ix: NodeIndex, rec: &mut StepRecord) {
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
fn finish_record(ctx: &Ctx, ix: NodeIndex, mut rec: StepRecord, ran: bool) -> Outcome {
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

fn outcome_of(rec: &StepRecord, ran: bool) -> Outcome {
    Outcome {
        status: rec.status,
        reason: rec.reason.clone(),
        ran,
        soft: rec.status == Status::Failed && soft_kat_failure(&rec.data),
        log: rec.logs.first().map(|p| p.display().to_string()),
    }
}

/// Whether dependencies keep a step from running: `(status, reason)` to record instead.
fn blocked_by(
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

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// A step finished: count down its dependents, queueing those with nothing left to wait for.
fn release(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::tests::campaign;
    use crate::run::test_ctx::{ctx, ix};

    #[test]
    fn core_isolation_runs_both_lanes_side_by_side() {
        for waits in [false, true] {
            // Parallel steps up to the workers, whatever the bench lane does.
            assert!(may_start(false, false, 0, 1, 2, waits));
            assert!(may_start(false, false, 1, 1, 2, waits));
            assert!(!may_start(false, false, 2, 0, 2, waits));
            // One exclusive step at a time, beside parallel ones.
            assert!(may_start(false, true, 2, 0, 2, waits));
            assert!(!may_start(false, true, 0, 1, 2, waits));
        }
    }

    #[test]
    fn machine_isolation_keeps_exclusive_steps_alone() {
        // An exclusive step: only on an idle machine.
        assert!(may_start(true, true, 0, 0, 2, true));
        assert!(!may_start(true, true, 1, 0, 2, true));
        assert!(!may_start(true, true, 0, 1, 2, true));
        // A parallel step: not beside an exclusive one, not while one waits, not beyond
        // the workers.
        assert!(may_start(true, false, 0, 0, 2, false));
        assert!(may_start(true, false, 1, 0, 2, false));
        assert!(!may_start(true, false, 2, 0, 2, false));
        assert!(!may_start(true, false, 0, 1, 2, false));
        assert!(!may_start(true, false, 0, 0, 2, true));
    }

    fn outcome(status: Status, soft: bool, reason: &str) -> Outcome {
        Outcome {
            status,
            reason: Some(reason.to_string()),
            ran: true,
            soft,
            log: None,
        }
    }

    #[test]
    fn a_dependency_that_did_not_succeed_blocks_with_its_reason() {
        let tmp = tempfile::tempdir().unwrap();
        let c = ctx(campaign(1), tmp.path());
        let kat = ix(&c, "s/K-0/kat");
        let build = ix(&c, "s/K-0/build");
        let blocked = |status, soft, reason: &str, kind| {
            let outcomes = BTreeMap::from([
                (build, outcome(Status::Ok, false, "")),
                (kat, outcome(status, soft, reason)),
            ]);
            blocked_by(&c, &[build, kat], &outcomes, kind)
        };
        assert_eq!(blocked(Status::Ok, false, "", StepKind::Time), None);
        // Hash mismatches only: dependents still run ("timed anyway").
        assert_eq!(
            blocked(Status::Failed, true, "MISMATCH", StepKind::Time),
            None
        );
        assert_eq!(
            blocked(
                Status::Failed,
                false,
                "FAIL: SIGSEGV in keygen\nlog tail",
                StepKind::Time
            ),
            Some((
                Status::Skipped,
                "`s/K-0/kat` failed: FAIL: SIGSEGV in keygen".to_string()
            ))
        );
        assert_eq!(
            blocked(
                Status::TimedOut,
                false,
                "timed out after 8 s",
                StepKind::Time
            ),
            Some((
                Status::Skipped,
                "`s/K-0/kat` failed: timed out after 8 s".to_string()
            ))
        );
        assert_eq!(
            blocked(Status::Skipped, false, "x", StepKind::Time),
            Some((Status::Skipped, "`s/K-0/kat` was skipped".to_string()))
        );
        assert_eq!(
            blocked(Status::Unsupported, false, "lacks avx2", StepKind::Time),
            Some((Status::Unsupported, "lacks avx2".to_string()))
        );
        // A report renders whatever exists, failures included.
        assert_eq!(
            blocked(Status::Failed, false, "FAIL", StepKind::Report),
            None
        );
    }

    #[test]
    fn the_first_dependency_that_blocks_decides() {
        let tmp = tempfile::tempdir().unwrap();
        let c = ctx(campaign(1), tmp.path());
        let (build, kat) = (ix(&c, "s/K-0/build"), ix(&c, "s/K-0/kat"));
        let outcomes = BTreeMap::from([
            (build, outcome(Status::Unsupported, false, "lacks avx2")),
            (kat, outcome(Status::Failed, false, "FAIL")),
        ]);
        assert_eq!(
            blocked_by(&c, &[build, kat], &outcomes, StepKind::Time),
            Some((Status::Unsupported, "lacks avx2".to_string()))
        );
    }

    #[test]
    fn a_step_is_ready_when_its_last_selected_dependency_finishes() {
        let tmp = tempfile::tempdir().unwrap();
        let c = ctx(campaign(1), tmp.path());
        let all: BTreeSet<NodeIndex> = c.plan.graph.node_indices().collect();
        let mut waiting: BTreeMap<NodeIndex, usize> = all
            .iter()
            .map(|&ix| (ix, c.plan.deps(ix).count()))
            .filter(|(_, n)| *n > 0)
            .collect();
        let mut ready = BTreeSet::new();
        let report = ix(&c, "s/report");
        let mut order = vec![];
        // Finish steps in execution order; each release may make others ready.
        let mut todo: VecDeque<NodeIndex> = all
            .iter()
            .copied()
            .filter(|ix| !waiting.contains_key(ix))
            .collect();
        while let Some(ix) = todo.pop_front() {
            order.push(c.node(ix).id.clone());
            assert!(
                c.plan.deps(ix).all(|d| order.contains(&c.node(d).id)),
                "{} ready before its dependencies: {order:?}",
                c.node(ix).id
            );
            release(&c, ix, &all, &mut waiting, &mut ready);
            todo.extend(std::mem::take(&mut ready));
        }
        assert!(waiting.is_empty(), "never ready: {waiting:?}");
        assert_eq!(order.len(), all.len());
        assert_eq!(order.last(), Some(&c.node(report).id));
        // A dependent outside the selection is not counted down.
        let build = ix(&c, "s/K-0/build");
        let only_build: BTreeSet<NodeIndex> = [build].into();
        let mut waiting = BTreeMap::from([(ix(&c, "s/K-0/kat"), 1)]);
        release(&c, build, &only_build, &mut waiting, &mut ready);
        assert!(ready.is_empty());
        assert_eq!(waiting.len(), 1);
    }

    #[test]
    fn only_exclusive_time_steps_join_the_session() {
        let tmp = tempfile::tempdir().unwrap();
        let c = ctx(campaign(1), tmp.path());
        assert!(in_session(&c, ix(&c, "s/K-0/time:keygen")));
        assert!(!in_session(&c, ix(&c, "s/K-0/kat")));
        let mut shared = campaign(1);
        for s in &mut shared.steps {
            s.exclusive = false;
        }
        let c = ctx(shared, tmp.path());
        assert!(!in_session(&c, ix(&c, "s/K-0/time:keygen")));
    }
}
