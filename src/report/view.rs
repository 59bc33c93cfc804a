//! [`CampaignView`]: everything a renderer may know, loaded from records alone.
//!
//! The campaign model contributes metadata only (algorithm, notes, flag profile names,
//! instance matrix variables, which steps the pipeline declares); every figure comes from
//! `campaign.json` and the step records under the system's output folder. A record that is
//! missing means "that step did not run"; a record that cannot be parsed is an error naming
//! its path.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use crate::model::{
    Campaign, KindFacts, Op, ReportMeta, Role, StepKind, StepScope, COMPILER_VAR, PROFILE_VAR,
};
use crate::record::{
    self, BuildData, CampaignRecord, CountData, Environment, KatData, ProfileData, SizesData,
    SourceData, StepData, StepRecord, SurveyData, TimeData,
};

use super::integrity;
use super::schema::{Results, RESULTS_SCHEMA};

/// A whole system's records, ready to render.
#[derive(Debug, Clone)]
pub struct CampaignView {
    pub system: String,
    pub arch: String,
    /// The system's output folder (records are relative to it).
    pub out_dir: PathBuf,
    /// The output folder as reports name it: relative to the project root (the pipeline
    /// file's folder's parent) when inside it, else as given.
    pub out_dir_shown: String,
    /// `campaign.json`, when present.
    pub campaign: Option<CampaignRecord>,
    /// Step kinds the pipeline declares.
    pub declared: BTreeSet<StepKind>,
    /// Flag profile of the `build` step, when declared.
    pub build_flags: Option<String>,
    pub submissions: Vec<SubmissionView>,
    /// Other measured systems beside this one (`<outputs root>/<other>/reports/results.json`
    /// where `<other>/campaign.json` has the role `measure`), by name; none for a smoke
    /// campaign.
    pub other_systems: Vec<Results>,
}

/// One submission's metadata and records.
#[derive(Debug, Clone)]
pub struct SubmissionView {
    pub id: String,
    pub meta: ReportMeta,
    /// KAT manifest as shown in section 3: `<id>/<file name>`.
    pub kat_manifest: String,
    /// Families of the profiled primitive functions, sorted, deduplicated.
    pub primitive_families: Vec<String>,
    /// The DRNG symbol, if declared.
    pub drng_symbol: Option<String>,
    /// Sources of the provided primitives, relative to the source root.
    pub primitive_sources: Vec<String>,
    /// Values of the `impl` matrix variable, in first-seen order (fallback for versions).
    pub impls: Vec<String>,
    /// Records of the reported per-submission kinds (`source`), in registration order;
    /// `None` where no record exists.
    pub by_kind: Vec<(StepKind, Option<StepRecord>)>,
    pub instances: Vec<InstanceView>,
}

/// Where a record sits in a view: its kind and, for per-operation kinds, its operation.
pub type Slot = (StepKind, Option<Op>);

/// One instance's records.
#[derive(Debug, Clone)]
pub struct InstanceView {
    pub id: String,
    pub vars: BTreeMap<String, String>,
    /// Security level for grouping (see [`level_of`]).
    pub level: Option<u64>,
    /// NIST security category from the manifest, when given.
    pub nist_category: Option<u8>,
    /// Records by kind and operation: every reported per-instance kind once (op `None`),
    /// then every reported per-operation kind once per operation of its step, in the
    /// step's order; kinds in registration order; `None` where no record exists.
    pub by_kind: Vec<(Slot, Option<StepRecord>)>,
}

/// Security level of an instance for chart grouping: the matrix variable `level` when it
/// parses as a number, else the first run of digits in the instance id (`HQC-128` -> 128,
/// `BW_KEM_C256` -> 256); `None` when neither exists.
pub fn level_of(id: &str, vars: &BTreeMap<String, String>) -> Option<u64> {
    if let Some(l) = vars.get("level").and_then(|v| first_number(v)) {
        return Some(l);
    }
    first_number(id)
}

fn first_number(s: &str) -> Option<u64> {
    let digits: String = s
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

fn read_record(out_dir: &Path, rel: &Path) -> io::Result<Option<StepRecord>> {
    record::read_json::<StepRecord>(&out_dir.join(rel)).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot read record `{}`: {e}", out_dir.join(rel).display()),
        )
    })
}

/// `out_dir` relative to the project root (the folder above the pipeline file's) when it
/// lies inside it, else as given; with `/` separators.
fn shown_dir(out_dir: &Path, pipeline: &Path) -> String {
    let root = pipeline.parent().and_then(Path::parent);
    let rel = root
        .filter(|r| !r.as_os_str().is_empty())
        .and_then(|r| out_dir.strip_prefix(r).ok())
        .unwrap_or(out_dir);
    rel.to_string_lossy().replace('\\', "/")
}

