//! Inline SVG charts for the HTML site (no scripts, no external references).
//!
//! - [`cycles_chart`]: cycles per operation for every instance on a log scale, with error
//!   bars ([`Spread`]: the median and its 95% confidence interval when the records have
//!   one, else the mean and the trials' range), instances grouped by the NIST category their
//!   manifest gives (else by [`super::view::level_of`], else "no category"); axis titles
//!   with units and a legend.
//! - [`size_scatter`]: public key + ciphertext bytes (x, log) against decapsulation cycles
//!   (y, log), one point per instance, one colour per submission; a point's label goes
//!   where it overlaps nothing (else only its hover title names it).
//!
//! Each chart comes in two drawings ([`Layout`]): a wide one, and a narrow one drawn for a
//! phone's width so that its text keeps a readable size (the cycles chart turns its bars
//! horizontal there). The site shows one or the other by a CSS media query. Both scale
//! down with their box (`viewBox`, `max-width` their drawn width).
//!
//! Text boxes are estimated from font size and character count ([`text_width`]); the
//! report tests check that none leaves the viewBox and none overlaps another, and
//! `scripts/site-check.sh` checks the same in Chromium with the real glyph boxes.
//!
//! Every hover text is an SVG `<title>`; output is deterministic (fixed-precision numbers,
//! input order).

mod bars;
mod scatter;

pub use bars::cycles_chart;
pub use scatter::size_scatter;

use std::fmt::Write;

use crate::model::Op;

use super::format;
use super::results::Results;

const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#edc948", "#9c755f",
];

const OP_COLOURS: [(Op, &str); 3] = [
    (Op::Keygen, "#4e79a7"),
    (Op::Enc, "#f28e2b"),
    (Op::Dec, "#59a14f"),
];

/// Escape text for XML/HTML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    // Control characters (ESC, ...) are shown escaped, never written raw.
    for c in crate::text::clean(s).chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

/// "1", "10", "100", "1k", ..., "1G", "10G" for a power of ten.
fn decade_label(k: i32) -> String {
    let (suffix, rest) = match k {
        i32::MIN..=2 => ("", k),
        3..=5 => ("k", k - 3),
        6..=8 => ("M", k - 6),
        _ => ("G", k - 9),
    };
    if rest < 0 {
        return format!("1e{k}");
    }
    format!("{}{}", 10u64.pow(rest as u32), suffix)
}

/// Decade range covering `lo..=hi` (both positive).
fn decades(lo: f64, hi: f64) -> (i32, i32) {
    let a = lo.log10().floor() as i32;
    let mut b = hi.log10().ceil() as i32;
    if b <= a {
        b = a + 1;
    }
    (a, b)
}

/// What the bars and error bars of [`cycles_chart`] show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// Median of the interleaved rounds, error bar its 95% bootstrap confidence interval.
    MedianCi,
    /// Mean over the trials, error bar the lowest to highest trial (records timed before
    /// interleaved rounds carry no interval).
    MeanMinMax,
}

impl Spread {
    /// [`Spread::MedianCi`] when every timed operation of `results` has an interval, else
    /// [`Spread::MeanMinMax`]: one chart never mixes the two.
    pub fn for_results(results: &Results) -> Spread {
        let mut timed = results
            .submissions
            .iter()
            .flat_map(|s| &s.instances)
            .flat_map(|i| &i.ops)
            .filter(|o| o.mean_cycles.is_some_and(|c| c > 0.0))
            .peekable();
        let all_ci = timed.peek().is_some()
            && timed.all(|o| {
                o.median_cycles.is_some() && o.ci_low_cycles.is_some() && o.ci_high_cycles.is_some()
            });
        if all_ci {
            Spread::MedianCi
        } else {
            Spread::MeanMinMax
        }
    }

