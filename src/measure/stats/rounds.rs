//! Interleaved rounds: the median of per-round values with a percentile-bootstrap
//! confidence interval, paired ratios and their verdict against an A/A threshold (see
//! "Interleaved rounds" in the [module doc](super)).

use super::{median, quantile, Estimate};

/// Bootstrap resamples behind every confidence interval.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// Median of `xs` with the 95% percentile-bootstrap interval of the median, from
/// `resamples` resamples drawn with ChaCha8 seeded by `seed`. `None` for no values; one
/// value (or identical values) gives a zero-width interval.
pub fn median_ci(xs: &[f64], seed: u64, resamples: usize) -> Option<Estimate> {
    use rand::{RngExt, SeedableRng};
    let median = median(xs)?;
    let n = xs.len();
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(seed);
    let mut draw = vec![0.0; n];
    let mut medians = Vec::with_capacity(resamples.max(1));
    for _ in 0..resamples.max(1) {
        for slot in draw.iter_mut() {
            *slot = xs[rng.random_range(0..n)];
        }
        medians.push(median_in_place(&mut draw));
    }
    Some(Estimate {
        median,
        ci_low: quantile(&medians, 0.025)?,
        ci_high: quantile(&medians, 0.975)?,
    })
}

/// The level of `xs` timed by several runner processes (`group[i]` is `xs[i]`'s): the mean
/// of the processes' medians. Each process has a memory layout of its own, and on a VM one
/// operation's processes sit in two or three levels 1–3% apart, each process's batches far
/// closer (docs/figures.md, "Measured on 6 December 2026"). The median of all batches pooled
/// lands on whichever level most processes happened to take, and jumps by the gap when that
/// majority changes; the mean of the medians moves by one process's share of it. Median
/// within a process (robust to its odd batch), mean across processes (each layout one
/// draw: Kalibera & Jones 2013 on repetition at several levels; Curtsinger & Berger 2013 on
/// averaging over layouts). With fewer than two groups, the median. `None` for no values.
pub fn mean_of_medians(xs: &[f64], group: &[u32]) -> Option<f64> {
    level(xs, by_group(xs, group).as_deref())
}

/// [`mean_of_medians`] of `xs` already split into its `groups` ([`by_group`]); without
/// groups, the median of `xs`.
pub(super) fn level(xs: &[f64], groups: Option<&[Vec<f64>]>) -> Option<f64> {
    match groups {
        Some(groups) => {
            Some(groups.iter().filter_map(|g| median(g)).sum::<f64>() / groups.len() as f64)
        }
        None => median(xs),
    }
}

/// [`mean_of_medians`] with the 95% interval of a two-stage bootstrap over the groups:
/// each resample draws the groups present with replacement, then within each drawn group
/// as many of its values as it has, with replacement, and takes the mean of the drawn
/// groups' medians (Davison & Hinkley 1997, §3.8, resampling at both stages). The interval
/// thus covers how the processes differ: a promise about the next run, not only about one
/// process. It is the expanded percentile interval of [`expanded_tail`], as a mean of a
/// handful of groups needs. With one group it is [`median_ci`]. `None` for no values.
pub fn mean_of_medians_ci(
    xs: &[f64],
    group: &[u32],
    seed: u64,
    resamples: usize,
) -> Option<Estimate> {
    let Some(groups) = by_group(xs, group) else {
        return median_ci(xs, seed, resamples);
    };
    let levels = bootstrap_levels(&groups, seed, resamples);
    let tail = expanded_tail(groups.len());
    Some(Estimate {
        median: level(xs, Some(&groups))?,
        ci_low: quantile(&levels, tail)?,
        ci_high: quantile(&levels, 1.0 - tail)?,
    })
}

/// `resamples` two-stage resamples' [`mean_of_medians`] of `groups` ([`resample_level`]),
/// drawn with ChaCha8 seeded by `seed`.
fn bootstrap_levels(groups: &[Vec<f64>], seed: u64, resamples: usize) -> Vec<f64> {
    use rand::SeedableRng;
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(seed);
    let mut scratch = Vec::new();
    (0..resamples.max(1))
        .map(|_| resample_level(groups, &mut rng, &mut scratch))
        .collect()
}

