//! `ngcc-pipe compare --measure A B`: a paired comparison measured in one timing session.
//!
//! For every (submission, instance, operation) timed successfully in both output folders,
//! three members join one session ([`super::session`]): A's object, B's object and A's
//! object again in a second process (the A/A pair). All are timed in the same interleaved
//! rounds, so A and B see the same moments of the host (Bulej et al., "Duet benchmarking",
//! ICPE 2020; Laaber et al., EMSE 2019). The ratio is the median of the per-round ratios
//! B/A with its 95% bootstrap CI; the threshold is how far the A/A ratio's CI reaches from
//! 1, never below 1% ([`stats::aa_threshold`]); the verdict is `slower`/`faster` only when
//! the whole B/A interval lies beyond `1 ± threshold` ([`stats::paired_verdict`]). Rounds
//! where any of the three was interfered are left out when enough clean ones remain. The
//! three are visited together (`Settings::group`): once all three reached the precision they
//! are timed in one round of four, but always in the same rounds.
//!
//! The runners run in the sandbox like a campaign's ([`super::sandbox`]), each writing only
//! its own scratch folder under `B/scratch/compare-measure/`, and their records get the
//! campaign's plausibility check ([`super::steps::time::plausibility`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::sandbox::{Jail, Sandbox, DEFAULT_MEMORY};
use super::session::{self, Member, Settings};
use super::steps::stays_inside;
use super::steps::time::{plausibility, Plausibility};
use crate::error::Error;
use crate::measure::stats::{self, Estimate, Verdict};
use crate::model::{Op, StepKind};
use crate::record::{self, BuildData, Status, StepData, StepRecord};
use crate::report::csv::field;
use crate::report::doc::{code, Doc, Table};
use crate::report::format;
use crate::report::markdown::to_markdown;

/// Measured time per member when no precision is reached first: 2 s of batches.
const MEMBER_BUDGET_NS: u64 = 2_000_000_000;

/// One compared instance and operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub submission: String,
    pub instance: String,
    pub op: Op,
    /// Medians of per-op cycles over the rounds used.
    pub median_a: f64,
    pub median_b: f64,
    /// Median of the per-round ratios B/A with its 95% CI.
    pub ratio: Estimate,
    /// A against itself.
    pub aa: Estimate,
    pub threshold: f64,
    pub verdict: Verdict,
    /// Rounds of the session, and those where one of the three was interfered (left out
    /// of the estimate when at least [`crate::measure::rounds::MIN_ROUNDS`] clean rounds remain).
    pub rounds: usize,
    pub interfered: usize,
}

/// The result of `compare --measure`.
#[derive(Debug, Clone)]
pub struct Paired {
    pub dir_a: PathBuf,
    pub dir_b: PathBuf,
    pub session: String,
    pub seed: u64,
    pub rows: Vec<Row>,
    /// `sub/instance op: reason` for those that could not be measured.
    pub failures: Vec<String>,
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
}

/// What a folder offers to time: (sub, instance, op) -> (object, build, bench cpu).
type Targets =
    std::collections::BTreeMap<(String, String, Op), (PathBuf, BuildData, Option<usize>)>;

fn targets(dir: &Path) -> Result<Targets, Error> {
    let records = dir.join("records");
    let mut t = Targets::new();
    let subs = std::fs::read_dir(&records).map_err(Error::io(format_args!(
        "`{}`: no readable records/ folder",
        dir.display()
    )))?;
    for sub in subs.flatten() {
        let Ok(files) = std::fs::read_dir(sub.path()) else {
            continue;
        };
        for f in files.flatten() {
            let rec: Option<StepRecord> = record::read_json(&f.path()).ok().flatten();
            let Some(rec) = rec else { continue };
            let (Some(inst), Some(op), Some(StepData::Time(td))) =
                (&rec.instance, rec.op, &rec.data)
            else {
                continue;
            };
            if rec.kind != StepKind::Time || rec.status != Status::Ok {
                continue;
            }
            let build_path = dir.join(record::record_path(
                StepKind::Build,
                &rec.submission,
                Some(inst),
                None,
            ));
            let Some(StepData::Build(b)) = record::read_json::<StepRecord>(&build_path)
                .ok()
                .flatten()
                .and_then(|r| r.data)
            else {
                continue;
            };
            t.insert(
                (rec.submission.clone(), inst.clone(), op),
                (dir.join(&b.object), b, td.output.pinned_cpu),
            );
        }
    }
    Ok(t)
}

/// `<top>/compare-measure/<sub>/<inst>/<name>` under `dir`, refused when the names read
/// from the records would lead out of it.
fn member_path(dir: &Path, top: &str, sub: &str, inst: &str, name: &str) -> Result<PathBuf, Error> {
    let rel = Path::new(sub).join(inst).join(name);
    if !stays_inside(&rel) {
        return Err(Error::Input(format!(
            "refused: `{}` would leave `{}`",
            rel.display(),
            dir.display()
        )));
    }
    Ok(dir.join(top).join("compare-measure").join(rel))
}