impl CampaignView {
    /// Load every record of `campaign` from `out_dir` (see the module doc).
    pub fn load(campaign: &Campaign, out_dir: &Path) -> io::Result<CampaignView> {
        let campaign_record: Option<CampaignRecord> =
            record::read_json(&out_dir.join("campaign.json")).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cannot read `{}`: {e}",
                        out_dir.join("campaign.json").display()
                    ),
                )
            })?;
        Self::build(campaign, out_dir, campaign_record)
    }

    /// As [`CampaignView::load`], with the campaign record given (a run's, while it goes on);
    /// `None` reads `campaign.json`.
    pub fn load_with(
        campaign: &Campaign,
        out_dir: &Path,
        given: Option<CampaignRecord>,
    ) -> io::Result<CampaignView> {
        match given {
            Some(r) => Self::build(campaign, out_dir, Some(r)),
            None => Self::load(campaign, out_dir),
        }
    }

    fn build(
        campaign: &Campaign,
        out_dir: &Path,
        campaign_record: Option<CampaignRecord>,
    ) -> io::Result<CampaignView> {
        let declared: BTreeSet<StepKind> = campaign.steps.iter().map(|s| s.kind).collect();
        let ops_of = |kind: StepKind| -> Vec<Op> {
            campaign
                .steps
                .iter()
                .find(|s| s.kind == kind)
                .map(|s| s.params.ops.clone())
                .unwrap_or_default()
        };
        // Per-instance kinds first, then per-operation ones (the evidence index's order).
        let reported = |scope: StepScope| {
            StepKind::ALL
                .into_iter()
                .filter(move |k| k.scope() == scope && k.table().reported)
        };
        let instance_slots: Vec<Slot> = reported(StepScope::Instance)
            .map(|k| (k, None))
            .chain(
                reported(StepScope::Operation)
                    .flat_map(|k| ops_of(k).into_iter().map(move |op| (k, Some(op)))),
            )
            .collect();
        let build_flags = campaign
            .steps
            .iter()
            .find(|s| s.kind == StepKind::Build)
            .and_then(|s| s.params.flags.clone());

        let mut submissions = Vec::new();
        for sub in &campaign.submissions {
            let mut instances = Vec::new();
            for inst in &sub.instances {
                let by_kind = instance_slots
                    .iter()
                    .map(|&(kind, op)| {
                        let rel = record::record_path(kind, &sub.id, Some(&inst.id), op);
                        read_record(out_dir, &rel).map(|r| ((kind, op), r))
                    })
                    .collect::<io::Result<Vec<_>>>()?;
                instances.push(InstanceView {
                    id: inst.id.clone(),
                    vars: inst.vars.clone(),
                    level: level_of(&inst.id, &inst.vars),
                    nist_category: inst.nist_category,
                    by_kind,
                });
            }
            let by_kind = reported(StepScope::Submission)
                .map(|kind| {
                    let rel = record::record_path(kind, &sub.id, None, None);
                    read_record(out_dir, &rel).map(|r| (kind, r))
                })
                .collect::<io::Result<Vec<_>>>()?;
            let families: BTreeSet<String> = sub
                .primitives
                .functions
                .iter()
                .map(|f| f.family.clone())
                .collect();
            let mut impls: Vec<String> = Vec::new();
            for inst in &sub.instances {
                if let Some(v) = inst.vars.get("impl") {
                    if !impls.contains(v) {
                        impls.push(v.clone());
                    }
                }
            }
            let manifest_name = sub
                .kat
                .manifest
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "kat.sha256".to_string());
            submissions.push(SubmissionView {
                id: sub.id.clone(),
                meta: sub.meta.clone(),
                kat_manifest: format!("{}/{}", sub.id, manifest_name),
                primitive_families: families.into_iter().collect(),
                drng_symbol: sub.primitives.drng.clone(),
                primitive_sources: sub.primitives.sources.clone(),
                impls,
                by_kind,
                instances,
            });
        }
        // a smoke campaign stands alone; a measured one is shown beside the measured ones
        let other_systems = match campaign.system.role {
            Role::Smoke => Vec::new(),
            Role::Measure => load_other_systems(out_dir, &campaign.system.name),
        };
        Ok(CampaignView {
            system: campaign_record
                .as_ref()
                .map(|c| c.system.clone())
                .unwrap_or_else(|| campaign.system.name.clone()),
            arch: campaign_record
                .as_ref()
                .map(|c| c.arch.clone())
                .unwrap_or_else(|| campaign.system.arch.clone()),
            out_dir: out_dir.to_path_buf(),
            out_dir_shown: shown_dir(out_dir, &campaign.pipeline_path),
            campaign: campaign_record,
            declared,
            build_flags,
            submissions,
            other_systems,
        })
    }

    /// The submission with this id.
    pub fn submission(&self, id: &str) -> Option<&SubmissionView> {
        self.submissions.iter().find(|s| s.id == id)
    }

    /// Environment of campaign start, else of the first timing record; `None` when neither.
    pub fn environment(&self) -> Option<&Environment> {
        if let Some(c) = &self.campaign {
            return Some(&c.environment);
        }
        self.submissions
            .iter()
            .flat_map(|s| s.instances.iter())
            .flat_map(|i| i.ops(StepKind::Time))
            .find_map(|(_, r)| r.and_then(time_data).map(|t| &t.environment))
    }

    /// Names of every system shown in the switch, this one included, sorted.
    pub fn system_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .other_systems
            .iter()
            .map(|r| r.system.clone())
            .collect();
        names.push(self.system.clone());
        names.sort();
        names.dedup();
        names
    }
}

