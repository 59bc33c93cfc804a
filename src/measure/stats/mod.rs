//! Pure statistics over timing trials: summaries for records, the estimates of interleaved
//! rounds and the comparison of two runs.
//!
//! Everything here is a plain function of slices of numbers, unit-tested against vectors
//! computed by hand. Nothing reads clocks or files.
//!
//! ## Definitions
//! - **Per-op value of a trial**: trial cycles (or ns) divided by its iterations.
//! - **Mean** cycles/op and ns/op: total cycles (ns) over total iterations of all trials, i.e.
//!   a mean weighted by iterations, not the mean of per-op values.
//! - **Median**: middle value of the sorted data; for an even count the mean of the two
//!   middle values.
//! - **Quantiles** ([`quantile`]): linear interpolation between closest ranks, Hyndman & Fan
//!   type 7 (the default of R and NumPy): `h = (n-1)p`, `q = x[floor h] + (h - floor h)
//!   (x[floor h + 1] - x[floor h])` on sorted data. For 1..=5 the quartiles are 2 and 4.
//! - **Standard deviation**: sample (n-1) standard deviation; `None` below two values.
//! - **CV**: standard deviation of per-op cycles across trials over their mean (a fraction).
//!   With fewer than two trials it is 0 (no dispersion can be observed).
//! - **Outliers**: modified Z-score `M = 0.6745 (x - median) / MAD` with `|M| > 3.5`
//!   (B. Iglewicz and D. Hoaglin, "How to Detect and Handle Outliers", ASQC 1993). When the
//!   MAD is 0 no point is called an outlier (the score is undefined).
//! - **Unstable**: CV above 2% ([`UNSTABLE_CV`]).
//! - **Counter rate**: total ticks over total monotonic ns of all trials, in GHz.
//! - **Off-target trials** ([`off_target`]): trials that lasted less than half or more
//!   than twice the target trial length.
//!
//! ## Interleaved rounds ([`median_ci`], [`paired_verdict`])
//! A timing session measures every (instance, operation) once per round, in a shuffled
//! order, so slow drift of the host spreads over all of them instead of landing on whichever
//! was measured at that moment (Abedi & Brecht, ICPE 2017). The estimate is the **median of
//! the per-round values** with a **95% percentile-bootstrap confidence interval**: resample
//! the rounds with replacement [`BOOTSTRAP_RESAMPLES`] times, take each resample's median,
//! and report the 2.5% and 97.5% quantiles (type 7) of those medians. The resampling uses
//! ChaCha8 seeded with the recorded seed, so the same values and seed give the same
//! interval. A paired comparison (A and B timed in the same rounds) takes the per-round
//! ratios B/A and estimates their median the same way; the verdict is `slower` or `faster`
//! only when the whole interval lies beyond `1 ± threshold`, the threshold coming from an
//! A/A pair (one object against itself) in the same session, never below 1%.
//!
//! ## Two runs on their records ([`ratio_ci`], [`band_verdict`])
//! Two campaigns timed weeks apart cannot be paired round by round, so the ratio B/A is the
//! ratio of the two medians and its **95% bootstrap interval** resamples each run's rounds
//! on their own ([`BOOTSTRAP_RESAMPLES`] times, type-7 quantiles of the resampled ratios).
//! This is the uncertainty of the two medians, which shrinks with the rounds (about
//! `1.25 s / sqrt(n)` for a median of n rounds that spread by s), not the spread of single
//! rounds. Where both runs timed the same yardstick the same is done on each round's
//! cycles divided by the yardstick's cycles in that round, which takes out a host that ran
//! at another speed during one of the runs. The verdict asks whether the interval leaves
//! an **equivalence band** `1 ± band` (default 2%, [`DEFAULT_BAND`]): `slower` or `faster`
//! when it lies wholly beyond the band, `same` when it lies wholly within it, `undecided`
//! when it crosses an edge. A difference that is certain but smaller than the band is
//! `undecided` or `same`, never flagged.

mod ratio;
mod rounds;

use crate::record::TimeOutput;
/// The schema's types these statistics fill in (`ngcc-record`).
pub use crate::record::{rounds::Estimate, TimeSummary};

