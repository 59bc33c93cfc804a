//! `sizes`: pk/sk/ct/ss from api.h (via the build record), the external catalog and the
//! lengths the KAT actually produced, with an audit of every disagreement.

use super::{Done, Step};
use crate::model::KatMode;
use crate::model::StepKind;
use crate::record::StepData;

pub fn run(step: &mut Step) -> Done {
    let ctx = step.ctx;
    let (_, build) = match step.build() {
        Ok(b) => b,
        Err(e) => return Done::failed(e),
    };
    let inst = step.instance();
    let catalog = step
        .submission()
        .sizes
        .get(&inst.id)
        .copied()
        .unwrap_or_default();
    let kat = ctx
        .sibling_record(step.node, StepKind::Kat)
        .and_then(|r| match r.data {
            Some(StepData::Kat(k)) => k.modes.into_iter().find(|m| m.mode == KatMode::Single),
            _ => None,
        })
        .and_then(|m| m.rsp)
        .and_then(|rsp| std::fs::read_to_string(ctx.out.join(rsp)).ok())
        .and_then(|text| crate::sizes::kat_sizes(&text).ok());
    Done::ok(StepData::Sizes(crate::sizes::audit(
        &build.api,
        &catalog,
        kat.as_ref(),
    )))
}
