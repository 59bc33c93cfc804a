//! The rules a session and the readers of its records both apply: how many rounds make an
//! estimate, which rounds it uses, the default precision target, and how often a member that
//! reached it is still visited (adaptive allocation).

/// Rounds before the precision is first checked, and clean rounds needed before
/// interfered ones are left out of the estimate.
pub const MIN_ROUNDS: usize = 10;

/// Target CI half-width of a campaign's session: 1% of the median.
pub const DEFAULT_PRECISION: f64 = 0.01;

/// The rounds an estimate uses out of `n`: those not `interfered` when at least
/// [`MIN_ROUNDS`] such rounds exist, else all; and how many were clean.
pub fn rounds_used(n: usize, interfered: impl Fn(usize) -> bool) -> (Vec<usize>, usize) {
    let clean: Vec<usize> = (0..n).filter(|&r| !interfered(r)).collect();
    let clean_count = clean.len();
    if clean_count >= MIN_ROUNDS {
        (clean, clean_count)
    } else {
        ((0..n).collect(), clean_count)
    }
}

/// A member (or a group of members visited together) whose CI reached the precision is
/// visited in one round of this many: its rounds still span the whole session, at a quarter
/// of the cost, and the budget goes to the members whose CI is still wide.
pub const SPARSE_EVERY: usize = 4;

/// Rounds that count a member needs before it may be visited less: with fewer, the
/// bootstrap interval of a median rests on a handful of order statistics (with 10 rounds a
/// 95% interval spans the 2nd to the 9th value), and `compare` and `history` bootstrap the
/// same rounds, divided by the yardstick's, again.
pub const FULL_ROUNDS: usize = 30;

/// Whether a member visited in one round of `every` is timed in session round `round`;
/// `slot` (its group's index) spreads the members that are visited less over the rounds.
pub fn visited(round: usize, every: usize, slot: usize) -> bool {
    every <= 1 || (round + slot).is_multiple_of(every)
}

/// A member goes to one round of [`SPARSE_EVERY`] only once its CI half-width is within
/// this share of the precision, and comes back to every round when it is wider than the
/// precision: the check after each round uses few resamples and is itself noisy, and the
/// record's interval is computed again at the end (more resamples, the whole session's slow
/// phases marked), so the margin keeps a member from ending just outside the target it
/// seemed to have reached, and from flipping at every round while its interval hovers there.
pub const SPARSE_MARGIN: f64 = 0.9;

/// How often a group of members (one member, or the triple of `compare --measure`) visited
/// in one round of `now` is visited from the next round on, given each alive member's
/// (batches that count, relative CI half-width): in one round of [`SPARSE_EVERY`] when every
/// one of them has at least [`FULL_ROUNDS`] batches that count and a half-width within
/// [`SPARSE_MARGIN`] × `precision` (within `precision` to stay there), else in every round.
pub fn visit_every(members: &[(usize, f64)], precision: f64, now: usize) -> usize {
    let limit = if now > 1 {
        precision
    } else {
        SPARSE_MARGIN * precision
    };
    let reached = |&(n, half): &(usize, f64)| n >= FULL_ROUNDS && half <= limit;
    if !members.is_empty() && members.iter().all(reached) {
        SPARSE_EVERY
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interfered_rounds_are_left_out_only_when_enough_clean_ones_remain() {
        let (used, clean) = rounds_used(12, |r| r == 0 || r == 5);
        assert_eq!((used.len(), clean), (10, 10));
        assert!(!used.contains(&0) && !used.contains(&5));
        let (used, clean) = rounds_used(12, |r| r < 3);
        assert_eq!((used, clean), ((0..12).collect(), 9));
    }

    #[test]
    fn a_member_is_visited_less_once_it_reached_the_precision_with_enough_rounds() {
        // Within 90% of the 1% target after 30 rounds: one round of 4.
        assert_eq!(visit_every(&[(30, 0.009)], 0.01, 1), SPARSE_EVERY);
        // Too few rounds, or not within the margin yet: every round.
        assert_eq!(visit_every(&[(29, 0.005)], 0.01, 1), 1);
        assert_eq!(visit_every(&[(200, 0.0095)], 0.01, 1), 1);
        // Once visited less it stays so up to the target itself, and comes back beyond it.
        assert_eq!(
            visit_every(&[(200, 0.0095)], 0.01, SPARSE_EVERY),
            SPARSE_EVERY
        );
        assert_eq!(visit_every(&[(200, 0.011)], 0.01, SPARSE_EVERY), 1);
        // A group goes together: all of it must be within the target.
        assert_eq!(visit_every(&[(40, 0.004), (40, 0.02)], 0.01, 1), 1);
        assert_eq!(
            visit_every(&[(40, 0.004), (35, 0.009)], 0.01, 1),
            SPARSE_EVERY
        );
        assert_eq!(visit_every(&[], 0.01, 1), 1);
        // Exactly at the target (or at 90% of it, first) still counts as within it.
        assert_eq!(
            visit_every(&[(200, 0.01)], 0.01, SPARSE_EVERY),
            SPARSE_EVERY
        );
        assert_eq!(
            visit_every(&[(30, SPARSE_MARGIN * 0.01)], 0.01, 1),
            SPARSE_EVERY
        );
    }

    #[test]
    fn members_visited_less_take_turns() {
        let due = |every, slot| {
            (0..8)
                .filter(|&r| visited(r, every, slot))
                .collect::<Vec<_>>()
        };
        assert_eq!(due(1, 3), (0..8).collect::<Vec<_>>());
        assert_eq!(due(4, 0), [0, 4]);
        assert_eq!(due(4, 1), [3, 7]);
        assert_eq!(due(4, 6), [2, 6]);
        // Four slots in a row cover every round once.
        let mut all: Vec<usize> = (0..4).flat_map(|slot| due(4, slot)).collect();
        all.sort_unstable();
        assert_eq!(all, (0..8).collect::<Vec<_>>());
    }
}
