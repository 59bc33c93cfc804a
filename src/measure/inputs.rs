//! Time that depends on the inputs. Some operations take a variable number of attempts:
//! Classic McEliece's key generation retries until its random matrix is systematic, so one
//! call costs one, two, three … attempts (about 33.5 M cycles each for mceliece348864 on the
//! project's x86 host: single calls at 78, 112, 146, 179 and 212 M cycles). Every batch of a
//! session draws fresh inputs (so that no cache can hit, issue 36), and the batch figures then
//! spread with the inputs drawn, not with the host: the median's interval stays wide however
//! quiet the host is. Calling that "precision not reached" sends the reader after the host.
//!
//! The host cannot make such a pattern: it has at most two states (see [`super::states`]),
//! each moving every call by about the same factor, so single calls form one group, or two.
//! Three or more well-separated groups of single calls, each holding a real share of them,
//! come from the code. The count step sees the same thing without noise (its calls' counted
//! instructions vary), see [`varies`].

/// A gap between consecutive sorted single-call times wider than this share of the lower one
/// separates two groups. Within one state of this host single calls spread 2–5% (issue 28),
/// so one group does not split; attempts of a retrying operation differ by far more.
pub const GAP: f64 = 0.10;

/// A group counts when it holds at least this share of the calls (and 3 of them): interrupts
/// and page faults make lone slow calls, which are outliers, not an input's cost.
pub const MIN_SHARE: f64 = 0.03;

/// Groups needed to call the time input-dependent: more than the host's two states.
pub const MIN_GROUPS: usize = 3;

/// Counted instructions of the calls of an operation (same code, different inputs) whose
/// largest exceeds the smallest by more than this share: the work depends on the inputs.
/// Rejection sampling in ML-KEM's matrix moves its count by well under 1%.
pub const COUNT_SPREAD: f64 = 0.10;

/// The median of each group of `samples` (single-call times, any unit), smallest first,
/// when they fall into at least [`MIN_GROUPS`] groups; empty otherwise.
pub fn groups(samples: &[u64]) -> Vec<f64> {
    let mut s: Vec<u64> = samples.iter().copied().filter(|&v| v > 0).collect();
    s.sort_unstable();
    let mut runs: Vec<&[u64]> = Vec::new();
    let mut start = 0;
    for i in 1..=s.len() {
        if i == s.len() || s[i] as f64 > s[i - 1] as f64 * (1.0 + GAP) {
            runs.push(&s[start..i]);
            start = i;
        }
    }
    let least = ((s.len() as f64 * MIN_SHARE).ceil() as usize).max(3);
    let centres: Vec<f64> = runs
        .iter()
        .filter(|r| r.len() >= least)
        .map(|r| r[r.len() / 2] as f64)
        .collect();
    if centres.len() >= MIN_GROUPS {
        centres
    } else {
        Vec::new()
    }
}

/// Whether counted instructions per call vary beyond [`COUNT_SPREAD`]: `(min, max)` then.
pub fn varies(per_call: &[u64]) -> Option<(u64, u64)> {
    let min = *per_call.iter().min()?;
    let max = *per_call.iter().max()?;
    (min > 0 && max as f64 > min as f64 * (1.0 + COUNT_SPREAD)).then_some((min, max))
}

/// "78 M, 112 M, 146 M, 179 M and 212 M": group centres in millions (or thousands) of cycles.
pub fn describe(centres: &[f64]) -> String {
    let unit = |v: f64| {
        if v >= 1e6 {
            format!("{:.0} M", v / 1e6)
        } else {
            format!("{:.0} k", v / 1e3)
        }
    };
    let all: Vec<String> = centres.iter().map(|&c| unit(c)).collect();
    match all.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => all.join(""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Single calls of a retrying operation: `attempts[i]` attempts of `per` cycles each, plus
    /// a fixed part, with ±2% noise and a few interrupt outliers.
    fn retrying(attempts: &[u64], per: f64, fixed: f64) -> Vec<u64> {
        let mut out = Vec::new();
        for (i, &a) in attempts.iter().enumerate() {
            let noise = 1.0 + 0.02 * (((i * 7919) % 101) as f64 / 50.0 - 1.0);
            out.push(((fixed + per * a as f64) * noise) as u64);
        }
        out
    }

    #[test]
    fn attempts_of_a_retrying_keygen_are_groups() {
        // Geometric-ish attempt counts over 60 calls, as mceliece348864 keygen showed.
        let mut attempts = Vec::new();
        for (a, n) in [(1, 18), (2, 13), (3, 10), (4, 8), (5, 6), (6, 3), (8, 2)] {
            attempts.extend(std::iter::repeat_n(a, n));
        }
        let s = retrying(&attempts, 33.5e6, 44.5e6);
        let g = groups(&s);
        assert_eq!(g.len(), 6, "{g:?}");
        assert!((g[0] / 78e6 - 1.0).abs() < 0.03, "{g:?}");
        assert!((g[4] / 212e6 - 1.0).abs() < 0.03, "{g:?}");
        assert_eq!(describe(&[78e6, 112e6, 212e6]), "78 M, 112 M and 212 M");
        assert_eq!(describe(&[30e3]), "30 k");
    }

    #[test]
    fn the_hosts_two_states_and_outliers_are_not_input_dependence() {
        // One state, ±2%, with lone interrupt outliers at 1.5x and 3x.
        let mut one: Vec<u64> = (0..100).map(|i| 30_000 + (i * 37 % 1200)).collect();
        one.extend([45_000, 90_000, 91_000]);
        assert!(groups(&one).is_empty());
        // Two states 1.35x apart, each tight: still at most two groups.
        let mut two: Vec<u64> = (0..60).map(|i| 22_700 + (i * 31 % 900)).collect();
        two.extend((0..40).map(|i| 30_000 + (i * 29 % 1100)));
        assert!(groups(&two).is_empty());
        assert!(groups(&[]).is_empty());
    }

    #[test]
    fn counted_instructions_that_vary_with_the_inputs() {
        assert_eq!(varies(&[100, 160, 230, 100]), Some((100, 230)));
        assert_eq!(varies(&[1_000_000, 1_004_000, 998_000]), None);
        assert_eq!(varies(&[]), None);
    }
}
