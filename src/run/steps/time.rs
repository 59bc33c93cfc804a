//! `time` (exclusive): one kem-runner process per instance and operation, pinned to the
//! bench core, calibrated, warmed up, `trials` trials; every raw trial and single-call
//! sample is kept in the record beside the summary statistics and the environment.
//!
//! In a campaign run every `time` step to run is measured in one timing session instead
//! ([`member`], [`from_session`], [`crate::run::session`]): interleaved rounds, one trial
//! per round, the median with its bootstrap interval in the summary.
//!
//! The record comes from a process that also runs the KEM, so it is checked before it is
//! believed: a record whose batch mean disagrees with its own single-call samples by more
//! than 3x, or whose trials claim more time than the runner process lasted, is failed as
//! implausible (its data kept as evidence, kept out of the reports); the records of a
//! session get the same check.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use petgraph::graph::NodeIndex;

use super::{runner_job, Done, KindSpec, RunnerJob, Step, StepError, Stop};
use crate::graph::Node;
use crate::measure::stats;
use crate::model::{Campaign, StepKind, StepParams, StepSpec};
use crate::record::{BuildData, Status, StepData, StepRecord, TimeData, TimeOutput, TimeSummary};
use crate::run::keys::{native, Facts};
use crate::run::session::{self, Member, Rounds, Stopped};
use crate::run::Ctx;

/// The `time` kind: per instance and operation, exclusive.
pub struct Kind;

impl KindSpec for Kind {
    fn inputs(
        &self,
        c: &Campaign,
        node: &Node,
        spec: &StepSpec,
        facts: &Facts,
        m: &mut BTreeMap<String, String>,
    ) {
        measurement_inputs(c, facts, m);
        if let Some(n) = super::instance_settings(c, spec, node).and_then(|s| s.samples) {
            m.insert("samples".into(), n.to_string());
        }
    }

    fn estimate(&self, ctx: &Ctx, ix: NodeIndex) -> Option<Duration> {
        let node = ctx.node(ix);
        let spec = ctx.spec(node.kind)?;
        let samples = ctx.instance(node).map_or(spec.params.samples, |i| {
            spec.samples_for(&ctx.submission(node).id, &i.id)
        });
        let op_s = measured_ns(ctx, node)
            .or_else(|| kat_ns(ctx, node))
            .unwrap_or(0.0)
            * 1e-9;
        Some(Duration::from_secs_f64(session_estimate(
            &spec.params,
            super::link::count(&ctx.campaign),
            samples,
            op_s,
        )))
    }

    fn run(&self, step: &mut Step) -> Done {
        run(step)
    }
}

/// Cache-key inputs of a measurement on the bench core (`time`, `profile`): the machine,
/// the isolation and the runner.
pub fn measurement_inputs(c: &Campaign, facts: &Facts, m: &mut BTreeMap<String, String>) {
    m.insert("environment".into(), facts.env_fingerprint.clone());
    m.insert("isolation".into(), c.system.isolation.name().to_string());
    m.insert("kem-native".into(), native());
}

/// Seconds one member of a timing session takes on the bench core (for the dry run's
/// estimate), with `op_s` seconds per call (0 when not known yet): its budget, `trials x
/// trial`, which bounds the session's bench time, its end included; but at least what one
/// round needs: warm-up and calibration (about a batch and a half and two calls), one
/// batch (at least one call per link order and `min-iters` calls) and its single-call
/// samples.
pub fn session_estimate(p: &StepParams, layouts: usize, samples: u32, op_s: f64) -> f64 {
    let batch = crate::run::session::DEFAULT_BATCH
        .min(p.trial)
        .as_secs_f64()
        .max(op_s * layouts.max(1) as f64)
        .max(op_s * p.min_iters as f64);
    let budget = p.trials as f64 * p.trial.as_secs_f64();
    budget.max(2.5 * batch + (f64::from(samples) + 2.0) * op_s)
}

