//! `profile` (exclusive): run each operation on the wrapped object and attribute its
//! cycles to the declared hash/XOF/cipher functions and to the DRNG.

use super::{runner_job, Done, Step};
use crate::record::{ProfileData, ProfileOutput, StepData};

pub fn run(step: &mut Step) -> Done {
    let ctx = step.ctx;
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
    let extra = ["--iters".to_string(), p.iters.to_string()];
    let output: ProfileOutput =
        match runner_job(step, "profile", &ctx.out.join(&prof), &build, &extra) {
            Ok((o, _)) => o,
            Err(stop) => return stop.into(),
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
