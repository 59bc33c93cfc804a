//! `kem-runner`: load one built KEM object and run one job, printing one JSON record.
//!
//! ```text
//! kem-runner kat     --lib X.so --api api.h --ns PREFIX --rng nist|hqc --mode single|all
//!                    [--counts N] --out file.rsp
//! kem-runner time    --lib X.so --api api.h --ns PREFIX --op keygen|enc|dec [--cpu N]
//!                    [--trials 5] [--trial-ns 1000000000] [--min-iters 20] [--samples 101]
//!                    [--rng ctr-drbg|os]
//! kem-runner profile --lib X.so --api api.h --ns PREFIX --op keygen|enc|dec [--cpu N]
//!                    [--iters 20] [--rng ctr-drbg|os]
//! kem-runner serve   --lib X.so --api api.h --ns PREFIX --op keygen|enc|dec [--cpu N]
//!                    [--batch-ns 20000000] [--min-iters 1] [--samples 101] [--rng ctr-drbg|os]
//! kem-runner count   --lib X.so --api api.h --ns PREFIX --op keygen|enc|dec --rng nist|hqc
//!                    [--iters 20] [--seed HEX96]
//! kem-runner ct      --lib X.so --api api.h --ns PREFIX --op keygen|enc|dec [--runs 3]
//! ```
//!
//! `ct` runs the operation with its secrets marked for valgrind's memcheck (see
//! `kem_native::ct`); the engine runs it under `valgrind --tool=memcheck`.
//!
//! `count` seeds the KAT generator with a fixed seed (default bytes 0..47, as NIST's KAT),
//! prepares the operation's inputs and makes `iters` calls of `<ns>crypto_kem_<op>`, each a
//! call of the exported function, so that callgrind can count each call on its own
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

use kem_native::api::parse_api_h;
use kem_native::drbg::{CtrDrbg, KatRngKind, OsRng, Rng};
use kem_native::kat::{run_kat, KatMode};
use kem_native::kem::{self, run_on_big_stack, Buffers, Kem, BIG_STACK_BYTES};
use kem_native::memory::{stack_high_water, status_kib};
use kem_native::output::{CountOutput, Memory, ProfileOutput, TimeOutput};
use kem_native::profile::{profile_op, ProfileApi};
use kem_native::serve::{self, BatchReply, Ready, SchedSnapshot};
use kem_native::timer;
use kem_native::timing::{measure_overhead, prepare, time_op, Op, OpCall, TimeConfig};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str =
    "usage: kem-runner kat|time|profile|serve|count|ct --lib X.so --api api.h --ns PREFIX [options] \
(kat: --rng nist|hqc --mode single|all [--counts N] --out F.rsp; \
time: --op keygen|enc|dec [--cpu N] [--trials N] [--trial-ns NS] [--min-iters N] [--samples N] [--rng ctr-drbg|os]; \
profile: --op keygen|enc|dec [--cpu N] [--iters N] [--rng ctr-drbg|os]; \
serve: --op keygen|enc|dec [--cpu N] [--batch-ns NS] [--min-iters N] [--samples N] [--rng ctr-drbg|os]; \
count: --op keygen|enc|dec --rng nist|hqc [--iters N] [--seed HEX96]; \
ct: --op keygen|enc|dec [--runs N])";

/// Parsed `--key value` pairs of one subcommand.
struct Args {
    job: String,
    values: HashMap<String, String>,
}

impl Args {
    fn parse(
        argv: &[String],
        allowed: impl Fn(&str) -> &'static [&'static str],
    ) -> Result<Args, String> {
        let job = argv
            .first()
            .ok_or("missing job (kat, time, profile, serve, count or ct)")?
            .clone();
        let known = allowed(&job);
        if known.is_empty() {
            return Err(format!(
                "unknown job `{job}` (expected kat, time, profile, serve, count or ct)"
            ));
        }
        let mut values = HashMap::new();
        let mut it = argv[1..].iter();
        while let Some(flag) = it.next() {
            let key = flag
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument `{flag}`"))?;
            if !known.contains(&key) {
                return Err(format!("unknown option `--{key}` for `{job}`"));
            }
            let value = it
                .next()
                .ok_or_else(|| format!("option `--{key}` needs a value"))?;
            if values.insert(key.to_string(), value.clone()).is_some() {
                return Err(format!("option `--{key}` given twice"));
            }
        }
        Ok(Args { job, values })
    }

    fn get(&self, key: &str) -> Result<&str, String> {
        self.values
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| format!("`{}` needs `--{key}`", self.job))
    }

    fn num<T: std::str::FromStr>(&self, key: &str, default: Option<T>) -> Result<T, String> {
        match self.values.get(key) {
            Some(v) => v
                .parse()
                .map_err(|_| format!("`--{key} {v}` is not a valid non-negative integer")),
            None => default.ok_or_else(|| format!("`{}` needs `--{key}`", self.job)),
        }
    }

    fn opt_num<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>, String> {
        self.values
            .get(key)
            .map(|v| {
                v.parse()
                    .map_err(|_| format!("`--{key} {v}` is not a valid non-negative integer"))
            })
            .transpose()
    }
}