/// Time per operation from the instance's KAT record, when there is no time record yet: its
/// duration over the calls it made (keygen, enc and dec per count; 100 counts in `all`, 1 in
/// `single`). An upper bound (it includes starting the runner), good enough for an estimate.
fn kat_ns(ctx: &Ctx, node: &Node) -> Option<f64> {
    let r = ctx.read_record(&Node {
        kind: StepKind::Kat,
        op: None,
        ..node.clone()
    })?;
    let counts: u32 = match &r.data {
        Some(StepData::Kat(k)) => k.modes.iter().map(|m| m.counts).sum(),
        _ => return None,
    };
    (counts > 0).then(|| r.duration_s * 1e9 / f64::from(3 * counts))
}

/// Mean time per operation of the existing `time` record of `node`'s instance and
/// operation, whatever its status (for estimates).
pub fn measured_ns(ctx: &Ctx, node: &Node) -> Option<f64> {
    ctx.read_record(&Node {
        kind: StepKind::Time,
        ..node.clone()
    })
    .and_then(|r| match r.data {
        Some(StepData::Time(t)) => Some(t.summary.mean_ns),
        _ => None,
    })
}

/// How far a timing record can be believed.
#[derive(Debug, PartialEq)]
pub enum Plausibility {
    Plausible,
    /// Batch mean more than 3x the single calls' figure ([`single_calls`]): what
    /// preemption of the bench core does to whole trials; kept, with this reason.
    Disturbed(String),
    /// Batch mean below a third of the single calls' figure, or trials longer than the
    /// process: not what the runner can have measured; the step fails.
    Implausible(String),
}

impl Plausibility {
    /// The step status it leads to; its reason joins `notes` (an implausible record's first).
    fn into_status(self, notes: &mut Vec<String>) -> Status {
        match self {
            Plausibility::Plausible => Status::Ok,
            Plausibility::Disturbed(r) => {
                notes.push(r);
                Status::Ok
            }
            Plausibility::Implausible(r) => {
                notes.insert(0, r);
                Status::Failed
            }
        }
    }
}

/// The single calls' figure a batch mean is held against: their
/// [`stats::SINGLE_QUANTILE`] (a call that was preempted only grows, and every call is
/// kept), their median with fewer than 10 samples.
fn single_calls(samples: &[u64]) -> Option<f64> {
    let s: Vec<f64> = samples.iter().map(|&c| c as f64).collect();
    if s.len() < 10 {
        return stats::median(&s);
    }
    stats::quantile(&s, stats::SINGLE_QUANTILE)
}

/// Check a timing record against itself and against the runner's wall-clock time: batch
/// mean and the single calls' figure must agree within 3x (the single call's own counter
/// overhead as slack), and the trials cannot add up to more time than the process ran.
pub fn plausibility(out: &TimeOutput, elapsed: Duration) -> Plausibility {
    let iters: u64 = out.trials.iter().map(|t| t.iters).sum();
    let cycles: u64 = out.trials.iter().map(|t| t.cycles).sum();
    let trial_ns: u64 = out.trials.iter().map(|t| t.ns).sum();
    if trial_ns as u128 > elapsed.as_nanos() {
        return Plausibility::Implausible(format!(
            "implausible timing record: its trials add up to {:.3} s but kem-runner ran {:.3} s",
            trial_ns as f64 / 1e9,
            elapsed.as_secs_f64()
        ));
    }
    if iters == 0 || out.samples.is_empty() {
        return Plausibility::Plausible;
    }
    let batch = cycles as f64 / iters as f64;
    let Some(single) = single_calls(&out.samples) else {
        return Plausibility::Plausible;
    };
    let slack = out.overhead.single_call_cycles.max(0.0);
    let (lo, hi) = (batch.min(single), batch.max(single));
    if hi <= 3.0 * lo + slack {
        return Plausibility::Plausible;
    }
    let which = if out.samples.len() < 10 {
        "median"
    } else {
        "10th percentile"
    };
    let what = format!(
        "batch mean {batch:.0} cycles/op and the single calls' {which} {single:.0} cycles disagree by more than 3x"
    );
    if batch < single {
        Plausibility::Implausible(format!("implausible timing record: {what}"))
    } else {
        Plausibility::Disturbed(format!(
            "implausible timing record: {what} (trials disturbed: is the bench core shared?)"
        ))
    }
}

