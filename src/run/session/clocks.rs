//! The clock is not the KEM's: each batch's figures are checked against what the engine
//! measures from outside kem-runner.
//!
//! Why: the KEM runs in kem-runner's process and can try to fake the clock: trap the
//! time-stamp counter (`prctl(PR_SET_TSC)`, refused by the jail's seccomp filter), rewrite the
//! runner's GOT entry of `clock_gettime`, or patch the runner's code so that both its counter
//! and its clock read low. Three checks live outside its reach, in the engine:
//!
//! - **The time the batch took.** The engine's monotonic clock from sending `batch` to
//!   reading the answer, less the time the engine's own thread waited for a CPU meanwhile
//!   ([`run_delay`]), and at most the CPU time the runner's process tree used meanwhile
//!   (read from `/proc`: on a loaded host the runner waits for its core before and after the
//!   batch, which lengthens the wall but not its CPU time; a KEM can neither shorten its CPU
//!   time without doing less nor lengthen the engine's wait), must be mostly covered by what
//!   the batch reports: its KEM blocks' ns and its yardstick blocks' ticks at the machine's
//!   rate. A batch covering less than [`MIN_COVER`] of it (less [`SLACK`] for the exchange)
//!   claims less time than it took (a halved clock, patched counters).
//! - **CPU time** (in [`super::super::outside`]): the runner's process tree may not use more
//!   CPU in its batches than their wall time allows on one core.
//!
//! Limits: a batch shorter than [`MIN_WALL`] is checked for its rate only, and code in the
//! runner's process that fakes both the counter and the clock consistently is caught only
//! by the wall around the batch.
//!
//! One odd batch can be the host's (the engine's thread delayed in reading the answer), so a
//! member fails after [`STRIKES`] such batches, naming the first; a faking runner fails them
//! all. The limits: code that shares the runner's process could fake the clock, the counter
//! and the wall-time it reports consistently only by also slowing its answer — which the
//! engine then sees as the time it took.

use std::time::Duration;

use kem_native::serve::BatchReply;
use kem_native::timer;

/// A batch's ticks per ns may differ from the machine's by this share.
pub const RATE_TOLERANCE: f64 = 0.02;

/// Share of the engine's wall time around a batch, less [`SLACK`], that its reported time
/// must cover.
pub const MIN_COVER: f64 = 0.5;

/// What the exchange itself may take beyond the batch (the pipe both ways, the runner's
/// `/proc` reads and its JSON): a fraction of a millisecond here.
pub const SLACK: Duration = Duration::from_millis(1);

/// Walls shorter than this are not held to [`MIN_COVER`]: the exchange and a loaded engine's
/// wake-up weigh as much as the batch (the default batch lasts 20 ms).
pub const MIN_WALL: Duration = Duration::from_millis(5);

/// Odd batches after which a member fails.
pub const STRIKES: u32 = 3;

/// Batches shorter than this are not checked for their rate (the clock's resolution and
/// the cost of reading it weigh too much).
const MIN_RATE_NS: u64 = 1_000_000;

/// How long the engine's thread has waited for a CPU, runnable, since it started
/// (`/proc/thread-self/schedstat`, field 2); zero where the kernel does not tell. Taken
/// around a batch, it is the part of the engine's wall that a loaded host spent before the
/// engine could read the answer: not the batch's, so not held against its cover.
pub fn run_delay() -> Duration {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|t| t.split_whitespace().nth(1)?.parse().ok())
        .map(Duration::from_nanos)
        .unwrap_or_default()
}

/// This machine's counter rate, ticks per ns: the median of three 20 ms measurements over the
/// monotonic clock, on the engine's thread (the counter is the same on every core of a
/// machine with an invariant TSC, and `cntvct` on aarch64 runs at a fixed rate).
pub fn machine_rate() -> Option<f64> {
    let mut r: Vec<f64> = (0..3)
        .filter_map(|_| {
            let (t0, n0) = (timer::start(), timer::now_ns());
            std::thread::sleep(Duration::from_millis(20));
            let (t1, n1) = (timer::stop(), timer::now_ns());
            let ns = n1.checked_sub(n0).filter(|&ns| ns > 0)?;
            Some(t1.wrapping_sub(t0) as f64 / ns as f64)
        })
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    r.sort_by(f64::total_cmp);
    r.get(r.len() / 2).copied()
}

/// What the engine measured around one batch, from outside kem-runner.
#[derive(Debug, Clone, Copy, Default)]
pub struct Spent {
    /// Its monotonic clock from sending `batch` to reading the answer.
    pub wall: Duration,
    /// How long its own thread waited for a CPU meanwhile ([`run_delay`]).
    pub waited: Duration,
    /// The CPU time the runner's process tree used meanwhile (`/proc`), when known.
    pub busy: Option<Duration>,
}

impl Spent {
    /// The time the batch took at most: the wall less the engine's own wait for a CPU, and
    /// no more than the runner's processes ran. (On a loaded host the runner waits for its
    /// core before and after the batch too; that lengthens the wall, not its CPU time. A KEM
    /// cannot shorten its CPU time without doing less, nor lengthen the engine's wait.)
    fn took(&self) -> Duration {
        let wall = self.wall.saturating_sub(self.waited);
        self.busy.map_or(wall, |b| b.min(wall))
    }
}

