//! The timing session: every (instance, operation) measured together, in rounds.
//!
//! Each member is timed by several `kem-runner serve` processes ([`processes_for`]: up to
//! [`PROCESSES`]), started one after the other, each warmed up and calibrated to a short
//! batch; then rounds follow: each round times one batch of every member's every process in
//! a freshly shuffled order (ChaCha8 from a recorded seed), reading the bench core's
//! `/proc/stat` line around each batch and the runner's own scheduler counters to mark
//! interfered batches ([`crate::measure::interference`]). With a yardstick
//! ([`Settings::gauge`]) every runner times it in short blocks inside each of its batches,
//! so the host's state is measured with every batch ([`crate::measure::states`]): the
//! estimate rests on the clean batches of the host's uncontended state. Rounds go on until
//! every member's 95% bootstrap CI of the median per-op cycles (over its processes' pooled
//! batches, resampling processes then batches: `pool.rs`) is within `precision` of the
//! median (and its figure is not flagged), or the session's bench time, from its first
//! runner's start to its last runner's finish, would pass the budget. A member (or a group
//! of members, [`Settings::group`]) that has reached the precision with enough rounds is
//! timed in only one round of four from then on ([`crate::measure::rounds::visit_every`]),
//! so the budget goes to the members whose CI is still wide; its record says from which
//! round and why. Then each runner takes its single-call samples, loop overhead, stack and
//! peak RSS in its own process and returns its record, and a member's processes' records
//! become its one record (`finish.rs`). Slow drift of the host thus spreads over all
//! members instead of landing on whichever was measured at that moment, two objects in the
//! same session are compared on the same moments of the host, and a member's interval
//! covers how its processes differ.
//!
//! Every runner runs in the sandbox like the per-step runners ([`super::sandbox`]): it
//! reads the runner, its object, the yardstick and `api.h`, writes only its own scratch
//! folder, under the step's memory limit. Its protocol lines come on the runner's record
//! channel (the stdout it was started with; the KEM's own stdout goes to stderr), so a KEM
//! that prints `batch ...` cannot answer for it.
//!
//! A time step's member has one more runner, its reference, which all its processes share
//! (its first process's command line and sandbox, its own scratch folder): every batch is
//! made from a fresh seed and answers the fold of its outputs, which the reference must
//! reproduce (dec's once per round before the member's batches in it, keygen's and enc's for
//! a few batches replayed after the rounds), else the member fails with "outputs differ
//! when timed" ([`checked`]).
//!
//! A batch that claims more time than the engine waited for its answer is implausible
//! (code in the runner's process forging answers): its member fails at once, before its
//! claimed time can use up the session's budget.
//!
//! A member that fails (bad return code, crash, timeout, implausible batch, in any of its
//! processes) leaves the session with its reason, all its processes stopped; the others go
//! on.

use std::ops::Range;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::SeedableRng;

mod allocation;
mod checked;
mod clocks;
mod finish;
mod live;
mod pool;
#[cfg(test)]
mod tests;

use super::exec::{self, job_on_stdin, Log, NoLine, Served};
use super::outside;
use super::sandbox::disk::{DiskGuard, DISK};
use super::sandbox::{Jail, Sandbox};
use super::stop::Stop;
use crate::measure::interference;
use crate::measure::rounds::MIN_ROUNDS;
use crate::measure::states::{self, Cut};
pub use crate::record::rounds::{HostStates, Rounds, StateFigure, Stopped, Visit, Yardstick};
use crate::record::TimeOutput;
use allocation::{due, reallocate, stop_rule, tail_ns};
pub use checked::Reference;
use kem_native::serve::{BatchReply, Ready, BATCH, DONE, READY};
use live::Live;
use pool::Pool;

/// Length of one batch (shorter when the step's `trial` is).
pub const DEFAULT_BATCH: Duration = Duration::from_millis(20);

/// Bootstrap resamples of the stopping check (the recorded interval uses
/// [`crate::measure::stats::BOOTSTRAP_RESAMPLES`]).
const CHECK_RESAMPLES: usize = 200;

