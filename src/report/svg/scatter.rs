//! [`size_scatter`]: public key + ciphertext bytes against decapsulation cycles, one point
//! per instance, labels placed where they overlap nothing.

use std::fmt::Write;

use super::*;

/// One instance's point.
struct Pt {
    /// Index of its submission in the legend.
    sub: usize,
    label: String,
    bytes: f64,
    cycles: f64,
}

/// The plot area and its log-scale axes (decades `x0..=x1`, `y0..=y1`).
struct Frame {
    left: f64,
    top: f64,
    w: f64,
    h: f64,
    x: (i32, i32),
    y: (i32, i32),
}

impl Frame {
    fn px(&self, v: f64) -> f64 {
        let (x0, x1) = self.x;
        self.left + self.w * (v.log10() - x0 as f64) / (x1 - x0) as f64
    }

    fn py(&self, v: f64) -> f64 {
        let (y0, y1) = self.y;
        self.top + self.h * (1.0 - (v.log10() - y0 as f64) / (y1 - y0) as f64)
    }

    fn contains(&self, b: &[f64; 4]) -> bool {
        b[0] >= self.left
            && b[2] <= self.left + self.w
            && b[1] >= self.top
            && b[3] <= self.top + self.h
    }
}

/// A label's baseline start and its leader line, once placed.
type Placed = (f64, f64, Option<[f64; 4]>);

/// Scatter of pk+ct bytes against decapsulation cycles (the value `spread` names); `None`
/// when no instance has both.
pub fn size_scatter(results: &Results, spread: Spread, layout: Layout) -> Option<String> {
    let (pts, subs) = points(results, spread);
    if pts.is_empty() {
        return None;
    }
    let fold = |f: fn(&Pt) -> f64| {
        let lo = pts.iter().map(f).fold(f64::INFINITY, f64::min);
        let hi = pts.iter().map(f).fold(0.0, f64::max);
        decades(lo, hi)
    };
    let statistic = match spread {
        Spread::MedianCi => "median",
        Spread::MeanMinMax => "mean",
    };
    // every category in one chart: each point's label names its category
    let title = format!(
        "pk + ct bytes against decapsulation {statistic} cycles; labels give the NIST category"
    );
    let titles = title_lines(&title, layout);
    let (left, top) = (64.0, 26.0 + 18.0 * titles.len() as f64);
    let (w, h, width, legend_at) = legend_layout(&subs, layout, left, top);
    let frame = Frame {
        left,
        top,
        w,
        h,
        x: fold(|p| p.bytes),
        y: fold(|p| p.cycles),
    };
    let height = (top + h + 58.0)
        .max(legend_at.last().map_or(0.0, |(_, y)| y + 14.0))
        .ceil();
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
    axes(
        &mut s,
        &frame,
        layout,
        &format!("decapsulation, {statistic} cycles (log scale)"),
    );
    let mut taken = draw_points(&mut s, &frame, &pts, &subs);
    let placed = place_labels(&frame, &pts, &mut taken);
    draw_labels(&mut s, &pts, &placed);
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

/// Every instance with sizes and a decapsulation figure, and the submissions in the order
/// they first appear.
fn points(results: &Results, spread: Spread) -> (Vec<Pt>, Vec<&str>) {
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
                label: match inst.nist_category {
                    Some(c) => format!("{} (cat. {c})", inst.id),
                    None => format!("{} (no cat.)", inst.id),
                },
                bytes: (pk + ct) as f64,
                cycles: c,
            });
        }
    }
    (pts, subs)
}

/// The title on one line (wide), or on as many as it takes (narrow), with a margin for the
/// browser's font being wider than the estimate (scripts/site-check.sh measures the drawn
/// text).
fn title_lines(title: &str, layout: Layout) -> Vec<String> {
    match layout {
        Layout::Wide => vec![title.to_string()],
        Layout::Narrow => {
            let mut lines = Vec::new();
            let mut rest = Some(title.to_string());
            while let Some(t) = rest.take() {
                let (a, b) = split_to_fit(&t, TITLE_PX, NARROW_W - 48.0);
                lines.push(a);
                rest = b;
            }
            lines
        }
    }
}

/// The plot's width and height, the drawing's width, and each legend item's place: a
/// column on the right (wide), rows under the plot (narrow).
fn legend_layout(
    subs: &[&str],
    layout: Layout,
    left: f64,
    top: f64,
) -> (f64, f64, f64, Vec<(f64, f64)>) {
    let legend_item = |s: &str| text_width(s, TICK_PX) + 30.0;
    match layout {
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
            for sub in subs {
                if lx + legend_item(sub) > NARROW_W - 8.0 && lx > 8.0 {
                    lx = 8.0;
                    ly += 20.0;
                }
                at.push((lx, ly));
                lx += legend_item(sub);
            }
            (w, h, NARROW_W, at)
        }
    }
}

