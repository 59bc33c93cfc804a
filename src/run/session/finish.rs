//! The session's end: every runner process finishes in its own process (single-call
//! samples, loop overhead, stack, peak RSS) and returns its record; a member's processes'
//! records become its one record, its batches pooled in session order (`pool.rs`), or why
//! it failed.

use std::ops::Range;
use std::time::{Duration, Instant};

use super::super::exec::NoLine;
use super::super::stop::Stop;
use super::live::Live;
use super::pool::Pool;
use super::{Outcome, Rounds, Settings, Stopped};
use crate::measure::states::Cut;
use crate::measure::stats;
use crate::record::TimeOutput;
use kem_native::serve::DONE;

/// What every member's record shares of the session's end.
pub(super) struct End<'a> {
    pub(super) id: &'a str,
    pub(super) seed: u64,
    pub(super) runners: usize,
    pub(super) stopped: Stopped,
    pub(super) budget_ns: u64,
    /// The host's two states over the whole session (`None`: one, or no yardstick).
    pub(super) cut: Option<Cut>,
    /// The machine's counter rate, ticks per ns ([`super::clocks::machine_rate`]).
    pub(super) rate: Option<f64>,
    /// When the session's first runner was started: its bench time counts from here.
    pub(super) start: Instant,
}

/// Every live finishes, then each member's outcome is made from its span of lives, with
/// the session's bench time (`end.start` to the last finish).
pub(super) fn all(
    live: Vec<Live>,
    spans: &[Range<usize>],
    end: &End,
    s: &Settings,
) -> Vec<Outcome> {
    let done: Vec<_> = live.into_iter().map(|l| process(l, s)).collect();
    let bench_s = end.start.elapsed().as_secs_f64();
    let mut done = done.into_iter();
    spans
        .iter()
        .map(|span| member(done.by_ref().take(span.len()).collect(), end, bench_s, s))
        .collect()
}

/// Ask a runner to finish (`finish`) and read its `done` line.
fn ask_finish(l: &mut Live, s: &Settings) -> Result<(String, String), NoLine> {
    let served = l.served.as_mut().expect("alive");
    match served.send("finish") {
        Ok(()) => served.next_line(&[DONE], Instant::now() + s.timeout, &mut l.m.log),
        Err(_) => Err(NoLine::Ended(served.wait(&mut l.m.log))),
    }
}

/// One runner process finishes: its record, which must list the batches it answered, or
/// why it failed.
fn process(mut l: Live, s: &Settings) -> (Live, Result<TimeOutput, Stop>) {
    if l.alive() {
        match ask_finish(&mut l, s) {
            Ok((_, json)) => match serde_json::from_str::<TimeOutput>(&json) {
                Ok(o) if o.failure.is_none() && lists(&o, &l.batches) => {
                    let mut served = l.served.take().expect("alive");
                    served.wait(&mut l.m.log);
                    l.elapsed = served.elapsed();
                    return (l, Ok(o));
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
    (l, Err(stop))
}

/// A member's outcome from its processes: one record whose trials are the pooled batches
/// (each process's single-call samples after the other's, the largest peak RSS, process
/// 0's stack, calibration and overhead), or the first process's failure.
fn member(
    parts: Vec<(Live, Result<TimeOutput, Stop>)>,
    end: &End,
    bench_s: f64,
    s: &Settings,
) -> Outcome {
    let (lives, results): (Vec<Live>, Vec<_>) = parts.into_iter().unzip();
    let pool = Pool::of(&lives);
    let result = results
        .into_iter()
        .collect::<Result<Vec<TimeOutput>, Stop>>()
        .and_then(|outs| {
            let rounds = member_rounds(&pool, &lives[0], (end, bench_s), s)?;
            Ok((merged(outs, &pool), rounds))
        });
    Outcome {
        commands: lives.iter().flat_map(|l| l.commands.clone()).collect(),
        result,
        interfered: pool.why.iter().map(|w| !w.is_empty()).collect(),
        values: pool.values,
        elapsed: lives.iter().map(|l| l.elapsed).sum::<Duration>(),
    }
}

/// The processes' records as the member's one record, its trials in the pool's order.
fn merged(mut outs: Vec<TimeOutput>, pool: &Pool) -> TimeOutput {
    let trials = (pool.order.iter())
        .map(|&(p, b)| outs[p].trials[b].clone())
        .collect();
    let samples = outs.iter().flat_map(|o| o.samples.clone()).collect();
    let peak = outs.iter().filter_map(|o| o.memory.peak_rss_kib).max();
    let stack = outs.iter().filter_map(|o| o.memory.stack_bytes).max();
    let mut o = outs.swap_remove(0);
    o.trials = trials;
    o.samples = samples;
    o.memory.peak_rss_kib = peak;
    o.memory.stack_bytes = stack;
    o
}

/// What a finished member's record keeps of the session (`first`: its process 0, whose
/// visits every process shares).
fn member_rounds(
    pool: &Pool,
    first: &Live,
    (end, bench_s): (&End, f64),
    s: &Settings,
) -> Result<Rounds, Stop> {
    let cut = end.cut.as_ref();
    let (estimate, sel) = pool
        .estimate(cut, end.seed, stats::BOOTSTRAP_RESAMPLES)
        .ok_or_else(|| Stop::failed(format!("{}: no batch was timed", first.m.op)))?;
    let host = s.gauge.as_ref().map(|_| pool.host_states(cut, end.seed));
    Ok(Rounds {
        session: end.id.to_string(),
        seed: end.seed,
        members: end.runners,
        positions: pool.positions.clone(),
        interference: pool.why.clone(),
        clean_only: sel.used.iter().all(|&i| pool.why[i].is_empty()),
        estimate,
        precision: s.precision,
        reached: sel.flags.is_empty() && estimate.rel_half_width() <= s.precision,
        used: sel.used.iter().map(|&i| i as u32).collect(),
        host,
        flags: sel.flags.clone(),
        stopped: end.stopped,
        budget_s: end.budget_ns as f64 * 1e-9,
        bench_s: Some(bench_s),
        yardstick: (s.gauge.as_ref()).and_then(|g| pool.yardstick(g, &sel.used, end.seed)),
        session_rounds: pool.rounds.iter().map(|&r| r as u32).collect(),
        visits: first.visits.clone(),
        counter_rate: end.rate,
        processes: if pool.processes > 1 {
            pool.process.clone()
        } else {
            Vec::new()
        },
    })
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
