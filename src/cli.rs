//! The command line: options -> campaign -> plan -> scheduler -> reports.
//!
//! Exit codes: 0 all good; 1 a step failed (or `check` found problems in a KEM's results);
//! 2 bad input (the campaign files, the command line); 130 interrupted.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};

use crate::graph::{self, Format, Plan};
use crate::model::{Campaign, StepKind};
use crate::record::{self, CampaignRecord, CampaignStep, Status, RECORD_SCHEMA};
use crate::run::decide::{decide_all, Decision};
use crate::run::progress::{Progress, Verbosity};
use crate::run::{self, keys, Ctx};

#[derive(Parser)]
#[command(
    name = "ngcc-pipe",
    version,
    about = "Declarative performance-measurement campaigns for post-quantum KEM submissions",
    after_help = "Examples:\n  ngcc-pipe check pipelines/x86_1.kdl\n  ngcc-pipe run --dry-run pipelines/x86_1.kdl\n  ngcc-pipe run pipelines/x86_1.kdl --only '*/kat'\n  ngcc-pipe graph pipelines/x86_1.kdl --format dot --level step | dot -Tsvg > plan.svg"
)]
struct Cli {
    /// Write outputs here instead of the pipeline's `outputs` folder (e.g. a second run to compare).
    #[arg(long, global = true, value_name = "DIR")]
    outputs: Option<PathBuf>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a campaign (or show its plan with --dry-run).
    #[command(
        after_help = "Examples:\n  ngcc-pipe run pipelines/x86_1.kdl\n  ngcc-pipe run --dry-run pipelines/x86_1.kdl\n  ngcc-pipe run pipelines/x86_1.kdl --only 'ml-kem/*/kat'\n  ngcc-pipe run pipelines/x86_1.kdl --force '*/time:*'"
    )]
    Run {
        pipeline: PathBuf,
        /// Print the plan (what would run, and why) without building, fetching or running anything.
        #[arg(long)]
        dry_run: bool,
        /// Parallel workers for non-exclusive steps (default: cores - 1, at least 1).
        #[arg(short = 'j', long)]
        jobs: Option<usize>,
        /// Only these steps (glob over `submission/instance/step` ids; `*` crosses `/`) and what they need.
        #[arg(long, value_name = "GLOB")]
        only: Vec<String>,
        /// Re-run matching steps even if up to date.
        #[arg(long, value_name = "GLOB")]
        force: Vec<String>,
        /// Stop starting new steps after the first failure.
        #[arg(long)]
        fail_fast: bool,
        /// Only failures and the summary.
        #[arg(short, long)]
        quiet: bool,
        /// Also list up-to-date steps.
        #[arg(short, long)]
        verbose: bool,
    },
    /// Validate a pipeline and every manifest it pulls in.
    #[command(
        after_help = "Examples:\n  ngcc-pipe check pipelines/x86_1.kdl\n  ngcc-pipe check --deep pipelines/x86_1.kdl"
    )]
    Check {
        pipeline: PathBuf,
        /// Also fetch the sources: instance folders, api.h namespaces, the files a build compiles.
        #[arg(long)]
        deep: bool,
    },
    /// Export the step graph.
    #[command(
        after_help = "Examples:\n  ngcc-pipe graph pipelines/x86_1.kdl --format dot | dot -Tsvg > graph.svg\n  ngcc-pipe graph pipelines/x86_1.kdl --format mermaid --level step\n  ngcc-pipe graph pipelines/x86_1.kdl --format json --only 'ml-kem/ML-KEM-768-clean/*'"
    )]
    Graph {
        pipeline: PathBuf,
        #[arg(long, value_enum, default_value = "dot")]
        format: Format,
        /// Only these steps and what they need.
        #[arg(long, value_name = "GLOB")]
        only: Vec<String>,
        /// `step` collapses instances and operations into one node per step kind.
        #[arg(long, value_enum, default_value = "instance")]
        level: Level,
    },
    /// List submissions, instances or steps.
    #[command(
        after_help = "Examples:\n  ngcc-pipe list pipelines/x86_1.kdl instances\n  ngcc-pipe list pipelines/x86_1.kdl steps"
    )]
    List {
        pipeline: PathBuf,
        #[arg(value_enum, default_value = "instances")]
        what: ListWhat,
    },
    /// Say why a step would run (which input changed), or that it is up to date.
    #[command(
        after_help = "Example:\n  ngcc-pipe explain pipelines/x86_1.kdl ml-kem/ML-KEM-768-clean/time:keygen"
    )]
    Explain { pipeline: PathBuf, step: String },
    /// Re-render reports from the records, without measuring again.
    #[command(after_help = "Example:\n  ngcc-pipe report pipelines/x86_1.kdl")]
    Report { pipeline: PathBuf },
    /// Compare two output folders: ratio b/a of median cycles, and whether it is beyond noise.
    #[command(
        after_help = "Examples:\n  ngcc-pipe compare outputs/quick outputs/quick-again --csv diff.csv\n  \
                      ngcc-pipe compare --measure outputs/quick outputs/quick-O0 --csv paired.csv"
    )]
    Compare {
        a: PathBuf,
        b: PathBuf,
        /// Also write the comparison as CSV here.
        #[arg(long)]
        csv: Option<PathBuf>,
        /// Time A's and B's objects now, interleaved in one session with an A/A pair.
        #[arg(long)]
        measure: bool,
    },
    /// Benchmarks of ngcc-pipe itself.
    #[command(
        subcommand,
        after_help = "Example:\n  ngcc-pipe bench plan --instances 1000"
    )]
    Bench(BenchCmd),
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Parse + expand + plan a generated campaign (default 1000 instances x 6 steps).
    Plan {
        #[arg(long, default_value_t = 1000)]
        instances: usize,
        #[arg(long, default_value_t = 5)]
        repeats: usize,
    },
    /// kem-runner on the campaign's object against an independent static executable of the
    /// same sources and flags with a minimal rdtsc loop (keygen, enc, dec), alternating
    /// `--rounds` times, both contained; the instance must be built first.
    Fidelity {
        pipeline: PathBuf,
        /// `submission/instance`, e.g. `ml-kem/ML-KEM-768-clean`.
        #[arg(long)]
        instance: String,
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Length of one timed trial (`200ms`, `1s`).
        #[arg(long, default_value = "300ms", value_parser = crate::dsl::parse_duration)]
        trial: std::time::Duration,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Level {
    Instance,
    Step,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ListWhat {
    Submissions,
    Instances,
    Steps,
}

/// Entry point; returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    match dispatch(cli.command, cli.outputs.as_deref()) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("error: {msg}");
            2
        }
    }
}

