//! Decisions: whether a step runs, and why — shared by the scheduler, the dry run and
//! `explain`, so all three always agree. [`decide_node`] decides one step given which of
//! its dependencies run; the scheduler calls it as steps become ready (with what really
//! ran), [`decide_all`] for a whole selection in execution order (with what it decided).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use globset::GlobMatcher;
use petgraph::graph::NodeIndex;

use super::{keys, Ctx};

use crate::record::{Status, StepData};

/// Why a step would run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    Forced,
    NoRecord,
    /// The last run ended this way.
    LastRun(Status),
    InputsChanged(Vec<String>),
    /// A step it depends on runs in this run.
    UpstreamRuns(String),
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Forced => f.write_str("forced"),
            Why::NoRecord => f.write_str("no record"),
            Why::LastRun(s) => write!(f, "last run {}", s.name()),
            Why::InputsChanged(names) => write!(f, "inputs changed: {}", names.join(", ")),
            Why::UpstreamRuns(id) => write!(f, "upstream runs: {id}"),
        }
    }
}

/// Run it, or keep the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Run(Why),
    UpToDate(Status),
}

/// Decide for one node; `runs(dep)` says whether a dependency runs (or ran) in this run.
pub fn decide_node(
    ctx: &Ctx,
    ix: NodeIndex,
    force: &[GlobMatcher],
    runs: impl Fn(NodeIndex) -> bool,
) -> Decision {
    let upstream = ctx
        .plan
        .deps(ix)
        .find(|&d| runs(d))
        .map(|d| ctx.node(d).id.clone());
    decide(ctx, ix, is_forced(ctx, ix, force), upstream.as_deref())
}

/// Decide every node of `selected`, in execution order, each seeing which of its
/// dependencies were decided to run.
pub fn decide_all(
    ctx: &Ctx,
    selected: &BTreeSet<NodeIndex>,
    force: &[GlobMatcher],
) -> BTreeMap<NodeIndex, Decision> {
    let mut out: BTreeMap<NodeIndex, Decision> = BTreeMap::new();
    for ix in ctx.plan.execution_order() {
        if !selected.contains(&ix) {
            continue;
        }
        let d = decide_node(ctx, ix, force, |dep| {
            matches!(out.get(&dep), Some(Decision::Run(_)))
        });
        out.insert(ix, d);
    }
    out
}

/// Decide for one node. `upstream_runs` names a dependency that runs in this run, if any.
fn decide(ctx: &Ctx, ix: NodeIndex, forced: bool, upstream_runs: Option<&str>) -> Decision {
    if forced {
        return Decision::Run(Why::Forced);
    }
    let node = ctx.node(ix);
    let Some(rec) = ctx.read_record(node) else {
        return Decision::Run(Why::NoRecord);
    };
    if !matches!(rec.status, Status::Ok | Status::Unsupported) && !soft_kat_failure(&rec.data) {
        return Decision::Run(Why::LastRun(rec.status));
    }
    let current = &ctx.inputs[ix.index()];
    if rec.cache_key != ctx.key(ix) {
        let names = keys::changed(&rec.inputs, current);
        return Decision::Run(Why::InputsChanged(if names.is_empty() {
            vec!["(record format)".to_string()]
        } else {
            names
        }));
    }
    if let Some(up) = upstream_runs {
        return Decision::Run(Why::UpstreamRuns(up.to_string()));
    }
    Decision::UpToDate(rec.status)
}

/// A KAT step that failed only because hashes did not match (the code ran and dec(enc)
/// agreed): its dependents still run, as in the reference reports ("timed anyway").
pub fn soft_kat_failure(data: &Option<StepData>) -> bool {
    use crate::record::KatStatus;
    match data {
        Some(StepData::Kat(k)) => {
            !k.modes.is_empty() && k.modes.iter().all(|m| m.status != KatStatus::Fail)
        }
        _ => false,
    }
}

/// Whether a node matches any `--force` pattern.
fn is_forced(ctx: &Ctx, ix: NodeIndex, force: &[GlobMatcher]) -> bool {
    force.iter().any(|m| m.is_match(&ctx.node(ix).id))
}

