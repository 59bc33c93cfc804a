//! Section 4, flag profiles compared: an instance the pipeline builds with several flag
//! profiles (`<id>@<profile>`, see `dsl/profiles.rs`) has its profiles compared paired,
//! round by round, as `compare --measure` does (`run/paired.rs`).
//!
//! The `time` steps of a campaign are measured in one interleaved session, so round `i` of
//! profile A and round `i` of profile B saw the same moment of the host. The ratio is the
//! median of the per-round ratios B/A with its 95% bootstrap CI
//! ([`stats::median_ci`] over [`stats::paired_ratios`]); rounds where either was interfered are
//! left out when enough clean ones remain ([`crate::measure::rounds::rounds_used`]). A campaign session has
//! no A/A pair, so the threshold is the floor, [`stats::MIN_THRESHOLD`] (1%), and the verdict
//! is [`stats::paired_verdict`]'s.

use super::*;
use crate::measure::stats::{self, Estimate, Verdict};
use crate::model::{Op, PROFILE_VAR};
use crate::record::rounds::Rounds;
use crate::record::TimeData;
use view::InstanceView;

/// One operation of one instance, profile B against profile A.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ProfilePair {
    pub median_a: f64,
    pub median_b: f64,
    /// Median of the per-round ratios B/A with its 95% CI.
    pub ratio: Estimate,
    pub verdict: Verdict,
    pub rounds: usize,
    pub interfered: usize,
}

/// Pairs two members' per-round per-op cycles (index = round of the same session) with
/// their interference marks; `None` without a usable round.
pub(super) fn pair_rounds(
    a: &[f64],
    a_interfered: &[bool],
    b: &[f64],
    b_interfered: &[bool],
    seed: u64,
) -> Option<ProfilePair> {
    let n = a.len().min(b.len());
    let marked = |v: &[bool], r: usize| v.get(r).copied().unwrap_or(false);
    let (used, clean) = crate::measure::rounds::rounds_used(n, |r| {
        marked(a_interfered, r) || marked(b_interfered, r)
    });
    let va: Vec<f64> = used.iter().map(|&r| a[r]).collect();
    let vb: Vec<f64> = used.iter().map(|&r| b[r]).collect();
    let ratio = stats::median_ci(
        &stats::paired_ratios(&va, &vb),
        seed,
        stats::BOOTSTRAP_RESAMPLES,
    )?;
    Some(ProfilePair {
        median_a: stats::median(&va)?,
        median_b: stats::median(&vb)?,
        verdict: stats::paired_verdict(&ratio, stats::MIN_THRESHOLD),
        ratio,
        rounds: n,
        interfered: n - clean,
    })
}

/// Per-round per-op cycles of a session record (a round with no iterations counts 0, which
/// [`stats::paired_ratios`] leaves out) and its interference marks.
fn series(td: &TimeData, r: &Rounds) -> (Vec<f64>, Vec<bool>) {
    let values = td
        .output
        .trials
        .iter()
        .map(|t| {
            if t.iters > 0 {
                t.cycles as f64 / t.iters as f64
            } else {
                0.0
            }
        })
        .collect();
    (
        values,
        r.interference.iter().map(|w| !w.is_empty()).collect(),
    )
}

/// Why two operations cannot be paired, or the pair.
fn compare(a: &InstanceView, b: &InstanceView, op: Op) -> Result<ProfilePair, String> {
    let (Some(ta), Some(tb)) = (a.time_ok(op), b.time_ok(op)) else {
        return Err("not timed in both".into());
    };
    let (Some(ra), Some(rb)) = (&ta.rounds, &tb.rounds) else {
        return Err("not timed in interleaved rounds".into());
    };
    if ra.session != rb.session {
        return Err(format!(
            "timed in different sessions ({}, {}): rounds cannot be paired",
            code(&ra.session),
            code(&rb.session)
        ));
    }
    let (va, ia) = series(ta, ra);
    let (vb, ib) = series(tb, rb);
    pair_rounds(&va, &ia, &vb, &ib, ra.seed).ok_or_else(|| "no usable rounds".into())
}

