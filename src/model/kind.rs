//! What the campaign language, the graph and the reports need to know about each step kind
//! (the kinds, their names and record folders are the evidence schema's, `ngcc-record`):
//! one [`KindTable`] row per kind. How a kind runs (its cache-key inputs, its dry-run
//! estimate, the step itself) lives with its implementation in `run/steps/<kind>.rs`; this
//! table pulls none of that in.

use super::StepScope;
pub use crate::record::StepKind;

/// What is known about a step kind before anything runs.
#[derive(Debug)]
pub struct KindTable {
    /// How many graph nodes one declaration becomes.
    pub scope: StepScope,
    /// Steps it cannot run without, whether or not the pipeline lists them in `needs`.
    pub data_needs: &'static [StepKind],
    /// Pipeline properties it takes besides `needs`, `exclusive` and `timeout`, in the
    /// order messages list them.
    pub props: &'static [&'static str],
    /// Properties among `props` the pipeline must give.
    pub required_props: &'static [&'static str],
    /// A collecting step (report, index) waits for every other step of its scope and runs
    /// whatever they ended with, failures included.
    pub collects: bool,
    /// Whether its records are evidence the reports read (not the reports' own records).
    pub reported: bool,
}

impl KindTable {
    const fn new(scope: StepScope) -> KindTable {
        KindTable {
            scope,
            data_needs: &[],
            props: &[],
            required_props: &[],
            collects: false,
            reported: true,
        }
    }

    const fn needs(mut self, data_needs: &'static [StepKind]) -> KindTable {
        self.data_needs = data_needs;
        self
    }

    const fn props(mut self, props: &'static [&'static str]) -> KindTable {
        self.props = props;
        self
    }

    const fn required(mut self, required_props: &'static [&'static str]) -> KindTable {
        self.required_props = required_props;
        self
    }

    /// A collecting step whose records are the reports' own.
    const fn collecting(mut self) -> KindTable {
        self.collects = true;
        self.reported = false;
        self
    }
}

/// The per-operation measurement kinds' properties.
const OP_PROPS: &[&str] = &["ops", "iters", "memory"];

/// What the engine knows about a kind beyond its name (the schema's): its row of the
/// table, and where one node of it sits in the graph.
pub trait KindFacts {
    /// The kind's row of the table.
    fn table(self) -> &'static KindTable;

    /// Where one node of this kind sits in the graph.
    fn scope(self) -> StepScope;
}

impl KindFacts for StepKind {
    /// The kind's row of the table.
    fn table(self) -> &'static KindTable {
        use StepScope::{Campaign, Instance, Operation, Submission};
        const BUILT: &[StepKind] = &[StepKind::Build];
        static SOURCE: KindTable = KindTable::new(Submission);
        static BUILD: KindTable = KindTable::new(Instance)
            .needs(&[StepKind::Source])
            .props(&["flags", "memory"])
            .required(&["flags"]);
        static KAT: KindTable = KindTable::new(Instance)
            .needs(BUILT)
            .props(&["modes", "memory"]);
        static SIZES: KindTable = KindTable::new(Instance).needs(BUILT);
        static TIME: KindTable = KindTable::new(Operation).needs(BUILT).props(&[
            "ops",
            "trials",
            "trial",
            "min-iters",
            "samples",
            "layouts",
            "memory",
            "cells",
        ]);
        static PROFILE: KindTable = KindTable::new(Operation)
            .needs(BUILT)
            .props(&["ops", "iters", "memory", "cells"]);
        static COUNT: KindTable = KindTable::new(Operation).needs(BUILT).props(OP_PROPS);
        static SURVEY: KindTable = KindTable::new(Instance).needs(BUILT);
        static CT: KindTable = KindTable::new(Operation).needs(BUILT).props(OP_PROPS);
        static REPORT: KindTable = KindTable::new(Submission).collecting();
        static INDEX: KindTable = KindTable::new(Campaign).collecting();
        match self {
            StepKind::Source => &SOURCE,
            StepKind::Build => &BUILD,
            StepKind::Kat => &KAT,
            StepKind::Sizes => &SIZES,
            StepKind::Time => &TIME,
            StepKind::Profile => &PROFILE,
            StepKind::Count => &COUNT,
            StepKind::Survey => &SURVEY,
            StepKind::Ct => &CT,
            StepKind::Report => &REPORT,
            StepKind::Index => &INDEX,
        }
    }

    fn scope(self) -> StepScope {
        self.table().scope
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn props_are_unique_and_required_ones_declared() {
        for k in StepKind::ALL {
            let t = k.table();
            for (i, p) in t.props.iter().enumerate() {
                assert!(!t.props[..i].contains(p), "{k}: `{p}` twice");
                assert!(
                    !["needs", "exclusive", "timeout"].contains(p),
                    "{k}: `{p}` is common"
                );
            }
            for r in t.required_props {
                assert!(t.props.contains(r), "{k}: required `{r}` not a property");
            }
            for n in t.data_needs {
                assert_ne!(*n, k, "{k} needs itself");
            }
        }
    }
}
