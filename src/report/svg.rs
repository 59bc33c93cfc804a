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

use std::collections::BTreeMap;
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
    for c in s.chars() {
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

/// Group of [`cycles_chart`]: NIST category, else the level in the name, else "other".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Group {
    Category(u8),
    Level(u64),
    Other,
}

impl Group {
    fn name(self) -> String {
        match self {
            Group::Category(c) => format!("NIST category {c}"),
            Group::Level(l) => format!("level {l} (no category)"),
            Group::Other => "no category".to_string(),
        }
    }
}

/// A bar's value and its error bar (low, high), if any.
type Value = (f64, Option<(f64, f64)>);

struct Bar {
    label: String,
    /// Per operation (keygen, enc, dec).
    values: [Option<Value>; 3],
}

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
    let _ = write!(
        s,
        r#"<svg class="{}" viewBox="0 0 {width:.0} {height:.0}" width="{width:.0}" height="{height:.0}" style="max-width:{width:.0}px" role="img" aria-label="{}">"#,
        layout.class(),
        esc(label)
    );
}

/// The legend of [`cycles_chart`] at `(x, y)` (top of the swatches).
fn op_legend(s: &mut String, x: f64, y: f64) {
    for (i, (op, colour)) in OP_COLOURS.iter().enumerate() {
        let lx = x + i as f64 * 76.0;
        let _ = write!(
            s,
            r#"<rect x="{lx:.1}" y="{y:.1}" width="10" height="10" fill="{colour}"/><text x="{:.1}" y="{:.1}" class="tick" font-size="{TICK_PX}">{}</text>"#,
            lx + 14.0,
            y + 9.5,
            op.name()
        );
    }
    let lx = x + 3.0 * 76.0;
    let _ = write!(
        s,
        r#"<path d="M{:.1} {:.1}H{:.1}M{:.1} {:.1}V{:.1}M{:.1} {:.1}H{:.1}" class="ebar"/><text x="{:.1}" y="{:.1}" class="tick" font-size="{TICK_PX}">error bar</text>"#,
        lx + 2.0,
        y - 1.0,
        lx + 8.0,
        lx + 5.0,
        y - 1.0,
        y + 11.0,
        lx + 2.0,
        y + 11.0,
        lx + 8.0,
        lx + 14.0,
        y + 9.5
    );
}

/// Bars of cycles per operation with error bars (`spread`), grouped by NIST category;
/// `None` when nothing was timed. Instances are named by their id, prefixed with their
/// submission when two submissions share an id.
pub fn cycles_chart(results: &Results, spread: Spread, layout: Layout) -> Option<String> {
    let ids: Vec<&str> = results
        .submissions
        .iter()
        .flat_map(|s| s.instances.iter().map(|i| i.id.as_str()))
        .collect();
    let unique = |id: &str| ids.iter().filter(|i| **i == id).count() == 1;
    let mut groups: BTreeMap<Group, Vec<Bar>> = BTreeMap::new();
    for sub in &results.submissions {
        for inst in &sub.instances {
            let values = OP_COLOURS.map(|(op, _)| inst.op(op).and_then(|o| spread.of(o)));
            if values.iter().all(Option::is_none) {
                continue;
            }
            let key = match (inst.nist_category, inst.level) {
                (Some(c), _) => Group::Category(c),
                (None, Some(l)) => Group::Level(l),
                (None, None) => Group::Other,
            };
            groups.entry(key).or_default().push(Bar {
                label: if unique(&inst.id) {
                    inst.id.clone()
                } else {
                    format!("{} {}", sub.id, inst.id)
                },
                values,
            });
        }
    }
    let all: Vec<f64> = groups
        .values()
        .flatten()
        .flat_map(|b| b.values.iter().flatten())
        .flat_map(|(v, e)| std::iter::once(*v).chain(e.iter().flat_map(|(l, h)| [*l, *h])))
        .collect();
    if all.is_empty() {
        return None;
    }
    let min = all.iter().copied().fold(f64::INFINITY, f64::min);
    let max = all.iter().copied().fold(0.0, f64::max);
    let range = decades(min, max);
    Some(match layout {
        Layout::Wide => cycles_wide(&groups, range, spread),
        Layout::Narrow => cycles_narrow(&groups, range, spread),
    })
}

