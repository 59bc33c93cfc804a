//! `ngcc-pipe run --dry-run`: every selected step in execution order with its decision
//! ([`super::decide`]), the build matrix when there is one, the estimated bench-lane time
//! per instance and in total, then a count table per step kind. Nothing is built or run.
//!
//! With `cells="best"` (time, profile) only one cell of each implementation is measured,
//! which one the counts decide during the run; the estimate takes the longest cell's once
//! per implementation and operation.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::time::Duration;

use globset::GlobMatcher;
use petgraph::graph::NodeIndex;

use super::decide::{decide_all, estimate, Decision};
use super::Ctx;
use crate::model::{compiler_label, Op, StepKind};

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

/// The bench-lane time of the exclusive steps that run.
#[derive(Default)]
struct BenchTime {
    total: Duration,
    unknown: usize,
    per_instance: BTreeMap<String, Duration>,
    /// `cells="best"`: per implementation, kind and operation, the longest cell's.
    best: BTreeMap<(String, StepKind, Option<Op>), Duration>,
}

impl BenchTime {
    /// Adds step `ix`'s estimate and says it on its plan line.
    fn add(&mut self, ctx: &Ctx, ix: NodeIndex, line: &mut String) {
        let node = ctx.node(ix);
        let Some(d) = estimate(ctx, ix) else {
            self.unknown += 1;
            line.push_str("  (time unknown until timed once)");
            return;
        };
        let _ = write!(line, "  (~{})", fmt_duration(d));
        let sub = &ctx.submission(node).id;
        let inst = ctx.instance(node);
        let best_cell = ctx.spec(node.kind).is_some_and(|s| s.params.best_cell);
        match inst {
            Some(i) if best_cell && i.manifest_id() != i.id => {
                line.push_str(" if this cell is the best (`cells=\"best\"`)");
                let key = (format!("{sub}/{}", i.manifest_id()), node.kind, node.op);
                let e = self.best.entry(key).or_default();
                *e = (*e).max(d);
            }
            _ => {
                self.total += d;
                let inst = format!("{sub}/{}", inst.map_or("-", |i| i.id.as_str()));
                *self.per_instance.entry(inst).or_default() += d;
            }
        }
    }

    /// The per-instance lines and the total.
    fn write(mut self, out: &mut String) {
        for ((implementation, _, _), d) in std::mem::take(&mut self.best) {
            self.total += d;
            *self
                .per_instance
                .entry(format!("{implementation} (its best cell)"))
                .or_default() += d;
        }
        if !self.per_instance.is_empty() {
            let _ = writeln!(out, "\nestimated bench-lane (exclusive) time per instance:");
            for (inst, d) in &self.per_instance {
                let _ = writeln!(out, "  {inst:<50} {}", fmt_duration(*d));
            }
        }
        let _ = write!(
            out,
            "\nestimated bench-lane time in total: {}",
            fmt_duration(self.total)
        );
        if self.unknown > 0 {
            let _ = write!(out, " + {} exclusive steps of unknown length", self.unknown);
        }
    }
}

/// The build matrix in one line, when instances are built several ways: implementations ×
/// cells (compilers, flag profiles) = instances.
fn matrix(ctx: &Ctx) -> Option<String> {
    let c = &ctx.campaign;
    let compilers = c.system.compilers();
    let profiles = c
        .steps
        .iter()
        .find(|s| s.kind == StepKind::Build)
        .map(|b| b.params.flag_profiles())
        .unwrap_or_default();
    if compilers.len() < 2 && profiles.len() < 2 {
        return None;
    }
    let instances: usize = c.submissions.iter().map(|s| s.instances.len()).sum();
    let implementations: BTreeSet<(&str, &str)> = c
        .submissions
        .iter()
        .flat_map(|s| s.instances.iter().map(|i| (s.id.as_str(), i.manifest_id())))
        .collect();
    let mut axes = Vec::new();
    if compilers.len() > 1 {
        let names: Vec<&str> = compilers.iter().map(|c| compiler_label(c)).collect();
        axes.push(format!("compilers {}", names.join(", ")));
    }
    if profiles.len() > 1 {
        axes.push(format!("flag profiles {}", profiles.join(", ")));
    }
    let mut text = format!(
        "build matrix: {} implementations x {} cells ({}) = {instances} instances",
        implementations.len(),
        compilers.len() * profiles.len().max(1),
        axes.join("; ")
    );
    for s in c.steps.iter().filter(|s| s.params.best_cell) {
        let _ = write!(
            text,
            "\n  {} cells=\"best\": only each implementation's cell with the fewest counted \
             instructions for enc + dec is measured, chosen when the counts are in",
            s.kind
        );
    }
    Some(text)
}

