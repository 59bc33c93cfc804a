//! The profile build: link-time wrappers around the provided symmetric primitives.
//!
//! [`prototype`] reads the C prototypes of the declared header(s) (nom);
//! [`wrappers`] turns them into one generated C file of `__wrap_SYM` functions plus a small
//! counter table the runner reads with `dlsym`, and gives the `-Wl,--wrap=SYM` link flags.
//! [`provided_symbols_used`] answers "which provided functions does this instance call at
//! all", from the object files, to help write or check a manifest's `hash` list.
//!
//! How the engine uses it (build step, profile variant):
//! 1. compile the primitives' sources into their own `.o` files (never in the same
//!    translation unit as the instance or the wrappers: `--wrap` only redirects references
//!    between object files);
//! 2. write [`generate_wrappers`]'s output to `prof_wrappers.c`, compile it with
//!    `-I <source root>` and the primitives' include folders;
//! 3. link instance objects + primitive objects + wrappers + DRNG shim with
//!    [`wrap_link_flags`].

pub mod prototype;
pub mod wrappers;

use std::collections::BTreeSet;
use std::path::PathBuf;

pub use prototype::{parse_header, parse_prototypes, HeaderDecls, Param, Prototype};
pub use wrappers::{generate_wrappers, wrap_link_flags, DRNG_FAMILY};

use crate::record::ProfileOutput;
use crate::survey::read_object_symbols;

/// What the report shows for one profiled operation, computed from the runner's output.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileSummary {
    /// Share of the operation's cycles in non-DRNG wrapped functions, 0..=1.
    pub hash_share: f64,
    /// Share in the DRNG, 0..=1.
    pub drng_share: f64,
    /// Share per family (`keccak`, `aes`, `drng`, ...), in first-seen order.
    pub family_shares: Vec<(String, f64)>,
    /// Mean calls per operation of each symbol called at least once, in table order.
    pub calls_per_op: Vec<(String, f64)>,
}

/// Shares of `total_cycles` (less the wrappers' calibrated cost to their callers) and calls
/// per operation. Symbol cycles are the runner's
/// (outermost calls only, overhead already subtracted), so families never overlap; shares
/// are clamped to 0..=1 against measurement noise. Zero iterations or cycles give zeros.
pub fn summarize(output: &ProfileOutput) -> ProfileSummary {
    // Each wrapped call also costs its caller `wrapper_overhead_cycles` that the plain
    // object would not spend; take that out of the operation's total.
    let calls: u64 = output.symbols.iter().map(|s| s.calls).sum();
    let total =
        (output.total_cycles as f64 - output.wrapper_overhead_cycles * calls as f64).max(0.0);
    let share = |c: f64| {
        if total > 0.0 {
            (c / total).clamp(0.0, 1.0)
        } else {
            0.0
        }
    };
    let mut families: Vec<(String, f64)> = Vec::new();
    for s in &output.symbols {
        let c = s.cycles.max(0.0);
        match families.iter_mut().find(|(f, _)| *f == s.family) {
            Some((_, sum)) => *sum += c,
            None => families.push((s.family.clone(), c)),
        }
    }
    let drng: f64 = families
        .iter()
        .filter(|(f, _)| f == DRNG_FAMILY)
        .map(|(_, c)| c)
        .sum();
    let hash: f64 = families
        .iter()
        .filter(|(f, _)| f != DRNG_FAMILY)
        .map(|(_, c)| c)
        .sum();
    let iters = output.iters.max(1) as f64;
    ProfileSummary {
        hash_share: share(hash),
        drng_share: share(drng),
        family_shares: families.into_iter().map(|(f, c)| (f, share(c))).collect(),
        calls_per_op: output
            .symbols
            .iter()
            .filter(|s| s.calls > 0 && output.iters > 0)
            .map(|s| (s.symbol.clone(), s.calls as f64 / iters))
            .collect(),
    }
}

/// Cycles per operation of a profile run with the wrappers' cost to their callers taken
/// out (what the plain object would spend); `None` without iterations.
pub fn unwrapped_cycles_per_op(output: &ProfileOutput) -> Option<f64> {
    if output.iters == 0 {
        return None;
    }
    let calls: u64 = output.symbols.iter().map(|s| s.calls).sum();
    let total =
        (output.total_cycles as f64 - output.wrapper_overhead_cycles * calls as f64).max(0.0);
    Some(total / output.iters as f64)
}