/// The table "flags profile B vs A" of a submission whose instances carry profiles; nothing
/// for a campaign built with one profile.
pub(super) fn profiles_compared(doc: &mut Doc, sub: &SubmissionView) {
    // Instances in order, grouped by manifest id; the first profile is A.
    let mut groups: Vec<(&str, Vec<&InstanceView>)> = Vec::new();
    for inst in sub
        .instances
        .iter()
        .filter(|i| i.vars.contains_key(PROFILE_VAR))
    {
        match groups.iter_mut().find(|(id, _)| *id == inst.manifest_id()) {
            Some((_, g)) => g.push(inst),
            None => groups.push((inst.manifest_id(), vec![inst])),
        }
    }
    let mut t = Table::new(&[
        "instance",
        "operation",
        "profile B vs A",
        "median cycles A",
        "median cycles B",
        "B/A (95% CI)",
        "rounds (interfered)",
        "verdict",
    ]);
    let mut not_paired = Vec::new();
    for (id, g) in &groups {
        let Some((a, rest)) = g.split_first() else {
            continue;
        };
        for b in rest {
            let profiles = format!(
                "{} vs {}",
                code(&b.vars[PROFILE_VAR]),
                code(&a.vars[PROFILE_VAR])
            );
            for (op, _) in a.ops(StepKind::Time) {
                match compare(a, b, op) {
                    Ok(p) => t.rows.push(vec![
                        code(id),
                        op.name().to_string(),
                        profiles.clone(),
                        fmt::cycles(p.median_a),
                        fmt::cycles(p.median_b),
                        format!(
                            "{:.3} ({:.3}–{:.3})",
                            p.ratio.median, p.ratio.ci_low, p.ratio.ci_high
                        ),
                        format!("{} ({})", p.rounds, p.interfered),
                        p.verdict.name().to_string(),
                    ]),
                    Err(why) => not_paired.push(format!("{} {op} {profiles}: {why}", code(id))),
                }
            }
        }
    }
    if t.rows.is_empty() && not_paired.is_empty() {
        return;
    }
    doc.p(format!(
        "Flag profiles compared, paired round by round in the campaign's timing session (as \
         `ngcc-pipe compare --measure` does): B/A is the median of the per-round ratios of \
         per-op cycles with its 95% bootstrap CI; rounds where either was interfered are left \
         out when at least {} clean rounds remain. A campaign session has no A/A pair, so the \
         threshold is the {} floor: `slower`/`faster` only when the whole CI lies beyond \
         1 ± {}.",
        crate::measure::rounds::MIN_ROUNDS,
        fmt::share(stats::MIN_THRESHOLD),
        fmt::share(stats::MIN_THRESHOLD),
    ));
    if !t.rows.is_empty() {
        doc.table(t);
    }
    if !not_paired.is_empty() {
        doc.p("Not compared:");
        doc.list(not_paired);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(base: f64, factor: f64, n: usize) -> Vec<f64> {
        // A drifting host: every round slower than the last, the same for both profiles.
        (0..n)
            .map(|r| base * (1.0 + 0.02 * r as f64) * factor)
            .collect()
    }

    #[test]
    fn a_tenth_slower_in_every_round_is_slower() {
        let a = rounds(1000.0, 1.0, 20);
        let b = rounds(1000.0, 1.1, 20);
        let p = pair_rounds(&a, &[false; 20], &b, &[false; 20], 7).unwrap();
        assert!((p.ratio.median - 1.1).abs() < 1e-9);
        assert_eq!(p.verdict, Verdict::Slower);
        assert_eq!((p.rounds, p.interfered), (20, 0));
    }

    #[test]
    fn drift_alone_is_the_same_and_interfered_rounds_are_left_out() {
        let a = rounds(1000.0, 1.0, 15);
        let mut b = rounds(1000.0, 1.0, 15);
        // Round 3 of B was preempted: 3x slower, and marked so.
        b[3] *= 3.0;
        let mut ib = [false; 15];
        ib[3] = true;
        let p = pair_rounds(&a, &[false; 15], &b, &ib, 7).unwrap();
        assert_eq!(p.verdict, Verdict::Same);
        assert_eq!(p.ratio.ci_high, 1.0);
        assert_eq!(p.interfered, 1);
        // The medians are those of the 14 clean rounds.
        assert_eq!(p.median_a, p.median_b);
    }

    #[test]
    fn a_half_percent_is_below_the_floor() {
        let a = rounds(1000.0, 1.0, 12);
        let b = rounds(1000.0, 1.005, 12);
        let p = pair_rounds(&a, &[false; 12], &b, &[false; 12], 7).unwrap();
        assert_eq!(p.verdict, Verdict::Same);
    }

    #[test]
    fn no_rounds_no_pair() {
        assert_eq!(pair_rounds(&[], &[], &[], &[], 1), None);
    }
}
