//! The hot loop: time one KEM operation in this process.
//!
//! Inputs are prepared outside the timed region ([`prepare`]: enc needs a public key, dec a
//! secret key and a ciphertext). The loop ([`run_batch`]) calls the operation through a
//! function pointer laundered by `black_box`, with its arguments also through `black_box`,
//! OR-ing the return codes (no branch on them); nothing is allocated and nothing is
//! written but the counters. The same monomorphized loop calling an empty `extern "C"`
//! function of the same signature gives the loop's own overhead per call.
//!
//! Sequence of [`time_op`]: warm-up, calibration ([`calibrate`]: double a batch until it
//! lasts a tenth of a trial, then iterations from the median of several batches of that size
//! so one trial lasts the target, never fewer than `min_iters`), `trials` trials (counter ticks, monotonic ns, perf core cycles when
//! available), then `samples` single calls timed one by one, then the overhead.

use crate::error::{KemError, UsageError};
use crate::kem::{Buffers, DecFn, EncFn, Kem, KeypairFn};
use crate::output::{Calibration, CoreCycles, Overhead, Trial};
use crate::timer::{self, PerfCycles};
use std::ffi::c_int;
use std::hint::black_box;

/// The operation being measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `crypto_kem_keypair`.
    Keygen,
    /// `crypto_kem_enc`.
    Enc,
    /// `crypto_kem_dec`.
    Dec,
}

impl Op {
    /// Parse `keygen`, `enc` or `dec`.
    pub fn parse(s: &str) -> Result<Op, UsageError> {
        match s {
            "keygen" => Ok(Op::Keygen),
            "enc" => Ok(Op::Enc),
            "dec" => Ok(Op::Dec),
            other => Err(UsageError::Op(other.to_string())),
        }
    }

    /// Name on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            Op::Keygen => "keygen",
            Op::Enc => "enc",
            Op::Dec => "dec",
        }
    }

    /// Name of the C function, for messages.
    pub fn c_name(self) -> &'static str {
        match self {
            Op::Keygen => "crypto_kem_keypair",
            Op::Enc => "crypto_kem_enc",
            Op::Dec => "crypto_kem_dec",
        }
    }
}

/// Run the calls the operation's inputs need (none for keygen).
pub fn prepare(op: Op, kem: &Kem, bufs: &mut Buffers) -> Result<(), KemError> {
    let preparing = |source| KemError::Preparing {
        source: Box::new(source),
        op: op.name(),
    };
    match op {
        Op::Keygen => Ok(()),
        Op::Enc => bufs.keypair(kem).map_err(preparing),
        Op::Dec => {
            bufs.keypair(kem).map_err(preparing)?;
            bufs.enc(kem).map_err(preparing)
        }
    }
}

/// One call with fixed arguments, made through a function pointer.
pub trait Call {
    /// Make the call.
    ///
    /// # Safety
    /// The pointers must be valid for the function being called.
    unsafe fn call(&self) -> c_int;
}

/// A two-pointer call (`keypair(pk, sk)`).
pub struct Call2 {
    f: KeypairFn,
    a: *mut u8,
    b: *mut u8,
}

/// A three-pointer call (`enc(ct, ss, pk)`, `dec(ss, ct, sk)`).
pub struct Call3 {
    f: EncFn,
    a: *mut u8,
    b: *mut u8,
    c: *const u8,
}

impl Call for Call2 {
    #[inline(always)]
    unsafe fn call(&self) -> c_int {
        let f = black_box(self.f);
        // SAFETY: forwarded to the caller of `call`.
        unsafe { f(black_box(self.a), black_box(self.b)) }
    }
}

impl Call for Call3 {
    #[inline(always)]
    unsafe fn call(&self) -> c_int {
        let f = black_box(self.f);
        // SAFETY: forwarded to the caller of `call`.
        unsafe { f(black_box(self.a), black_box(self.b), black_box(self.c)) }
    }
}

extern "C" fn empty2(_: *mut u8, _: *mut u8) -> c_int {
    0
}

