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
//! Timing on the bench CPU is one process's at a time, machine-wide: an exclusive job (the
//! session, an exclusive step) starts only with the bench CPU's lock
//! ([`super::bench_lock`]); while another campaign holds it the run says so once and goes
//! on with its parallel steps, or, with `--no-wait`, fails its exclusive steps at once.
//!
//! Failure isolation: a failed step's dependents are skipped with the reason, the rest
//! goes on. Every finished step (skips included) writes its record before the next
//! decision is taken, so an interrupted run resumes where it stopped.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::mpsc;
use std::sync::Arc;

use globset::GlobMatcher;
use petgraph::graph::NodeIndex;

use super::bench_lock::{self, BenchCpu, BenchLock};
use super::decide::{decide_node, Decision};
use super::exec;
use super::progress::Progress;
use super::steps;
use super::Ctx;
use crate::model::Isolation;
use crate::record::{Status, StepRecord};

mod best_cell;
mod single;
use single::*;

/// Options of `ngcc-pipe run`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Parallel workers.
    pub jobs: usize,
    pub force: Vec<GlobMatcher>,
    pub fail_fast: bool,
    /// Fail the exclusive steps at once when another process times on the bench CPU,
    /// instead of waiting for it.
    pub no_wait: bool,
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

/// Work for the bench lane, with the bench CPU's lock held for it (dropped when done).
enum BenchJob {
    One(NodeIndex, String, Option<BenchLock>),
    /// Exclusive `time` steps measured together in one session.
    Session(Vec<(NodeIndex, String)>, Option<BenchLock>),
}

/// Run the selected steps. Returns when every selected step has an outcome or the run
/// was stopped (Ctrl-C, `--fail-fast`).
pub fn execute(
    ctx: Arc<Ctx>,
    selected: &BTreeSet<NodeIndex>,
    opts: &RunOptions,
    progress: &Progress,
) -> Summary {
    let exclusive = selected.iter().any(|&ix| ctx.node(ix).exclusive);
    let lanes = Lanes::start(&ctx, exclusive, opts.jobs.max(1));
    let mut s = Scheduler::new(&ctx, selected, opts, progress, &lanes);
    s.run();
    let Scheduler {
        outcomes,
        stopped_early,
        ..
    } = s;
    lanes.stop();
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

/// The two lanes: a rayon pool for parallel steps (its workers off the bench core whenever
/// exclusive steps may run beside them) and the bench lane's thread, and the channels their
/// records come back on.
struct Lanes {
    pool: rayon::ThreadPool,
    tx: mpsc::Sender<Msg>,
    rx: mpsc::Receiver<Msg>,
    bench_tx: mpsc::Sender<BenchJob>,
    bench_lane: std::thread::JoinHandle<()>,
}

impl Lanes {
    fn start(ctx: &Arc<Ctx>, exclusive: bool, jobs: usize) -> Lanes {
        let bench = ctx.campaign.system.bench_cpu;
        let machine = ctx.campaign.system.isolation == Isolation::Machine;
        let cpus = kem_native::sys::thread_affinity().unwrap_or_default();
        // Parallel workers (and the compilers they start) stay off the bench core whenever
        // exclusive steps may run beside them.
        let others: Vec<usize> = cpus
            .iter()
            .copied()
            .filter(|&c| !exclusive || machine || c != bench)
            .collect();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(jobs)
            .thread_name(|i| format!("ngcc-worker-{i}"))
            .start_handler(move |_| {
                if !others.is_empty() {
                    let _ = kem_native::sys::set_thread_affinity(&others);
                }
            })
            .build()
            .expect("thread pool starts");
        let (tx, rx) = mpsc::channel::<Msg>();
        let (bench_tx, bench_rx) = mpsc::channel::<BenchJob>();
        let off_bench: Vec<usize> = cpus.into_iter().filter(|&c| c != bench).collect();
        let lane_ctx = Arc::clone(ctx);
        let lane_tx = tx.clone();
        let bench_lane = std::thread::Builder::new()
            .name("ngcc-bench-lane".into())
            .spawn(move || {
                for job in bench_rx {
                    let done = match job {
                        BenchJob::One(ix, why, _lock) => {
                            vec![(ix, run_one(&lane_ctx, ix, &why))]
                        }
                        BenchJob::Session(steps, _lock) => {
                            run_session(&lane_ctx, &steps, &off_bench)
                        }
                    };
                    for (ix, rec) in done {
                        if lane_tx.send(Msg::Done(ix, Box::new(rec))).is_err() {
                            return;
                        }
                    }
                }
            })
            .expect("bench lane starts");
        Lanes {
            pool,
            tx,
            rx,
            bench_tx,
            bench_lane,
        }
    }

    /// Close the bench lane and wait for it.
    fn stop(self) {
        drop(self.bench_tx);
        let _ = self.bench_lane.join();
    }
}

/// What [`Scheduler::bench_lock`] says of an exclusive job about to start.
enum Take {
    /// Start it, with the lock (none needed under Slurm).
    Go(Option<BenchLock>),
    /// Another process holds the bench CPU: keep the job.
    Wait,
    /// Its steps failed (`--no-wait`, or the lock file cannot be used).
    Failed,
}

/// A run as it goes: which steps wait for what, what is decided and queued, what runs, and
/// whether another process holds the bench CPU.
struct Scheduler<'a> {
    ctx: &'a Arc<Ctx>,
    selected: &'a BTreeSet<NodeIndex>,
    opts: &'a RunOptions,
    progress: &'a Progress,
    lanes: &'a Lanes,
    machine: bool,
    bench: BenchCpu,
    /// Whether another process holds the bench CPU (told once, then polled).
    bench_busy: bool,
    session_steps: usize,
    /// Session steps decided to run, held until every session step is decided.
    held: Vec<(NodeIndex, String)>,
    session: Option<Vec<(NodeIndex, String)>>,
    waiting: BTreeMap<NodeIndex, usize>,
    outcomes: BTreeMap<NodeIndex, Outcome>,
    ready: BTreeSet<NodeIndex>,
    /// Steps decided to run, waiting for the isolation policy to let them start.
    queued: VecDeque<(NodeIndex, String)>,
    running_parallel: usize,
    running_exclusive: usize,
    stop: bool,
    stopped_early: bool,
}

