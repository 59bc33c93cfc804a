//! The timing session: every (instance, operation) measured together, in rounds.
//!
//! One `kem-runner serve` process per member is started (one after the other, each warmed
//! up and calibrated to a short batch), then rounds follow: each round times one batch of
//! every member in a freshly shuffled order (ChaCha8 from a recorded seed), reading the
//! bench core's `/proc/stat` line around each batch and the runner's own scheduler counters
//! to mark interfered batches ([`crate::measure::interference`]). Rounds go on until every
//! member's 95% bootstrap CI of the median per-op cycles is within `precision` of the
//! median, or the measured batch time reaches the budget; then each runner takes its
//! single-call samples, loop overhead, stack and peak RSS in its own process and returns
//! its record. Slow drift of the host thus spreads over all members instead of landing on
//! whichever was measured at that moment, and two objects in the same session are compared
//! on the same moments of the host.
//!
//! Every runner runs in the sandbox like the per-step runners ([`super::sandbox`]): it
//! reads the runner, its object and `api.h`, writes only its own scratch folder, under the
//! step's memory limit. Its protocol lines come on the runner's record channel (the stdout
//! it was started with; the KEM's own stdout goes to stderr), so a KEM that prints
//! `batch ...` cannot answer for it.
//!
//! A batch that claims more time than the engine waited for its answer is implausible
//! (code in the runner's process forging answers): its member fails at once, before its
//! claimed time can use up the session's budget.
//!
//! A member that fails (bad return code, crash, timeout, implausible batch) leaves the
//! session with its reason; the others go on.
//!
//! With a [`Gauge`] in the settings, the yardstick ([`super::yardstick`]) is timed in every
//! round too, at a random position like a member; it does not count towards the budget or
//! the precision, and every member's [`Rounds`] keeps its per-round cycles and the median
//! of the member's per-round ratio to it ([`Yardstick`]). A yardstick that fails leaves the
//! session without one (its log says why); the members go on.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::exec::{self, NoLine, Served};
use super::sandbox::disk::{DiskGuard, DISK};
use super::sandbox::{self, Jail, Sandbox};
use super::steps::Stop;
use crate::measure::interference;
use crate::measure::rounds::{rounds_used, MIN_ROUNDS};
use crate::measure::stats::{self, Estimate};
pub use crate::record::rounds::{Rounds, Stopped, Yardstick};
use crate::record::TimeOutput;
use kem_native::serve::{BatchReply, BATCH, DONE, READY};

/// Length of one batch (shorter when the step's `trial` is).
pub const DEFAULT_BATCH: Duration = Duration::from_millis(20);

/// Bootstrap resamples of the stopping check (the recorded interval uses
/// [`stats::BOOTSTRAP_RESAMPLES`]).
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
    pub samples: u32,
    /// Share of the session's budget, ns of measured batches.
    pub budget_ns: u64,
    pub log: exec::Log,
    /// What its runner may read and write (the runner, the object, `api.h`; its scratch
    /// folder) and its memory limit.
    pub jail: Jail,
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
}

/// The yardstick as a session runs it: its runner's member (op keygen) and what identifies it.
pub struct Gauge {
    pub member: Member,
    pub name: String,
    pub object_sha256: String,
}

/// One member's end of the session.
pub struct Outcome {
    pub commands: Vec<Vec<String>>,
    pub result: Result<(TimeOutput, Rounds), Stop>,
    /// Per-op cycles of every round (index = round), for paired comparisons.
    pub values: Vec<f64>,
    /// Whether each round was interfered.
    pub interfered: Vec<bool>,
    /// How long the member's runner process lasted, from its start to its exit (for the
    /// plausibility of its record).
    pub elapsed: Duration,
}

struct Live {
    m: Member,
    served: Option<Served>,
    failed: Option<Stop>,
    values: Vec<f64>,
    why: Vec<Vec<String>>,
    positions: Vec<u32>,
    /// The batches as answered (iters, cycles, ns): the final record must list the same.
    batches: Vec<(u64, u64, u64)>,
    commands: Vec<Vec<String>>,
    elapsed: Duration,
    /// CPU its processes use outside its batches ([`super::outside`]).
    cpu: super::outside::Watch,
}

impl Live {
    fn alive(&self) -> bool {
        self.failed.is_none() && self.served.is_some()
    }