/// Read `results.json` of every sibling system folder that holds a measured campaign, sorted
/// by folder name. A folder is one when its `campaign.json` parses and its role is
/// `measure` (a `role "smoke"` campaign, or a folder without a campaign record, is no
/// system), and its `results.json` parses as this schema.
fn load_other_systems(out_dir: &Path, this: &str) -> Vec<Results> {
    let Some(root) = out_dir.parent() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let this_dir = out_dir.canonicalize().ok();
    dirs.into_iter()
        .filter(|d| d.canonicalize().ok() != this_dir)
        .filter(|d| {
            record::read_json::<CampaignRecord>(&d.join("campaign.json"))
                .ok()
                .flatten()
                .is_some_and(|c| c.role == Role::Measure)
        })
        .filter_map(|d| {
            record::read_json::<Results>(&d.join("reports").join("results.json"))
                .ok()
                .flatten()
        })
        .filter(|r| r.schema == RESULTS_SCHEMA && r.system != this)
        .collect()
}

/// The data of a record when it has the expected kind.
pub fn build_data(r: &StepRecord) -> Option<&BuildData> {
    match &r.data {
        Some(StepData::Build(d)) => Some(d),
        _ => None,
    }
}

pub fn kat_data(r: &StepRecord) -> Option<&KatData> {
    match &r.data {
        Some(StepData::Kat(d)) => Some(d),
        _ => None,
    }
}

pub fn sizes_data(r: &StepRecord) -> Option<&SizesData> {
    match &r.data {
        Some(StepData::Sizes(d)) => Some(d),
        _ => None,
    }
}

pub fn time_data(r: &StepRecord) -> Option<&TimeData> {
    match &r.data {
        Some(StepData::Time(d)) => Some(d),
        _ => None,
    }
}

pub fn profile_data(r: &StepRecord) -> Option<&ProfileData> {
    match &r.data {
        Some(StepData::Profile(d)) => Some(d),
        _ => None,
    }
}

pub fn count_data(r: &StepRecord) -> Option<&CountData> {
    match &r.data {
        Some(StepData::Count(d)) => Some(d),
        _ => None,
    }
}

pub fn survey_data(r: &StepRecord) -> Option<&SurveyData> {
    match &r.data {
        Some(StepData::Survey(d)) => Some(d),
        _ => None,
    }
}

pub fn source_data(r: &StepRecord) -> Option<&SourceData> {
    match &r.data {
        Some(StepData::Source(d)) => Some(d),
        _ => None,
    }
}

impl SubmissionView {
    /// The record of a per-submission kind, if any.
    pub fn record(&self, kind: StepKind) -> Option<&StepRecord> {
        self.by_kind
            .iter()
            .find(|(k, _)| *k == kind)
            .and_then(|(_, r)| r.as_ref())
    }
}

impl InstanceView {
    /// The flag profile this instance is built with when the pipeline builds several
    /// (matrix variable [`PROFILE_VAR`]), else the campaign's one (`build_flags`).
    pub fn flags_profile(&self, build_flags: &Option<String>) -> Option<String> {
        self.vars
            .get(PROFILE_VAR)
            .cloned()
            .or_else(|| build_flags.clone())
    }

