//! Clocks for the hot loop: a cycle counter, a monotonic nanosecond clock, CPU pinning and
//! `perf_event_open` core cycles.
//!
//! The counter is the 64-bit TSC on x86-64, read as `lfence; rdtsc` at the start of a
//! region and `rdtscp; lfence` at its end so no instruction of the region leaks outside
//! (Intel, "How to Benchmark Code Execution Times", 2010); the virtual counter
//! `cntvct_el0` behind an `isb` on aarch64; the monotonic clock in nanoseconds elsewhere.

use crate::error::SysError;
use std::ffi::c_int;

/// Name of the counter [`start`]/[`stop`] read, as recorded in `TimeOutput::counter`.
pub fn counter_name() -> &'static str {
    if cfg!(target_arch = "x86_64") {
        "rdtsc"
    } else if cfg!(target_arch = "aarch64") {
        "cntvct_el0"
    } else {
        "monotonic"
    }
}

/// Counter value at the start of a timed region.
#[inline(always)]
pub fn start() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: lfence and rdtsc are available on every x86-64 CPU and have no memory effects.
        unsafe {
            core::arch::x86_64::_mm_lfence();
            let t = core::arch::x86_64::_rdtsc();
            core::arch::x86_64::_mm_lfence();
            t
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        read_cntvct()
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        now_ns()
    }
}

/// Counter value at the end of a timed region.
#[inline(always)]
pub fn stop() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let mut aux = 0u32;
        // SAFETY: rdtscp exists on every x86-64 CPU this tool targets (since 2008); `aux`
        // is a valid u32 out-parameter.
        unsafe {
            let t = core::arch::x86_64::__rdtscp(&mut aux);
            core::arch::x86_64::_mm_lfence();
            t
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        read_cntvct()
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        now_ns()
    }
}

#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn read_cntvct() -> u64 {
    let v: u64;
    // SAFETY: cntvct_el0 is readable from EL0 on Linux; isb orders it after earlier work.
    unsafe { core::arch::asm!("isb", "mrs {v}, cntvct_el0", v = out(reg) v, options(nostack)) };
    v
}

/// Monotonic clock, nanoseconds.
#[inline(always)]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-parameter; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Pin the calling thread to `cpu` (`sched_setaffinity`). A thread already kept on `cpu`
/// alone (the engine pins a timing job before it starts, and its seccomp filter then
/// refuses `sched_setaffinity`) makes no call.
pub fn pin_to_cpu(cpu: usize) -> Result<(), SysError> {
    if crate::sys::thread_affinity().is_ok_and(|now| now == [cpu]) {
        return Ok(());
    }
    crate::sys::set_thread_affinity(&[cpu]).map_err(|source| SysError::Pin { cpu, source })
}

/// The CPU the calling thread is running on right now.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no arguments and only returns a value.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

/// First 64 bytes of `struct perf_event_attr` (PERF_ATTR_SIZE_VER0).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
// _IO('$', 0), _IO('$', 1), _IO('$', 3)
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
const PERF_EVENT_IOC_RESET: libc::c_ulong = 0x2403;

/// A user-space core-cycle counter for the calling thread (`perf_event_open`).
#[derive(Debug)]
pub struct PerfCycles {
    fd: c_int,
}

impl PerfCycles {
    /// Open the counter, or say why it is unavailable (errno and `perf_event_paranoid`).
    pub fn open() -> Result<PerfCycles, SysError> {
        let attr = PerfEventAttr {
            type_: PERF_TYPE_HARDWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_HW_CPU_CYCLES,
            flags: FLAG_DISABLED | FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV,
            ..Default::default()
        };
        // SAFETY: `attr` is a valid perf_event_attr prefix whose `size` says how much the
        // kernel may read; pid 0 / cpu -1 means this thread on any CPU.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                0 as libc::pid_t,
                -1 as c_int,
                -1 as c_int,
                0 as libc::c_ulong,
            )
        };
        if fd < 0 {
            let err = std::io::Error::last_os_error();
            let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into());
            return Err(SysError::PerfOpen {
                source: err,
                paranoid,
            });
        }
        let mut p = PerfCycles { fd: fd as c_int };
        // A counter that opens but never counts (some VMs) is as good as none.
        p.reset_enable();
        let mut x = 0u64;
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        match p.disable_read() {
            Some(c) if c > 0 => Ok(p),
            _ => Err(SysError::PerfSilent),
        }
    }

    /// Reset to zero and start counting.
    #[inline(always)]
    pub fn reset_enable(&mut self) {
        // SAFETY: fd is an open perf event; these ioctls take no argument.
        unsafe {
            libc::ioctl(self.fd, PERF_EVENT_IOC_RESET, 0);
            libc::ioctl(self.fd, PERF_EVENT_IOC_ENABLE, 0);
        }
    }

    /// Stop counting and read the count.
    #[inline(always)]
    pub fn disable_read(&mut self) -> Option<u64> {
        let mut v = 0u64;
        // SAFETY: fd is an open perf event; read() of 8 bytes into a u64 is its format.
        let n = unsafe {
            libc::ioctl(self.fd, PERF_EVENT_IOC_DISABLE, 0);
            libc::read(self.fd, (&mut v as *mut u64).cast(), 8)
        };
        (n == 8).then_some(v)
    }
}

impl Drop for PerfCycles {
    fn drop(&mut self) {
        // SAFETY: closing the fd we own.
        unsafe { libc::close(self.fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_advances_and_is_monotonic() {
        let a = start();
        let n0 = now_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = stop();
        let n1 = now_ns();
        assert!(b > a, "counter did not advance: {a} -> {b}");
        assert!(
            n1 - n0 >= 2_000_000,
            "monotonic clock advanced only {} ns",
            n1 - n0
        );
    }

    #[test]
    fn pinning_to_current_cpu_works_and_bad_cpu_fails() {
        let cpu = current_cpu().expect("sched_getcpu");
        pin_to_cpu(cpu).unwrap();
        assert_eq!(current_cpu(), Some(cpu));
        assert!(pin_to_cpu(100_000).is_err());
    }

    #[test]
    fn perf_is_available_or_explained() {
        match PerfCycles::open() {
            Ok(mut p) => {
                p.reset_enable();
                let mut x = 0u64;
                for i in 0..100_000u64 {
                    x = std::hint::black_box(x ^ i);
                }
                assert!(p.disable_read().unwrap() > 10_000);
            }
            Err(why) => assert!(why.to_string().starts_with("perf_event_open"), "{why}"),
        }
    }
}
