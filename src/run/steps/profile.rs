//! `profile` (exclusive): run each operation on the wrapped object and attribute its
//! cycles to the declared hash/XOF/cipher functions and to the DRNG.

use std::path::Path;

use super::{parse_runner, Done, Step};
use crate::record::{ProfileData, ProfileOutput, Status, StepData};
use crate::run::exec::Exit;

pub fn run(step: &mut Step) -> Done {
    let ctx = step.ctx;
    let op = step.node.op.expect("profile is per operation");
    let (_, build) = match step.build() {
        Ok(b) => b,
        Err(e) => return Done::failed(e),
    };
    let Some(prof) = build.profile_object.clone() else {
        return Done::failed("the build made no profile object");
    };
    if let Some(crate::record::StepData::Kat(k)) = ctx
        .sibling_record(step.node, crate::model::StepKind::Kat)
        .and_then(|r| r.data)
    {
        if k.profile_object_kat.as_ref().is_some_and(|p| !p.equal) {
            return Done::failed(
                "the profile object's KAT differs from the plain object's; not profiling",
            );
        }
    }
    let p = &ctx.spec(step.node.kind).expect("declared").params;
    let log_rel = Path::new("logs")
        .join(step.slug())
        .join(format!("profile__{op}.log"));
    let mut log = match step.open_log(log_rel) {
        Ok(l) => l,
        Err(e) => return Done::failed(e.to_string()),
    };
    let mut cmd = step.runner();
    cmd.arg("profile")
        .arg("--lib")
        .arg(ctx.out.join(&prof))
        .arg("--api")
        .arg(&build.api_h)
        .args(["--ns", &build.namespace, "--op", op.name()])
        .args(["--cpu", &ctx.campaign.system.bench_cpu.to_string()])
        .args(["--iters", &p.iters.to_string()]);
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
        if let Ok(ProfileOutput {
            failure: Some(f), ..
        }) = parse_runner::<ProfileOutput>(&out)
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
    let output: ProfileOutput = match parse_runner(&out) {
        Ok(o) => o,
        Err(e) => return Done::failed(e),
    };
    let summary = crate::profile::summarize(&output);
    Done::ok(StepData::Profile(ProfileData {
        output,
        hash_share: summary.hash_share,
        drng_share: summary.drng_share,
        family_shares: summary.family_shares,
        calls_per_op: summary.calls_per_op,
        environment: ctx.env.clone(),
    }))
}
