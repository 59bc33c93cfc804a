//! What a step kind is: [`KindSpec`], implemented once per kind in `run/steps/<kind>.rs`,
//! and [`step_kinds!`], which turns the registration list in `run/steps/mod.rs` into the
//! [`StepKind`](crate::model::StepKind) enum and its one exhaustive lookup,
//! [`StepKind::describe`](crate::model::StepKind::describe).
//!
//! Everything else that depends on the kind — the DSL's properties, the graph's scope and
//! data needs, cache-key inputs, the dry run's estimate, where records live, the reports'
//! evidence rows — asks the kind's spec instead of matching on the kind.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use petgraph::graph::NodeIndex;

use super::{Done, Step};
use crate::graph::Node;
use crate::model::{Campaign, Op, StepKind, StepScope, StepSpec};
use crate::record::StepRecord;
use crate::run::keys::Facts;
use crate::run::Ctx;

/// Everything the engine knows about one step kind.
pub trait KindSpec: Sync {
    /// Its name in pipelines, step ids and records (`time`); the serde name of its
    /// [`StepKind`] variant (a unit test checks they agree).
    fn name(&self) -> &'static str;

    /// How many graph nodes one declaration becomes.
    fn scope(&self) -> StepScope;

    /// Steps it cannot run without, whether or not the pipeline lists them in `needs`.
    fn data_needs(&self) -> &'static [StepKind] {
        &[]
    }

    /// Pipeline properties it takes besides `needs`, `exclusive` and `timeout`, in the
    /// order messages list them.
    fn props(&self) -> &'static [&'static str] {
        &[]
    }

    /// Properties among [`KindSpec::props`] the pipeline must give.
    fn required_props(&self) -> &'static [&'static str] {
        &[]
    }

    /// A collecting step (report, index) waits for every other step of its scope and runs
    /// whatever they ended with, failures included.
    fn collects(&self) -> bool {
        false
    }

    /// Folder of its records under the system's output folder.
    fn record_dir(&self) -> &'static str {
        "records"
    }

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

    /// Whether its records are evidence the reports read (not the reports' own records).
    fn reported(&self) -> bool {
        true
    }

    /// Rows of the raw evidence index (report section 7) for one of its records at `path`
    /// (relative to the output folder): item text (Markdown) and file.
    fn evidence(&self, rec: &StepRecord, _op: Option<Op>, path: PathBuf) -> Vec<(String, PathBuf)> {
        vec![(
            format!("{} record ({})", self.name(), rec.status.name()),
            path,
        )]
    }
}

/// Defines [`StepKind`](crate::model::StepKind) from the registration list: one variant per
/// `Variant => spec` line, `StepKind::ALL` in that order, and `describe`, the one match over
/// the kinds.
macro_rules! step_kinds {
    ($( $(#[$doc:meta])* $variant:ident => $spec:expr, )*) => {
        /// The step kinds the engine knows how to run, in registration order (the order of
        /// the dry run's count table). Each is described by its [`KindSpec`].
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash,
            serde::Serialize, serde::Deserialize,
        )]
        #[serde(rename_all = "lowercase")]
        pub enum StepKind {
            $( $(#[$doc])* $variant, )*
        }

        impl StepKind {
            /// Every kind, in registration order.
            pub const ALL: [StepKind; [$(stringify!($variant)),*].len()] =
                [$(StepKind::$variant),*];

            /// The kind's description.
            pub fn describe(self) -> &'static dyn KindSpec {
                match self {
                    $( StepKind::$variant => &$spec, )*
                }
            }
        }
    };
}
pub(crate) use step_kinds;

impl StepKind {
    pub fn name(self) -> &'static str {
        self.describe().name()
    }

    pub fn from_name(name: &str) -> Option<StepKind> {
        StepKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Where one node of this kind sits in the graph.
    pub fn scope(self) -> StepScope {
        self.describe().scope()
    }
}

impl std::fmt::Display for StepKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_serde_names() {
        for k in StepKind::ALL {
            assert_eq!(
                serde_json::to_string(&k).unwrap(),
                format!("\"{}\"", k.name())
            );
            assert_eq!(StepKind::from_name(k.name()), Some(k));
        }
    }

    #[test]
    fn props_are_unique_and_required_ones_declared() {
        for k in StepKind::ALL {
            let d = k.describe();
            let props = d.props();
            for (i, p) in props.iter().enumerate() {
                assert!(!props[..i].contains(p), "{k}: `{p}` twice");
                assert!(
                    !["needs", "exclusive", "timeout"].contains(p),
                    "{k}: `{p}` is common"
                );
            }
            for r in d.required_props() {
                assert!(props.contains(r), "{k}: required `{r}` not a property");
            }
            for n in d.data_needs() {
                assert_ne!(*n, k, "{k} needs itself");
            }
        }
    }
}
