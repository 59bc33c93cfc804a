//! CPU time a timing-session member's processes use outside its own batches: a thread or a
//! child its KEM leaves running between batches competes with the other members on the
//! bench core while the member itself is measured clean. The session reads the CPU time of
//! the member's process tree (the served child and its descendants, `/proc/<pid>/stat`
//! user + system time of each, with their reaped children's) before and after each of its
//! batches; a member whose processes used at least [`MIN_OUTSIDE`] outside its batches in
//! total, and at least [`MIN_SHARE`] of what they used inside them, fails with that reason,
//! and the rounds it disturbed are marked in the other members' interference.
//!
//! The share is of the tree's own CPU time in its batches, not of the wall time between
//! them: on a loaded core a spinning thread gets a small share of the wall time (in a CI
//! run with a fork-heavy fixture beside it, under 10%), but it keeps its proportion to what
//! the member's own batches get on that core. A well-behaved runner waits on its pipe
//! between batches and uses next to nothing there (microseconds per batch against the
//! milliseconds of a batch).
//!
//! Inside its batches, the tree may use at most one CPU's worth of the engine's wall time
//! around them ([`MAX_CPU_PER_WALL`]): more is a thread working on another CPU beside the
//! timed one, work the batch's figures do not show.

use std::time::Duration;

/// The pause after a session's last round, in which no runner is timed and each member's
/// processes should be waiting on their pipes...
pub const PAUSE: Duration = Duration::from_millis(300);
/// ...and the CPU time a member's processes may use in it: a waiting runner uses none, a
/// spinning thread even on a crowded core more than this (a round may be too short, or the
/// session too short, for the account between batches to reach [`MIN_OUTSIDE`]).
pub const PAUSE_MAX: Duration = Duration::from_millis(2);

/// Outside CPU time that fails a member (at least this much in total)...
pub const MIN_OUTSIDE: Duration = Duration::from_millis(30);
/// ...and at least this share of the CPU time its processes used in its batches.
pub const MIN_SHARE: f64 = 0.05;

/// CPU time a member's processes may use in its batches per unit of the engine's wall time
/// around them (plus [`MIN_OUTSIDE`], for the 10 ms ticks of `/proc`): one pinned thread
/// uses at most 1; more means threads working on another CPU while the timed one runs.
pub const MAX_CPU_PER_WALL: f64 = 1.1;

/// One member's account.
#[derive(Debug, Default)]
pub struct Watch {
    root: Option<u32>,
    /// The tree's CPU time at the start of the batch under way.
    start: Option<Duration>,
    /// The tree's CPU time at the end of its last batch.
    last: Option<Duration>,
    outside: Duration,
    inside: Duration,
    /// The engine's wall time around the batches (send to answer).
    wall: Duration,
}

impl Watch {
    /// The account of the process tree below `pid` (the member's served child).
    pub fn of(pid: u32) -> Watch {
        Watch {
            root: Some(pid),
            ..Watch::default()
        }
    }

    /// Before a batch: add what the tree used since the end of the previous one; why the
    /// member must fail, if it must.
    pub fn before_batch(&mut self) -> Option<String> {
        let now = tree_cpu(self.root?)?;
        self.start = Some(now);
        if self.inside > self.wall.mul_f64(MAX_CPU_PER_WALL) + MIN_OUTSIDE {
            return Some(format!(
                "its processes used {:.0} ms of CPU in {:.0} ms of its batches: more than one \
                 CPU's worth (threads working beside the timed one)",
                self.inside.as_secs_f64() * 1e3,
                self.wall.as_secs_f64() * 1e3
            ));
        }
        let last = self.last.take()?;
        self.outside += now.saturating_sub(last);
        let share = self.outside.as_secs_f64() / self.inside.as_secs_f64().max(1e-9);
        (self.outside >= MIN_OUTSIDE && share >= MIN_SHARE).then(|| {
            format!(
                "its processes used {:.0} ms of CPU outside its own batches ({:.0}% of the \
                 {:.0} ms they used in them): a thread or child left running disturbs the other \
                 members",
                self.outside.as_secs_f64() * 1e3,
                share * 100.0,
                self.inside.as_secs_f64() * 1e3
            )
        })
    }

    /// The tree's CPU time now, to start [`PAUSE`].
    pub fn now(&self) -> Option<Duration> {
        self.root.and_then(tree_cpu)
    }

    /// After [`PAUSE`] begun at `then` (the tree's CPU time then): why the member must fail,
    /// if its processes used CPU in it.
    pub fn busy_in_pause(&self, then: Duration) -> Option<String> {
        let used = self.now()?.saturating_sub(then);
        (used >= PAUSE_MAX).then(|| {
            format!(
                "its processes used {:.1} ms of CPU outside its own batches in a {} ms pause \
                 after the session's last round, when no runner was timed: a thread or child \
                 left running disturbs the other members",
                used.as_secs_f64() * 1e3,
                PAUSE.as_millis()
            )
        })
    }

    /// The engine's wall time around a batch (from sending `batch` to its answer).
    pub fn add_wall(&mut self, wall: Duration) {
        self.wall += wall;
    }