    fn fail(&mut self, stop: Stop) {
        if let Some(mut s) = self.served.take() {
            s.kill(
                &format!("stopped by ngcc-pipe: {}", stop.reason),
                &mut self.m.log,
            );
            self.elapsed = s.elapsed();
        }
        self.failed = Some(stop);
    }

    /// A runner's `done` line, or its end, as the member's failure.
    fn fail_from(&mut self, what: Result<(String, String), NoLine>, timeout: Duration) {
        let op = self.m.op.clone();
        let stop = match what {
            Ok((_, json)) => match serde_json::from_str::<TimeOutput>(&json) {
                Ok(out) => Stop::failed(format!(
                    "{op}: {}",
                    out.failure.unwrap_or_else(|| "runner stopped early".into())
                )),
                Err(e) => Stop::failed(format!("{op}: unreadable record from kem-runner ({e})")),
            },
            Err(NoLine::Killed(exec::Exit::TimedOut)) => Stop::timed_out(format!(
                "timed out after {} s waiting for kem-runner (killed)",
                timeout.as_secs()
            )),
            Err(NoLine::Ended(e @ exec::Exit::Signal(_))) => Stop::failed(format!(
                "{op}: kem-runner {} ({})",
                e.describe(),
                sandbox::limits_note(self.m.jail.memory)
            )),
            Err(NoLine::Killed(e)) | Err(NoLine::Ended(e)) => {
                Stop::failed(format!("{op}: kem-runner {}", e.describe()))
            }
        };
        self.fail(stop);
    }

    /// The rounds that count: the clean ones when there are enough (and whether they are).
    fn used_rounds(&self) -> (Vec<usize>, bool) {
        let (used, clean) = rounds_used(self.values.len(), |i| !self.why[i].is_empty());
        (used, clean >= MIN_ROUNDS)
    }

    /// The estimate over the rounds that count.
    fn estimate(&self, seed: u64, resamples: usize) -> Option<(Estimate, bool)> {
        let (used, clean_only) = self.used_rounds();
        let values: Vec<f64> = used.iter().map(|&i| self.values[i]).collect();
        Some((stats::median_ci(&values, seed, resamples)?, clean_only))
    }

