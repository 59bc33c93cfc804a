//! Decisions: whether a step runs, and why — shared by the scheduler, the dry run and
//! `explain`, so all three always agree. [`decide_node`] decides one step given which of
//! its dependencies run; the scheduler calls it as steps become ready (with what really
//! ran), [`decide_all`] for a whole selection in execution order (with what it decided).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::time::Duration;

use globset::GlobMatcher;
use petgraph::graph::NodeIndex;

use super::{keys, Ctx};
use crate::model::StepKind;
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

fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 3600.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s >= 60.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{s:.1} s")
    }
}

/// The dry-run text: every selected step in execution order with its decision, the
/// estimated bench-lane time, then a count table per step kind.
pub fn dry_run(ctx: &Ctx, selected: &BTreeSet<NodeIndex>, force: &[GlobMatcher]) -> String {
    let mut out = String::new();
    let decisions = decide_all(ctx, selected, force);
    let mut counts: BTreeMap<StepKind, (usize, usize, usize)> = BTreeMap::new();
    let mut bench_total = Duration::ZERO;
    let mut bench_unknown = 0usize;
    let mut per_instance: BTreeMap<String, Duration> = BTreeMap::new();
    let _ = writeln!(
        out,
        "plan for system `{}` ({} steps selected; outputs in {})",
        ctx.campaign.system.name,
        selected.len(),
        ctx.out.display()
    );
    for ix in ctx.plan.execution_order() {
        let Some(decision) = decisions.get(&ix) else {
            continue;
        };
        let node = ctx.node(ix);
        let entry = counts.entry(node.kind).or_default();
        entry.0 += 1;
        let lane = if node.exclusive {
            "exclusive"
        } else {
            "parallel"
        };
        match decision {
            Decision::Run(why) => {
                entry.1 += 1;
                let mut line = format!("  run        {:<60} {lane:<9}  {why}", node.id);
                if node.exclusive {
                    match estimate(ctx, ix) {
                        Some(d) => {
                            bench_total += d;
                            let inst = format!(
                                "{}/{}",
                                ctx.submission(node).id,
                                ctx.instance(node).map_or("-", |i| i.id.as_str())
                            );
                            *per_instance.entry(inst).or_default() += d;
                            let _ = write!(line, "  (~{})", fmt_duration(d));
                        }
                        None => {
                            bench_unknown += 1;
                            line.push_str("  (time unknown until timed once)");
                        }
                    }
                }
                out.push_str(&line);
                out.push('\n');
            }
            Decision::UpToDate(status) => {
                entry.2 += 1;
                let _ = writeln!(
                    out,
                    "  up-to-date {:<60} {lane:<9}  last run {}",
                    node.id,
                    status.name()
                );
            }
        }
    }
    if !per_instance.is_empty() {
        let _ = writeln!(out, "\nestimated bench-lane (exclusive) time per instance:");
        for (inst, d) in &per_instance {
            let _ = writeln!(out, "  {inst:<50} {}", fmt_duration(*d));
        }
    }
    let _ = write!(
        out,
        "\nestimated bench-lane time in total: {}",
        fmt_duration(bench_total)
    );
    if bench_unknown > 0 {
        let _ = write!(out, " + {bench_unknown} exclusive steps of unknown length");
    }
    out.push_str("\n\nstep kind   steps   run   up-to-date\n");
    for (kind, (n, r, u)) in &counts {
        let _ = writeln!(out, "{:<10} {n:>6} {r:>5} {u:>12}", kind.name());
    }
    out.push_str("(dry run: nothing was built, fetched or run)\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::tests::campaign;
    use crate::model::KatMode;
    use crate::record::{KatData, KatModeResult, KatStatus};
    use crate::run::test_ctx::{ctx, ix, write};

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

    fn write_all(ctx: &Ctx, status: Status) {
        for node in ctx.plan.graph.node_weights() {
            write(ctx, &node.id, status, None);
        }
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

    #[test]
    fn the_dry_run_counts_what_runs_and_what_is_up_to_date() {
        let tmp = tempfile::tempdir().unwrap();
        let c = ctx(campaign(1), tmp.path());
        write_all(&c, Status::Ok);
        write(&c, "s/K-0/kat", Status::Failed, None);
        let all: BTreeSet<NodeIndex> = c.plan.graph.node_indices().collect();
        let text = dry_run(&c, &all, &[]);
        let line = |id: &str| {
            text.lines()
                .find(|l| l.split_whitespace().nth(1) == Some(id))
                .unwrap_or_else(|| panic!("{id} not listed:\n{text}"))
                .to_string()
        };
        assert!(line("s/K-0/kat").trim_start().starts_with("run"), "{text}");
        assert!(line("s/K-0/kat").ends_with("last run failed"), "{text}");
        assert!(line("s/K-0/build").contains("up-to-date"), "{text}");
        // kat: 1 step, 1 to run, 0 up to date; build: 1, 0, 1.
        let counts = |kind: &str| {
            text.lines()
                .find(|l| l.split_whitespace().next() == Some(kind))
                .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
        };
        assert_eq!(counts("kat").as_deref(), Some("1 1 0"), "{text}");
        assert_eq!(counts("build").as_deref(), Some("1 0 1"), "{text}");
        assert!(text.ends_with("(dry run: nothing was built, fetched or run)\n"));
    }

    #[test]
    fn the_dry_run_adds_up_the_bench_lane_time_per_instance() {
        let tmp = tempfile::tempdir().unwrap();
        let c = ctx(campaign(2), tmp.path());
        write_all(&c, Status::Ok);
        // Nothing runs: no per-instance lines, nothing to add up.
        let all: BTreeSet<NodeIndex> = c.plan.graph.node_indices().collect();
        let text = dry_run(&c, &all, &[]);
        assert!(!text.contains("time per instance"), "{text}");
        assert!(
            text.contains("\nestimated bench-lane time in total: 0.0 s\n"),
            "{text}"
        );
        // K-0's KAT failed: its two `time` steps (exclusive) run again. Without a timing
        // or KAT record to give the call's time, each is estimated at its budget, trials x
        // trial = 5 x 1 s, plus warm-up and calibration, 1.5 batches of 20 ms: 5.03 s.
        write(&c, "s/K-0/kat", Status::Failed, None);
        let text = dry_run(&c, &all, &[]);
        for id in ["s/K-0/time:keygen", "s/K-0/time:dec"] {
            let line = text
                .lines()
                .find(|l| l.split_whitespace().nth(1) == Some(id))
                .unwrap_or_else(|| panic!("{id} not listed:\n{text}"));
            assert!(line.ends_with("(~5.0 s)"), "{line}");
        }
        let per_instance: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.contains("time per instance"))
            .skip(1)
            .take_while(|l| !l.is_empty())
            .collect();
        assert_eq!(per_instance.len(), 1, "{text}");
        assert_eq!(
            per_instance[0].split_whitespace().collect::<Vec<_>>(),
            ["s/K-0", "10.1", "s"]
        );
        assert!(
            text.contains("\nestimated bench-lane time in total: 10.1 s\n"),
            "{text}"
        );
        assert!(!text.contains("unknown length"), "{text}");
    }

    #[test]
    fn an_exclusive_step_without_an_estimate_is_counted_as_unknown() {
        let tmp = tempfile::tempdir().unwrap();
        let mut camp = campaign(1);
        // `kat` has no estimate of its own; made exclusive, the dry run cannot time it.
        for step in camp.steps.iter_mut().filter(|s| s.kind == StepKind::Kat) {
            step.exclusive = true;
        }
        let c = ctx(camp, tmp.path());
        let all: BTreeSet<NodeIndex> = c.plan.graph.node_indices().collect();
        let text = dry_run(&c, &all, &[]);
        let kat = text
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some("s/K-0/kat"))
            .unwrap_or_else(|| panic!("kat not listed:\n{text}"));
        assert!(kat.ends_with("(time unknown until timed once)"), "{kat}");
        assert!(
            text.contains(
                "estimated bench-lane time in total: 10.1 s + 1 exclusive steps of unknown length\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn durations_read_in_seconds_minutes_or_hours() {
        let secs = |s: f64| fmt_duration(Duration::from_secs_f64(s));
        assert_eq!(secs(0.0), "0.0 s");
        assert_eq!(secs(59.9), "59.9 s");
        assert_eq!(secs(60.0), "1.0 min");
        assert_eq!(secs(90.0), "1.5 min");
        assert_eq!(secs(3599.0), "60.0 min");
        assert_eq!(secs(3600.0), "1.0 h");
        assert_eq!(secs(5400.0), "1.5 h");
    }
}
