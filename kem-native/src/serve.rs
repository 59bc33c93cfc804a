//! `kem-runner serve`: one persistent process per instance and operation, timing one short
//! batch each time the engine asks, so the engine can interleave many of them in rounds.
//!
//! Protocol (one line each way: commands on stdin; answers, each prefixed with a word, on
//! the runner's record channel, the stdout it was started with. File descriptor 1 points
//! at stderr before the KEM is loaded, so a KEM printing `batch ...` cannot answer for the
//! runner):
//!
//! ```text
//! (start)  -> ready {Ready}        warmed up and calibrated; or `done {TimeOutput}` + exit 1
//! batch    -> batch {BatchReply}   one timed batch; or `done {TimeOutput}` + exit 1 on failure
//! finish   -> done {TimeOutput}    single-call samples, loop overhead, stack, peak RSS; exit 0
//! ```
//!
//! Outputs checked (`kem_native::checked`): `batch SEED` reseeds the DRBG with SEED (96 hex
//! digits) before the batch, and `batch SEED FILE` (dec) decapsulates call `i`'s ciphertext
//! from the `i`th slot of FILE (in the working folder); the answer carries the fold of the
//! batch's outputs. The same process serves as the untimed reference of another:
//!
//! ```text
//! replay SEED N      -> replayed {Checked}  N keygen or enc calls from SEED, spaced, checked
//! feed SEED N FILE   -> fed {Checked}       N ciphertexts made by enc from SEED, into FILE
//! ```
//!
//! The key pair enc and dec use comes from `--setup-seed SEED` at the start and from
//! `key SEED -> keyed {Checked}` between batches (in timed processes and references alike,
//! [`rekey`](crate::checked::rekey); the fold is the key pair's, the same in all).
//!
//! Layouts: with `--layout` objects besides `--lib` (the same code linked in other orders),
//! every batch times each of them in turn, [`per_layout`] calls each, starting with a
//! different one each batch; the answer sums them (so its cycles per call are the mean
//! over the layouts) and lists each one's ticks.
//!
//! Calibration: warm-up (at least 2 calls and half a batch), then
//! [`timing::calibrate`](crate::timing::calibrate) with one batch as the trial: a batch is
//! doubled until it lasts a tenth of `batch_ns`, and the median of five batches of that size
//! sets the calls per batch so one lasts `batch_ns`, never fewer than `min_iters`.
//!
//! The yardstick inside the batch (`--gauge Y.so --gauge-api api.h`): the host's speed is
//! measured *with* every batch, not beside it. A batch is split into blocks (each layout's
//! calls in [`BLOCKS`] parts, one part per layout with four or more layouts, see
//! [`blocks`]), and a short block of the yardstick's calls ([`Gauge`], a fiftieth of a batch)
//! runs before each block and after the last. The answer lists each yardstick block's ticks
//! (`gauge_cycles`) beside the KEM's, so the engine can tell in which state the host was
//! during that batch (this host has two: see `docs/figures.md`). The KEM's `cycles` and
//! `ns` are its own blocks only.
//!
//! Around every batch the runner reads its own thread's
//! scheduler statistics (`/proc/thread-self/schedstat`: time run and time waited for the
//! CPU; `/proc/thread-self/status`: context switches) and reports the differences, so the
//! engine can tell a batch that shared the core with other work.

use std::path::Path;

use crate::api::parse_api_h;
use crate::error::{KemError, LoadError};
use crate::kem::{Buffers, Kem};
use crate::output::Calibration;
use crate::timing::{calibrate, check_rc, Batch, Op, OpCall};
use serde::{Deserialize, Serialize};

/// Prefix of the line sent once the runner is calibrated.
pub const READY: &str = "ready";
/// Prefix of the answer to `batch`.
pub const BATCH: &str = "batch";
/// Prefix of the final record.
pub const DONE: &str = "done";
/// Prefix of the answer to `replay`.
pub const REPLAYED: &str = "replayed";
/// Prefix of the answer to `feed`.
pub const FED: &str = "fed";
/// Prefix of the answer to `key`.
pub const KEYED: &str = "keyed";

