//! The session's stop rule and its allocation of rounds: which runners a round times, and
//! how often each group of members is visited once it reached the precision (the rules
//! themselves are in `crate::measure::rounds`); what the session will still spend on the
//! bench core once its rounds stop ([`tail_ns`]).

use std::ops::Range;

use super::checked::{REPLAYS, REPLAY_CALLS, REPLAY_TIME};
use super::live::Live;
use super::{Stopped, Visit};
use crate::measure::rounds::{visit_every, visited};

/// The stop rule after a round: every member within the precision (`widest`, the widest
/// relative CI half-width of the members alive, is infinite before the first check), else
/// the budget used up (`spent_ns`: the session's bench time so far with what one more round
/// and the session's end would add), else go on (`None`).
pub(super) fn stop_rule(
    widest: f64,
    precision: f64,
    spent_ns: u64,
    budget_ns: u64,
) -> Option<Stopped> {
    if widest <= precision {
        Some(Stopped::Precision)
    } else if spent_ns >= budget_ns {
        Some(Stopped::Budget)
    } else {
        None
    }
}

/// A runner process's finish beyond its single-call samples: loop overhead (five batches
/// of 2^20 empty calls and 1,001 single ones), peak RSS, exit; the first process's stack
/// painting too. ML-KEM-768-avx2's 24 processes took 30 ms each on the 2-vCPU test host;
/// the example campaign's, with Classic McEliece and HQC, about 80 ms: there the estimate
/// errs short, by what the records' `bench_s` shows (docs/figures.md).
const FINISH_NS: u64 = 30_000_000;

/// What the session will still spend on the bench core once its rounds stop, estimated
/// from what they measured: the pause that watches for late work (`pause_ns`); each
/// checked keygen or enc member's replays ([`REPLAYS`] of its batches, at most
/// [`REPLAY_CALLS`] calls, and past [`REPLAY_TIME`] no further batch), each the batch's
/// calls three times over (the reference runs the other operations between them: about
/// their cost where the three cost alike), the spacing and a key pair made; each process's
/// finish (its single-call samples and [`FINISH_NS`]). A KEM whose other operations cost
/// far more than the one replayed makes its one replay longer than this says, by what the
/// records' `bench_s` shows.
pub(super) fn tail_ns(live: &[Live], spans: &[Range<usize>], pause_ns: u64) -> u64 {
    let spacing = kem_native::checked::SPACING.as_nanos() as u64;
    let bound = REPLAY_TIME.as_nanos() as u64;
    let mut ns = pause_ns;
    for span in spans {
        let lives = &live[span.clone()];
        let first = &lives[0];
        let batches = lives.iter().map(|l| l.batches.len()).sum::<usize>();
        let Some(&(calls, _, batch_ns)) = first.batches.last() else {
            continue;
        };
        let call_ns = batch_ns / calls.max(1);
        if first.failed.is_none() && first.out.checked && first.m.op != "dec" {
            let by_calls = (REPLAY_CALLS / calls.max(1)).max(1) as usize;
            let replays = batches.min(REPLAYS).min(by_calls) as u64;
            let key_ns = first.out.member.key_ns.unwrap_or(0);
            let each = 3 * batch_ns + calls * spacing + key_ns;
            ns += (replays * each).min(bound + each);
        }
        for l in lives.iter().filter(|l| l.failed.is_none()) {
            ns += u64::from(l.m.samples) * call_ns + FINISH_NS;
        }
    }
    ns
}

/// The members timed in session round `round`: every alive member whose group (members `i /
/// group`) is visited in it, in one round of `every[i / group]`.
pub(super) fn due(alive: &[bool], group: usize, every: &[usize], round: usize) -> Vec<usize> {
    (0..alive.len())
        .filter(|&i| alive[i] && visited(round, every[i / group], i / group))
        .collect()
}

