//! Values the pipeline and the manifests share: word lists with their byte ranges,
//! durations with sane bounds, memory sizes.

use std::ops::Range;
use std::time::Duration;

use kdl::KdlEntry;

use super::duration::parse_duration;
use super::reader::NodeReader;

/// Whitespace-separated words of `s` with their byte ranges.
pub(crate) fn words(s: &str) -> Vec<(&str, Range<usize>)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(st)) => {
                out.push((&s[st..i], st..i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(st) = start {
        out.push((&s[st..], st..s.len()));
    }
    out
}

/// The longest `trial`: a trial is repeated `trials` times per operation.
const MAX_TRIAL: Duration = Duration::from_secs(3600);
/// The longest `timeout` (a week): anything longer is a typo, not a plan.
const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

/// A duration-valued entry; reports a bad or absurd value at the value.
pub(crate) fn duration_value(
    cx: &mut NodeReader<'_>,
    e: &KdlEntry,
    what: &str,
) -> Option<Duration> {
    let s = cx.expect_string(e, what)?;
    let (max, max_text) = if what == "trial" {
        (MAX_TRIAL, "1h")
    } else {
        (MAX_TIMEOUT, "168h (a week)")
    };
    match parse_duration(&s) {
        Ok(d) if d > max => {
            let span = cx.value_span(e);
            let d = cx
                .diag(format!("`{what}` of `{s}` is longer than {max_text}"))
                .label(span, "too long")
                .help(format!("`{what}` is at most {max_text}; durations are written `250ms`, `1s`, `10m`, `1h`"));
            cx.push(d);
            None
        }
        Ok(d) => Some(d),
        Err(msg) => {
            let span = cx.value_span(e);
            cx.error(span, "bad duration", format!("bad `{what}`: {msg}"));
            None
        }
    }
}

/// A size such as `4G`, `512M`, `65536K` (binary multiples) or bytes; at least 64 MiB.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&t[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&t[..i], 1 << 30),
        Some((i, 'T' | 't')) => (&t[..i], 1 << 40),
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{text}` is not a size (write e.g. `4G`, `512M`)"))?;
    let bytes = n
        .checked_mul(mult)
        .ok_or_else(|| format!("`{text}` is too large"))?;
    if bytes < 64 << 20 {
        return Err(format!("`{text}` is below 64M, too little to load a KEM"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_for_memory() {
        assert_eq!(parse_bytes("4G"), Ok(4 << 30));
        assert_eq!(parse_bytes("512M"), Ok(512 << 20));
        assert_eq!(parse_bytes("1t"), Ok(1 << 40));
        assert!(parse_bytes("1M").unwrap_err().contains("below 64M"));
        assert!(parse_bytes("4GB").unwrap_err().contains("not a size"));
        assert!(parse_bytes("99999999999T")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn words_have_ranges() {
        assert_eq!(
            words("  kat time\tsizes "),
            vec![("kat", 2..5), ("time", 6..10), ("sizes", 11..16)]
        );
        assert!(words("   ").is_empty());
    }
}
