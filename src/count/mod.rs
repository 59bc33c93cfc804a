//! Instruction counts per operation from callgrind profiles.
//!
//! The `count` step runs `kem-runner count` under `valgrind --tool=callgrind` with
//! `--instr-atstart=no --collect-atstart=no --toggle-collect=<ns>crypto_kem_<op>
//! --dump-after=<ns>crypto_kem_<op>`: instructions are counted only inside the operation (not
//! setup, not loading), and each call ends in a dump of its own, so one profile per call.
//! The runner turns instrumentation on only after preparing the inputs: callgrind counts the
//! calls on an arc even while it collects no cost, and would otherwise put the preparation's
//! calls (`keygen` before `enc`) into the first profile. [`callgrind`] parses them;
//! [`summarize`] turns them into instructions per call and inclusive shares.
//!
//! Inclusive share of a set `S` of functions (a hash family, all hash families, the DRNG):
//! the instructions executed while a function of `S` is on the stack. From callgrind's
//! function-level call graph this is the sum of the inclusive costs of the arcs that enter `S`
//! from outside it, where "outside" leaves out the functions called only from inside `S`
//! (helpers of the primitives, found as a fixed point): a primitive called inside another
//! counts once. A function called both from inside `S` and from outside that itself calls
//! into `S` cannot be split by a function-level graph; its calls into `S` are counted (an
//! upper bound) and it is named in `ambiguous`.

pub mod callgrind;
pub mod valgrind_log;

use std::collections::{BTreeMap, HashSet};

pub use callgrind::{parse, Profile};

/// The event counted: instructions executed.
pub const EVENT: &str = "Ir";

/// A declared function and its family (`keccak`, `sha2`, `aes`, ... or `drng`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    pub symbol: String,
    pub family: String,
}

/// What one step records, from the profiles of its calls.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Instructions of each call, in call order.
    pub per_call: Vec<u64>,
    /// Inclusive share of every non-DRNG family together, 0..=1.
    pub hash_share: f64,
    /// Inclusive share of the DRNG.
    pub drng_share: f64,
    /// Inclusive share per family (DRNG included), in declaration order.
    pub family_shares: Vec<(String, f64)>,
    /// Calls per operation of each declared symbol called at least once, in declaration order.
    pub calls_per_op: Vec<(String, f64)>,
    /// Functions whose calls into a set could not be told nested or not (see the module doc).
    pub ambiguous: Vec<String>,
}

/// gcc names its local clones `f.constprop.0`, `f.isra.0`, `f.part.0`, `f.cold`: they are `f`.
fn base_name(name: &str) -> &str {
    name.split('.').next().unwrap_or(name)
}

/// Inclusive cost of event `ev` of the functions (indices) `set`, and the functions whose
/// nesting is ambiguous.
pub fn inclusive(p: &Profile, set: &HashSet<usize>, ev: usize) -> (u64, Vec<usize>) {
    // Functions called only from `set` or from such functions (least fixed point).
    let mut callers: Vec<Vec<usize>> = vec![Vec::new(); p.functions.len()];
    for c in &p.calls {
        callers[c.callee].push(c.caller);
    }
    let mut inside: HashSet<usize> = set.clone();
    loop {
        let before = inside.len();
        for (f, cs) in callers.iter().enumerate() {
            if !inside.contains(&f) && !cs.is_empty() && cs.iter().all(|c| inside.contains(c)) {
                inside.insert(f);
            }
        }
        if inside.len() == before {
            break;
        }
    }
    let mut total = 0;
    let mut ambiguous = Vec::new();
    for c in &p.calls {
        if set.contains(&c.callee) && !inside.contains(&c.caller) {
            total += c.inclusive.get(ev).copied().unwrap_or(0);
            if callers[c.caller].iter().any(|x| inside.contains(x))
                && !ambiguous.contains(&c.caller)
            {
                ambiguous.push(c.caller);
            }
        }
    }
    (total, ambiguous)
}

/// Why profiles cannot be summed up.
#[derive(Debug, thiserror::Error)]
pub enum SummaryError {
    /// No profile at all.
    #[error("no profile: the operation was never called")]
    NoProfile,
    /// A profile without the instruction event.
    #[error("profile {0} has no `{EVENT}` event")]
    NoEvent(usize),
    /// A profile whose totals line disagrees with its costs.
    #[error("profile {profile}: its totals ({totals:?}) differ from the sum of its costs ({sum})")]
    Totals {
        /// 1-based profile.
        profile: usize,
        /// Its totals line's value.
        totals: Option<u64>,
        /// The sum of its costs.
        sum: u64,
    },
}