/// The lower tail of a 95% bootstrap interval over `k` groups: a percentile interval of a
/// mean of few values is too narrow (its resamples spread by `sqrt((k-1)/k)` of the
/// standard error, and a t quantile, not a normal one, belongs to a spread estimated from
/// `k`), so it takes the quantiles `Φ(-sqrt(k/(k-1)) t(0.975, k-1))` and one minus that:
/// the expanded percentile interval of Hesterberg ("What Teachers Should Know About the
/// Bootstrap", The American Statistician 69(4), 2015). 0.57% for eight processes, 0.097%
/// for five, 0.025 below two groups.
pub fn expanded_tail(k: usize) -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal, StudentsT};
    if k < 2 {
        return 0.025;
    }
    let df = (k - 1) as f64;
    let t = StudentsT::new(0.0, 1.0, df).map_or(f64::INFINITY, |d| d.inverse_cdf(0.975));
    let z = (k as f64 / df).sqrt() * t;
    Normal::standard().cdf(-z)
}

/// The values of `xs` by their group (`group[i]` is `xs[i]`'s), when there are at least
/// two groups and one per value; `None` otherwise (the values are resampled alone).
pub(super) fn by_group(xs: &[f64], group: &[u32]) -> Option<Vec<Vec<f64>>> {
    let mut ids: Vec<u32> = group.to_vec();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() < 2 || group.len() != xs.len() {
        return None;
    }
    let of = |id: &u32| -> Vec<f64> {
        (xs.iter().zip(group))
            .filter(|(_, g)| *g == id)
            .map(|(x, _)| *x)
            .collect()
    };
    Some(ids.iter().map(of).collect())
}

/// One two-stage resample's [`mean_of_medians`]: as many groups as there are, drawn with
/// replacement; within each drawn group as many of its values as it has, with replacement,
/// into `scratch`, and its median; the mean of those medians.
pub(super) fn resample_level(
    groups: &[Vec<f64>],
    rng: &mut rand::rngs::ChaCha8Rng,
    scratch: &mut Vec<f64>,
) -> f64 {
    use rand::RngExt;
    let mut sum = 0.0;
    for _ in 0..groups.len() {
        let g = &groups[rng.random_range(0..groups.len())];
        scratch.clear();
        scratch.extend((0..g.len()).map(|_| g[rng.random_range(0..g.len())]));
        sum += median_in_place(scratch);
    }
    sum / groups.len() as f64
}

/// Median of a non-empty scratch buffer, reordering it in place (a selection, not a sort:
/// the bootstrap takes thousands of these).
pub(super) fn median_in_place(v: &mut [f64]) -> f64 {
    let n = v.len();
    let (below, mid, _) = v.select_nth_unstable_by(n / 2, |a, b| a.total_cmp(b));
    let mid = *mid;
    if n % 2 == 1 {
        mid
    } else {
        let low = below.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (low + mid) / 2.0
    }
}

/// Smallest threshold of a paired comparison: differences below 1% are never called.
pub const MIN_THRESHOLD: f64 = 0.01;

/// Outcome of a paired comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// B is faster than A beyond the threshold.
    Faster,
    /// B is slower than A beyond the threshold.
    Slower,
    /// No difference beyond the threshold.
    Same,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Same => "same",
        }
    }
}

/// Per-round ratios `b[i] / a[i]` of two series timed in the same rounds (pairs with a value
/// that is not positive are left out).
pub fn paired_ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter()
        .zip(b)
        .filter(|(x, y)| **x > 0.0 && **y > 0.0)
        .map(|(x, y)| y / x)
        .collect()
}

/// Threshold from an A/A pair's ratio interval: how far from 1 it reaches, never below
/// [`MIN_THRESHOLD`].
pub fn aa_threshold(aa: &Estimate) -> f64 {
    (aa.ci_high - 1.0)
        .abs()
        .max((1.0 - aa.ci_low).abs())
        .max(MIN_THRESHOLD)
}