/// Index of the repeat whose value is the median (the lower middle for an even count), so
/// the median share comes with the one run that produced it; `None` for no values.
pub fn median_index(values: &[f64]) -> Option<usize> {
    let mut idx: Vec<usize> = (0..values.len()).collect();
    idx.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    idx.get(values.len().saturating_sub(1) / 2).copied()
}

/// Provided symbols the instance uses: symbols undefined in some instance object and
/// defined (as global functions) in some primitive object, sorted.
pub fn provided_symbols_used(
    instance_objects: &[PathBuf],
    primitive_objects: &[PathBuf],
) -> Result<Vec<String>, crate::survey::SurveyError> {
    let mut defined = BTreeSet::new();
    for o in primitive_objects {
        let s = read_object_symbols(o)?;
        defined.extend(s.defined.into_iter().filter(|d| d.global).map(|d| d.name));
    }
    let mut used = BTreeSet::new();
    for o in instance_objects {
        let s = read_object_symbols(o)?;
        used.extend(s.undefined.into_iter().filter(|u| defined.contains(u)));
    }
    Ok(used.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::SymbolProfile;

    fn sym(symbol: &str, family: &str, calls: u64, cycles: f64) -> SymbolProfile {
        SymbolProfile {
            symbol: symbol.into(),
            family: family.into(),
            calls,
            cycles,
        }
    }

    #[test]
    fn shares_and_calls_per_op_by_hand() {
        let out = ProfileOutput {
            op: "keygen".into(),
            iters: 20,
            // 260 wrapped calls x 50 ticks of wrapper cost on top of 1M ticks of work.
            total_cycles: 1_013_000,
            wrapper_overhead_cycles: 50.0,
            failure: None,
            symbols: vec![
                sym("shake128_squeezeblocks", "keccak", 200, 400_000.0),
                sym("aes128_ecb", "aes", 20, 100_000.0),
                sym("sha3_512", "keccak", 20, 50_000.0),
                sym("sha3_256", "keccak", 0, 0.0),
                sym("PQCLEAN_randombytes", "drng", 20, 15_000.0),
            ],
        };
        let s = summarize(&out);
        assert!((s.hash_share - 0.55).abs() < 1e-12, "{}", s.hash_share);
        assert!((s.drng_share - 0.015).abs() < 1e-12);
        assert_eq!(s.family_shares[0].0, "keccak");
        assert!((s.family_shares[0].1 - 0.45).abs() < 1e-12);
        assert!((s.family_shares[1].1 - 0.10).abs() < 1e-12);
        assert_eq!(
            s.calls_per_op,
            [
                ("shake128_squeezeblocks".to_string(), 10.0),
                ("aes128_ecb".to_string(), 1.0),
                ("sha3_512".to_string(), 1.0),
                ("PQCLEAN_randombytes".to_string(), 1.0)
            ]
        );
    }

    #[test]
    fn degenerate_runs_give_zeros_not_nan() {
        let out = ProfileOutput {
            op: "dec".into(),
            iters: 0,
            total_cycles: 0,
            wrapper_overhead_cycles: 0.0,
            failure: None,
            symbols: vec![sym("shake256", "keccak", 0, -3.0)],
        };
        let s = summarize(&out);
        assert_eq!((s.hash_share, s.drng_share), (0.0, 0.0));
        assert!(s.calls_per_op.is_empty());
    }

    #[test]
    fn median_repeat_and_unwrapped_total() {
        assert_eq!(median_index(&[0.30, 0.10, 0.20]), Some(2));
        assert_eq!(median_index(&[0.4, 0.1, 0.3, 0.2]), Some(3));
        assert_eq!(median_index(&[]), None);
        let out = ProfileOutput {
            op: "keygen".into(),
            iters: 10,
            total_cycles: 11_000,
            wrapper_overhead_cycles: 5.0,
            symbols: vec![SymbolProfile {
                symbol: "shake256".into(),
                family: "keccak".into(),
                calls: 200,
                cycles: 4000.0,
            }],
            failure: None,
        };
        // (11000 - 5 * 200) / 10
        assert_eq!(unwrapped_cycles_per_op(&out), Some(1000.0));
        assert_eq!(
            unwrapped_cycles_per_op(&ProfileOutput { iters: 0, ..out }),
            None
        );
    }
}