/// Hover text of one bar.
fn bar_title(bar: &Bar, op: Op, v: f64, e: Option<(f64, f64)>, spread: Spread) -> String {
    let mut t = format!("{}: {} {} cycles", bar.label, op.name(), format::cycles(v));
    if let Some((lo, hi)) = e {
        let _ = write!(
            t,
            " ({} to {}, {})",
            format::cycles(lo),
            format::cycles(hi),
            spread.describe()
        );
    }
    esc(&t)
}

/// Vertical bars, instances side by side under their group's name, vertical labels.
fn cycles_wide(groups: &BTreeMap<Group, Vec<Bar>>, (d0, d1): (i32, i32), spread: Spread) -> String {
    let longest = groups
        .values()
        .flatten()
        .map(|b| text_width(&b.label, LABEL_PX))
        .fold(0.0, f64::max);
    let (left, top, plot_h) = (78.0, 92.0, 260.0);
    // vertical instance labels, then the x-axis title
    let bottom = 12.0 + longest + 18.0 + TICK_PX + 10.0;
    let (bar_w, inst_gap, group_gap) = (12.0, 14.0, 24.0);
    let inst_w = 3.0 * bar_w + inst_gap;
    // a group is at least as wide as its name
    let group_w =
        |g: &Group, n: usize| (n as f64 * inst_w).max(text_width(&g.name(), GROUP_PX) + 8.0);
    let plot_w: f64 = groups.iter().map(|(g, b)| group_w(g, b.len())).sum::<f64>()
        + (groups.len().saturating_sub(1)) as f64 * group_gap
        + 20.0;
    let title = format!("{}, log scale", spread.value());
    let sub_title = format!("error bars: {}", spread.describe());
    let x_title = "instance, grouped by NIST security category";
    let width = (left + plot_w.max(330.0) + 20.0)
        .max(left + text_width(&title, TITLE_PX) + 20.0)
        .max(left + text_width(&sub_title, TICK_PX) + 20.0)
        .max(left + text_width(x_title, TICK_PX) + 20.0)
        .ceil();
    let height = (top + plot_h + bottom).ceil();
    let y = |v: f64| top + plot_h * (1.0 - (v.log10() - d0 as f64) / (d1 - d0) as f64);
    let mut s = String::new();
    svg_open(&mut s, Layout::Wide, width, height, &title);
    let _ = write!(
        s,
        r#"<text x="{left:.0}" y="18" class="ct" font-size="{TITLE_PX}">{}</text><text x="{left:.0}" y="36" class="tick" font-size="{TICK_PX}">{}</text>"#,
        esc(&title),
        esc(&sub_title)
    );
    for k in d0..=d1 {
        let yy = y(10f64.powi(k));
        let _ = write!(
            s,
            r#"<line x1="{left:.1}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" class="grid"/><text x="{:.1}" y="{:.1}" class="tick" font-size="{TICK_PX}" text-anchor="end">{}</text>"#,
            width - 20.0,
            left - 6.0,
            yy + 4.0,
            decade_label(k)
        );
    }
    // y-axis title, rotated
    let (tx, ty) = (18.0, top + plot_h / 2.0);
    let _ = write!(
        s,
        r#"<text x="{tx:.1}" y="{ty:.1}" class="tick" font-size="{TICK_PX}" text-anchor="middle" transform="rotate(-90 {tx:.1} {ty:.1})">cycles per operation (counter ticks)</text>"#
    );
    op_legend(&mut s, left, 46.0);
    let mut x = left + 10.0;
    for (group, bars) in groups {
        let gx0 = x;
        let gw = group_w(group, bars.len());
        // centre the bars in the group
        x += (gw - bars.len() as f64 * inst_w) / 2.0;
        for bar in bars {
            for (j, value) in bar.values.iter().enumerate() {
                let Some((v, e)) = *value else { continue };
                let (op, colour) = OP_COLOURS[j];
                let yy = y(v);
                let bx = x + j as f64 * bar_w;
                let _ = write!(
                    s,
                    r#"<rect x="{bx:.1}" y="{yy:.1}" width="{bar_w:.1}" height="{:.1}" fill="{colour}"><title>{}</title></rect>"#,
                    (top + plot_h - yy).max(0.0),
                    bar_title(bar, op, v, e, spread)
                );
                if let Some((lo, hi)) = e {
                    let (cx, ylo, yhi) = (bx + bar_w / 2.0, y(lo), y(hi));
                    let _ = write!(
                        s,
                        r#"<path d="M{cx:.1} {ylo:.1}V{yhi:.1}M{:.1} {ylo:.1}H{:.1}M{:.1} {yhi:.1}H{:.1}" class="ebar"/>"#,
                        cx - 3.0,
                        cx + 3.0,
                        cx - 3.0,
                        cx + 3.0
                    );
                }
            }
            // vertical label, top-aligned under the bars
            let lx = x + 1.5 * bar_w + LABEL_PX * 0.35;
            let ly = top + plot_h + 8.0;
            let _ = write!(
                s,
                r#"<text x="{lx:.1}" y="{ly:.1}" class="lbl" font-size="{LABEL_PX}" transform="rotate(90 {lx:.1} {ly:.1})">{}</text>"#,
                esc(&bar.label)
            );
            x += inst_w;
        }
        x = gx0 + gw;
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" class="grp" font-size="{GROUP_PX}" text-anchor="middle">{}</text><line x1="{gx0:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" class="gline"/>"#,
            gx0 + gw / 2.0,
            top - 12.0,
            esc(&group.name()),
            top - 5.0,
            x,
            top - 5.0
        );
        x += group_gap;
    }
    let _ = write!(
        s,
        r#"<line x1="{left:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" class="axis"/>"#,
        top + plot_h,
        width - 20.0,
        top + plot_h
    );
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{:.1}" class="tick" font-size="{TICK_PX}" text-anchor="middle">{x_title}</text></svg>"#,
        left + (width - 20.0 - left) / 2.0,
        height - 8.0
    );
    s
}