/// The dry-run text: every selected step in execution order with its decision, the
/// build matrix, the estimated bench-lane time, then a count table per step kind.
pub fn dry_run(ctx: &Ctx, selected: &BTreeSet<NodeIndex>, force: &[GlobMatcher]) -> String {
    let mut out = String::new();
    let decisions = decide_all(ctx, selected, force);
    let mut counts: BTreeMap<StepKind, (usize, usize, usize)> = BTreeMap::new();
    let mut bench = BenchTime::default();
    let _ = writeln!(
        out,
        "plan for system `{}` ({} steps selected; outputs in {})",
        ctx.campaign.system.name,
        selected.len(),
        ctx.out.display()
    );
    if let Some(m) = matrix(ctx) {
        let _ = writeln!(out, "{m}");
    }
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
                    bench.add(ctx, ix, &mut line);
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
    bench.write(&mut out);
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
    use crate::record::Status;
    use crate::run::test_ctx::{ctx, write, write_all};

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
        // trial = 5 x 1 s, which bounds the session's bench time.
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
            ["s/K-0", "10.0", "s"]
        );
        assert!(
            text.contains("\nestimated bench-lane time in total: 10.0 s\n"),
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
                "estimated bench-lane time in total: 10.0 s + 1 exclusive steps of unknown length\n"
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

    /// Issue #39 item 4: the matrix in one line; with `cells="best"` the bench time counts
    /// one cell per implementation and operation, not each.
    #[test]
    fn the_dry_run_shows_the_matrix_and_times_one_cell_with_best() {
        use crate::model::COMPILER_VAR;
        let tmp = tempfile::tempdir().unwrap();
        let mut camp = campaign(1);
        camp.system.compilers = vec!["gcc".into(), "/usr/bin/clang-16".into()];
        let base = camp.submissions[0].instances[0].clone();
        camp.submissions[0].instances = ["gcc", "clang-16"]
            .iter()
            .map(|c| {
                let mut i = base.clone();
                i.id = format!("K-0@{c}");
                i.vars.insert(COMPILER_VAR.into(), c.to_string());
                i
            })
            .collect();
        let all_cells = {
            let c = ctx(camp.clone(), tmp.path());
            let all: BTreeSet<NodeIndex> = c.plan.graph.node_indices().collect();
            dry_run(&c, &all, &[])
        };
        assert!(
            all_cells.contains(
                "build matrix: 1 implementations x 2 cells (compilers gcc, clang-16) = 2 instances\n"
            ),
            "{all_cells}"
        );
        // Two cells x keygen and dec at 5.0 s each.
        assert!(
            all_cells.contains("estimated bench-lane time in total: 20.0 s"),
            "{all_cells}"
        );
        for s in camp.steps.iter_mut().filter(|s| s.kind == StepKind::Time) {
            s.params.best_cell = true;
        }
        let c = ctx(camp, tmp.path());
        let all: BTreeSet<NodeIndex> = c.plan.graph.node_indices().collect();
        let best = dry_run(&c, &all, &[]);
        assert!(best.contains("time cells=\"best\": only each"), "{best}");
        assert!(
            best.contains("estimated bench-lane time in total: 10.0 s"),
            "{best}"
        );
        assert!(best.contains("s/K-0 (its best cell)"), "{best}");
        assert!(best.contains("if this cell is the best"), "{best}");
    }
}