/// One (object, operation) to time.
pub struct Member {
    /// For messages: `ml-kem/ML-KEM-512-clean/time:keygen`.
    pub label: String,
    pub object: PathBuf,
    /// The same code linked in other orders, timed in every batch with `object` (the
    /// build's `layouts`; see `run::steps::link`); the session lets the runner read them.
    pub layouts: Vec<PathBuf>,
    pub api_h: PathBuf,
    pub namespace: String,
    pub op: String,
    pub min_iters: u64,
    /// Single-call samples of the member in all, split among its processes.
    pub samples: u32,
    /// Share of the session's budget, ns of bench time (the session's, start and end
    /// included).
    pub budget_ns: u64,
    pub log: exec::Log,
    /// What its runner may read and write (the runner, the object, `api.h`; its scratch
    /// folder) and its memory limit.
    pub jail: Jail,
    /// Its reference runner's scratch and jail: with one, the outputs of all its
    /// processes' batches are checked (`checked.rs`).
    pub reference: Option<Reference>,
    /// Its other runner processes, timed in the same rounds as this one (`pool.rs`): each
    /// a `serve` of its own, with its own log and scratch folder, sharing the first one's
    /// setup seed, calls per batch and reference. Empty: one process.
    pub more: Vec<Process>,
}

/// A member's further runner process: where it logs and works.
pub struct Process {
    pub log: exec::Log,
    pub jail: Jail,
}

impl Member {
    /// The same member in another runner process `p`.
    fn sibling(&self, p: Process) -> Member {
        Member {
            label: self.label.clone(),
            object: self.object.clone(),
            layouts: self.layouts.clone(),
            api_h: self.api_h.clone(),
            namespace: self.namespace.clone(),
            op: self.op.clone(),
            min_iters: self.min_iters,
            samples: self.samples,
            budget_ns: 0,
            log: p.log,
            jail: p.jail,
            reference: None,
            more: Vec::new(),
        }
    }
}

/// Runner processes per member at most ([`processes_for`]).
pub const PROCESSES: usize = 8;
/// Tasks of one served runner as `RLIMIT_NPROC` counts them where contained processes run
/// as the engine's user: bubblewrap and its init, kem-runner and its stack-measuring thread,
/// the engine's two threads reading its pipes; and some to spare.
const TASKS_PER_RUNNER: u64 = 8;
/// Timed runner processes per session at most (each has its reference besides): a session
/// of many members gives each fewer processes.
pub const RUNNERS: usize = 512;

/// How many runner processes each of `members` members of a session gets: [`PROCESSES`],
/// fewer when the session would start more than [`RUNNERS`], at least one.
pub fn processes_for(members: usize) -> usize {
    (RUNNERS / members.max(1)).clamp(1, PROCESSES)
}

/// Settings shared by all members.
pub struct Settings {
    pub runner: PathBuf,
    pub sandbox: Sandbox,
    pub bench_cpu: usize,
    /// Target CI half-width relative to the median (0.01 = 1%).
    pub precision: f64,
    pub batch: Duration,
    /// Longest wait for one answer of a runner (the step's timeout).
    pub timeout: Duration,
    /// Members visited together, in consecutive groups of this many (the A, B and A/A
    /// triples of `compare --measure`, whose rounds must stay paired); 1 otherwise.
    pub group: usize,
    /// The yardstick every runner times inside its batches (`None`: no host states).
    pub gauge: Option<Gauge>,
}

/// The yardstick ([`super::yardstick`]) as the runners load it, and what identifies it.
#[derive(Debug, Clone)]
pub struct Gauge {
    pub object: PathBuf,
    pub api_h: PathBuf,
    pub name: String,
    pub object_sha256: String,
}

/// One member's end of the session.
pub struct Outcome {
    pub commands: Vec<Vec<String>>,
    pub result: Result<(TimeOutput, Rounds), Stop>,
    /// Per-op cycles of every round the member was timed in, for paired comparisons (the
    /// members of a group are timed in the same rounds).
    pub values: Vec<f64>,
    /// Whether each round was interfered.
    pub interfered: Vec<bool>,
    /// How long the member's runner process lasted, from its start to its exit (for the
    /// plausibility of its record).
    pub elapsed: Duration,
}

/// A fresh random seed for the round order and the bootstrap.
pub fn fresh_seed() -> u64 {
    let mut b = [0u8; 8];
    if kem_native::drbg::OsRng.try_fill(&mut b).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        return t.as_nanos() as u64;
    }
    u64::from_le_bytes(b)
}