/// After the check of the round before `next`: how often each group is visited from round
/// `next` on ([`visit_every`] of its alive members' `checks`), each change logged with its
/// reason on the group's alive members.
pub(super) fn reallocate(
    members: &mut [Live],
    checks: &[Option<(usize, f64)>],
    (group, paired): (usize, bool),
    every: &mut [usize],
    next: usize,
    precision: f64,
) {
    for (g, now) in every.iter_mut().enumerate() {
        let range = g * group..((g + 1) * group).min(members.len());
        let alive: Vec<(usize, f64)> = checks[range.clone()].iter().flatten().copied().collect();
        if alive.is_empty() {
            continue;
        }
        let new = visit_every(&alive, precision, *now);
        if new == *now {
            continue;
        }
        *now = new;
        let n = alive.iter().map(|c| c.0).min().unwrap_or(0);
        let widest = alive.iter().map(|c| c.1).fold(0.0, f64::max);
        let whose = if paired { " (widest of its group)" } else { "" };
        let why = if new > 1 {
            format!(
                "CI ±{:.2}%{whose} within ±{:.2}% after {n} batches that count",
                widest * 100.0,
                precision * 100.0
            )
        } else if widest > precision {
            format!(
                "CI ±{:.2}%{whose} wider than ±{:.2}% again",
                widest * 100.0,
                precision * 100.0
            )
        } else {
            format!("{n} batches that count (batches newly marked interfered)")
        };
        for (l, c) in members[range].iter_mut().zip(&checks[g * group..]) {
            if c.is_some() {
                l.visits.push(Visit {
                    from_round: next as u32,
                    every: new as u32,
                    why: why.clone(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_counts_replays_of_checked_members_and_every_process_finish() {
        use super::super::live::fake;
        let ms = 1_000_000u64;
        let spacing = kem_native::checked::SPACING.as_nanos() as u64;
        let dir = tempfile::tempdir().unwrap();
        // Two processes of keygen, checked, 100 calls of 20 ms per batch, 3 samples each;
        // one process of dec (fed, not replayed), 1 call of 15 ms, 5 samples.
        let one = |op: &str, samples: u32, batch: (u64, u64), n: usize| {
            let mut l = fake::live(dir.path(), &[], &[], &[]);
            l.m.op = op.into();
            l.m.samples = samples;
            l.batches = vec![(batch.0, 1, batch.1); n];
            l.out.checked = true;
            l
        };
        let mut live = vec![
            one("keygen", 3, (100, 20 * ms), 5),
            one("keygen", 3, (100, 20 * ms), 5),
            one("dec", 5, (1, 15 * ms), 2),
        ];
        live[0].out.member.key_ns = Some(ms);
        let spans = [0..2, 2..3];
        let replay = 3 * 20 * ms + 100 * spacing + ms;
        let finish = 2 * (3 * 200_000 + FINISH_NS) + 5 * 15 * ms + FINISH_NS;
        let tail = tail_ns(&live, &spans, 7);
        assert_eq!(tail, 7 + REPLAYS as u64 * replay + finish);
        // Dear replays: none begins after REPLAY_TIME, the one under way finishes.
        let dear = vec![(100, 1, 400 * ms); 5];
        live[0].batches.clone_from(&dear);
        live[1].batches = dear;
        let replay = 3 * 400 * ms + 100 * spacing + ms;
        let dear_finish = 2 * (3 * 4 * ms + FINISH_NS) + 5 * 15 * ms + FINISH_NS;
        let bound = REPLAY_TIME.as_nanos() as u64;
        assert_eq!(tail_ns(&live, &spans, 0), bound + replay + dear_finish);
        // An unchecked member is not replayed.
        live[0].out.checked = false;
        assert_eq!(tail_ns(&live, &spans, 0), dear_finish);
    }

    #[test]
    fn the_session_stops_at_the_precision_then_at_the_budget() {
        assert_eq!(stop_rule(f64::INFINITY, 0.01, 10, 100), None);
        assert_eq!(stop_rule(0.012, 0.01, 99, 100), None);
        assert_eq!(stop_rule(0.012, 0.01, 100, 100), Some(Stopped::Budget));
        // Both at once: the precision is the reason.
        assert_eq!(stop_rule(0.01, 0.01, 150, 100), Some(Stopped::Precision));
    }

    #[test]
    fn due_members_are_the_alive_members_of_groups_visited_in_the_round() {
        // Six members in triples (compare --measure); the second triple is visited in one
        // round of 4 (slot 1: rounds 3, 7, ...), member 1 failed.
        let alive = [true, false, true, true, true, true];
        let every = [1, 4];
        assert_eq!(due(&alive, 3, &every, 0), [0, 2]);
        assert_eq!(due(&alive, 3, &every, 3), [0, 2, 3, 4, 5]);
        // One member per group: each takes its own turn.
        let alive = [true; 4];
        assert_eq!(due(&alive, 1, &[4, 4, 1, 4], 0), [0, 2]);
        assert_eq!(due(&alive, 1, &[4, 4, 1, 4], 1), [2, 3]);
    }

    #[test]
    fn reallocation_logs_each_change_with_its_reason() {
        use super::super::live::fake::live;
        let dir = tempfile::tempdir().unwrap();
        let mut members = vec![
            live(dir.path(), &[1.0], &[0], &[]),
            live(dir.path(), &[1.0], &[0], &[]),
        ];
        let mut every = vec![1, 1];
        // Member 0 within 90% of the target after 40 rounds, member 1 not.
        reallocate(
            &mut members,
            &[Some((40, 0.005)), Some((40, 0.02))],
            (1, false),
            &mut every,
            40,
            0.01,
        );
        assert_eq!(every, [4, 1]);
        assert_eq!(
            members[0].visits,
            [Visit {
                from_round: 40,
                every: 4,
                why: "CI ±0.50% within ±1.00% after 40 batches that count".into()
            }]
        );
        assert!(members[1].visits.is_empty());
        // Still within the target: no change; beyond it: back to every round.
        reallocate(
            &mut members,
            &[Some((41, 0.0095)), Some((41, 0.02))],
            (1, false),
            &mut every,
            41,
            0.01,
        );
        assert_eq!(members[0].visits.len(), 1);
        reallocate(
            &mut members,
            &[Some((42, 0.012)), None],
            (1, false),
            &mut every,
            42,
            0.01,
        );
        assert_eq!(every, [1, 1]);
        assert_eq!(
            members[0].visits[1].why,
            "CI ±1.20% wider than ±1.00% again"
        );
        assert_eq!(
            (members[0].visits[1].from_round, members[0].visits[1].every),
            (42, 1)
        );
        // A group of two goes together, and both members log it.
        let mut every = vec![1];
        reallocate(
            &mut members,
            &[Some((30, 0.004)), Some((35, 0.008))],
            (2, true),
            &mut every,
            50,
            0.01,
        );
        assert_eq!(every, [4]);
        assert_eq!(
            members[1].visits[0].why,
            "CI ±0.80% (widest of its group) within ±1.00% after 30 batches that count"
        );
        // Two runner processes of one member (the same check each) are no group of members.
        let mut every = vec![1];
        let mut two = vec![
            live(dir.path(), &[1.0], &[0], &[]),
            live(dir.path(), &[1.0], &[0], &[]),
        ];
        let c = Some((60, 0.004));
        reallocate(&mut two, &[c, c], (2, false), &mut every, 30, 0.01);
        assert_eq!(every, [4]);
        assert_eq!(two[0].visits, two[1].visits);
        assert_eq!(
            two[0].visits[0].why,
            "CI ±0.40% within ±1.00% after 60 batches that count"
        );
    }

    #[test]
    fn each_group_is_judged_on_its_own_members_and_logs_on_them_only() {
        use super::super::live::fake::live;
        let dir = tempfile::tempdir().unwrap();
        let mut members: Vec<Live> = (0..4)
            .map(|_| live(dir.path(), &[1.0], &[0], &[]))
            .collect();
        let mut every = vec![1, 1];
        // Two pairs: the first still wide, the second within 90% of the target.
        reallocate(
            &mut members,
            &[
                Some((40, 0.02)),
                Some((40, 0.005)),
                Some((40, 0.004)),
                Some((40, 0.006)),
            ],
            (2, true),
            &mut every,
            40,
            0.01,
        );
        assert_eq!(every, [1, 4]);
        assert!(members[0].visits.is_empty() && members[1].visits.is_empty());
        assert_eq!(members[2].visits, members[3].visits);
        assert_eq!(
            members[3].visits[0].why,
            "CI ±0.60% (widest of its group) within ±1.00% after 40 batches that count"
        );
        // Rounds newly marked interfered leave the second pair below FULL_ROUNDS rounds
        // that count: back to every round, although its CI (exactly at the target, not
        // wider) is within it; member 3 failed and logs nothing.
        reallocate(
            &mut members,
            &[Some((40, 0.02)), Some((40, 0.005)), Some((29, 0.01)), None],
            (2, true),
            &mut every,
            41,
            0.01,
        );
        assert_eq!(every, [1, 1]);
        assert_eq!(
            members[2].visits[1],
            Visit {
                from_round: 41,
                every: 1,
                why: "29 batches that count (batches newly marked interfered)".into()
            }
        );
        assert_eq!(members[3].visits.len(), 1);
    }
}
