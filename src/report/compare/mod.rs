//! `ngcc-pipe compare A B`: per instance and operation, the ratio B/A of the median per-op
//! cycles of two output folders with its 95% bootstrap confidence interval, the same ratio
//! adjusted for the host's speed where both runs timed the same yardstick, and whether the
//! interval leaves an equivalence band ([`crate::measure::stats::ratio_ci`],
//! [`crate::measure::stats::band_verdict`]; see "Two runs on their records" in that module).
//!
//! Each folder is read from `reports/results.json` (which carries every round's per-op
//! cycles, the yardstick's and the interference marks) or, when that file is absent, from
//! the timing records under `records/` ([`load`]).
//!
//! Where both sides timed the same yardstick object in their rounds (`run/yardstick.rs`),
//! the row gives the host's speed ratio (yardstick median B/A) and the ratio **adjusted**
//! for it: the ratio of the medians of each round's cycles divided by the yardstick's
//! cycles in that round. Where there is an adjusted ratio, a verdict must hold on **both**
//! ratios ([`both`]): the adjustment assumes the host's speed change reaches the KEM in
//! full, as it reached the yardstick, and on this kind of host it does not — issue 28's
//! probe (`scripts/host-states.sh`, docs/figures.md) saw the yardstick run at 0.59× in the
//! host's other state while each KEM ran 12–37% faster, by a factor of its own. The KEM's
//! true ratio then lies between the raw ratio (none of the host's change reached it) and the
//! adjusted one (all of it did), so "slower", "faster" or "the same" is said only when both
//! intervals say it, and "undecided" otherwise; the row's instruction verdict then tells
//! code from host.
//!
//! Where both folders counted the operation's instructions (`count` step), the row also
//! gives the instruction ratio B/A and a verdict of its own ([`CodeVerdict`]): exact, no
//! noise to test (counts are deterministic), so a change of [`CODE_CHANGE`] or more is
//! "code changed"; where the time moved beyond the band but the instructions did not, the
//! row says the host moved — the noise-free answer beside the noisy one.

mod load;
mod render;

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::measure::stats::{self, band_verdict, ratio_ci_grouped, Change, Estimate};
use crate::model::Op;

pub use load::{load, Basis, Key, Run, Series};
pub use render::{compare_csv, compare_markdown, ratio_ci_text};

/// Seed of every comparison's bootstrap: the same folders give the same intervals.
pub const SEED: u64 = 0x6e67_6363_2d63_6d70;

/// The raw ratio: medians of per-op cycles (of a run timed by several runner processes, the
/// mean of their medians) and median B / median A with its 95% CI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Raw {
    pub median_a: f64,
    pub median_b: f64,
    pub ratio: Estimate,
    /// The band verdict of this ratio's interval alone.
    pub change: Change,
}

/// The ratio with the host's speed taken out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Adjusted {
    /// Yardstick median B / A: how much slower (> 1) the host ran during B.
    pub host_ratio: f64,
    /// Median of (cycles / yardstick cycles) per round, B over A, with its 95% CI.
    pub ratio: Estimate,
    /// The band verdict of this ratio's interval alone.
    pub change: Change,
}

/// Why a row has no adjusted ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoAdjustment {
    /// A's (or B's, or neither side's) values come without a yardstick: records from before
    /// it existed, or trials timed in one block.
    MissingA,
    MissingB,
    MissingBoth,
    /// The two runs timed different yardstick objects (another compiler, another
    /// workload): dividing by them would compare two yardsticks.
    Different,
}

impl NoAdjustment {
    pub fn text(self) -> &'static str {
        match self {
            NoAdjustment::MissingA => "A's records have no yardstick",
            NoAdjustment::MissingB => "B's records have no yardstick",
            NoAdjustment::MissingBoth => "neither run's records have a yardstick",
            NoAdjustment::Different => "the runs timed different yardstick objects",
        }
    }
}

/// Which estimate a verdict used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Used {
    /// Only the raw ratio: there was no common yardstick.
    Raw,
    /// Both ratios, each judged on its own: the verdict where they agree, else undecided.
    Both,
}

impl Used {
    pub fn name(self) -> &'static str {
        match self {
            Used::Raw => "raw",
            Used::Both => "raw and adjusted",
        }
    }
}

/// The estimates of one instance and operation, and the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimates {
    /// `None` when a side has no usable values.
    pub raw: Option<Raw>,
    pub adjusted: Result<Adjusted, NoAdjustment>,
    /// Both ratios' verdict where there is an adjusted ratio ([`both`]), else the raw
    /// ratio's.
    pub verdict: Option<(Change, Used)>,
}