/// Run a session over `members`; `on_round(round, worst half-width)` is told after each
/// round. Outcomes come back in the order of `members`.
///
/// The steps: start every runner ([`spawn_all`]: load, warm up, calibrate), time rounds
/// until the stop rule holds ([`rounds`]), then let every member's runner finish in its own
/// process ([`finish_member`]).
pub fn run(
    members: Vec<Member>,
    s: &Settings,
    on_round: &dyn Fn(usize, f64),
) -> (String, u64, Vec<Outcome>) {
    let seed = fresh_seed();
    let id = format!("{}-{:08x}", super::utc_now(), seed as u32);
    let budget_ns: u64 = members.iter().map(|m| m.budget_ns).sum();
    let (mut live, spans) = expand(members);
    let rate = clocks::machine_rate();
    let start = Instant::now();
    spawn_all(&mut live, &spans, s);
    spread(&mut live, &spans);
    let stopped = rounds(
        &mut live,
        &spans,
        (budget_ns, seed, rate, start),
        s,
        on_round,
    );
    late_cpu(&mut live);
    checked::replay_all(&mut live, &spans, s);
    spread(&mut live, &spans);
    let end = finish::End {
        id: &id,
        seed,
        runners: live.len(),
        stopped,
        budget_ns,
        cut: host_cut(&live),
        rate,
        start,
    };
    let out = finish::all(live, &spans, &end, s);
    (id, seed, out)
}

/// Every member's runner processes as lives, a member's next to each other (its span):
/// each member gets as many as the one with the fewest ([`Member::more`]), so the members'
/// processes are visited together in groups of one size. A member's processes share one
/// setup seed (one key pair), so its one reference serves them all.
fn expand(members: Vec<Member>) -> (Vec<Live>, Vec<Range<usize>>) {
    let k = members.iter().map(|m| 1 + m.more.len()).min().unwrap_or(1);
    let mut live = Vec::new();
    let mut spans = Vec::new();
    for mut m in members {
        let start = live.len();
        let more = std::mem::take(&mut m.more);
        let siblings: Vec<Member> = more.into_iter().take(k - 1).map(|p| m.sibling(p)).collect();
        let total = m.samples as usize;
        let (checked, setup) = (m.reference.is_some(), checked::setup_seed());
        for (i, mut m) in std::iter::once(m).chain(siblings).enumerate() {
            m.samples = kem_native::serve::share(total, k, i) as u32;
            let mut l = Live::new(m);
            l.processes = k;
            l.out.checked = checked;
            l.out.setup = setup.clone();
            // Every runner and the reference start with the setup's key pair.
            l.out.key = setup.clone();
            l.out.reference_key = setup.clone();
            live.push(l);
        }
        spans.push(start..live.len());
    }
    // Every runner and reference runs the whole session: each one's process headroom
    // counts beyond the others' tasks ([`Jail::alongside`]).
    let references = live.iter().filter(|l| l.m.reference.is_some()).count();
    let alongside = TASKS_PER_RUNNER * (live.len() + references) as u64;
    for l in &mut live {
        l.m.jail.alongside = alongside;
        if let Some(r) = l.m.reference.as_mut() {
            r.jail.alongside = alongside;
        }
    }
    (live, spans)
}

/// A member fails as a whole: once one of its processes failed, the others stop with the
/// same status and reason.
fn spread(live: &mut [Live], spans: &[Range<usize>]) {
    for span in spans {
        let lives = &mut live[span.clone()];
        let Some(first) = lives.iter().find_map(|l| l.failed.clone()) else {
            continue;
        };
        for l in lives.iter_mut().filter(|l| l.failed.is_none()) {
            l.fail(first.clone());
        }
    }
}

/// The stop rule's view of each live (`None`: failed): its member's, over the batches of
/// all the member's processes ([`Pool::check`]).
fn member_checks(
    live: &[Live],
    spans: &[Range<usize>],
    cut: Option<&Cut>,
    seed: u64,
) -> Vec<Option<(usize, f64)>> {
    let mut checks = vec![None; live.len()];
    for span in spans {
        let lives = &live[span.clone()];
        if lives.iter().all(Live::alive) {
            let c = Pool::of(lives).check(cut, seed);
            checks[span.clone()].fill(c);
        }
    }
    checks
}

/// The host's two states so far, from the yardstick blocks of every batch of the session
/// (`None`: one state, or no yardstick).
fn host_cut(live: &[Live]) -> Option<Cut> {
    let blocks: Vec<f64> = live
        .iter()
        .flat_map(|l| l.gauge.iter().flatten().copied())
        .collect();
    states::two_states(&blocks)
}