/// Horizontal bars for a phone: each instance's name on its own line above its three bars,
/// groups one under the other, the log axis along the top and the bottom.
fn cycles_narrow(
    groups: &BTreeMap<Group, Vec<Bar>>,
    (d0, d1): (i32, i32),
    spread: Spread,
) -> String {
    let (left, right) = (8.0, NARROW_W - 16.0);
    let (bar_h, bar_gap, label_h, inst_gap, group_h) = (7.0, 1.5, 15.0, 9.0, 26.0);
    let inst_h = label_h + 3.0 * bar_h + 2.0 * bar_gap + inst_gap;
    let title = spread.value().to_string();
    let sub_title = format!("log scale; error bars: {}", spread.describe());
    // the subtitle may need two lines
    let (sub1, sub2) = split_to_fit(&sub_title, TICK_PX, right - left);
    let top = if sub2.is_some() { 108.0 } else { 92.0 };
    let rows: f64 = groups
        .values()
        .map(|b| b.len() as f64 * inst_h)
        .sum::<f64>()
        + groups.len() as f64 * group_h;
    let plot_bottom = top + 6.0 + rows;
    let height = (plot_bottom + 20.0 + 26.0).ceil();
    let x = |v: f64| left + (right - left) * (v.log10() - d0 as f64) / (d1 - d0) as f64;
    let mut s = String::new();
    svg_open(&mut s, Layout::Narrow, NARROW_W, height, &title);
    let _ = write!(
        s,
        r#"<text x="{left:.0}" y="18" class="ct" font-size="{TITLE_PX}">{}</text><text x="{left:.0}" y="36" class="tick" font-size="{TICK_PX}">{}</text>"#,
        esc(&title),
        esc(&sub1)
    );
    if let Some(sub2) = &sub2 {
        let _ = write!(
            s,
            r#"<text x="{left:.0}" y="52" class="tick" font-size="{TICK_PX}">{}</text>"#,
            esc(sub2)
        );
    }
    op_legend(&mut s, left, top - 42.0);
    // decade grid with labels above and below (the first and last anchored inside)
    for k in d0..=d1 {
        let xx = x(10f64.powi(k));
        let anchor = if k == d0 {
            "start"
        } else if k == d1 {
            "end"
        } else {
            "middle"
        };
        let _ = write!(
            s,
            r#"<line x1="{xx:.1}" y1="{top:.1}" x2="{xx:.1}" y2="{plot_bottom:.1}" class="grid"/><text x="{xx:.1}" y="{:.1}" class="tick" font-size="{TICK_PX}" text-anchor="{anchor}">{l}</text><text x="{xx:.1}" y="{:.1}" class="tick" font-size="{TICK_PX}" text-anchor="{anchor}">{l}</text>"#,
            top - 6.0,
            plot_bottom + 15.0,
            l = decade_label(k)
        );
    }
    let mut y = top + 6.0;
    for (group, bars) in groups {
        let _ = write!(
            s,
            r#"<text x="{left:.1}" y="{:.1}" class="grp" font-size="{GROUP_PX}">{}</text><line x1="{left:.1}" y1="{:.1}" x2="{right:.1}" y2="{:.1}" class="gline"/>"#,
            y + 15.0,
            esc(&group.name()),
            y + 20.0,
            y + 20.0
        );
        y += group_h;
        for bar in bars {
            let _ = write!(
                s,
                r#"<text x="{left:.1}" y="{:.1}" class="lbl" font-size="{LABEL_PX}">{}</text>"#,
                y + 11.0,
                esc(&bar.label)
            );
            for (j, value) in bar.values.iter().enumerate() {
                let Some((v, e)) = *value else { continue };
                let (op, colour) = OP_COLOURS[j];
                let by = y + label_h + j as f64 * (bar_h + bar_gap);
                let _ = write!(
                    s,
                    r#"<rect x="{left:.1}" y="{by:.1}" width="{:.1}" height="{bar_h:.1}" fill="{colour}"><title>{}</title></rect>"#,
                    (x(v) - left).max(0.0),
                    bar_title(bar, op, v, e, spread)
                );
                if let Some((lo, hi)) = e {
                    let (cy, xlo, xhi) = (by + bar_h / 2.0, x(lo), x(hi));
                    let _ = write!(
                        s,
                        r#"<path d="M{xlo:.1} {cy:.1}H{xhi:.1}M{xlo:.1} {:.1}V{:.1}M{xhi:.1} {:.1}V{:.1}" class="ebar"/>"#,
                        cy - 3.0,
                        cy + 3.0,
                        cy - 3.0,
                        cy + 3.0
                    );
                }
            }
            y += inst_h;
        }
    }
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{:.1}" class="tick" font-size="{TICK_PX}" text-anchor="middle">cycles per operation (counter ticks, log scale)</text></svg>"#,
        (left + right) / 2.0,
        height - 6.0
    );
    s
}

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

