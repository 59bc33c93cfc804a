//! Profile jobs on a wrapped ("profile") build of an instance.
//!
//! The engine links the object with `-Wl,--wrap` wrappers that count calls and ticks per
//! wrapped symbol and export:
//!
//! ```c
//! struct ngcc_prof_entry { const char *symbol; const char *family;
//!                          uint64_t calls; uint64_t outer_calls; uint64_t cycles; };
//! size_t ngcc_prof_entries(const struct ngcc_prof_entry **out);
//! void ngcc_prof_reset(void);
//! void ngcc_prof_calibrate(uint64_t n, double *outer_per_call, double *inner_per_call);
//! ```
//!
//! `cycles` are ticks inside outermost wrapped calls only. A wrapper records
//! `inner_per_call` ticks for an empty function, so a symbol's own figure is
//! `cycles - outer_calls * inner_per_call` (floored at 0); `outer_per_call`, the ticks a
//! wrapper adds to its caller, is reported as the wrapper overhead.

use crate::error::LoadError;
use crate::kem::Kem;
use crate::output::{ProfileOutput, SymbolProfile};
use crate::timing::{Op, OpCall};
use std::ffi::{c_char, c_void, CStr};

/// `struct ngcc_prof_entry`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ProfEntry {
    /// Wrapped symbol name.
    pub symbol: *const c_char,
    /// Family from the manifest (or `drng`).
    pub family: *const c_char,
    /// All calls.
    pub calls: u64,
    /// Calls not nested in another wrapped call.
    pub outer_calls: u64,
    /// Ticks inside outermost calls.
    pub cycles: u64,
}

type EntriesFn = unsafe extern "C" fn(*mut *const ProfEntry) -> usize;
type ResetFn = unsafe extern "C" fn();
type CalibrateFn = unsafe extern "C" fn(u64, *mut f64, *mut f64);

/// The profile ABI of one object.
pub struct ProfileApi {
    entries: EntriesFn,
    reset: ResetFn,
    calibrate: CalibrateFn,
}

/// Calls used to calibrate the wrapper overhead.
const CALIBRATION_CALLS: u64 = 100_000;

fn c_text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the table's strings are NUL-terminated literals of the profile object.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

impl ProfileApi {
    /// Resolve `ngcc_prof_entries`, `ngcc_prof_reset` and `ngcc_prof_calibrate`.
    pub fn resolve(kem: &Kem) -> Result<ProfileApi, LoadError> {
        let e = kem.lib.symbol("ngcc_prof_entries")?;
        let r = kem.lib.symbol("ngcc_prof_reset")?;
        let c = kem.lib.symbol("ngcc_prof_calibrate")?;
        // SAFETY: the profile ABI documented above fixes these prototypes.
        unsafe {
            Ok(ProfileApi {
                entries: std::mem::transmute::<*mut c_void, EntriesFn>(e),
                reset: std::mem::transmute::<*mut c_void, ResetFn>(r),
                calibrate: std::mem::transmute::<*mut c_void, CalibrateFn>(c),
            })
        }
    }

    /// Zero every counter.
    pub fn reset(&self) {
        // SAFETY: ABI function without arguments.
        unsafe { (self.reset)() }
    }

    /// `(outer_per_call, inner_per_call)` from `n` calls.
    pub fn calibrate(&self, n: u64) -> (f64, f64) {
        let (mut outer, mut inner) = (0f64, 0f64);
        // SAFETY: two valid f64 out-parameters.
        unsafe { (self.calibrate)(n, &mut outer, &mut inner) };
        (outer, inner)
    }

    /// A copy of the table.
    pub fn entries(&self) -> Vec<ProfEntry> {
        let mut ptr: *const ProfEntry = std::ptr::null();
        // SAFETY: the function stores a pointer to its static table and returns its length.
        let n = unsafe { (self.entries)(&mut ptr) };
        if ptr.is_null() || n == 0 {
            return Vec::new();
        }
        // SAFETY: `ptr` points to `n` entries of a static table.
        unsafe { std::slice::from_raw_parts(ptr, n) }.to_vec()
    }
}

/// Turn a table into per-symbol figures, subtracting the inner overhead per outer call.
pub fn symbols_from(entries: &[ProfEntry], inner_per_call: f64) -> Vec<SymbolProfile> {
    entries
        .iter()
        .map(|e| SymbolProfile {
            symbol: c_text(e.symbol),
            family: c_text(e.family),
            calls: e.calls,
            cycles: (e.cycles as f64 - e.outer_calls as f64 * inner_per_call).max(0.0),
        })
        .collect()
}

/// Calibrate, reset, run `iters` calls of the prepared operation, read the table.
/// Returns the output and the OR of the return codes.
pub fn profile_op(api: &ProfileApi, op: Op, call: &OpCall, iters: u64) -> (ProfileOutput, i32) {
    let (outer, inner) = api.calibrate(CALIBRATION_CALLS);
    // One unmeasured call so first-touch costs stay out of the table.
    let mut rc_or = call.once();
    api.reset();
    let b = call.batch(false, iters);
    rc_or |= b.rc_or;
    let table = api.entries();
    (
        ProfileOutput {
            op: op.name().into(),
            iters,
            total_cycles: b.ticks,
            wrapper_overhead_cycles: outer,
            symbols: symbols_from(&table, inner),
            failure: None,
        },
        rc_or,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtracts_inner_overhead_and_floors_at_zero() {
        let a = c"sha3_256";
        let f = c"hash";
        let table = [
            ProfEntry {
                symbol: a.as_ptr(),
                family: f.as_ptr(),
                calls: 10,
                outer_calls: 4,
                cycles: 1000,
            },
            ProfEntry {
                symbol: a.as_ptr(),
                family: std::ptr::null(),
                calls: 3,
                outer_calls: 3,
                cycles: 20,
            },
        ];
        let s = symbols_from(&table, 12.5);
        assert_eq!(s[0].symbol, "sha3_256");
        assert_eq!(s[0].family, "hash");
        assert_eq!(s[0].calls, 10);
        assert_eq!(s[0].cycles, 1000.0 - 4.0 * 12.5);
        assert_eq!(s[1].family, "");
        assert_eq!(s[1].cycles, 0.0);
    }
}
