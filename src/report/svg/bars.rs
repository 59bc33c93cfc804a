//! [`cycles_chart`]: cycles per operation per instance, grouped by NIST category, in a wide
//! (vertical bars) and a narrow (horizontal bars) drawing.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::model::Op;

use super::*;

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
    /// Per operation (keygen, enc, dec).
    values: [Option<Value>; 3],
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

/// Font size of the values written next to the bars (they print; hover titles do not).
const VALUE_PX: f64 = 9.0;

/// An error bar's ends, at least `MIN_CI_PX` apart on screen (a narrower interval is drawn
/// that wide around its middle, so it stays visible).
const MIN_CI_PX: f64 = 2.0;

fn visible(a: f64, b: f64) -> (f64, f64) {
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    if hi - lo >= MIN_CI_PX {
        (lo, hi)
    } else {
        let m = (lo + hi) / 2.0;
        (m - MIN_CI_PX / 2.0, m + MIN_CI_PX / 2.0)
    }
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
    // the group names sit under `head`; the values above the bars between it and `top`
    let (left, head, plot_h) = (78.0, 92.0, 260.0);
    let top = head + 44.0;
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
    let title = format!(
        "{}, log scale from {} (bars start there)",
        spread.value(),
        decade_label(d0)
    );
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
                let mut value_at = yy;
                if let Some((lo, hi)) = e {
                    let (yhi, ylo) = visible(y(hi), y(lo));
                    let cx = bx + bar_w / 2.0;
                    value_at = value_at.min(yhi);
                    let _ = write!(
                        s,
                        r#"<path d="M{cx:.1} {ylo:.1}V{yhi:.1}M{:.1} {ylo:.1}H{:.1}M{:.1} {yhi:.1}H{:.1}" class="ebar"/>"#,
                        cx - 3.0,
                        cx + 3.0,
                        cx - 3.0,
                        cx + 3.0
                    );
                }
                // the value, written upwards above the bar and its error bar
                let (vx, vy) = (bx + bar_w / 2.0 + VALUE_PX * 0.35, value_at - 3.0);
                let _ = write!(
                    s,
                    r#"<text x="{vx:.1}" y="{vy:.1}" class="tick" font-size="{VALUE_PX}" transform="rotate(-90 {vx:.1} {vy:.1})">{}</text>"#,
                    format::cycles(v)
                );
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
            head - 12.0,
            esc(&group.name()),
            head - 5.0,
            x,
            head - 5.0
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
    let (bar_h, bar_gap, label_h, inst_gap, group_h) = (9.0, 2.0, 15.0, 9.0, 26.0);
    let inst_h = label_h + 3.0 * bar_h + 2.0 * bar_gap + inst_gap;
    let title = spread.value().to_string();
    let sub_title = format!(
        "log scale from {} (bars start there); error bars: {}",
        decade_label(d0),
        spread.describe()
    );
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
                let mut end = x(v);
                if let Some((lo, hi)) = e {
                    let (xlo, xhi) = visible(x(lo), x(hi));
                    let cy = by + bar_h / 2.0;
                    end = end.max(xhi);
                    let _ = write!(
                        s,
                        r#"<path d="M{xlo:.1} {cy:.1}H{xhi:.1}M{xlo:.1} {:.1}V{:.1}M{xhi:.1} {:.1}V{:.1}" class="ebar"/>"#,
                        cy - 3.0,
                        cy + 3.0,
                        cy - 3.0,
                        cy + 3.0
                    );
                }
                // the value after the bar's end, else inside the bar in white
                let label = format::cycles(v);
                let ty = by + bar_h - 1.0;
                if end + 3.0 + text_width(&label, VALUE_PX) <= NARROW_W - 2.0 {
                    let _ = write!(
                        s,
                        r#"<text x="{:.1}" y="{ty:.1}" class="tick" font-size="{VALUE_PX}">{label}</text>"#,
                        end + 3.0
                    );
                } else {
                    let _ = write!(
                        s,
                        r##"<text x="{:.1}" y="{ty:.1}" fill="#fff" font-size="{VALUE_PX}" text-anchor="end">{label}</text>"##,
                        x(v) - 2.0
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
