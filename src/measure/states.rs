//! The host's speed states, read from the yardstick timed inside every batch, and which
//! batches an estimate rests on.
//!
//! Why: on a shared or virtual machine the host does not drift slowly, it switches. This
//! project's 2-vCPU VM has two states: in one the yardstick runs at 0.59–0.64× its speed in
//! the other and every KEM 12–37% faster, each by its own factor, and the states last from
//! a fraction of a second to a few seconds (`scripts/host-states.sh`, docs/figures.md). A
//! median over all batches is then a statistic of the mix: it lands in whichever state held
//! the majority and moves by up to 30% when the mix crosses one half, while its bootstrap
//! interval, which sees only the spread, stays narrow. No single divisor cancels the
//! states either (they slow different code by different factors).
//!
//! So the session measures the state with every batch (a yardstick block before each of
//! the batch's blocks and after the last, `kem_native::serve`) and estimates within one
//! state: the **uncontended** one, where the yardstick runs fastest — the state closest to
//! the reference method's dedicated core (no other work on the core, nothing shared with
//! it). This is the low-quantile idea of Chen & Revels ("Robust benchmarking in noisy
//! environments", 2016): under noise that only ever adds time, the fastest timings are the
//! most repeatable estimate of the code's own cost; here the state is observed directly
//! instead of being inferred from the KEM's own timings, so the estimate rests on medians
//! (not minima) within the batches the yardstick says were uncontended (one per runner
//! process, then their mean: `stats::mean_of_medians`), and every batch's state is kept in
//! the record.
//!
//! The rule ([`two_states`], [`state_of`], [`select`]):
//! - the yardstick's per-call cycles of every block of the session, on a log scale, are
//!   split where two means fit them best (1-D two-means); the host has two states when
//!   each side holds at least [`MIN_STATE_SHARE`] of the blocks and the two medians are at
//!   least [`MIN_STATE_GAP`] apart, else one;
//! - a batch is uncontended when every one of its yardstick blocks lies below the cut,
//!   contended when every one lies above it, mixed otherwise (the state changed during it);
//! - an estimate uses the clean (not interfered) uncontended batches when there are at
//!   least [`MIN_ROUNDS`] of them; otherwise it falls back to the clean batches (or all)
//!   and is flagged, as is an estimate whose batches were mostly interfered.

use super::rounds::MIN_ROUNDS;
use super::stats::median;

/// Share of the yardstick's blocks each state must hold (below: one state).
pub const MIN_STATE_SHARE: f64 = 0.05;

/// The slower state's median must be at least this much above the faster one's (a
/// fraction) for two states: a unimodal spread of a few percent splits into halves whose
/// medians lie about 1.6 standard deviations apart, well under this.
pub const MIN_STATE_GAP: f64 = 0.10;

/// Share of clean batches below which an estimate is flagged. Measured on this project's
/// 2-vCPU VM (docs/figures.md): a quiet example campaign had 4% of its batches interfered
/// (272 of 6,630), one with a busy loop pinned to the bench core (on and off every 0.4 s)
/// 40% (2,383 of 5,907), and there even the clean batches ran 10-20% slow (the loop's
/// caches, the core's clock): when more than a fifth of the batches were interfered, the
/// clean ones are not to be trusted either.
pub const MIN_CLEAN_SHARE: f64 = 0.8;

/// The two states of a session's host, from the yardstick's blocks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cut {
    /// Per-call cycles of the yardstick between the states.
    pub threshold: f64,
    /// Medians of the yardstick's per-call cycles in each state.
    pub uncontended: f64,
    pub contended: f64,
    /// Share of the blocks below the cut.
    pub uncontended_share: f64,
}

