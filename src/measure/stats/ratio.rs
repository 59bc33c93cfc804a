//! Two runs compared on their records: the ratio of their medians with a bootstrap
//! confidence interval, and whether that interval leaves an equivalence band (see "Two runs
//! on their records" in the [module doc](super)).

use super::rounds::{by_group, expanded_tail, level, median_in_place, resample_level};
use super::{quantile, Estimate};

/// Default equivalence band of a comparison on records: changes within ±2% are the same.
pub const DEFAULT_BAND: f64 = 0.02;

/// `median(b) / median(a)` with its 95% percentile-bootstrap interval: every resample
/// draws `a.len()` of a's values and `b.len()` of b's with replacement, independently (two
/// runs' rounds are not paired), and takes the ratio of the two medians; the interval is
/// the 2.5% and 97.5% quantiles (type 7) of `resamples` such ratios, drawn with ChaCha8
/// seeded by `seed`. `None` when a side has no values or a median that is not positive.
pub fn ratio_ci(a: &[f64], b: &[f64], seed: u64, resamples: usize) -> Option<Estimate> {
    ratio_ci_grouped((a, &[]), (b, &[]), seed, resamples)
}

/// [`ratio_ci`] where each side's values come in groups (`(values, group of each)`: the
/// runner processes that timed them): a side with two or more groups stands for the mean of
/// its processes' medians ([`super::mean_of_medians`], the figure a timing session records) and
/// is resampled in two stages, groups then values within each
/// ([`super::mean_of_medians_ci`]), so the interval covers how its processes differ, and
/// the interval is expanded for the fewer processes of the two sides ([`expanded_tail`]);
/// a side without groups as in [`ratio_ci`].
pub fn ratio_ci_grouped(
    (a, ga): (&[f64], &[u32]),
    (b, gb): (&[f64], &[u32]),
    seed: u64,
    resamples: usize,
) -> Option<Estimate> {
    use rand::SeedableRng;
    let (ga, gb) = (by_group(a, ga), by_group(b, gb));
    let (ma, mb) = (level(a, ga.as_deref())?, level(b, gb.as_deref())?);
    if ma <= 0.0 || mb <= 0.0 {
        return None;
    }
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(seed);
    let (mut da, mut db) = (vec![0.0; a.len()], vec![0.0; b.len()]);
    let mut ratios = Vec::with_capacity(resamples.max(1));
    for _ in 0..resamples.max(1) {
        let la = resample(a, ga.as_deref(), &mut rng, &mut da);
        let lb = resample(b, gb.as_deref(), &mut rng, &mut db);
        ratios.push(lb / la);
    }
    let fewest = [&ga, &gb]
        .iter()
        .filter_map(|g| g.as_ref().map(Vec::len))
        .min();
    let tail = fewest.map_or(0.025, expanded_tail);
    Some(Estimate {
        median: mb / ma,
        ci_low: quantile(&ratios, tail)?,
        ci_high: quantile(&ratios, 1.0 - tail)?,
    })
}

/// One resample of a side's level, with `buf` as scratch: by its `groups` in two stages
/// ([`resample_level`]), else the median of as many of `xs` as it has, with replacement.
fn resample(
    xs: &[f64],
    groups: Option<&[Vec<f64>]>,
    rng: &mut rand::rngs::ChaCha8Rng,
    buf: &mut Vec<f64>,
) -> f64 {
    use rand::RngExt;
    match groups {
        Some(g) => resample_level(g, rng, buf),
        None => {
            buf.resize(xs.len(), 0.0);
            for slot in buf.iter_mut() {
                *slot = xs[rng.random_range(0..xs.len())];
            }
            median_in_place(buf)
        }
    }
}

/// What a ratio's interval says against an equivalence band `1 ± band`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    /// The whole interval lies above `1 + band`: B is slower.
    Slower,
    /// The whole interval lies below `1 - band`: B is faster.
    Faster,
    /// The whole interval lies within the band: the same, as far as the band cares.
    Same,
    /// The interval crosses an edge of the band: the rounds cannot tell.
    Undecided,
}

impl Change {
    pub fn name(self) -> &'static str {
        match self {
            Change::Slower => "slower",
            Change::Faster => "faster",
            Change::Same => "same",
            Change::Undecided => "undecided",
        }
    }

    /// Slower or faster: the interval left the band.
    pub fn significant(self) -> bool {
        matches!(self, Change::Slower | Change::Faster)
    }
}

