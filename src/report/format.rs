//! Number formatting shared by every renderer, derived from the seed reports.
//!
//! Rules (each example below is from a seed and pinned by a unit test):
//! - cycles: below 1000 as an integer; then `k` with one decimal ("616.9 k", "664.0 k"),
//!   `M` with two ("1.18 M", "36.60 M", "128.53 M"), `G` with two ("2.53 G"). A value that
//!   would round to 1000 of a unit moves to the next one.
//! - times: three significant digits, trailing zeros dropped, in the largest unit of
//!   ns/µs/ms/s that keeps the value at least 1 ("295 µs", "1.35 ms", "14 ms", "1.4 ms",
//!   "1.21 s").
//! - ops/s: C's `%.3g` ("3.39e+03", "2.2e+03", "740", "71.3", "2.4", "0.824").
//! - shares: percent with one decimal below 10% ("1.5%", "0.0%"), none from 10% ("55%").
//! - calls per operation: integers without decimals ("2"), else two decimals with trailing
//!   zeros dropped ("7.07", "24.1").

/// Placeholder for a value that is not known.
pub const DASH: &str = "–";

/// C's `printf("%.3g")`: three significant digits, trailing zeros removed, exponent form
/// when the exponent is below -4 or at least 3.
pub fn g3(x: f64) -> String {
    if !x.is_finite() {
        return DASH.to_string();
    }
    if x == 0.0 {
        return "0".to_string();
    }
    let sci = format!("{:.2e}", x);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..3).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", trim_zeros(mant), sign, exp.abs())
    } else {
        let decimals = (2 - exp).max(0) as usize;
        trim_zeros(&format!("{:.*}", decimals, x)).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Round to three significant digits.
fn round3(x: f64) -> f64 {
    g3(x).parse().unwrap_or(x)
}

/// Cycle counts: "616.9 k", "1.18 M", "2.53 G".
pub fn cycles(x: f64) -> String {
    if !x.is_finite() || x < 0.0 {
        return DASH.to_string();
    }
    if x.round() < 1000.0 {
        return format!("{:.0}", x);
    }
    if (x / 1e2).round() < 10_000.0 {
        return format!("{:.1} k", x / 1e3);
    }
    if (x / 1e4).round() < 100_000.0 {
        return format!("{:.2} M", x / 1e6);
    }
    format!("{:.2} G", x / 1e9)
}

/// Durations in nanoseconds: "295 µs", "1.35 ms", "1.21 s".
pub fn time_ns(ns: f64) -> String {
    if !ns.is_finite() || ns < 0.0 {
        return DASH.to_string();
    }
    const UNITS: [(&str, f64); 4] = [("ns", 1.0), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)];
    let mut idx = 0;
    while idx + 1 < UNITS.len() && round3(ns / UNITS[idx].1) >= 1000.0 {
        idx += 1;
    }
    let (unit, scale) = UNITS[idx];
    format!("{} {}", g3(ns / scale), unit)
}

/// Operations per second: `%.3g`.
pub fn ops_per_s(x: f64) -> String {
    g3(x)
}

/// A share in 0..=1 as a percentage: "1.5%", "55%".
pub fn share(x: f64) -> String {
    if !x.is_finite() {
        return DASH.to_string();
    }
    let p = x * 100.0;
    if (p * 10.0).round().abs() >= 100.0 {
        format!("{:.0}%", p)
    } else {
        format!("{:.1}%", p)
    }
}

/// Coefficient of variation (a fraction) as a percentage with two decimals: "0.12%".
pub fn cv(x: f64) -> String {
    if !x.is_finite() {
        return DASH.to_string();
    }
    format!("{:.2}%", x * 100.0)
}

/// Mean calls per operation: "2", "7.07", "24.1".
pub fn calls(x: f64) -> String {
    if !x.is_finite() {
        return DASH.to_string();
    }
    if (x - x.round()).abs() < 0.005 {
        format!("{:.0}", x)
    } else {
        trim_zeros(&format!("{:.2}", x)).to_string()
    }
}

/// An optional integer, dash when unknown.
pub fn opt_int(x: Option<u64>) -> String {
    x.map(|v| v.to_string()).unwrap_or_else(|| DASH.to_string())
}

/// An optional KiB figure: "1732 KiB".
pub fn kib(x: Option<u64>) -> String {
    x.map(|v| format!("{v} KiB"))
        .unwrap_or_else(|| DASH.to_string())
}

