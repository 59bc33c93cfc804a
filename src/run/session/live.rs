//! A runner of a timing session as the session goes: its process, its rounds and their
//! interference marks (the estimates over a member's processes are in `pool.rs`).

use std::time::Duration;

use super::super::exec::{self, NoLine, Served};
use super::super::sandbox;
use super::super::stop::Stop;
use super::{Member, Visit};
use crate::record::TimeOutput;

/// A runner of the session as it goes: its member, its process, its rounds so far.
pub(super) struct Live {
    pub(super) m: Member,
    /// How many runner processes its member has.
    pub(super) processes: usize,
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
    /// Whether its batches are checked (its member has a reference).
    pub(super) checked: bool,
    /// The key pair's seed its member's runners and reference share (`--setup-seed`).
    pub(super) setup: String,
    /// Its reference, in a member's first process only.
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
    /// The seed of the key pair its runner holds (at first the setup seed), and of the one
    /// each batch was timed with (`checked::keyed`).
    pub(super) key: String,
    pub(super) keys: Vec<String>,
    /// In a member's first process: the member's key pair, and the seed of the one its
    /// reference holds.
    pub(super) member: MemberKey,
    pub(super) reference_key: String,
    /// dec: the ciphertexts last copied in for it (in a member's first process: the last
    /// ones its reference fed).
    pub(super) fed: Option<Feed>,
}

/// The ciphertexts a member's reference made for one round's dec batches: the round, their
/// seed, and the fold the batches must reach.
#[derive(Clone, Copy)]
pub(super) struct Feed {
    pub(super) round: usize,
    pub(super) seed: [u8; 48],
    pub(super) due: u64,
}

/// A member's key pair as the session goes (kept in its first process's live): the seed
/// its processes make it from, the round it was drawn in, its fold (from the first process
/// that made it), and how long a process took to make the member's first key pair (ns;
/// `None`: not made yet), which sets how often it is renewed.
#[derive(Default)]
pub(super) struct MemberKey {
    pub(super) seed: String,
    pub(super) round: Option<usize>,
    pub(super) fold: Option<u64>,
    pub(super) key_ns: Option<u64>,
}

impl Live {
    /// A member not started yet: nothing timed, nothing failed.
    pub(super) fn new(m: Member) -> Live {
        Live {
            m,
            processes: 1,
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
                more: Vec::new(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::live;

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