fn open_log(dir: &Path, sub: &str, inst: &str, name: &str) -> Result<super::exec::Log, Error> {
    let path = member_path(dir, "logs", sub, inst, &format!("{name}.log"))?;
    super::exec::open_log(&path).map_err(Error::io(path.display()))
}

/// A fresh, empty scratch folder for one runner.
fn scratch(dir: &Path, sub: &str, inst: &str, name: &str) -> Result<PathBuf, Error> {
    let path = member_path(dir, "scratch", sub, inst, name)?;
    let _ = crate::safe_fs::tree::remove_tree(&path);
    std::fs::create_dir_all(&path).map_err(Error::io(path.display()))?;
    Ok(path)
}

/// Time the instances present in both folders in one session, every runner in `sandbox`
/// (logs under `B/logs/compare-measure/`).
pub fn measure(
    a: &Path,
    b: &Path,
    runner: &Path,
    sandbox: &Sandbox,
    timeout: Duration,
    no_wait: bool,
) -> Result<Paired, Error> {
    // Absolute, so that the runners find them from their own working folder.
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let (dir_a, dir_b) = (a.to_path_buf(), b.to_path_buf());
    let (a, b, runner) = (&absolute(a), &absolute(b), &absolute(runner));
    let ta = targets(a)?;
    let tb = targets(b)?;
    let key = |(s, i, o): &(String, String, Op)| format!("{s}/{i} {o}");
    let only_a = ta.keys().filter(|k| !tb.contains_key(k)).map(key).collect();
    let only_b = tb.keys().filter(|k| !ta.contains_key(k)).map(key).collect();
    let both: Vec<_> = ta.keys().filter(|k| tb.contains_key(k)).cloned().collect();
    if both.is_empty() {
        return Err(Error::Input(format!(
            "no operation is timed successfully in both `{}` and `{}`",
            a.display(),
            b.display()
        )));
    }
    let bench_cpu = both.iter().find_map(|k| ta[k].2).ok_or_else(|| {
        Error::Input("the records of A do not say which core they were timed on".into())
    })?;
    let mut members = Vec::new();
    for k in &both {
        let (sub, inst, op) = k;
        for (side, (object, build, _)) in [("a", &ta[k]), ("b", &tb[k]), ("aa", &ta[k])] {
            let dir = scratch(b, sub, inst, &format!("{side}__{op}"))?;
            let jail = Jail::runner(runner, object, &build.api_h, &dir, DEFAULT_MEMORY);
            // The object's other link orders, timed with it as in the run that timed it.
            let folder = if side == "b" { b } else { a };
            members.push(Member {
                label: format!("{sub}/{inst} {op} {side}"),
                object: object.clone(),
                layouts: build.layout_objects(folder),
                api_h: build.api_h.clone(),
                namespace: build.namespace.clone(),
                op: op.name().to_string(),
                min_iters: 1,
                samples: 0,
                budget_ns: MEMBER_BUDGET_NS,
                log: open_log(b, sub, inst, &format!("{side}__{op}"))?,
                jail,
                reference: None,
                more: Vec::new(),
            });
        }
    }
    let settings = Settings {
        runner: runner.to_path_buf(),
        sandbox: sandbox.clone(),
        bench_cpu,
        precision: crate::measure::rounds::DEFAULT_PRECISION,
        batch: session::DEFAULT_BATCH,
        timeout,
        // A, B and A/A are visited together, so their rounds stay paired (and the host's
        // state, which changes more slowly than a round, mostly cancels in their ratios).
        group: 3,
        gauge: None,
    };
    let show = |round: usize, worst: f64| {
        if worst.is_finite() {
            eprint!("\rround {round}, widest CI ±{:.1}%   ", worst * 100.0);
        } else {
            eprint!("\rround {round}   ");
        }
    };
    let lock = super::bench_lock::take_for(bench_cpu, b, "compare --measure", no_wait)?;
    let (id, seed, outcomes) = session::run(members, &settings, &show);
    drop(lock);
    eprintln!();
    let _ = crate::safe_fs::tree::remove_tree(&b.join("scratch").join("compare-measure"));
    let _ = std::fs::remove_dir(b.join("scratch"));
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for (k, three) in both.iter().zip(outcomes.chunks(3)) {
        let failed: Vec<String> = three
            .iter()
            .zip(["A", "B", "A/A"])
            .filter_map(|(o, side)| match &o.result {
                Err(s) => Some(format!("{side}: {}", s.reason)),
                Ok((out, _)) => match plausibility(out, o.elapsed) {
                    Plausibility::Implausible(r) => Some(format!("{side}: {r}")),
                    _ => None,
                },
            })
            .collect();
        if !failed.is_empty() {
            failures.push(format!("{}: {}", key(k), failed.join("; ")));
            continue;
        }
        let n = three.iter().map(|o| o.values.len()).min().unwrap_or(0);
        let (used, clean_count) =
            crate::measure::rounds::rounds_used(n, |r| three.iter().any(|o| o.interfered[r]));
        let pick =
            |o: &session::Outcome| -> Vec<f64> { used.iter().map(|&r| o.values[r]).collect() };
        let (va, vb, vaa) = (pick(&three[0]), pick(&three[1]), pick(&three[2]));
        let (Some(ratio), Some(aa), Some(median_a), Some(median_b)) = (
            stats::median_ci(
                &stats::paired_ratios(&va, &vb),
                seed,
                stats::BOOTSTRAP_RESAMPLES,
            ),
            stats::median_ci(
                &stats::paired_ratios(&va, &vaa),
                seed,
                stats::BOOTSTRAP_RESAMPLES,
            ),
            stats::median(&va),
            stats::median(&vb),
        ) else {
            failures.push(format!("{}: no usable rounds", key(k)));
            continue;
        };
        let threshold = stats::aa_threshold(&aa);
        rows.push(Row {
            submission: k.0.clone(),
            instance: k.1.clone(),
            op: k.2,
            median_a,
            median_b,
            verdict: stats::paired_verdict(&ratio, threshold),
            ratio,
            aa,
            threshold,
            rounds: n,
            interfered: n - clean_count,
        });
    }
    Ok(Paired {
        dir_a,
        dir_b,
        session: id,
        seed,
        rows,
        failures,
        only_a,
        only_b,
    })
}