/// Instructions per call and shares over the profiles of `calls` calls (one profile each).
/// `declared` lists the provided primitives and the DRNG symbol (family `drng_family`).
pub fn summarize(
    profiles: &[Profile],
    declared: &[Declared],
    drng_family: &str,
) -> Result<Summary, SummaryError> {
    if profiles.is_empty() {
        return Err(SummaryError::NoProfile);
    }
    let mut per_call = Vec::with_capacity(profiles.len());
    let mut families: Vec<String> = Vec::new();
    for d in declared {
        if !families.contains(&d.family) {
            families.push(d.family.clone());
        }
    }
    let mut family_cost: BTreeMap<&str, u64> = BTreeMap::new();
    let (mut hash_cost, mut drng_cost) = (0u64, 0u64);
    let mut calls: BTreeMap<&str, u64> = BTreeMap::new();
    let mut ambiguous: Vec<String> = Vec::new();
    for (i, p) in profiles.iter().enumerate() {
        let ev = p.event(EVENT).ok_or(SummaryError::NoEvent(i + 1))?;
        let total = p.self_total(ev);
        if let Some(t) = &p.totals {
            if t.get(ev).copied() != Some(total) {
                return Err(SummaryError::Totals {
                    profile: i + 1,
                    totals: t.get(ev).copied(),
                    sum: total,
                });
            }
        }
        per_call.push(total);
        let members = |pred: &dyn Fn(&Declared) -> bool| -> HashSet<usize> {
            p.functions
                .iter()
                .enumerate()
                .filter(|(_, f)| {
                    declared
                        .iter()
                        .any(|d| pred(d) && d.symbol == base_name(&f.name))
                })
                .map(|(i, _)| i)
                .collect()
        };
        let mut add = |set: HashSet<usize>, sum: &mut u64| {
            let (c, amb) = inclusive(p, &set, ev);
            *sum += c;
            for a in amb {
                let n = p.functions[a].name.clone();
                if !ambiguous.contains(&n) {
                    ambiguous.push(n);
                }
            }
        };
        for fam in &families {
            let sum = family_cost.entry(fam.as_str()).or_default();
            add(members(&|d| d.family == *fam), sum);
        }
        add(members(&|d| d.family != drng_family), &mut hash_cost);
        add(members(&|d| d.family == drng_family), &mut drng_cost);
        for c in &p.calls {
            let callee = base_name(&p.functions[c.callee].name);
            if let Some(d) = declared.iter().find(|d| d.symbol == callee) {
                *calls.entry(d.symbol.as_str()).or_default() += c.count;
            }
        }
    }
    let all: u64 = per_call.iter().sum();
    let share = |c: u64| if all > 0 { c as f64 / all as f64 } else { 0.0 };
    let n = profiles.len() as f64;
    Ok(Summary {
        hash_share: share(hash_cost),
        drng_share: share(drng_cost),
        family_shares: families
            .iter()
            .map(|f| (f.clone(), share(family_cost[f.as_str()])))
            .collect(),
        calls_per_op: declared
            .iter()
            .filter_map(|d| {
                calls
                    .get(d.symbol.as_str())
                    .map(|c| (d.symbol.clone(), *c as f64 / n))
            })
            .collect(),
        per_call,
        ambiguous,
    })
}

#[cfg(test)]
mod tests {
    use super::callgrind::{Call, Function};
    use super::*;

    fn f(name: &str, cost: u64) -> Function {
        Function {
            object: "k.so".into(),
            name: name.into(),
            self_cost: vec![cost],
        }
    }

    fn call(caller: usize, callee: usize, count: u64, inclusive: u64) -> Call {
        Call {
            caller,
            callee,
            count,
            inclusive: vec![inclusive],
        }
    }

