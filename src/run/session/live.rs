//! A runner of a timing session as the session goes: its process, its rounds and their
//! interference marks, and the estimates the stop rule and the record take from them.

use std::time::Duration;

use super::super::exec::{self, NoLine, Served};
use super::super::sandbox;
use super::super::stop::Stop;
use super::{Member, Visit, Yardstick, CHECK_RESAMPLES};
use crate::measure::rounds::{rounds_used, MIN_ROUNDS};
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
    /// Why each of `values` is interfered, as judged around its batch (empty: clean); the
    /// yardstick's slow phases are added at the session's end.
    pub(super) why: Vec<Vec<String>>,
    pub(super) positions: Vec<u32>,
    /// Each change of how often it is visited.
    pub(super) visits: Vec<Visit>,
    /// The batches as answered (iters, cycles, ns): the final record must list the same.
    pub(super) batches: Vec<(u64, u64, u64)>,
    pub(super) commands: Vec<Vec<String>>,
    pub(super) elapsed: Duration,
    /// CPU its processes use outside its batches (`run/outside.rs`).
    pub(super) cpu: super::super::outside::Watch,
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
            positions: Vec::new(),
            visits: Vec::new(),
            batches: Vec::new(),
            commands: Vec::new(),
            elapsed: Duration::ZERO,
            cpu: Default::default(),
        }
    }

    /// When its processes used CPU outside its batches since the last one: the member
    /// fails with that reason, and its label is returned for the others' rounds to name.
    pub(super) fn fail_if_busy_outside(&mut self) -> Option<String> {
        let why = self.cpu.before_batch();
        self.fail_busy(why)
    }

    /// The same after the session's pause begun at `then` (its tree's CPU time then).
    pub(super) fn fail_if_busy_in_pause(&mut self, then: Duration) -> Option<String> {
        let why = self.cpu.busy_in_pause(then);
        self.fail_busy(why)
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
        if let Some(mut s) = self.served.take() {
            s.kill(
                &format!("stopped by ngcc-pipe: {}", stop.reason),
                &mut self.m.log,
            );
            self.elapsed = s.elapsed();
        }
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

    /// The rounds that count (indices into `values`): the clean ones when there are enough
    /// (and whether they are). `slow` marks the session rounds the yardstick found slow.
    pub(super) fn used_rounds(&self, slow: &[Option<String>]) -> (Vec<usize>, bool) {
        let (used, clean) = rounds_used(self.values.len(), |i| {
            !self.why[i].is_empty() || slow.get(self.rounds[i]).is_some_and(Option::is_some)
        });
        (used, clean >= MIN_ROUNDS)
    }

    /// The estimate over the rounds that count.
    pub(super) fn estimate(
        &self,
        slow: &[Option<String>],
        seed: u64,
        resamples: usize,
    ) -> Option<(Estimate, bool)> {
        let (used, clean_only) = self.used_rounds(slow);
        let values: Vec<f64> = used.iter().map(|&i| self.values[i]).collect();
        Some((stats::median_ci(&values, seed, resamples)?, clean_only))
    }

    /// The stop rule's view of this member: (rounds that count, relative CI half-width from
    /// [`CHECK_RESAMPLES`] resamples).
    pub(super) fn check(&self, slow: &[Option<String>], seed: u64) -> Option<(usize, f64)> {
        let (est, _) = self.estimate(slow, seed, CHECK_RESAMPLES)?;
        Some((self.used_rounds(slow).0.len(), est.rel_half_width()))
    }

    /// Add the yardstick's slow phases to the marks of the rounds this member was timed in.
    pub(super) fn mark_slow(&mut self, slow: &[Option<String>]) {
        for (why, &r) in self.why.iter_mut().zip(&self.rounds) {
            if let Some(Some(reason)) = slow.get(r) {
                why.push(reason.clone());
            }
        }
    }

    /// The yardstick in this member's rounds (its cycles in the session rounds the member
    /// was timed in, so `values[i]` pairs with the member's `trials[i]`), and over the rounds
    /// that count. `None` unless the yardstick timed every one of the member's rounds.
    pub(super) fn yardstick(&self, gauge: &Live, g: (&str, &str), seed: u64) -> Option<Yardstick> {
        let theirs: Vec<f64> = self
            .rounds
            .iter()
            .map(|&r| gauge.values.get(r).copied())
            .collect::<Option<_>>()?;
        let (used, _) = self.used_rounds(&[]);
        let ys: Vec<f64> = used.iter().map(|&i| theirs[i]).collect();
        let mine: Vec<f64> = used.iter().map(|&i| self.values[i]).collect();
        Some(Yardstick {
            name: g.0.to_string(),
            object_sha256: g.1.to_string(),
            values: theirs,
            estimate: stats::median_ci(&ys, seed, stats::BOOTSTRAP_RESAMPLES)?,
            relative: stats::median_ci(
                &stats::paired_ratios(&ys, &mine),
                seed,
                stats::BOOTSTRAP_RESAMPLES,
            )?,
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
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::live;

    #[test]
    fn the_yardsticks_slow_phases_mark_the_rounds_the_member_was_timed_in() {
        let dir = tempfile::tempdir().unwrap();
        // 14 values timed in every other session round (0, 2, ..., 26); the value of
        // session round 4 (index 2) was interfered around its batch.
        let values: Vec<f64> = (0..14).map(|i| 1000.0 + i as f64).collect();
        let rounds: Vec<usize> = (0..14).map(|i| 2 * i).collect();
        let mut l = live(dir.path(), &values, &rounds, &[2]);
        // The yardstick found session rounds 6 and 7 slow: round 6 is the member's index 3;
        // round 7 is not one of the member's.
        let mut slow = vec![None; 28];
        slow[6] = Some("host slow phase: yardstick 1.60x its median".to_string());
        slow[7] = Some("host slow phase: yardstick 1.40x its median".to_string());
        let (used, clean_only) = l.used_rounds(&slow);
        assert!(clean_only);
        assert_eq!(used.len(), 12);
        assert!(!used.contains(&2) && !used.contains(&3));
        let (n, half) = l.check(&slow, 1).unwrap();
        assert_eq!(n, 12);
        assert!(half > 0.0 && half < 0.01, "{half}");
        // At the end the marks join the member's own, so the record keeps the reasons.
        l.mark_slow(&slow);
        assert_eq!(
            l.why[3],
            ["host slow phase: yardstick 1.60x its median".to_string()]
        );
        assert_eq!(l.used_rounds(&[]).0, used);
        // The yardstick a record keeps pairs with the member's rounds: the gauge's values in
        // the session rounds the member was timed in.
        let gauge = live(
            dir.path(),
            &(0..28).map(|r| 100.0 + r as f64).collect::<Vec<_>>(),
            &(0..28).collect::<Vec<_>>(),
            &[],
        );
        let y = l.yardstick(&gauge, ("ngcc-yardstick-1", "ab"), 1).unwrap();
        assert_eq!(
            y.values,
            rounds.iter().map(|&r| 100.0 + r as f64).collect::<Vec<_>>()
        );
        // Median over the rounds that count (session rounds 0, 2, 8, 10, ..., 26: 100, 102,
        // 108, ..., 126): (114 + 116) / 2.
        assert_eq!(y.estimate.median, 115.0);
        // A yardstick that did not time all of the member's rounds is not kept.
        let short = live(dir.path(), &[100.0; 20], &(0..20).collect::<Vec<_>>(), &[]);
        assert!(l.yardstick(&short, ("y", "ab"), 1).is_none());
    }

    #[test]
    fn ten_clean_rounds_are_enough_to_leave_the_interfered_ones_out() {
        let dir = tempfile::tempdir().unwrap();
        let values: Vec<f64> = (0..12).map(|i| 1000.0 + i as f64).collect();
        let rounds: Vec<usize> = (0..12).collect();
        let (used, clean_only) = live(dir.path(), &values, &rounds, &[0, 7]).used_rounds(&[]);
        assert!(clean_only);
        assert_eq!(used, [1, 2, 3, 4, 5, 6, 8, 9, 10, 11]);
        let (used, clean_only) = live(dir.path(), &values, &rounds, &[0, 7, 9]).used_rounds(&[]);
        assert!(!clean_only);
        assert_eq!(used, rounds);
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