/// Answer to `replay` or `feed`: the fold of the outputs ([`crate::checked::fold_hex`]), or
/// why there is none.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checked {
    pub fold: Option<String>,
    pub failure: Option<String>,
}

/// Sent once, after warm-up and calibration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ready {
    pub calibration: Calibration,
    pub warmup_iters: u64,
    pub pinned_cpu: Option<usize>,
    /// Calls of the yardstick in each of its blocks (`None` without `--gauge`).
    #[serde(default)]
    pub gauge_calls: Option<u64>,
    /// Calls of the KEM in each batch (all layouts together).
    #[serde(default)]
    pub batch_calls: u64,
}

/// What the runner's own thread went through during one batch (differences).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnSched {
    /// ns on the CPU (schedstat field 1); `None` where schedstat is unavailable.
    pub run_ns: Option<u64>,
    /// ns runnable but waiting for the CPU (schedstat field 2).
    pub wait_ns: Option<u64>,
    /// Voluntary context switches.
    pub voluntary: Option<u64>,
    /// Involuntary context switches (preempted by another task).
    pub involuntary: Option<u64>,
}

/// Answer to one `batch` command.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatchReply {
    pub iters: u64,
    pub cycles: u64,
    pub ns: u64,
    pub core_cycles: Option<u64>,
    pub own: OwnSched,
    /// With several layouts: ticks of each one's share (see [`per_layout`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layout_cycles: Vec<u64>,
    /// With `--gauge`: ticks of each yardstick block of the batch (before each KEM block
    /// and after the last), `gauge_calls` calls each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gauge_cycles: Vec<u64>,
    /// The fold of the batch's outputs in the order they were made
    /// ([`crate::checked::fold_hex`]).
    #[serde(default)]
    pub fold: Option<String>,
}

/// Blocks a layout's calls are split into when there are fewer than this many layouts: a
/// batch has at least this many KEM blocks, and a yardstick block between every two.
pub const BLOCKS: usize = 4;

/// The KEM blocks of one batch in the order they run: (layout, calls), each layout's `per`
/// calls in `BLOCKS / layouts` parts (at least one, at most `per`), layouts in turn from
/// `start`.
pub fn blocks(per: u64, layouts: usize, start: usize) -> Vec<(usize, u64)> {
    let k = layouts.max(1);
    let parts = (BLOCKS.div_ceil(k) as u64).min(per).max(1);
    let (base, extra) = (per / parts, per % parts);
    (0..k)
        .flat_map(|step| {
            let j = (start + step) % k;
            (0..parts).map(move |p| (j, base + u64::from(p < extra)))
        })
        .filter(|&(_, n)| n > 0)
        .collect()
}

/// Namespace of the yardstick's symbols (`NGCC_YARDSTICK_crypto_kem_keypair`).
pub const GAUGE_NS: &str = "NGCC_YARDSTICK_";

/// A yardstick block lasts about this share of a batch.
pub const GAUGE_SHARE: u64 = 50;

/// The yardstick timed inside every batch: its object, its buffers and the calls of one
/// block (calibrated to a [`GAUGE_SHARE`]th of a batch).
pub struct Gauge {
    call: OpCall,
    bufs: Box<Buffers>,
    _kem: Kem,
    pub calls: u64,
}

impl Gauge {
    /// Load the yardstick `object` with the sizes of its `api_h` text.
    pub fn load(object: &Path, api_h: &str) -> Result<Gauge, LoadError> {
        let sizes = parse_api_h(api_h, GAUGE_NS).map_err(|source| LoadError::Api {
            path: "yardstick api.h".into(),
            source,
        })?;
        let kem = Kem::load(object, GAUGE_NS, sizes)?;
        let mut bufs = Box::new(Buffers::new(&kem.sizes)?);
        let call = OpCall::new(Op::Keygen, &kem, &mut bufs);
        Ok(Gauge {
            call,
            bufs,
            _kem: kem,
            calls: 1,
        })
    }

