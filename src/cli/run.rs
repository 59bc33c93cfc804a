//! `ngcc-pipe run`: run a campaign (the steps, then `run::campaign::finish` writes
//! `campaign.json` and the reports no step rendered) and print its summary, or print its plan
//! with `--dry-run`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use super::RunArgs;
use crate::error::Error;
use crate::graph;
use crate::model::StepKind;
use crate::record::Status;
use crate::run::ctx::Purpose;
use crate::run::progress::{Progress, Verbosity};
use crate::run::{self, Ctx};

pub(super) fn exec(args: RunArgs, outputs: Option<&Path>) -> Result<(), Error> {
    let RunArgs {
        pipeline,
        dry_run,
        jobs,
        only,
        force,
        fail_fast,
        no_wait,
        quiet,
        verbose,
    } = args;
    let c = super::load(&pipeline, outputs)?;
    let purpose = if dry_run { Purpose::Plan } else { Purpose::Run };
    let ctx = Ctx::new(c, purpose)?;
    let selected = ctx.plan.select(&only).map_err(Error::Input)?;
    let force = graph::matchers(&force).map_err(Error::Input)?;
    if dry_run {
        return super::print(&run::dry_run::dry_run(&ctx, &selected, &force));
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
            no_wait,
        },
        verbosity,
    )
}

/// How long an interrupted run may take to stop its steps and write its records.
const INTERRUPT_GRACE: std::time::Duration = std::time::Duration::from_millis(1700);

fn run_campaign(
    ctx: Ctx,
    selected: &BTreeSet<petgraph::graph::NodeIndex>,
    opts: run::RunOptions,
    verbosity: Verbosity,
) -> Result<(), Error> {
    let ctx = Arc::new(ctx);
    let _ = ctrlc::set_handler(|| {
        if run::exec::CANCELLED.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        eprintln!("\ninterrupted: stopping running steps; finished steps are kept, `run` again to continue");
        // Running steps see the flag within milliseconds; a worker stuck anyway (in a
        // system call on something a KEM left) does not hold the run: exit regardless.
        // Contained processes die with the engine (parent-death signal).
        std::thread::spawn(|| {
            std::thread::sleep(INTERRUPT_GRACE);
            eprintln!("interrupted: a step did not stop in time; exiting without it");
            std::process::exit(130);
        });
    });
    std::fs::create_dir_all(&ctx.out).map_err(Error::io(ctx.out.display()))?;
    let _lock = run::lock::OutputsLock::acquire(&ctx.out)?;
    for w in &ctx.env.warnings {
        if verbosity != Verbosity::Quiet {
            eprintln!("warning: {} (fix: {})", w.what, w.fix);
        }
    }
    sandbox_warning(&ctx.sandbox);
    let begun = run::campaign::begin(&ctx);
    let progress = Arc::new(Progress::new(selected.len() as u64, verbosity));
    let _ = ctx.progress.set(Arc::clone(&progress));
    let summary = run::execute(Arc::clone(&ctx), selected, &opts, &progress);
    progress.finish();
    run::campaign::finish(&ctx, begun, &summary)?;
    print_summary(&ctx, &summary);
    if summary.interrupted {
        Err(Error::Interrupted)
    } else if summary.failed() {
        let n = summary
            .outcomes
            .values()
            .filter(|o| o.status.is_failure())
            .count();
        let s = if n == 1 { "" } else { "s" };
        Err(Error::Failed(format!("{n} step{s}")))
    } else {
        Ok(())
    }
}

/// Say on the terminal what containment of submission code is not in force: without
/// bubblewrap a warning whatever the verbosity (the code runs uncontained).
fn sandbox_warning(sandbox: &crate::run::sandbox::Sandbox) {
    let missing = &sandbox.info.missing;
    if missing.is_empty() {
        return;
    }
    if sandbox.contained() {
        eprintln!("note: sandbox: not in force here:");
    } else {
        eprintln!(
            "warning: submission code runs UNCONTAINED: install bubblewrap (Debian/Ubuntu: \
             `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`), or refuse such runs \
             with `sandbox \"required\"` in the pipeline's system block. Not in force:"
        );
    }
    for m in missing {
        eprintln!("  - {}", crate::text::clean_line(m));
    }
}

/// Per step kind: ran / up to date / failed / skipped; then each failure with its log.
fn print_summary(ctx: &Ctx, summary: &run::Summary) {
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
                crate::text::clean(o.reason.as_deref().unwrap_or(""))
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