/// Single-call samples of the step's instance (its `instances` setting, else the step's).
fn samples_of(step: &Step) -> u32 {
    let spec = step.ctx.spec(step.node.kind).expect("declared");
    let sub = step.ctx.submission(step.node);
    step.ctx
        .instance(step.node)
        .map_or(spec.params.samples, |i| spec.samples_for(&sub.id, &i.id))
}

fn run(step: &mut Step) -> Done {
    let ctx = step.ctx;
    let (build_rec, build) = match step.build() {
        Ok(b) => b,
        Err(e) => return e.into(),
    };
    let p = &ctx.spec(step.node.kind).expect("declared").params;
    let extra = [
        "--trials".to_string(),
        p.trials.to_string(),
        "--trial-ns".to_string(),
        p.trial.as_nanos().to_string(),
        "--min-iters".to_string(),
        p.min_iters.to_string(),
        "--samples".to_string(),
        samples_of(step).to_string(),
    ];
    let object = ctx.out.join(&build.object);
    let (output, elapsed): (TimeOutput, _) = match runner_job(step, "time", &object, &build, &extra)
    {
        Ok(o) => o,
        Err(e) => return e.into(),
    };
    let summary = crate::measure::stats::summarize(&output);
    let mut notes = summary_notes(&summary, &output, "trials");
    let status = plausibility(&output, elapsed).into_status(&mut notes);
    let reason = (!notes.is_empty()).then(|| notes.join("; "));
    Done {
        status,
        reason,
        data: Some(StepData::Time(Box::new(TimeData {
            output,
            summary,
            static_bytes: build.static_bytes,
            object_cache_key: build_rec.cache_key,
            object_sha256: build.object_sha256,
            environment: ctx.env_of(step.ix),
            rounds: None,
        }))),
    }
}

/// This step as a member of a timing session, timed by `k` runner processes (and one
/// reference they share), with the build it times and the scratch folders of its runners and
/// their references (each the only one its runner may write; see [`Step::runner_jail`]);
/// `Err` is why it cannot take part (no object, no log, no scratch folder). The step's
/// single-call samples are split among its processes.
pub fn member(
    step: &mut Step,
    k: usize,
) -> Result<(Member, StepRecord, BuildData, Vec<PathBuf>), StepError> {
    let ctx = step.ctx;
    let (build_rec, build) = step.build()?;
    let p = &ctx.spec(step.node.kind).expect("declared").params;
    let samples = samples_of(step);
    let op = step.node.op.expect("time is per operation");
    let object = ctx.out.join(&build.object);
    let mut scratches = Vec::new();
    let mut processes = Vec::new();
    for i in 0..k.max(1) {
        let name = match i {
            0 => format!("time__{op}"),
            _ => format!("time__{op}.p{}", i + 1),
        };
        let log = step.job_log(&name)?;
        // The session starts the runner itself (`serve`); the job gives it its scratch
        // and jail.
        let job = RunnerJob::new(step, "serve", &object, &build)?;
        let (scratch, jail) = (job.scratch().to_path_buf(), job.jail(step));
        scratches.push(scratch);
        processes.push(session::Process { log, jail });
    }
    // Its reference, which all its processes share: the same runner in the same jail but
    // its own scratch folder, which the member's runners cannot reach
    // (`session::checked`).
    let reference = RunnerJob::new(step, "serve", &object, &build)?;
    let theirs = reference.scratch().to_path_buf();
    let reference = session::Reference {
        scratch: theirs.clone(),
        jail: reference.jail(step),
    };
    scratches.push(theirs);
    step.contained = true;
    let first = processes.remove(0);
    let member = Member {
        label: step.node.id.clone(),
        object,
        layouts: build.layout_objects(&ctx.out),
        api_h: build.api_h.clone(),
        namespace: build.namespace.clone(),
        op: op.name().to_string(),
        min_iters: 1,
        samples,
        budget_ns: (p.trial.as_nanos() as u64).saturating_mul(u64::from(p.trials)),
        log: first.log,
        jail: first.jail,
        reference: Some(reference),
        more: processes,
    };
    Ok((member, build_rec, build, scratches))
}

