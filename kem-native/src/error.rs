//! The errors of kem-native, one enum per seam, and the runner's exit code per kind.
//!
//! * [`ApiError`]: an `api.h` whose sizes cannot be read.
//! * [`LoadError`]: the object, its `api.h` or its symbols cannot be used (no KEM call made).
//! * [`KemError`]: a KEM call misbehaved (nonzero return, a guard overwritten, shared
//!   secrets that differ); its text is a record's `failure`.
//! * [`RandomError`]: the random source behind `randombytes` failed.
//! * [`SysError`]: the operating system refused what the runner needs (a thread, a painted
//!   stack, a CPU, a file, the record channel).
//! * [`UsageError`]: the runner's command line or the `serve` protocol.
//! * [`RunnerError`]: any error that ends a `kem-runner` job; [`Exit`] maps how a job ended
//!   to its exit code, in one place.

use std::ffi::c_int;
use std::io;

/// How a `kem-runner` job ended; [`Exit::code`] is the process exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The job ran and the KEM behaved: exit 0, the record on the record channel.
    Ok,
    /// The KEM misbehaved: exit 1, the record (with its `failure`) on the record channel.
    KemMisbehaved,
    /// Usage, load or system error: exit 2, one line on stderr, no record.
    Error,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::KemMisbehaved => 1,
            Exit::Error => 2,
        }
    }
}

/// An `api.h` without the sizes the runner needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The define is there but its value is not a number.
    #[error(
        "api.h: `{0}` is not a plain decimal number (only `#define {0} <digits>` is understood)"
    )]
    NotANumber(String),
    /// Neither the namespaced nor the plain define is there.
    #[error("api.h: missing `#define {namespace}{name}` (nor `{name}`)")]
    Missing {
        /// The symbol prefix asked for.
        namespace: String,
        /// The plain define (`CRYPTO_BYTES`).
        name: &'static str,
    },
}

/// The built object cannot be used: nothing of the KEM has run.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// `api.h` cannot be read.
    #[error("cannot read `{path}`: {source}")]
    ReadApi {
        /// The path given.
        path: String,
        /// Why.
        source: io::Error,
    },
    /// `api.h` lacks a size.
    #[error("{path}: {source}")]
    Api {
        /// The path given.
        path: String,
        /// What is missing.
        source: ApiError,
    },
    /// A declared size larger than the address space.
    #[error("{define} = {n} does not fit in memory")]
    TooLarge {
        /// The define (`CRYPTO_PUBLICKEYBYTES`).
        define: &'static str,
        /// Its value.
        n: u64,
    },
    /// No file at the path.
    #[error("shared object `{0}` does not exist")]
    NoObject(String),
    /// A path or symbol name with a NUL byte in it.
    #[error("{what} `{name}` contains a NUL byte")]
    Nul {
        /// `path` or `symbol name`.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// `dlopen` failed.
    #[error("cannot load `{path}`: {reason}")]
    Dlopen {
        /// The object.
        path: String,
        /// `dlerror()`'s text.
        reason: String,
    },
    /// A symbol the job needs is not exported.
    #[error("symbol `{name}` not found in `{path}`")]
    MissingSymbol {
        /// The symbol.
        name: String,
        /// The object.
        path: String,
    },
    /// The marking functions of the constant-time check are missing.
    #[error("{0}: the object was not built for the constant-time check (the build's valgrind object links the marking functions)")]
    NotBuiltForCt(Box<LoadError>),
    /// The callgrind request of the `count` job is missing.
    #[error("{0}: the object was not built for the count step (the build's valgrind object links the callgrind request)")]
    NotBuiltForCount(Box<LoadError>),
}

/// The random source behind the KEM's `randombytes` failed.
#[derive(Debug, thiserror::Error)]
pub enum RandomError {
    /// No source was installed.
    #[error("no random source installed")]
    NotInstalled,
    /// Both OS sources failed.
    #[error("getrandom failed ({getrandom}) and /dev/urandom failed ({urandom})")]
    Os {
        /// The `getrandom(2)` error.
        getrandom: io::Error,
        /// The `/dev/urandom` error.
        urandom: io::Error,
    },
}

