//! The command line: the options (clap) and the dispatch to one file per command under
//! `cli/` (cargo's `commands/`): `run.rs` (and its dry run), `check.rs`, `graph.rs`,
//! `list.rs`, `explain.rs`, `report.rs`, `compare.rs` (with `history`) and `bench.rs`.
//!
//! Exit codes are [`Error::exit_code`]'s: 0 all good; 1 a step failed (or an operation of
//! `compare --measure` could not be measured); 2 bad input (the campaign files, the command
//! line), or the outputs folder in use, or a tool missing; 130 interrupted.
//!
//! Standard output is written through [`print`], never `print!`: `print!` panics when the
//! reader has gone (`ngcc-pipe graph … | head -1`), and restoring the default SIGPIPE
//! action instead would need `unsafe` here and would kill a `run` (its lock, its children)
//! when its output pipe closes. A closed pipe ends the command quietly with exit 0
//! (ripgrep's `main.rs` does the same).

mod bench;
mod check;
mod compare;
mod explain;
mod graph;
mod import;
mod list;
mod report;
mod run;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::error::Error;
use crate::graph::Format;
use crate::model::Campaign;

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
    Run(RunArgs),
    /// Validate a pipeline and every manifest it pulls in.
    #[command(
        after_help = "Examples:\n  ngcc-pipe check pipelines/x86_1.kdl\n  ngcc-pipe check --deep pipelines/x86_1.kdl"
    )]
    Check(CheckArgs),
    /// Turn a NIST-round submission package (folder, .tar.gz or .zip) into a submission
    /// folder: manifest.kdl, kat.sha256 and sizes.csv.
    #[command(
        after_help = "Examples:\n  ngcc-pipe import pkgs/Kyber --into submissions\n  ngcc-pipe import pkgs/FrodoKEM.tar.gz --into submissions --name frodokem-nist"
    )]
    Import(ImportArgs),
    /// Export the step graph.
    #[command(
        after_help = "Examples:\n  ngcc-pipe graph pipelines/x86_1.kdl --format dot | dot -Tsvg > graph.svg\n  ngcc-pipe graph pipelines/x86_1.kdl --format mermaid --level step\n  ngcc-pipe graph pipelines/x86_1.kdl --format json --only 'ml-kem/ML-KEM-768-clean/*'"
    )]
    Graph(GraphArgs),
    /// List submissions, instances or steps.
    #[command(
        after_help = "Examples:\n  ngcc-pipe list pipelines/x86_1.kdl instances\n  ngcc-pipe list pipelines/x86_1.kdl steps"
    )]
    List(ListArgs),
    /// Say why a step would run (which input changed), or that it is up to date.
    #[command(
        after_help = "Example:\n  ngcc-pipe explain pipelines/x86_1.kdl ml-kem/ML-KEM-768-clean/time:keygen"
    )]
    Explain { pipeline: PathBuf, step: String },
    /// Re-render reports from the records, without measuring again.
    #[command(after_help = "Example:\n  ngcc-pipe report pipelines/x86_1.kdl")]
    Report { pipeline: PathBuf },
    /// Compare two output folders: ratio b/a of median cycles with its CI, host-adjusted, against an equivalence band.
    #[command(
        after_help = "Examples:\n  ngcc-pipe compare outputs/quick outputs/quick-again --csv diff.csv\n  \
                      ngcc-pipe compare outputs/quick outputs/quick-again --band 5\n  \
                      ngcc-pipe compare --measure outputs/quick outputs/quick-O0 --csv paired.csv"
    )]
    Compare(CompareArgs),
    /// How each operation moved over a series of campaigns (output folders, oldest first).
    #[command(
        after_help = "Example:\n  ngcc-pipe history outputs/x86_1-march outputs/x86_1-april outputs/x86_1 --csv history.csv"
    )]
    History(HistoryArgs),
    /// Benchmarks of ngcc-pipe itself.
    #[command(
        subcommand,
        after_help = "Example:\n  ngcc-pipe bench plan --instances 1000"
    )]
    Bench(BenchCmd),
    /// The environment of this machine as JSON (run on a Slurm node by the Slurm executor).
    #[command(hide = true)]
    Env {
        #[arg(long)]
        bench_cpu: usize,
        #[arg(long)]
        cc: String,
    },
}

