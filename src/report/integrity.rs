//! Figures of one operation that contradict each other are not published as trusted.
//!
//! The submitter writes the code that is timed, counted and checked, and it can tell the
//! jobs apart (valgrind is in its address space; a timing loop calls one operation back to
//! back). So the figures of different jobs are checked against each other here, in one
//! place, and every report, `results.csv`/`results.json` and the index's status block read
//! the verdict from [`check`]:
//!
//! - timed cycles per counted instruction outside [`CPI_LOW`]–[`CPI_HIGH`]: below, the timed
//!   code executed far fewer instructions than the counted one ("does less when timed");
//!   above, the counted code ran far less than the timed one ("behaves differently under
//!   valgrind"). The band is justified in `docs/figures.md` ("Figures that contradict each
//!   other").
//! - the batch figure below [`BACK_TO_BACK`] times a low quantile ([`SINGLE_QUANTILE`]) of
//!   the single calls (their own counter overhead taken out): "does less when called back
//!   to back".
//!
//! An operation found so has its time, count and constant-time results all marked
//! untrusted with the reason; none of them is shown as a clean figure or verdict.

use crate::measure::stats::SINGLE_QUANTILE;
use crate::record::{CountData, TimeData};

/// Lowest plausible timed cycles per counted instruction (see the module doc).
pub const CPI_LOW: f64 = 0.1;
/// Highest plausible timed cycles per counted instruction (see the module doc).
pub const CPI_HIGH: f64 = 20.0;
/// A batch figure below this share of the single calls' low quantile is not believed.
pub const BACK_TO_BACK: f64 = 0.5;
/// Core clocks a counter that does not tick at a core's rate (`cntvct_el0`, `monotonic`)
/// is turned into cycles with, slowest and fastest, GHz: the band must fail at both.
const CORE_GHZ: (f64, f64) = (0.5, 5.0);

/// Which way the figures contradict each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contradiction {
    /// Far more timed cycles than the counted instructions can take.
    UnderValgrind,
    /// Far fewer timed cycles than the counted instructions need.
    WhenTimed,
    /// The batch figure far below the single calls'.
    BackToBack,
}

impl Contradiction {
    /// The reason as the reports give it.
    pub fn words(self) -> &'static str {
        match self {
            Contradiction::UnderValgrind => "behaves differently under valgrind",
            Contradiction::WhenTimed => "does less when timed",
            Contradiction::BackToBack => "does less when called back to back",
        }
    }
}

/// An operation whose figures are not trusted, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Untrusted {
    pub kind: Contradiction,
    /// The figures that disagree ("0.012 timed cycles per counted instruction, ...").
    pub detail: String,
}

impl Untrusted {
    /// "does less when timed: 0.012 timed cycles per counted instruction (...)".
    pub fn reason(&self) -> String {
        format!("{}: {}", self.kind.words(), self.detail)
    }

    /// What a report says in place of a figure or a verdict: "not trusted: <reason>".
    pub fn mark(&self) -> String {
        format!("not trusted: {}", self.reason())
    }
}

/// The timed cycles per call a report shows: the session median, else the mean; `true`
/// when it is the median.
pub fn timed_cycles(t: &TimeData) -> (f64, bool) {
    match t.summary.median_cycles {
        Some(m) => (m, true),
        None => (t.summary.mean_cycles, false),
    }
}

/// Timed cycles per call over counted instructions per call, when both are measured.
pub fn cycles_per_instruction(t: &TimeData, c: &CountData) -> Option<(f64, bool)> {
    let (cycles, median) = timed_cycles(t);
    (c.instructions_mean > 0.0).then(|| (cycles / c.instructions_mean, median))
}

/// The core cycles per call the timed figure stands for, lowest and highest: the ticks
/// themselves for `rdtsc` (a core-rate counter), else its nanoseconds at [`CORE_GHZ`].
fn core_cycles(t: &TimeData) -> Option<(f64, f64)> {
    let (ticks, _) = timed_cycles(t);
    if t.output.counter == "rdtsc" {
        return Some((ticks, ticks));
    }
    let ghz = t.summary.counter_ghz.filter(|g| *g > 0.0)?;
    let ns = ticks / ghz;
    Some((ns * CORE_GHZ.0, ns * CORE_GHZ.1))
}

