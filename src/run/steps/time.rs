//! `time` (exclusive): one kem-runner process per instance and operation, pinned to the
//! bench core, calibrated, warmed up, `trials` trials; every raw trial and single-call
//! sample is kept in the record beside the summary statistics and the environment.

use std::path::Path;

use super::{parse_runner, Done, Step};
use crate::record::{Status, StepData, TimeData, TimeOutput};
use crate::run::exec::Exit;

pub fn run(step: &mut Step) -> Done {
    let ctx = step.ctx;
    let op = step.node.op.expect("time is per operation");
    let (build_rec, build) = match step.build() {
        Ok(b) => b,
        Err(e) => return Done::failed(e),
    };
    let p = &ctx.spec(step.node.kind).expect("declared").params;
    let log_rel = Path::new("logs")
        .join(step.slug())
        .join(format!("time__{op}.log"));
    let mut log = match step.open_log(log_rel) {
        Ok(l) => l,
        Err(e) => return Done::failed(e.to_string()),
    };
    let mut cmd = step.runner();
    cmd.arg("time")
        .arg("--lib")
        .arg(ctx.out.join(&build.object))
        .arg("--api")
        .arg(&build.api_h)
        .args(["--ns", &build.namespace, "--op", op.name()])
        .args(["--cpu", &ctx.campaign.system.bench_cpu.to_string()])
        .args(["--trials", &p.trials.to_string()])
        .args(["--trial-ns", &p.trial.as_nanos().to_string()])
        .args(["--min-iters", &p.min_iters.to_string()])
        .args(["--samples", &p.samples.to_string()]);
    let out = match step.exec(&mut cmd, &mut log) {
        Ok(o) => o,
        Err(e) => return Done::failed(format!("cannot run kem-runner: {e}")),
    };
    if out.exit == Exit::TimedOut {
        return Done {
            status: Status::TimedOut,
            reason: Some(step.timeout_text()),
            data: None,
        };
    }
    if out.exit == Exit::Code(1) {
        // The KEM misbehaved; the runner says how in its record.
        if let Ok(TimeOutput {
            failure: Some(f), ..
        }) = parse_runner::<TimeOutput>(&out)
        {
            return Done::failed(format!("{op}: {f}"));
        }
    }
    if !out.exit.success() {
        return Done::failed(format!(
            "{op}: {}; {}",
            out.exit.describe(),
            crate::run::exec::tail(&out.stderr, 3)
        ));
    }
    let output: TimeOutput = match parse_runner(&out) {
        Ok(o) => o,
        Err(e) => return Done::failed(e),
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
        }))),
    }
}