impl<'a> Scheduler<'a> {
    fn new(
        ctx: &'a Arc<Ctx>,
        selected: &'a BTreeSet<NodeIndex>,
        opts: &'a RunOptions,
        progress: &'a Progress,
        lanes: &'a Lanes,
    ) -> Scheduler<'a> {
        let mut waiting: BTreeMap<NodeIndex, usize> = selected
            .iter()
            .map(|&ix| {
                (
                    ix,
                    ctx.plan.deps(ix).filter(|d| selected.contains(d)).count(),
                )
            })
            .collect();
        let ready: BTreeSet<NodeIndex> = waiting
            .iter()
            .filter(|(_, &n)| n == 0)
            .map(|(&ix, _)| ix)
            .collect();
        waiting.retain(|_, n| *n > 0);
        for (instance, why, ids) in single::planned_away(ctx, selected) {
            progress.planned_away(&instance, &why, ids);
        }
        Scheduler {
            ctx,
            selected,
            opts,
            progress,
            lanes,
            machine: ctx.campaign.system.isolation == Isolation::Machine,
            bench: BenchCpu::new(ctx.campaign.system.bench_cpu),
            bench_busy: false,
            session_steps: selected.iter().filter(|&&ix| in_session(ctx, ix)).count(),
            held: Vec::new(),
            session: None,
            waiting,
            outcomes: BTreeMap::new(),
            ready,
            queued: VecDeque::new(),
            running_parallel: 0,
            running_exclusive: 0,
            stop: false,
            stopped_early: false,
        }
    }

    /// Decide, start and collect until every selected step has an outcome or the run stops.
    fn run(&mut self) {
        loop {
            self.decide_ready();
            if !self.stop {
                self.start_session();
                self.start_queued();
            }
            let pending = !self.stop && self.exclusive_pending();
            if self.running_parallel + self.running_exclusive == 0 && !pending {
                break;
            }
            let msg = if self.bench_busy {
                match self.lanes.rx.recv_timeout(bench_lock::POLL) {
                    Ok(m) => m,
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        if exec::cancelled() {
                            self.stop = true;
                        }
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            } else {
                match self.lanes.rx.recv() {
                    Ok(m) => m,
                    Err(_) => break,
                }
            };
            let Msg::Done(ix, rec) = msg;
            self.collect(ix, *rec);
        }
    }

    /// Whether an exclusive job is decided but not started (the session, a queued step).
    fn exclusive_pending(&self) -> bool {
        self.session.is_some() || self.queued.iter().any(|(q, _)| self.ctx.node(*q).exclusive)
    }

    /// Take decisions for everything ready; up-to-date and skipped steps finish at once,
    /// which may make more steps ready.
    fn decide_ready(&mut self) {
        let ctx = self.ctx;
        while let Some(ix) = self.ready.pop_first() {
            if self.stop {
                continue;
            }
            let node = ctx.node(ix);
            let deps: Vec<NodeIndex> = ctx
                .plan
                .deps(ix)
                .filter(|d| self.selected.contains(d) && best_cell::blocks(ctx, ix, *d))
                .collect();
            let blocked = blocked_by(ctx, &deps, &self.outcomes, node.kind)
                .or_else(|| best_cell::not_best(ctx, ix).map(|why| (Status::Skipped, why)));
            let outcome = match blocked {
                Some((status, reason)) => {
                    let rec = steps::not_run(ctx, ix, status, reason);
                    Some(finish_record(ctx, ix, rec, false))
                }
                None => {
                    let ran = |d| self.outcomes.get(&d).is_some_and(|o: &Outcome| o.ran);
                    match decide_node(ctx, ix, &self.opts.force, ran) {
                        Decision::UpToDate(_) => {
                            let rec = ctx
                                .read_record(node)
                                .expect("up-to-date steps have a record");
                            Some(outcome_of(&rec, false))
                        }
                        Decision::Run(why) if in_session(ctx, ix) => {
                            self.held.push((ix, why.to_string()));
                            None
                        }
                        Decision::Run(why) => {
                            self.queued.push_back((ix, why.to_string()));
                            None
                        }
                    }
                }
            };
            if let Some(o) = outcome {
                self.progress
                    .finished(&node.id, o.status, false, o.reason.as_deref(), 0.0);
                self.settle(ix, o);
            }
        }
        let settled = self.held.len()
            + self
                .outcomes
                .keys()
                .filter(|&&ix| in_session(ctx, ix))
                .count();
        if !self.stop && !self.held.is_empty() && settled == self.session_steps {
            self.session = Some(std::mem::take(&mut self.held));
        }
    }

    /// The bench CPU's lock for an exclusive job about to start ([`Take`]): taken now (none
    /// is needed where Slurm runs the job on a node of its own; the job drops it when it
    /// ends), or
    /// wait while another process holds it (told once; the parallel steps go on
    /// meanwhile). With `--no-wait`, the steps `ixs` fail at once instead
    /// ([`Scheduler::fail_busy`]).
    fn bench_lock(&mut self, ixs: &[NodeIndex]) -> Take {
        if self.ctx.slurm.is_some() {
            return Take::Go(None);
        }
        let what = if ixs.iter().any(|&ix| in_session(self.ctx, ix)) {
            "timing session"
        } else {
            "exclusive step"
        };
        match self.bench.try_take(&self.ctx.out, what) {
            Ok(Ok(l)) => {
                self.bench_busy = false;
                Take::Go(Some(l))
            }
            Ok(Err(h)) if self.opts.no_wait => {
                let why = format!(
                    "bench CPU {} is in use by {} (--no-wait)",
                    self.bench.cpu, h.who
                );
                self.fail_busy(ixs, &why);
                Take::Failed
            }
            Ok(Err(h)) => {
                if !self.bench_busy {
                    self.progress.note(&format!(
                        "waiting for bench CPU {}: in use by {} (lock {}); builds and other \
                         parallel steps go on meanwhile",
                        self.bench.cpu,
                        h.who,
                        h.path.display()
                    ));
                }
                self.bench_busy = true;
                Take::Wait
            }
            Err(e) => {
                self.fail_busy(ixs, &format!("bench CPU {}: {e}", self.bench.cpu));
                Take::Failed
            }
        }
    }

    /// Fail exclusive steps that cannot have the bench CPU.
    fn fail_busy(&mut self, ixs: &[NodeIndex], why: &str) {
        for &ix in ixs {
            let rec = steps::not_run(self.ctx, ix, Status::Failed, why.to_string());
            let o = finish_record(self.ctx, ix, rec, true);
            self.progress.finished(
                &self.ctx.node(ix).id,
                o.status,
                true,
                o.reason.as_deref(),
                0.0,
            );
            self.settle(ix, o);
        }
    }

    /// Hand the timing session to the bench lane when the isolation policy and the bench
    /// CPU's lock allow.
    fn start_session(&mut self) {
        let Some(steps) = self.session.take() else {
            return;
        };
        let (p, e) = (self.running_parallel, self.running_exclusive);
        if !may_start(self.machine, true, p, e, self.opts.jobs.max(1), false) {
            self.session = Some(steps);
            return;
        }
        let ixs: Vec<NodeIndex> = steps.iter().map(|(ix, _)| *ix).collect();
        match self.bench_lock(&ixs) {
            Take::Go(lock) => {
                for (ix, _) in &steps {
                    self.progress.started(&self.ctx.node(*ix).id, true);
                }
                self.running_exclusive += steps.len();
                self.lanes
                    .bench_tx
                    .send(BenchJob::Session(steps, lock))
                    .expect("bench lane is alive");
            }
            Take::Wait => self.session = Some(steps),
            Take::Failed => {}
        }
    }

    /// Start what the isolation policy allows ([`may_start`]) of the queued steps; an
    /// exclusive one needs the bench CPU's lock too.
    fn start_queued(&mut self) {
        let ctx = self.ctx;
        let jobs = self.opts.jobs.max(1);
        let mut i = 0;
        while i < self.queued.len() {
            let ix = self.queued[i].0;
            let exclusive = ctx.node(ix).exclusive;
            // While another process holds the bench CPU, parallel steps need not wait.
            let exclusive_waits = self.exclusive_pending() && !self.bench_busy;
            let allowed = may_start(
                self.machine,
                exclusive,
                self.running_parallel,
                self.running_exclusive,
                jobs,
                exclusive_waits,
            );
            if !allowed {
                i += 1;
                continue;
            }
            let lock = if exclusive {
                match self.bench_lock(&[ix]) {
                    Take::Go(l) => l,
                    Take::Wait => {
                        i += 1;
                        continue;
                    }
                    Take::Failed => {
                        self.queued.remove(i);
                        continue;
                    }
                }
            } else {
                None
            };
            let (ix, why) = self.queued.remove(i).expect("index is in range");
            self.progress.started(&ctx.node(ix).id, exclusive);
            if exclusive {
                self.running_exclusive += 1;
                self.lanes
                    .bench_tx
                    .send(BenchJob::One(ix, why, lock))
                    .expect("bench lane is alive");
            } else {
                self.running_parallel += 1;
                let ctx = Arc::clone(ctx);
                let tx = self.lanes.tx.clone();
                self.lanes.pool.spawn(move || {
                    let rec = run_one(&ctx, ix, &why);
                    let _ = tx.send(Msg::Done(ix, Box::new(rec)));
                });
            }
        }
    }

    /// A step's record came back from a lane: write it, show it, settle its dependents.
    fn collect(&mut self, ix: NodeIndex, rec: StepRecord) {
        let node = self.ctx.node(ix);
        if node.exclusive {
            self.running_exclusive -= 1;
        } else {
            self.running_parallel -= 1;
        }
        if exec::cancelled() && rec.status != Status::Ok {
            // Killed by Ctrl-C: no record, so the next run does it again.
            self.stop = true;
            return;
        }
        let secs = rec.duration_s;
        // A KAT that succeeded says its verdicts on its line (a failed one says why).
        let verdicts = match &rec.data {
            Some(crate::record::StepData::Kat(k)) if rec.status == Status::Ok => Some(k.verdicts()),
            _ => None,
        };
        let o = finish_record(self.ctx, ix, rec, true);
        let said = o.reason.as_deref().or(verdicts.as_deref());
        self.progress.finished(&node.id, o.status, true, said, secs);
        if o.status.is_failure() && self.opts.fail_fast {
            self.stop = true;
            self.stopped_early = true;
        }
        if exec::cancelled() {
            self.stop = true;
        }
        self.settle(ix, o);
    }

    /// Keep a step's outcome and release its dependents.
    fn settle(&mut self, ix: NodeIndex, o: Outcome) {
        self.outcomes.insert(ix, o);
        release(
            self.ctx,
            ix,
            self.selected,
            &mut self.waiting,
            &mut self.ready,
        );
    }
}

#[cfg(test)]
mod tests;
