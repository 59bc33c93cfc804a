//! The names campaigns and records share: step kinds, KEM operations, KAT modes, a system's
//! role and the catalog's sizes. The engine's `model` re-exports them; what it knows about
//! each kind beyond its name (scope, data needs, properties) is its `KindTable`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The step kinds the engine knows how to run, in registration order (the order of the
/// dry run's count table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
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

    /// Its name in pipelines, step ids and records (`time`): the serde name of its variant.
    pub fn name(self) -> &'static str {
        match self {
            StepKind::Source => "source",
            StepKind::Build => "build",
            StepKind::Kat => "kat",
            StepKind::Sizes => "sizes",
            StepKind::Time => "time",
            StepKind::Profile => "profile",
            StepKind::Count => "count",
            StepKind::Survey => "survey",
            StepKind::Ct => "ct",
            StepKind::Report => "report",
            StepKind::Index => "index",
        }
    }

    pub fn from_name(name: &str) -> Option<StepKind> {
        StepKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Folder of its records under the system's output folder (see [`crate::record_path`]).
    pub fn record_dir(self) -> &'static str {
        match self {
            StepKind::Profile => "profile",
            StepKind::Count => "count",
            StepKind::Ct => "ct",
            StepKind::Source
            | StepKind::Build
            | StepKind::Kat
            | StepKind::Sizes
            | StepKind::Time
            | StepKind::Survey
            | StepKind::Report
            | StepKind::Index => "records",
        }
    }
}

impl fmt::Display for StepKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A KEM operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Keygen,
    Enc,
    Dec,
}

impl Op {
    pub const ALL: [Op; 3] = [Op::Keygen, Op::Enc, Op::Dec];

    pub fn name(self) -> &'static str {
        match self {
            Op::Keygen => "keygen",
            Op::Enc => "enc",
            Op::Dec => "dec",
        }
    }

    pub fn from_name(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.name() == name)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which NIST KAT file is generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KatMode {
    /// PQClean's `nistkat.c`: one count.
    Single,
    /// liboqs's `kat_kem --all`: 100 counts (or the manifest's `all-count`).
    All,
}

impl KatMode {
    pub fn name(self) -> &'static str {
        match self {
            KatMode::Single => "single",
            KatMode::All => "all",
        }
    }
}

/// `role "measure"` (the default: a system the reports compare) or `role "smoke"` (a trial
/// run: its outputs stay out of every other campaign's reports and site, and its own
/// reports show no other system).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    #[default]
    Measure,
    Smoke,
}

impl Role {
    pub fn is_measure(&self) -> bool {
        *self == Role::Measure
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::Measure => "measure",
            Role::Smoke => "smoke",
        }
    }
}

/// External catalog figures for one instance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogSizes {
    pub pk: Option<u64>,
    pub sk: Option<u64>,
    pub ct: Option<u64>,
    pub ss: Option<u64>,
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
        for op in Op::ALL {
            assert_eq!(serde_json::to_string(&op).unwrap(), format!("\"{op}\""));
            assert_eq!(Op::from_name(op.name()), Some(op));
        }
    }
}