/// The two states of `blocks` (the yardstick's per-call cycles in every block of the
/// session), or `None` for one state (or fewer than [`MIN_ROUNDS`] blocks).
pub fn two_states(blocks: &[f64]) -> Option<Cut> {
    let mut v: Vec<f64> = blocks
        .iter()
        .copied()
        .filter(|v| *v > 0.0 && v.is_finite())
        .collect();
    let n = v.len();
    if n < MIN_ROUNDS {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let logs: Vec<f64> = v.iter().map(|x| x.ln()).collect();
    let mut s1 = vec![0.0; n + 1];
    let mut s2 = vec![0.0; n + 1];
    for (i, x) in logs.iter().enumerate() {
        s1[i + 1] = s1[i] + x;
        s2[i + 1] = s2[i] + x * x;
    }
    let sse = |a: usize, b: usize| {
        let k = (b - a) as f64;
        s2[b] - s2[a] - (s1[b] - s1[a]).powi(2) / k
    };
    // The best split of all; a state holding under MIN_STATE_SHARE of the blocks is none.
    let split =
        (1..n).min_by(|&i, &j| (sse(0, i) + sse(i, n)).total_cmp(&(sse(0, j) + sse(j, n))))?;
    let least = n as f64 * MIN_STATE_SHARE;
    if (split as f64) < least || ((n - split) as f64) < least {
        return None;
    }
    let (u, c) = (median(&v[..split])?, median(&v[split..])?);
    (c >= u * (1.0 + MIN_STATE_GAP)).then(|| Cut {
        threshold: ((logs[split - 1] + logs[split]) / 2.0).exp(),
        uncontended: u,
        contended: c,
        uncontended_share: split as f64 / n as f64,
    })
}

/// The host's state during one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Every yardstick block of the batch below the cut (or the host had one state).
    Uncontended,
    /// Every block above it.
    Contended,
    /// Some on either side: the state changed during the batch.
    Mixed,
}

impl State {
    /// One letter per batch, for the appendix's strip of states.
    pub fn letter(self) -> char {
        match self {
            State::Uncontended => 'u',
            State::Contended => 'c',
            State::Mixed => 'm',
        }
    }
}

/// The state of a batch whose yardstick blocks ran at `blocks` per-call cycles; with one
/// state (`cut` none) or no blocks, uncontended.
pub fn state_of(blocks: &[f64], cut: Option<&Cut>) -> State {
    let Some(c) = cut else {
        return State::Uncontended;
    };
    let below = blocks.iter().filter(|&&v| v < c.threshold).count();
    if below == blocks.len() {
        State::Uncontended
    } else if below == 0 {
        State::Contended
    } else {
        State::Mixed
    }
}

/// Which batches an estimate rests on, and why it may not claim its precision.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// Indices of the batches used.
    pub used: Vec<usize>,
    /// Batches not interfered.
    pub clean: usize,
    /// Clean batches in the uncontended state (all clean ones with one state).
    pub uncontended: usize,
    /// Whether `used` is the clean uncontended batches of a two-state host.
    pub within_state: bool,
    /// Why the estimate does not earn its precision (empty: it may claim it).
    pub flags: Vec<String>,
}

