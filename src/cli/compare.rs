//! `ngcc-pipe compare`: two output folders side by side from their records, or, with
//! `--measure`, their objects timed again now in one paired session; `ngcc-pipe history`:
//! a series of output folders from their records.

use super::{CompareArgs, HistoryArgs};
use crate::error::Error;
use crate::record;
use crate::run::{self, paired, sandbox::Sandbox};

pub(super) fn exec(args: CompareArgs) -> Result<(), Error> {
    let CompareArgs {
        a,
        b,
        csv,
        measure,
        no_wait,
        band,
    } = args;
    if measure {
        let runner = run::ctx::locate_runner()?;
        let sandbox = Sandbox::detect();
        for m in &sandbox.info.missing {
            eprintln!("warning: sandbox: {m}");
        }
        let p = paired::measure(
            &a,
            &b,
            &runner,
            &sandbox,
            std::time::Duration::from_secs(600),
            no_wait,
        )?;
        // The CSV is written even when nobody reads standard output.
        let printed = super::print(&paired::markdown(&p));
        if let Some(path) = csv {
            record::write_atomic(&path, paired::csv(&p).as_bytes())
                .map_err(Error::io(path.display()))?;
        }
        printed?;
        if p.failures.is_empty() {
            Ok(())
        } else {
            let n = p.failures.len();
            let s = if n == 1 { "" } else { "s" };
            Err(Error::Failed(format!("{n} operation{s}")))
        }
    } else {
        let cmp =
            crate::report::compare_with(&a, &b, band).map_err(|e| Error::Input(e.to_string()))?;
        if cmp.rows.is_empty() {
            return Err(Error::Input(format!(
                "no operation is timed in both `{}` and `{}` ({} only in A, {} only in B)",
                a.display(),
                b.display(),
                cmp.only_a.len(),
                cmp.only_b.len()
            )));
        }
        let printed = super::print(&crate::report::compare_markdown(&cmp));
        if let Some(path) = csv {
            record::write_atomic(&path, crate::report::compare_csv(&cmp).as_bytes())
                .map_err(Error::io(path.display()))?;
        }
        printed
    }
}

pub(super) fn history(args: HistoryArgs) -> Result<(), Error> {
    let h =
        crate::report::history(&args.dirs, args.band).map_err(|e| Error::Input(e.to_string()))?;
    // The CSV is written even when nobody reads standard output.
    let printed = super::print(&crate::report::history_markdown(&h));
    if let Some(path) = args.csv {
        record::write_atomic(&path, crate::report::history_csv(&h).as_bytes())
            .map_err(Error::io(path.display()))?;
    }
    printed
}
