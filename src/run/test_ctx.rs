//! A [`Ctx`] for unit tests of deciding and scheduling: the small campaign of
//! `graph::tests::campaign`, its outputs in a temporary folder, fixed key facts, nothing
//! probed (no sandbox, no runner, no environment capture).

use std::path::Path;

use petgraph::graph::NodeIndex;

use super::{keys, sandbox::Sandbox, Ctx};
use crate::graph::Plan;
use crate::model::Campaign;
use crate::record::{self, Status, StepData, StepRecord};

/// A context for `campaign` writing into `out`.
pub(crate) fn ctx(mut campaign: Campaign, out: &Path) -> Ctx {
    campaign.outputs = out.to_path_buf();
    let facts = keys::Facts {
        cc_version: "gcc 12".into(),
        compilers: Default::default(),
        env_fingerprint: "fp".into(),
        libraries: Default::default(),
    };
    let plan = Plan::build(&campaign);
    let inputs = keys::all_inputs(&campaign, &plan, &facts, &super::steps::kind_inputs);
    Ctx {
        out: out.to_path_buf(),
        campaign,
        plan,
        facts,
        env: Default::default(),
        inputs,
        cpu_flags: Default::default(),
        runner: "kem-runner".into(),
        emulator: None,
        sandbox: Sandbox::unavailable("unit test"),
        slurm: None,
        shared_objects: Default::default(),
        progress: Default::default(),
        campaign_header: Default::default(),
    }
}

/// The node with id `id`.
pub(crate) fn ix(ctx: &Ctx, id: &str) -> NodeIndex {
    *ctx.plan
        .by_id
        .get(id)
        .unwrap_or_else(|| panic!("no node {id}"))
}

/// Write the record of node `id` as a step with `status` (and `data`) would have left it,
/// with the node's current cache key.
pub(crate) fn write(ctx: &Ctx, id: &str, status: Status, data: Option<StepData>) -> StepRecord {
    let ix = ix(ctx, id);
    let mut rec = super::steps::not_run(ctx, ix, status, "unit test".into());
    rec.data = data;
    record::write_json(&ctx.record_path(ctx.node(ix)), &rec).expect("record written");
    rec
}

/// Write every node's record with `status`.
pub(crate) fn write_all(ctx: &Ctx, status: Status) {
    for node in ctx.plan.graph.node_weights() {
        write(ctx, &node.id, status, None);
    }
}