/// Timed cycles against counted instructions (see the module doc).
fn against_count(t: &TimeData, c: &CountData) -> Option<Untrusted> {
    let (cpi, _) = cycles_per_instruction(t, c)?;
    let (lo, hi) = core_cycles(t)?;
    let instr = c.instructions_mean;
    let kind = if hi / instr < CPI_LOW {
        Contradiction::WhenTimed
    } else if lo / instr > CPI_HIGH {
        Contradiction::UnderValgrind
    } else {
        return None;
    };
    let (cycles, _) = timed_cycles(t);
    Some(Untrusted {
        kind,
        detail: format!(
            "{} timed cycles per counted instruction ({cycles:.0} ticks timed per call, \
             {instr:.0} instructions counted), outside the plausible {CPI_LOW}–{CPI_HIGH}",
            if cpi < 0.1 {
                format!("{cpi:.4}")
            } else {
                format!("{cpi:.1}")
            },
        ),
    })
}

/// The single calls' figure the batch figure is held against, and what it is: the
/// [`SINGLE_QUANTILE`] of the samples, else (a record without them) their median.
fn single_calls(t: &TimeData) -> Option<(f64, &'static str)> {
    let s = &t.output.samples;
    if s.len() < 10 {
        return t.summary.sample_median.map(|m| (m, "their median"));
    }
    let s: Vec<f64> = s.iter().map(|&c| c as f64).collect();
    crate::measure::stats::quantile(&s, SINGLE_QUANTILE).map(|q| (q, "their 10th percentile"))
}

/// The batch figure against the single-call samples (see the module doc).
fn against_single_calls(t: &TimeData) -> Option<Untrusted> {
    let (calls, which) = single_calls(t)?;
    let single = calls - t.output.overhead.single_call_cycles.max(0.0);
    let (batch, median) = timed_cycles(t);
    (single > 0.0 && batch < BACK_TO_BACK * single).then(|| Untrusted {
        kind: Contradiction::BackToBack,
        detail: format!(
            "batch {} {batch:.0} ticks per call, single calls {single:.0} ({which}, \
             counter overhead taken out): below {BACK_TO_BACK}×",
            if median { "median" } else { "mean" }
        ),
    })
}