    /// op -> sha3 (declared) -> absorb (helper) -> shake (declared) -> permute (helper);
    /// op -> shake directly; op -> randombytes (drng) -> drbg.
    fn nested() -> Profile {
        Profile {
            events: vec!["Ir".into()],
            totals: Some(vec![1000]),
            functions: vec![
                f("op", 100),
                f("sha3", 50),
                f("absorb.constprop.0", 50),
                f("shake", 100),
                f("permute", 500),
                f("randombytes", 10),
                f("drbg", 190),
            ],
            calls: vec![
                call(0, 1, 1, 400),
                call(1, 2, 1, 350),
                call(2, 3, 1, 300),
                call(3, 4, 3, 500),
                call(0, 3, 1, 300),
                call(0, 5, 2, 200),
                call(5, 6, 2, 190),
            ],
        }
    }

    fn declared() -> Vec<Declared> {
        [
            ("sha3", "keccak"),
            ("shake", "keccak"),
            ("absorb", "keccak"),
            ("randombytes", "drng"),
        ]
        .map(|(s, fam)| Declared {
            symbol: s.into(),
            family: fam.into(),
        })
        .to_vec()
    }

    #[test]
    fn nested_primitives_count_once() {
        // The shake call inside sha3 (through a helper) is part of sha3's 400: keccak is
        // 400 + 300 (the direct call), not 400 + 300 + 300.
        let s = summarize(&[nested()], &declared(), "drng").unwrap();
        assert_eq!(s.per_call, [1000]);
        assert_eq!(
            s.family_shares,
            [("keccak".into(), 0.7), ("drng".into(), 0.2)]
        );
        assert_eq!((s.hash_share, s.drng_share), (0.7, 0.2));
        // absorb.constprop.0 is absorb; shake is called twice.
        assert_eq!(
            s.calls_per_op,
            [
                ("sha3".into(), 1.0),
                ("shake".into(), 2.0),
                ("absorb".into(), 1.0),
                ("randombytes".into(), 2.0)
            ]
        );
        assert!(s.ambiguous.is_empty());
    }

    #[test]
    fn a_helper_called_from_both_sides_is_named() {
        // `mix` is called by op and by sha3, and calls shake: its call cannot be split.
        let mut p = nested();
        p.functions.push(f("mix", 0));
        p.calls.push(call(0, 7, 1, 0));
        p.calls.push(call(1, 7, 1, 0));
        p.calls.push(call(7, 3, 1, 0));
        let s = summarize(&[p], &declared(), "drng").unwrap();
        assert_eq!(s.ambiguous, ["mix"]);
    }

    /// Issue #27: calls per operation are the calls of all profiles over their number, each
    /// arc counted once: ML-KEM-1024's `gen_matrix` absorbs 16 times per `enc` (on one arc)
    /// and squeezes 16 times plus a data-dependent number of times (on a second arc).
    #[test]
    fn calls_per_op_are_exact_over_a_set_of_profiles() {
        let profile = |extra_squeezes: u64| Profile {
            events: vec!["Ir".into()],
            totals: None,
            functions: vec![
                f("PQCLEAN_MLKEM1024_CLEAN_crypto_kem_enc", 10),
                f("PQCLEAN_MLKEM1024_CLEAN_gen_matrix", 100),
                f("shake128_absorb", 16 * 50),
                f("shake128_squeezeblocks", (16 + extra_squeezes) * 70),
            ],
            calls: vec![
                call(0, 1, 1, 100 + 16 * 50 + (16 + extra_squeezes) * 70),
                call(1, 2, 16, 16 * 50),
                call(1, 3, 16, 16 * 70),
                call(1, 3, extra_squeezes, extra_squeezes * 70),
            ],
        };
        let profiles: Vec<Profile> = (0..20).map(|i| profile(u64::from(i == 7))).collect();
        let declared: Vec<Declared> = ["shake128_absorb", "shake128_squeezeblocks"]
            .map(|s| Declared {
                symbol: s.into(),
                family: "keccak".into(),
            })
            .to_vec();
        let s = summarize(&profiles, &declared, "drng").unwrap();
        assert_eq!(
            s.calls_per_op,
            [
                ("shake128_absorb".into(), 16.0),
                ("shake128_squeezeblocks".into(), 16.05)
            ]
        );
        assert_eq!(s.per_call[7] - s.per_call[0], 70);
    }

    #[test]
    fn totals_must_match_and_profiles_are_required() {
        let mut p = nested();
        p.totals = Some(vec![999]);
        assert!(summarize(&[p], &declared(), "drng")
            .unwrap_err()
            .to_string()
            .contains("differ"));
        assert!(summarize(&[], &declared(), "drng").is_err());
    }
}
