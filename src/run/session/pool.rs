//! A member's batches pooled over its runner processes, in session order: what the stop
//! rule checks and what the record keeps (the estimate, the host's states, the yardstick).
//!
//! A member is timed by several processes at once ([`super::PROCESSES`]), each a `serve` of
//! its own with its own memory layout; the same object's medians move by 1–3% from one
//! process to the next on a VM, while one process's batches agree far closer. The pool's
//! headline is the mean of its processes' medians over the batches it uses, and its
//! interval resamples processes, then batches within each ([`stats::mean_of_medians_ci`]),
//! so it covers how the processes differ: a promise about the next run, not only about one
//! process.

use super::live::Live;
use super::{Gauge, HostStates, StateFigure, Yardstick, CHECK_RESAMPLES};
use crate::measure::states::{self, Cut, Selection, State};
use crate::measure::stats::{self, Estimate};

/// One member's batches from all its processes, ordered by (round, position in the round).
pub(super) struct Pool {
    pub(super) values: Vec<f64>,
    pub(super) rounds: Vec<usize>,
    pub(super) positions: Vec<u32>,
    pub(super) why: Vec<Vec<String>>,
    pub(super) gauge: Vec<Vec<f64>>,
    /// The process (0-based, its place among the member's lives) of each batch.
    pub(super) process: Vec<u32>,
    /// Where each batch comes from: (process, its batch in that process's order).
    pub(super) order: Vec<(usize, usize)>,
    /// How many processes the member had.
    pub(super) processes: usize,
}

impl Pool {
    /// The batches of `lives` (one member's processes) in session order.
    pub(super) fn of(lives: &[Live]) -> Pool {
        let mut order: Vec<(usize, usize)> = lives
            .iter()
            .enumerate()
            .flat_map(|(p, l)| (0..l.values.len()).map(move |b| (p, b)))
            .collect();
        let at = |&(p, b): &(usize, usize)| {
            let l = &lives[p];
            (l.rounds[b], l.positions.get(b).copied().unwrap_or(0), p)
        };
        order.sort_by_key(at);
        Pool {
            values: order.iter().map(|&(p, b)| lives[p].values[b]).collect(),
            rounds: order.iter().map(|&(p, b)| lives[p].rounds[b]).collect(),
            positions: (order.iter())
                .map(|&(p, b)| lives[p].positions.get(b).copied().unwrap_or(0))
                .collect(),
            why: (order.iter())
                .map(|&(p, b)| lives[p].why.get(b).cloned().unwrap_or_default())
                .collect(),
            gauge: (order.iter())
                .map(|&(p, b)| lives[p].gauge.get(b).cloned().unwrap_or_default())
                .collect(),
            process: order.iter().map(|&(p, _)| p as u32).collect(),
            order,
            processes: lives.len(),
        }
    }

    /// The host's state during each batch, given the session's `cut`.
    pub(super) fn states(&self, cut: Option<&Cut>) -> Vec<State> {
        (0..self.values.len())
            .map(|i| states::state_of(self.gauge.get(i).map_or(&[][..], Vec::as_slice), cut))
            .collect()
    }

    /// The batches its estimate uses, given the session's two states `cut`
    /// ([`states::select`]); with several processes, a selection that rests on one alone
    /// is flagged (its interval cannot say how the processes differ).
    pub(super) fn selection(&self, cut: Option<&Cut>) -> Selection {
        let st = self.states(cut);
        let mut sel = states::select(
            self.values.len(),
            |i| !self.why[i].is_empty(),
            |i| st[i],
            cut.is_some(),
        );
        let first = sel.used.first().map(|&i| self.process[i]);
        if self.processes > 1 && sel.used.iter().all(|&i| Some(self.process[i]) == first) {
            sel.flags.push(format!(
                "the batches it uses come from one of its {} runner processes: the figure \
                 rests on one runner process",
                self.processes
            ));
        }
        sel
    }

    /// The processes of the batches `used`.
    fn groups(&self, used: &[usize]) -> Vec<u32> {
        used.iter().map(|&i| self.process[i]).collect()
    }

    /// The estimate over the batches it uses, and which they are.
    pub(super) fn estimate(
        &self,
        cut: Option<&Cut>,
        seed: u64,
        resamples: usize,
    ) -> Option<(Estimate, Selection)> {
        let sel = self.selection(cut);
        let values: Vec<f64> = sel.used.iter().map(|&i| self.values[i]).collect();
        let groups = self.groups(&sel.used);
        Some((
            stats::mean_of_medians_ci(&values, &groups, seed, resamples)?,
            sel,
        ))
    }

    /// The stop rule's view of this member: (batches used, relative CI half-width from
    /// [`CHECK_RESAMPLES`] resamples; infinite while its figure is flagged).
    pub(super) fn check(&self, cut: Option<&Cut>, seed: u64) -> Option<(usize, f64)> {
        let (est, sel) = self.estimate(cut, seed, CHECK_RESAMPLES)?;
        let half = if sel.flags.is_empty() {
            est.rel_half_width()
        } else {
            f64::INFINITY
        };
        Some((sel.used.len(), half))
    }