fn allowed(job: &str) -> &'static [&'static str] {
    match job {
        "kat" => &["lib", "api", "ns", "rng", "mode", "counts", "out"],
        "time" => &[
            "lib",
            "api",
            "ns",
            "op",
            "cpu",
            "trials",
            "trial-ns",
            "min-iters",
            "samples",
            "rng",
        ],
        "profile" => &["lib", "api", "ns", "op", "cpu", "iters", "rng"],
        "serve" => &[
            "lib",
            "api",
            "ns",
            "op",
            "cpu",
            "batch-ns",
            "min-iters",
            "samples",
            "rng",
        ],
        "count" => &["lib", "api", "ns", "op", "rng", "iters", "seed"],
        "ct" => &["lib", "api", "ns", "op", "runs"],
        _ => &[],
    }
}

/// Outcome of a job: the JSON text and whether the KEM behaved.
struct Outcome {
    json: String,
    ok: bool,
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String, String> {
    serde_json::to_string(v).map_err(|e| format!("cannot serialize the record: {e}"))
}

fn load(args: &Args) -> Result<Kem, String> {
    let api_path = args.get("api")?;
    let text =
        std::fs::read_to_string(api_path).map_err(|e| format!("cannot read `{api_path}`: {e}"))?;
    let ns = args.get("ns")?;
    let sizes = parse_api_h(&text, ns).map_err(|e| format!("{api_path}: {e}"))?;
    Kem::load(Path::new(args.get("lib")?), ns, sizes)
}

/// Pin the calling thread to `cpu`, or to the CPU it is on when none is given.
fn pin(cpu: Option<usize>) -> (Option<usize>, Option<String>) {
    let target = match cpu.or_else(timer::current_cpu) {
        Some(c) => c,
        None => {
            return (
                None,
                Some("sched_getcpu failed and no --cpu was given".into()),
            )
        }
    };
    match timer::pin_to_cpu(target) {
        Ok(()) => (Some(target), None),
        Err(e) => (None, Some(e)),
    }
}

/// The random source for timing and profiling (`--rng`): by default the NIST CTR_DRBG
/// seeded from the OS, so no system call happens inside a timed region; `os` calls
/// getrandom on every `randombytes`.
fn timing_rng(args: &Args) -> Result<(Rng, &'static str), String> {
    match args.values.get("rng").map(String::as_str) {
        None | Some("ctr-drbg") => {
            let mut seed = [0u8; 48];
            OsRng.try_fill(&mut seed)?;
            Ok((Rng::Nist(Box::new(CtrDrbg::new(&seed, None))), "ctr-drbg"))
        }
        Some("os") => Ok((Rng::Os(OsRng), "os")),
        Some(other) => Err(format!(
            "unknown rng `{other}` for timing (expected ctr-drbg or os)"
        )),
    }
}

/// Stack bytes of one call of the operation: the depth reached by the real call minus the
/// depth reached by the empty twin through the same path (the runner's own frames).
fn measure_stack(op: Op, call: &OpCall) -> Result<(u64, u64), String> {
    let mut rc = 0;
    let mut empty = || rc = call.once_empty();
    let base = stack_high_water(BIG_STACK_BYTES, &mut empty)
        .map_err(|e| format!("stack measurement: {e}"))?;
    let mut one = || rc = call.once();
    let used = stack_high_water(BIG_STACK_BYTES, &mut one)
        .map_err(|e| format!("stack measurement: {e}"))?;
    if rc != 0 {
        return Err(format!(
            "{} returned {rc} on the painted stack",
            op.c_name()
        ));
    }
    Ok((used.used.saturating_sub(base.used), used.painted))
}

fn job_kat(args: &Args) -> Result<Outcome, String> {
    let rng = KatRngKind::parse(args.get("rng")?)?;
    let mode = KatMode::parse(args.get("mode")?)?;
    let counts: u32 = args.num("counts", Some(mode.default_counts()))?;
    if counts == 0 {
        return Err("`--counts` must be at least 1".into());
    }
    let out = PathBuf::from(args.get("out")?);
    let kem = load(args)?;
    let result = run_on_big_stack(move || run_kat(&kem, rng, mode, counts, &out))??;
    Ok(Outcome {
        ok: result.failure.is_none(),
        json: to_json(&result)?,
    })
}

fn job_time(args: &Args) -> Result<Outcome, String> {
    let op = Op::parse(args.get("op")?)?;
    let cpu: Option<usize> = args.opt_num("cpu")?;
    let cfg = TimeConfig {
        trials: args.num("trials", Some(5))?,
        trial_ns: args.num("trial-ns", Some(1_000_000_000))?,
        min_iters: args.num("min-iters", Some(20))?,
        samples: args.num("samples", Some(101))?,
    };
    if cfg.trials == 0 {
        return Err("`--trials` must be at least 1".into());
    }
    let (rng, rng_name) = timing_rng(args)?;
    let kem = load(args)?;
    let out = run_on_big_stack(move || -> Result<TimeOutput, String> {
        let (pinned_cpu, pin_error) = pin(cpu);
        kem::set_rng(rng);
        let mut bufs = Buffers::new(&kem.sizes)?;
        let baseline_rss_kib = status_kib("VmRSS");
        let mut memory = Memory {
            baseline_rss_kib,
            peak_rss_kib: None,
            stack_bytes: None,
            stack_painted_bytes: 0,
        };
        let mut record = TimeOutput {
            op: op.name().into(),
            sizes: kem.sizes.clone(),
            pinned_cpu,
            pin_error,
            counter: timer::counter_name().into(),
            rng: rng_name.into(),
            core_cycles: kem_native::output::CoreCycles::Unavailable {
                reason: "not measured".into(),
            },
            calibration: kem_native::output::Calibration {
                target_trial_ns: cfg.trial_ns,
                batch_iters: 0,
                batch_ns: 0,
                batches_ns: Vec::new(),
                iters: 0,
                min_iters: cfg.min_iters,
            },
            warmup_iters: 0,
            trials: Vec::new(),
            samples: Vec::new(),
            overhead: kem_native::output::Overhead {
                cycles_per_call: 0.0,
                ns_per_call: 0.0,
                single_call_cycles: 0.0,
            },
            memory: memory.clone(),
            failure: None,
        };
        if let Err(e) = prepare(op, &kem, &mut bufs) {
            record.failure = Some(e);
            return Ok(record);
        }
        let call = OpCall::new(op, &kem, &mut bufs);
        let timed = time_op(op, &call, &bufs, &cfg);
        memory.peak_rss_kib = status_kib("VmHWM");
        record.core_cycles = timed.core_cycles;
        record.calibration = timed.calibration;
        record.warmup_iters = timed.warmup_iters;
        record.trials = timed.trials;
        record.samples = timed.samples;
        record.overhead = timed.overhead;
        record.failure = timed.failure;
        if record.failure.is_none() {
            match measure_stack(op, &call) {
                Ok((used, painted)) => {
                    memory.stack_bytes = Some(used);
                    memory.stack_painted_bytes = painted;
                }
                Err(e) => record.failure = Some(e),
            }
            if record.failure.is_none() {
                if let Err(e) = bufs.check_all(op.c_name()) {
                    record.failure = Some(format!("{e} (on the painted stack)"));
                }
            }
        }
        record.memory = memory;
        Ok(record)
    })??;
    Ok(Outcome {
        ok: out.failure.is_none(),
        json: to_json(&out)?,
    })
}

/// Write one protocol line on the record channel (the original stdout, see the module doc)
/// as one buffer.
fn say(channel: &mut File, word: &str, json: &str) -> Result<(), String> {
    channel
        .write_all(format!("{word} {json}\n").as_bytes())
        .map_err(|e| format!("cannot write to the record channel: {e}"))
}

/// `serve`: the protocol lines go to `channel`, the record channel; whatever the KEM writes
/// to file descriptor 1 lands on stderr.
fn job_serve(args: &Args, channel: &File) -> Result<Outcome, String> {
    let op = Op::parse(args.get("op")?)?;
    let cpu: Option<usize> = args.opt_num("cpu")?;
    let batch_ns: u64 = args.num("batch-ns", Some(20_000_000))?;
    let min_iters: u64 = args.num("min-iters", Some(1))?;
    let samples: u32 = args.num("samples", Some(101))?;
    let (rng, rng_name) = timing_rng(args)?;
    let mut channel = channel
        .try_clone()
        .map_err(|e| format!("cannot share the record channel: {e}"))?;
    let kem = load(args)?;
    let out = run_on_big_stack(move || -> Result<TimeOutput, String> {
        let (pinned_cpu, pin_error) = pin(cpu);
        kem::set_rng(rng);
        let mut bufs = Buffers::new(&kem.sizes)?;
        let mut memory = Memory {
            baseline_rss_kib: status_kib("VmRSS"),
            peak_rss_kib: None,
            stack_bytes: None,
            stack_painted_bytes: 0,
        };
        let perf = timer::PerfCycles::open();
        let mut record = TimeOutput {
            op: op.name().into(),
            sizes: kem.sizes.clone(),
            pinned_cpu,
            pin_error,
            counter: timer::counter_name().into(),
            rng: rng_name.into(),
            core_cycles: match &perf {
                Ok(_) => kem_native::output::CoreCycles::Available,
                Err(reason) => kem_native::output::CoreCycles::Unavailable {
                    reason: reason.clone(),
                },
            },
            calibration: kem_native::output::Calibration {
                target_trial_ns: batch_ns,
                batch_iters: 0,
                batch_ns: 0,
                batches_ns: Vec::new(),
                iters: 0,
                min_iters,
            },
            warmup_iters: 0,
            trials: Vec::new(),
            samples: Vec::new(),
            overhead: kem_native::output::Overhead {
                cycles_per_call: 0.0,
                ns_per_call: 0.0,
                single_call_cycles: 0.0,
            },
            memory: memory.clone(),
            failure: None,
        };
        if let Err(e) = prepare(op, &kem, &mut bufs) {
            record.failure = Some(e);
            return Ok(record);
        }
        let call = OpCall::new(op, &kem, &mut bufs);
        let (warm, cal) = match serve::warm_and_calibrate(op, &call, batch_ns, min_iters)
            .and_then(|c| bufs.check_all(op.c_name()).map(|_| c))
        {
            Ok(c) => c,
            Err(e) => {
                record.failure = Some(e);
                return Ok(record);
            }
        };
        let iters = cal.iters;
        record.warmup_iters = warm;
        record.calibration = cal.clone();
        say(
            &mut channel,
            serve::READY,
            &to_json(&Ready {
                calibration: cal,
                warmup_iters: warm,
                pinned_cpu,
            })?,
        )?;
        let mut perf = perf.ok();
        let mut line = String::new();
        let stdin = std::io::stdin();
        loop {
            line.clear();
            if stdin
                .lock()
                .read_line(&mut line)
                .map_err(|e| e.to_string())?
                == 0
            {
                return Err("stdin closed before `finish`".into());
            }
            match line.trim() {
                "batch" => {
                    let before = SchedSnapshot::read();
                    let (b, cc) = match perf.as_mut() {
                        Some(p) => {
                            p.reset_enable();
                            let b = call.batch(false, iters);
                            (b, p.disable_read())
                        }
                        None => (call.batch(false, iters), None),
                    };
                    let own = SchedSnapshot::read().since(&before);
                    record.trials.push(kem_native::output::Trial {
                        iters,
                        cycles: b.ticks,
                        ns: b.ns,
                        core_cycles: cc,
                    });
                    if b.rc_or != 0 {
                        record.failure = Some(format!(
                            "{} returned nonzero during batch {} (OR of return codes = {})",
                            op.c_name(),
                            record.trials.len(),
                            b.rc_or
                        ));
                    } else if let Err(e) = bufs.check_all(op.c_name()) {
                        record.failure = Some(format!("{e} (during the batches)"));
                    }
                    if record.failure.is_some() {
                        return Ok(record);
                    }
                    say(
                        &mut channel,
                        serve::BATCH,
                        &to_json(&BatchReply {
                            iters,
                            cycles: b.ticks,
                            ns: b.ns,
                            core_cycles: cc,
                            own,
                        })?,
                    )?;
                }
                "finish" => break,
                other => {
                    return Err(format!(
                        "unknown command `{other}` (expected batch or finish)"
                    ))
                }
            }
        }
        let mut single = vec![0u64; samples as usize];
        let rc = call.samples(false, &mut single);
        record.samples = single;
        if rc != 0 {
            record.failure = Some(format!(
                "{} returned nonzero during the single-call samples (OR of return codes = {rc})",
                op.c_name()
            ));
            return Ok(record);
        }
        record.overhead = measure_overhead(&call);
        memory.peak_rss_kib = status_kib("VmHWM");
        match measure_stack(op, &call) {
            Ok((used, painted)) => {
                memory.stack_bytes = Some(used);
                memory.stack_painted_bytes = painted;
            }
            Err(e) => record.failure = Some(e),
        }
        if record.failure.is_none() {
            if let Err(e) = bufs.check_all(op.c_name()) {
                record.failure = Some(format!("{e} (on the painted stack)"));
            }
        }
        record.memory = memory;
        Ok(record)
    })??;
    Ok(Outcome {
        ok: out.failure.is_none(),
        json: format!("{} {}", serve::DONE, to_json(&out)?),
    })
}

fn job_ct(args: &Args) -> Result<Outcome, String> {
    let op = Op::parse(args.get("op")?)?;
    let runs: u32 = args.num("runs", Some(3))?;
    if runs == 0 {
        return Err("`--runs` must be at least 1".into());
    }
    let kem = load(args)?;
    let out = run_on_big_stack(move || kem_native::ct::run_ct(&kem, op, runs))??;
    Ok(Outcome {
        ok: out.failure.is_none(),
        json: to_json(&out)?,
    })
}

fn job_profile(args: &Args) -> Result<Outcome, String> {
    let op = Op::parse(args.get("op")?)?;
    let cpu: Option<usize> = args.opt_num("cpu")?;
    let iters: u64 = args.num("iters", Some(20))?;
    let kem = load(args)?;
    let api = ProfileApi::resolve(&kem)?;
    let (rng, _) = timing_rng(args)?;
    let out = run_on_big_stack(move || -> Result<_, String> {
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
                    failure: Some(e),
                },
                0,
            ),
        };
        if out.failure.is_none() {
            if rc != 0 {
                out.failure = Some(format!(
                    "{} returned nonzero (OR of return codes = {rc})",
                    op.c_name()
                ));
            } else if let Err(e) = bufs.check_all(op.c_name()) {
                out.failure = Some(e);
            }
        }
        Ok(out)
    })??;
    Ok(Outcome {
        ok: out.failure.is_none(),
        json: to_json(&out)?,
    })
}