/// What is wrong with batch `n`'s clocks, if anything: its rate against `rate` (the
/// machine's), its reported time against what the engine measured around it.
pub fn odd(n: usize, b: &BatchReply, spent: Spent, rate: Option<f64>) -> Option<String> {
    let rate = rate?;
    if b.ns >= MIN_RATE_NS {
        let own = b.cycles as f64 / b.ns as f64;
        if (own / rate - 1.0).abs() > RATE_TOLERANCE {
            return Some(format!(
                "implausible timing record: batch {n} counts {:.3} ticks per ns where this \
                 machine's counter runs at {rate:.3} (kem-runner's clock or counter is not \
                 the machine's)",
                own
            ));
        }
    }
    let gauge_ns = b.gauge_cycles.iter().sum::<u64>() as f64 / rate;
    let covered = b.ns as f64 + gauge_ns;
    let took = spent.took();
    let due = MIN_COVER * took.saturating_sub(SLACK).as_nanos() as f64;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (took >= MIN_WALL && covered < due).then(|| {
        format!(
            "implausible timing record: batch {n} accounts for {:.3} ms of the {:.3} ms it \
             took as the engine measured it ({:.3} ms around it, {} of the runner's CPU) \
             (kem-runner's clock is not the machine's)",
            covered / 1e6,
            ms(took),
            ms(spent.wall),
            spent
                .busy
                .map_or("no account".into(), |c| format!("{:.3} ms", ms(c)))
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kem_native::serve::OwnSched;

    fn wall(wall: Duration) -> Spent {
        Spent {
            wall,
            ..Spent::default()
        }
    }

    fn reply(cycles: u64, ns: u64, gauge: Vec<u64>) -> BatchReply {
        BatchReply {
            iters: 100,
            cycles,
            ns,
            core_cycles: None,
            own: OwnSched::default(),
            layout_cycles: Vec::new(),
            gauge_cycles: gauge,
            fold: None,
        }
    }

    #[test]
    fn a_batch_at_the_machines_rate_covering_its_wall_passes() {
        let ms = Duration::from_millis;
        // 2.6 ticks per ns: 19 ms of KEM, 2 x 0.4 ms of yardstick, in 20 ms of wall.
        let b = reply(49_400_000, 19_000_000, vec![1_040_000, 1_040_000]);
        assert_eq!(odd(1, &b, wall(ms(20)), Some(2.6)), None);
        // Without the machine's rate nothing is claimed either way.
        assert_eq!(
            odd(1, &reply(1, 19_000_000, vec![]), wall(ms(20)), None),
            None
        );
    }

    #[test]
    fn a_counter_at_another_rate_or_a_halved_clock_is_implausible() {
        let ms = Duration::from_millis;
        // The counter emulated at a quarter of its rate (the PR_SET_TSC fixture's 0.645 GHz
        // against 2.595).
        let b = reply(12_350_000, 19_000_000, vec![]);
        let why = odd(3, &b, wall(ms(20)), Some(2.6)).expect("odd");
        assert!(why.contains("batch 3 counts 0.650 ticks per ns"), "{why}");
        // Clock and counter both halved (patched code): the rate agrees, the wall does not
        // (9 ms against the 9.5 ms due: half of 20 ms less the exchange's 1 ms).
        let b = reply(23_400_000, 9_000_000, vec![]);
        let why = odd(4, &b, wall(ms(20)), Some(2.6)).expect("odd");
        assert!(
            why.contains("accounts for 9.000 ms of the 20.000 ms it took"),
            "{why}"
        );
        // The same with the runner's processes seen running all along: still odd.
        let ran = Spent {
            busy: Some(ms(20)),
            ..wall(ms(20))
        };
        assert!(odd(4, &b, ran, Some(2.6)).is_some());
        // A short batch whose wall is mostly the exchange is not held to it.
        let short = Duration::from_micros(900);
        assert_eq!(odd(6, &reply(26, 10, vec![]), wall(short), Some(2.6)), None);
        // A rate 1.5% off is the clock's noise, not a fake.
        let b = reply(50_141_000, 19_000_000, vec![]);
        assert_eq!(odd(5, &b, wall(ms(20)), Some(2.6)), None);
    }

    #[test]
    fn a_loaded_host_lengthens_the_wall_not_the_batch() {
        let ms = Duration::from_millis;
        // The CI case: an honest 19.5 ms batch answered after 49 ms, the runner waiting for
        // its core before and after it (it ran 20 ms), or the engine waiting for its own.
        let b = reply(50_700_000, 19_500_000, vec![]);
        assert!(odd(1, &b, wall(ms(49)), Some(2.6)).is_some());
        let ran = Spent {
            busy: Some(ms(20)),
            ..wall(ms(49))
        };
        assert_eq!(odd(1, &b, ran, Some(2.6)), None);
        let engine_waited = Spent {
            waited: ms(29),
            ..wall(ms(49))
        };
        assert_eq!(odd(1, &b, engine_waited, Some(2.6)), None);
        // A halved clock is odd on a loaded host too: 9 ms claimed of the 20 ms it ran.
        let halved = reply(23_400_000, 9_000_000, vec![]);
        assert!(odd(1, &halved, ran, Some(2.6)).is_some());
    }

    #[test]
    fn the_engines_wait_for_a_cpu_is_read_and_only_grows() {
        let a = run_delay();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = run_delay();
        assert!(b >= a, "{a:?} then {b:?}");
        // Linux has had schedstat since 2.6; every kernel this tool supports shows it.
        assert!(std::path::Path::new("/proc/thread-self/schedstat").exists());
    }

    #[test]
    fn the_machines_rate_is_measured() {
        let r = machine_rate().expect("a rate");
        // Any counter this tool runs on ticks between 10 MHz (aarch64's cntvct: 24-100 MHz
        // on real boards) and 10 GHz.
        assert!(r > 0.01 && r < 10.0, "{r}");
    }
}