/// RFC 3339 UTC timestamp without the trailing `Z`, as the seeds show it.
pub fn utc(ts: &str) -> String {
    ts.strip_suffix('Z').unwrap_or(ts).to_string()
}

/// A record's status with its reason: `failed: why`.
pub fn status_text(r: &crate::record::StepRecord) -> String {
    match &r.reason {
        Some(reason) => format!("{}: {}", r.status.name(), reason),
        None => r.status.name().to_string(),
    }
}

/// First 16 hex digits of a digest followed by an ellipsis.
pub fn short_hash(h: &str) -> String {
    let n = h.char_indices().nth(16).map(|(i, _)| i).unwrap_or(h.len());
    format!("{}…", &h[..n])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_like_the_seeds() {
        assert_eq!(cycles(616_900.0), "616.9 k");
        assert_eq!(cycles(657_812.0), "657.8 k");
        assert_eq!(cycles(664_012.0), "664.0 k");
        assert_eq!(cycles(1_181_000.0), "1.18 M");
        assert_eq!(cycles(36_604_000.0), "36.60 M");
        assert_eq!(cycles(128_531_000.0), "128.53 M");
        assert_eq!(cycles(868_070_000.0), "868.07 M");
        assert_eq!(cycles(1_090_000_000.0), "1.09 G");
        assert_eq!(cycles(2_530_000_000.0), "2.53 G");
        assert_eq!(cycles(812.4), "812");
        // promotion at unit boundaries
        assert_eq!(cycles(999_960.0), "1.00 M");
        assert_eq!(cycles(999.6), "1.0 k");
        assert_eq!(cycles(999_996_000.0), "1.00 G");
        assert_eq!(cycles(f64::NAN), DASH);
    }

    #[test]
    fn times_like_the_seeds() {
        assert_eq!(time_ns(295_000.0), "295 µs");
        assert_eq!(time_ns(1_350_000.0), "1.35 ms");
        assert_eq!(time_ns(14_000_000.0), "14 ms");
        assert_eq!(time_ns(1_400_000.0), "1.4 ms");
        assert_eq!(time_ns(1_210_000_000.0), "1.21 s");
        assert_eq!(time_ns(1_200_000_000.0), "1.2 s");
        assert_eq!(time_ns(17_490_000.0), "17.5 ms");
        assert_eq!(time_ns(164_200_000.0), "164 ms");
        assert_eq!(time_ns(560.5), "560 ns");
        assert_eq!(time_ns(999_700.0), "1 ms");
    }

    #[test]
    fn ops_like_the_seeds() {
        assert_eq!(ops_per_s(3390.0), "3.39e+03");
        assert_eq!(ops_per_s(2200.4), "2.2e+03");
        assert_eq!(ops_per_s(740.2), "740");
        assert_eq!(ops_per_s(71.3), "71.3");
        assert_eq!(ops_per_s(0.8241), "0.824");
        assert_eq!(ops_per_s(2.4), "2.4");
        assert_eq!(ops_per_s(57.08), "57.1");
        assert_eq!(ops_per_s(12_345_678.0), "1.23e+07");
        assert_eq!(ops_per_s(0.00001234), "1.23e-05");
        assert_eq!(ops_per_s(999.7), "1e+03");
    }

    #[test]
    fn shares_and_calls_like_the_seeds() {
        assert_eq!(share(0.55), "55%");
        assert_eq!(share(0.015), "1.5%");
        assert_eq!(share(0.0), "0.0%");
        assert_eq!(share(0.007), "0.7%");
        assert_eq!(share(0.0996), "10%");
        assert_eq!(calls(2.0), "2");
        assert_eq!(calls(7.07), "7.07");
        assert_eq!(calls(24.1), "24.1");
        assert_eq!(calls(8.5901), "8.59");
    }

    #[test]
    fn misc() {
        assert_eq!(kib(Some(1732)), "1732 KiB");
        assert_eq!(kib(None), DASH);
        assert_eq!(opt_int(None), DASH);
        assert_eq!(utc("2026-09-25T10:02:21Z"), "2026-09-25T10:02:21");
        assert_eq!(
            short_hash("d42d6cf140962d85aaaaaaaaaaaaaaaa"),
            "d42d6cf140962d85…"
        );
        assert_eq!(short_hash("abc"), "abc…");
        assert_eq!(cv(0.0123), "1.23%");
    }
}