/// What the runners' processes used after their last batch counts too, and what they use
/// in a short pause after the last round (`outside::PAUSE`, skipped when the run is
/// interrupted), when none is timed: such a runner fails, and the others' last rounds are
/// marked.
fn late_cpu(live: &mut [Live]) {
    let mut late: Vec<String> = live
        .iter_mut()
        .filter(|l| l.alive())
        .filter_map(Live::fail_if_busy_outside)
        .collect();
    if !exec::cancelled() {
        let then: Vec<_> = live.iter().map(Live::cpu_now).collect();
        std::thread::sleep(outside::PAUSE);
        for (l, then) in live.iter_mut().zip(then) {
            if let Some(label) = then.and_then(|t| l.fail_if_busy_in_pause(t)) {
                late.push(label);
            }
        }
    }
    for l in live.iter_mut().filter(|l| l.alive()) {
        outside::mark(&mut l.why, &late);
    }
}

/// Start the runners one at a time: loading, warm-up and calibration on the bench core.
/// A member's first process calibrates its calls per batch and the others take them
/// (`--batch-iters`), so that one feed of dec's ciphertexts serves them all. Every runner
/// holds its pipes and log for the whole session; one that cannot start or does not report
/// ready fails.
fn spawn_all(live: &mut [Live], spans: &[Range<usize>], s: &Settings) {
    let references = live.iter().filter(|l| l.m.reference.is_some()).count();
    let room = exec::make_room_for(live.len() + references);
    for span in spans {
        let mut given = None;
        for l in &mut live[span.clone()] {
            if let Err(why) = &room {
                l.fail(Stop::failed(why.clone()));
                continue;
            }
            if exec::cancelled() {
                l.fail(Stop::failed("interrupted"));
                continue;
            }
            spawn(l, s, given);
            if l.alive() && given.is_some_and(|calls| calls != l.out.calls) {
                l.fail(Stop::failed(format!(
                    "{}: implausible timing record: kem-runner's ready line says {} calls per \
                     batch, not the {} it was given",
                    l.m.op,
                    l.out.calls,
                    given.unwrap_or_default()
                )));
            }
            given = given.or(Some(l.out.calls));
        }
    }
}

/// The `kem-runner serve` arguments of one runner (and of its reference), with the `setup`
/// seed its member's runners share when they are checked. Only a member's first process
/// measures the stack of a call (`--stack skip` in the others: painting it takes about
/// 0.1 s of the bench core each) and calibrates its calls per batch (the others are `given`
/// them).
fn serve_args(m: &Member, s: &Settings, setup: Option<&str>, given: Option<u64>) -> Vec<String> {
    [
        "serve".to_string(),
        "--lib".into(),
        m.object.display().to_string(),
        "--api".into(),
        std::path::absolute(&m.api_h)
            .unwrap_or_else(|_| m.api_h.clone())
            .display()
            .to_string(),
        "--ns".into(),
        m.namespace.clone(),
        "--op".into(),
        m.op.clone(),
        "--cpu".into(),
        s.bench_cpu.to_string(),
        "--batch-ns".into(),
        s.batch.as_nanos().to_string(),
        "--min-iters".into(),
        m.min_iters.to_string(),
        "--samples".into(),
        m.samples.to_string(),
    ]
    .into_iter()
    .chain(
        m.layouts
            .iter()
            .flat_map(|p| ["--layout".to_string(), p.display().to_string()]),
    )
    .chain(s.gauge.iter().flat_map(|g| {
        [
            "--gauge".to_string(),
            g.object.display().to_string(),
            "--gauge-api".to_string(),
            g.api_h.display().to_string(),
        ]
    }))
    .chain(
        setup
            .into_iter()
            .flat_map(|seed| ["--setup-seed".to_string(), seed.to_string()]),
    )
    .chain(given.into_iter().flat_map(|calls| {
        [
            "--stack".to_string(),
            "skip".to_string(),
            "--batch-iters".to_string(),
            calls.to_string(),
        ]
    }))
    .collect()
}