// `run`'s options; no doc comments on these structs, clap would show them
// instead of the command's.
#[derive(Args)]
struct RunArgs {
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
    /// When another process times on the bench CPU, fail the exclusive steps at once
    /// instead of waiting for it.
    #[arg(long)]
    no_wait: bool,
    /// Only failures and the summary.
    #[arg(short, long)]
    quiet: bool,
    /// Also list up-to-date steps.
    #[arg(short, long)]
    verbose: bool,
}

// `check`'s options.
#[derive(Args)]
struct CheckArgs {
    pipeline: PathBuf,
    /// Also fetch the sources: instance folders, api.h namespaces, the files a build compiles.
    #[arg(long)]
    deep: bool,
}

// `import`'s options.
#[derive(Args)]
struct ImportArgs {
    /// The package: a folder, or a .tar, .tar.gz, .tgz or .zip archive.
    package: PathBuf,
    /// Where the submission's folder is made (`DIR/<name>/manifest.kdl`).
    #[arg(long, value_name = "DIR")]
    into: PathBuf,
    /// The submission id (default: the package's folder or archive name).
    #[arg(long)]
    name: Option<String>,
    /// Replace an existing manifest.kdl.
    #[arg(long)]
    force: bool,
    /// The C compiler that evaluates api.h sizes defined through other macros.
    #[arg(long, default_value = "cc")]
    cc: String,
    /// The package's folder inside the folder or archive given (default: the one folder,
    /// at most two levels down, that holds `<Kind>_Implementation/`).
    #[arg(long, value_name = "PATH")]
    root: Option<PathBuf>,
}

// `graph`'s options.
#[derive(Args)]
struct GraphArgs {
    pipeline: PathBuf,
    #[arg(long, value_enum, default_value = "dot")]
    format: Format,
    /// Only these steps and what they need.
    #[arg(long, value_name = "GLOB")]
    only: Vec<String>,
    /// `step` collapses instances and operations into one node per step kind.
    #[arg(long, value_enum, default_value = "instance")]
    level: Level,
}

// `list`'s options.
#[derive(Args)]
struct ListArgs {
    pipeline: PathBuf,
    #[arg(value_enum, default_value = "instances")]
    what: ListWhat,
}

// `compare`'s options.
#[derive(Args)]
struct CompareArgs {
    a: PathBuf,
    b: PathBuf,
    /// Also write the comparison as CSV here.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Time A's and B's objects now, interleaved in one session with an A/A pair.
    #[arg(long)]
    measure: bool,
    /// With --measure: when another process times on the bench CPU, stop at once instead
    /// of waiting for it.
    #[arg(long, requires = "measure")]
    no_wait: bool,
    /// Equivalence band in percent: a change is flagged when its 95% CI lies wholly beyond 1 ± band.
    #[arg(long, value_name = "PERCENT", default_value = "2", value_parser = parse_band, conflicts_with = "measure")]
    band: f64,
}

// `history`'s options.
#[derive(Args)]
struct HistoryArgs {
    /// Output folders (or copies of them), oldest first.
    #[arg(required = true, num_args = 2..)]
    dirs: Vec<PathBuf>,
    /// Equivalence band in percent: a step is flagged when its 95% CI lies wholly beyond 1 ± band.
    #[arg(long, value_name = "PERCENT", default_value = "2", value_parser = parse_band)]
    band: f64,
    /// Also write the history as CSV here (one line per operation and campaign).
    #[arg(long)]
    csv: Option<PathBuf>,
}

/// A band in percent (`2`, `2%`, `0.5`) as a fraction, above 0 and below 100.
fn parse_band(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("`{s}` is not a percentage (e.g. `2` or `2%`)"))?;
    if p > 0.0 && p < 100.0 {
        Ok(p / 100.0)
    } else {
        Err(format!("the band must lie between 0 and 100%, not `{s}`"))
    }
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
    /// same sources and flags with a minimal rdtsc loop, linked in the object's link orders
    /// and anchored like it (keygen, enc, dec): one short batch of each per round, shuffled,
    /// `--rounds` rounds, all contained; the instance must be built first.
    Fidelity(FidelityArgs),
}