/// Whether the figures of one operation contradict each other: its successful timing
/// against its successful count, and its batches against its single calls. `None` when
/// they agree or there is nothing to compare.
pub fn check(time: Option<&TimeData>, count: Option<&CountData>) -> Option<Untrusted> {
    let t = time?;
    count
        .and_then(|c| against_count(t, c))
        .or_else(|| against_single_calls(t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A timing record with this headline median, counter rate and single-call median (40
    /// ticks of single-call overhead).
    fn time(counter: &str, median: f64, ghz: f64, sample: Option<f64>) -> TimeData {
        let calibration = json!({"target_trial_ns": 0, "batch_iters": 0, "batch_ns": 0,
            "iters": 0, "min_iters": 0});
        let output = json!({"op": "enc",
            "sizes": {"algname": null, "pk": 1, "sk": 1, "ct": 1, "ss": 1},
            "pinned_cpu": null, "pin_error": null, "counter": counter,
            "core_cycles": {"status": "unavailable", "reason": "-"},
            "calibration": calibration, "warmup_iters": 0, "trials": [], "samples": [],
            "overhead": {"cycles_per_call": 0.0, "ns_per_call": 0.0, "single_call_cycles": 40.0},
            "memory": {"baseline_rss_kib": null, "peak_rss_kib": null, "stack_bytes": null,
                "stack_painted_bytes": 0}});
        let mut t: TimeData = serde_json::from_value(json!({
            "output": output,
            "summary": {"trials": 0, "iters": 0, "n": 0, "mean_cycles": 0.0, "mean_ns": 0.0,
                "ops_per_s": 0.0, "median_trial_ns": 0.0, "median_trial_cycles": 0.0,
                "min_cycles": 0.0, "q1_cycles": 0.0, "q3_cycles": 0.0, "max_cycles": 0.0,
                "cv": 0.0, "sample_median": null, "sample_q1": null, "sample_q3": null,
                "trial_outliers": [], "sample_outliers": 0, "unstable": false},
            "static_bytes": null, "object_cache_key": "", "object_sha256": "",
            "environment": crate::record::Environment::default(),
        }))
        .expect("time data");
        t.summary.median_cycles = Some(median);
        t.summary.counter_ghz = Some(ghz);
        t.summary.sample_median = sample;
        t
    }

    /// A count record of this many instructions per call.
    fn count(instructions: f64) -> CountData {
        serde_json::from_value(json!({
            "output": {"op": "enc", "iters": 3, "rng": "nist", "seed": ""},
            "valgrind": "valgrind-3.19.0", "tool_options": [], "object": "x.so",
            "flags": [], "excluded": [], "per_call": [],
            "instructions_mean": instructions, "instructions_min": 0, "instructions_max": 0,
            "hash_share": 0.0, "drng_share": 0.0, "family_shares": [], "calls_per_op": [],
            "profiles": [],
        }))
        .expect("count data")
    }

    #[test]
    fn plausible_figures_are_trusted() {
        // ML-KEM-768 enc on x86-64: ~0.4 cycles per instruction; single calls a little
        // slower than the batch.
        let t = time("rdtsc", 40_000.0, 2.6, Some(44_000.0));
        assert_eq!(check(Some(&t), Some(&count(100_000.0))), None);
        // An in-order core at 3 per instruction.
        assert_eq!(check(Some(&t), Some(&count(13_500.0))), None);
        // Nothing to compare.
        assert_eq!(check(None, Some(&count(1.0))), None);
        let t = time("rdtsc", 40_000.0, 2.6, None);
        assert_eq!(check(Some(&t), None), None);
    }

    #[test]
    fn far_fewer_cycles_than_instructions_is_doing_less_when_timed() {
        let t = time("rdtsc", 50.0, 2.6, Some(60.0));
        let u = check(Some(&t), Some(&count(5_000.0))).expect("untrusted");
        assert_eq!(u.kind, Contradiction::WhenTimed);
        assert!(u
            .reason()
            .starts_with("does less when timed: 0.0100 timed cycles"));
        assert!(u.mark().starts_with("not trusted: does less when timed"));
    }

    #[test]
    fn far_more_cycles_than_instructions_is_two_faces() {
        let t = time("rdtsc", 300_000.0, 2.6, Some(310_000.0));
        let u = check(Some(&t), Some(&count(6_639.0))).expect("untrusted");
        assert_eq!(u.kind, Contradiction::UnderValgrind);
        assert!(u
            .detail
            .starts_with("45.2 timed cycles per counted instruction"));
        // Inside the band (19.99): trusted.
        assert_eq!(check(Some(&t), Some(&count(15_010.0))), None);
    }

    #[test]
    fn a_slow_counter_is_judged_at_every_core_clock() {
        // 24 MHz virtual counter: 960 ticks are 40 µs, 20 k to 200 k core cycles, for
        // 100 k instructions: plausible, although 0.0096 ticks per instruction.
        let t = time("cntvct_el0", 960.0, 0.024, None);
        assert_eq!(check(Some(&t), Some(&count(100_000.0))), None);
        // 0.96 ticks are 40 ns, at most 200 core cycles, for 100 k instructions: not.
        let t = time("cntvct_el0", 0.96, 0.024, None);
        let u = check(Some(&t), Some(&count(100_000.0))).expect("untrusted");
        assert_eq!(u.kind, Contradiction::WhenTimed);
        // No measured rate: no way to tell.
        let t = time("cntvct_el0", 0.96, 0.0, None);
        assert_eq!(check(Some(&t), Some(&count(100_000.0))), None);
    }

    #[test]
    fn a_batch_far_below_its_single_calls_does_less_back_to_back() {
        // 40 ticks of single-call overhead come off the samples' median first.
        let t = time("rdtsc", 1_000.0, 2.6, Some(2_000.0 + 40.0));
        assert_eq!(check(Some(&t), None), None);
        let t = time("rdtsc", 999.0, 2.6, Some(2_000.0 + 40.0));
        let u = check(Some(&t), None).expect("untrusted");
        assert_eq!(u.kind, Contradiction::BackToBack);
        assert!(u
            .reason()
            .starts_with("does less when called back to back: batch median"));
        // The count disagreeing is named first.
        let u = check(Some(&t), Some(&count(1e6))).expect("untrusted");
        assert_eq!(u.kind, Contradiction::WhenTimed);
    }

    #[test]
    fn single_calls_slowed_by_a_shared_core_do_not_make_an_honest_batch_a_cheat() {
        // 101 single calls of ~17 M ticks, 60 of them preempted to ~2.2x (a shared bench
        // core, as recorded for FrodoKEM-640-AES keygen): their median is 37 M, more than
        // twice the clean batches' 17.08 M, yet the batch is no cheat.
        let mut t = time("rdtsc", 17_082_520.0, 2.6, Some(37_209_536.0));
        t.output.samples = (0..101u64)
            .map(|i| {
                if i < 41 {
                    16_400_000 + i * 10_000
                } else {
                    37_000_000 + i
                }
            })
            .collect();
        assert_eq!(check(Some(&t), None), None);
        // One that idles back to back is far below even its fastest single calls.
        t.summary.median_cycles = Some(170_000.0);
        let u = check(Some(&t), None).expect("untrusted");
        assert_eq!(u.kind, Contradiction::BackToBack);
        assert!(u.detail.contains("their 10th percentile"), "{}", u.detail);
    }
}