extern "C" fn empty3(_: *mut u8, _: *mut u8, _: *const u8) -> c_int {
    0
}

/// Ticks, ns and OR of return codes of one batch.
#[derive(Debug, Clone, Copy, Default)]
pub struct Batch {
    /// Counter ticks.
    pub ticks: u64,
    /// Monotonic ns.
    pub ns: u64,
    /// OR of every return code (0 when all calls succeeded).
    pub rc_or: c_int,
}

/// `iters` back-to-back calls between two counter reads.
#[inline(never)]
pub fn run_batch<C: Call>(c: &C, iters: u64) -> Batch {
    let mut rc_or: c_int = 0;
    let n0 = timer::now_ns();
    let t0 = timer::start();
    for _ in 0..iters {
        // SAFETY: the Call was built from buffers of the declared sizes (see `OpCall`).
        rc_or |= unsafe { black_box(c).call() };
    }
    let t1 = timer::stop();
    let n1 = timer::now_ns();
    Batch {
        ticks: t1.wrapping_sub(t0),
        ns: n1.saturating_sub(n0),
        rc_or,
    }
}

/// Time `out.len()` single calls one by one into `out` (preallocated); OR of return codes.
#[inline(never)]
pub fn run_samples<C: Call>(c: &C, out: &mut [u64]) -> c_int {
    let mut rc_or: c_int = 0;
    for slot in out.iter_mut() {
        let t0 = timer::start();
        // SAFETY: as in `run_batch`.
        rc_or |= unsafe { black_box(c).call() };
        let t1 = timer::stop();
        *slot = t1.wrapping_sub(t0);
    }
    rc_or
}

/// The operation and its empty twin, bound to the buffers.
pub enum OpCall {
    /// keygen and an empty 2-argument function.
    Two(Call2, Call2),
    /// enc/dec and an empty 3-argument function.
    Three(Call3, Call3),
}

impl OpCall {
    /// Bind `op` to `bufs`. The buffers must outlive every use of the result.
    pub fn new(op: Op, kem: &Kem, bufs: &mut Buffers) -> OpCall {
        match op {
            Op::Keygen => {
                let (a, b) = (bufs.pk.as_mut_ptr(), bufs.sk.as_mut_ptr());
                OpCall::Two(
                    Call2 {
                        f: kem.keypair,
                        a,
                        b,
                    },
                    Call2 { f: empty2, a, b },
                )
            }
            Op::Enc => {
                let (a, b, c) = (
                    bufs.ct.as_mut_ptr(),
                    bufs.ss_enc.as_mut_ptr(),
                    bufs.pk.as_ptr(),
                );
                OpCall::Three(
                    Call3 {
                        f: kem.enc,
                        a,
                        b,
                        c,
                    },
                    Call3 { f: empty3, a, b, c },
                )
            }
            Op::Dec => {
                // SAFETY: `dec(uint8_t *ss, const uint8_t *ct, const uint8_t *sk)` and the
                // EncFn shape differ only in the constness of a pointer: same C ABI.
                let f = unsafe { std::mem::transmute::<DecFn, EncFn>(kem.dec) };
                let (a, b, c) = (
                    bufs.ss_dec.as_mut_ptr(),
                    bufs.ct.as_ptr() as *mut u8,
                    bufs.sk.as_ptr(),
                );
                OpCall::Three(Call3 { f, a, b, c }, Call3 { f: empty3, a, b, c })
            }
        }
    }

    /// One batch of the real operation (`empty == false`) or of its empty twin.
    pub fn batch(&self, empty: bool, iters: u64) -> Batch {
        match (self, empty) {
            (OpCall::Two(op, _), false) => run_batch(op, iters),
            (OpCall::Two(_, e), true) => run_batch(e, iters),
            (OpCall::Three(op, _), false) => run_batch(op, iters),
            (OpCall::Three(_, e), true) => run_batch(e, iters),
        }
    }

