//! `ngcc-pipe bench fidelity`: does kem-runner on the campaign's object time what a static
//! build of the same sources would?
//!
//! The reference is a separately compiled program: the instance's sources, the provided
//! primitives and the build record's flags (its code-generation flags too, so both sides run
//! the same instructions) compiled again with a minimal C loop
//! (`kem-native/c/minimal_loop.c`) and linked with `gcc -static` — no `.so`, no dlopen,
//! nothing of kem-runner. Both stay alive, pinned to the bench core and contained, and are
//! asked for one short batch each per round, in a freshly shuffled order, the reference
//! with kem-runner's calls per batch. The ratio is the median of the per-round ratios with
//! its 95% bootstrap interval: two batches tens of milliseconds apart see the same host,
//! which two processes timed one after the other for a second each do not (this VM's host
//! moves ML-KEM-768-avx2 between ~25 k and ~37 k cycles from one second to the next).
//! Every round's values go to `fidelity.csv` beside the reference.
//!
//! Placement is held equal, so that what is compared is the harness: the reference links
//! the anchor before the KEM's objects like the campaign's object does, in the same order,
//! so the same code sits at the same addresses modulo 4096 on both sides
//! ([`crate::run::steps::link`]; without it the link order alone moved ML-KEM-768 clean by
//! up to 9% between two static builds). When the campaign times several layouts
//! (`layouts=` on the time step), the reference is built in each of them; kem-runner times
//! all of them in every batch, the references get the same calls each, and both sides are
//! the mean over the layouts; the table shows each layout's own ratio too.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::reference::{build_reference, static_elf_kind, ReferenceSpec};
use crate::error::Error;
use crate::measure::stats::{self, Estimate};
use crate::model::Op;
use crate::record::BuildData;
use crate::run::exec::{self, Log, NoLine, Served};
use crate::run::sandbox::{Jail, Sandbox, DEFAULT_MEMORY};
use crate::run::steps::link;
use kem_native::serve::{BatchReply, Ready, BATCH, DONE, READY};

/// Longest wait for a runner or the reference to start (warm-up, calibration) or to answer.
const ANSWER: Duration = Duration::from_secs(120);

/// The accepted range of the median ratio kem-runner / reference (issue 9).
pub const FIDELITY_RANGE: (f64, f64) = (0.98, 1.02);

/// One operation's fidelity result: cycles per call of each round's batch, kem-runner's and
/// the reference's, per layout (one layout: the campaign's object as listed).
pub struct FidelityRow {
    pub op: Op,
    /// Calls per layout in a batch (kem-runner's calibration shared between its layouts;
    /// each reference got the same).
    pub iters: u64,
    /// Per layout, per round: kem-runner.
    pub runner: Vec<Vec<f64>>,
    /// Per layout, per round: the static reference in the same link order.
    pub reference: Vec<Vec<f64>>,
}

impl FidelityRow {
    /// Rounds measured.
    pub fn rounds(&self) -> usize {
        self.runner.first().map_or(0, Vec::len)
    }

    /// Per round, the mean over the layouts of `side`.
    fn mean(side: &[Vec<f64>], rounds: usize) -> Vec<f64> {
        (0..rounds)
            .map(|r| {
                let v: Vec<f64> = side.iter().filter_map(|l| l.get(r).copied()).collect();
                v.iter().sum::<f64>() / v.len().max(1) as f64
            })
            .collect()
    }

    /// Per round, kem-runner's mean over its layouts (what its batch measured).
    pub fn runner_mean(&self) -> Vec<f64> {
        Self::mean(&self.runner, self.rounds())
    }

    /// Per round, the references' mean over the layouts: "a static build" of that round.
    pub fn static_mean(&self) -> Vec<f64> {
        Self::mean(&self.reference, self.rounds())
    }

    /// Median and 95% bootstrap interval of the per-round ratios runner / static, both
    /// means over the layouts.
    pub fn ratio(&self, seed: u64) -> Option<Estimate> {
        stats::median_ci(
            &stats::paired_ratios(&self.static_mean(), &self.runner_mean()),
            seed,
            stats::BOOTSTRAP_RESAMPLES,
        )
    }

    /// Per layout, the median per-round ratio kem-runner / reference in that layout.
    pub fn layout_ratios(&self) -> Vec<f64> {
        self.runner
            .iter()
            .zip(&self.reference)
            .map(|(a, b)| stats::median(&stats::paired_ratios(b, a)).unwrap_or(f64::NAN))
            .collect()
    }