    /// At the end of a batch: the CPU time the tree used in it, when known.
    pub fn after_batch(&mut self) -> Option<Duration> {
        let now = self.root.and_then(tree_cpu);
        let used = match (self.start.take(), now) {
            (Some(start), Some(now)) => Some(now.saturating_sub(start)),
            _ => None,
        };
        self.inside += used.unwrap_or_default();
        self.last = now;
        used
    }
}

/// Mark the last two rounds of `why` (one member's interference per round) as disturbed by
/// each of `culprits` (member labels): those that ran since the culprit's previous batch.
pub fn mark(why: &mut [Vec<String>], culprits: &[String]) {
    let n = why.len();
    for w in why.iter_mut().skip(n.saturating_sub(2)) {
        for c in culprits {
            let note = format!("{c} used CPU outside its batches");
            if !w.contains(&note) {
                w.push(note);
            }
        }
    }
}

/// CPU time of `root` and its descendants, with their reaped children's: per process the
/// sum of its threads' run time in nanoseconds (`/proc/<pid>/task/<tid>/schedstat`), or its
/// user + system time in clock ticks (`/proc/<pid>/stat`, which also holds threads that
/// ended) when that is more, plus its reaped children's user + system time.
fn tree_cpu(root: u32) -> Option<Duration> {
    let tick = 1e9 / procfs::ticks_per_second() as f64;
    let mut total_ns = 0f64;
    let mut stack = vec![root];
    let mut seen = 0usize;
    while let Some(pid) = stack.pop() {
        seen += 1;
        if seen > 4096 {
            break;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            // Gone: its time is in its parent's reaped children's.
            if pid == root {
                return None;
            }
            continue;
        };
        // Fields after the command name (which may hold spaces): state is field 3; utime,
        // stime, cutime, cstime are fields 14-17.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<u64> = rest
            .split_whitespace()
            .skip(11)
            .take(4)
            .map(|v| v.parse::<u64>().unwrap_or(0))
            .collect();
        let ticks = |r: std::ops::Range<usize>| f.get(r).map_or(0, |v| v.iter().sum::<u64>());
        let mut threads_ns = 0u64;
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for t in tasks.flatten() {
                threads_ns += std::fs::read_to_string(t.path().join("schedstat"))
                    .ok()
                    .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                    .unwrap_or(0);
                let children =
                    std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
                stack.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
        total_ns += (threads_ns as f64).max(ticks(0..2) as f64 * tick) + ticks(2..4) as f64 * tick;
    }
    Some(Duration::from_nanos(total_ns as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signal(c: &std::process::Child, sig: &str) {
        let ok = std::process::Command::new("kill")
            .args([sig, &c.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} {}", c.id());
    }

    /// Three children that spin: one all the time (a thread left running), one only in its
    /// "batches" (stopped between them, as a runner waiting on its pipe), and one idle.
    #[test]
    fn a_child_spinning_between_batches_is_caught_and_one_busy_only_in_them_is_not() {
        let spinner = || {
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap()
        };
        let (always, in_batches) = (spinner(), spinner());
        let idle = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        signal(&in_batches, "-STOP");
        let mut w: Vec<Watch> = [&always, &in_batches, &idle]
            .iter()
            .map(|c| Watch::of(c.id()))
            .collect();
        let mut verdicts = [None, None, None];
        for _ in 0..20 {
            for (w, v) in w.iter_mut().zip(verdicts.iter_mut()) {
                *v = v.take().or_else(|| w.before_batch());
            }
            signal(&in_batches, "-CONT");
            std::thread::sleep(Duration::from_millis(40));
            signal(&in_batches, "-STOP");
            // Let the stop land before reading (the runner's reply comes after its batch).
            std::thread::sleep(Duration::from_millis(2));
            w.iter_mut().for_each(|w| {
                w.add_wall(Duration::from_millis(42));
                w.after_batch();
            });
            std::thread::sleep(Duration::from_millis(40));
        }
        signal(&in_batches, "-CONT");
        for mut c in [always, in_batches, idle] {
            let _ = c.kill();
            let _ = c.wait();
        }
        assert!(
            verdicts[0]
                .as_ref()
                .is_some_and(|v| v.contains("outside its own batches")),
            "{verdicts:?}"
        );
        assert_eq!(verdicts[1], None);
        assert_eq!(verdicts[2], None);

        // The pause after the last round: the spinner is caught however short the session.
        let spin = spinner();
        let idle = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let (s, i) = (Watch::of(spin.id()), Watch::of(idle.id()));
        let (ts, ti) = (s.now().unwrap(), i.now().unwrap());
        std::thread::sleep(PAUSE);
        let (vs, vi) = (s.busy_in_pause(ts), i.busy_in_pause(ti));
        for mut c in [spin, idle] {
            let _ = c.kill();
            let _ = c.wait();
        }
        assert!(vs.is_some_and(|v| v.contains("outside its own batches in a 300 ms pause")));
        assert_eq!(vi, None);

        let mut why = vec![vec![], vec!["x".to_string()], vec![]];
        mark(&mut why, &["m/time:keygen".to_string()]);
        assert!(why[0].is_empty());
        assert_eq!(why[1].len(), 2);
        assert_eq!(why[2], ["m/time:keygen used CPU outside its batches"]);
    }
}