/// Axis titles, decade grid lines and their labels.
fn axes(s: &mut String, f: &Frame, layout: Layout, y_title: &str) {
    let (left, top, w, h) = (f.left, f.top, f.w, f.h);
    let (tx, ty) = (16.0, top + h / 2.0);
    let _ = write!(
        s,
        r#"<text x="{tx:.1}" y="{ty:.1}" class="tick" font-size="{TICK_PX}" text-anchor="middle" transform="rotate(-90 {tx:.1} {ty:.1})">{}</text><text x="{:.1}" y="{:.1}" class="tick" font-size="{TICK_PX}" text-anchor="middle">public key + ciphertext, bytes (log scale)</text>"#,
        esc(y_title),
        left + w / 2.0,
        top + h + 44.0
    );
    let (x0, x1) = f.x;
    for k in x0..=x1 {
        let xx = f.px(10f64.powi(k));
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
    let (y0, y1) = f.y;
    for k in y0..=y1 {
        let yy = f.py(10f64.powi(k));
        let _ = write!(
            s,
            r#"<line x1="{left:.1}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" class="grid"/><text x="{:.1}" y="{:.1}" class="tick" font-size="{TICK_PX}" text-anchor="end">{}</text>"#,
            left + w,
            left - 6.0,
            yy + 4.0,
            decade_label(k)
        );
    }
}

/// The points with their hover titles; returns the boxes they take.
fn draw_points(s: &mut String, f: &Frame, pts: &[Pt], subs: &[&str]) -> Vec<[f64; 4]> {
    let mut taken = Vec::new();
    for p in pts {
        let colour = PALETTE[p.sub % PALETTE.len()];
        let (cx, cy) = (f.px(p.bytes), f.py(p.cycles));
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
    taken
}

/// Label ascent and descent below the baseline.
const ASC: f64 = LABEL_PX * 0.95;
const DESC: f64 = LABEL_PX * 0.25;

/// Every label beside its point if it overlaps nothing there, else further out with a
/// leader line, else left out (the point keeps its hover title). Placed round by round:
/// first every label that fits beside its point, then further out, and so on. `taken`
/// holds the points' boxes on entry; the labels' are added.
fn place_labels(f: &Frame, pts: &[Pt], taken: &mut Vec<[f64; 4]>) -> Vec<Option<Placed>> {
    let mut placed: Vec<Option<Placed>> = vec![None; pts.len()];
    let npts = pts.len();
    for r in [0.0, 10.0, 20.0, 30.0, 40.0, 55.0, 70.0, 90.0, 115.0, 140.0] {
        for (i, p) in pts.iter().enumerate() {
            if placed[i].is_some() {
                continue;
            }
            let (cx, cy) = (f.px(p.bytes), f.py(p.cycles));
            let tw = text_width(&p.label, LABEL_PX);
            let found = spots(cx, cy, tw, r).iter().find_map(|&(x, y)| {
                let b = [x - 1.5, y - ASC - 1.0, x + tw + 1.5, y + DESC + 1.0];
                if !f.contains(&b) || taken.iter().any(|t| overlaps(t, &b)) {
                    return None;
                }
                if r == 0.0 {
                    return Some((x, y, None));
                }
                leader(cx, cy, &b, &taken[npts..]).map(|seg| (x, y, Some(seg)))
            });
            if let Some((x, y, seg)) = found {
                taken.push([x - 1.5, y - ASC - 1.0, x + tw + 1.5, y + DESC + 1.0]);
                placed[i] = Some((x, y, seg));
            }
        }
    }
    placed
}

/// Sixteen candidate baselines for a label `tw` wide, right and left first: the box's
/// nearest side or corner at distance 7 + r from the point.
fn spots(cx: f64, cy: f64, tw: f64, r: f64) -> [(f64, f64); 16] {
    let mid = (ASC - DESC) / 2.0;
    [0, 8, 12, 4, 14, 2, 10, 6, 15, 1, 9, 7, 13, 3, 11, 5].map(|k| {
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
            ay - DESC
        } else if dy > 0.3 {
            ay + ASC
        } else {
            ay + mid
        };
        (x, y)
    })
}

/// A leader from the point's edge to the nearest point of the label's box `b`, if it
/// crosses none of the `labels` already placed.
fn leader(cx: f64, cy: f64, b: &[f64; 4], labels: &[[f64; 4]]) -> Option<[f64; 4]> {
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
        labels
            .iter()
            .any(|t| t[0] < qx && qx < t[2] && t[1] < qy && qy < t[3])
    });
    (!crosses).then_some(seg)
}

/// The leader lines, then the labels over them.
fn draw_labels(s: &mut String, pts: &[Pt], placed: &[Option<Placed>]) {
    let mut leaders = String::new();
    let mut labels = String::new();
    for (p, at) in pts.iter().zip(placed) {
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
}