/// CV above which a measurement is flagged unstable.
pub const UNSTABLE_CV: f64 = 0.02;

/// Modified Z-score limit of Iglewicz & Hoaglin.
pub const OUTLIER_Z: f64 = 3.5;

/// Arithmetic mean; `None` for no values.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        None
    } else {
        Some(xs.iter().sum::<f64>() / xs.len() as f64)
    }
}

/// Sample standard deviation (n - 1); `None` for fewer than two values.
pub fn stddev(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs)?;
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    Some((ss / (xs.len() - 1) as f64).sqrt())
}

fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

/// Median (mean of the two middle values for an even count); `None` for no values.
pub fn median(xs: &[f64]) -> Option<f64> {
    let v = sorted(xs);
    let n = v.len();
    if n == 0 {
        None
    } else if n % 2 == 1 {
        Some(v[n / 2])
    } else {
        Some((v[n / 2 - 1] + v[n / 2]) / 2.0)
    }
}

/// The quantile of the single-call samples a batch figure is held against (by the time
/// step's plausibility check and the report's integrity check). The batch
/// figure rests on clean batches only, while every single call is kept, and a call that
/// was preempted only grows: with the bench core shared, the median of 15–30 ms calls came
/// out 2.0–2.2× the clean batches' figure for honest FrodoKEM and McEliece operations
/// (their lowest calls within 0.96–1.56× of it). A low quantile is what such additive noise
/// leaves alone (Chen and Revels 2016); a KEM that idles when called back to back is far
/// below even its fastest single calls (0.010× for the `lazy` fixture).
pub const SINGLE_QUANTILE: f64 = 0.1;

