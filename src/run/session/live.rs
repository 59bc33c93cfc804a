//! A runner of a timing session as the session goes: its process, its rounds and their
//! interference marks, and the estimates the stop rule and the record take from them.

use std::time::Duration;

use super::super::exec::{self, NoLine, Served};
use super::super::sandbox;
use super::super::stop::Stop;
use super::{Gauge, HostStates, Member, StateFigure, Visit, Yardstick, CHECK_RESAMPLES};
use crate::measure::states::{self, Cut, Selection, State};
use crate::measure::stats::{self, Estimate};
use crate::record::TimeOutput;

/// A runner of the session as it goes: its member, its process, its rounds so far.
pub(super) struct Live {
    pub(super) m: Member,
    pub(super) served: Option<Served>,
    pub(super) failed: Option<Stop>,
    pub(super) values: Vec<f64>,
    /// The session round (0-based) each of `values` was timed in.
    pub(super) rounds: Vec<usize>,
    /// Why each of `values` is interfered, as judged around its batch (empty: clean).
    pub(super) why: Vec<Vec<String>>,
    /// The yardstick's per-call cycles in each block of each batch (empty without one).
    pub(super) gauge: Vec<Vec<f64>>,
    /// Calls of the yardstick per block, from the runner's `ready` line.
    pub(super) gauge_calls: u64,
    pub(super) positions: Vec<u32>,
    /// Each change of how often it is visited.
    pub(super) visits: Vec<Visit>,
    /// The batches as answered (iters, cycles, ns): the final record must list the same.
    pub(super) batches: Vec<(u64, u64, u64)>,
    pub(super) commands: Vec<Vec<String>>,
    pub(super) elapsed: Duration,
    /// CPU its processes use outside its batches (`run/outside.rs`).
    pub(super) cpu: super::super::outside::Watch,
    /// Batches whose clocks disagreed with the engine's, and the first one's reason
    /// (`clocks.rs`).
    pub(super) odd_clocks: u32,
    pub(super) first_odd: Option<String>,
    /// Its reference runner and what its batches' outputs must be (`checked.rs`).
    pub(super) out: Outputs,
}

/// A member's side of the outputs' checking (`checked.rs`) as the session goes.
#[derive(Default)]
pub(super) struct Outputs {
    /// The key pair's seed both runners share (`--setup-seed`).
    pub(super) setup: String,
    pub(super) served: Option<Served>,
    /// CPU its reference uses outside its own commands.
    pub(super) cpu: super::super::outside::Watch,
    /// Calls of each of the member's batches (from its `ready` line).
    pub(super) calls: u64,
    /// Each batch's seed and fold.
    pub(super) seeds: Vec<[u8; 48]>,
    pub(super) folds: Vec<u64>,
    /// dec: the fold the batch under way must reach.
    pub(super) due: Option<u64>,
}

impl Live {
    /// A member not started yet: nothing timed, nothing failed.
    pub(super) fn new(m: Member) -> Live {
        Live {
            m,
            served: None,
            failed: None,
            values: Vec::new(),
            rounds: Vec::new(),
            why: Vec::new(),
            gauge: Vec::new(),
            gauge_calls: 0,
            positions: Vec::new(),
            visits: Vec::new(),
            batches: Vec::new(),
            commands: Vec::new(),
            elapsed: Duration::ZERO,
            cpu: Default::default(),
            odd_clocks: 0,
            first_odd: None,
            out: Outputs::default(),
        }
    }

    /// When its processes used CPU outside its batches since the last one: the member
    /// fails with that reason, and its label is returned for the others' rounds to name.
    /// Its reference runner counts too (it waits between its commands).
    pub(super) fn fail_if_busy_outside(&mut self) -> Option<String> {
        let why = self.cpu.before_batch().or_else(|| {
            let why = self.out.cpu.before_batch()?;
            Some(format!("its reference runner: {why}"))
        });
        self.fail_busy(why)
    }

    /// The CPU time of its runner's and its reference's trees now, to start the pause.
    pub(super) fn cpu_now(&self) -> Option<(Option<Duration>, Option<Duration>)> {
        self.alive().then(|| (self.cpu.now(), self.out.cpu.now()))
    }

