//! Durations in the DSL: `<number><unit>`, e.g. `1s`, `250ms`, `1.5s`, `10m` (parsed with nom).
//!
//! Units: `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`. The number is an integer or a decimal;
//! the value is computed in integer nanoseconds so `1.5s` is exact.

use std::time::Duration;

use nom::branch::alt;
use nom::bytes::complete::tag;
use nom::character::complete::{char, digit1};
use nom::combinator::{all_consuming, opt};
use nom::sequence::{preceded, tuple};
use nom::IResult;

const UNITS: &str = "`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`";

fn unit(input: &str) -> IResult<&str, u128> {
    let (rest, u) = alt((
        tag("ns"),
        tag("us"),
        tag("µs"),
        tag("ms"),
        tag("s"),
        tag("m"),
        tag("h"),
    ))(input)?;
    let ns = match u {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        _ => 3_600_000_000_000,
    };
    Ok((rest, ns))
}

fn duration(input: &str) -> IResult<&str, (&str, Option<&str>, u128)> {
    all_consuming(tuple((digit1, opt(preceded(char('.'), digit1)), unit)))(input)
}

/// Parses a DSL duration. The error is a lower-case sentence naming the input.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "invalid duration `{s}`: expected a number followed by a unit ({UNITS}), e.g. `250ms`"
        )
    };
    let (_, (int, frac, unit_ns)) = duration(s).map_err(|_| bad())?;
    let too_big = || format!("duration `{s}` is too large");
    let int: u128 = int.parse().map_err(|_| too_big())?;
    let mut total = int.checked_mul(unit_ns).ok_or_else(too_big)?;
    if let Some(frac) = frac {
        // Digits beyond nanosecond precision cannot matter: keep at most 20.
        let digits = &frac[..frac.len().min(20)];
        let value: u128 = digits.parse().map_err(|_| bad())?;
        let scale = 10u128.pow(digits.len() as u32);
        total = total
            .checked_add(value * unit_ns / scale)
            .ok_or_else(too_big)?;
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| too_big())?;
    Ok(Duration::new(secs, (total % 1_000_000_000) as u32))
}

/// A duration written back in the DSL's own syntax (largest exact unit), for messages.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    for (unit, size) in [
        ("h", 3_600_000_000_000u128),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if ns != 0 && ns.is_multiple_of(size) {
            return format!("{}{unit}", ns / size);
        }
    }
    format!("{ns}ns")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit() {
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse_duration("3us"), Ok(Duration::from_micros(3)));
        assert_eq!(parse_duration("3µs"), Ok(Duration::from_micros(3)));
        assert_eq!(parse_duration("0.001ms"), Ok(Duration::from_nanos(1000)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn rejects_bad_input() {
        for s in [
            "", "s", "1", "1x", "1.s", ".5s", "1 s", "-1s", "1s2", "1sec", "1.5.5s",
        ] {
            let e = parse_duration(s).unwrap_err();
            assert!(e.contains("invalid duration"), "{s}: {e}");
        }
        let e = parse_duration("999999999999999999999999999999999999999h").unwrap_err();
        assert!(e.contains("too large"), "{e}");
    }

    #[test]
    fn formats_back() {
        assert_eq!(format_duration(Duration::from_secs(600)), "10m");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::ZERO), "0ns");
    }
}
