//! `time` (exclusive): one kem-runner process per instance and operation, pinned to the
//! bench core, calibrated, warmed up, `trials` trials; every raw trial and single-call
//! sample is kept in the record beside the summary statistics and the environment.

use super::{runner_job, Done, Step};
use crate::record::{Status, StepData, TimeData, TimeOutput};

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
    let mut notes = Vec::new();
    if summary.unstable {
        notes.push(format!(
            "unstable: CV across trials {:.1}% > 2%",
            summary.cv * 100.0
        ));
    }
    if !summary.off_target_trials.is_empty() {
        notes.push(format!(
            "{} of {} trials lasted less than half or more than twice the target {:.0} ms",
            summary.off_target_trials.len(),
            summary.trials,
            output.calibration.target_trial_ns as f64 / 1e6
        ));
    }
    let reason = (!notes.is_empty()).then(|| notes.join("; "));
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
        }))),
    }
}