    /// Per layout, the median per-round ratio of its reference to the references' mean:
    /// how far the link orders themselves spread.
    pub fn layout_spread(&self) -> Vec<f64> {
        let m = self.static_mean();
        self.reference
            .iter()
            .map(|l| stats::median(&stats::paired_ratios(&m, l)).unwrap_or(f64::NAN))
            .collect()
    }
}

/// What `bench fidelity` measured: the references it built and one row per operation.
pub struct Fidelity {
    /// Paths of the static reference executables, one per layout.
    pub references: Vec<PathBuf>,
    /// The layouts' names (`listed`, `reversed`, ...).
    pub layouts: Vec<String>,
    /// Their ELF kind ([`static_elf_kind`]; the same for all).
    pub reference_kind: String,
    /// The campaign's object kem-runner timed (and its other layouts, if any).
    pub object: PathBuf,
    /// Core every side ran on.
    pub cpu: usize,
    /// Seed of the round orders and of the bootstrap.
    pub seed: u64,
    /// The per-round values, as CSV.
    pub values: PathBuf,
    pub rows: Vec<FidelityRow>,
}

/// `bench fidelity`: time one built instance's operations with kem-runner (`serve`) on the
/// campaign's object and with the static reference ([`build_reference`]), one batch of
/// each per round for `rounds` rounds, batches of about `batch`, both pinned to the bench
/// core and drawing randomness from getrandom(2) on every call (kem-runner with `--rng os`).
pub fn fidelity(
    ctx: &crate::run::Ctx,
    instance: &str,
    rounds: usize,
    batch: Duration,
    no_wait: bool,
) -> Result<Fidelity, Error> {
    let (build, spec) = reference_spec(ctx, instance)?;
    let dir = ctx.out.join("bench").join(instance.replace('/', "__"));
    // The campaign's layouts: the object as listed, then the build's other link orders.
    let object = ctx.out.join(&build.object);
    let objects: Vec<PathBuf> = std::iter::once(object.clone())
        .chain(build.layout_objects(&ctx.out))
        .collect();
    let layouts: Vec<String> = (0..objects.len()).map(link::name).collect();
    let (references, reference_kind) = build_references(&spec, &layouts, &dir, &ctx.sandbox)?;
    let cpu = ctx.campaign.system.bench_cpu;
    let _lock = crate::run::bench_lock::take_for(cpu, &ctx.out, "bench fidelity", no_wait)?;
    // Children inherit this thread's affinity: the reference runs on the bench core too.
    kem_native::sys::set_thread_affinity(&[cpu])
        .map_err(Error::io(format_args!("pinning to core {cpu}")))?;
    // Both sides run the submission's code: contained like the campaign's timing steps.
    let mut jail =
        Jail::runner(&ctx.runner, &object, &build.api_h, &dir, DEFAULT_MEMORY).on_core(cpu);
    jail.read.extend(objects.iter().skip(1).cloned());
    jail.read.extend(references.iter().cloned());
    let seed = crate::run::session::fresh_seed();
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(seed);
    let bench = Bench {
        ctx,
        build: &build,
        objects: &objects,
        references: &references,
        jail: &jail,
        dir: &dir,
        cpu,
        rounds,
        batch,
    };
    let mut rows = Vec::new();
    for op in Op::ALL {
        rows.push(bench.time_op(op, &mut rng)?);
    }
    let values = dir.join("fidelity.csv");
    write_values(&values, &layouts, &rows)?;
    Ok(Fidelity {
        references,
        layouts,
        reference_kind,
        object,
        cpu,
        seed,
        values,
        rows,
    })
}

