//! Is a difference between two measurements beyond noise? The Mann-Whitney U test (exact
//! and normal approximation) and the effect-over-dispersion rule of [`compare_samples`]
//! (see "Is a difference beyond noise?" in the [module doc](super)).

use super::{mad, median, quantile};

/// Parameters of the noise-aware comparison (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseTest {
    /// Significance level of the Mann-Whitney U test.
    pub alpha: f64,
    /// Multiple of the combined robust relative spread the effect must exceed.
    pub spread_factor: f64,
    /// Smallest relative effect reported as significant (run-to-run repeatability).
    pub min_effect: f64,
}

impl Default for NoiseTest {
    fn default() -> Self {
        NoiseTest {
            alpha: 0.05,
            spread_factor: 3.0,
            min_effect: 0.03,
        }
    }
}

/// How the separation of the two samples was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SeparationMethod {
    /// Exact Mann-Whitney U distribution.
    MannWhitneyExact,
    /// Normal approximation of the Mann-Whitney U statistic (large samples).
    MannWhitneyNormal,
    /// Samples too small for the U test to reach alpha: min..max ranges must not overlap.
    Ranges,
}

impl SeparationMethod {
    pub fn name(self) -> &'static str {
        match self {
            SeparationMethod::MannWhitneyExact => "mann-whitney exact",
            SeparationMethod::MannWhitneyNormal => "mann-whitney normal",
            SeparationMethod::Ranges => "disjoint ranges",
        }
    }
}

/// Outcome of [`compare_samples`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Difference {
    pub median_a: f64,
    pub median_b: f64,
    /// median_b / median_a.
    pub ratio: f64,
    /// Two-sided Mann-Whitney p-value (None for the ranges method).
    pub p_value: Option<f64>,
    /// Whether the samples are separated by the method's criterion.
    pub separated: bool,
    /// Relative effect `|ratio - 1|` must exceed this.
    pub threshold: f64,
    pub method: SeparationMethod,
    /// separated and `|ratio - 1| > threshold`.
    pub significant: bool,
}

/// Robust relative spread `1.4826 MAD / median` (0 for fewer than two values).
pub fn robust_rel_spread(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    match (median(xs), mad(xs)) {
        (Some(m), Some(d)) if m != 0.0 => 1.4826 * d / m.abs(),
        _ => 0.0,
    }
}

/// Mann-Whitney U of `a` against `b`: pairs with a < b count 1, ties 0.5.
pub fn mann_whitney_u(a: &[f64], b: &[f64]) -> f64 {
    let mut u = 0.0;
    for x in a {
        for y in b {
            if x < y {
                u += 1.0;
            } else if x == y {
                u += 0.5;
            }
        }
    }
    u
}

/// Number of arrangements giving each U value for sizes m and n (exact null distribution,
/// no ties): `counts[u]` for u in 0..=m*n.
fn u_distribution(m: usize, n: usize) -> Vec<f64> {
    // f[j][u]: arrangements of i a's and j b's with statistic u, built row by row over i.
    let size = m * n + 1;
    let mut prev: Vec<Vec<f64>> = (0..=n)
        .map(|_| {
            let mut v = vec![0.0; size];
            v[0] = 1.0;
            v
        })
        .collect();
    for i in 1..=m {
        let mut cur: Vec<Vec<f64>> = vec![vec![0.0; size]; n + 1];
        cur[0][0] = 1.0;
        for j in 1..=n {
            for u in 0..size {
                // U = #(a < b); place the largest element: an a adds nothing,
                // a b exceeds all i a's and adds i.
                let from_a = prev[j][u];
                let from_b = if u >= i { cur[j - 1][u - i] } else { 0.0 };
                cur[j][u] = from_a + from_b;
            }
        }
        prev = cur;
    }
    prev[n].clone()
}

/// Smallest two-sided p-value an exact U test can give for sizes m and n.
fn min_p_exact(m: usize, n: usize) -> f64 {
    // Only the two extreme arrangements give U = 0 or U = mn.
    let total = binomial(m + n, m);
    (2.0 / total).min(1.0)
}

fn binomial(n: usize, k: usize) -> f64 {
    let k = k.min(n - k);
    let mut r = 1.0;
    for i in 0..k {
        r = r * (n - i) as f64 / (i + 1) as f64;
    }
    r
}

/// Two-sided Mann-Whitney p-value and the method used.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> (f64, SeparationMethod) {
    let (m, n) = (a.len(), b.len());
    let u = mann_whitney_u(a, b);
    let mn = (m * n) as f64;
    if m * n <= 400 {
        let dist = u_distribution(m, n);
        let total: f64 = dist.iter().sum();
        let lo = u.min(mn - u).floor() as usize;
        let tail: f64 = dist[..=lo].iter().sum();
        (
            (2.0 * tail / total).min(1.0),
            SeparationMethod::MannWhitneyExact,
        )
    } else {
        let mu = mn / 2.0;
        let sigma = (mn * (m + n + 1) as f64 / 12.0).sqrt();
        let z = ((u - mu).abs() - 0.5).max(0.0) / sigma;
        (
            (2.0 * normal_sf(z)).min(1.0),
            SeparationMethod::MannWhitneyNormal,
        )
    }
}

/// Upper tail of the standard normal distribution (Abramowitz & Stegun 7.1.26 erfc).
fn normal_sf(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.3275911 * x);
    let poly = t
        * (0.254829592
            + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    0.5 * poly * (-x * x).exp()
}

