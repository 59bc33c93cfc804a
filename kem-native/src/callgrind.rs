//! callgrind's `CALLGRIND_START_INSTRUMENTATION` client request, for the `count` job.
//!
//! callgrind counts a call on a call arc whenever the arc is taken, also while cost
//! collection is off (`--collect-atstart=no`, outside `--toggle-collect`), and clears an
//! arc's count only when a dump writes that arc, which needs cost on it. The calls the
//! runner makes to prepare an operation's inputs (`keygen` before `enc`, both before
//! `dec`) therefore landed in the profile of the first counted call that took the same arcs
//! (`shake128_absorb` 32 times in the first ML-KEM-1024 `enc` profile instead of 16), and
//! `--zero-before` does not help: it zeroes costs, not call counts. So the engine starts
//! callgrind with `--instr-atstart=no` and the runner turns instrumentation on only after
//! the preparation: nothing of it is seen by callgrind at all.
//!
//! The request is valgrind's "special instruction" sequence (`valgrind.h`,
//! `VALGRIND_DO_CLIENT_REQUEST_STMT`) written out for x86-64 and aarch64: a few register
//! rotations that leave every register as it was, so outside valgrind it does nothing.

/// `VG_USERREQ_TOOL_BASE('C','T')`: the first of callgrind's requests (`callgrind.h`).
const CALLGRIND_BASE: usize = ((b'C' as usize) << 24) | ((b'T' as usize) << 16);
/// `VG_USERREQ__START_INSTRUMENTATION`, the fifth of them.
pub const START_INSTRUMENTATION: usize = CALLGRIND_BASE + 4;

/// Turn callgrind's instrumentation on (a no-op outside valgrind and under another tool).
pub fn start_instrumentation() {
    client_request(START_INSTRUMENTATION);
}

/// One client request without arguments; returns valgrind's answer, 0 outside valgrind.
#[cfg(target_arch = "x86_64")]
fn client_request(request: usize) -> usize {
    let args: [usize; 6] = [request, 0, 0, 0, 0, 0];
    let mut result: usize = 0;
    // SAFETY: rdi is rotated by 3 + 13 + 61 + 51 = 128 bits (back to its value) and
    // `xchg rbx, rbx` changes nothing; valgrind reads the six words at rax and writes its
    // answer to rdx (left as the default 0 outside valgrind).
    unsafe {
        std::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            in("rax") args.as_ptr(),
            inout("rdx") result,
            options(nostack),
        );
    }
    result
}

/// One client request without arguments; returns valgrind's answer, 0 outside valgrind.
#[cfg(target_arch = "aarch64")]
fn client_request(request: usize) -> usize {
    let args: [usize; 6] = [request, 0, 0, 0, 0, 0];
    let mut result: usize = 0;
    // SAFETY: x12 is rotated by 3 + 13 + 51 + 61 = 128 bits (back to its value) and
    // `orr x10, x10, x10` changes nothing; valgrind reads the six words at x4 and writes
    // its answer to x3 (left as the default 0 outside valgrind).
    unsafe {
        std::arch::asm!(
            "ror x12, x12, #3",
            "ror x12, x12, #13",
            "ror x12, x12, #51",
            "ror x12, x12, #61",
            "orr x10, x10, x10",
            in("x4") args.as_ptr(),
            inout("x3") result,
            options(nostack),
        );
    }
    result
}

/// Architectures valgrind's request sequence is not written out for here: no request (the
/// `count` step then gets no profile and says so).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn client_request(_request: usize) -> usize {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_code_is_callgrinds() {
        // callgrind.h: VG_USERREQ__DUMP_STATS = VG_USERREQ_TOOL_BASE('C','T'), then
        // ZERO_STATS, TOGGLE_COLLECT, DUMP_STATS_AT, START_INSTRUMENTATION.
        assert_eq!(START_INSTRUMENTATION, 0x4354_0004);
    }

    #[test]
    fn outside_valgrind_the_request_does_nothing() {
        assert_eq!(client_request(START_INSTRUMENTATION), 0);
        start_instrumentation();
    }
}