    /// The same after the session's pause begun at `then` (its trees' CPU times then).
    pub(super) fn fail_if_busy_in_pause(
        &mut self,
        (then, reference): (Option<Duration>, Option<Duration>),
    ) -> Option<String> {
        let why = then.and_then(|t| self.cpu.busy_in_pause(t)).or_else(|| {
            let why = self.out.cpu.busy_in_pause(reference?)?;
            Some(format!("its reference runner: {why}"))
        });
        self.fail_busy(why)
    }

    /// End its reference runner, if it has one running.
    pub(super) fn end_reference(&mut self, why: &str) {
        if let Some(mut r) = self.out.served.take() {
            r.kill(why, &mut self.m.log);
        }
    }

    /// Fail with `why`, if there is one, and return the member's label.
    fn fail_busy(&mut self, why: Option<String>) -> Option<String> {
        let why = why?;
        self.fail(Stop::failed(format!("{}: {why}", self.m.op)));
        Some(self.m.label.clone())
    }

    pub(super) fn alive(&self) -> bool {
        self.failed.is_none() && self.served.is_some()
    }

    pub(super) fn fail(&mut self, stop: Stop) {
        let why = format!("stopped by ngcc-pipe: {}", stop.reason);
        if let Some(mut s) = self.served.take() {
            s.kill(&why, &mut self.m.log);
            self.elapsed = s.elapsed();
        }
        self.end_reference(&why);
        self.failed = Some(stop);
    }

    /// A runner's `done` line, or its end, as the member's failure.
    pub(super) fn fail_from(&mut self, what: Result<(String, String), NoLine>, timeout: Duration) {
        let op = self.m.op.clone();
        let stop = match what {
            Ok((_, json)) => match serde_json::from_str::<TimeOutput>(&json) {
                Ok(out) => Stop::failed(format!(
                    "{op}: {}",
                    out.failure.unwrap_or_else(|| "runner stopped early".into())
                )),
                Err(e) => Stop::failed(format!("{op}: unreadable record from kem-runner ({e})")),
            },
            Err(NoLine::Killed(exec::Exit::TimedOut)) => Stop::timed_out(format!(
                "timed out after {} s waiting for kem-runner (killed)",
                timeout.as_secs()
            )),
            Err(NoLine::Ended(e @ exec::Exit::Signal(_))) => Stop::failed(format!(
                "{op}: kem-runner {} ({})",
                e.describe(),
                sandbox::limits_note(self.m.jail.memory)
            )),
            Err(NoLine::Killed(e)) | Err(NoLine::Ended(e)) => {
                Stop::failed(format!("{op}: kem-runner {}", e.describe()))
            }
        };
        self.fail(stop);
    }

    /// The host's state during each of its batches, given the session's `cut`.
    pub(super) fn states(&self, cut: Option<&Cut>) -> Vec<State> {
        (0..self.values.len())
            .map(|i| states::state_of(self.gauge.get(i).map_or(&[][..], Vec::as_slice), cut))
            .collect()
    }