/// A KEM call misbehaved. The text is what a record's `failure` says.
#[derive(Debug, thiserror::Error)]
pub enum KemError {
    /// A call returned nonzero.
    #[error("{func} returned {rc}")]
    Returned {
        /// The C function.
        func: &'static str,
        /// Its return code.
        rc: c_int,
    },
    /// Calls of a series returned nonzero (the OR of their return codes).
    #[error("{func} returned nonzero (OR of return codes = {rc_or})")]
    ReturnedOr {
        /// The C function.
        func: &'static str,
        /// OR of the return codes.
        rc_or: c_int,
    },
    /// A call among many returned nonzero (the OR of their return codes).
    #[error("{func} returned nonzero during {phase} (OR of return codes = {rc_or})")]
    ReturnedDuring {
        /// The C function.
        func: &'static str,
        /// `warm-up`, `trial 3`, ...
        phase: String,
        /// OR of the return codes.
        rc_or: c_int,
    },
    /// A call wrote past the end of a buffer.
    #[error("{func} wrote past the declared {what} size ({define} = {len}): {extent}")]
    Overrun {
        /// The C function.
        func: String,
        /// `ciphertext`.
        what: &'static str,
        /// `CRYPTO_CIPHERTEXTBYTES`.
        define: &'static str,
        /// Declared size.
        len: usize,
        /// `16 bytes beyond it`.
        extent: String,
    },
    /// A call wrote before the start of a buffer.
    #[error("{func} wrote before the start of the {what} buffer ({define} = {len}): {before} bytes before it")]
    Underrun {
        /// The C function.
        func: String,
        /// `shared secret`.
        what: &'static str,
        /// `CRYPTO_BYTES`.
        define: &'static str,
        /// Declared size.
        len: usize,
        /// How far before the start the first changed byte is.
        before: usize,
    },
    /// enc and dec disagree (KAT).
    #[error("shared secrets differ (enc {enc}, dec {dec})")]
    SecretsDiffer {
        /// Upper-case hex of enc's shared secret.
        enc: String,
        /// Upper-case hex of dec's.
        dec: String,
    },
    /// enc and dec disagree (constant-time check).
    #[error("dec(enc) gave a different shared secret")]
    DecMismatch,
    /// The random source failed under the KEM.
    #[error(transparent)]
    Random(#[from] RandomError),
    /// The painted-stack measurement could not run.
    #[error("stack measurement: {0}")]
    Stack(SysError),
    /// An error with where it happened: `{source} ({context})`.
    #[error("{source} ({context})")]
    During {
        /// The error.
        source: Box<KemError>,
        /// `during the trials`, `on the painted stack`.
        context: String,
    },
    /// An error while preparing an operation's inputs.
    #[error("{source} while preparing {op} inputs")]
    Preparing {
        /// The error.
        source: Box<KemError>,
        /// `enc` or `dec`.
        op: &'static str,
    },
    /// An error in one KAT count, one call of a series, on the painted stack.
    #[error("{source} {at}")]
    At {
        /// The error.
        source: Box<KemError>,
        /// `in count 3`, `in call 7`, `on the painted stack`.
        at: String,
    },
}

impl KemError {
    /// This error with where it happened (`... (during the trials)`).
    pub fn during(self, context: impl Into<String>) -> KemError {
        KemError::During {
            source: Box::new(self),
            context: context.into(),
        }
    }