    /// Single-call samples of the real operation (`empty == false`) or of its empty twin.
    pub fn samples(&self, empty: bool, out: &mut [u64]) -> c_int {
        match (self, empty) {
            (OpCall::Two(op, _), false) => run_samples(op, out),
            (OpCall::Two(_, e), true) => run_samples(e, out),
            (OpCall::Three(op, _), false) => run_samples(op, out),
            (OpCall::Three(_, e), true) => run_samples(e, out),
        }
    }

    /// One unmeasured call of the real operation (for stack painting, profiling).
    #[inline(never)]
    pub fn once(&self) -> c_int {
        // SAFETY: as in `run_batch`.
        unsafe {
            match self {
                OpCall::Two(op, _) => op.call(),
                OpCall::Three(op, _) => op.call(),
            }
        }
    }

    /// One call of the empty twin through the same path as [`once`](Self::once).
    #[inline(never)]
    pub fn once_empty(&self) -> c_int {
        // SAFETY: the empty functions ignore their arguments.
        unsafe {
            match self {
                OpCall::Two(_, e) => e.call(),
                OpCall::Three(_, e) => e.call(),
            }
        }
    }
}

// SAFETY: OpCall only holds function pointers and pointers into buffers that the caller
// keeps alive and does not touch while another thread makes the call (it waits for it).
unsafe impl Send for OpCall {}
// SAFETY: as above; `once` is only called from one thread at a time.
unsafe impl Sync for OpCall {}

/// Settings of one timing job.
#[derive(Debug, Clone)]
pub struct TimeConfig {
    /// Number of trials.
    pub trials: u32,
    /// Target length of one trial, ns.
    pub trial_ns: u64,
    /// Lower bound on iterations per trial.
    pub min_iters: u64,
    /// Single-call samples.
    pub samples: u32,
}

/// Everything [`time_op`] measured.
#[derive(Debug, Clone)]
pub struct Timed {
    /// Calls made during warm-up.
    pub warmup_iters: u64,
    /// How iterations per trial were chosen.
    pub calibration: Calibration,
    /// Every trial.
    pub trials: Vec<Trial>,
    /// Single-call ticks.
    pub samples: Vec<u64>,
    /// Loop overhead per call.
    pub overhead: Overhead,
    /// Whether perf cycles were recorded.
    pub core_cycles: CoreCycles,
    /// First misbehaviour (nonzero return, guard overwritten), if any.
    pub failure: Option<String>,
}

/// `Err(KemError::ReturnedDuring)` when the OR of a phase's return codes is nonzero.
pub fn check_rc(op: Op, rc_or: c_int, phase: &str) -> Result<(), KemError> {
    if rc_or == 0 {
        Ok(())
    } else {
        Err(KemError::ReturnedDuring {
            func: op.c_name(),
            phase: phase.to_string(),
            rc_or,
        })
    }
}

/// Overhead of the loop per call (median of 5 batches of the empty twin) and of one
/// singly-timed empty call (median of 1001).
pub fn measure_overhead(call: &OpCall) -> Overhead {
    const N: u64 = 1 << 20;
    let mut runs: Vec<Batch> = (0..5).map(|_| call.batch(true, N)).collect();
    runs.sort_by_key(|b| b.ticks);
    let mid = runs[runs.len() / 2];
    let mut singles = vec![0u64; 1001];
    call.samples(true, &mut singles);
    singles.sort_unstable();
    Overhead {
        cycles_per_call: mid.ticks as f64 / N as f64,
        ns_per_call: mid.ns as f64 / N as f64,
        single_call_cycles: singles[singles.len() / 2] as f64,
    }
}

/// Batches of the final size timed to choose iterations per trial (their median counts).
pub const CALIBRATION_BATCHES: usize = 5;

/// Upper bound on a calibration batch (calls).
const MAX_BATCH: u64 = 1 << 40;