// `bench fidelity`'s options.
#[derive(Args)]
struct FidelityArgs {
    pipeline: PathBuf,
    /// `submission/instance`, e.g. `ml-kem/ML-KEM-768-clean`.
    #[arg(long)]
    instance: String,
    /// Rounds per operation: one batch of kem-runner and one of the reference each.
    #[arg(long, default_value_t = 101)]
    rounds: usize,
    /// Length of one batch (`20ms`, `100ms`); a batch is never fewer than 2 calls.
    #[arg(long, default_value = "20ms", value_parser = crate::dsl::parse_duration)]
    batch: std::time::Duration,
    /// When another process times on the bench CPU, stop at once instead of waiting for it.
    #[arg(long)]
    no_wait: bool,
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
/// The command line's definition, for checking examples against it (`tests/docs.rs`).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

pub fn main() -> i32 {
    let cli = Cli::parse();
    match dispatch(cli.command, cli.outputs.as_deref()) {
        Ok(()) => 0,
        Err(e) => {
            match &e {
                Error::Campaign(problems) => eprint!("{}", problems.render(color())),
                // Reported already: each failure by the summary, the interruption by the
                // Ctrl-C handler; a closed output pipe is the reader's choice.
                Error::Failed(_) | Error::Interrupted => {}
                Error::Stdout(io) if io.kind() == std::io::ErrorKind::BrokenPipe => {}
                _ => eprintln!("error: {}", crate::text::clean(&e.to_string())),
            }
            e.exit_code()
        }
    }
}

fn dispatch(cmd: Cmd, outputs: Option<&Path>) -> Result<(), Error> {
    match cmd {
        Cmd::Run(args) => run::exec(args, outputs),
        Cmd::Check(args) => check::exec(args, outputs),
        Cmd::Graph(args) => graph::exec(args, outputs),
        Cmd::Import(args) => import::exec(args),
        Cmd::List(args) => list::exec(args, outputs),
        Cmd::Explain { pipeline, step } => explain::exec(&pipeline, &step, outputs),
        Cmd::Report { pipeline } => report::exec(&pipeline, outputs),
        Cmd::Compare(args) => compare::exec(args),
        Cmd::History(args) => compare::history(args),
        Cmd::Bench(BenchCmd::Plan { instances, repeats }) => bench::plan(instances, repeats),
        Cmd::Bench(BenchCmd::Fidelity(args)) => bench::fidelity(args, outputs),
        Cmd::Env { bench_cpu, cc } => {
            let env = crate::run::exec::slurm::local_env(bench_cpu, &cc);
            let text = serde_json::to_string(&env).map_err(|e| Error::Tool(e.to_string()))?;
            writeln!(std::io::stdout(), "{text}").map_err(Error::Stdout)
        }
    }
}

/// Colour and unicode boxes for diagnostics on a terminal, unless `NO_COLOR` is set.
fn color() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// Load a campaign (every problem found is in the error); `outputs` overrides its output
/// folder.
fn load(pipeline: &Path, outputs: Option<&Path>) -> Result<Campaign, Error> {
    let mut campaign = crate::dsl::load_campaign(pipeline).map_err(Error::Campaign)?;
    set_outputs(&mut campaign, outputs);
    Ok(campaign)
}

/// `--outputs`: write there instead of the pipeline's `outputs` folder.
fn set_outputs(campaign: &mut Campaign, outputs: Option<&Path>) {
    if let Some(dir) = outputs {
        campaign.outputs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    }
}

/// Write `text` to standard output through one lock (see the module documentation), control
/// and bidi characters shown escaped (what a command prints may quote a submission's names
/// or a KEM's output).
fn print(text: &str) -> Result<(), Error> {
    let text = crate::text::clean(text);
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(Error::Stdout)
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
            Cmd::Run(RunArgs {
                dry_run,
                only,
                jobs,
                ..
            }) => {
                assert!(dry_run);
                assert_eq!(only, vec!["*/kat"]);
                assert_eq!(jobs, Some(3));
            }
            _ => panic!("expected run"),
        }
    }

    #[test]
    fn bands_are_percentages() {
        assert_eq!(parse_band("2"), Ok(0.02));
        assert_eq!(parse_band("5%"), Ok(0.05));
        assert_eq!(parse_band("0.5"), Ok(0.005));
        assert!(parse_band("0").is_err() && parse_band("x").is_err() && parse_band("100").is_err());
        assert!(Cli::try_parse_from([
            "ngcc-pipe",
            "compare",
            "a",
            "b",
            "--measure",
            "--band",
            "3"
        ])
        .is_err());
        assert!(Cli::try_parse_from(["ngcc-pipe", "history", "a"]).is_err());
        match Cli::try_parse_from(["ngcc-pipe", "history", "a", "b", "c", "--band", "3"])
            .unwrap()
            .command
        {
            Cmd::History(h) => assert_eq!((h.dirs.len(), h.band), (3, 0.03)),
            _ => panic!("expected history"),
        }
    }
}