/// The step's result from its session outcome; `elapsed` is how long its runner ran. The
/// record is checked like [`run`]'s ([`plausibility`]).
pub fn from_session(
    step: &Step,
    build_rec: StepRecord,
    build: BuildData,
    result: Result<(TimeOutput, Rounds), Stop>,
    elapsed: Duration,
) -> Done {
    let (output, rounds) = match result {
        Ok(r) => r,
        Err(e) => return e.into(),
    };
    let mut summary = crate::measure::stats::summarize(&output);
    summary.median_cycles = Some(rounds.estimate.median);
    summary.ci_low_cycles = Some(rounds.estimate.ci_low);
    summary.ci_high_cycles = Some(rounds.estimate.ci_high);
    summary.rounds = Some(rounds.positions.len() as u32);
    summary.interfered_rounds =
        Some(rounds.interference.iter().filter(|w| !w.is_empty()).count() as u32);
    // A session's estimate is unstable when its CI is wider than the precision target; the
    // CV of rounds spread over the whole session measures the host's drift, which the
    // median and its CI already take into account.
    summary.unstable = !rounds.reached;
    let mut notes = Vec::new();
    // A flagged figure says why first: its interval is no promise then.
    notes.extend(rounds.flags.iter().cloned());
    if rounds.flags.is_empty() && !rounds.reached && !summary.input_groups.is_empty() {
        notes.push(format!(
            "time depends on the inputs: single calls fall into {} groups ({} cycles); every \
             batch draws fresh inputs, so the interval (±{:.1}%) measures the inputs drawn, \
             not the host",
            summary.input_groups.len(),
            crate::measure::inputs::describe(&summary.input_groups),
            rounds.estimate.rel_half_width() * 100.0
        ));
    } else if rounds.flags.is_empty() && !rounds.reached {
        // The stop check's interval rests on fewer resamples than the recorded one: the
        // session can stop at the precision with the recorded interval a little wider.
        let when = match rounds.stopped {
            Stopped::Budget => {
                "when the session's bench time reached its budget (a larger `trials` x \
                 `trial` on the time step narrows it)"
            }
            Stopped::Precision | Stopped::NoMembers => {
                "in the recorded interval; the session's stop check, on fewer resamples, had it \
                 within"
            }
        };
        notes.push(format!(
            "precision not reached: CI half-width {:.1}% > {:.1}% {when}",
            rounds.estimate.rel_half_width() * 100.0,
            rounds.precision * 100.0
        ));
    }
    notes.extend(summary_notes(&summary, &output, "batches"));
    let status = plausibility(&output, elapsed).into_status(&mut notes);
    Done {
        status,
        reason: (!notes.is_empty()).then(|| notes.join("; ")),
        data: Some(StepData::Time(Box::new(TimeData {
            output,
            summary,
            static_bytes: build.static_bytes,
            object_cache_key: build_rec.cache_key,
            object_sha256: build.object_sha256,
            environment: step.ctx.env_of(step.ix),
            rounds: Some(rounds),
        }))),
    }
}

