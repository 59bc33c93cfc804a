//! Was a timed batch disturbed? Activity on the bench core that is not the runner's.
//!
//! Two sources, read around every batch of a timing session:
//! - the bench core's line of `/proc/stat` (read by the engine): **steal** (the hypervisor
//!   ran another guest on this vCPU) and **irq + softirq** time, in USER_HZ ticks;
//! - the runner's own thread (read by the runner, [`kem_native::serve::OwnSched`]): time
//!   spent **runnable but waiting** for the CPU (another task ran on the core) and
//!   **involuntary context switches** (it was preempted).
//!
//! A batch is interfered when any steal or irq/softirq tick fell in it, or when the runner
//! waited for the CPU longer than 1% of the batch. A preemption is not a reason by itself:
//! the kernel's own short work on the core preempts the runner for microseconds, which costs
//! the batch far less than the precision a session aims at; what matters is how long the
//! runner was kept off the core, and that is the wait. Only where the wait cannot be read
//! (no schedstat) does any preemption mark the batch. The per-core busy time of `/proc/stat`
//! is not used to find other tasks: it is sampled at the scheduler tick, too coarse for
//! 10–20 ms batches, and another task on the core shows up as the runner's wait anyway. The
//! runner's run time (schedstat field 1) is not used either: it is brought up to date only at
//! scheduler events and ticks, so a batch's difference is off by up to a tick.
//!
//! The host's slower phases, which hypervisors do not always show as steal time, are seen
//! by the yardstick timed inside every batch instead ([`super::states`]).

use kem_native::serve::OwnSched;

/// Cumulative times of one CPU from `/proc/stat`, in USER_HZ ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

/// The `cpu<N>` line of a `/proc/stat` text (`user nice system idle iowait irq softirq steal
/// ...`); `None` when the line is missing or short.
pub fn parse_proc_stat(text: &str, cpu: usize) -> Option<CpuTimes> {
    let name = format!("cpu{cpu}");
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    Some(CpuTimes {
        irq: *f.get(5)?,
        softirq: *f.get(6)?,
        steal: *f.get(7)?,
    })
}

/// Read the bench core's times; `None` where `/proc/stat` cannot be read.
pub fn read_cpu(cpu: usize) -> Option<CpuTimes> {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?, cpu)
}

/// Largest wait for the CPU, as a fraction of the batch, still counted as clean.
pub const MAX_WAIT_SHARE: f64 = 0.01;

/// Why a batch of `batch_ns` counts as interfered (empty: clean). Missing readings add no
/// reason.
pub fn judge(
    before: Option<CpuTimes>,
    after: Option<CpuTimes>,
    own: &OwnSched,
    batch_ns: u64,
) -> Vec<String> {
    let mut why = Vec::new();
    if let (Some(b), Some(a)) = (before, after) {
        let steal = a.steal.saturating_sub(b.steal);
        if steal > 0 {
            why.push(format!("steal {steal} ticks"));
        }
        let irq = (a.irq + a.softirq).saturating_sub(b.irq + b.softirq);
        if irq > 0 {
            why.push(format!("irq/softirq {irq} ticks"));
        }
    }
    let preempted = own.involuntary.filter(|&n| n > 0);
    match own.wait_ns {
        Some(w) if w as f64 > MAX_WAIT_SHARE * batch_ns as f64 => {
            why.push(match preempted {
                Some(n) => format!("waited {} us for the CPU, preempted {n} times", w / 1000),
                None => format!("waited {} us for the CPU", w / 1000),
            });
        }
        Some(_) => {}
        None => {
            if let Some(n) = preempted {
                why.push(format!("preempted {n} times"));
            }
        }
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  41306 37581 8288 92613 468 0 82 192 0 0\n\
cpu0 20233 19114 3864 46836 153 0 5 93 0 0\n\
cpu1 21073 18467 4424 45776 314 2 76 99 0 0\n\
intr 123\n";

    #[test]
    fn reads_the_bench_core_line() {
        assert_eq!(
            parse_proc_stat(STAT, 1),
            Some(CpuTimes {
                irq: 2,
                softirq: 76,
                steal: 99
            })
        );
        assert_eq!(parse_proc_stat(STAT, 0).unwrap().steal, 93);
        assert_eq!(parse_proc_stat(STAT, 2), None);
        assert_eq!(parse_proc_stat("cpu1 1 2 3\n", 1), None);
    }

    #[test]
    fn judges_each_source() {
        let quiet = OwnSched {
            run_ns: Some(20_000_000),
            wait_ns: Some(100_000),
            voluntary: Some(0),
            involuntary: Some(0),
        };
        let t = |irq, softirq, steal| {
            Some(CpuTimes {
                irq,
                softirq,
                steal,
            })
        };
        // 0.1 ms wait in a 20 ms batch is 0.5%: clean.
        assert!(judge(t(0, 5, 9), t(0, 5, 9), &quiet, 20_000_000).is_empty());
        assert_eq!(
            judge(t(0, 5, 9), t(1, 6, 11), &quiet, 20_000_000),
            vec!["steal 2 ticks", "irq/softirq 2 ticks"]
        );
        let busy = OwnSched {
            wait_ns: Some(16_314_707),
            involuntary: Some(2),
            ..quiet
        };
        assert_eq!(
            judge(None, None, &busy, 27_000_000),
            vec!["waited 16314 us for the CPU, preempted 2 times"]
        );
        // Preempted twice for 0.1 ms in all: below 1% of the batch, clean.
        let brief = OwnSched {
            involuntary: Some(2),
            ..quiet
        };
        assert!(judge(None, None, &brief, 20_000_000).is_empty());
        // Without schedstat the wait is unknown: any preemption marks the batch.
        let blind = OwnSched {
            wait_ns: None,
            ..brief
        };
        assert_eq!(
            judge(None, None, &blind, 20_000_000),
            vec!["preempted 2 times"]
        );
        assert!(judge(None, None, &OwnSched::default(), 1).is_empty());
    }
}