    /// The batches its estimate uses, given the session's two states `cut`
    /// ([`states::select`]).
    pub(super) fn selection(&self, cut: Option<&Cut>) -> Selection {
        let st = self.states(cut);
        states::select(
            self.values.len(),
            |i| !self.why[i].is_empty(),
            |i| st[i],
            cut.is_some(),
        )
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
        Some((stats::median_ci(&values, seed, resamples)?, sel))
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
            let xs: Vec<f64> = (0..self.values.len())
                .filter(|&i| st[i] == state && self.why[i].is_empty())
                .map(|i| self.values[i])
                .collect();
            (xs.len() >= 2).then(|| StateFigure {
                batches: xs.len() as u32,
                estimate: stats::median_ci(&xs, seed, stats::BOOTSTRAP_RESAMPLES)
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

/// A member's state for tests, without a process.
#[cfg(test)]
pub(super) mod fake {
    use std::path::Path;

    use super::super::super::sandbox::Jail;
    use super::*;

    /// A member's state without a process: per-op `values` timed in session `rounds`, the
    /// rounds of `marked` interfered around their batch.
    pub(in crate::run::session) fn live(
        dir: &Path,
        values: &[f64],
        rounds: &[usize],
        marked: &[usize],
    ) -> Live {
        let p = Path::new("x");
        Live {
            values: values.to_vec(),
            rounds: rounds.to_vec(),
            why: (0..values.len())
                .map(|i| {
                    if marked.contains(&i) {
                        vec!["steal 1 ticks".to_string()]
                    } else {
                        Vec::new()
                    }
                })
                .collect(),
            ..Live::new(Member {
                label: "m".into(),
                object: p.into(),
                layouts: Vec::new(),
                api_h: p.into(),
                namespace: "NS_".into(),
                op: "keygen".into(),
                min_iters: 1,
                samples: 0,
                budget_ns: 0,
                log: exec::open_log(&dir.join("m.log")).unwrap(),
                jail: Jail::runner(p, p, p, dir, 0),
                reference: None,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::live;

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
        let (est, sel) = l.estimate(Some(&cut), 1, 200).unwrap();
        assert!(sel.within_state && sel.flags.is_empty());
        assert_eq!(sel.used.len(), 19);
        assert!(sel.used.iter().all(|i| i % 2 == 0 && *i != 2));
        // Median of the 19 values 1000 + {0, 4, 6, ..., 38}: the tenth, 1000 + 20.
        assert_eq!(est.median, 1020.0);
        let (n, half) = l.check(Some(&cut), 1).unwrap();
        assert_eq!(n, 19);
        assert!(half < 0.01, "{half}");
        let h = l.host_states(Some(&cut), 1);
        assert!(h.two_states);
        assert_eq!(&h.batches[..6], "ucucum");
        assert_eq!(h.uncontended.as_ref().unwrap().batches, 19);
        assert_eq!(h.contended.as_ref().unwrap().batches, 19);
        assert_eq!(h.mixed, 1);
        // Without the cut (one state) every clean batch counts.
        let (_, sel) = l.estimate(None, 1, 200).unwrap();
        assert_eq!(sel.used.len(), 39);
        // The yardstick a record keeps pairs with the member's batches: the mean of each
        // batch's blocks.
        let g = super::super::Gauge {
            object: "y.so".into(),
            api_h: "api.h".into(),
            name: "ngcc-yardstick-1".into(),
            object_sha256: "ab".into(),
        };
        let y = l.yardstick(&g, &sel.used, 1).unwrap();
        assert_eq!(y.values[0], 64_000.0);
        assert_eq!(y.values.len(), 40);
        assert_eq!(y.id(), "ngcc-yardstick-1 in-batch sha256:ab");
        // A batch without blocks: no yardstick in the record.
        l.gauge[7].clear();
        assert!(l.yardstick(&g, &sel.used, 1).is_none());
    }

    #[test]
    fn a_member_whose_batches_were_mostly_interfered_is_flagged_and_not_reached() {
        let dir = tempfile::tempdir().unwrap();
        let values: Vec<f64> = (0..30).map(|i| 1000.0 + i as f64).collect();
        let marked: Vec<usize> = (0..25).collect();
        let l = live(dir.path(), &values, &(0..30).collect::<Vec<_>>(), &marked);
        let (_, sel) = l.estimate(None, 1, 200).unwrap();
        assert_eq!(sel.used.len(), 30);
        assert!(
            sel.flags[0].starts_with("only 5 of 30 batches clean"),
            "{:?}",
            sel.flags
        );
        assert_eq!(l.check(None, 1).unwrap().1, f64::INFINITY);
    }

    #[test]
    fn a_runner_that_ended_fails_its_member_with_the_reason() {
        use crate::record::Status;
        use crate::run::exec::{Exit, NoLine};
        use std::time::Duration;
        let dir = tempfile::tempdir().unwrap();
        let end = |what: Result<(String, String), NoLine>| {
            let mut l = live(dir.path(), &[], &[], &[]);
            l.fail_from(what, Duration::from_secs(60));
            assert!(!l.alive());
            let stop = l.failed.take().expect("failed");
            (stop.status, stop.reason)
        };
        assert_eq!(
            end(Err(NoLine::Killed(Exit::TimedOut))),
            (
                Status::TimedOut,
                "timed out after 60 s waiting for kem-runner (killed)".to_string()
            )
        );
        assert_eq!(
            end(Err(NoLine::Ended(Exit::Code(3)))),
            (Status::Failed, "keygen: kem-runner exit code 3".to_string())
        );
        let (status, reason) = end(Ok(("done".into(), "{".into())));
        assert_eq!(status, Status::Failed);
        assert!(
            reason.starts_with("keygen: unreadable record from kem-runner ("),
            "{reason}"
        );
    }
}
