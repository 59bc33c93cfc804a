//! The step kinds and what the campaign language, the graph, the records and the reports
//! need to know about each: one [`KindTable`] row per kind. How a kind runs (its cache-key
//! inputs, its dry-run estimate, the step itself) lives with its implementation in
//! `run/steps/<kind>.rs`; this table pulls none of that in.

use super::StepScope;

/// What is known about a step kind before anything runs.
#[derive(Debug)]
pub struct KindTable {
    /// Its name in pipelines, step ids and records (`time`); the serde name of its variant.
    pub name: &'static str,
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
    /// Folder of its records under the system's output folder.
    pub record_dir: &'static str,
    /// Whether its records are evidence the reports read (not the reports' own records).
    pub reported: bool,
}

impl KindTable {
    const fn new(name: &'static str, scope: StepScope) -> KindTable {
        KindTable {
            name,
            scope,
            data_needs: &[],
            props: &[],
            required_props: &[],
            collects: false,
            record_dir: "records",
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

    const fn records_in(mut self, record_dir: &'static str) -> KindTable {
        self.record_dir = record_dir;
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

/// The step kinds the engine knows how to run, in registration order (the order of the
/// dry run's count table).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum StepKind {
    /// Resolve where a submission's code is (per submission).
    Source,
    /// Compile an instance into a shared object (per instance).
    Build,
    /// Generate and check known-answer tests (per instance).
    Kat,
    /// pk/sk/ct/ss sizes and the size audit (per instance).
    Sizes,
    /// Cycle and time measurement (per instance and operation, exclusive).
    Time,
    /// Hash/XOF and DRNG share with link-time wrappers (per instance and operation, exclusive).
    Profile,
    /// Instructions per operation counted by callgrind (per instance and operation).
    Count,
    /// Which symmetric code the object really contains (per instance).
    Survey,
    /// Secret-dependent branches and indexes under memcheck (per instance and operation).
    Ct,
    /// Per-submission report (per submission).
    Report,
    /// Campaign index, results.csv/json and the site's front page (once per campaign).
    Index,
}

impl StepKind {
    /// Every kind, in registration order.
    pub const ALL: [StepKind; 11] = [
        StepKind::Source,
        StepKind::Build,
        StepKind::Kat,
        StepKind::Sizes,
        StepKind::Time,
        StepKind::Profile,
        StepKind::Count,
        StepKind::Survey,
        StepKind::Ct,
        StepKind::Report,
        StepKind::Index,
    ];

    /// The kind's row of the table.
    pub fn table(self) -> &'static KindTable {
        use StepScope::{Campaign, Instance, Operation, Submission};
        const BUILT: &[StepKind] = &[StepKind::Build];
        static SOURCE: KindTable = KindTable::new("source", Submission);
        static BUILD: KindTable = KindTable::new("build", Instance)
            .needs(&[StepKind::Source])
            .props(&["flags", "memory"])
            .required(&["flags"]);
        static KAT: KindTable = KindTable::new("kat", Instance)
            .needs(BUILT)
            .props(&["modes", "memory"]);
        static SIZES: KindTable = KindTable::new("sizes", Instance).needs(BUILT);
        static TIME: KindTable = KindTable::new("time", Operation).needs(BUILT).props(&[
            "ops",
            "trials",
            "trial",
            "min-iters",
            "samples",
            "layouts",
            "memory",
        ]);
        static PROFILE: KindTable = KindTable::new("profile", Operation)
            .needs(BUILT)
            .props(OP_PROPS)
            .records_in("profile");
        static COUNT: KindTable = KindTable::new("count", Operation)
            .needs(BUILT)
            .props(OP_PROPS)
            .records_in("count");
        static SURVEY: KindTable = KindTable::new("survey", Instance).needs(BUILT);
        static CT: KindTable = KindTable::new("ct", Operation)
            .needs(BUILT)
            .props(OP_PROPS)
            .records_in("ct");
        static REPORT: KindTable = KindTable::new("report", Submission).collecting();
        static INDEX: KindTable = KindTable::new("index", Campaign).collecting();
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

    pub fn name(self) -> &'static str {
        self.table().name
    }

    pub fn from_name(name: &str) -> Option<StepKind> {
        StepKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Where one node of this kind sits in the graph.
    pub fn scope(self) -> StepScope {
        self.table().scope
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
