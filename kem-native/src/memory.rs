//! Memory figures of the runner's own process.
//!
//! * [`status_kib`] reads `VmRSS` / `VmHWM` from `/proc/self/status` (KiB).
//! * [`stack_high_water`] measures how much stack one call touches, the way pqm4 does on
//!   microcontrollers: a thread is started on a stack we `mmap` (with a `PROT_NONE` guard
//!   page below it); on that thread everything below the current stack pointer (minus a
//!   small margin for the painter's own frame) is painted with a pattern, the call runs, and
//!   the lowest byte that no longer holds the pattern gives the depth reached, measured
//!   from the painted top. That includes the frames of the code making the call; the
//!   runner subtracts the depth an empty function reaches through the same path.

use crate::error::SysError;
use std::ffi::c_void;

/// A field of `/proc/self/status` in KiB (`VmRSS`, `VmHWM`, ...).
pub fn status_kib(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_status_kib(&text, field)
}

fn parse_status_kib(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        let mut parts = rest.split_whitespace();
        let n = parts.next()?.parse().ok()?;
        (parts.next() == Some("kB")).then_some(n)
    })
}

/// The paint byte.
const PAINT: u8 = 0x5A;
/// Bytes left unpainted just below the painter's stack pointer.
const MARGIN: usize = 512;

/// Result of one painted-stack run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackUse {
    /// Bytes below the painted top that the call touched.
    pub used: u64,
    /// Bytes painted.
    pub painted: u64,
}

struct Job<'a> {
    f: &'a mut (dyn FnMut() + Send),
    bottom: usize,
    result: Option<StackUse>,
    panicked: bool,
}

#[inline(never)]
fn paint_below_me(bottom: usize) -> usize {
    let marker = 0u8;
    let sp = std::hint::black_box(&marker) as *const u8 as usize;
    let top = (sp - MARGIN) & !15;
    // SAFETY: [bottom, top) is the unused part of this thread's own mmap'd stack, below
    // every live frame (the margin covers this function's frame and memset's).
    unsafe { std::ptr::write_bytes(bottom as *mut u8, PAINT, top - bottom) };
    top
}

#[inline(never)]
fn lowest_touched(bottom: usize, top: usize) -> usize {
    // SAFETY: [bottom, top) is mapped, readable memory of this thread's stack.
    let painted = unsafe { std::slice::from_raw_parts(bottom as *const u8, top - bottom) };
    match painted.iter().position(|&b| b != PAINT) {
        Some(i) => bottom + i,
        None => top,
    }
}

extern "C" fn painted_thread(arg: *mut c_void) -> *mut c_void {
    // SAFETY: `arg` is the `&mut Job` passed to pthread_create; the creator waits in
    // pthread_join, so the borrow is live and exclusive for this thread's whole run.
    let job = unsafe { &mut *(arg as *mut Job) };
    let bottom = job.bottom;
    let top = paint_below_me(bottom);
    let f = &mut *job.f;
    let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_ok();
    let low = lowest_touched(bottom, top);
    job.result = Some(StackUse {
        used: (top - low) as u64,
        painted: (top - bottom) as u64,
    });
    job.panicked = !ok;
    std::ptr::null_mut()
}

/// Run `f` once on a fresh thread with a painted `stack_bytes` stack and report how deep
/// it went. A stack overflow hits the guard page (SIGSEGV), which the parent observes.
pub fn stack_high_water(
    stack_bytes: usize,
    f: &mut (dyn FnMut() + Send),
) -> Result<StackUse, SysError> {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let size = stack_bytes.div_ceil(page) * page;
    let total = size + page;
    // SAFETY: an anonymous private mapping we own and unmap below.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            total,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(SysError::Call {
            call: format!("mmap of a {stack_bytes}-byte stack"),
            source: std::io::Error::last_os_error(),
        });
    }
    let result = (|| {
        // SAFETY: the lowest page of our own mapping becomes the guard.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(SysError::Call {
                call: "mprotect guard page".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        let stack = base as usize + page;
        let mut job = Job {
            f,
            bottom: stack,
            result: None,
            panicked: false,
        };
        // SAFETY: attr is initialised before use and destroyed after; the stack region is
        // ours, page aligned and `size` bytes; `job` outlives the thread (joined below).
        unsafe {
            let mut attr: libc::pthread_attr_t = std::mem::zeroed();
            libc::pthread_attr_init(&mut attr);
            let rc = libc::pthread_attr_setstack(&mut attr, stack as *mut c_void, size);
            if rc != 0 {
                libc::pthread_attr_destroy(&mut attr);
                return Err(SysError::Pthread {
                    call: "pthread_attr_setstack",
                    rc,
                });
            }
            let mut tid: libc::pthread_t = std::mem::zeroed();
            let rc = libc::pthread_create(
                &mut tid,
                &attr,
                painted_thread,
                (&mut job as *mut Job).cast(),
            );
            libc::pthread_attr_destroy(&mut attr);
            if rc != 0 {
                return Err(SysError::Pthread {
                    call: "pthread_create on the painted stack",
                    rc,
                });
            }
            libc::pthread_join(tid, std::ptr::null_mut());
        }
        if job.panicked {
            return Err(SysError::PaintedPanic);
        }
        job.result.ok_or(SysError::PaintedNothing)
    })();
    // SAFETY: unmapping the region mapped above; the thread using it has been joined.
    unsafe { libc::munmap(base, total) };
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_fields() {
        let text = "Name:\tx\nVmHWM:\t   12345 kB\nVmRSS:\t    2048 kB\n";
        assert_eq!(parse_status_kib(text, "VmRSS"), Some(2048));
        assert_eq!(parse_status_kib(text, "VmHWM"), Some(12345));
        assert_eq!(parse_status_kib(text, "VmSwap"), None);
        assert!(status_kib("VmRSS").unwrap() > 0);
    }

    #[inline(never)]
    fn use_stack(n: usize) -> u8 {
        let mut buf = vec![0u8; 0];
        buf.clear();
        let mut arr = [0u8; 64 * 1024];
        let a = std::hint::black_box(&mut arr[..n]);
        a.fill(1);
        std::hint::black_box(a)[n / 2]
    }

    #[test]
    fn stack_painting_sees_a_64k_frame() {
        let mut f = || {
            std::hint::black_box(use_stack(60 * 1024));
        };
        let u = stack_high_water(1 << 20, &mut f).unwrap();
        assert!(u.used >= 60 * 1024, "used {}", u.used);
        assert!(u.used < 80 * 1024, "used {}", u.used);
        assert!(
            u.painted > 900 * 1024 && u.painted <= 1 << 20,
            "painted {}",
            u.painted
        );
    }

    #[test]
    fn stack_painting_of_a_trivial_call_is_small() {
        let mut f = || {
            std::hint::black_box(1 + 1);
        };
        let u = stack_high_water(1 << 20, &mut f).unwrap();
        assert!(u.used < 4096, "used {}", u.used);
    }
}
