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
    /// The profile object computes something else than the plain object (`profile`).
    #[error("the profile object's KAT differs from the plain object's; not profiling")]
    ProfileKatDiffers,
    /// A file or folder that cannot be read, written or made.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A file or folder error in the OS's own words (the log, a generated file).
    #[error("{0}")]
    File(io::Error),
    /// A submission's tree that is too deep or too large to walk, or has an unreadable
    /// file (the walk's reason).
    #[error("source tree {0}")]
    Tree(String),
    /// A file submission code wrote or controls that is not read back (a link, FIFO,
    /// device, oversized file; see `crate::safe_fs`).
    #[error("{0}")]
    Untrusted(#[from] crate::safe_fs::FileError),
    /// A file that cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file (`primitives header x.h`).
        path: String,
        /// Why.
        source: io::Error,
    },
    /// The compiler cannot be started.
    #[error("cannot run `{cc}`: {source}")]
    Cc {
        /// The compiler.
        cc: String,
        /// Why.
        source: io::Error,
    },
    /// A compile or link that failed (`compile error in x.c (exit code 1):` and stderr).
    #[error("{what} ({exit}{}):\n{tail}", limits.as_ref().map(|l| format!("; {l}")).unwrap_or_default())]
    Tool {
        /// `compile error in x.c`, `link error for x.so`.
        what: String,
        /// The exit, in words.
        exit: String,
        /// The limits the process had, after a signal.
        limits: Option<String>,
        /// The last lines of stderr.
        tail: String,
    },
    /// The compiler's predefined macros cannot be listed.
    #[error("`{cc} -dM -E` with the build's flags failed ({exit})")]
    Predefined {
        /// The compiler.
        cc: String,
        /// The exit, in words.
        exit: String,
    },
    /// The build's flag profile is not declared.
    #[error("unknown flag profile `{0}`")]
    UnknownFlags(String),
    /// Objects shared between instances failed in another instance's build.
    #[error("{what} failed to build earlier: {reason}")]
    SharedFailed {
        /// `shared primitives`, `valgrind object's primitives`.
        what: &'static str,
        /// That build's reason.
        reason: String,
    },
    /// A system library the instance links (`link "crypto"`) cannot be found.
    #[error("{0}")]
    Library(String),
    /// The instance's sources cannot be listed.
    #[error(transparent)]
    Sources(#[from] crate::sources::SourcesError),
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
    /// Profiles that cannot be summed up (`count`).
    #[error(transparent)]
    Summary(#[from] crate::count::SummaryError),
    /// callgrind left no profile for a counted call.
    #[error("callgrind wrote no profile for call {call} of {of} ({source})")]
    MissingProfile {
        /// 1-based call.
        call: u64,
        /// Calls counted.
        of: u64,
        /// Why the file cannot be read.
        source: crate::safe_fs::FileError,
    },
    /// callgrind left more profiles than calls were counted.
    #[error("callgrind dumped more than {0} profiles: the operation was called outside the counted calls")]
    ExtraProfiles(u64),
    /// memcheck's XML output that cannot be read (`ct`).
    #[error(transparent)]
    Memcheck(#[from] crate::ct::MemcheckError),
    /// The objects cannot be surveyed.
    #[error("survey: {0}")]
    Survey(#[from] crate::survey::SurveyError),
    /// The object the `ct` step checked cannot be scanned for variable-latency instructions.
    #[error("variable-latency scan of {object}: {source}")]
    Latency {
        /// The object, relative to the output folder.
        object: String,
        source: crate::ct::latency::LatencyError,
    },
    /// memcheck left no XML file.
    #[error("memcheck wrote no XML output")]
    NoXml,
    /// memcheck's XML output ends before its final status.
    #[error("memcheck's XML output has no final status (valgrind stopped early)")]
    Unfinished,
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
