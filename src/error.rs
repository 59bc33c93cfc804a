//! The errors that end a command, one kind per way it can end, each with its exit code
//! (hyperfine's `src/error.rs`, just's per-kind exit codes).
//!
//! Exit codes: 0 nothing failed (also: standard output closed early, as in
//! `ngcc-pipe graph … | head -1`); 1 a step failed or timed out, or an operation of
//! `compare --measure` could not be measured; 2 bad input (the campaign files, the command
//! line, the records asked for), a file that cannot be read or written, the outputs folder
//! in use by another `run`, a tool missing or failing; 130 interrupted. The command-line
//! parser itself (clap) exits 2 on unknown options.
//!
//! Step failures inside a run are not errors of the run: they are records with a status,
//! counted in the run's summary, and [`Error::Failed`] only carries the exit code.

use std::fmt::Display;
use std::io;
use std::path::PathBuf;

use crate::dsl::Diagnostics;

/// Why a command ended without success.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Problems in the campaign files, each at its line (rendered by the caller, in colour
    /// on a terminal).
    #[error("{0}")]
    Campaign(Diagnostics),
    /// Bad input other than the campaign files: a glob, a step id, an instance that is not
    /// built yet, output folders with nothing to compare.
    #[error("{0}")]
    Input(String),
    /// A file or folder that cannot be read or written; `what` names it.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    /// Another `ngcc-pipe run` holds the outputs folder's lock.
    #[error(
        "outputs folder {} is in use by {holder} (another `ngcc-pipe run`); wait for it to finish, or pass `--outputs` to write elsewhere",
        out.display()
    )]
    LockHeld {
        out: PathBuf,
        /// `process <pid>`, or `another process` when the lock file names none.
        holder: String,
    },
    /// Another process times on the bench CPU and `--no-wait` was given.
    #[error("bench CPU {cpu} is in use by {holder} (without --no-wait, ngcc-pipe waits for it)")]
    BenchBusy { cpu: usize, holder: String },
    /// A program ngcc-pipe needs is not there (kem-runner, the C compiler).
    #[error("{0}")]
    ToolMissing(String),
    /// A program ngcc-pipe ran failed or answered something unreadable.
    #[error("{0}")]
    Tool(String),
    /// Steps or measurements failed (`2 steps`); each one is already reported with its
    /// reason, and the records keep the work done.
    #[error("{0} failed")]
    Failed(String),
    /// Stopped by Ctrl-C; finished work is kept.
    #[error("interrupted")]
    Interrupted,
    /// Writing standard output failed.
    #[error("writing to standard output: {0}")]
    Stdout(#[source] io::Error),
}

impl Error {
    /// The process exit code for this error (see the module documentation).
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Failed(_) => 1,
            Error::Interrupted => 130,
            Error::Stdout(e) if e.kind() == io::ErrorKind::BrokenPipe => 0,
            Error::Campaign(_)
            | Error::Input(_)
            | Error::Io { .. }
            | Error::LockHeld { .. }
            | Error::BenchBusy { .. }
            | Error::ToolMissing(_)
            | Error::Tool(_)
            | Error::Stdout(_) => 2,
        }
    }

    /// For `map_err`: an I/O error on `what` (a path, or a phrase naming the file).
    pub fn io(what: impl Display) -> impl FnOnce(io::Error) -> Error {
        let what = what.to_string();
        move |source| Error::Io { what, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_per_kind() {
        let io_err = || io::Error::other("x");
        assert_eq!(Error::Failed("1 step".into()).exit_code(), 1);
        assert_eq!(Error::Interrupted.exit_code(), 130);
        assert_eq!(Error::Input("no step `x`".into()).exit_code(), 2);
        assert_eq!(Error::io("f")(io_err()).exit_code(), 2);
        assert_eq!(
            Error::LockHeld {
                out: "o".into(),
                holder: "process 1".into()
            }
            .exit_code(),
            2
        );
        assert_eq!(Error::ToolMissing("kem-runner".into()).exit_code(), 2);
        assert_eq!(Error::Stdout(io_err()).exit_code(), 2);
        let closed = io::Error::from(io::ErrorKind::BrokenPipe);
        assert_eq!(Error::Stdout(closed).exit_code(), 0);
    }

    #[test]
    fn io_names_what_failed() {
        let e = Error::io("out/campaign.json")(io::Error::other("disk full"));
        assert_eq!(e.to_string(), "out/campaign.json: disk full");
    }
}