/// The comparison as Markdown.
pub fn markdown(p: &Paired) -> String {
    let mut d = Doc::default();
    d.h(
        1,
        format!(
            "Paired comparison: {} (B) against {} (A)",
            code(&p.dir_b.display().to_string()),
            code(&p.dir_a.display().to_string())
        ),
    );
    d.p(format!(
        "Measured now, in one session ({}, seed {}): A, B and A again (A/A) interleaved in \
         the same shuffled rounds. Ratio = median of the per-round ratios B/A with its 95% \
         bootstrap CI; threshold = how far the A/A ratio's CI reaches from 1, at least 1%; \
         `slower`/`faster` only when the whole CI lies beyond 1 ± threshold.",
        code(&p.session),
        p.seed
    ));
    let differ = p.rows.iter().filter(|r| r.verdict != Verdict::Same).count();
    d.p(format!(
        "{differ} of {} compared operations differ beyond the threshold.",
        p.rows.len()
    ));
    let mut t = Table::new(&[
        "submission",
        "instance",
        "op",
        "median A",
        "median B",
        "B/A (95% CI)",
        "A/A (95% CI)",
        "threshold",
        "rounds (interfered)",
        "verdict",
    ]);
    let ci = |e: &Estimate| format!("{:.3} ({:.3}–{:.3})", e.median, e.ci_low, e.ci_high);
    for r in &p.rows {
        t.row(vec![
            r.submission.clone(),
            code(&r.instance),
            r.op.to_string(),
            format::cycles(r.median_a),
            format::cycles(r.median_b),
            ci(&r.ratio),
            ci(&r.aa),
            format!("±{}", format::share(r.threshold)),
            format!("{} ({})", r.rounds, r.interfered),
            r.verdict.name().to_string(),
        ]);
    }
    d.table(t);
    for (label, list) in [
        ("Could not be measured", &p.failures),
        ("Timed only in A", &p.only_a),
        ("Timed only in B", &p.only_b),
    ] {
        if !list.is_empty() {
            d.p(format!("{label}:"));
            d.list(list.clone());
        }
    }
    to_markdown(&d)
}

/// The comparison as CSV: `submission,instance,op,median_a,median_b,ratio,ci_low,ci_high,
/// threshold,verdict` (cycles with one decimal, ratios and threshold with six).
pub fn csv(p: &Paired) -> String {
    let mut o = String::from(
        "submission,instance,op,median_a,median_b,ratio,ci_low,ci_high,threshold,verdict\n",
    );
    for r in &p.rows {
        o.push_str(&format!(
            "{},{},{},{:.1},{:.1},{:.6},{:.6},{:.6},{:.6},{}\n",
            field(&r.submission),
            field(&r.instance),
            r.op,
            r.median_a,
            r.median_b,
            r.ratio.median,
            r.ratio.ci_low,
            r.ratio.ci_high,
            r.threshold,
            r.verdict.name()
        ));
    }
    o
}