/// The build record of `instance` and what its static reference is built from: the
/// instance's sources, the provided primitives, the record's flags.
fn reference_spec(
    ctx: &crate::run::Ctx,
    instance: &str,
) -> Result<(BuildData, ReferenceSpec), Error> {
    use crate::model::StepKind;
    use crate::record::StepData;

    let ix = ctx
        .plan
        .by_id
        .get(&format!("{instance}/build"))
        .copied()
        .ok_or_else(|| {
            Error::Input(format!("no build step `{instance}/build` in this campaign"))
        })?;
    let node = ctx.node(ix);
    let rec = ctx.read_record(node).ok_or_else(|| {
        Error::Input(format!("`{instance}` is not built yet: run `ngcc-pipe run <pipeline> --only '{instance}/build'` first"))
    })?;
    let Some(StepData::Build(build)) = rec.data else {
        return Err(Error::Input(format!(
            "`{instance}/build` has no object ({})",
            rec.status.name()
        )));
    };
    let Some(StepData::Source(source)) = ctx
        .sibling_record(node, StepKind::Source)
        .and_then(|r| r.data)
    else {
        return Err(Error::Input(format!("`{instance}` has no source record")));
    };
    let sub = ctx.submission(node);
    let inst = ctx
        .instance(node)
        .ok_or_else(|| Error::Input("build is per instance".into()))?;
    let root = &source.root;
    let mut sources =
        crate::sources::instance_sources(root, &inst.dir, &inst.exclude, &inst.extra_sources)
            .map_err(|e| Error::Input(e.to_string()))?;
    sources.extend(sub.primitives.sources.iter().map(|s| root.join(s)));
    let mut includes = vec![format!("-I{}", root.join(&inst.dir).display())];
    includes.extend(
        sub.primitives
            .includes
            .iter()
            .map(|i| format!("-I{}", root.join(i).display())),
    );
    let spec = ReferenceSpec {
        cc: ctx.campaign.system.cc.clone(),
        flags: build
            .flags
            .iter()
            .chain(&build.codegen_flags)
            .cloned()
            .collect(),
        includes,
        sources,
        namespace: build.namespace.clone(),
        drng: crate::run::steps::build::drng_symbol(sub),
        api: build.api.clone(),
    };
    Ok((build, spec))
}

/// The static reference built in each of `layouts` (its sources in that link order) under
/// `dir`, and what kind of executable they are.
fn build_references(
    spec: &ReferenceSpec,
    layouts: &[String],
    dir: &Path,
    sandbox: &Sandbox,
) -> Result<(Vec<PathBuf>, String), Error> {
    let mut references = Vec::new();
    let mut reference_kind = String::new();
    for (j, name) in layouts.iter().enumerate() {
        let spec = ReferenceSpec {
            sources: link::order(&spec.sources, j),
            ..spec.clone()
        };
        let (exe, _) = build_reference(&spec, &dir.join(name), sandbox)?;
        reference_kind = static_elf_kind(&exe)?;
        references.push(exe);
    }
    Ok((references, reference_kind))
}

/// What every operation is timed with: the campaign's object in its layouts, the
/// references, the jail both sides run in, the bench core, the rounds and batch length.
struct Bench<'a> {
    ctx: &'a crate::run::Ctx,
    build: &'a BuildData,
    objects: &'a [PathBuf],
    references: &'a [PathBuf],
    jail: &'a Jail,
    dir: &'a Path,
    cpu: usize,
    rounds: usize,
    batch: Duration,
}

impl Bench<'_> {
    /// One operation: kem-runner and every reference started, then `rounds` rounds of one
    /// batch each in a freshly shuffled order, then all of them ended.
    fn time_op(&self, op: Op, rng: &mut rand::rngs::ChaCha8Rng) -> Result<FidelityRow, Error> {
        let log_path = self.dir.join(format!("{}.log", op.name()));
        let mut log = exec::open_log(&log_path).map_err(Error::io(log_path.display()))?;
        let (mut runner, per) = self.start_runner(op, &mut log, &log_path)?;
        let ref_args = vec![op.name().to_string()];
        let mut sides = Vec::new();
        for exe in self.references {
            let mut side = Side::start(
                self.ctx.sandbox.command(exe, &ref_args, self.jail),
                exe,
                &ref_args,
                &self.ctx.sandbox,
                &mut log,
                &log_path,
            )?;
            side.answer(&["ready"], "minimal_loop", &mut log)?;
            sides.push(side);
        }
        let mut row = FidelityRow {
            op,
            iters: per,
            runner: vec![Vec::with_capacity(self.rounds); self.objects.len()],
            reference: vec![Vec::with_capacity(self.rounds); self.references.len()],
        };
        for _ in 0..self.rounds {
            // Position 0 is kem-runner (all its layouts in one batch), 1.. the references.
            let mut order: Vec<usize> = (0..=sides.len()).collect();
            order.shuffle(rng);
            for who in order {
                if who == 0 {
                    runner_batch(&mut runner, per, &mut row.runner, &mut log)?;
                } else {
                    let cycles = reference_batch(&mut sides[who - 1], per, &mut log)?;
                    row.reference[who - 1].push(cycles);
                }
            }
        }
        runner.end(&mut log);
        for side in sides {
            side.end(&mut log);
        }
        Ok(row)
    }

    /// kem-runner serving `op` on the object in all its layouts, ready, and the calls per
    /// layout of its calibrated batch.
    fn start_runner(&self, op: Op, log: &mut Log, log_path: &Path) -> Result<(Side, u64), Error> {
        let build = self.build;
        let mut runner_args: Vec<String> = [
            "serve",
            "--lib",
            &self.objects[0].display().to_string(),
            "--api",
            &build.api_h.display().to_string(),
            "--ns",
            &build.namespace,
            "--op",
            op.name(),
            "--cpu",
            &self.cpu.to_string(),
            "--batch-ns",
            &self.batch.as_nanos().to_string(),
            "--min-iters",
            "2",
            "--samples",
            "0",
            "--rng",
            "os",
        ]
        .map(String::from)
        .to_vec();
        for o in &self.objects[1..] {
            runner_args.extend(["--layout".to_string(), o.display().to_string()]);
        }
        let ctx = self.ctx;
        let mut runner = Side::start(
            ctx.sandbox.command(&ctx.runner, &runner_args, self.jail),
            &ctx.runner,
            &runner_args,
            &ctx.sandbox,
            log,
            log_path,
        )?;
        let ready = runner.answer(&[READY, DONE], "kem-runner", log)?;
        let calibrated = serde_json::from_str::<Ready>(&ready)
            .map_err(|e| Error::Tool(format!("kem-runner serve: unreadable `ready` line: {e}")))?
            .calibration
            .iters;
        let per = kem_native::serve::per_layout(calibrated, self.objects.len());
        Ok((runner, per))
    }
}