/// Estimated bench-lane time of an exclusive step (see [`super::steps::KindSpec::estimate`]).
pub fn estimate(ctx: &Ctx, ix: NodeIndex) -> Option<Duration> {
    super::steps::behaviour(ctx.node(ix).kind).estimate(ctx, ix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::tests::campaign;
    use crate::model::KatMode;
    use crate::record::{KatData, KatModeResult, KatStatus};
    use crate::run::test_ctx::{ctx, ix, write, write_all};

    fn glob(p: &str) -> GlobMatcher {
        globset::Glob::new(p).unwrap().compile_matcher()
    }

    /// Every node's decision, by id.
    fn decisions(ctx: &Ctx, force: &[GlobMatcher]) -> BTreeMap<String, Decision> {
        let all: BTreeSet<NodeIndex> = ctx.plan.graph.node_indices().collect();
        decide_all(ctx, &all, force)
            .into_iter()
            .map(|(ix, d)| (ctx.node(ix).id.clone(), d))
            .collect()
    }

    fn kat_data(statuses: &[KatStatus]) -> Option<StepData> {
        Some(StepData::Kat(KatData {
            modes: statuses
                .iter()
                .map(|&status| KatModeResult {
                    mode: KatMode::Single,
                    status,
                    counts: 1,
                    expected_sha256: None,
                    actual_sha256: None,
                    rsp: None,
                    reason: None,
                    diff: None,
                    submitted: None,
                    fresh_dec: None,
                })
                .collect(),
            log_sha256: String::new(),
            profile_object_kat: None,
        }))
    }

    #[test]
    fn without_records_everything_runs_for_want_of_one() {
        let tmp = tempfile::tempdir().unwrap();
        let c = ctx(campaign(2), tmp.path());
        let d = decisions(&c, &[]);
        // source, report, and per instance build, kat, time:keygen, time:dec
        assert_eq!(d.len(), 10, "{d:?}");
        for (id, d) in &d {
            assert_eq!(*d, Decision::Run(Why::NoRecord), "{id}");
        }
    }

    #[test]
    fn a_finished_campaign_is_up_to_date() {
        let tmp = tempfile::tempdir().unwrap();
        let c = ctx(campaign(2), tmp.path());
        write_all(&c, Status::Ok);
        for (id, d) in decisions(&c, &[]) {
            assert_eq!(d, Decision::UpToDate(Status::Ok), "{id}");
        }
    }

    #[test]
    fn forcing_runs_the_match_and_what_depends_on_it_only() {
        let tmp = tempfile::tempdir().unwrap();
        let c = ctx(campaign(2), tmp.path());
        write_all(&c, Status::Ok);
        let d = decisions(&c, &[glob("s/K-0/kat")]);
        let up = |from: &str| Decision::Run(Why::UpstreamRuns(from.into()));
        assert_eq!(d["s/K-0/kat"], Decision::Run(Why::Forced));
        assert_eq!(d["s/K-0/time:keygen"], up("s/K-0/kat"));
        assert_eq!(d["s/K-0/time:dec"], up("s/K-0/kat"));
        // (The report names the first of its dependencies that runs.)
        assert!(
            matches!(&d["s/report"], Decision::Run(Why::UpstreamRuns(id)) if id.starts_with("s/K-0/")),
            "{:?}",
            d["s/report"]
        );
        for id in [
            "s/source",
            "s/K-0/build",
            "s/K-1/build",
            "s/K-1/kat",
            "s/K-1/time:dec",
        ] {
            assert_eq!(d[id], Decision::UpToDate(Status::Ok), "{id}");
        }
        // A pattern crosses `/`: every instance's timing.
        let d = decisions(&c, &[glob("*/time:*")]);
        let forced: Vec<&str> = d
            .iter()
            .filter(|(_, d)| **d == Decision::Run(Why::Forced))
            .map(|(id, _)| id.as_str())
            .collect();
        assert_eq!(
            forced,
            [
                "s/K-0/time:dec",
                "s/K-0/time:keygen",
                "s/K-1/time:dec",
                "s/K-1/time:keygen"
            ]
        );
    }

    #[test]
    fn a_failed_last_run_runs_again_an_unsupported_one_does_not() {
        let tmp = tempfile::tempdir().unwrap();
        let c = ctx(campaign(1), tmp.path());
        write_all(&c, Status::Ok);
        for status in [Status::Failed, Status::TimedOut, Status::Skipped] {
            write(&c, "s/K-0/kat", status, None);
            let d = decisions(&c, &[]);
            assert_eq!(d["s/K-0/kat"], Decision::Run(Why::LastRun(status)));
            assert_eq!(
                d["s/K-0/time:keygen"],
                Decision::Run(Why::UpstreamRuns("s/K-0/kat".into()))
            );
            assert_eq!(d["s/K-0/build"], Decision::UpToDate(Status::Ok));
        }
        write(&c, "s/K-0/kat", Status::Unsupported, None);
        let d = decisions(&c, &[]);
        assert_eq!(d["s/K-0/kat"], Decision::UpToDate(Status::Unsupported));
        assert_eq!(d["s/K-0/time:keygen"], Decision::UpToDate(Status::Ok));
    }

    #[test]
    fn a_kat_that_failed_only_on_hashes_is_final() {
        let tmp = tempfile::tempdir().unwrap();
        let c = ctx(campaign(1), tmp.path());
        write_all(&c, Status::Ok);
        let soft = kat_data(&[KatStatus::Mismatch, KatStatus::Nokat, KatStatus::Pass]);
        write(&c, "s/K-0/kat", Status::Failed, soft);
        assert_eq!(
            decisions(&c, &[])["s/K-0/kat"],
            Decision::UpToDate(Status::Failed)
        );
        let hard = kat_data(&[KatStatus::Mismatch, KatStatus::Fail]);
        write(&c, "s/K-0/kat", Status::Failed, hard);
        assert_eq!(
            decisions(&c, &[])["s/K-0/kat"],
            Decision::Run(Why::LastRun(Status::Failed))
        );
    }

    #[test]
    fn soft_kat_failure_needs_modes_and_no_fail() {
        assert!(soft_kat_failure(&kat_data(&[KatStatus::Mismatch])));
        assert!(soft_kat_failure(&kat_data(&[
            KatStatus::Pass,
            KatStatus::Nokat
        ])));
        assert!(!soft_kat_failure(&kat_data(&[])));
        assert!(!soft_kat_failure(&kat_data(&[
            KatStatus::Pass,
            KatStatus::Fail
        ])));
        assert!(!soft_kat_failure(&None));
    }

    #[test]
    fn changed_inputs_are_named_and_run_downstream() {
        let tmp = tempfile::tempdir().unwrap();
        let c = ctx(campaign(2), tmp.path());
        write_all(&c, Status::Ok);
        let mut edited = campaign(2);
        edited.flags.get_mut("guide").unwrap().flags = vec!["-O3".into()];
        let c = ctx(edited, tmp.path());
        let d = decisions(&c, &[]);
        let changed = |names: &[&str]| {
            Decision::Run(Why::InputsChanged(
                names.iter().map(|s| s.to_string()).collect(),
            ))
        };
        assert_eq!(d["s/K-0/build"], changed(&["flags"]));
        assert_eq!(d["s/K-1/build"], changed(&["flags"]));
        assert_eq!(d["s/K-0/kat"], changed(&["after s/K-0/build"]));
        assert_eq!(d["s/source"], Decision::UpToDate(Status::Ok));
        assert_eq!(
            Why::InputsChanged(vec!["flags".into(), "cc".into()]).to_string(),
            "inputs changed: flags, cc"
        );
    }

    #[test]
    fn a_key_that_differs_with_the_same_inputs_is_a_record_format_change() {
        let tmp = tempfile::tempdir().unwrap();
        let c = ctx(campaign(1), tmp.path());
        write_all(&c, Status::Ok);
        let mut rec = write(&c, "s/K-0/build", Status::Ok, None);
        rec.cache_key.push('0');
        let path = c.record_path(c.node(ix(&c, "s/K-0/build")));
        crate::record::write_json(&path, &rec).unwrap();
        assert_eq!(
            decisions(&c, &[])["s/K-0/build"],
            Decision::Run(Why::InputsChanged(vec!["(record format)".into()]))
        );
    }

    #[test]
    fn decide_node_sees_what_really_ran() {
        let tmp = tempfile::tempdir().unwrap();
        let c = ctx(campaign(1), tmp.path());
        write_all(&c, Status::Ok);
        let kat = ix(&c, "s/K-0/kat");
        let time = ix(&c, "s/K-0/time:dec");
        assert_eq!(
            decide_node(&c, time, &[], |_| false),
            Decision::UpToDate(Status::Ok)
        );
        assert_eq!(
            decide_node(&c, time, &[], |d| d == kat),
            Decision::Run(Why::UpstreamRuns("s/K-0/kat".into()))
        );
        // A dependency that does not run does not make it run.
        let build = ix(&c, "s/K-0/build");
        assert_eq!(
            decide_node(&c, kat, &[], |d| d == time),
            Decision::UpToDate(Status::Ok)
        );
        assert_eq!(
            decide_node(&c, kat, &[], |d| d == build),
            Decision::Run(Why::UpstreamRuns("s/K-0/build".into()))
        );
    }

    #[test]
    fn reasons_read_as_the_dry_run_prints_them() {
        assert_eq!(Why::Forced.to_string(), "forced");
        assert_eq!(Why::NoRecord.to_string(), "no record");
        assert_eq!(
            Why::LastRun(Status::TimedOut).to_string(),
            format!("last run {}", Status::TimedOut.name())
        );
        assert_eq!(
            Why::UpstreamRuns("s/K-0/kat".into()).to_string(),
            "upstream runs: s/K-0/kat"
        );
    }
}