/// Estimate B/A from two runs' values ([`SEED`] for the bootstrap) and judge it against
/// the band `1 ± band`.
pub fn estimate(a: &Series, b: &Series, band: f64) -> Estimates {
    let resamples = stats::BOOTSTRAP_RESAMPLES;
    let (pa, pb) = (a.processes.as_slice(), b.processes.as_slice());
    let raw =
        ratio_ci_grouped((&a.values, pa), (&b.values, pb), SEED, resamples).map(|ratio| Raw {
            median_a: stats::mean_of_medians(&a.values, pa).unwrap_or(0.0),
            median_b: stats::mean_of_medians(&b.values, pb).unwrap_or(0.0),
            change: band_verdict(&ratio, band),
            ratio,
        });
    let adjusted = match (&a.yardstick, &b.yardstick) {
        (None, None) => Err(NoAdjustment::MissingBoth),
        (None, Some(_)) => Err(NoAdjustment::MissingA),
        (Some(_), None) => Err(NoAdjustment::MissingB),
        (Some((ia, _)), Some((ib, _))) if ia != ib => Err(NoAdjustment::Different),
        (Some((_, ya)), Some((_, yb))) => {
            let (rel_a, rel_b) = (
                stats::paired_ratios(ya, &a.values),
                stats::paired_ratios(yb, &b.values),
            );
            match (
                stats::median(ya),
                stats::median(yb),
                ratio_ci_grouped((&rel_a, pa), (&rel_b, pb), SEED, resamples),
            ) {
                (Some(ma), Some(mb), Some(ratio)) if ma > 0.0 => Ok(Adjusted {
                    host_ratio: mb / ma,
                    change: band_verdict(&ratio, band),
                    ratio,
                }),
                _ => Err(NoAdjustment::MissingBoth),
            }
        }
    };
    let verdict = match (&adjusted, &raw) {
        (Ok(adj), Some(raw)) => Some((both(raw.change, adj.change), Used::Both)),
        (Err(_), Some(raw)) => Some((raw.change, Used::Raw)),
        (_, None) => None,
    };
    Estimates {
        raw,
        adjusted,
        verdict,
    }
}

/// The verdict of two estimates of one ratio whose truth lies between them (the raw ratio and
/// the one adjusted for the host's speed): what they agree on, else undecided. It is the
/// band verdict of the interval spanning both.
pub fn both(raw: Change, adjusted: Change) -> Change {
    if raw == adjusted {
        raw
    } else {
        Change::Undecided
    }
}

/// One compared instance and operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareRow {
    pub submission: String,
    pub instance: String,
    pub op: Op,
    /// How each side's values were taken (rounds or trials, how many left out).
    pub basis_a: Basis,
    pub basis_b: Basis,
    pub estimates: Estimates,
    /// Mean instructions per operation of each side, when both counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<(f64, f64)>,
}

/// Instructions B / A this far from 1 or more: the code changed (counts are exact; 0.5%
/// is far above the few instructions a different environment or alignment can add).
pub const CODE_CHANGE: f64 = 0.005;

/// What the instruction counts say of one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CodeVerdict {
    /// Instructions B/A at least [`CODE_CHANGE`] from 1.
    CodeChanged,
    /// Within it: the same work.
    SameCode,
}

impl CodeVerdict {
    pub fn name(self) -> &'static str {
        match self {
            CodeVerdict::CodeChanged => "code changed",
            CodeVerdict::SameCode => "same code",
        }
    }
}

impl CompareRow {
    /// The instruction counts' own verdict, when both sides counted.
    pub fn code_verdict(&self) -> Option<CodeVerdict> {
        self.instruction_ratio().map(|x| {
            if (x - 1.0).abs() >= CODE_CHANGE {
                CodeVerdict::CodeChanged
            } else {
                CodeVerdict::SameCode
            }
        })
    }

    /// Whether the time moved beyond the band — on the raw or the adjusted ratio — while the
    /// instructions did not: the host moved, not the code.
    pub fn host_moved(&self) -> bool {
        let moved = |c: Change| matches!(c, Change::Slower | Change::Faster);
        let raw = self.estimates.raw.as_ref().is_some_and(|r| moved(r.change));
        let adjusted = self
            .estimates
            .adjusted
            .as_ref()
            .is_ok_and(|a| moved(a.change));
        (raw || adjusted) && self.code_verdict() == Some(CodeVerdict::SameCode)
    }

