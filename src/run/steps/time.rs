//! `time` (exclusive): one kem-runner process per instance and operation, pinned to the
//! bench core, calibrated, warmed up, `trials` trials; every raw trial and single-call
//! sample is kept in the record beside the summary statistics and the environment.
//!
//! In a campaign run every `time` step to run is measured in one timing session instead
//! ([`member`], [`from_session`], [`crate::run::session`]): interleaved rounds, one trial
//! per round, the median with its bootstrap interval in the summary.

use std::path::Path;

use super::{runner_job, Done, Step, Stop};
use crate::record::{BuildData, Status, StepData, StepRecord, TimeData, TimeOutput};
use crate::run::session::{Member, Rounds};

pub fn run(step: &mut Step) -> Done {
    let ctx = step.ctx;
    let (build_rec, build) = match step.build() {
        Ok(b) => b,
        Err(e) => return Done::failed(e),
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
        p.samples.to_string(),
    ];
    let object = ctx.out.join(&build.object);
    let output: TimeOutput = match runner_job(step, "time", &object, &build, &extra) {
        Ok(o) => o,
        Err(stop) => return stop.into(),
    };
    let summary = crate::measure::stats::summarize(&output);
    let reason = summary
        .unstable
        .then(|| format!("unstable: CV across trials {:.1}% > 2%", summary.cv * 100.0));
    Done {
        status: Status::Ok,
        reason,
        data: Some(StepData::Time(Box::new(TimeData {
            output,
            summary,
            static_bytes: build.static_bytes,
            object_cache_key: build_rec.cache_key,
            object_sha256: build.object_sha256,
            environment: ctx.env.clone(),
            rounds: None,
        }))),
    }
}

/// This step as a member of a timing session, with the build it times; `Err` is why it
/// cannot take part (no object, no log).
pub fn member(step: &mut Step) -> Result<(Member, StepRecord, BuildData), String> {
    let ctx = step.ctx;
    let (build_rec, build) = step.build()?;
    let p = &ctx.spec(step.node.kind).expect("declared").params;
    let op = step.node.op.expect("time is per operation");
    let log_rel = Path::new("logs")
        .join(step.slug())
        .join(format!("time__{op}.log"));
    let log = step.open_log(log_rel).map_err(|e| e.to_string())?;
    let member = Member {
        label: step.node.id.clone(),
        object: ctx.out.join(&build.object),
        api_h: build.api_h.clone(),
        namespace: build.namespace.clone(),
        op: op.name().to_string(),
        min_iters: 1,
        samples: p.samples,
        budget_ns: (p.trial.as_nanos() as u64).saturating_mul(u64::from(p.trials)),
        log,
    };
    Ok((member, build_rec, build))
}

/// The step's result from its session outcome.
pub fn from_session(
    step: &Step,
    build_rec: StepRecord,
    build: BuildData,
    result: Result<(TimeOutput, Rounds), Stop>,
) -> Done {
    let (output, rounds) = match result {
        Ok(r) => r,
        Err(stop) => return stop.into(),
    };
    let mut summary = crate::measure::stats::summarize(&output);
    summary.median_cycles = Some(rounds.estimate.median);
    summary.ci_low_cycles = Some(rounds.estimate.ci_low);
    summary.ci_high_cycles = Some(rounds.estimate.ci_high);
    summary.rounds = Some(rounds.positions.len() as u32);
    summary.interfered_rounds =
        Some(rounds.interference.iter().filter(|w| !w.is_empty()).count() as u32);
    let mut notes = Vec::new();
    if !rounds.reached {
        notes.push(format!(
            "precision not reached: CI half-width {:.1}% > {:.1}% when the budget ran out",
            rounds.estimate.rel_half_width() * 100.0,
            rounds.precision * 100.0
        ));
    }
    if summary.unstable {
        notes.push(format!(
            "unstable: CV across rounds {:.1}% > 2%",
            summary.cv * 100.0
        ));
    }
    Done {
        status: Status::Ok,
        reason: (!notes.is_empty()).then(|| notes.join("; ")),
        data: Some(StepData::Time(Box::new(TimeData {
            output,
            summary,
            static_bytes: build.static_bytes,
            object_cache_key: build_rec.cache_key,
            object_sha256: build.object_sha256,
            environment: step.ctx.env.clone(),
            rounds: Some(rounds),
        }))),
    }
}
