//! The rules a session and the readers of its records both apply: how many rounds make an
//! estimate, which rounds it uses, the default precision target.

/// Rounds before the precision is first checked, and clean rounds needed before
/// interfered ones are left out of the estimate.
pub const MIN_ROUNDS: usize = 10;

/// Target CI half-width of a campaign's session: 1% of the median.
pub const DEFAULT_PRECISION: f64 = 0.01;

/// The rounds an estimate uses out of `n`: those not `interfered` when at least
/// [`MIN_ROUNDS`] such rounds exist, else all; and how many were clean.
pub fn rounds_used(n: usize, interfered: impl Fn(usize) -> bool) -> (Vec<usize>, usize) {
    let clean: Vec<usize> = (0..n).filter(|&r| !interfered(r)).collect();
    let clean_count = clean.len();
    if clean_count >= MIN_ROUNDS {
        (clean, clean_count)
    } else {
        ((0..n).collect(), clean_count)
    }
}