    /// Warm it up and choose the calls of one block so that it lasts `batch_ns /`
    /// [`GAUGE_SHARE`].
    pub fn calibrate(&mut self, batch_ns: u64) -> Result<(), KemError> {
        let block = (batch_ns / GAUGE_SHARE).max(1);
        warm_up(Op::Keygen, &self.call, block * 4)?;
        let c = calibrate(block, 1, |n| {
            let b = self.call.batch(false, n);
            check_rc(Op::Keygen, b.rc_or, "the yardstick's calibration").map(|_| b.ns)
        })?;
        self.calls = c.iters;
        Ok(())
    }

    /// One block: its ticks, or the yardstick's failure.
    #[inline(never)]
    pub fn block(&self) -> Result<u64, KemError> {
        let b: Batch = self.call.batch(false, self.calls);
        check_rc(Op::Keygen, b.rc_or, "a yardstick block")?;
        Ok(b.ticks)
    }

    /// Whether its buffers' guards are intact.
    pub fn check(&self) -> Result<(), KemError> {
        self.bufs.check_all("NGCC_YARDSTICK_crypto_kem_keypair")
    }
}

/// Part `i` of `total` split into `parts` parts that differ by one at most and add up to
/// `total`, the larger first: a member's single-call samples among its runner processes
/// (the engine), a process's among its layouts (kem-runner's `finish`).
pub fn share(total: usize, parts: usize, i: usize) -> usize {
    let parts = parts.max(1);
    total / parts + usize::from(i < total % parts)
}

/// Calls each of `layouts` layouts makes in a batch of `iters` calls (at least one): a
/// batch then lasts about as long as with one layout, and each layout gets the same share.
pub fn per_layout(iters: u64, layouts: usize) -> u64 {
    iters.div_ceil(layouts.max(1) as u64).max(1)
}

/// A snapshot of the calling thread's scheduler counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct SchedSnapshot {
    run_ns: Option<u64>,
    wait_ns: Option<u64>,
    voluntary: Option<u64>,
    involuntary: Option<u64>,
}

impl SchedSnapshot {
    /// Read `/proc/thread-self/schedstat` and `/proc/thread-self/status`.
    pub fn read() -> SchedSnapshot {
        let sched = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
        let (run_ns, wait_ns) = parse_schedstat(&sched);
        SchedSnapshot {
            run_ns,
            wait_ns,
            voluntary: status_field(&status, "voluntary_ctxt_switches"),
            involuntary: status_field(&status, "nonvoluntary_ctxt_switches"),
        }
    }

    /// Differences from `earlier` to `self`.
    pub fn since(&self, earlier: &SchedSnapshot) -> OwnSched {
        let d = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
        OwnSched {
            run_ns: d(self.run_ns, earlier.run_ns),
            wait_ns: d(self.wait_ns, earlier.wait_ns),
            voluntary: d(self.voluntary, earlier.voluntary),
            involuntary: d(self.involuntary, earlier.involuntary),
        }
    }
}

/// The first two fields of a schedstat line: ns run, ns waited.
pub fn parse_schedstat(text: &str) -> (Option<u64>, Option<u64>) {
    let mut it = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    (it.next().flatten(), it.next().flatten())
}

/// A numeric field of a `/proc/.../status` text.
pub fn status_field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// Warm up (at least 2 calls and `batch_ns / 2`), then calibrate with
/// [`timing::calibrate`](crate::timing::calibrate), the same median-based calibration as
/// `kem-runner time`, with one batch of the session as the trial to fill. Returns the
/// warm-up calls and the calibration, or the first nonzero return code.
pub fn warm_and_calibrate(
    op: Op,
    call: &OpCall,
    batch_ns: u64,
    min_iters: u64,
) -> Result<(u64, Calibration), KemError> {
    let warm = warm_up(op, call, batch_ns)?;
    let calibration = calibrate(batch_ns, min_iters, |n| {
        let b = call.batch(false, n);
        check_rc(op, b.rc_or, "calibration").map(|_| b.ns)
    })?;
    Ok((warm, calibration))
}