    /// The yardstick over this member's rounds that count (and that the yardstick timed).
    fn yardstick(&self, gauge: &Live, g: (&str, &str), seed: u64) -> Option<Yardstick> {
        let (used, _) = self.used_rounds();
        let used: Vec<usize> = used
            .into_iter()
            .filter(|&i| i < gauge.values.len())
            .collect();
        let ys: Vec<f64> = used.iter().map(|&i| gauge.values[i]).collect();
        let mine: Vec<f64> = used.iter().map(|&i| self.values[i]).collect();
        Some(Yardstick {
            name: g.0.to_string(),
            object_sha256: g.1.to_string(),
            values: gauge.values.clone(),
            estimate: stats::median_ci(&ys, seed, stats::BOOTSTRAP_RESAMPLES)?,
            relative: stats::median_ci(
                &stats::paired_ratios(&ys, &mine),
                seed,
                stats::BOOTSTRAP_RESAMPLES,
            )?,
        })
    }
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

/// Run a session over `members` (and the yardstick `gauge`, if any); `on_round(round, worst
/// half-width)` is told after each round. Outcomes come back in the order of `members`.
pub fn run(
    members: Vec<Member>,
    gauge: Option<Gauge>,
    s: &Settings,
    on_round: &dyn Fn(usize, f64),
) -> (String, u64, Vec<Outcome>) {
    let seed = fresh_seed();
    let id = format!("{}-{:08x}", super::utc_now(), seed as u32);
    let budget_ns: u64 = members.iter().map(|m| m.budget_ns).sum();
    let n_members = members.len();
    let runners = n_members + usize::from(gauge.is_some());
    // The yardstick, when there is one, is the last of `live`; it is not a member.
    let (gauge, gauge_member) = match gauge {
        Some(g) => (Some((g.name, g.object_sha256)), Some(g.member)),
        None => (None, None),
    };
    let mut live: Vec<Live> = members
        .into_iter()
        .chain(gauge_member)
        .map(|m| Live {
            m,
            served: None,
            failed: None,
            values: Vec::new(),
            why: Vec::new(),
            positions: Vec::new(),
            batches: Vec::new(),
            commands: Vec::new(),
            elapsed: Duration::ZERO,
            cpu: Default::default(),
        })
        .collect();

    // Every runner holds its pipes and log for the whole session.
    let room = exec::make_room_for(runners);
    // Start the runners one at a time: loading, warm-up and calibration on the bench core.
    for l in live.iter_mut() {
        if let Err(why) = &room {
            l.fail(Stop::failed(why.clone()));
            continue;
        }
        if exec::cancelled() {
            l.fail(Stop::failed("interrupted"));
            continue;
        }
        let args: Vec<String> = [
            "serve".to_string(),
            "--lib".into(),
            l.m.object.display().to_string(),
            "--api".into(),
            std::path::absolute(&l.m.api_h)
                .unwrap_or_else(|_| l.m.api_h.clone())
                .display()
                .to_string(),
            "--ns".into(),
            l.m.namespace.clone(),
            "--op".into(),
            l.m.op.clone(),
            "--cpu".into(),
            s.bench_cpu.to_string(),
            "--batch-ns".into(),
            s.batch.as_nanos().to_string(),
            "--min-iters".into(),
            l.m.min_iters.to_string(),
            "--samples".into(),
            l.m.samples.to_string(),
        ]
        .into_iter()
        .chain(
            l.m.layouts
                .iter()
                .flat_map(|p| ["--layout".to_string(), p.display().to_string()]),
        )
        .collect();
        let shown: Vec<String> = std::iter::once(s.runner.display().to_string())
            .chain(args.iter().cloned())
            .collect();
        l.commands.push(shown.clone());
        l.m.jail.read.extend(l.m.layouts.iter().cloned());
        let mut cmd = s.sandbox.command(&s.runner, &args, &l.m.jail);
        match Served::spawn(&mut cmd, &shown, s.sandbox.contained(), &mut l.m.log) {
            Ok(mut served) => {
                served.watch(DiskGuard::new(&l.m.jail.write, DISK));
                let r = served.next_line(&[READY, DONE], Instant::now() + s.timeout, &mut l.m.log);
                l.cpu = super::outside::Watch::of(served.id());
                l.served = Some(served);
                if !matches!(&r, Ok((w, _)) if w == READY) {
                    l.fail_from(r, s.timeout);
                }
            }
            Err(e) => l.fail(Stop::failed(format!("cannot run kem-runner: {e}"))),
        }
    }

    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(seed);
    let mut used_ns = 0u64;
    let mut round = 0usize;
    let stopped = loop {
        let mut order: Vec<usize> = (0..live.len()).filter(|&i| live[i].alive()).collect();
        if !order.iter().any(|&i| i < n_members) || exec::cancelled() {
            break Stopped::NoMembers;
        }
        order.shuffle(&mut rng);
        let mut disturbed = Vec::new();
        for (pos, &i) in order.iter().enumerate() {
            let l = &mut live[i];
            if let Some(why) = l.cpu.before_batch() {
                l.fail(Stop::failed(format!("{}: {why}", l.m.op)));
                disturbed.push(l.m.label.clone());
                continue;
            }
            let served = l.served.as_mut().expect("alive members are served");
            let before = interference::read_cpu(s.bench_cpu);
            let sent = Instant::now();
            let r = match served.send("batch") {
                Ok(()) => {
                    served.next_line(&[BATCH, DONE], Instant::now() + s.timeout, &mut l.m.log)
                }
                Err(_) => Err(NoLine::Ended(served.wait(&mut l.m.log))),
            };
            let wall = sent.elapsed();
            let after = interference::read_cpu(s.bench_cpu);
            let reply = match &r {
                Ok((w, json)) if w == BATCH => serde_json::from_str::<BatchReply>(json).ok(),
                _ => None,
            };
            let Some(b) = reply.filter(|b| b.iters > 0) else {
                l.fail_from(r, s.timeout);
                continue;
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
                continue;
            }
            if i < n_members {
                used_ns += b.ns;
            }
            l.batches.push((b.iters, b.cycles, b.ns));
            // Every alive member takes part in every round, so round i is `values[i]`.
            l.values.push(b.cycles as f64 / b.iters as f64);
            l.why.push(interference::judge(before, after, &b.own, b.ns));
            l.positions.push(pos as u32);
            l.cpu.after_batch();
        }
        for l in live.iter_mut().filter(|l| l.alive()) {
            super::outside::mark(&mut l.why, &disturbed);
        }
        round += 1;
        let worst = if round >= MIN_ROUNDS {
            live[..n_members]
                .iter()
                .filter(|l| l.alive())
                .filter_map(|l| l.estimate(seed, CHECK_RESAMPLES))
                .map(|(e, _)| e.rel_half_width())
                .fold(0.0, f64::max)
        } else {
            f64::INFINITY
        };
        on_round(round, worst);
        if worst <= s.precision {
            break Stopped::Precision;
        }
        if used_ns >= budget_ns {
            break Stopped::Budget;
        }
    };

    // What the members' processes used after their last batch counts too.
    let late: Vec<String> = live
        .iter_mut()
        .filter(|l| l.alive())
        .filter_map(|l| {
            let why = l.cpu.before_batch()?;
            l.fail(Stop::failed(format!("{}: {why}", l.m.op)));
            Some(l.m.label.clone())
        })
        .collect();
    for l in live.iter_mut().filter(|l| l.alive()) {
        super::outside::mark(&mut l.why, &late);
    }

    // The yardstick's runner finishes first; its values count only if it lasted the session.
    let gauge_live = match gauge {
        Some(g) => live.pop().map(|mut l| {
            let finished = l.alive() && {
                let served = l.served.as_mut().expect("alive");
                let r = match served.send("finish") {
                    Ok(()) => served.next_line(&[DONE], Instant::now() + s.timeout, &mut l.m.log),
                    Err(_) => Err(NoLine::Ended(served.wait(&mut l.m.log))),
                };
                served.wait(&mut l.m.log);
                r.is_ok()
            };
            (finished.then_some(l), g)
        }),
        None => None,
    };
    let yardstick = |l: &Live| match &gauge_live {
        Some((Some(gl), (name, sha))) => l.yardstick(gl, (name, sha), seed),
        _ => None,
    };

    // Each runner finishes in its own process: samples, overhead, stack, peak RSS.
    let mut out = Vec::with_capacity(live.len());
    for mut l in live {
        if l.alive() {
            let served = l.served.as_mut().expect("alive");
            let r = match served.send("finish") {
                Ok(()) => served.next_line(&[DONE], Instant::now() + s.timeout, &mut l.m.log),
                Err(_) => Err(NoLine::Ended(served.wait(&mut l.m.log))),
            };
            match r {
                Ok((_, json)) => match serde_json::from_str::<TimeOutput>(&json) {
                    Ok(o) if o.failure.is_none() && lists(&o, &l.batches) => {
                        served.wait(&mut l.m.log);
                        l.elapsed = served.elapsed();
                        let (estimate, clean_only) = l
                            .estimate(seed, stats::BOOTSTRAP_RESAMPLES)
                            .expect("an alive member has rounds");
                        let rounds = Rounds {
                            session: id.clone(),
                            seed,
                            members: runners,
                            positions: std::mem::take(&mut l.positions),
                            interference: l.why.clone(),
                            clean_only,
                            estimate,
                            precision: s.precision,
                            reached: estimate.rel_half_width() <= s.precision,
                            stopped,
                            budget_s: budget_ns as f64 * 1e-9,
                            yardstick: yardstick(&l),
                        };
                        l.served = None;
                        out.push(finish(l, Ok((o, rounds))));
                        continue;
                    }
                    Ok(o) if o.failure.is_some() => l.fail_from(Ok((DONE.into(), json)), s.timeout),
                    Ok(_) => l.fail(Stop::failed(format!(
                        "{}: the runner's record does not list the batches it answered",
                        l.m.op
                    ))),
                    Err(_) => l.fail_from(Ok((DONE.into(), json)), s.timeout),
                },
                Err(e) => l.fail_from(Err(e), s.timeout),
            }
        }
        let stop = l
            .failed
            .take()
            .unwrap_or_else(|| Stop::failed("interrupted"));
        out.push(finish(l, Err(stop)));
    }
    (id, seed, out)
}

/// Whether the final record's trials are exactly the batches the runner answered.
fn lists(out: &TimeOutput, batches: &[(u64, u64, u64)]) -> bool {
    out.trials.len() == batches.len()
        && out
            .trials
            .iter()
            .zip(batches)
            .all(|(t, &b)| (t.iters, t.cycles, t.ns) == b)
}

fn finish(l: Live, result: Result<(TimeOutput, Rounds), Stop>) -> Outcome {
    let interfered = l.why.iter().map(|w| !w.is_empty()).collect();
    Outcome {
        commands: l.commands,
        result,
        values: l.values,
        interfered,
        elapsed: l.elapsed,
    }
}