/// One kem-runner batch: the cycles per call of each layout added to `runner`'s rounds.
fn runner_batch(
    runner: &mut Side,
    per: u64,
    rounds: &mut [Vec<f64>],
    log: &mut Log,
) -> Result<(), Error> {
    runner.ask("batch")?;
    let json = runner.answer(&[BATCH, DONE], "kem-runner", log)?;
    let b: BatchReply = serde_json::from_str(&json)
        .map_err(|e| Error::Tool(format!("kem-runner serve: unreadable `batch` line: {e}")))?;
    if b.layout_cycles.is_empty() {
        rounds[0].push(b.cycles as f64 / b.iters.max(1) as f64);
    } else {
        for (l, c) in rounds.iter_mut().zip(&b.layout_cycles) {
            l.push(*c as f64 / per as f64);
        }
    }
    Ok(())
}

/// One batch of `per` calls of a reference: its cycles per call.
fn reference_batch(side: &mut Side, per: u64, log: &mut Log) -> Result<f64, Error> {
    side.ask(&per.to_string())?;
    let cycles: u64 = side
        .answer(&["cycles"], "minimal_loop", log)?
        .trim()
        .parse()
        .map_err(|e| Error::Tool(format!("minimal_loop: unreadable answer: {e}")))?;
    Ok(cycles as f64 / per as f64)
}

/// Every round's values of every operation, as CSV, into `path`.
fn write_values(path: &Path, layouts: &[String], rows: &[FidelityRow]) -> Result<(), Error> {
    let mut csv = String::from("op,round,calls_per_layout");
    for side in ["runner", "static"] {
        for name in layouts {
            let _ = write!(csv, ",{side}_{}_cycles_per_op", name.replace('-', "_"));
        }
    }
    csv.push('\n');
    for r in rows {
        for i in 0..r.rounds() {
            let _ = write!(csv, "{},{},{}", r.op.name(), i + 1, r.iters);
            for l in r.runner.iter().chain(&r.reference) {
                let _ = write!(csv, ",{:.1}", l.get(i).copied().unwrap_or(f64::NAN));
            }
            csv.push('\n');
        }
    }
    std::fs::write(path, csv).map_err(Error::io(path.display()))
}

/// One side of the comparison: a contained process answering line by line.
struct Side {
    served: Served,
    /// Its log (shown when it gives no answer).
    log_path: PathBuf,
}

impl Side {
    fn start(
        mut cmd: std::process::Command,
        program: &Path,
        args: &[String],
        sandbox: &Sandbox,
        log: &mut Log,
        log_path: &Path,
    ) -> Result<Side, Error> {
        let shown: Vec<String> = std::iter::once(program.display().to_string())
            .chain(args.iter().cloned())
            .collect();
        let served = Served::spawn(&mut cmd, &shown, sandbox.contained(), log)
            .map_err(Error::io(program.display()))?;
        Ok(Side {
            served,
            log_path: log_path.to_path_buf(),
        })
    }

    fn ask(&mut self, line: &str) -> Result<(), Error> {
        self.served
            .send(line)
            .map_err(|e| Error::Tool(format!("cannot send `{line}`: {e}")))
    }