    /// The bar's value and its error bar, if positive.
    fn of(self, o: &super::results::ResultOp) -> Option<Value> {
        let (v, lo, hi) = match self {
            Spread::MedianCi => (o.median_cycles?, o.ci_low_cycles, o.ci_high_cycles),
            Spread::MeanMinMax => (o.mean_cycles?, o.min_cycles, o.max_cycles),
        };
        let bar = match (lo, hi) {
            (Some(lo), Some(hi)) if lo > 0.0 && hi >= lo => Some((lo, hi)),
            _ => None,
        };
        (v > 0.0).then_some((v, bar))
    }

    /// What the bars are: "Median cycles per operation".
    pub fn value(self) -> &'static str {
        match self {
            Spread::MedianCi => "Median cycles per operation",
            Spread::MeanMinMax => "Mean cycles per operation",
        }
    }

    /// What the error bars span, for titles and captions.
    pub fn describe(self) -> &'static str {
        match self {
            Spread::MedianCi => "95% confidence interval of the median",
            Spread::MeanMinMax => "lowest to highest trial",
        }
    }
}

/// A bar's value and its error bar (low, high), if any.
pub(super) type Value = (f64, Option<(f64, f64)>);

/// Approximate width of `text` at `size` px (sans-serif averages about 0.6 em a glyph).
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.6
}

const TICK_PX: f64 = 12.0;
const LABEL_PX: f64 = 11.0;
const GROUP_PX: f64 = 12.0;
const TITLE_PX: f64 = 14.0;

/// Which drawing of a chart: the site shows [`Layout::Wide`] on screens wider than
/// [`NARROW_BELOW`] CSS px, else [`Layout::Narrow`], drawn for about 360 px so that its
/// text keeps its size on a phone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Wide,
    Narrow,
}

/// Viewport width (CSS px) below which the site shows the narrow drawings.
pub const NARROW_BELOW: u32 = 720;

/// viewBox width of a narrow drawing.
const NARROW_W: f64 = 360.0;

impl Layout {
    fn class(self) -> &'static str {
        match self {
            Layout::Wide => "chart wide",
            Layout::Narrow => "chart narrow",
        }
    }
}

/// `<svg>` opening tag: scales to its box's width, never wider than drawn.
fn svg_open(s: &mut String, layout: Layout, width: f64, height: f64, label: &str) {
    // Never scaled below MIN_SCALE: a chart wider than its page (a corpus of 106 instances
    // is a 5000 px wide one) scrolls in its figure instead of shrinking its labels to 3 px.
    let _ = write!(
        s,
        r#"<svg class="{}" viewBox="0 0 {width:.0} {height:.0}" width="{width:.0}" height="{height:.0}" style="max-width:{width:.0}px;min-width:{:.0}px" role="img" aria-label="{}">"#,
        layout.class(),
        (width * MIN_SCALE).ceil(),
        esc(label)
    );
}

/// Smallest scale a chart is drawn at: its smallest text, [`LABEL_PX`], stays at 9.9 px.
const MIN_SCALE: f64 = 0.9;

/// `text` as one line if it fits `width` at `size` px, else split at the last space that
/// makes the first line fit.
fn split_to_fit(text: &str, size: f64, width: f64) -> (String, Option<String>) {
    if text_width(text, size) <= width {
        return (text.to_string(), None);
    }
    let cut = text
        .match_indices(' ')
        .map(|(i, _)| i)
        .rfind(|&i| text_width(&text[..i], size) <= width);
    match cut {
        Some(i) => (text[..i].to_string(), Some(text[i + 1..].to_string())),
        None => (text.to_string(), None),
    }
}

/// Whether two boxes `[x0, y0, x1, y1]` overlap.
pub fn overlaps(a: &[f64; 4], b: &[f64; 4]) -> bool {
    a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_ranges() {
        assert_eq!(decade_label(0), "1");
        assert_eq!(decade_label(2), "100");
        assert_eq!(decade_label(3), "1k");
        assert_eq!(decade_label(7), "10M");
        assert_eq!(decade_label(10), "10G");
        assert_eq!(decade_label(-1), "1e-1");
        assert_eq!(decades(616_900.0, 2.53e9), (5, 10));
        assert_eq!(decades(1000.0, 1000.0), (3, 4));
        assert_eq!(esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
