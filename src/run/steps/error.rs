//! Why a step stopped: [`StepError`], one variant per way, and [`JobError`], what a
//! kem-runner job's exit said. Each becomes the step's [`Stop`] in one place
//! (`From<StepError> for Stop`): timed out for [`StepError::TimedOut`], failed otherwise,
//! with the error's text as the record's reason.

use std::io;
use std::path::PathBuf;

use super::Stop;
use crate::model::Op;

/// Why a step stopped before producing data.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The step reads the source record and there is none.
    #[error("no source record: run the `source` step first")]
    NoSource,
    /// The step reads the build record and there is none.
    #[error("no build record: run the `build` step first")]
    NoBuild,
    /// The build record has no object (its status named).
    #[error("build did not produce an object ({0})")]
    NoObject(&'static str),
    /// The build made no object of the variant the step needs (`valgrind`, `profile`).
    #[error("the build made no {0} object")]
    NoVariant(&'static str),
    /// A file or folder that cannot be read, written or made.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The step's log, or the folder it writes into, cannot be made.
    #[error("{0}")]
    Log(io::Error),
    /// A program cannot be started (`kem-runner`, `valgrind`, `cargo`).
    #[error("cannot run {tool}: {source}")]
    Spawn {
        /// The program's name.
        tool: &'static str,
        /// Why.
        source: io::Error,
    },
    /// The step ran out of time (the text says after how long).
    #[error("{0}")]
    TimedOut(String),
    /// A kem-runner job ended without a usable record.
    #[error(transparent)]
    Job(#[from] JobError),
    /// A file or a tool's output that does not parse (`callgrind.out.3: ...`).
    #[error("{what}: {source}")]
    Parse {
        /// The file or output.
        what: String,
        /// The parser's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// What a kind checks itself (the text says what).
    #[error("{0}")]
    Check(String),
}

impl StepError {
    /// A file or folder error.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> StepError {
        let path = path.into();
        move |source| StepError::Io { path, source }
    }
}

impl From<StepError> for Stop {
    fn from(e: StepError) -> Stop {
        match e {
            StepError::TimedOut(reason) => Stop::timed_out(reason),
            e => Stop::failed(e.to_string()),
        }
    }
}

/// How a kem-runner job ended when it left no usable record. `under` names the tool it ran
/// under (`valgrind`, `memcheck`), if any.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// No JSON record on the record channel.
    #[error(
        "kem-runner wrote no valid record ({source}{}); {exit}: {tail}",
        if *truncated { "; output cut at its size limit" } else { "" }
    )]
    NoRecord {
        /// The JSON error.
        source: serde_json::Error,
        /// Whether the output was cut at its size limit.
        truncated: bool,
        /// How the process ended, in words.
        exit: String,
        /// The last lines of its stderr.
        tail: String,
    },
    /// The KEM misbehaved (exit 1 with the record's `failure`).
    #[error("{op}: {failure}")]
    Kem {
        /// The operation.
        op: Op,
        /// The record's `failure`.
        failure: String,
    },
    /// Exit 1 without a record that says why.
    #[error("{op}: exit code 1; {tail}")]
    Exit1 {
        /// The operation.
        op: Op,
        /// The last lines of stderr.
        tail: String,
    },
    /// Killed by a signal (a crash, often a failed allocation under the memory limit).
    #[error("{op}{}: {exit} ({limits}); {tail}", under_text(*under))]
    Crashed {
        /// The operation.
        op: Op,
        /// The wrapper tool.
        under: Option<&'static str>,
        /// The signal, in words.
        exit: String,
        /// The limits the process had.
        limits: String,
        /// The last lines of stderr.
        tail: String,
    },
    /// Any other exit (a runner error: exit 2 and its stderr line).
    #[error("{op}{}: {exit}; {tail}", under_text(*under))]
    Ended {
        /// The operation.
        op: Op,
        /// The wrapper tool.
        under: Option<&'static str>,
        /// The exit, in words.
        exit: String,
        /// The last lines of stderr.
        tail: String,
    },
}

fn under_text(under: Option<&'static str>) -> String {
    under.map(|u| format!(" under {u}")).unwrap_or_default()
}
