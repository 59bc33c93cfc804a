//! Inline SVG charts for the HTML site (no scripts, no external references).
//!
//! - [`cycles_chart`]: mean cycles per operation for every instance, bars on a log-scale y
//!   axis with error bars ([`Spread`]), instances grouped by the NIST category their
//!   manifest gives (else by [`super::view::level_of`], else "no category"); axis titles,
//!   a legend, vertical instance labels, groups at least as wide as their names.
//! - [`size_scatter`]: public key + ciphertext bytes (x, log) against decapsulation cycles
//!   (y, log), one point per instance, one colour per submission; a point's label goes
//!   where it overlaps nothing (else only its hover title names it).
//!
//! Text boxes are estimated from font size and character count ([`text_width`]); the
//! report tests check that none leaves the viewBox and none overlaps another.
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

/// What the error bars of [`cycles_chart`] span. Only the trials' spread exists in the
/// results today; a confidence interval becomes one more variant here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// Lowest to highest per-operation cycles over the trials.
    MinMax,
    /// First to third quartile of the trials' per-operation cycles.
    Quartiles,
}

impl Spread {
    fn of(self, o: &super::results::ResultOp) -> Option<(f64, f64)> {
        let (lo, hi) = match self {
            Spread::MinMax => (o.min_cycles?, o.max_cycles?),
            Spread::Quartiles => (o.q1_cycles?, o.q3_cycles?),
        };
        (lo > 0.0 && hi >= lo).then_some((lo, hi))
    }

    /// Words for captions: "min–max of the trials".
    pub fn describe(self) -> &'static str {
        match self {
            Spread::MinMax => "lowest to highest trial",
            Spread::Quartiles => "first to third quartile of the trials",
        }
    }
}

/// The spread the site's charts show.
pub const CHART_SPREAD: Spread = Spread::MinMax;

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

struct Bar {
    label: String,
    values: [Option<f64>; 3],
    spread: [Option<(f64, f64)>; 3],
}

/// Approximate width of `text` at `size` px (sans-serif averages about 0.6 em a glyph).
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.6
}

const TICK_PX: f64 = 11.0;
const LABEL_PX: f64 = 10.0;
const GROUP_PX: f64 = 11.0;
const TITLE_PX: f64 = 13.0;