/// Run the operation in doubling batches until at least 2 calls and `batch_ns / 2` have
/// passed; returns the calls made, or the first nonzero return code.
pub fn warm_up(op: Op, call: &OpCall, batch_ns: u64) -> Result<u64, KemError> {
    let (mut warm, mut warm_ns, mut n) = (0u64, 0u64, 1u64);
    while warm < 2 || warm_ns < batch_ns / 2 {
        let b = call.batch(false, n);
        check_rc(op, b.rc_or, "warm-up")?;
        warm += n;
        warm_ns += b.ns;
        n = (n * 2).min(1 << 20);
    }
    Ok(warm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_total_is_shared_to_the_one() {
        let split = |total, k| -> Vec<usize> { (0..k).map(|i| share(total, k, i)).collect() };
        assert_eq!(split(11, 4), [3, 3, 3, 2]);
        assert_eq!(split(101, 4), [26, 25, 25, 25]);
        assert_eq!(split(3, 4), [1, 1, 1, 0]);
        assert_eq!(split(7, 1), [7]);
        assert_eq!(share(5, 0, 0), 5);
    }

    #[test]
    fn layouts_share_a_batch_evenly() {
        assert_eq!(per_layout(100, 1), 100);
        assert_eq!(per_layout(100, 4), 25);
        assert_eq!(per_layout(101, 4), 26);
        // A slow operation calibrated to one call still runs once in every layout.
        assert_eq!(per_layout(1, 4), 1);
        assert_eq!(per_layout(0, 0), 1);
    }

    #[test]
    fn a_batch_is_split_into_blocks_with_room_for_the_yardstick_between() {
        // One layout: its calls in four parts, the first ones a call larger.
        assert_eq!(blocks(10, 1, 0), [(0, 3), (0, 3), (0, 2), (0, 2)]);
        // Four layouts: one block each, in turn from `start`.
        assert_eq!(blocks(5, 4, 2), [(2, 5), (3, 5), (0, 5), (1, 5)]);
        // Two layouts: two parts each.
        assert_eq!(blocks(3, 2, 1), [(1, 2), (1, 1), (0, 2), (0, 1)]);
        // A batch of one call has one block.
        assert_eq!(blocks(1, 1, 0), [(0, 1)]);
        let total: u64 = blocks(1001, 3, 0).iter().map(|b| b.1).sum();
        assert_eq!(total, 3003);
    }

    #[test]
    fn parses_thread_counters() {
        assert_eq!(parse_schedstat("1234 56 7\n"), (Some(1234), Some(56)));
        assert_eq!(parse_schedstat(""), (None, None));
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(status_field(status, "voluntary_ctxt_switches"), Some(12));
        assert_eq!(status_field(status, "nonvoluntary_ctxt_switches"), Some(3));
        assert_eq!(status_field(status, "missing"), None);
    }

    #[test]
    fn differences_need_both_readings() {
        let a = SchedSnapshot {
            run_ns: Some(100),
            wait_ns: Some(10),
            voluntary: Some(1),
            involuntary: None,
        };
        let b = SchedSnapshot {
            run_ns: Some(350),
            wait_ns: Some(15),
            voluntary: Some(1),
            involuntary: Some(2),
        };
        let d = b.since(&a);
        assert_eq!(d.run_ns, Some(250));
        assert_eq!(d.wait_ns, Some(5));
        assert_eq!(d.voluntary, Some(0));
        assert_eq!(d.involuntary, None);
        // This thread can read its own counters on Linux.
        let now = SchedSnapshot::read();
        assert!(now.run_ns.is_some() && now.involuntary.is_some());
    }
}
