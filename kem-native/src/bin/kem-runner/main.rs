//! `kem-runner`: load one built KEM object and run one job, printing one JSON record.
//!
//! ```text
//! kem-runner kat     --lib X.so --api api.h --ns PREFIX --rng nist|hqc --mode single|all
//!                    [--counts N] --out file.rsp
//! kem-runner kat-dec --lib X.so --api api.h --ns PREFIX --rng nist|hqc --in PAIRS --out SS
//! kem-runner time    --lib X.so --api api.h --ns PREFIX --op keygen|enc|dec [--cpu N]
//!                    [--trials 5] [--trial-ns 1000000000] [--min-iters 20] [--samples 101]
//!                    [--rng ctr-drbg|os]
//! kem-runner profile --lib X.so --api api.h --ns PREFIX --op keygen|enc|dec [--cpu N]
//!                    [--iters 20] [--rng ctr-drbg|os]
//! kem-runner serve   --lib X.so --api api.h --ns PREFIX --op keygen|enc|dec [--cpu N]
//!                    [--batch-ns 20000000] [--min-iters 1] [--samples 101] [--rng ctr-drbg|os]
//!                    [--layout Y.so ...] [--gauge YARDSTICK.so --gauge-api api.h]
//!                    [--setup-seed HEX96] [--stack measure|skip] [--batch-iters N]
//! kem-runner count   --lib X.so --api api.h --ns PREFIX --op keygen|enc|dec --rng nist|hqc
//!                    [--iters 20] [--seed HEX96]
//! kem-runner ct      --lib X.so --api api.h --ns PREFIX --op keygen|enc|dec [--runs 3]
//! ```
//!
//! `kem-runner -` reads the job from its first line of stdin instead, a JSON array of the
//! words above (`["time","--lib","X.so",...]`): the engine starts every job that way, so that
//! the command line and environment a KEM can read (`/proc/self/cmdline`) are the same for
//! KAT, timing, profile, count and ct, and the KEM, loaded after the line was read, finds
//! no job name there. `serve` goes on reading its commands from the same stdin.
//!
//! `kat-dec` decapsulates a KAT's ciphertexts from each count's sk and ct alone, in a
//! process that never ran keygen or enc (see `kat_dec.rs`).
//!
//! `ct` runs the operation with its secrets marked for valgrind's memcheck (see
//! `kem_native::ct`); the engine runs it under `valgrind --tool=memcheck`.
//!
//! `count` seeds the KAT generator with a fixed seed (default bytes 0..47, as NIST's KAT),
//! prepares the operation's inputs, turns callgrind's instrumentation on (the engine starts
//! it with `--instr-atstart=no`, so that the preparation's calls are not counted; see
//! `kem_native::callgrind`) and makes `iters` calls of `<ns>crypto_kem_<op>`, each a call of
//! the exported function, so that callgrind can count each call on its own
//! (`--toggle-collect`, `--dump-after`). The runner counts nothing itself.
//!
//! The record goes to the stdout the runner was started with; before it loads the KEM the
//! runner points file descriptor 1 at stderr, so whatever the KEM prints (a debugging
//! `printf`, a forged record from a constructor) lands in the log, not in the record.
//! (Code running in this process can still find the original descriptor and write to it
//! deliberately: the engine re-derives what it can from files — the KAT's `.rsp` — and
//! checks timing records for plausibility.)
//!
//! `serve` stays alive and times one batch per `batch` line on stdin (see
//! `kem_native::serve` for the protocol); its protocol lines go to the same original stdout,
//! so a KEM printing `batch ...` cannot answer for the runner. Its final record is the
//! `time` record, with one trial per batch.
//!
//! Exit 0: success. Exit 1: the KEM misbehaved (the record's `failure` says how; the JSON
//! is still printed). Exit 2: usage or load error (one line on stderr, no JSON). A crash
//! of the KEM kills the process; the parent sees the signal.

