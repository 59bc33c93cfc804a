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
//! Around every batch the runner reads its own thread's
//! scheduler statistics (`/proc/thread-self/schedstat`: time run and time waited for the
//! CPU; `/proc/thread-self/status`: context switches) and reports the differences, so the
//! engine can tell a batch that shared the core with other work.

use crate::error::KemError;
use crate::output::Calibration;
use crate::timing::{calibrate, check_rc, Op, OpCall};
use serde::{Deserialize, Serialize};

/// Prefix of the line sent once the runner is calibrated.
pub const READY: &str = "ready";
/// Prefix of the answer to `batch`.
pub const BATCH: &str = "batch";
/// Prefix of the final record.
pub const DONE: &str = "done";

/// Sent once, after warm-up and calibration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ready {
    pub calibration: Calibration,
    pub warmup_iters: u64,
    pub pinned_cpu: Option<usize>,
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
    fn layouts_share_a_batch_evenly() {
        assert_eq!(per_layout(100, 1), 100);
        assert_eq!(per_layout(100, 4), 25);
        assert_eq!(per_layout(101, 4), 26);
        // A slow operation calibrated to one call still runs once in every layout.
        assert_eq!(per_layout(1, 4), 1);
        assert_eq!(per_layout(0, 0), 1);
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