/// Choose iterations per trial so one trial lasts `trial_ns`, from `batch(n)` (the ns of
/// `n` back-to-back calls). Double `n` until one batch lasts a tenth of a trial, then time
/// [`CALIBRATION_BATCHES`] batches of `n` and take their median; when that median is under
/// a tenth of a trial too (the batch that stopped the doubling was slowed down: a first
/// call, a page fault, a preemption) double on from there. So one slow batch cannot choose
/// the iterations, as it did with a 24 ms first batch that made 100 ms trials last 0.3 ms.
pub fn calibrate<E>(
    trial_ns: u64,
    min_iters: u64,
    mut batch: impl FnMut(u64) -> Result<u64, E>,
) -> Result<Calibration, E> {
    let tenth = (trial_ns / 10).max(1);
    let mut n = 1u64;
    loop {
        while n < MAX_BATCH && batch(n)? < tenth {
            n *= 2;
        }
        let mut batches = Vec::with_capacity(CALIBRATION_BATCHES);
        for _ in 0..CALIBRATION_BATCHES {
            batches.push(batch(n)?);
        }
        let mut sorted = batches.clone();
        sorted.sort_unstable();
        let median = sorted[sorted.len() / 2];
        if median >= tenth || n >= MAX_BATCH {
            let per_op_ns = (median as f64 / n as f64).max(1e-3);
            let iters = ((trial_ns as f64 / per_op_ns).ceil() as u64)
                .max(min_iters)
                .max(1);
            return Ok(Calibration {
                target_trial_ns: trial_ns,
                batch_iters: n,
                batch_ns: median,
                batches_ns: batches,
                iters,
                min_iters,
            });
        }
        n *= 2;
    }
}

/// Prefix of the stderr lines that tell the engine how far a timing job is (`progress
/// trial 3/5`); written only between timed regions.
pub const PROGRESS: &str = "progress";