    /// What its record keeps of the host's states: the session's cut, each batch's state
    /// and its figure within each state (over its clean batches there).
    pub(super) fn host_states(&self, cut: Option<&Cut>, seed: u64) -> HostStates {
        let st = self.states(cut);
        let within = |state: State| -> Option<StateFigure> {
            let used: Vec<usize> = (0..self.values.len())
                .filter(|&i| st[i] == state && self.why[i].is_empty())
                .collect();
            let xs: Vec<f64> = used.iter().map(|&i| self.values[i]).collect();
            (xs.len() >= 2).then(|| StateFigure {
                batches: xs.len() as u32,
                estimate: stats::mean_of_medians_ci(
                    &xs,
                    &self.groups(&used),
                    seed,
                    stats::BOOTSTRAP_RESAMPLES,
                )
                .expect("two values have a median"),
            })
        };
        HostStates {
            two_states: cut.is_some(),
            cut: cut.map(|c| c.threshold),
            uncontended_yardstick: cut.map(|c| c.uncontended),
            contended_yardstick: cut.map(|c| c.contended),
            uncontended_share: cut.map(|c| c.uncontended_share),
            batches: st.iter().map(|s| s.letter()).collect(),
            uncontended: cut.and_then(|_| within(State::Uncontended)),
            contended: cut.and_then(|_| within(State::Contended)),
            mixed: (0..st.len())
                .filter(|&i| st[i] == State::Mixed && self.why[i].is_empty())
                .count() as u32,
        }
    }

