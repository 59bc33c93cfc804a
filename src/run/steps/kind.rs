//! How a step kind runs: [`KindSpec`], implemented once per kind in `run/steps/<kind>.rs`,
//! and [`behaviour`], the one match from a [`StepKind`] to its implementation. What is
//! known about a kind before anything runs (name, scope, properties, record folder) is
//! its row of [`crate::model::KindTable`].

use std::collections::BTreeMap;
use std::time::Duration;

use petgraph::graph::NodeIndex;

use super::{Done, Step};
use crate::graph::Node;
use crate::model::{Campaign, StepKind, StepSpec};
use crate::run::keys::Facts;
use crate::run::Ctx;

/// How the engine runs one step kind.
pub trait KindSpec: Sync {
    /// Its own cache-key inputs besides `logic` and `params` (dependencies' keys are added
    /// by [`crate::run::keys`]).
    fn inputs(
        &self,
        _campaign: &Campaign,
        _node: &Node,
        _spec: &StepSpec,
        _facts: &Facts,
        _inputs: &mut BTreeMap<String, String>,
    ) {
    }

    /// Estimated bench-lane time of one exclusive node, for the dry run; `None`: unknown.
    fn estimate(&self, _ctx: &Ctx, _ix: NodeIndex) -> Option<Duration> {
        None
    }

    /// Run one node.
    fn run(&self, step: &mut Step) -> Done;
}

/// The implementation of `kind`.
pub fn behaviour(kind: StepKind) -> &'static dyn KindSpec {
    use super::{build, count, ct, index, kat, profile, report, sizes, source, survey, time};
    match kind {
        StepKind::Source => &source::Kind,
        StepKind::Build => &build::Kind,
        StepKind::Kat => &kat::Kind,
        StepKind::Sizes => &sizes::Kind,
        StepKind::Time => &time::Kind,
        StepKind::Profile => &profile::Kind,
        StepKind::Count => &count::Kind,
        StepKind::Survey => &survey::Kind,
        StepKind::Ct => &ct::Kind,
        StepKind::Report => &report::Kind,
        StepKind::Index => &index::Kind,
    }
}

/// [`KindSpec::inputs`] of the node's kind, as the cache keys ask for it.
pub fn kind_inputs(
    c: &Campaign,
    node: &Node,
    spec: &StepSpec,
    facts: &Facts,
    inputs: &mut BTreeMap<String, String>,
) {
    behaviour(node.kind).inputs(c, node, spec, facts, inputs);
}