fn color() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// Load a campaign, printing every problem found; `outputs` overrides its output folder.
fn load(pipeline: &Path, outputs: Option<&Path>) -> Result<Campaign, i32> {
    let mut campaign = crate::dsl::load_campaign(pipeline).map_err(|diags| {
        eprint!("{}", diags.render(color()));
        2
    })?;
    if let Some(dir) = outputs {
        campaign.outputs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    }
    Ok(campaign)
}

fn dispatch(cmd: Cmd, outputs: Option<&Path>) -> Result<i32, String> {
    match cmd {
        Cmd::Check { pipeline, deep } => {
            let (loaded, mut problems) = crate::dsl::check_campaign(&pipeline);
            let mut c = match loaded {
                Ok(c) => c,
                Err(errors) => {
                    problems.extend(errors);
                    eprint!("{}", problems.render(color()));
                    return Ok(2);
                }
            };
            if let Some(dir) = outputs {
                c.outputs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
            }
            if deep {
                let scratch = c.outputs.join("cache").join("crates");
                let roots = c
                    .submissions
                    .iter()
                    .map(|s| {
                        (
                            s.id.clone(),
                            run::steps::source::resolve_root(&s.source, &scratch),
                        )
                    })
                    .collect();
                let report = crate::dsl::deep_check(&c, &roots, &crate::dsl::RealFs::new());
                for line in &report.listing {
                    println!("{line}");
                }
                problems.extend(report.problems);
            }
            if !problems.is_empty() {
                eprint!("{}", problems.render(color()));
                if problems.iter().any(|d| !d.is_note()) {
                    return Ok(2);
                }
            }
            let instances: usize = c.submissions.iter().map(|s| s.instances.len()).sum();
            let plan = Plan::build(&c);
            println!(
                "ok: system `{}`, {} submissions, {} instances, {} steps",
                c.system.name,
                c.submissions.len(),
                instances,
                plan.graph.node_count()
            );
            Ok(0)
        }
        Cmd::Graph {
            pipeline,
            format,
            only,
            level,
        } => {
            let c = match load(&pipeline, outputs) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            let plan = Plan::build(&c);
            let sel = plan.select(&only)?;
            let step = level == Level::Step;
            let text = match format {
                Format::Dot => graph::to_dot(&plan, &sel, step),
                Format::Mermaid => graph::to_mermaid(&plan, &sel, step),
                Format::Json => graph::to_json(&plan, &sel, step),
            };
            print!("{text}");
            Ok(0)
        }
        Cmd::List { pipeline, what } => {
            let c = match load(&pipeline, outputs) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            list(&c, what);
            Ok(0)
        }
        Cmd::Run {
            pipeline,
            dry_run,
            jobs,
            only,
            force,
            fail_fast,
            quiet,
            verbose,
        } => {
            let c = match load(&pipeline, outputs) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            let ctx = context(c, !dry_run)?;
            let selected = ctx.plan.select(&only)?;
            let force = graph::matchers(&force)?;
            if dry_run {
                print!("{}", run::decide::dry_run(&ctx, &selected, &force));
                return Ok(0);
            }
            let verbosity = match (quiet, verbose) {
                (true, _) => Verbosity::Quiet,
                (_, true) => Verbosity::Verbose,
                _ => Verbosity::Normal,
            };
            // The bench core is kept free of parallel work only when exclusive work may run
            // beside it; a KAT-only run, or one isolating whole machines, uses every core.
            let exclusive = selected.iter().any(|&ix| ctx.node(ix).exclusive)
                && ctx.campaign.system.isolation == crate::model::Isolation::Core;
            let jobs = jobs.unwrap_or_else(|| {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                if exclusive {
                    cores.saturating_sub(1).max(1)
                } else {
                    cores
                }
            });
            run_campaign(
                ctx,
                &selected,
                run::RunOptions {
                    jobs,
                    force,
                    fail_fast,
                },
                verbosity,
            )
        }
        Cmd::Explain { pipeline, step } => {
            let c = match load(&pipeline, outputs) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            let ctx = context(c, false)?;
            explain(&ctx, &step)
        }
        Cmd::Report { pipeline } => {
            let c = match load(&pipeline, outputs) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            let out = c.outputs.clone();
            let files = render_reports(&c, &out)?;
            for f in files {
                println!("{}", out.join(f).display());
            }
            Ok(0)
        }
        Cmd::Bench(BenchCmd::Fidelity {
            pipeline,
            instance,
            rounds,
            trial,
        }) => {
            let c = match load(&pipeline, outputs) {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            let ctx = context(c, true)?;
            let rows = crate::bench::fidelity(&ctx, &instance, rounds, trial)?;
            print!("{}", crate::bench::fidelity_table(&instance, &rows));
            Ok(0)
        }
        Cmd::Bench(BenchCmd::Plan { instances, repeats }) => {
            print!("{}", crate::bench::plan(instances, repeats)?);
            Ok(0)
        }
        Cmd::Compare {
            a,
            b,
            csv,
            measure: true,
        } => {
            let runner = locate_runner()?;
            let sandbox = run::sandbox::Sandbox::detect();
            for m in &sandbox.info.missing {
                eprintln!("warning: sandbox: {m}");
            }
            let p = crate::run::paired::measure(
                &a,
                &b,
                &runner,
                &sandbox,
                std::time::Duration::from_secs(600),
            )?;
            print!("{}", crate::run::paired::markdown(&p));
            if let Some(path) = csv {
                record::write_atomic(&path, crate::run::paired::csv(&p).as_bytes())
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
            Ok(if p.failures.is_empty() { 0 } else { 1 })
        }
        Cmd::Compare { a, b, csv, .. } => {
            let cmp = crate::report::compare(&a, &b).map_err(|e| e.to_string())?;
            print!("{}", crate::report::compare_markdown(&cmp));
            if let Some(path) = csv {
                record::write_atomic(&path, crate::report::compare_csv(&cmp).as_bytes())
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
            Ok(0)
        }
    }
}

fn list(c: &Campaign, what: ListWhat) {
    match what {
        ListWhat::Submissions => {
            for s in &c.submissions {
                println!(
                    "{:<20} {:<24} {} instances  {}",
                    s.id,
                    s.meta.algorithm,
                    s.instances.len(),
                    s.manifest_path.display()
                );
            }
        }
        ListWhat::Instances => {
            for s in &c.submissions {
                for i in &s.instances {
                    println!("{}/{:<32} {}  ({})", s.id, i.id, i.dir, i.namespace);
                }
            }
        }
        ListWhat::Steps => {
            let plan = Plan::build(c);
            for ix in plan.execution_order() {
                let n = &plan.graph[ix];
                println!("{}{}", n.id, if n.exclusive { "  [exclusive]" } else { "" });
            }
        }
    }
}

/// First line of `cc --version`.
fn cc_version(cc: &str) -> String {
    match Command::new(cc).arg("--version").output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string(),
        Ok(o) => format!("unknown (`{cc} --version`: {})", o.status),
        Err(e) => format!("unknown (`{cc}`: {e})"),
    }
}

/// Where kem-runner is: `NGCC_KEM_RUNNER`, else beside this executable. When this
/// executable was built by cargo and the runner is missing, build it the same way.
fn locate_runner() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("NGCC_KEM_RUNNER") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = exe.parent().ok_or("executable has no folder")?;
    let runner = dir.join("kem-runner");
    if runner.is_file() {
        return Ok(runner);
    }
    let profile = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    if matches!(profile, "debug" | "release") && manifest.is_file() {
        eprintln!(
            "kem-runner is not built yet; building it (cargo build -p kem-native --bin kem-runner)"
        );
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.args([
            "build",
            "-p",
            "kem-native",
            "--bin",
            "kem-runner",
            "--manifest-path",
        ])
        .arg(&manifest);
        if profile == "release" {
            cmd.arg("--release");
        }
        let target = dir.parent().ok_or("no target folder")?;
        cmd.env("CARGO_TARGET_DIR", target);
        let ok = cmd.status().map(|s| s.success()).unwrap_or(false);
        if ok && runner.is_file() {
            return Ok(runner);
        }
    }
    Err(format!(
        "kem-runner not found at {}; build it with `cargo build --release --workspace` or set NGCC_KEM_RUNNER",
        runner.display()
    ))
}

/// Everything a run, dry run or explain needs. `need_runner`: a real run.
fn context(campaign: Campaign, need_runner: bool) -> Result<Ctx, String> {
    let mut env = crate::measure::env::capture(&campaign.system);
    let sandbox = if need_runner {
        run::sandbox::Sandbox::detect()
    } else {
        run::sandbox::Sandbox::unavailable("not probed: nothing runs")
    };
    let facts = keys::Facts {
        cc_version: cc_version(&campaign.system.cc),
        env_fingerprint: crate::measure::env::fingerprint(&env),
    };
    if need_runner {
        env.sandbox = Some(Box::new(sandbox.info.clone()));
    }
    let plan = Plan::build(&campaign);
    let inputs = keys::all_inputs(&campaign, &plan, &facts);
    let runner = if need_runner {
        locate_runner()?
    } else {
        PathBuf::from("kem-runner")
    };
    // Absolute, so that commands run in the sandbox's own working folder find them.
    let runner = std::path::absolute(&runner).unwrap_or(runner);
    Ok(Ctx {
        out: std::path::absolute(&campaign.outputs).unwrap_or_else(|_| campaign.outputs.clone()),
        campaign,
        plan,
        facts,
        env,
        inputs,
        cpu_flags: crate::measure::env::cpu_flags(),
        runner,
        sandbox,
        shared_objects: Default::default(),
        progress: Default::default(),
    })
}

fn run_campaign(
    ctx: Ctx,
    selected: &BTreeSet<petgraph::graph::NodeIndex>,
    opts: run::RunOptions,
    verbosity: Verbosity,
) -> Result<i32, String> {
    let ctx = Arc::new(ctx);
    let _ = ctrlc::set_handler(|| {
        run::exec::CANCELLED.store(true, std::sync::atomic::Ordering::SeqCst);
        eprintln!("\ninterrupted: stopping running steps; finished steps are kept, `run` again to continue");
    });
    std::fs::create_dir_all(&ctx.out).map_err(|e| format!("{}: {e}", ctx.out.display()))?;
    let _lock = run::lock::OutputsLock::acquire(&ctx.out)?;
    for w in &ctx.env.warnings {
        if verbosity != Verbosity::Quiet {
            eprintln!("warning: {} (fix: {})", w.what, w.fix);
        }
    }
    let campaign_json = ctx.out.join("campaign.json");
    let mut rec = CampaignRecord {
        schema: RECORD_SCHEMA,
        system: ctx.campaign.system.name.clone(),
        arch: ctx.campaign.system.arch.clone(),
        pipeline: ctx.campaign.pipeline_path.clone(),
        command: std::env::args().collect(),
        started: run::utc_now(),
        finished: None,
        environment: ctx.env.clone(),
        env_fingerprint: ctx.facts.env_fingerprint.clone(),
        steps: Vec::new(),
        tool: Some(crate::tool_version()),
    };
    record::write_json(&campaign_json, &rec)
        .map_err(|e| format!("{}: {e}", campaign_json.display()))?;

    let progress = Arc::new(Progress::new(selected.len() as u64, verbosity));
    let _ = ctx.progress.set(Arc::clone(&progress));
    let summary = run::execute(Arc::clone(&ctx), selected, &opts, &progress);
    progress.finish();

    // The campaign's start and end are those of its evidence: the earliest start and the
    // latest end among the step records, whichever invocation wrote them (a re-run that
    // finds everything up to date does not move them).
    let now = run::utc_now();
    let mut span: Option<(String, String)> = None;
    let mut steps = Vec::new();
    for ix in ctx.plan.execution_order() {
        let node = ctx.node(ix);
        let Some(r) = ctx.read_record(node) else {
            continue;
        };
        if r.status != Status::Skipped && !r.started.is_empty() {
            span = Some(match span {
                None => (r.started.clone(), r.finished.clone()),
                Some((a, b)) => (a.min(r.started.clone()), b.max(r.finished.clone())),
            });
        }
        let ran = summary.outcomes.get(&ix).is_some_and(|o| o.ran);
        steps.push(CampaignStep {
            id: node.id.clone(),
            status: r.status,
            reason: r.reason,
            record: ctx.rel(&ctx.record_path(node)),
            ran,
        });
    }
    rec.steps = steps;
    match span {
        Some((a, b)) => {
            rec.started = a;
            rec.finished = Some(b);
        }
        None => rec.finished = Some(now),
    }
    record::write_json(&campaign_json, &rec)
        .map_err(|e| format!("{}: {e}", campaign_json.display()))?;

    // Re-render every report now that the campaign's end is known; the index covers
    // everything with a record, not only this run's steps.
    if ctx.spec(StepKind::Report).is_some() && !summary.interrupted {
        if let Err(e) = render_reports(&ctx.campaign, &ctx.out) {
            eprintln!("warning: reports not re-rendered: {e}");
        }
    }
    print_summary(&ctx, &summary);
    Ok(if summary.interrupted {
        130
    } else if summary.failed() {
        1
    } else {
        0
    })
}

/// Per step kind: ran / up to date / failed / skipped; then each failure with its log.
fn print_summary(ctx: &Ctx, summary: &run::Summary) {
    use std::collections::BTreeMap;
    let mut table: BTreeMap<StepKind, [usize; 5]> = BTreeMap::new();
    for (ix, o) in &summary.outcomes {
        let row = table.entry(ctx.node(*ix).kind).or_default();
        match (o.ran, o.status) {
            (_, Status::Failed | Status::TimedOut) => row[2] += 1,
            (_, Status::Skipped) => row[3] += 1,
            (_, Status::Unsupported) => row[4] += 1,
            (true, Status::Ok) => row[0] += 1,
            (false, Status::Ok) => row[1] += 1,
        }
    }
    eprintln!("\nstep kind        ran  up-to-date  failed  skipped  unsupported");
    for (kind, r) in &table {
        eprintln!(
            "{:<14} {:>5} {:>11} {:>7} {:>8} {:>12}",
            kind.name(),
            r[0],
            r[1],
            r[2],
            r[3],
            r[4]
        );
    }
    let failures: Vec<_> = summary
        .outcomes
        .iter()
        .filter(|(_, o)| o.status.is_failure())
        .collect();
    if !failures.is_empty() {
        eprintln!("\nfailures:");
        for (ix, o) in failures {
            eprintln!(
                "  {} [{}]: {}",
                ctx.node(*ix).id,
                o.status.name(),
                o.reason.as_deref().unwrap_or("")
            );
            if let Some(log) = &o.log {
                eprintln!("      log: {}", ctx.out.join(log).display());
            }
        }
    }
    if summary.stopped_early {
        eprintln!("\nstopped early (--fail-fast): steps not started are left for the next run");
    }
    if summary.interrupted {
        eprintln!("\ninterrupted: `run` again to finish the remaining steps");
    }
    eprintln!("outputs: {}", ctx.out.display());
}

/// `explain`: the decision for one step, with every changed input named.
fn explain(ctx: &Ctx, id: &str) -> Result<i32, String> {
    let Some(&ix) = ctx.plan.by_id.get(id) else {
        let mut close: Vec<&String> = ctx
            .plan
            .by_id
            .keys()
            .filter(|k| k.contains(id) || id.contains(k.as_str()))
            .collect();
        close.sort();
        close.truncate(5);
        return Err(format!(
            "no step `{id}`{}",
            if close.is_empty() {
                "; see `ngcc-pipe list <pipeline> steps`".to_string()
            } else {
                format!(
                    "; did you mean {}?",
                    close
                        .iter()
                        .map(|c| format!("`{c}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ));
    };
    // Decide every ancestor first, so "upstream runs" is known.
    let ancestors = ctx.plan.select(&[globset::escape(id)])?;
    let decision = decide_all(ctx, &ancestors, &[])[&ix].clone();
    let node = ctx.node(ix);
    println!("step {id}");
    match &decision {
        Decision::UpToDate(s) => println!("  up to date (last run {})", s.name()),
        Decision::Run(why) => println!("  would run: {why}"),
    }
    let current = &ctx.inputs[ix.index()];
    match ctx.read_record(node) {
        None => println!("  no record at {}", ctx.record_path(node).display()),
        Some(rec) => {
            println!(
                "  record {} ({}, finished {})",
                ctx.record_path(node).display(),
                rec.status.name(),
                rec.finished
            );
            if let Some(r) = &rec.reason {
                println!("  reason: {r}");
            }
            for name in keys::changed(&rec.inputs, current) {
                println!(
                    "  input `{name}`: {} -> {}",
                    rec.inputs.get(&name).map_or("(absent)", String::as_str),
                    current.get(&name).map_or("(absent)", String::as_str)
                );
            }
        }
    }
    println!("  inputs:");
    for (k, v) in current {
        println!("    {k}: {v}");
    }
    Ok(0)
}

/// Render every report from records; returns the files written (relative to `out`).
fn render_reports(c: &Campaign, out: &Path) -> Result<Vec<PathBuf>, String> {
    let view = crate::report::CampaignView::load(c, out)
        .map_err(|e| format!("reading records in {}: {e}", out.display()))?;
    let mut files = Vec::new();
    for s in &c.submissions {
        files.extend(crate::report::render_submission(&view, &s.id));
    }
    files.extend(crate::report::render_campaign(&view));
    crate::report::write_all(out, &files).map_err(|e| e.to_string())?;
    Ok(files.into_iter().map(|(p, _)| p).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_run_options() {
        let cli = Cli::try_parse_from([
            "ngcc-pipe",
            "run",
            "p.kdl",
            "--dry-run",
            "--only",
            "*/kat",
            "-j",
            "3",
        ])
        .unwrap();
        match cli.command {
            Cmd::Run {
                dry_run,
                only,
                jobs,
                ..
            } => {
                assert!(dry_run);
                assert_eq!(only, vec!["*/kat"]);
                assert_eq!(jobs, Some(3));
            }
            _ => panic!("expected run"),
        }
    }

    #[test]
    fn reads_the_compiler_version() {
        let v = cc_version("cc");
        assert!(
            !v.starts_with("unknown") && v.chars().any(|c| c.is_ascii_digit()),
            "{v}"
        );
        assert!(cc_version("/nonexistent/cc").starts_with("unknown"));
    }
}