    /// The rest of the next line starting with the first of `words`; an error when it is
    /// another word (kem-runner's `done`: it failed) or none came.
    fn answer(&mut self, words: &[&str], who: &str, log: &mut Log) -> Result<String, Error> {
        match self.served.next_line(words, Instant::now() + ANSWER, log) {
            Ok((w, rest)) if w == words[0] => Ok(rest),
            Ok((w, rest)) => Err(Error::Tool(format!("{who}: {w} {rest}"))),
            Err(NoLine::Ended(e) | NoLine::Killed(e)) => Err(Error::Tool(format!(
                "{who} gave no answer ({}); its log: {}",
                e.describe(),
                self.log_path.display()
            ))),
        }
    }

    /// Close its stdin and wait for it (kem-runner is asked to finish first).
    fn end(mut self, log: &mut Log) {
        let _ = self.served.send("finish");
        let _ = self.served.next_line(&[DONE], Instant::now() + ANSWER, log);
        self.served.wait(log);
    }
}

/// The fidelity table.
pub fn fidelity_table(instance: &str, fid: &Fidelity) -> String {
    let (lo, hi) = FIDELITY_RANGE;
    let dir = fid
        .references
        .first()
        .and_then(|p| p.parent())
        .and_then(|p| p.parent())
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let n = fid.layouts.len();
    let (linked, ratio, per_layout) = if n == 1 {
        (
            "linked in the object's order, anchored like it".to_string(),
            "kem-runner / the static reference, per round",
            String::new(),
        )
    } else {
        (
            format!("linked in the object's {n} orders, anchored like them"),
            "kem-runner / the static reference, each the mean over the layouts, per round; \
             per layout: kem-runner / reference in that layout, and the reference / the references' mean",
            format!("  per layout ({}): runner/static, static/mean", fid.layouts.join(" ")),
        )
    };
    let mut out = format!(
        "bench fidelity: {instance}, kem-runner on the campaign's object vs an independent static reference\n\
         object:     {}\n\
         reference:  {dir}/{{{}}}/minimal_loop ({}; the same sources and flags, compiled again, {linked})\n\
         randomness: getrandom(2) on every call on all sides\n\
         rounds:     one batch of each per round, shuffled order (seed {}), all on core {}\n\
         values:     {}\n\
         ratio:      {ratio}\n\
         op       rounds  calls/layout  runner cycles/op  static cycles/op  ratio (95% CI){per_layout}\n",
        fid.object.display(),
        fid.layouts.join(","),
        fid.reference_kind,
        fid.seed,
        fid.cpu,
        fid.values.display(),
    );
    let med = |v: &[f64]| stats::median(v).unwrap_or(f64::NAN);
    let three = |v: Vec<f64>| {
        v.iter()
            .map(|x| format!("{x:.3}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for r in &fid.rows {
        let Some(e) = r.ratio(fid.seed) else {
            let _ = writeln!(out, "{:<8} no rounds", r.op.name());
            continue;
        };
        let verdict = if (lo..=hi).contains(&e.median) {
            format!("within {lo}-{hi}")
        } else {
            format!("OUTSIDE {lo}-{hi}")
        };
        let layouts = if n == 1 {
            String::new()
        } else {
            format!(
                "  {}, {}",
                three(r.layout_ratios()),
                three(r.layout_spread())
            )
        };
        let _ = writeln!(
            out,
            "{:<8} {:>6}  {:>12}  {:>16.0}  {:>16.0}  {:.4} ({:.4}-{:.4}) {verdict:<17}{layouts}",
            r.op.name(),
            r.rounds(),
            r.iters,
            med(&r.runner_mean()),
            med(&r.static_mean()),
            e.median,
            e.ci_low,
            e.ci_high
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runner_and_reference_are_compared_round_by_round_as_means_over_layouts() {
        let row = FidelityRow {
            op: Op::Keygen,
            iters: 10,
            // Round 2 ran on a host twice as slow: every side doubled.
            runner: vec![vec![100.0, 200.0, 100.0], vec![120.0, 240.0, 120.0]],
            reference: vec![vec![100.0, 200.0, 100.0], vec![100.0, 200.0, 100.0]],
        };
        assert_eq!(row.rounds(), 3);
        assert_eq!(row.runner_mean(), vec![110.0, 220.0, 110.0]);
        assert_eq!(row.static_mean(), vec![100.0, 200.0, 100.0]);
        let e = row.ratio(7).unwrap();
        assert!((e.median - 1.1).abs() < 1e-12, "{e:?}");
        assert!((e.ci_low - e.ci_high).abs() < 1e-12, "{e:?}");
        let per = row.layout_ratios();
        assert!(
            (per[0] - 1.0).abs() < 1e-12 && (per[1] - 1.2).abs() < 1e-12,
            "{per:?}"
        );
        assert_eq!(row.layout_spread(), vec![1.0, 1.0]);
    }
}