/// Decide whether the medians of `a` and `b` (per-op values of two measurements) differ
/// beyond noise. `None` when either side has no values or a median is not positive.
pub fn compare_samples(a: &[f64], b: &[f64], test: &NoiseTest) -> Option<Difference> {
    let median_a = median(a)?;
    let median_b = median(b)?;
    if median_a <= 0.0 || median_b <= 0.0 {
        return None;
    }
    let ratio = median_b / median_a;
    let (p, method) = if min_p_exact(a.len(), b.len()) <= test.alpha || a.len() * b.len() > 400 {
        let (p, m) = mann_whitney_p(a, b);
        (Some(p), m)
    } else {
        (None, SeparationMethod::Ranges)
    };
    let separated = match p {
        Some(p) => p < test.alpha,
        None => {
            let (amin, amax) = (quantile(a, 0.0)?, quantile(a, 1.0)?);
            let (bmin, bmax) = (quantile(b, 0.0)?, quantile(b, 1.0)?);
            amax < bmin || bmax < amin
        }
    };
    let sa = robust_rel_spread(a);
    let sb = robust_rel_spread(b);
    let threshold = (test.spread_factor * (sa * sa + sb * sb).sqrt()).max(test.min_effect);
    let significant = separated && (ratio - 1.0).abs() > threshold;
    Some(Difference {
        median_a,
        median_b,
        ratio,
        p_value: p,
        separated,
        threshold,
        method,
        significant,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn u_statistic_and_exact_p() {
        // a entirely below b: U = 9 pairs with a < b; both tails: only 2 of C(6,3)=20 -> p 0.1
        let a = [1.0, 2.0, 3.0];
        let b = [4.0, 5.0, 6.0];
        assert_eq!(mann_whitney_u(&a, &b), 9.0);
        let (p, m) = mann_whitney_p(&a, &b);
        assert_eq!(m, SeparationMethod::MannWhitneyExact);
        assert!(close(p, 0.1));
        // 5 vs 5 fully separated: 2 / C(10,5) = 2/252
        let a5 = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b5 = [6.0, 7.0, 8.0, 9.0, 10.0];
        assert!(close(mann_whitney_p(&a5, &b5).0, 2.0 / 252.0));
        // one swap (U = 24 -> lower tail u=1): P(U<=1) = 2/252 each side -> 4/252
        let b5s = [5.5, 7.0, 8.0, 9.0, 10.0];
        let a5s = [1.0, 2.0, 3.0, 4.0, 6.0];
        assert_eq!(mann_whitney_u(&a5s, &b5s), 24.0);
        assert!(close(mann_whitney_p(&a5s, &b5s).0, 4.0 / 252.0));
        // distribution sums to C(m+n, m)
        let d = u_distribution(4, 3);
        assert!(close(d.iter().sum(), 35.0));
        assert!(close(d[0], 1.0) && close(d[12], 1.0) && close(d[1], 1.0) && close(d[2], 2.0));
    }

    #[test]
    fn normal_approximation_for_large_samples() {
        let a: Vec<f64> = (0..30).map(|i| 100.0 + i as f64 * 0.1).collect();
        let b: Vec<f64> = (0..30).map(|i| 100.05 + i as f64 * 0.1).collect();
        let (p, m) = mann_whitney_p(&a, &b);
        assert_eq!(m, SeparationMethod::MannWhitneyNormal);
        assert!(p > 0.5, "interleaved samples are not separated: p = {p}");
        assert!(close(normal_sf(0.0), 0.5));
        assert!((normal_sf(1.959964) - 0.025).abs() < 1e-5);
    }

    #[test]
    fn same_machine_noise_is_not_significant() {
        // two runs within 1%: separated, but below the 3% floor
        let a = [100.0, 100.2, 99.9, 100.1, 100.0];
        let b = [101.0, 101.1, 100.9, 101.2, 101.0];
        let d = compare_samples(&a, &b, &NoiseTest::default()).unwrap();
        assert!(d.separated);
        assert!(close(d.ratio, 1.01));
        assert!(!d.significant);
    }

    #[test]
    fn big_difference_is_significant() {
        // an -O0 build: 3x slower, quiet trials
        let a = [100.0, 100.2, 99.9, 100.1, 100.0];
        let b = [300.0, 301.0, 299.0, 300.5, 299.8];
        let d = compare_samples(&a, &b, &NoiseTest::default()).unwrap();
        assert_eq!(d.method, SeparationMethod::MannWhitneyExact);
        assert!(d.significant);
        assert!(close(d.ratio, 3.0));
        // three trials each: the ranges rule decides
        let d3 = compare_samples(&a[..3], &b[..3], &NoiseTest::default()).unwrap();
        assert_eq!(d3.method, SeparationMethod::Ranges);
        assert!(d3.significant);
        assert_eq!(d3.p_value, None);
    }

    #[test]
    fn noisy_measurements_raise_the_threshold() {
        // 10% shift but each side spreads ~10%: overlapping, not significant
        let a = [90.0, 100.0, 110.0, 95.0, 105.0];
        let b = [99.0, 110.0, 121.0, 104.5, 115.5];
        let d = compare_samples(&a, &b, &NoiseTest::default()).unwrap();
        assert!(!d.significant);
        // threshold: s = 1.4826*5/100 = 0.0741 and 1.4826*5.5/110 = 0.0741 -> 3*0.1048 = 0.3145
        assert!((d.threshold - 3.0 * (2.0f64).sqrt() * 1.4826 * 0.05).abs() < 1e-9);
    }

    #[test]
    fn compare_rejects_empty_or_zero() {
        let t = NoiseTest::default();
        assert!(compare_samples(&[], &[1.0], &t).is_none());
        assert!(compare_samples(&[0.0], &[1.0], &t).is_none());
    }
}