/// The batches out of `n` an estimate uses: the clean ones (`interfered(i)` false) in the
/// uncontended state (`state(i)`) when there are at least [`MIN_ROUNDS`] of them; else the
/// clean ones when there are that many, else all; a two-state host without enough
/// uncontended batches is flagged, and so are clean batches under [`MIN_CLEAN_SHARE`] of
/// all. `two` says whether the host had two states.
pub fn select(
    n: usize,
    interfered: impl Fn(usize) -> bool,
    state: impl Fn(usize) -> State,
    two: bool,
) -> Selection {
    let clean: Vec<usize> = (0..n).filter(|&i| !interfered(i)).collect();
    let calm: Vec<usize> = clean
        .iter()
        .copied()
        .filter(|&i| state(i) == State::Uncontended)
        .collect();
    let mut flags = Vec::new();
    if n > 0 && (clean.len() as f64) < MIN_CLEAN_SHARE * n as f64 {
        flags.push(format!(
            "only {} of {n} batches clean ({:.0}%): the bench core was shared",
            clean.len(),
            100.0 * clean.len() as f64 / n as f64
        ));
    }
    let (used, within_state) = if two && calm.len() >= MIN_ROUNDS {
        (calm.clone(), true)
    } else {
        if two {
            flags.push(format!(
                "the host's uncontended state holds only {} of {n} batches (at least \
                 {MIN_ROUNDS} needed): the figure mixes the host's states",
                calm.len()
            ));
        }
        if clean.len() >= MIN_ROUNDS {
            (clean.clone(), false)
        } else {
            ((0..n).collect(), false)
        }
    };
    Selection {
        used,
        clean: clean.len(),
        uncontended: if two { calm.len() } else { clean.len() },
        within_state,
        flags,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::{median, quantile};

    #[test]
    fn two_clusters_far_apart_are_two_states() {
        // 70 blocks near 64 k and 30 near 100 k (the host-states probe's figures).
        let mut v: Vec<f64> = (0..70).map(|i| 63_000.0 + (i % 7) as f64 * 300.0).collect();
        v.extend((0..30).map(|i| 98_000.0 + (i % 5) as f64 * 1_000.0));
        let c = two_states(&v).expect("two states");
        assert!(c.threshold > 65_000.0 && c.threshold < 98_000.0, "{c:?}");
        assert!((c.uncontended_share - 0.7).abs() < 1e-9);
        assert_eq!(c.uncontended, 63_900.0);
        assert_eq!(c.contended, 100_000.0);
        assert_eq!(
            state_of(&[63_000.0, 64_000.0], Some(&c)),
            State::Uncontended
        );
        assert_eq!(state_of(&[99_000.0, 101_000.0], Some(&c)), State::Contended);
        assert_eq!(state_of(&[63_000.0, 101_000.0], Some(&c)), State::Mixed);
    }

    #[test]
    fn one_spread_of_a_few_percent_is_one_state() {
        // A smooth spread of ±5% around 100: the best split's medians are about 5% apart.
        let v: Vec<f64> = (0..200).map(|i| 95.0 + (i % 101) as f64 * 0.1).collect();
        assert_eq!(two_states(&v), None);
        assert_eq!(state_of(&[1e9], None), State::Uncontended);
        // Too few blocks to tell.
        assert_eq!(two_states(&[1.0, 2.0, 1.0, 2.0]), None);
        assert_eq!(two_states(&[]), None);
    }

    #[test]
    fn a_small_second_cluster_counts_only_above_its_share() {
        // 3 of 100 blocks far above: the best split isolates them, below 5%: one state.
        let mut v = vec![100.0; 97];
        v.extend([200.0; 3]);
        assert_eq!(two_states(&v), None);
        // 10 of 100: two states.
        let mut v = vec![100.0; 90];
        v.extend([200.0; 10]);
        assert!(two_states(&v).is_some());
    }

    /// One member's batches as the session saw them on this project's VM (an AMD EPYC,
    /// 2026-12-02, the example campaign's ML-KEM-768-clean keygen), written by
    /// `scripts/record-batches.py` from its record: (per-call cycles, interfered, the
    /// yardstick's blocks).
    fn recording() -> Vec<(f64, bool, Vec<f64>)> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/batches/epyc-mlkem768-clean-keygen.csv"
        );
        let text = std::fs::read_to_string(path).expect("the recording");
        text.lines()
            .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                let num = |s: &str| s.parse::<f64>().expect("a number");
                let blocks = f[3].split(';').map(num).collect();
                (num(f[1]) / num(f[0]), f[2] == "1", blocks)
            })
            .collect()
    }

    #[test]
    fn on_recorded_batches_the_estimate_is_the_uncontended_states_and_tighter() {
        let r = recording();
        assert_eq!(r.len(), 130);
        let blocks: Vec<f64> = r.iter().flat_map(|b| b.2.iter().copied()).collect();
        let cut = two_states(&blocks).expect("this recording has two states");
        // The yardstick's states lie far apart (0.55x then) and the faster held a third.
        assert!(cut.uncontended / cut.contended < 0.7, "{cut:?}");
        assert!((0.2..0.5).contains(&cut.uncontended_share), "{cut:?}");
        let st: Vec<State> = r.iter().map(|b| state_of(&b.2, Some(&cut))).collect();
        let s = select(r.len(), |i| r[i].1, |i| st[i], true);
        assert!(s.within_state && s.flags.is_empty(), "{:?}", s.flags);
        let used: Vec<f64> = s.used.iter().map(|&i| r[i].0).collect();
        let all: Vec<f64> = r.iter().map(|b| b.0).collect();
        let (m_used, m_all) = (median(&used).unwrap(), median(&all).unwrap());
        // The median of all batches is a statistic of the mix, 15% or more above the
        // uncontended state's ...
        assert!(m_all > 1.15 * m_used, "all {m_all}, used {m_used}");
        // ... and the state's batches are tight where the mix is not.
        let spread = |v: &[f64]| {
            (quantile(v, 0.75).unwrap() - quantile(v, 0.25).unwrap()) / median(v).unwrap()
        };
        assert!(
            spread(&used) < 0.05 && spread(&all) > 2.0 * spread(&used),
            "{} {}",
            spread(&used),
            spread(&all)
        );
    }

    #[test]
    fn the_estimate_rests_on_clean_uncontended_batches_when_there_are_enough() {
        use State::*;
        // 30 batches: 0..20 uncontended, 20..30 contended; 3 and 25 interfered.
        let st = |i: usize| if i < 20 { Uncontended } else { Contended };
        let s = select(30, |i| i == 3 || i == 25, st, true);
        assert!(s.within_state);
        assert_eq!(s.used.len(), 19);
        assert!(!s.used.contains(&3));
        assert_eq!((s.clean, s.uncontended), (28, 19));
        assert!(s.flags.is_empty(), "{:?}", s.flags);
        // One state: every clean batch.
        let s = select(30, |i| i == 3, |_| Uncontended, false);
        assert!(!s.within_state);
        assert_eq!(s.used.len(), 29);
        assert!(s.flags.is_empty());
    }

    #[test]
    fn too_few_uncontended_or_clean_batches_are_flagged() {
        use State::*;
        // Two states but only 6 uncontended batches: the clean ones, flagged.
        let s = select(
            40,
            |_| false,
            |i| if i < 6 { Uncontended } else { Mixed },
            true,
        );
        assert!(!s.within_state);
        assert_eq!(s.used.len(), 40);
        assert_eq!(s.flags.len(), 1);
        assert!(s.flags[0].contains("only 6 of 40 batches"), "{:?}", s.flags);
        // A loaded core: 4 of 40 clean.
        let s = select(40, |i| i >= 4, |_| Uncontended, false);
        assert_eq!(s.used.len(), 40);
        assert!(
            s.flags[0].starts_with("only 4 of 40 batches clean (10%)"),
            "{:?}",
            s.flags
        );
        // Mostly interfered but enough clean ones: the clean ones, still flagged.
        let s = select(40, |i| i >= 15, |_| Uncontended, false);
        assert_eq!(s.used, (0..15).collect::<Vec<_>>());
        assert_eq!(s.flags.len(), 1);
        assert!(select(0, |_| false, |_| Uncontended, true).flags.len() == 1);
        // The busy loop's share (40% interfered) is flagged; a quiet run's (4%) is not.
        let s = select(100, |i| i % 5 < 2, |_| Uncontended, false);
        assert!(
            s.flags[0].starts_with("only 60 of 100 batches clean"),
            "{:?}",
            s.flags
        );
        assert!(select(100, |i| i % 25 == 0, |_| Uncontended, false)
            .flags
            .is_empty());
    }
}
