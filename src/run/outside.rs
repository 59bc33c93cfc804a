//! CPU time a timing-session member's processes use outside its own batches: a thread or a
//! child its KEM leaves running between batches competes with the other members on the
//! bench core while the member itself is measured clean. The session reads the CPU time of
//! the member's process tree (the served child and its descendants, `/proc/<pid>/stat`
//! user + system time of each, with their reaped children's) at the end of each of its
//! batches and before the next one; a member whose processes used at least [`MIN_OUTSIDE`]
//! in total, and at least [`MIN_SHARE`] of the wall time between its batches, fails with
//! that reason, and the rounds it disturbed are marked in the other members' interference.

use std::time::{Duration, Instant};

/// Outside CPU time that fails a member (at least this much in total)...
pub const MIN_OUTSIDE: Duration = Duration::from_millis(30);
/// ...and at least this share of the wall time between its batches.
pub const MIN_SHARE: f64 = 0.1;

/// One member's account.
#[derive(Debug, Default)]
pub struct Watch {
    root: Option<u32>,
    /// The tree's CPU time at the end of its last batch, and when.
    last: Option<(Duration, Instant)>,
    outside: Duration,
    between: Duration,
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
        let (cpu, at) = self.last.take()?;
        let now = tree_cpu(self.root?)?;
        self.outside += now.saturating_sub(cpu);
        self.between += at.elapsed();
        let share = self.outside.as_secs_f64() / self.between.as_secs_f64().max(1e-9);
        (self.outside >= MIN_OUTSIDE && share >= MIN_SHARE).then(|| {
            format!(
                "its processes used {:.0} ms of CPU outside its own batches ({:.0}% of the {:.0} ms \
                 between them): a thread or child left running disturbs the other members",
                self.outside.as_secs_f64() * 1e3,
                share * 100.0,
                self.between.as_secs_f64() * 1e3
            )
        })
    }

    /// At the end of a batch.
    pub fn after_batch(&mut self) {
        self.last = self
            .root
            .and_then(tree_cpu)
            .map(|cpu| (cpu, Instant::now()));
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

/// User + system time of `root` and its descendants, with their reaped children's.
fn tree_cpu(root: u32) -> Option<Duration> {
    let tick = procfs::ticks_per_second() as f64;
    let mut total = 0u64;
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
        let f: Vec<&str> = rest.split_whitespace().collect();
        total += f
            .get(11..15)
            .into_iter()
            .flatten()
            .filter_map(|v| v.parse::<u64>().ok())
            .sum::<u64>();
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for t in tasks.flatten() {
                let children =
                    std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
                stack.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    Some(Duration::from_secs_f64(total as f64 / tick))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spinning_child_is_caught_and_an_idle_one_is_not() {
        let spin = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let idle = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let (mut s, mut i) = (Watch::of(spin.id()), Watch::of(idle.id()));
        s.after_batch();
        i.after_batch();
        let mut verdict = None;
        for _ in 0..40 {
            std::thread::sleep(Duration::from_millis(50));
            verdict = verdict.or_else(|| s.before_batch());
            s.after_batch();
            assert_eq!(i.before_batch(), None);
            i.after_batch();
        }
        for mut c in [spin, idle] {
            let _ = c.kill();
            let _ = c.wait();
        }
        assert!(verdict.is_some_and(|v| v.contains("outside its own batches")));

        let mut why = vec![vec![], vec!["x".to_string()], vec![]];
        mark(&mut why, &["m/time:keygen".to_string()]);
        assert!(why[0].is_empty());
        assert_eq!(why[1].len(), 2);
        assert_eq!(why[2], ["m/time:keygen used CPU outside its batches"]);
    }
}
