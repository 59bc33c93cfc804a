//! `sizes`: pk/sk/ct/ss from api.h (via the build record), the external catalog and the
//! lengths the KAT actually produced, with an audit of every disagreement.

use std::collections::BTreeMap;

use super::{Done, KindSpec, Step};
use crate::graph::Node;
use crate::model::{Campaign, KatMode, StepKind, StepSpec};
use crate::record::StepData;
use crate::run::keys::{json, Facts};

/// The `sizes` kind: per instance.
pub struct Kind;

impl KindSpec for Kind {
    fn inputs(
        &self,
        c: &Campaign,
        node: &Node,
        _spec: &StepSpec,
        _facts: &Facts,
        m: &mut BTreeMap<String, String>,
    ) {
        let sub = &c.submissions[node.submission];
        let inst = &sub.instances[node.instance.expect("sizes is per instance")];
        m.insert("catalog".into(), json(&sub.sizes.get(inst.manifest_id())));
    }

    fn run(&self, step: &mut Step) -> Done {
        run(step)
    }
}

fn run(step: &mut Step) -> Done {
    let ctx = step.ctx;
    let (_, build) = match step.build() {
        Ok(b) => b,
        Err(e) => return e.into(),
    };
    let inst = step.instance();
    let catalog = step
        .submission()
        .sizes
        .get(inst.manifest_id())
        .copied()
        .unwrap_or_default();
    let kat = ctx
        .sibling_record(step.node, StepKind::Kat)
        .and_then(|r| match r.data {
            Some(StepData::Kat(k)) => k.modes.into_iter().find(|m| m.mode == KatMode::Single),
            _ => None,
        })
        .and_then(|m| m.rsp)
        .and_then(|rsp| {
            crate::safe_fs::read_text(&ctx.out.join(rsp), crate::safe_fs::OUTPUT_CAP).ok()
        })
        .and_then(|text| crate::sizes::kat_sizes(&text).ok());
    Done::ok(StepData::Sizes(crate::sizes::audit(
        &build.api,
        &catalog,
        kat.as_ref(),
    )))
}