/// Bars of mean cycles per operation with error bars (`spread`), grouped by NIST category;
/// `None` when nothing was timed.
pub fn cycles_chart(results: &Results, spread: Spread) -> Option<String> {
    let mut groups: BTreeMap<Group, Vec<Bar>> = BTreeMap::new();
    for sub in &results.submissions {
        for inst in &sub.instances {
            let values = OP_COLOURS
                .map(|(op, _)| inst.op(op).and_then(|o| o.mean_cycles).filter(|c| *c > 0.0));
            if values.iter().all(Option::is_none) {
                continue;
            }
            let key = match (inst.nist_category, inst.level) {
                (Some(c), _) => Group::Category(c),
                (None, Some(l)) => Group::Level(l),
                (None, None) => Group::Other,
            };
            groups.entry(key).or_default().push(Bar {
                label: format!("{} {}", sub.id, inst.id),
                values,
                spread: OP_COLOURS.map(|(op, _)| inst.op(op).and_then(|o| spread.of(o))),
            });
        }
    }
    let all: Vec<f64> = groups
        .values()
        .flatten()
        .flat_map(|b| {
            b.values
                .iter()
                .flatten()
                .copied()
                .chain(b.spread.iter().flatten().flat_map(|(l, h)| [*l, *h]))
        })
        .collect();
    if all.is_empty() {
        return None;
    }
    let min = all.iter().copied().fold(f64::INFINITY, f64::min);
    let max = all.iter().copied().fold(0.0, f64::max);
    let (d0, d1) = decades(min, max);
    let longest = groups
        .values()
        .flatten()
        .map(|b| text_width(&b.label, LABEL_PX))
        .fold(0.0, f64::max);
    let (left, top, plot_h) = (78.0, 84.0, 240.0);
    // vertical instance labels, then the x-axis title
    let bottom = 12.0 + longest + 16.0 + TICK_PX + 10.0;
    let (bar_w, inst_gap, group_gap) = (12.0, 14.0, 24.0);
    let inst_w = 3.0 * bar_w + inst_gap;
    // a group is at least as wide as its name
    let group_w =
        |g: &Group, n: usize| (n as f64 * inst_w).max(text_width(&g.name(), GROUP_PX) + 8.0);
    let plot_w: f64 = groups.iter().map(|(g, b)| group_w(g, b.len())).sum::<f64>()
        + (groups.len().saturating_sub(1)) as f64 * group_gap
        + 20.0;
    let title = format!(
        "Mean cycles per operation, log scale; error bars: {}",
        spread.describe()
    );
    let x_title = "submission and instance, grouped by NIST security category";
    let width = (left + plot_w.max(380.0) + 20.0)
        .max(left + text_width(&title, TITLE_PX) + 20.0)
        .max(left + text_width(x_title, TICK_PX) + 20.0)
        .ceil();
    let height = (top + plot_h + bottom).ceil();
    let y = |v: f64| top + plot_h * (1.0 - (v.log10() - d0 as f64) / (d1 - d0) as f64);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" viewBox="0 0 {width:.0} {height:.0}" width="{width:.0}" height="{height:.0}" role="img" aria-label="mean cycles per operation, log scale">"#
    );
    let _ = write!(
        s,
        r#"<text x="{left:.0}" y="18" class="ct" font-size="{TITLE_PX}">{}</text>"#,
        esc(&title)
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
    let (tx, ty) = (16.0, top + plot_h / 2.0);
    let _ = write!(
        s,
        r#"<text x="{tx:.1}" y="{ty:.1}" class="tick" font-size="{TICK_PX}" text-anchor="middle" transform="rotate(-90 {tx:.1} {ty:.1})">cycles per operation (counter ticks)</text>"#
    );
    // legend
    for (i, (op, colour)) in OP_COLOURS.iter().enumerate() {
        let lx = left + i as f64 * 80.0;
        let _ = write!(
            s,
            r#"<rect x="{lx:.1}" y="30" width="10" height="10" fill="{colour}"/><text x="{:.1}" y="39" class="tick" font-size="{TICK_PX}">{}</text>"#,
            lx + 14.0,
            op.name()
        );
    }
    let lx = left + 3.0 * 80.0;
    let _ = write!(
        s,
        r#"<line x1="{:.1}" y1="29" x2="{:.1}" y2="41" class="axis"/><text x="{:.1}" y="39" class="tick" font-size="{TICK_PX}">error bar</text>"#,
        lx + 5.0,
        lx + 5.0,
        lx + 14.0
    );
    let mut x = left + 10.0;
    for (group, bars) in &groups {
        let gx0 = x;
        let gw = group_w(group, bars.len());
        // centre the bars in the group
        x += (gw - bars.len() as f64 * inst_w) / 2.0;
        for bar in bars {
            for (j, v) in bar.values.iter().enumerate() {
                let Some(v) = v else { continue };
                let (op, colour) = OP_COLOURS[j];
                let yy = y(*v);
                let bx = x + j as f64 * bar_w;
                let _ = write!(
                    s,
                    r#"<rect x="{bx:.1}" y="{yy:.1}" width="{bar_w:.1}" height="{:.1}" fill="{colour}"><title>{}: {} {} cycles</title></rect>"#,
                    (top + plot_h - yy).max(0.0),
                    esc(&bar.label),
                    op.name(),
                    format::cycles(*v)
                );
                if let Some((lo, hi)) = bar.spread[j] {
                    let (cx, ylo, yhi) = (bx + bar_w / 2.0, y(lo), y(hi));
                    let _ = write!(
                        s,
                        r#"<path d="M{cx:.1} {ylo:.1}V{yhi:.1}M{:.1} {ylo:.1}H{:.1}M{:.1} {yhi:.1}H{:.1}" class="ebar"><title>{}: {} {} to {} cycles</title></path>"#,
                        cx - 3.0,
                        cx + 3.0,
                        cx - 3.0,
                        cx + 3.0,
                        esc(&bar.label),
                        op.name(),
                        format::cycles(lo),
                        format::cycles(hi)
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
            top - 10.0,
            esc(&group.name()),
            top - 4.0,
            x,
            top - 4.0
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
    Some(s)
}

/// Whether two boxes `[x0, y0, x1, y1]` overlap.
pub fn overlaps(a: &[f64; 4], b: &[f64; 4]) -> bool {
    a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3]
}

/// Scatter of pk+ct bytes against dec cycles; `None` when no instance has both.
pub fn size_scatter(results: &Results) -> Option<String> {
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
            let Some(c) = inst
                .op(Op::Dec)
                .and_then(|o| o.mean_cycles)
                .filter(|c| *c > 0.0)
            else {
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
    let (left, top, w, h) = (78.0, 40.0, 520.0, 300.0);
    let legend_w = subs
        .iter()
        .map(|s| text_width(s, TICK_PX) + 40.0)
        .fold(170.0, f64::max);
    let width = left + w + legend_w;
    let height = top + h + 56.0;
    let px = |v: f64| left + w * (v.log10() - x0 as f64) / (x1 - x0) as f64;
    let py = |v: f64| top + h * (1.0 - (v.log10() - y0 as f64) / (y1 - y0) as f64);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" viewBox="0 0 {width:.0} {height:.0}" width="{width:.0}" height="{height:.0}" role="img" aria-label="public key plus ciphertext bytes against decapsulation cycles">"#
    );
    let _ = write!(
        s,
        r#"<text x="{left:.0}" y="18" class="ct" font-size="{TITLE_PX}">Public key + ciphertext size against decapsulation time</text>"#
    );
    let (tx, ty) = (16.0, top + h / 2.0);
    let _ = write!(
        s,
        r#"<text x="{tx:.1}" y="{ty:.1}" class="tick" font-size="{TICK_PX}" text-anchor="middle" transform="rotate(-90 {tx:.1} {ty:.1})">decapsulation, mean cycles (log scale)</text><text x="{:.1}" y="{:.1}" class="tick" font-size="{TICK_PX}" text-anchor="middle">public key + ciphertext, bytes (log scale)</text>"#,
        left + w / 2.0,
        height - 8.0
    );
    for k in x0..=x1 {
        let xx = px(10f64.powi(k));
        let _ = write!(
            s,
            r#"<line x1="{xx:.1}" y1="{top:.1}" x2="{xx:.1}" y2="{:.1}" class="grid"/><text x="{xx:.1}" y="{:.1}" class="tick" font-size="{TICK_PX}" text-anchor="middle">{} B</text>"#,
            top + h,
            top + h + 16.0,
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
    // labels beside their points where they overlap nothing, else left out (the point
    // keeps its hover title)
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
        taken.push([cx - 4.5, cy - 4.5, cx + 4.5, cy + 4.5]);
    }
    for p in &pts {
        let (cx, cy) = (px(p.bytes), py(p.cycles));
        let tw = text_width(&p.label, LABEL_PX);
        // baseline positions: right, left, above, below, further out
        let spots = [
            (cx + 7.0, cy + 3.5),
            (cx - 7.0 - tw, cy + 3.5),
            (cx - tw / 2.0, cy - 8.0),
            (cx - tw / 2.0, cy + 16.0),
            (cx + 7.0, cy - 9.0),
            (cx + 7.0, cy + 15.0),
            (cx - 7.0 - tw, cy - 9.0),
            (cx - 7.0 - tw, cy + 15.0),
        ];
        let fits = |b: &[f64; 4]| {
            b[0] >= left
                && b[2] <= left + w
                && b[1] >= top
                && b[3] <= top + h
                && !taken.iter().any(|t| overlaps(t, b))
        };
        let found = spots
            .iter()
            .map(|&(x, y)| (x, y, [x, y - LABEL_PX, x + tw, y + LABEL_PX * 0.25]))
            .find(|(_, _, b)| fits(b));
        if let Some((x, y, b)) = found {
            taken.push(b);
            let _ = write!(
                s,
                r#"<text x="{x:.1}" y="{y:.1}" class="lbl" font-size="{LABEL_PX}">{}</text>"#,
                esc(&p.label)
            );
        }
    }
    for (i, sub) in subs.iter().enumerate() {
        let ly = top + 10.0 + i as f64 * 18.0;
        let lx = left + w + 16.0;
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