    /// This error with the count or call it happened in (`... in count 3`, `at` is
    /// `in count 3`).
    pub fn at(self, at: impl Into<String>) -> KemError {
        KemError::At {
            source: Box::new(self),
            at: at.into(),
        }
    }
}

/// `Err(KemError::Returned)` for a nonzero return code.
pub fn rc_check(func: &'static str, rc: c_int) -> Result<(), KemError> {
    if rc == 0 {
        Ok(())
    } else {
        Err(KemError::Returned { func, rc })
    }
}

/// The operating system refused something the runner needs.
#[derive(Debug, thiserror::Error)]
pub enum SysError {
    /// The big-stack thread cannot start.
    #[error("cannot start a thread with a {mib} MiB stack: {source}")]
    Thread {
        /// Stack size.
        mib: usize,
        /// Why.
        source: io::Error,
    },
    /// The operation thread panicked.
    #[error("the operation thread panicked: {0}")]
    Panicked(String),
    /// A painted-stack system call failed (`mmap of a 67108864-byte stack: ...`).
    #[error("{call}: {source}")]
    Call {
        /// The call and its argument, in words.
        call: String,
        /// Why.
        source: io::Error,
    },
    /// A pthread call returned an error number.
    #[error("{call}: error {rc}")]
    Pthread {
        /// The call.
        call: &'static str,
        /// Its return value.
        rc: c_int,
    },
    /// The measured call panicked on the painted stack.
    #[error("the measured call panicked on the painted stack")]
    PaintedPanic,
    /// The painted-stack thread ended without a result.
    #[error("the painted-stack thread reported nothing")]
    PaintedNothing,
    /// `sched_getcpu` failed and no CPU was asked for.
    #[error("sched_getcpu failed and no --cpu was given")]
    NoCurrentCpu,
    /// `sched_setaffinity` failed.
    #[error("sched_setaffinity(cpu {cpu}): {source}")]
    Pin {
        /// The CPU.
        cpu: usize,
        /// Why.
        source: io::Error,
    },
    /// No user-space cycle counter.
    #[error("perf_event_open: {source} (perf_event_paranoid={paranoid})")]
    PerfOpen {
        /// Why.
        source: io::Error,
        /// `/proc/sys/kernel/perf_event_paranoid`, or `unknown`.
        paranoid: String,
    },
    /// The cycle counter opens but never counts.
    #[error("perf_event_open: the cycle counter opened but counted nothing (virtualized PMU?)")]
    PerfSilent,
    /// A file cannot be created.
    #[error("cannot create `{path}`: {source}")]
    Create {
        /// The file.
        path: String,
        /// Why.
        source: io::Error,
    },
    /// A file cannot be read.
    #[error("cannot read `{path}`: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: io::Error,
    },
    /// A file cannot be written.
    #[error("cannot write `{path}`: {source}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        source: io::Error,
    },
    /// The random source failed outside the KEM (seeding the timing generator).
    #[error(transparent)]
    Random(#[from] RandomError),
    /// A record cannot be serialized.
    #[error("cannot serialize the record: {0}")]
    Serialize(#[from] serde_json::Error),
    /// The record channel cannot be duplicated.
    #[error("cannot share the record channel: {0}")]
    ShareChannel(io::Error),
    /// The record channel cannot be written.
    #[error("cannot write to the record channel: {0}")]
    WriteChannel(io::Error),
    /// The record channel cannot be set up.
    #[error("cannot set up the record channel: {0}")]
    SetupChannel(io::Error),
    /// The record cannot be written.
    #[error("cannot write the record: {0}")]
    WriteRecord(io::Error),
    /// Standard input cannot be read (`serve`).
    #[error("{0}")]
    ReadStdin(io::Error),
}

/// The runner's command line, or the engine's side of the `serve` protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsageError {
    /// No job word.
    #[error("missing job (kat, kat-dec, time, profile, serve, count or ct)")]
    MissingJob,
    /// `-` and no job line (a JSON array of the job's words) on stdin.
    #[error("`-`: no job on stdin ({0}); expected one line, a JSON array of the job's words")]
    JobLine(String),
    /// An unknown job word.
    #[error("unknown job `{0}` (expected kat, kat-dec, time, profile, serve, count or ct)")]
    UnknownJob(String),
    /// A word that is not `--option`.
    #[error("unexpected argument `{0}`")]
    Unexpected(String),
    /// An option the job does not take.
    #[error("unknown option `--{key}` for `{job}`")]
    UnknownOption {
        /// The option without dashes.
        key: String,
        /// The job.
        job: String,
    },
    /// An option at the end without its value.
    #[error("option `--{0}` needs a value")]
    NoValue(String),
    /// An option given twice.
    #[error("option `--{0}` given twice")]
    Twice(String),
    /// A required option is missing.
    #[error("`{job}` needs `--{key}`")]
    Missing {
        /// The job.
        job: &'static str,
        /// The option.
        key: &'static str,
    },
    /// A number option that is not one.
    #[error("`--{key} {value}` is not a valid non-negative integer")]
    NotANumber {
        /// The option.
        key: &'static str,
        /// What was given.
        value: String,
    },
    /// A count option given as 0.
    #[error("`--{0}` must be at least 1")]
    Zero(&'static str),
    /// A `--seed` that is not 48 bytes of hex.
    #[error("`--seed {0}` is not 48 bytes of hex")]
    Seed(String),
    /// An unknown `--op`.
    #[error("unknown op `{0}` (expected keygen, enc or dec)")]
    Op(String),
    /// An unknown `--mode` of `kat`.
    #[error("unknown KAT mode `{0}` (expected `single` or `all`)")]
    KatMode(String),
    /// An unknown KAT generator.
    #[error("unknown rng `{0}` (expected `nist` or `hqc`)")]
    KatRng(String),
    /// An unknown generator for timing.
    #[error("unknown rng `{0}` for timing (expected ctr-drbg or os)")]
    TimingRng(String),
    /// An unknown `--stack` (serve).
    #[error("unknown `--stack {0}` (expected measure or skip)")]
    Stack(String),
    /// `kat-dec`: an input that is not whole `sk || ct` pairs.
    #[error("`{path}` holds {len} bytes, not a whole number of sk || ct pairs of {pair} bytes")]
    Pairs {
        /// The input file.
        path: String,
        /// Its length.
        len: u64,
        /// Bytes of one pair.
        pair: u64,
    },
    /// `serve`: stdin ended before `finish`.
    #[error("stdin closed before `finish`")]
    StdinClosed,
    /// `serve`: a line that is not a command.
    #[error("unknown command `{0}` (expected batch, replay, feed or finish)")]
    Command(String),
    /// `serve --setup-seed`: not 96 hex digits.
    #[error("--setup-seed `{0}` is not 96 hex digits")]
    SetupSeed(String),
}

/// Why a `kem-runner` job ended without a record: all exit 2 ([`Exit::Error`]).
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// Bad command line or protocol.
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// The object cannot be used.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The system refused.
    #[error(transparent)]
    Sys(#[from] SysError),
}

impl From<RandomError> for RunnerError {
    fn from(e: RandomError) -> Self {
        RunnerError::Sys(e.into())
    }
}

impl From<serde_json::Error> for RunnerError {
    fn from(e: serde_json::Error) -> Self {
        RunnerError::Sys(e.into())
    }
}

impl RunnerError {
    /// How the job ended (every kind ends the job without a record).
    pub fn exit(&self) -> Exit {
        match self {
            RunnerError::Usage(_) | RunnerError::Load(_) | RunnerError::Sys(_) => Exit::Error,
        }
    }
}