/// Start kem-runner's `serve` job with `args` in `jail`, its words sent as its first stdin
/// line (`kem-runner -`: the same command line as every other job's), logged as `shown`.
pub(super) fn served_job(
    s: &Settings,
    args: &[String],
    jail: &Jail,
    shown: &[String],
    log: &mut Log,
) -> std::io::Result<Served> {
    let (argv, line) = job_on_stdin(&s.runner, args, &s.runner)
        .ok_or_else(|| std::io::Error::other("the serve job's words cannot be written"))?;
    let mut cmd = s.sandbox.command(&s.runner, &argv, jail);
    let mut served = Served::spawn(&mut cmd, shown, s.sandbox.contained(), log)?;
    served.send(&line)?;
    Ok(served)
}

/// Start one runner in its jail and wait for its `ready`, then its reference (a member's
/// first process has it), `given` the calls per batch unless it is the first.
fn spawn(l: &mut Live, s: &Settings, given: Option<u64>) {
    let setup = l.out.checked.then_some(l.out.setup.as_str());
    let args = serve_args(&l.m, s, setup, given);
    let shown: Vec<String> = std::iter::once(s.runner.display().to_string())
        .chain(args.iter().cloned())
        .collect();
    l.commands.push(shown.clone());
    l.m.jail.read.extend(l.m.layouts.iter().cloned());
    if let Some(g) = &s.gauge {
        l.m.jail.read.extend([g.object.clone(), g.api_h.clone()]);
    }
    // Kept on the bench core from its start (`sandbox::pinning`).
    l.m.jail.cpu = Some(s.bench_cpu);
    match served_job(s, &args, &l.m.jail, &shown, &mut l.m.log) {
        Ok(mut served) => {
            served.watch(DiskGuard::new(&l.m.jail.write, DISK));
            let r = served.next_line(&[READY, DONE], Instant::now() + s.timeout, &mut l.m.log);
            l.cpu = outside::Watch::of(served.id());
            l.served = Some(served);
            match &r {
                Ok((w, json)) if w == READY => {
                    let ready = serde_json::from_str::<Ready>(json).ok();
                    checked::ready(l, ready.as_ref());
                    l.gauge_calls = ready.and_then(|r| r.gauge_calls).unwrap_or(0);
                    if s.gauge.is_some() && l.gauge_calls == 0 {
                        l.fail(Stop::failed(format!(
                            "{}: implausible timing record: kem-runner's ready line has no \
                             yardstick calibration (the engine's kem-runner always sends one)",
                            l.m.op
                        )));
                    }
                    if l.alive() {
                        checked::start(l, s, &args, &shown);
                    }
                }
                _ => l.fail_from(r, s.timeout),
            }
        }
        Err(e) => l.fail(Stop::failed(format!("cannot run kem-runner: {e}"))),
    }
}

/// Time rounds until the stop rule holds ([`stop_rule`]): every member's CI within the
/// precision and its figure not flagged (checked from [`MIN_ROUNDS`] rounds on, over the
/// batches its estimate uses: the clean ones of the host's uncontended state, as seen so
/// far), the session's bench time at the budget (since `start`, with one more round as
/// long as the last and the session's end, [`tail_ns`]), or no member left (all failed, or
/// the run was interrupted). Each round times the members [`due`] in it, in a shuffled
/// order; after each check the groups that reached the precision are visited less, those
/// whose CI widened again in every round ([`reallocate`]).
fn rounds(
    live: &mut [Live],
    spans: &[Range<usize>],
    (budget_ns, seed, rate, start): (u64, u64, Option<f64>, Instant),
    s: &Settings,
    on_round: &dyn Fn(usize, f64),
) -> Stopped {
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(seed);
    // A member's processes are visited together, and so are the members of a group.
    let processes = live.first().map_or(1, |l| l.processes);
    let group = s.group.max(1) * processes;
    let mut every = vec![1; live.len().div_ceil(group)];
    let mut round = 0usize;
    loop {
        let began = Instant::now();
        if !live.iter().any(Live::alive) || exec::cancelled() {
            return Stopped::NoMembers;
        }
        let alive: Vec<bool> = live.iter().map(Live::alive).collect();
        let mut order = due(&alive, group, &every, round);
        order.shuffle(&mut rng);
        let mut disturbed = Vec::new();
        for (pos, &i) in order.iter().enumerate() {
            if let Some(label) = live[i].fail_if_busy_outside() {
                disturbed.push(label);
                continue;
            }
            // A member's processes are next to each other, as many for every member.
            let first = i - i % processes;
            let ready = checked::keyed(live, (first, i), round, s)
                .and_then(|()| checked::fed(live, (first, i), round, s));
            if let Err(stop) = ready {
                live[i].fail(stop);
                continue;
            }
            batch(&mut live[i], (round, pos), rate, s);
        }
        for l in live.iter_mut().filter(|l| l.alive()) {
            outside::mark(&mut l.why, &disturbed);
        }
        spread(live, spans);
        round += 1;
        let worst = if round >= MIN_ROUNDS {
            let checks = member_checks(live, spans, host_cut(live).as_ref(), seed);
            let whose = s.group > 1;
            reallocate(
                live,
                &checks,
                (group, whose),
                &mut every,
                round,
                s.precision,
            );
            checks.iter().flatten().map(|c| c.1).fold(0.0, f64::max)
        } else {
            f64::INFINITY
        };
        on_round(round, worst);
        let pause = if exec::cancelled() {
            0
        } else {
            outside::PAUSE.as_nanos() as u64
        };
        let spent = start.elapsed() + began.elapsed();
        let spent_ns = spent.as_nanos() as u64 + tail_ns(live, spans, pause);
        if let Some(stopped) = stop_rule(worst, s.precision, spent_ns, budget_ns) {
            return stopped;
        }
    }
}