use kem_native::drbg::Rng;
use kem_native::error::{rc_check, Exit, KemError, RunnerError, SysError, UsageError};
use kem_native::kat::{run_kat, KatMode};
use kem_native::kem::{self, run_on_big_stack, Buffers, Kem, BIG_STACK_BYTES};
use kem_native::memory::{stack_high_water, status_kib};
use kem_native::output::{
    Calibration, CoreCycles, CountOutput, Memory, Overhead, ProfileOutput, TimeOutput,
};
use kem_native::profile::{profile_op, ProfileApi};
use kem_native::timer;
use kem_native::timing::{prepare, time_op, Op, OpCall, TimeConfig};
use std::fs::File;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

mod args;
mod kat_dec;
mod serve;

use args::{Args, USAGE};

/// Outcome of a job: the JSON text and whether the KEM behaved.
struct Outcome {
    json: String,
    ok: bool,
}

impl Outcome {
    /// The record as JSON, behind `prefix` (`done ` for `serve`); `ok` when `failure` is none.
    fn of<T: serde::Serialize>(
        prefix: &str,
        record: &T,
        failure: &Option<String>,
    ) -> Result<Outcome, RunnerError> {
        Ok(Outcome {
            json: format!("{prefix}{}", to_json(record)?),
            ok: failure.is_none(),
        })
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String, SysError> {
    Ok(serde_json::to_string(v)?)
}

/// Pin the calling thread to `cpu`, or to the CPU it is on when none is given.
fn pin(cpu: Option<usize>) -> (Option<usize>, Option<String>) {
    let target = match cpu.or_else(timer::current_cpu) {
        Some(c) => c,
        None => return (None, Some(SysError::NoCurrentCpu.to_string())),
    };
    match timer::pin_to_cpu(target) {
        Ok(()) => (Some(target), None),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// Stack bytes of one call of the operation: the depth reached by the real call minus the
/// depth reached by the empty twin through the same path (the runner's own frames).
fn measure_stack(op: Op, call: &OpCall) -> Result<(u64, u64), KemError> {
    let mut rc = 0;
    let mut empty = || rc = call.once_empty();
    let base = stack_high_water(BIG_STACK_BYTES, &mut empty).map_err(KemError::Stack)?;
    let mut one = || rc = call.once();
    let used = stack_high_water(BIG_STACK_BYTES, &mut one).map_err(KemError::Stack)?;
    rc_check(op.c_name(), rc).map_err(|e| e.at("on the painted stack"))?;
    Ok((used.used.saturating_sub(base.used), used.painted))
}

/// The last phase of `time` and `serve`: peak RSS, the stack of one call (none without
/// `call`: `serve --stack skip`), the guards.
fn finish_memory(op: Op, call: Option<&OpCall>, bufs: &Buffers, record: &mut TimeOutput) {
    record.memory.peak_rss_kib = status_kib("VmHWM");
    let Some(call) = call else {
        if let Err(e) = bufs.check_all(op.c_name()) {
            record.failure = Some(e.to_string());
        }
        return;
    };
    let stack = measure_stack(op, call).and_then(|(used, painted)| {
        record.memory.stack_bytes = Some(used);
        record.memory.stack_painted_bytes = painted;
        bufs.check_all(op.c_name())
            .map_err(|e| e.during("on the painted stack"))
    });
    if let Err(e) = stack {
        record.failure = Some(e.to_string());
    }
}

/// The start of `time` and `serve` on the operation thread: pin it, install the random
/// source, allocate the buffers; the record before anything is timed, with the pinning
/// outcome and the RSS after the buffers are allocated.
fn time_start(
    op: Op,
    kem: &Kem,
    cpu: Option<usize>,
    (rng, rng_name): (Rng, &str),
    calibration: Calibration,
) -> Result<(TimeOutput, Buffers), RunnerError> {
    let (pinned_cpu, pin_error) = pin(cpu);
    kem::set_rng(rng);
    let bufs = Buffers::new(&kem.sizes)?;
    let record = TimeOutput {
        op: op.name().into(),
        sizes: kem.sizes.clone(),
        pinned_cpu,
        pin_error,
        counter: timer::counter_name().into(),
        rng: rng_name.into(),
        core_cycles: CoreCycles::Unavailable {
            reason: "not measured".into(),
        },
        calibration,
        warmup_iters: 0,
        layouts: Vec::new(),
        trials: Vec::new(),
        samples: Vec::new(),
        overhead: Overhead::default(),
        memory: Memory {
            baseline_rss_kib: status_kib("VmRSS"),
            peak_rss_kib: None,
            stack_bytes: None,
            stack_painted_bytes: 0,
        },
        failure: None,
    };
    Ok((record, bufs))
}

fn job_kat(args: &Args) -> Result<Outcome, RunnerError> {
    let rng = args.kat_rng()?;
    let mode = KatMode::parse(args.get("mode")?)?;
    let counts: u32 = args.count("counts", mode.default_counts())?;
    let out = PathBuf::from(args.get("out")?);
    let kem = args.load()?;
    let result = run_on_big_stack(move || run_kat(&kem, rng, mode, counts, &out))??;
    Outcome::of("", &result, &result.failure)
}

fn job_time(args: &Args) -> Result<Outcome, RunnerError> {
    let op = args.op()?;
    let cpu: Option<usize> = args.opt_num("cpu")?;
    let cfg = TimeConfig {
        trials: args.count("trials", 5)?,
        trial_ns: args.num("trial-ns", 1_000_000_000)?,
        min_iters: args.num("min-iters", 20)?,
        samples: args.num("samples", 101)?,
    };
    let rng = args.timing_rng()?;
    let kem = args.load()?;
    let out = run_on_big_stack(move || -> Result<TimeOutput, RunnerError> {
        let calibration = Calibration::unmeasured(cfg.trial_ns, cfg.min_iters);
        let (mut record, mut bufs) = time_start(op, &kem, cpu, rng, calibration)?;
        if let Err(e) = prepare(op, &kem, &mut bufs) {
            record.failure = Some(e.to_string());
            return Ok(record);
        }
        let call = OpCall::new(op, &kem, &mut bufs);
        let timed = time_op(op, &call, &bufs, &cfg);
        record.core_cycles = timed.core_cycles;
        record.calibration = timed.calibration;
        record.warmup_iters = timed.warmup_iters;
        record.trials = timed.trials;
        record.samples = timed.samples;
        record.overhead = timed.overhead;
        record.failure = timed.failure;
        if record.failure.is_none() {
            finish_memory(op, Some(&call), &bufs, &mut record);
        } else {
            record.memory.peak_rss_kib = status_kib("VmHWM");
        }
        Ok(record)
    })??;
    Outcome::of("", &out, &out.failure)
}

fn job_ct(args: &Args) -> Result<Outcome, RunnerError> {
    let op = args.op()?;
    let runs: u32 = args.count("runs", 3)?;
    let kem = args.load()?;
    let out = run_on_big_stack(move || kem_native::ct::run_ct(&kem, op, runs))??;
    Outcome::of("", &out, &out.failure)
}

fn job_profile(args: &Args) -> Result<Outcome, RunnerError> {
    let op = args.op()?;
    let cpu: Option<usize> = args.opt_num("cpu")?;
    let iters: u64 = args.num("iters", 20)?;
    let kem = args.load()?;
    let api = ProfileApi::resolve(&kem)?;
    let (rng, _) = args.timing_rng()?;
    let out = run_on_big_stack(move || -> Result<_, RunnerError> {
        let _ = pin(cpu);
        kem::set_rng(rng);
        let mut bufs = Buffers::new(&kem.sizes)?;
        let prepared = prepare(op, &kem, &mut bufs);
        let call = OpCall::new(op, &kem, &mut bufs);
        let (mut out, rc) = match prepared {
            Ok(()) => profile_op(&api, op, &call, iters),
            // Inputs are missing: do not call the operation at all.
            Err(e) => (
                ProfileOutput {
                    op: op.name().into(),
                    iters: 0,
                    total_cycles: 0,
                    wrapper_overhead_cycles: 0.0,
                    symbols: Vec::new(),
                    failure: Some(e.to_string()),
                },
                0,
            ),
        };
        if out.failure.is_none() {
            let checked = if rc != 0 {
                Err(KemError::ReturnedOr {
                    func: op.c_name(),
                    rc_or: rc,
                })
            } else {
                bufs.check_all(op.c_name())
            };
            out.failure = checked.err().map(|e| e.to_string());
        }
        Ok(out)
    })??;
    Outcome::of("", &out, &out.failure)
}

/// The default seed of `count`: bytes 0..47, the entropy input of NIST's KAT generator.
fn default_seed() -> [u8; 48] {
    std::array::from_fn(|i| i as u8)
}

fn job_count(args: &Args) -> Result<Outcome, RunnerError> {
    let op = args.op()?;
    let kind = args.kat_rng()?;
    let iters: u64 = args.count("iters", 20)?;
    let seed = match args.values.get("seed") {
        None => default_seed(),
        Some(h) => hex::decode(h)
            .ok()
            .and_then(|v| <[u8; 48]>::try_from(v).ok())
            .ok_or_else(|| UsageError::Seed(h.clone()))?,
    };
    let kem = args.load()?;
    let start = kem_native::callgrind::Start::of(&kem)?;
    let out = run_on_big_stack(move || -> Result<CountOutput, RunnerError> {
        kem::set_rng(kind.seeded(&seed));
        let mut bufs = Buffers::new(&kem.sizes)?;
        let mut record = CountOutput {
            op: op.name().into(),
            iters,
            rng: kind.name().into(),
            seed: hex::encode(seed),
            failure: None,
        };
        let calls = prepare(op, &kem, &mut bufs).and_then(|()| {
            // callgrind (started with `--instr-atstart=no`) sees nothing of the
            // preparation: its calls would otherwise be counted in the first profile.
            start.now();
            let call = OpCall::new(op, &kem, &mut bufs);
            for i in 0..iters {
                rc_check(op.c_name(), call.once())
                    .map_err(|e| e.at(format!("in call {}", i + 1)))?;
            }
            bufs.check_all(op.c_name())
        });
        record.failure = calls.err().map(|e| e.to_string());
        Ok(record)
    })??;
    Outcome::of("", &out, &out.failure)
}

/// Run the job `argv` names; its record (if any) goes to `record`.
fn run(argv: &[String], record: &File) -> Result<Outcome, RunnerError> {
    let args = Args::parse(argv)?;
    match args.job {
        "kat" => job_kat(&args),
        "kat-dec" => kat_dec::job_kat_dec(&args),
        "time" => job_time(&args),
        "serve" => serve::job_serve(&args, record),
        "count" => job_count(&args),
        "ct" => job_ct(&args),
        _ => job_profile(&args),
    }
}

/// The job's words: the command line's, or with `-` alone, the first line of stdin's (read
/// through the process's one buffered stdin, so that `serve` reads on from the line after).
fn job_words() -> Result<Vec<String>, RunnerError> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv != ["-"] {
        return Ok(argv);
    }
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| UsageError::JobLine(e.to_string()))?;
    serde_json::from_str(&line).map_err(|e| UsageError::JobLine(e.to_string()).into())
}

fn main() -> ExitCode {
    let argv = std::env::args().skip(1).collect::<Vec<_>>();
    if argv.first().is_some_and(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    // The one place where how a job ended becomes the exit code.
    let exit = match kem_native::sys::take_stdout()
        .map_err(|e| RunnerError::from(SysError::SetupChannel(e)))
        .and_then(|mut record| {
            let outcome = run(&job_words()?, &record)?;
            writeln!(record, "{}", outcome.json).map_err(SysError::WriteRecord)?;
            Ok(outcome)
        }) {
        Ok(Outcome { ok: true, .. }) => Exit::Ok,
        Ok(Outcome { ok: false, .. }) => Exit::KemMisbehaved,
        Err(e) => {
            eprintln!("kem-runner: {e}");
            e.exit()
        }
    };
    ExitCode::from(exit.code())
}