/// Scatter of pk+ct bytes against decapsulation cycles (the value `spread` names); `None`
/// when no instance has both.
pub fn size_scatter(results: &Results, spread: Spread, layout: Layout) -> Option<String> {
    struct Pt {
        sub: usize,
        label: String,
        bytes: f64,
        cycles: f64,
    }
    let mut pts = Vec::new();
    let mut subs: Vec<&str> = Vec::new();
    for sub in &results.submissions {
        for inst in &sub.instances {
            let (Some(pk), Some(ct)) = (inst.pk, inst.ct) else {
                continue;
            };
            let Some((c, _)) = inst.op(Op::Dec).and_then(|o| spread.of(o)) else {
                continue;
            };
            if pk + ct == 0 {
                continue;
            }
            let idx = match subs.iter().position(|s| *s == sub.id) {
                Some(i) => i,
                None => {
                    subs.push(&sub.id);
                    subs.len() - 1
                }
            };
            pts.push(Pt {
                sub: idx,
                label: inst.id.clone(),
                bytes: (pk + ct) as f64,
                cycles: c,
            });
        }
    }
    if pts.is_empty() {
        return None;
    }
    let fold = |f: fn(&Pt) -> f64| {
        let lo = pts.iter().map(f).fold(f64::INFINITY, f64::min);
        let hi = pts.iter().map(f).fold(0.0, f64::max);
        decades(lo, hi)
    };
    let (x0, x1) = fold(|p| p.bytes);
    let (y0, y1) = fold(|p| p.cycles);
    let title = "Public key + ciphertext size against decapsulation time";
    let y_title = format!(
        "decapsulation, {} cycles (log scale)",
        match spread {
            Spread::MedianCi => "median",
            Spread::MeanMinMax => "mean",
        }
    );
    let titles: Vec<String> = match layout {
        Layout::Wide => vec![title.to_string()],
        Layout::Narrow => {
            let (a, b) = split_to_fit(title, TITLE_PX, NARROW_W - 16.0);
            std::iter::once(a).chain(b).collect()
        }
    };
    // legend: a column on the right (wide), rows under the plot (narrow)
    let legend_item = |s: &str| text_width(s, TICK_PX) + 30.0;
    let (left, top) = (64.0, 26.0 + 18.0 * titles.len() as f64);
    let (w, h, width, legend_at): (f64, f64, f64, Vec<(f64, f64)>) = match layout {
        Layout::Wide => {
            let (w, h) = (540.0, 300.0);
            let legend_w = subs.iter().map(|s| legend_item(s)).fold(150.0, f64::max);
            let at = (0..subs.len())
                .map(|i| (left + w + 16.0, top + 10.0 + i as f64 * 20.0))
                .collect();
            (w, h, left + w + legend_w, at)
        }
        Layout::Narrow => {
            let (w, h) = (NARROW_W - left - 14.0, 340.0);
            let (mut lx, mut ly) = (8.0, top + h + 62.0);
            let mut at = Vec::new();
            for sub in &subs {
                if lx + legend_item(sub) > NARROW_W - 8.0 && lx > 8.0 {
                    lx = 8.0;
                    ly += 20.0;
                }
                at.push((lx, ly));
                lx += legend_item(sub);
            }
            (w, h, NARROW_W, at)
        }
    };
    let height = (top + h + 58.0)
        .max(legend_at.last().map_or(0.0, |(_, y)| y + 14.0))
        .ceil();
    let px = |v: f64| left + w * (v.log10() - x0 as f64) / (x1 - x0) as f64;
    let py = |v: f64| top + h * (1.0 - (v.log10() - y0 as f64) / (y1 - y0) as f64);
    let mut s = String::new();
    svg_open(
        &mut s,
        layout,
        width,
        height,
        "public key plus ciphertext bytes against decapsulation cycles",
    );
    for (i, t) in titles.iter().enumerate() {
        let _ = write!(
            s,
            r#"<text x="8" y="{:.0}" class="ct" font-size="{TITLE_PX}">{}</text>"#,
            18.0 + 18.0 * i as f64,
            esc(t)
        );
    }
    let (tx, ty) = (16.0, top + h / 2.0);
    let _ = write!(
        s,
        r#"<text x="{tx:.1}" y="{ty:.1}" class="tick" font-size="{TICK_PX}" text-anchor="middle" transform="rotate(-90 {tx:.1} {ty:.1})">{}</text><text x="{:.1}" y="{:.1}" class="tick" font-size="{TICK_PX}" text-anchor="middle">public key + ciphertext, bytes (log scale)</text>"#,
        esc(&y_title),
        left + w / 2.0,
        top + h + 44.0
    );
    for k in x0..=x1 {
        let xx = px(10f64.powi(k));
        let anchor = if k == x1 && layout == Layout::Narrow {
            "end"
        } else {
            "middle"
        };
        let _ = write!(
            s,
            r#"<line x1="{xx:.1}" y1="{top:.1}" x2="{xx:.1}" y2="{:.1}" class="grid"/><text x="{xx:.1}" y="{:.1}" class="tick" font-size="{TICK_PX}" text-anchor="{anchor}">{} B</text>"#,
            top + h,
            top + h + 22.0,
            decade_label(k)
        );
    }
    for k in y0..=y1 {
        let yy = py(10f64.powi(k));
        let _ = write!(
            s,
            r#"<line x1="{left:.1}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" class="grid"/><text x="{:.1}" y="{:.1}" class="tick" font-size="{TICK_PX}" text-anchor="end">{}</text>"#,
            left + w,
            left - 6.0,
            yy + 4.0,
            decade_label(k)
        );
    }
    // every label beside its point if it overlaps nothing there, else further out with a
    // leader line, else left out (the point keeps its hover title)
    let mut taken: Vec<[f64; 4]> = Vec::new();
    for p in &pts {
        let colour = PALETTE[p.sub % PALETTE.len()];
        let (cx, cy) = (px(p.bytes), py(p.cycles));
        let _ = write!(
            s,
            r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="4.5" fill="{colour}"><title>{} {}: pk+ct {} bytes, dec {} cycles</title></circle>"#,
            esc(subs[p.sub]),
            esc(&p.label),
            p.bytes,
            format::cycles(p.cycles)
        );
        taken.push([cx - 5.5, cy - 5.5, cx + 5.5, cy + 5.5]);
    }
    // label boxes (with a little room around them) and leader lines, placed round by
    // round: first every label that fits beside its point, then further out, and so on
    let (asc, desc) = (LABEL_PX * 0.95, LABEL_PX * 0.25);
    // per point: the label's baseline start and its leader line, once placed
    type Placed = (f64, f64, Option<[f64; 4]>);
    let mut placed: Vec<Option<Placed>> = vec![None; pts.len()];
    let npts = pts.len(); // `taken` holds the points' boxes, then the labels'

    for r in [0.0, 10.0, 20.0, 30.0, 40.0, 55.0, 70.0, 90.0, 115.0, 140.0] {
        for (i, p) in pts.iter().enumerate() {
            if placed[i].is_some() {
                continue;
            }
            let (cx, cy) = (px(p.bytes), py(p.cycles));
            let tw = text_width(&p.label, LABEL_PX);
            let mid = (asc - desc) / 2.0;
            // sixteen directions, right and left first; the box's nearest side or corner
            // at distance 7 + r from the point
            let spots = [0, 8, 12, 4, 14, 2, 10, 6, 15, 1, 9, 7, 13, 3, 11, 5].map(|k| {
                let a = k as f64 * std::f64::consts::PI / 8.0;
                let (dx, dy) = (a.cos(), -a.sin());
                let (ax, ay) = (cx + dx * (7.0 + r), cy + dy * (7.0 + r));
                let x = if dx > 0.3 {
                    ax
                } else if dx < -0.3 {
                    ax - tw
                } else {
                    ax - tw / 2.0
                };
                let y = if dy < -0.3 {
                    ay - desc
                } else if dy > 0.3 {
                    ay + asc
                } else {
                    ay + mid
                };
                (x, y)
            });
            let found = spots.iter().find_map(|&(x, y)| {
                let b = [x - 1.5, y - asc - 1.0, x + tw + 1.5, y + desc + 1.0];
                let inside = b[0] >= left && b[2] <= left + w && b[1] >= top && b[3] <= top + h;
                if !inside || taken.iter().any(|t| overlaps(t, &b)) {
                    return None;
                }
                if r == 0.0 {
                    return Some((x, y, None));
                }
                // a leader from the point's edge to the nearest point of the label's box,
                // crossing no other label
                let (nx, ny) = (cx.clamp(b[0], b[2]), cy.clamp(b[1], b[3]));
                let len = ((nx - cx).powi(2) + (ny - cy).powi(2)).sqrt().max(1.0);
                let seg = [
                    cx + (nx - cx) * 5.0 / len,
                    cy + (ny - cy) * 5.0 / len,
                    nx,
                    ny,
                ];
                let steps = (len / 2.0).ceil() as usize;
                let crosses = (1..steps).any(|k| {
                    let f = k as f64 / steps as f64;
                    let (qx, qy) = (cx + (nx - cx) * f, cy + (ny - cy) * f);
                    taken[npts..]
                        .iter()
                        .any(|t| t[0] < qx && qx < t[2] && t[1] < qy && qy < t[3])
                });
                (!crosses).then_some((x, y, Some(seg)))
            });
            if let Some((x, y, seg)) = found {
                taken.push([
                    x - 1.5,
                    y - asc - 1.0,
                    x + text_width(&p.label, LABEL_PX) + 1.5,
                    y + desc + 1.0,
                ]);
                placed[i] = Some((x, y, seg));
            }
        }
    }
    let mut leaders = String::new();
    let mut labels = String::new();
    for (p, at) in pts.iter().zip(&placed) {
        let Some((x, y, seg)) = at else { continue };
        if let Some([x1, y1, x2, y2]) = seg {
            let _ = write!(
                leaders,
                r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" class="leader"/>"#
            );
        }
        let _ = write!(
            labels,
            r#"<text x="{x:.1}" y="{y:.1}" class="lbl" font-size="{LABEL_PX}">{}</text>"#,
            esc(&p.label)
        );
    }
    s.push_str(&leaders);
    s.push_str(&labels);
    for (i, sub) in subs.iter().enumerate() {
        let (lx, ly) = legend_at[i];
        let _ = write!(
            s,
            r#"<circle cx="{:.1}" cy="{ly:.1}" r="5" fill="{}"/><text x="{:.1}" y="{:.1}" class="tick" font-size="{TICK_PX}">{}</text>"#,
            lx + 5.0,
            PALETTE[i % PALETTE.len()],
            lx + 14.0,
            ly + 4.0,
            esc(sub)
        );
    }
    s.push_str("</svg>");
    Some(s)
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