/// Time one batch of `l` at position `pos` of session round `round`; its member fails on
/// no answer, a bad answer, a batch claiming more time than it took, or the
/// [`clocks::STRIKES`]th batch whose clocks disagree with the engine's (`rate` being the
/// machine's counter rate).
fn batch(l: &mut Live, (round, pos): (usize, usize), rate: Option<f64>, s: &Settings) {
    // Outside the batch's measures: its seed drawn, dec's ciphertexts fed.
    let line = match checked::batch_line(l) {
        Ok(line) => line,
        Err(stop) => {
            l.fail(stop);
            return;
        }
    };
    let served = l.served.as_mut().expect("alive members are served");
    let before = interference::read_cpu(s.bench_cpu);
    let waited = clocks::run_delay();
    let sent = Instant::now();
    let r = match served.send(&line) {
        Ok(()) => served.next_line(&[BATCH, DONE], Instant::now() + s.timeout, &mut l.m.log),
        Err(_) => Err(NoLine::Ended(served.wait(&mut l.m.log))),
    };
    let wall = sent.elapsed();
    let waited = clocks::run_delay().saturating_sub(waited);
    let busy = l.cpu.after_batch();
    let after = interference::read_cpu(s.bench_cpu);
    l.cpu.add_wall(wall);
    let reply = match &r {
        Ok((w, json)) if w == BATCH => serde_json::from_str::<BatchReply>(json).ok(),
        _ => None,
    };
    let Some(b) = reply.filter(|b| b.iters > 0) else {
        l.fail_from(r, s.timeout);
        return;
    };
    if u128::from(b.ns) > wall.as_nanos() {
        let stop = Stop::failed(format!(
            "implausible timing record: batch {} claims {:.3} ms but kem-runner answered \
             in {:.3} ms",
            l.values.len() + 1,
            b.ns as f64 / 1e6,
            wall.as_secs_f64() * 1e3
        ));
        l.fail(stop);
        return;
    }
    if let Some(why) = clocks::odd(
        l.values.len() + 1,
        &b,
        clocks::Spent { wall, waited, busy },
        rate,
    ) {
        l.odd_clocks += 1;
        let first = l.first_odd.get_or_insert(why).clone();
        if l.odd_clocks >= clocks::STRIKES {
            l.fail(Stop::failed(format!(
                "{first} ({} such batches so far)",
                l.odd_clocks
            )));
            return;
        }
    }
    if let Err(stop) = checked::after_batch(l, &b) {
        l.fail(stop);
        return;
    }
    if s.gauge.is_some() && b.gauge_cycles.is_empty() {
        l.fail(Stop::failed(format!(
            "{}: batch {} came without the yardstick's blocks",
            l.m.op,
            l.values.len() + 1
        )));
        return;
    }
    let calls = l.gauge_calls.max(1) as f64;
    l.gauge
        .push(b.gauge_cycles.iter().map(|&t| t as f64 / calls).collect());
    l.batches.push((b.iters, b.cycles, b.ns));
    l.values.push(b.cycles as f64 / b.iters as f64);
    l.rounds.push(round);
    l.why.push(interference::judge(before, after, &b.own, b.ns));
    l.positions.push(pos as u32);
}