/// Quantile `p` in 0..=1 by linear interpolation between closest ranks (Hyndman & Fan
/// type 7); `None` for no values. `p` is clamped to 0..=1.
pub fn quantile(xs: &[f64], p: f64) -> Option<f64> {
    let v = sorted(xs);
    if v.is_empty() {
        return None;
    }
    let p = if p.is_nan() { 0.5 } else { p.clamp(0.0, 1.0) };
    let h = (v.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(v.len() - 1);
    Some(v[lo] + (h - lo as f64) * (v[hi] - v[lo]))
}

/// Median absolute deviation from the median (unscaled); `None` for no values.
pub fn mad(xs: &[f64]) -> Option<f64> {
    let m = median(xs)?;
    let dev: Vec<f64> = xs.iter().map(|x| (x - m).abs()).collect();
    median(&dev)
}

/// Indices of outliers by modified Z-score `|0.6745 (x - median) / MAD| > 3.5`.
/// No outliers when the MAD is 0 or there are no values.
pub fn outliers(xs: &[f64]) -> Vec<usize> {
    let (Some(m), Some(d)) = (median(xs), mad(xs)) else {
        return Vec::new();
    };
    if d <= 0.0 {
        return Vec::new();
    }
    xs.iter()
        .enumerate()
        .filter(|(_, x)| (0.6745 * (*x - m) / d).abs() > OUTLIER_Z)
        .map(|(i, _)| i)
        .collect()
}

/// Coefficient of variation (stddev / mean); 0 below two values or for a zero mean.
pub fn cv(xs: &[f64]) -> f64 {
    match (stddev(xs), mean(xs)) {
        (Some(s), Some(m)) if m != 0.0 => s / m,
        _ => 0.0,
    }
}

/// Per-op cycles of every trial (trials with zero iterations are left out).
pub fn per_op_cycles(out: &TimeOutput) -> Vec<f64> {
    out.trials
        .iter()
        .filter(|t| t.iters > 0)
        .map(|t| t.cycles as f64 / t.iters as f64)
        .collect()
}

/// Per-op nanoseconds of every trial (trials with zero iterations are left out).
pub fn per_op_ns(out: &TimeOutput) -> Vec<f64> {
    out.trials
        .iter()
        .filter(|t| t.iters > 0)
        .map(|t| t.ns as f64 / t.iters as f64)
        .collect()
}

/// Summary statistics of one timing output (see the module doc for every definition).
/// An output without trials gives zeros, never NaN (records are JSON).
pub fn summarize(out: &TimeOutput) -> TimeSummary {
    let trials = out.trials.len() as u32;
    let total_iters: u64 = out.trials.iter().map(|t| t.iters).sum();
    let total_cycles: f64 = out.trials.iter().map(|t| t.cycles as f64).sum();
    let total_ns: f64 = out.trials.iter().map(|t| t.ns as f64).sum();
    let iters = out
        .trials
        .first()
        .map(|t| t.iters)
        .unwrap_or(out.calibration.iters);
    let (mean_cycles, mean_ns) = if total_iters > 0 {
        (
            total_cycles / total_iters as f64,
            total_ns / total_iters as f64,
        )
    } else {
        (0.0, 0.0)
    };
    let ops_per_s = if mean_ns > 0.0 { 1e9 / mean_ns } else { 0.0 };
    let cyc = per_op_cycles(out);
    let ns = per_op_ns(out);
    let samples: Vec<f64> = out.samples.iter().map(|&s| s as f64).collect();
    let cv = cv(&cyc);
    TimeSummary {
        trials,
        iters,
        n: total_iters,
        mean_cycles,
        mean_ns,
        ops_per_s,
        median_trial_ns: median(&ns).unwrap_or(0.0),
        median_trial_cycles: median(&cyc).unwrap_or(0.0),
        min_cycles: quantile(&cyc, 0.0).unwrap_or(0.0),
        q1_cycles: quantile(&cyc, 0.25).unwrap_or(0.0),
        q3_cycles: quantile(&cyc, 0.75).unwrap_or(0.0),
        max_cycles: quantile(&cyc, 1.0).unwrap_or(0.0),
        cv,
        sample_median: median(&samples),
        sample_q1: quantile(&samples, 0.25),
        sample_q3: quantile(&samples, 0.75),
        trial_outliers: outliers(&cyc),
        sample_outliers: outliers(&samples).len(),
        unstable: cv > UNSTABLE_CV,
        median_cycles: None,
        ci_low_cycles: None,
        ci_high_cycles: None,
        rounds: None,
        interfered_rounds: None,
        off_target_trials: off_target(out),
        counter_ghz: (total_ns > 0.0).then(|| total_cycles / total_ns),
        input_groups: super::inputs::groups(&out.samples),
    }
}

/// Indices of trials shorter than half or longer than twice the target trial length.
pub fn off_target(out: &TimeOutput) -> Vec<usize> {
    let target = out.calibration.target_trial_ns as f64;
    out.trials
        .iter()
        .enumerate()
        .filter(|(_, t)| {
            let ns = t.ns as f64;
            target > 0.0 && (ns < target / 2.0 || ns > target * 2.0)
        })
        .map(|(i, _)| i)
        .collect()
}

pub use ratio::{band_verdict, ratio_ci, ratio_ci_grouped, Change, DEFAULT_BAND};
pub use rounds::{
    aa_threshold, mean_of_medians, mean_of_medians_ci, median_ci, paired_ratios, paired_verdict,
    Verdict, BOOTSTRAP_RESAMPLES, MIN_THRESHOLD,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::output::{
        ApiSizes, Calibration, CoreCycles, Memory, Overhead, TimeOutput, Trial,
    };

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn basic_helpers() {
        let xs = [4.0, 1.0, 3.0, 2.0, 5.0];
        assert_eq!(mean(&xs), Some(3.0));
        assert_eq!(median(&xs), Some(3.0));
        assert_eq!(median(&[1.0, 2.0, 3.0, 10.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        // sum of squares 10, n-1 = 4 -> sqrt(2.5)
        assert!(close(stddev(&xs).unwrap(), 2.5f64.sqrt()));
        assert_eq!(stddev(&[7.0]), None);
        assert_eq!(mean(&[]), None);
    }

    #[test]
    fn quantile_type7() {
        let xs = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&xs, 0.25), Some(2.0));
        assert_eq!(quantile(&xs, 0.75), Some(4.0));
        assert_eq!(quantile(&xs, 0.0), Some(1.0));
        assert_eq!(quantile(&xs, 1.0), Some(5.0));
        // n=4: h = 3*0.25 = 0.75 -> 10 + 0.75*(20-10) = 17.5
        let ys = [40.0, 10.0, 30.0, 20.0];
        assert_eq!(quantile(&ys, 0.25), Some(17.5));
        // h = 2.25 -> 30 + 0.25*10 = 32.5
        assert_eq!(quantile(&ys, 0.75), Some(32.5));
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[3.0], 0.9), Some(3.0));
    }

    #[test]
    fn mad_and_outliers() {
        // median 3, |dev| = 2,1,0,1,97 -> MAD 1; M(100) = 0.6745*97 = 65.4 > 3.5
        let xs = [1.0, 2.0, 3.0, 4.0, 100.0];
        assert_eq!(mad(&xs), Some(1.0));
        assert_eq!(outliers(&xs), vec![4]);
        // M(8) = 0.6745*5/1 = 3.37 <= 3.5: not an outlier
        assert!(outliers(&[1.0, 2.0, 3.0, 4.0, 8.0]).is_empty());
        // M(9) = 0.6745*6 = 4.05 > 3.5
        assert_eq!(outliers(&[1.0, 2.0, 3.0, 4.0, 9.0]), vec![4]);
        // low outlier too
        assert_eq!(outliers(&[-50.0, 2.0, 3.0, 4.0, 5.0]), vec![0]);
        // MAD 0 -> no outliers even with a wild value
        assert!(outliers(&[5.0, 5.0, 5.0, 5.0, 900.0]).is_empty());
        assert!(outliers(&[]).is_empty());
    }

    fn output(trials: &[(u64, u64, u64)], samples: &[u64]) -> TimeOutput {
        TimeOutput {
            op: "keygen".into(),
            sizes: ApiSizes {
                algname: None,
                pk: 1,
                sk: 1,
                ct: 1,
                ss: 1,
            },
            pinned_cpu: Some(1),
            pin_error: None,
            counter: "rdtsc".into(),
            rng: "ctr-drbg".into(),
            failure: None,
            core_cycles: CoreCycles::Unavailable {
                reason: "test".into(),
            },
            calibration: Calibration {
                target_trial_ns: 1_000_000,
                batch_iters: 10,
                batch_ns: 1,
                batches_ns: Vec::new(),
                iters: 10,
                min_iters: 20,
            },
            warmup_iters: 1,
            layouts: Vec::new(),
            trials: trials
                .iter()
                .map(|&(iters, cycles, ns)| Trial {
                    iters,
                    cycles,
                    ns,
                    core_cycles: None,
                    layout_cycles: Vec::new(),
                    gauge_cycles: Vec::new(),
                })
                .collect(),
            samples: samples.to_vec(),
            overhead: Overhead {
                cycles_per_call: 0.0,
                ns_per_call: 0.0,
                single_call_cycles: 0.0,
            },
            memory: Memory {
                baseline_rss_kib: None,
                peak_rss_kib: None,
                stack_bytes: None,
                stack_painted_bytes: 0,
            },
        }
    }

    #[test]
    fn summarize_hand_computed() {
        // per-op cycles: 100, 102, 98, 101, 99 ; per-op ns: 50, 51, 49, 50.5, 49.5
        let out = output(
            &[
                (10, 1000, 500),
                (10, 1020, 510),
                (10, 980, 490),
                (10, 1010, 505),
                (10, 990, 495),
            ],
            &[90, 100, 110, 100, 95, 105, 1000],
        );
        let s = summarize(&out);
        assert_eq!(s.trials, 5);
        assert_eq!(s.iters, 10);
        assert_eq!(s.n, 50);
        assert!(close(s.mean_cycles, 5000.0 / 50.0));
        assert!(close(s.mean_ns, 2500.0 / 50.0));
        assert!(close(s.ops_per_s, 1e9 / 50.0));
        assert!(close(s.median_trial_ns, 50.0));
        assert!(close(s.median_trial_cycles, 100.0));
        assert_eq!(s.min_cycles, 98.0);
        assert_eq!(s.q1_cycles, 99.0);
        assert_eq!(s.q3_cycles, 101.0);
        assert_eq!(s.max_cycles, 102.0);
        // stddev = sqrt((0+4+4+1+1)/4) = sqrt(2.5); cv = 1.5811/100
        assert!(close(s.cv, 2.5f64.sqrt() / 100.0));
        assert!(!s.unstable);
        assert!(s.trial_outliers.is_empty());
        // 5000 ticks in 2500 ns: 2 GHz
        assert!(close(s.counter_ghz.unwrap(), 2.0));
        // samples sorted: 90 95 100 100 105 110 1000 -> median 100, q1 h=1.5 -> 97.5, q3 h=4.5 -> 107.5
        assert_eq!(s.sample_median, Some(100.0));
        assert_eq!(s.sample_q1, Some(97.5));
        assert_eq!(s.sample_q3, Some(107.5));
        // |dev| 10 5 0 0 5 10 900 -> MAD 5; M(1000) = 0.6745*900/5 = 121 -> one outlier
        assert_eq!(s.sample_outliers, 1);
    }

    #[test]
    fn off_target_trials_are_under_half_or_over_twice_the_target() {
        // target 1 ms: 0.3 ms and 2.5 ms are off target, 0.5 ms and 2 ms are not
        let out = output(
            &[
                (10, 1, 300_000),
                (10, 1, 500_000),
                (10, 1, 1_000_000),
                (10, 1, 2_000_000),
                (10, 1, 2_500_000),
            ],
            &[],
        );
        assert_eq!(summarize(&out).off_target_trials, vec![0, 4]);
    }

    #[test]
    fn summarize_weighted_mean_and_unstable() {
        // per-op cycles 100 (10 iters) and 200 (30 iters): mean = 7000/40 = 175, not 150
        let out = output(&[(10, 1000, 100), (30, 6000, 600)], &[]);
        let s = summarize(&out);
        assert!(close(s.mean_cycles, 175.0));
        assert!(close(s.mean_ns, 17.5));
        assert_eq!(s.n, 40);
        // cv = stddev(100,200)/150 = 70.71/150 = 0.4714
        assert!(close(s.cv, (5000.0f64).sqrt() / 150.0));
        assert!(s.unstable);
        assert_eq!(s.sample_median, None);
        assert_eq!(s.sample_outliers, 0);
    }

    #[test]
    fn summarize_empty_gives_zeros() {
        let s = summarize(&output(&[], &[]));
        assert_eq!(s.trials, 0);
        assert_eq!(s.mean_cycles, 0.0);
        assert_eq!(s.ops_per_s, 0.0);
        assert_eq!(s.cv, 0.0);
        assert!(!s.unstable);
        assert_eq!(s.counter_ghz, None);
        assert!(serde_json::to_string(&s).is_ok());
    }

    #[test]
    fn dispersion_of_two_values_and_of_a_zero_mean() {
        // mean 2, squares 1 + 1 over n - 1 = 1: sqrt(2)
        assert!(close(stddev(&[1.0, 3.0]).unwrap(), 2f64.sqrt()));
        assert!(close(cv(&[1.0, 3.0]), 2f64.sqrt() / 2.0));
        // CV undefined for a zero mean, unobservable for one value: 0.
        assert_eq!(cv(&[-1.0, 1.0]), 0.0);
        assert_eq!(cv(&[5.0]), 0.0);
    }

    #[test]
    fn trials_without_iterations_are_left_out_of_per_op_values() {
        let out = output(&[(10, 1000, 500), (0, 0, 0), (20, 4000, 600)], &[]);
        assert_eq!(per_op_cycles(&out), vec![100.0, 200.0]);
        assert_eq!(per_op_ns(&out), vec![50.0, 30.0]);
    }

    #[test]
    fn without_a_target_length_no_trial_is_off_target() {
        let mut out = output(&[(10, 1, 300_000), (10, 1, 2_500_000)], &[]);
        out.calibration.target_trial_ns = 0;
        assert!(off_target(&out).is_empty());
    }
}