    /// The row with its verdict reconciled with the instruction counts: where the same
    /// code's time moved beyond the band, the verdict is `undecided`, not `slower` or
    /// `faster`. A run's interval says how its runner's rounds spread inside one process;
    /// from one run to the next the same object moves by more (its process's memory layout,
    /// the host): five runs of HQC-128-clean's keygen gave medians 1.0% apart with
    /// intervals of ±0.1–0.4%, and two example campaigns 10 minutes apart moved 6 of 51
    /// same-code operations by 1.7–3.4% with intervals of ±0.1–1.3% (docs/figures.md). The
    /// row still says the host moved ([`CompareRow::host_moved`]).
    pub fn settled(mut self) -> CompareRow {
        if self.host_moved() {
            if let Some((change, _)) = &mut self.estimates.verdict {
                *change = Change::Undecided;
            }
        }
        self
    }

    /// Instructions B / A, exact.
    pub fn instruction_ratio(&self) -> Option<f64> {
        self.instructions
            .filter(|(a, _)| *a > 0.0)
            .map(|(a, b)| b / a)
    }

    /// The verdict, if any.
    pub fn change(&self) -> Option<Change> {
        self.estimates.verdict.map(|(c, _)| c)
    }
}

/// The result of comparing two output folders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub system_a: String,
    pub system_b: String,
    pub dir_a: PathBuf,
    pub dir_b: PathBuf,
    /// Half-width of the equivalence band (0.02: ±2%).
    pub band: f64,
    pub rows: Vec<CompareRow>,
    /// `submission/instance op` measured only in A (or only in B).
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
}

/// Compare two output folders with the default band ([`stats::DEFAULT_BAND`]).
pub fn compare(a: &Path, b: &Path) -> io::Result<Comparison> {
    compare_with(a, b, stats::DEFAULT_BAND)
}

/// The keys of `keys` in reading order: submission and instance in natural order, then op.
pub fn sorted_keys<'a>(keys: impl Iterator<Item = &'a Key>) -> Vec<&'a Key> {
    let mut keys: Vec<&Key> = keys.collect();
    keys.sort_by(|x, y| {
        natural_cmp(&x.0, &y.0)
            .then_with(|| natural_cmp(&x.1, &y.1))
            .then(x.2.cmp(&y.2))
    });
    keys.dedup();
    keys
}

/// `submission/instance op`.
pub fn key_text(k: &Key) -> String {
    format!("{}/{} {}", k.0, k.1, k.2)
}

/// Compare two output folders against the equivalence band `1 ± band`.
pub fn compare_with(a: &Path, b: &Path, band: f64) -> io::Result<Comparison> {
    let (ra, rb) = (load(a)?, load(b)?);
    let mut rows = Vec::new();
    let mut only_a = Vec::new();
    for k in sorted_keys(ra.series.keys()) {
        let sa = &ra.series[k];
        match rb.series.get(k) {
            Some(sb) => rows.push(
                CompareRow {
                    submission: k.0.clone(),
                    instance: k.1.clone(),
                    op: k.2,
                    basis_a: sa.basis,
                    basis_b: sb.basis,
                    estimates: estimate(sa, sb, band),
                    instructions: ra
                        .instructions
                        .get(k)
                        .zip(rb.instructions.get(k))
                        .map(|(x, y)| (*x, *y)),
                }
                .settled(),
            ),
            None => only_a.push(key_text(k)),
        }
    }
    let only_b = sorted_keys(rb.series.keys().filter(|k| !ra.series.contains_key(*k)))
        .into_iter()
        .map(key_text)
        .collect();
    Ok(Comparison {
        system_a: ra.system,
        system_b: rb.system,
        dir_a: a.to_path_buf(),
        dir_b: b.to_path_buf(),
        band,
        rows,
        only_a,
        only_b,
    })
}