/// The verdict of a ratio B/A against the band `1 ± band` (see [`Change`]).
pub fn band_verdict(ratio: &Estimate, band: f64) -> Change {
    if ratio.ci_low > 1.0 + band {
        Change::Slower
    } else if ratio.ci_high < 1.0 - band {
        Change::Faster
    } else if ratio.ci_low >= 1.0 - band && ratio.ci_high <= 1.0 + band {
        Change::Same
    } else {
        Change::Undecided
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(lo: f64, hi: f64) -> Estimate {
        Estimate {
            median: (lo + hi) / 2.0,
            ci_low: lo,
            ci_high: hi,
        }
    }

    #[test]
    fn ratio_of_a_constant_side_is_the_other_sides_median_interval() {
        // A is 2 in every round, so every resample's ratio is median(B*) / 2. B = [2, 4, 6]:
        // its resampled median is 2, 4 or 6 with probabilities 7/27, 13/27, 7/27 (see
        // `median_ci_of_three_values_matches_the_exact_bootstrap`), so the ratio is 1, 2 or
        // 3 and the 2.5% and 97.5% quantiles are 1 and 3.
        let r = ratio_ci(&[2.0; 5], &[6.0, 2.0, 4.0], 11, 20_000).unwrap();
        assert_eq!((r.median, r.ci_low, r.ci_high), (2.0, 1.0, 3.0));
        // Constant on both sides: exact, zero width.
        let c = ratio_ci(&[4.0, 4.0], &[5.0, 5.0, 5.0], 1, 100).unwrap();
        assert_eq!((c.median, c.ci_low, c.ci_high), (1.25, 1.25, 1.25));
    }

    #[test]
    fn ratio_of_a_run_with_itself_straddles_one_and_is_deterministic() {
        let xs: Vec<f64> = (0..60).map(|i| 1000.0 + ((i * 37) % 61) as f64).collect();
        let r = ratio_ci(&xs, &xs, 5, 2000).unwrap();
        assert_eq!(r.median, 1.0);
        assert!(r.ci_low < 1.0 && r.ci_high > 1.0, "{r:?}");
        // Medians 1030 +- ~8 (the order-statistic interval of 60 values is ranks 23..38,
        // 1022..1038): each side moves by under 1%, their ratio by under 2%.
        assert!(r.ci_low > 0.98 && r.ci_high < 1.02, "{r:?}");
        assert_eq!(ratio_ci(&xs, &xs, 5, 2000), Some(r));
        assert_eq!(ratio_ci(&[], &xs, 5, 10), None);
        assert_eq!(ratio_ci(&[0.0], &xs, 5, 10), None);
    }

    #[test]
    fn the_verdict_asks_whether_the_interval_leaves_the_band() {
        assert_eq!(band_verdict(&est(1.021, 1.05), 0.02), Change::Slower);
        assert_eq!(band_verdict(&est(0.90, 0.979), 0.02), Change::Faster);
        assert_eq!(band_verdict(&est(0.98, 1.02), 0.02), Change::Same);
        assert_eq!(band_verdict(&est(0.995, 1.004), 0.02), Change::Same);
        // Beyond 1 but not beyond the band, or crossing its edge: undecided.
        assert_eq!(band_verdict(&est(1.01, 1.03), 0.02), Change::Undecided);
        assert_eq!(band_verdict(&est(0.95, 1.05), 0.02), Change::Undecided);
        // A wider band swallows the same interval.
        assert_eq!(band_verdict(&est(1.021, 1.05), 0.05), Change::Same);
        assert!(Change::Slower.significant() && !Change::Undecided.significant());
    }

    #[test]
    fn an_interval_on_an_edge_of_the_band_is_within_it() {
        let b = 0.02;
        assert_eq!(band_verdict(&est(1.0 + b, 1.05), b), Change::Undecided);
        assert_eq!(band_verdict(&est(0.95, 1.0 - b), b), Change::Undecided);
        assert_eq!(band_verdict(&est(1.0 - b, 1.0 + b), b), Change::Same);
        assert_eq!(
            [
                Change::Slower,
                Change::Faster,
                Change::Same,
                Change::Undecided
            ]
            .map(|c| (c.name(), c.significant())),
            [
                ("slower", true),
                ("faster", true),
                ("same", false),
                ("undecided", false)
            ]
        );
    }

    #[test]
    fn a_side_whose_median_is_not_positive_has_no_ratio() {
        assert_eq!(ratio_ci(&[5.0, 6.0], &[0.0, 0.0, 1.0], 1, 10), None);
        assert_eq!(ratio_ci(&[5.0, 6.0], &[], 1, 10), None);
        assert!(ratio_ci(&[5.0, 6.0], &[0.0, 1.0, 1.0], 1, 10).is_some());
    }

    #[test]
    fn grouped_sides_widen_the_ratio_by_how_their_processes_differ() {
        // Each side: four processes whose 30 batches spread evenly over ±1% around their
        // level, the levels 1% apart; B is A again (the same code in another run).
        let side = |shift: f64| -> (Vec<f64>, Vec<u32>) {
            let mut xs = Vec::new();
            let mut g = Vec::new();
            for p in 0..4u32 {
                for i in 0..30 {
                    let level = 1.0 + 0.01 * f64::from((p + shift as u32) % 4);
                    xs.push(1000.0 * level + (f64::from(i) - 14.5) * 0.69);
                    g.push(p);
                }
            }
            (xs, g)
        };
        let ((a, ga), (b, gb)) = (side(0.0), side(1.0));
        let flat = ratio_ci(&a, &b, 3, 2000).unwrap();
        let grouped = ratio_ci_grouped((&a, &ga), (&b, &gb), 3, 2000).unwrap();
        assert_eq!(grouped.median, flat.median);
        assert!(flat.rel_half_width() < 0.008, "{flat:?}");
        assert!(grouped.rel_half_width() > 0.01, "{grouped:?}");
        assert!(grouped.ci_low < 1.0 && grouped.ci_high > 1.0, "{grouped:?}");
        // Without groups (or with one) it is the plain ratio, draw for draw.
        assert_eq!(
            ratio_ci_grouped((&a, &[]), (&b, &[0; 120]), 3, 2000),
            Some(flat)
        );
    }
}