/// Warm up, calibrate, run the trials and samples. The caller has pinned the thread and
/// prepared the inputs; `bufs` are checked for guard damage after every phase.
pub fn time_op(op: Op, call: &OpCall, bufs: &Buffers, cfg: &TimeConfig) -> Timed {
    let mut perf = PerfCycles::open();
    let core_cycles = match &perf {
        Ok(_) => CoreCycles::Available,
        Err(reason) => CoreCycles::Unavailable {
            reason: reason.to_string(),
        },
    };
    let mut out = Timed {
        warmup_iters: 0,
        calibration: Calibration::unmeasured(cfg.trial_ns, cfg.min_iters),
        trials: Vec::with_capacity(cfg.trials as usize),
        samples: Vec::new(),
        overhead: Overhead::default(),
        core_cycles,
        failure: None,
    };
    let guard_check = |phase: &str| -> Result<(), KemError> {
        bufs.check_all(op.c_name())
            .map_err(|e| e.during(format!("during {phase}")))
    };

    // Warm-up: at least 2 calls and a twentieth of a trial (caches, branch predictors,
    // frequency ramp-up).
    let warm_target = cfg.trial_ns / 20;
    let (mut warm_ns, mut batch) = (0u64, 1u64);
    while out.warmup_iters < 2 || warm_ns < warm_target {
        let b = call.batch(false, batch);
        out.warmup_iters += batch;
        warm_ns += b.ns;
        if let Err(e) = check_rc(op, b.rc_or, "warm-up").and_then(|_| guard_check("warm-up")) {
            out.failure = Some(e.to_string());
            return out;
        }
        batch = (batch * 2).min(1 << 20);
    }

    // Calibration.
    eprintln!("{PROGRESS} calibrating");
    let cal = calibrate(cfg.trial_ns, cfg.min_iters, |n| {
        let b = call.batch(false, n);
        check_rc(op, b.rc_or, "calibration").map(|_| b.ns)
    });
    let iters = match cal {
        Ok(c) => {
            let iters = c.iters;
            out.calibration = c;
            iters
        }
        Err(e) => {
            out.failure = Some(e.to_string());
            return out;
        }
    };

    // Trials.
    for t in 0..cfg.trials {
        // Between trials, outside the timed region: progress for the engine's display.
        eprintln!("{PROGRESS} trial {}/{}", t + 1, cfg.trials);
        let (b, cc) = match perf.as_mut() {
            Ok(p) => {
                p.reset_enable();
                let b = call.batch(false, iters);
                (b, p.disable_read())
            }
            Err(_) => (call.batch(false, iters), None),
        };
        out.trials.push(Trial {
            iters,
            cycles: b.ticks,
            ns: b.ns,
            core_cycles: cc,
            layout_cycles: Vec::new(),
            gauge_cycles: Vec::new(),
        });
        if let Err(e) =
            check_rc(op, b.rc_or, &format!("trial {t}")).and_then(|_| guard_check("the trials"))
        {
            out.failure = Some(e.to_string());
            return out;
        }
    }

    // Single-call samples.
    eprintln!("{PROGRESS} {} single-call samples", cfg.samples);
    let mut samples = vec![0u64; cfg.samples as usize];
    let rc = call.samples(false, &mut samples);
    out.samples = samples;
    if let Err(e) =
        check_rc(op, rc, "the single-call samples").and_then(|_| guard_check("the samples"))
    {
        out.failure = Some(e.to_string());
        return out;
    }

    out.overhead = measure_overhead(call);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_parse() {
        assert_eq!(Op::parse("dec").unwrap().c_name(), "crypto_kem_dec");
        assert!(Op::parse("sign")
            .unwrap_err()
            .to_string()
            .contains("`sign`"));
    }

    extern "C" fn fails(_: *mut u8, _: *mut u8) -> c_int {
        -1
    }

    /// Issue #9: a fixture operation whose first call is 100x slower than the rest (10 µs
    /// per call, the first 1 ms) must not choose the iterations.
    #[test]
    fn calibration_ignores_a_slow_first_call() {
        let mut calls = 0u64;
        let fixture = |n: u64| -> Result<u64, String> {
            let first = if calls == 0 { 99 * 10_000 } else { 0 };
            calls += n;
            Ok(n * 10_000 + first)
        };
        let trial_ns = 5_000_000; // 5 ms: the slow first call alone lasts a fifth of it
        let c = calibrate(trial_ns, 1, fixture).unwrap();
        // 5 ms / 10 µs = 500 calls per trial; one trial then lasts the target.
        assert_eq!(c.iters, 500, "{c:?}");
        assert_eq!(c.batches_ns.len(), CALIBRATION_BATCHES);
        assert!(c.batch_ns >= trial_ns / 20, "{c:?}");
        // Without the median the first batch (1 call, 1 ms >= a tenth) would have given
        // 5 iterations: 50 µs trials.
    }

    #[test]
    fn calibration_keeps_min_iters_and_passes_errors() {
        let c = calibrate(1_000, 20, |n| Ok::<u64, KemError>(n * 1_000)).unwrap();
        assert_eq!((c.batch_iters, c.iters), (1, 20));
        let e = calibrate(1_000, 1, |_| Err("returned nonzero")).unwrap_err();
        assert_eq!(e, "returned nonzero");
    }

    #[test]
    fn batch_ors_return_codes_and_counts_time() {
        let mut x = [0u8; 4];
        let p = x.as_mut_ptr();
        let ok = Call2 {
            f: empty2,
            a: p,
            b: p,
        };
        let b = run_batch(&ok, 1000);
        assert_eq!(b.rc_or, 0);
        assert!(b.ticks > 0);
        let bad = Call2 {
            f: fails,
            a: p,
            b: p,
        };
        assert_eq!(run_batch(&bad, 3).rc_or, -1);
        let mut s = [0u64; 11];
        assert_eq!(run_samples(&ok, &mut s), 0);
        if cfg!(target_arch = "x86_64") {
            assert!(s.iter().all(|&t| t > 0));
        } else {
            // aarch64's cntvct_el0 ticks at 1-1000 MHz (CNTFRQ_EL0): an empty call may take
            // no tick at all; a sample is still a difference of two reads, never garbage.
            assert!(s.iter().all(|&t| t < 10_000_000), "{s:?}");
        }
    }
}