    /// The yardstick inside its batches (per batch the mean per-call cycles of its blocks,
    /// so `values[i]` pairs with the member's `trials[i]`), and over the batches `used`.
    /// `None` unless every batch had its blocks.
    pub(super) fn yardstick(&self, g: &Gauge, used: &[usize], seed: u64) -> Option<Yardstick> {
        let theirs: Vec<f64> = self
            .gauge
            .iter()
            .map(|b| (!b.is_empty()).then(|| b.iter().sum::<f64>() / b.len() as f64))
            .collect::<Option<_>>()?;
        if theirs.len() != self.values.len() {
            return None;
        }
        let ys: Vec<f64> = used.iter().map(|&i| theirs[i]).collect();
        let mine: Vec<f64> = used.iter().map(|&i| self.values[i]).collect();
        Some(Yardstick {
            name: g.name.clone(),
            object_sha256: g.object_sha256.clone(),
            values: theirs,
            estimate: stats::median_ci(&ys, seed, stats::BOOTSTRAP_RESAMPLES)?,
            relative: stats::median_ci(
                &stats::paired_ratios(&ys, &mine),
                seed,
                stats::BOOTSTRAP_RESAMPLES,
            )?,
            placement: "in-batch".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::live::{fake::live, Live};
    use super::Pool;

    /// One process's batches as a pool.
    fn one(l: &Live) -> Pool {
        Pool::of(std::slice::from_ref(l))
    }

    #[test]
    fn a_members_processes_pool_in_session_order_and_widen_its_interval() {
        let dir = tempfile::tempdir().unwrap();
        // Two processes timed in the same 20 rounds, process 1 first in odd rounds, its
        // batches 2% slower; each process's own batches agree within 0.1%.
        let rounds: Vec<usize> = (0..20).collect();
        let a: Vec<f64> = (0..20).map(|i| 1000.0 + f64::from(i % 2)).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 1.02).collect();
        let mut p0 = live(dir.path(), &a, &rounds, &[]);
        let mut p1 = live(dir.path(), &b, &rounds, &[3]);
        p0.positions = (0..20).map(|r| u32::from(r % 2 == 1)).collect();
        p1.positions = (0..20).map(|r| u32::from(r % 2 == 0)).collect();
        let pool = Pool::of(&[p0, p1]);
        assert_eq!(pool.values.len(), 40);
        assert_eq!(&pool.process[..4], &[0, 1, 1, 0]);
        assert_eq!(&pool.order[..4], &[(0, 0), (1, 0), (1, 1), (0, 1)]);
        assert_eq!(&pool.rounds[..4], &[0, 0, 1, 1]);
        assert!(pool.rounds.windows(2).all(|w| w[0] <= w[1]));
        // Process 1's batch 3 was interfered: it is pooled with its mark.
        let marked: Vec<usize> = (0..40).filter(|&i| !pool.why[i].is_empty()).collect();
        assert_eq!(marked.len(), 1);
        assert_eq!(pool.order[marked[0]], (1, 3));
        let (est, sel) = pool.estimate(None, 1, 2000).unwrap();
        assert_eq!(sel.used.len(), 39);
        assert!(sel.flags.is_empty(), "{:?}", sel.flags);
        // Each process alone claims ±0.1%; pooled, the interval takes in the 2% between them.
        assert!(
            one(&live(dir.path(), &a, &rounds, &[]))
                .check(None, 1)
                .unwrap()
                .1
                < 0.001
        );
        assert!(est.ci_low <= 1001.0 && est.ci_high >= 1020.0, "{est:?}");
    }

    #[test]
    fn a_figure_resting_on_one_of_its_processes_is_flagged() {
        let dir = tempfile::tempdir().unwrap();
        let rounds: Vec<usize> = (0..12).collect();
        let xs: Vec<f64> = (0..12).map(|i| 1000.0 + f64::from(i)).collect();
        // Every batch of process 1 was interfered: the clean ones are all process 0's.
        let p0 = live(dir.path(), &xs, &rounds, &[]);
        let p1 = live(dir.path(), &xs, &rounds, &(0..12).collect::<Vec<_>>());
        let (_, sel) = Pool::of(&[p0, p1]).estimate(None, 1, 200).unwrap();
        assert!(sel.used.len() == 12, "{:?}", sel.used);
        assert!(
            sel.flags
                .iter()
                .any(|f| f.ends_with("rests on one runner process")),
            "{:?}",
            sel.flags
        );
    }

    #[test]
    fn the_estimate_rests_on_the_clean_batches_of_the_uncontended_state() {
        use crate::measure::states::two_states;
        let dir = tempfile::tempdir().unwrap();
        // 40 batches: the even ones with the yardstick at ~64 k per call and the KEM at
        // ~1000 cycles, the odd ones at ~100 k and ~1300; batch 2 interfered.
        let values: Vec<f64> = (0..40)
            .map(|i| {
                if i % 2 == 0 {
                    1000.0 + i as f64
                } else {
                    1300.0 + i as f64
                }
            })
            .collect();
        let mut l = live(dir.path(), &values, &(0..40).collect::<Vec<_>>(), &[2]);
        l.gauge = (0..40)
            .map(|i| {
                let y = if i % 2 == 0 { 64_000.0 } else { 100_000.0 };
                vec![y, y + 100.0, y - 100.0]
            })
            .collect();
        // Batch 5 changed state in the middle.
        l.gauge[5] = vec![64_000.0, 100_000.0, 100_000.0];
        let cut = two_states(&l.gauge.iter().flatten().copied().collect::<Vec<_>>());
        let cut = cut.expect("two states");
        let (est, sel) = one(&l).estimate(Some(&cut), 1, 200).unwrap();
        assert!(sel.within_state && sel.flags.is_empty());
        assert_eq!(sel.used.len(), 19);
        assert!(sel.used.iter().all(|i| i % 2 == 0 && *i != 2));
        // Median of the 19 values 1000 + {0, 4, 6, ..., 38}: the tenth, 1000 + 20.
        assert_eq!(est.median, 1020.0);
        let (n, half) = one(&l).check(Some(&cut), 1).unwrap();
        assert_eq!(n, 19);
        assert!(half < 0.01, "{half}");
        let h = one(&l).host_states(Some(&cut), 1);
        assert!(h.two_states);
        assert_eq!(&h.batches[..6], "ucucum");
        assert_eq!(h.uncontended.as_ref().unwrap().batches, 19);
        assert_eq!(h.contended.as_ref().unwrap().batches, 19);
        assert_eq!(h.mixed, 1);
        // Without the cut (one state) every clean batch counts.
        let (_, sel) = one(&l).estimate(None, 1, 200).unwrap();
        assert_eq!(sel.used.len(), 39);
        // The yardstick a record keeps pairs with the member's batches: the mean of each
        // batch's blocks.
        let g = super::super::Gauge {
            object: "y.so".into(),
            api_h: "api.h".into(),
            name: "ngcc-yardstick-1".into(),
            object_sha256: "ab".into(),
        };
        let y = one(&l).yardstick(&g, &sel.used, 1).unwrap();
        assert_eq!(y.values[0], 64_000.0);
        assert_eq!(y.values.len(), 40);
        assert_eq!(y.id(), "ngcc-yardstick-1 in-batch sha256:ab");
        // A batch without blocks: no yardstick in the record.
        l.gauge[7].clear();
        assert!(one(&l).yardstick(&g, &sel.used, 1).is_none());
    }

    #[test]
    fn a_member_whose_batches_were_mostly_interfered_is_flagged_and_not_reached() {
        let dir = tempfile::tempdir().unwrap();
        let values: Vec<f64> = (0..30).map(|i| 1000.0 + i as f64).collect();
        let marked: Vec<usize> = (0..25).collect();
        let l = live(dir.path(), &values, &(0..30).collect::<Vec<_>>(), &marked);
        let (_, sel) = one(&l).estimate(None, 1, 200).unwrap();
        assert_eq!(sel.used.len(), 30);
        assert!(
            sel.flags[0].starts_with("only 5 of 30 batches clean"),
            "{:?}",
            sel.flags
        );
        assert_eq!(one(&l).check(None, 1).unwrap().1, f64::INFINITY);
    }
}