    /// The id without `@<compiler>` and `@<profile>` (see
    /// [`crate::model::Instance::manifest_id`]): the implementation this cell is one of.
    pub fn manifest_id(&self) -> &str {
        crate::model::manifest_id_of(&self.id, &self.vars)
    }

    /// The compiler this cell is built with, by its file name, when the pipeline names
    /// several (matrix variable [`COMPILER_VAR`]).
    pub fn compiler(&self) -> Option<&str> {
        self.vars
            .get(COMPILER_VAR)
            .map(|c| crate::model::compiler_label(c))
    }

    /// Whether this instance is one cell of an implementation built several ways.
    pub fn is_cell(&self) -> bool {
        self.vars.contains_key(PROFILE_VAR) || self.vars.contains_key(COMPILER_VAR)
    }

    /// The record of a per-instance kind, if any.
    pub fn record(&self, kind: StepKind) -> Option<&StepRecord> {
        self.by_kind
            .iter()
            .find(|(k, _)| *k == (kind, None))
            .and_then(|(_, r)| r.as_ref())
    }

    /// The operations of a per-operation kind's step, in the step's order, with their
    /// records.
    pub fn ops(&self, kind: StepKind) -> impl Iterator<Item = (Op, Option<&StepRecord>)> + '_ {
        self.by_kind
            .iter()
            .filter_map(move |((k, op), r)| match op {
                Some(op) if *k == kind => Some((*op, r.as_ref())),
                _ => None,
            })
    }

    /// The record of one operation of a per-operation kind when it succeeded.
    fn op_ok(&self, kind: StepKind, op: Op) -> Option<&StepRecord> {
        self.ops(kind)
            .find(|(o, _)| *o == op)
            .and_then(|(_, r)| r)
            .filter(|r| r.status == record::Status::Ok)
    }

    /// Timing data of an operation whose record succeeded.
    pub fn time_ok(&self, op: Op) -> Option<&TimeData> {
        self.op_ok(StepKind::Time, op).and_then(time_data)
    }

    /// Profile data of an operation whose record succeeded.
    pub fn profile_ok(&self, op: Op) -> Option<&ProfileData> {
        self.op_ok(StepKind::Profile, op).and_then(profile_data)
    }

    /// Instruction counts of an operation whose record succeeded.
    pub fn count_ok(&self, op: Op) -> Option<&CountData> {
        self.op_ok(StepKind::Count, op).and_then(count_data)
    }

    /// Timed cycles per operation (session median, else mean) over counted instructions
    /// (mean), when both were measured; `true` when the cycles are the session median.
    pub fn cycles_per_instruction(&self, op: Op) -> Option<(f64, bool)> {
        integrity::cycles_per_instruction(self.time_ok(op)?, self.count_ok(op)?)
    }

    /// Why the time, count and constant-time results of `op` are not trusted (its figures
    /// contradict each other, [`integrity::check`]); `None` when they are.
    pub fn untrusted(&self, op: Op) -> Option<integrity::Untrusted> {
        integrity::check(self.time_ok(op), self.count_ok(op))
    }

    /// Why this instance cannot run on this machine (its build, or every record it has, was
    /// `unsupported`: "this CPU lacks avx2"); `None` for an instance that ran.
    pub fn unsupported(&self) -> Option<&str> {
        let unsupported = |r: &StepRecord| r.status == record::Status::Unsupported;
        fn why(r: &StepRecord) -> &str {
            r.reason.as_deref().unwrap_or("unsupported")
        }
        if let Some(b) = self.record(StepKind::Build) {
            return unsupported(b).then(|| why(b));
        }
        let recs = self.records();
        (!recs.is_empty() && recs.iter().all(|r| unsupported(r))).then(|| why(recs[0]))
    }

    /// Every record of this instance that exists, in [`InstanceView::by_kind`] order.
    pub fn records(&self) -> Vec<&StepRecord> {
        self.by_kind
            .iter()
            .filter_map(|(_, r)| r.as_ref())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_from_var_or_id() {
        let mut vars = BTreeMap::new();
        assert_eq!(level_of("HQC-128", &vars), Some(128));
        assert_eq!(level_of("BW_KEM_C256", &vars), Some(256));
        assert_eq!(level_of("frodo", &vars), None);
        vars.insert("level".to_string(), "768".to_string());
        assert_eq!(level_of("ML-KEM-x", &vars), Some(768));
        vars.insert("level".to_string(), "L3".to_string());
        assert_eq!(level_of("ML-KEM-x", &vars), Some(3));
    }
}
