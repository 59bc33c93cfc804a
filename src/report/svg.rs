//! Inline SVG charts for the HTML site (no scripts, no external references).
//!
//! - [`cycles_chart`]: mean cycles per operation for every instance, bars on a log-scale y
//!   axis, instances grouped by security level ([`super::view::level_of`]: the matrix
//!   variable `level`, else the first number in the instance id; instances with neither
//!   form a last group "other").
//! - [`size_scatter`]: public key + ciphertext bytes (x, log) against decapsulation cycles
//!   (y, log), one point per instance, one colour per submission.
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

struct Bar {
    label: String,
    values: [Option<f64>; 3],
}

/// Bars of cycles per operation, grouped by level; `None` when nothing was timed.
pub fn cycles_chart(results: &Results) -> Option<String> {
    let mut groups: BTreeMap<(bool, u64), Vec<Bar>> = BTreeMap::new();
    for sub in &results.submissions {
        for inst in &sub.instances {
            let values = OP_COLOURS
                .map(|(op, _)| inst.op(op).and_then(|o| o.mean_cycles).filter(|c| *c > 0.0));
            if values.iter().all(Option::is_none) {
                continue;
            }
            let key = match inst.level {
                Some(l) => (false, l),
                None => (true, 0),
            };
            groups.entry(key).or_default().push(Bar {
                label: format!("{} {}", sub.id, inst.id),
                values,
            });
        }
    }
    let all: Vec<f64> = groups
        .values()
        .flatten()
        .flat_map(|b| b.values.iter().flatten().copied())
        .collect();
    if all.is_empty() {
        return None;
    }
    let min = all.iter().copied().fold(f64::INFINITY, f64::min);
    let max = all.iter().copied().fold(0.0, f64::max);
    let (d0, d1) = decades(min, max);
    let (left, top, plot_h, bottom) = (60.0, 64.0, 240.0, 150.0);
    let (bar_w, inst_gap, group_gap) = (12.0, 14.0, 30.0);
    let inst_w = 3.0 * bar_w + inst_gap;
    let n_inst: usize = groups.values().map(Vec::len).sum();
    let plot_w =
        n_inst as f64 * inst_w + (groups.len().saturating_sub(1)) as f64 * group_gap + 20.0;
    let width = left + plot_w.max(380.0) + 20.0;
    let height = top + plot_h + bottom;
    let y = |v: f64| top + plot_h * (1.0 - (v.log10() - d0 as f64) / (d1 - d0) as f64);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" viewBox="0 0 {width:.0} {height:.0}" width="{width:.0}" height="{height:.0}" role="img" aria-label="mean cycles per operation, log scale">"#
    );
    let _ = write!(
        s,
        r#"<text x="{left:.0}" y="16" class="ct">mean cycles per operation, log scale</text>"#
    );
    for k in d0..=d1 {
        let yy = y(10f64.powi(k));
        let _ = write!(
            s,
            r#"<line x1="{left:.1}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" class="grid"/><text x="{:.1}" y="{:.1}" class="tick" text-anchor="end">{}</text>"#,
            width - 20.0,
            left - 6.0,
            yy + 4.0,
            decade_label(k)
        );
    }
    // legend
    for (i, (op, colour)) in OP_COLOURS.iter().enumerate() {
        let lx = left + i as f64 * 70.0;
        let _ = write!(
            s,
            r#"<rect x="{lx:.1}" y="26" width="10" height="10" fill="{colour}"/><text x="{:.1}" y="35" class="tick">{}</text>"#,
            lx + 14.0,
            op.name()
        );
    }
    let mut x = left + 10.0;
    for ((other, level), bars) in &groups {
        let gx0 = x;
        for bar in bars {
            for (j, v) in bar.values.iter().enumerate() {
                let Some(v) = v else { continue };
                let (op, colour) = OP_COLOURS[j];
                let yy = y(*v);
                let _ = write!(
                    s,
                    r#"<rect x="{:.1}" y="{yy:.1}" width="{bar_w:.1}" height="{:.1}" fill="{colour}"><title>{}: {} {} cycles</title></rect>"#,
                    x + j as f64 * bar_w,
                    (top + plot_h - yy).max(0.0),
                    esc(&bar.label),
                    op.name(),
                    format::cycles(*v)
                );
            }
            let lx = x + 1.5 * bar_w;
            let ly = top + plot_h + 8.0;
            let _ = write!(
                s,
                r#"<text x="{lx:.1}" y="{ly:.1}" class="lbl" transform="rotate(60 {lx:.1} {ly:.1})">{}</text>"#,
                esc(&bar.label)
            );
            x += inst_w;
        }
        let name = if *other {
            "other".to_string()
        } else {
            format!("level {level}")
        };
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" class="grp" text-anchor="middle">{}</text><line x1="{gx0:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" class="gline"/>"#,
            (gx0 + x - inst_gap) / 2.0,
            top - 8.0,
            esc(&name),
            top,
            x - inst_gap,
            top
        );
        x += group_gap;
    }
    let _ = write!(
        s,
        r#"<line x1="{left:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" class="axis"/></svg>"#,
        top + plot_h,
        width - 20.0,
        top + plot_h
    );
    Some(s)
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
    let (left, top, w, h) = (60.0, 40.0, 520.0, 300.0);
    let legend_w = 170.0;
    let width = left + w + legend_w;
    let height = top + h + 50.0;
    let px = |v: f64| left + w * (v.log10() - x0 as f64) / (x1 - x0) as f64;
    let py = |v: f64| top + h * (1.0 - (v.log10() - y0 as f64) / (y1 - y0) as f64);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" viewBox="0 0 {width:.0} {height:.0}" width="{width:.0}" height="{height:.0}" role="img" aria-label="public key plus ciphertext bytes against decapsulation cycles">"#
    );
    let _ = write!(
        s,
        r#"<text x="{left:.0}" y="16" class="ct">public key + ciphertext bytes (x, log) vs decapsulation cycles (y, log)</text>"#
    );
    for k in x0..=x1 {
        let xx = px(10f64.powi(k));
        let _ = write!(
            s,
            r#"<line x1="{xx:.1}" y1="{top:.1}" x2="{xx:.1}" y2="{:.1}" class="grid"/><text x="{xx:.1}" y="{:.1}" class="tick" text-anchor="middle">{} B</text>"#,
            top + h,
            top + h + 16.0,
            decade_label(k)
        );
    }
    for k in y0..=y1 {
        let yy = py(10f64.powi(k));
        let _ = write!(
            s,
            r#"<line x1="{left:.1}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" class="grid"/><text x="{:.1}" y="{:.1}" class="tick" text-anchor="end">{}</text>"#,
            left + w,
            left - 6.0,
            yy + 4.0,
            decade_label(k)
        );
    }
    for p in &pts {
        let colour = PALETTE[p.sub % PALETTE.len()];
        let (cx, cy) = (px(p.bytes), py(p.cycles));
        let _ = write!(
            s,
            r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="4.5" fill="{colour}"><title>{} {}: pk+ct {} bytes, dec {} cycles</title></circle><text x="{:.1}" y="{:.1}" class="lbl">{}</text>"#,
            esc(subs[p.sub]),
            esc(&p.label),
            p.bytes,
            format::cycles(p.cycles),
            cx + 6.0,
            cy - 4.0,
            esc(&p.label)
        );
    }
    for (i, sub) in subs.iter().enumerate() {
        let ly = top + 10.0 + i as f64 * 18.0;
        let lx = left + w + 16.0;
        let _ = write!(
            s,
            r#"<circle cx="{:.1}" cy="{ly:.1}" r="5" fill="{}"/><text x="{:.1}" y="{:.1}" class="tick">{}</text>"#,
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