/// Compare strings with digit runs as numbers (`ML-KEM-512` before `ML-KEM-1024`).
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let b = s.as_bytes();
        for i in 1..=b.len() {
            if i == b.len() || b[i].is_ascii_digit() != b[i - 1].is_ascii_digit() {
                out.push((b[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(&cb) {
        let ord = match (x, y) {
            ((true, xs), (true, ys)) => {
                let (xt, yt) = (xs.trim_start_matches('0'), ys.trim_start_matches('0'));
                xt.len().cmp(&yt.len()).then_with(|| xt.cmp(yt))
            }
            ((_, xs), (_, ys)) => xs.cmp(ys),
        };
        if ord != std::cmp::Ordering::Equal {
            return ord;
        }
    }
    ca.len().cmp(&cb.len()).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering::*;

    /// 40 rounds of an operation costing `code` yardsticks on a host whose speed wobbles
    /// by ±2% round to round and runs `host` times slower overall.
    fn series(code: f64, host: f64, id: &str) -> Series {
        let ys: Vec<f64> = (0..40)
            .map(|i| 100_000.0 * host * (1.0 + 0.02 * ((i * 7 % 11) as f64 / 5.0 - 1.0)))
            .collect();
        let values = ys
            .iter()
            .enumerate()
            .map(|(i, y)| y * code * (1.0 + 0.002 * ((i * 3 % 5) as f64 - 2.0)))
            .collect();
        Series {
            values,
            yardstick: Some((id.into(), ys)),
            processes: Vec::new(),
            basis: Basis::Rounds {
                rounds: 40,
                left_out: 0,
                marked: true,
            },
        }
    }

    #[test]
    fn a_verdict_holds_on_both_the_raw_and_the_adjusted_ratio() {
        // Same code, host 8% slower in B: raw says slower, adjusted says the same. The
        // KEM's share of the host's change is unknown (0 to 1), so neither is said.
        let (a, b) = (series(1.5, 1.0, "y1"), series(1.5, 1.08, "y1"));
        let e = estimate(&a, &b, 0.02);
        let raw = e.raw.as_ref().unwrap();
        assert!((raw.ratio.median - 1.08).abs() < 0.005, "{e:?}");
        assert_eq!(raw.change, Change::Slower);
        let adj = e.adjusted.as_ref().unwrap();
        assert!((adj.host_ratio - 1.08).abs() < 1e-9, "{adj:?}");
        assert!((adj.ratio.median - 1.0).abs() < 0.002, "{adj:?}");
        assert_eq!(adj.change, Change::Same);
        assert_eq!(e.verdict, Some((Change::Undecided, Used::Both)));
        // Code 5% slower on a host 6% faster: raw sees nothing beyond the band, adjusted
        // sees the code: undecided again (the instruction ratio tells the two apart).
        let c = series(1.575, 0.94, "y1");
        let e = estimate(&a, &c, 0.02);
        assert!((e.raw.as_ref().unwrap().ratio.median - 0.987).abs() < 0.005);
        let adj = e.adjusted.as_ref().unwrap();
        assert!((adj.ratio.median - 1.05).abs() < 0.002, "{adj:?}");
        assert_eq!(e.verdict, Some((Change::Undecided, Used::Both)));
        // Code 10% slower on a host 2% faster: both say slower.
        let e = estimate(&a, &series(1.65, 0.98, "y1"), 0.02);
        assert_eq!(e.verdict, Some((Change::Slower, Used::Both)));
        // Same code on the same host: both say the same.
        let e = estimate(&a, &series(1.5, 1.0, "y1"), 0.02);
        assert_eq!(e.verdict, Some((Change::Same, Used::Both)));
    }

    #[test]
    fn both_ratios_agree_or_the_verdict_is_undecided() {
        use Change::*;
        for x in [Slower, Faster, Same, Undecided] {
            assert_eq!(both(x, x), x);
        }
        for (r, a) in [
            (Slower, Same),
            (Same, Faster),
            (Slower, Faster),
            (Undecided, Same),
        ] {
            assert_eq!(both(r, a), Undecided);
            assert_eq!(both(a, r), Undecided);
        }
    }

    #[test]
    fn without_a_common_yardstick_the_raw_ratio_decides_and_says_why() {
        let a = series(1.5, 1.0, "y1");
        let e = estimate(&a, &series(1.5, 1.0, "y2"), 0.02);
        assert_eq!(e.adjusted, Err(NoAdjustment::Different));
        assert_eq!(e.verdict.map(|v| v.1), Some(Used::Raw));
        let bare = Series {
            yardstick: None,
            ..a.clone()
        };
        assert_eq!(
            estimate(&a, &bare, 0.02).adjusted,
            Err(NoAdjustment::MissingB)
        );
        assert_eq!(
            estimate(&bare, &a, 0.02).adjusted,
            Err(NoAdjustment::MissingA)
        );
        assert_eq!(
            estimate(&bare, &bare, 0.02).adjusted,
            Err(NoAdjustment::MissingBoth)
        );
        // Hand-computed: A constant 200, B 190, 200, 220 (median 200): the resampled
        // medians of B are 190, 200 or 220 (7/27, 13/27, 7/27), the ratio 0.95..1.1, which
        // crosses the ±2% band: undecided.
        let flat = |v: Vec<f64>| Series {
            basis: Basis::Trials { trials: v.len() },
            values: v,
            yardstick: None,
            processes: Vec::new(),
        };
        let e = estimate(
            &flat(vec![200.0; 3]),
            &flat(vec![220.0, 190.0, 200.0]),
            0.02,
        );
        let raw = e.raw.unwrap();
        assert_eq!(
            (raw.median_a, raw.median_b, raw.ratio.median),
            (200.0, 200.0, 1.0)
        );
        assert_eq!((raw.ratio.ci_low, raw.ratio.ci_high), (0.95, 1.1));
        assert_eq!(e.verdict, Some((Change::Undecided, Used::Raw)));
        let empty = estimate(&flat(vec![]), &flat(vec![1.0]), 0.02);
        assert_eq!((empty.raw, empty.verdict), (None, None));
    }

    #[test]
    fn a_yardstick_that_read_zero_in_most_rounds_adjusts_nothing() {
        // A's yardstick read 0 in 25 of its 40 rounds (its median is 0): no host ratio can
        // be taken from it, the raw ratio decides.
        let a = series(1.5, 1.0, "y1");
        let mut zeros = a.clone();
        if let Some((_, ys)) = &mut zeros.yardstick {
            ys.iter_mut().take(25).for_each(|y| *y = 0.0);
        }
        let e = estimate(&zeros, &a, 0.02);
        assert_eq!(e.adjusted, Err(NoAdjustment::MissingBoth));
        assert_eq!(e.verdict, Some((Change::Same, Used::Raw)));
    }

    #[test]
    fn natural_order() {
        assert_eq!(natural_cmp("ML-KEM-512", "ML-KEM-1024"), Less);
        assert_eq!(natural_cmp("HQC-256", "HQC-128"), Greater);
        assert_eq!(natural_cmp("a", "a"), Equal);
        assert_eq!(natural_cmp("", "x"), Less);
        assert_eq!(natural_cmp("x2", "x10"), Less);
    }

    #[test]
    fn keys_read_in_natural_order_once_each() {
        let k = |s: &str, i: &str, op| (s.to_string(), i.to_string(), op);
        let keys = [
            k("ml-kem", "ML-KEM-1024", Op::Keygen),
            k("hqc", "HQC-128", Op::Dec),
            k("ml-kem", "ML-KEM-512", Op::Dec),
            k("ml-kem", "ML-KEM-512", Op::Keygen),
            k("ml-kem", "ML-KEM-1024", Op::Keygen),
        ];
        let sorted: Vec<String> = sorted_keys(keys.iter()).into_iter().map(key_text).collect();
        assert_eq!(
            sorted,
            [
                "hqc/HQC-128 dec",
                "ml-kem/ML-KEM-512 keygen",
                "ml-kem/ML-KEM-512 dec",
                "ml-kem/ML-KEM-1024 keygen"
            ]
        );
    }

    #[test]
    fn the_instruction_ratio_needs_a_count_on_both_sides() {
        let a = series(1.5, 1.0, "y1");
        let mut row = CompareRow {
            submission: "s".into(),
            instance: "i".into(),
            op: Op::Enc,
            basis_a: a.basis,
            basis_b: a.basis,
            estimates: estimate(&a, &a, 0.02),
            instructions: Some((200.0, 150.0)),
        };
        assert_eq!(row.instruction_ratio(), Some(0.75));
        assert_eq!(row.change(), Some(Change::Same));
        row.instructions = Some((0.0, 150.0));
        assert_eq!(row.instruction_ratio(), None);
        row.instructions = None;
        assert_eq!(row.instruction_ratio(), None);
    }

    /// The same code timed 10% slower (raw and adjusted agree: the yardstick did not move):
    /// `slower` on time alone, `undecided` once the equal instruction counts are known.
    #[test]
    fn the_same_codes_time_moving_is_undecided() {
        let (a, b) = (series(1.0, 1.0, "y1"), series(1.1, 1.0, "y1"));
        let row = |instructions| CompareRow {
            submission: "s".into(),
            instance: "i".into(),
            op: Op::Keygen,
            basis_a: a.basis,
            basis_b: b.basis,
            estimates: estimate(&a, &b, 0.02),
            instructions,
        };
        assert_eq!(row(None).settled().change(), Some(Change::Slower));
        let changed = row(Some((100.0, 120.0))).settled();
        assert_eq!(changed.change(), Some(Change::Slower));
        assert!(!changed.host_moved());
        let same = row(Some((100.0, 100.2))).settled();
        assert_eq!(same.change(), Some(Change::Undecided));
        assert!(same.host_moved());
        assert_eq!(
            super::render::verdict_cell(&same),
            "undecided (time slower on the same code: run to run)"
        );
    }
}