/// The default seed of `count`: bytes 0..47, the entropy input of NIST's KAT generator.
fn default_seed() -> [u8; 48] {
    std::array::from_fn(|i| i as u8)
}

fn job_count(args: &Args) -> Result<Outcome, String> {
    let op = Op::parse(args.get("op")?)?;
    let kind = KatRngKind::parse(args.get("rng")?)?;
    let iters: u64 = args.num("iters", Some(20))?;
    if iters == 0 {
        return Err("`--iters` must be at least 1".into());
    }
    let seed = match args.values.get("seed") {
        None => default_seed(),
        Some(h) => hex::decode(h)
            .ok()
            .and_then(|v| <[u8; 48]>::try_from(v).ok())
            .ok_or_else(|| format!("`--seed {h}` is not 48 bytes of hex"))?,
    };
    let kem = load(args)?;
    let out = run_on_big_stack(move || -> Result<CountOutput, String> {
        kem::set_rng(kind.seeded(&seed));
        let mut bufs = Buffers::new(&kem.sizes)?;
        let mut record = CountOutput {
            op: op.name().into(),
            iters,
            rng: kind.name().into(),
            seed: hex::encode(seed),
            failure: None,
        };
        if let Err(e) = prepare(op, &kem, &mut bufs) {
            record.failure = Some(e);
            return Ok(record);
        }
        let call = OpCall::new(op, &kem, &mut bufs);
        for i in 0..iters {
            let rc = call.once();
            if rc != 0 {
                record.failure = Some(format!("{} returned {rc} in call {}", op.c_name(), i + 1));
                return Ok(record);
            }
        }
        if let Err(e) = bufs.check_all(op.c_name()) {
            record.failure = Some(e);
        }
        Ok(record)
    })??;
    Ok(Outcome {
        ok: out.failure.is_none(),
        json: to_json(&out)?,
    })
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().is_some_and(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let mut record = match kem_native::sys::take_stdout() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("kem-runner: cannot set up the record channel: {e}");
            return ExitCode::from(2);
        }
    };
    let result = Args::parse(&argv, allowed).and_then(|args| match args.job.as_str() {
        "kat" => job_kat(&args),
        "time" => job_time(&args),
        "serve" => job_serve(&args, &record),
        "count" => job_count(&args),
        "ct" => job_ct(&args),
        _ => job_profile(&args),
    });
    match result {
        Ok(o) => {
            if let Err(e) = writeln!(record, "{}", o.json) {
                eprintln!("kem-runner: cannot write the record: {e}");
                return ExitCode::from(2);
            }
            if o.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("kem-runner: {e}");
            ExitCode::from(2)
        }
    }
}