/// The notes a timing summary earns: instability (CV over 2% of a block of trials) and timed units (`trials` or
/// the session's `batches`) that lasted under half or over twice their target.
fn summary_notes(summary: &TimeSummary, output: &TimeOutput, units: &str) -> Vec<String> {
    let mut notes = Vec::new();
    // A session's instability is its CI against the precision, noted by `from_session`.
    if summary.unstable && units == "trials" {
        notes.push(format!(
            "unstable: CV across trials {:.1}% > 2%",
            summary.cv * 100.0
        ));
    }
    if !summary.off_target_trials.is_empty() {
        notes.push(format!(
            "{} of {} {units} lasted less than half or more than twice the target {:.0} ms",
            summary.off_target_trials.len(),
            summary.trials,
            output.calibration.target_trial_ns as f64 / 1e6
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_counts_minimum_rounds_warm_up_and_samples() {
        let p = StepParams {
            trials: 3,
            trial: Duration::from_millis(100),
            min_iters: 1,
            ..StepParams::default()
        };
        // Unknown call time: the budget, which bounds the session's bench time.
        let e = session_estimate(&p, 4, 101, 0.0);
        assert!((e - 0.3).abs() < 1e-9, "{e}");
        // A 16 ms call in 4 link orders: batches of 64 ms; warm-up, one round, then 101
        // single-call samples and the warm-up's calls outlast the budget (the newcomer's
        // FrodoKEM-1344 keygen: the estimate once said 2.1 s for six such operations that
        // took about 19 s).
        let e = session_estimate(&p, 4, 101, 0.016);
        assert!((e - (0.096 + 0.064 + 103.0 * 0.016)).abs() < 1e-9, "{e}");
        // min-iters sets the batch when it asks for more calls than the link orders.
        let p = StepParams { min_iters: 20, ..p };
        let e = session_estimate(&p, 4, 0, 0.016);
        assert!((e - (0.48 + 0.32 + 0.032)).abs() < 1e-9, "{e}");
    }

    fn record(batch_per_op: u64, single: u64) -> TimeOutput {
        record_with(batch_per_op, &[single; 3])
    }

    fn record_with(batch_per_op: u64, samples: &[u64]) -> TimeOutput {
        let samples: Vec<String> = samples.iter().map(u64::to_string).collect();
        let samples = samples.join(",");
        let json = format!(
            r#"{{"op":"keygen","sizes":{{"pk":1,"sk":1,"ct":1,"ss":1}},"pinned_cpu":null,"pin_error":null,
"counter":"rdtsc","rng":"ctr-drbg","core_cycles":{{"status":"unavailable","reason":"x"}},
"calibration":{{"target_trial_ns":1,"batch_iters":1,"batch_ns":1,"iters":100,"min_iters":1}},
"warmup_iters":1,"trials":[{{"iters":100,"cycles":{},"ns":1000000,"core_cycles":null}}],
"samples":[{samples}],
"overhead":{{"cycles_per_call":1.0,"ns_per_call":1.0,"single_call_cycles":40.0}},
"memory":{{"baseline_rss_kib":null,"peak_rss_kib":null,"stack_bytes":null,"stack_painted_bytes":0}},"failure":null}}"#,
            batch_per_op * 100
        );
        serde_json::from_str(&json).unwrap()
    }

    #[test]
    fn batch_and_single_calls_must_agree_within_3x() {
        let long = Duration::from_secs(1);
        use Plausibility::*;
        assert_eq!(plausibility(&record(10_000, 11_000), long), Plausible);
        assert_eq!(plausibility(&record(10_000, 29_000), long), Plausible);
        let Implausible(r) = plausibility(&record(1, 10_000), long) else {
            panic!("a batch far faster than single calls is implausible")
        };
        assert!(r.contains("batch mean 1 cycles/op"), "{r}");
        let Disturbed(r) = plausibility(&record(40_000, 10_000), long) else {
            panic!("a batch far slower than single calls is flagged")
        };
        assert!(r.contains("disturbed"), "{r}");
        // The single call's counter overhead is slack for tiny operations.
        assert_eq!(plausibility(&record(10, 60), long), Plausible);
        // An honest KEM on a shared bench core: most single calls preempted to 4x the
        // clean batches' figure, the fastest ones at it. Held against their 10th
        // percentile, not their median, it is not called implausible.
        let mut shared = vec![40_000u64; 16];
        shared.extend([10_100, 10_200, 10_300, 10_400]);
        assert_eq!(plausibility(&record_with(10_000, &shared), long), Plausible);
        let Implausible(r) = plausibility(&record_with(1_000, &shared), long) else {
            panic!("a batch far below even the fastest single calls is implausible")
        };
        assert!(r.contains("10th percentile"), "{r}");
    }

    #[test]
    fn trials_cannot_last_longer_than_the_process() {
        let Plausibility::Implausible(r) =
            plausibility(&record(10_000, 10_000), Duration::from_micros(10))
        else {
            panic!("trials longer than the process")
        };
        assert!(r.contains("trials add up to 0.001 s"), "{r}");
    }
}