/// `slower` when the whole ratio interval (B/A) lies above `1 + threshold`, `faster` when
/// it lies below `1 - threshold`, else `same`.
pub fn paired_verdict(ratio: &Estimate, threshold: f64) -> Verdict {
    if ratio.ci_low > 1.0 + threshold {
        Verdict::Slower
    } else if ratio.ci_high < 1.0 - threshold {
        Verdict::Faster
    } else {
        Verdict::Same
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn median_ci_of_three_values_matches_the_exact_bootstrap() {
        // Resampling [1, 2, 3]: the median is 1 when at least two draws are 1:
        // 3 (1/3)^2 (2/3) + (1/3)^3 = 7/27; likewise 3; else 2 (13/27). The 2.5% and 97.5%
        // quantiles of that distribution are 1 and 3.
        let e = median_ci(&[3.0, 1.0, 2.0], 7, 20_000).unwrap();
        assert_eq!((e.median, e.ci_low, e.ci_high), (2.0, 1.0, 3.0));
        assert!(close(e.rel_half_width(), 0.5));
    }

    #[test]
    fn median_ci_of_1_to_101_is_the_order_statistic_interval() {
        // Distribution-free 95% interval of the median of n = 101: ranks
        // 51 -/+ 1.96 sqrt(101) / 2 = 51 -/+ 9.85, i.e. about 41..61.
        let xs: Vec<f64> = (1..=101).map(f64::from).collect();
        let e = median_ci(&xs, 1, BOOTSTRAP_RESAMPLES).unwrap();
        assert_eq!(e.median, 51.0);
        assert!((39.0..=43.0).contains(&e.ci_low), "{e:?}");
        assert!((59.0..=63.0).contains(&e.ci_high), "{e:?}");
    }

    #[test]
    fn median_ci_is_deterministic_and_degenerate_cases_are_exact() {
        let xs = [10.0, 12.0, 11.0, 30.0, 10.5, 11.5, 9.0];
        assert_eq!(median_ci(&xs, 42, 500), median_ci(&xs, 42, 500));
        assert_eq!(median_ci(&[], 1, 100), None);
        let one = median_ci(&[5.0], 1, 100).unwrap();
        assert_eq!((one.median, one.ci_low, one.ci_high), (5.0, 5.0, 5.0));
        let same = median_ci(&[4.0; 9], 3, 100).unwrap();
        assert_eq!((same.ci_low, same.ci_high), (4.0, 4.0));
        assert_eq!(same.rel_half_width(), 0.0);
        let zero = median_ci(&[0.0, 0.0], 3, 10).unwrap();
        assert!(zero.rel_half_width().is_infinite());
    }

    #[test]
    fn paired_verdicts_need_the_whole_interval_beyond_the_threshold() {
        assert_eq!(
            paired_ratios(&[100.0, 200.0, 0.0], &[110.0, 180.0, 5.0]),
            vec![1.1, 0.9]
        );
        let est = |lo, hi| Estimate {
            median: (lo + hi) / 2.0,
            ci_low: lo,
            ci_high: hi,
        };
        assert_eq!(paired_verdict(&est(1.02, 1.05), 0.01), Verdict::Slower);
        assert_eq!(paired_verdict(&est(1.005, 1.05), 0.01), Verdict::Same);
        assert_eq!(paired_verdict(&est(0.90, 0.985), 0.01), Verdict::Faster);
        assert_eq!(paired_verdict(&est(0.99, 1.01), 0.01), Verdict::Same);
        // An A/A interval of 0.996..1.003 gives the 1% floor; 0.97..1.02 gives 3%.
        assert!(close(aa_threshold(&est(0.996, 1.003)), 0.01));
        assert!(close(aa_threshold(&est(0.97, 1.02)), 0.03));
        // A pair with B not positive is left out too.
        assert_eq!(paired_ratios(&[100.0, 50.0], &[0.0, 60.0]), vec![1.2]);
    }

    #[test]
    fn an_interval_that_touches_the_threshold_does_not_leave_it() {
        let est = |lo, hi| Estimate {
            median: (lo + hi) / 2.0,
            ci_low: lo,
            ci_high: hi,
        };
        let t = 0.01;
        assert_eq!(paired_verdict(&est(1.0 + t, 1.05), t), Verdict::Same);
        assert_eq!(paired_verdict(&est(0.95, 1.0 - t), t), Verdict::Same);
        assert_eq!(
            [Verdict::Faster, Verdict::Slower, Verdict::Same].map(Verdict::name),
            ["faster", "slower", "same"]
        );
    }

    #[test]
    fn the_bootstraps_median_is_the_middle_value_or_the_mean_of_the_two() {
        assert_eq!(median_in_place(&mut [5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median_in_place(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median_in_place(&mut [7.0]), 7.0);
        // Two values: their mean, in every resample that draws both.
        let e = median_ci(&[1.0, 3.0], 9, 2000).unwrap();
        assert_eq!((e.median, e.ci_low, e.ci_high), (2.0, 1.0, 3.0));
    }
    #[test]
    fn a_grouped_interval_covers_how_the_groups_differ() {
        // Four processes whose batches agree within 0.1% but whose levels differ by 1%
        // each: batches alone promise ±0.1%; the groups make it about ±1% (the bootstrap's
        // standard error of a mean of four is the levels' spread, 11.2, over 2).
        let mut xs = Vec::new();
        let mut g = Vec::new();
        for p in 0..4u32 {
            for i in 0..30 {
                xs.push(1000.0 * (1.0 + 0.01 * f64::from(p)) + f64::from(i % 3));
                g.push(p);
            }
        }
        let flat = median_ci(&xs, 5, 2000).unwrap();
        let by = mean_of_medians_ci(&xs, &g, 5, 2000).unwrap();
        // The medians 1001, 1011, 1021 and 1031: their mean.
        assert_eq!(by.median, 1016.0);
        assert!(flat.rel_half_width() < 0.006, "{flat:?}");
        assert!(by.rel_half_width() > 0.009, "{by:?}");
        assert!(by.ci_low >= 1000.0 && by.ci_high <= 1032.0, "{by:?}");
        // One group (or groups that do not match the values) is the plain bootstrap.
        assert_eq!(mean_of_medians_ci(&xs, &[0; 120], 5, 2000), Some(flat));
        assert_eq!(mean_of_medians_ci(&xs, &[0, 1], 5, 2000), Some(flat));
        assert_eq!(mean_of_medians_ci(&[], &[], 5, 10), None);
        assert_eq!(mean_of_medians(&xs, &[]), median(&xs));
        // Groups at the same level add nothing beyond the batches' spread.
        let same: Vec<f64> = (0..120).map(|i| 1000.0 + f64::from(i % 7)).collect();
        let e = mean_of_medians_ci(&same, &g, 5, 2000).unwrap();
        assert!(e.rel_half_width() <= 0.004, "{e:?}");
    }

    #[test]
    fn the_expanded_tail_widens_a_few_groups_interval() {
        // Φ(-sqrt(8/7) 2.3646) = Φ(-2.528) = 0.00573; Φ(-sqrt(5/4) 2.7764) = Φ(-3.104) =
        // 0.00095; many groups tend to the plain 2.5%.
        assert!(
            (expanded_tail(8) - 0.00573).abs() < 0.00002,
            "{}",
            expanded_tail(8)
        );
        assert!(
            (expanded_tail(5) - 0.00095).abs() < 0.00002,
            "{}",
            expanded_tail(5)
        );
        assert!((expanded_tail(1000) - 0.025).abs() < 0.0002);
        assert_eq!(expanded_tail(1), 0.025);
        assert!(expanded_tail(2) < 1e-9);
    }

    /// Six runs of ML-KEM-768-avx2 dec recorded on this project's VM (an AMD EPYC, 6
    /// December 2026, eight runner processes each, alternated with liboqs's `speed_kem`),
    /// written by `scripts/record-batches.py` from their records: per run, the per-call
    /// cycles and the process of every batch its estimate used.
    fn recorded_runs() -> Vec<(Vec<f64>, Vec<u32>)> {
        (1..=6)
            .map(|run| {
                let path = format!(
                    "{}/tests/fixtures/batches/epyc-mlkem768-avx2-dec-run{run}.csv",
                    env!("CARGO_MANIFEST_DIR")
                );
                let text = std::fs::read_to_string(&path).expect("the recording");
                text.lines()
                    .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
                    .map(|l| l.split(',').collect::<Vec<&str>>())
                    .filter(|f| f[5] == "1")
                    .map(|f| {
                        let num = |s: &str| s.parse::<f64>().expect("a number");
                        (
                            num(f[1]) / num(f[0]),
                            f[4].parse::<u32>().expect("a process"),
                        )
                    })
                    .unzip()
            })
            .collect()
    }

    #[test]
    fn on_six_recorded_runs_the_expanded_interval_holds_the_other_runs_headlines() {
        let runs = recorded_runs();
        assert_eq!(runs.len(), 6);
        let heads: Vec<f64> = (runs.iter())
            .map(|(x, g)| mean_of_medians(x, g).unwrap())
            .collect();
        // The six headlines repeat within 0.6% (coefficient of variation).
        let m = heads.iter().sum::<f64>() / 6.0;
        let sd = (heads.iter().map(|h| (h - m).powi(2)).sum::<f64>() / 5.0).sqrt();
        assert!(sd / m < 0.006, "{heads:?}");
        // How often a run's interval holds another run's headline (30 pairs): the plain
        // 2.5–97.5% quantiles of the same resamples, and the expanded ones the session uses.
        let holds = |ivs: &[(f64, f64)]| {
            (0..6)
                .flat_map(|a| (0..6).filter(move |&b| b != a).map(move |b| (a, b)))
                .filter(|&(a, b)| ivs[a].0 <= heads[b] && heads[b] <= ivs[a].1)
                .count()
        };
        let mut plain = Vec::new();
        let mut expanded = Vec::new();
        for (x, g) in &runs {
            let groups = by_group(x, g).expect("eight processes");
            assert_eq!(groups.len(), 8);
            let levels = bootstrap_levels(&groups, 1, BOOTSTRAP_RESAMPLES);
            plain.push((
                quantile(&levels, 0.025).unwrap(),
                quantile(&levels, 0.975).unwrap(),
            ));
            let e = mean_of_medians_ci(x, g, 1, BOOTSTRAP_RESAMPLES).unwrap();
            expanded.push((e.ci_low, e.ci_high));
        }
        let (p, e) = (holds(&plain), holds(&expanded));
        assert!(e >= 20 && p < e, "plain {p} of 30, expanded {e} of 30");
    }

    #[test]
    fn the_mean_of_medians_moves_by_a_share_where_the_pooled_median_jumps() {
        // Processes at two levels 2.5% apart (as ML-KEM-768-avx2 dec's on this host): the
        // pooled median jumps from one level to the other when the majority changes, the
        // mean of the medians moves by a quarter of the gap per process.
        let run = |slow: u32| -> (Vec<f64>, Vec<u32>) {
            let mut xs = Vec::new();
            let mut g = Vec::new();
            for p in 0..4u32 {
                let level = if p < slow { 1025.0 } else { 1000.0 };
                for i in 0..20 {
                    xs.push(level + f64::from(i % 5));
                    g.push(p);
                }
            }
            (xs, g)
        };
        let (one, g1) = run(1);
        let (three, g3) = run(3);
        assert_eq!(median(&one), Some(1003.0));
        assert_eq!(median(&three), Some(1026.0));
        assert_eq!(mean_of_medians(&one, &g1), Some(1008.25));
        assert_eq!(mean_of_medians(&three, &g3), Some(1020.75));
        // A process's odd batch does not move its median.
        let (mut odd, go) = run(1);
        odd[0] = 5000.0;
        assert_eq!(mean_of_medians(&odd, &go), Some(1008.25));
    }
}
