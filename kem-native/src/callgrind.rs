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
//! The request is valgrind's own macro from `<valgrind/callgrind.h>`: the engine compiles a
//! generated C file into the valgrind object that exports it as [`START_SYMBOL`] (empty where
//! valgrind's headers are missing), and the runner calls that function. Outside valgrind the
//! request is a few instructions that change nothing.

use crate::error::LoadError;
use crate::kem::Kem;
use std::ffi::c_void;

/// `void ngcc_callgrind_start(void)`: `CALLGRIND_START_INSTRUMENTATION`.
pub const START_SYMBOL: &str = "ngcc_callgrind_start";

/// The object's request that turns callgrind's instrumentation on.
#[derive(Clone, Copy)]
pub struct Start(unsafe extern "C" fn());

impl Start {
    /// Resolve [`START_SYMBOL`] in `kem`; fails when the object was not built for the
    /// `count` step (the plain object has no such function).
    pub fn of(kem: &Kem) -> Result<Start, LoadError> {
        let f = kem
            .lib
            .symbol(START_SYMBOL)
            .map_err(|e| LoadError::NotBuiltForCount(Box::new(e)))?;
        // SAFETY: the symbol is the engine's generated `void ngcc_callgrind_start(void)`.
        Ok(Start(unsafe {
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn()>(f)
        }))
    }

    /// Turn callgrind's instrumentation on (nothing outside valgrind or under another tool).
    pub fn now(self) {
        // SAFETY: a C function without arguments or results that only makes the request.
        unsafe { (self.0)() }
    }
}
