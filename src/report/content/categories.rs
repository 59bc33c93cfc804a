//! Comparisons a reader asks for: instances of one NIST security category side by side
//! (index), and each optimized implementation against its clean one (index and section 4).

use std::collections::BTreeMap;

use crate::model::Op;

use crate::report::doc::{code, link, Doc, Table};
use crate::report::format::{self as fmt, DASH};
use crate::report::results::{ResultInstance, Results};
use crate::report::view::{CampaignView, InstanceView, SubmissionView};

/// An implementation other than `clean` and the clean instance with the same other matrix
/// values; `ratio` is clean cycles / this one's, per operation of [`Op::ALL`].
pub(super) struct Speedup {
    pub inst: String,
    pub clean: String,
    pub ratio: [Option<f64>; 3],
}

/// Headline cycles: the median of the rounds, else the mean of a block of trials.
fn cycles(inst: &InstanceView, op: Op) -> Option<f64> {
    inst.time_ok(op)
        .map(|t| t.summary.median_cycles.unwrap_or(t.summary.mean_cycles))
        .filter(|c| *c > 0.0)
}

/// Speed-ups of every non-clean instance (matrix variable `impl`) over its clean sibling.
pub(super) fn speedups(sub: &SubmissionView) -> Vec<Speedup> {
    let mut out = Vec::new();
    for inst in &sub.instances {
        let Some(imp) = inst.vars.get("impl") else {
            continue;
        };
        if imp == "clean" {
            continue;
        }
        let Some(clean) = sub.instances.iter().find(|c| {
            c.vars.get("impl").map(String::as_str) == Some("clean")
                && c.vars
                    .iter()
                    .filter(|(k, _)| *k != "impl")
                    .all(|(k, v)| inst.vars.get(k) == Some(v))
        }) else {
            continue;
        };
        let ratio = Op::ALL.map(|op| match (cycles(clean, op), cycles(inst, op)) {
            (Some(c), Some(o)) => Some(c / o),
            _ => None,
        });
        if ratio.iter().any(Option::is_some) {
            out.push(Speedup {
                inst: inst.id.clone(),
                clean: clean.id.clone(),
                ratio,
            });
        }
    }
    out
}

/// "×2.31": how many times faster than clean; below ×1 it is slower.
fn times(r: Option<f64>) -> String {
    r.map(|r| format!("×{r:.2}")).unwrap_or_else(|| DASH.into())
}

/// One line per instance slower than its clean implementation in some operation.
pub(super) fn slower_than_clean(speedups: &[Speedup]) -> Vec<String> {
    speedups
        .iter()
        .filter_map(|s| {
            let slow: Vec<String> = Op::ALL
                .iter()
                .zip(s.ratio)
                .filter_map(|(op, r)| {
                    r.filter(|r| *r < 1.0)
                        .map(|r| format!("{} takes {:.2}× the cycles", op.name(), 1.0 / r))
                })
                .collect();
            (!slow.is_empty()).then(|| {
                format!(
                    "{} is slower than {}: {}",
                    code(&s.inst),
                    code(&s.clean),
                    slow.join(", ")
                )
            })
        })
        .collect()
}

/// The index's per-category section: one table per NIST category (instances without one
/// last), with cycles, pk+ct bytes and the speed-up over clean; then the optimized
/// implementations slower than their clean ones.
pub(super) fn by_category(doc: &mut Doc, view: &CampaignView, results: &Results) {
    let mut groups: BTreeMap<u8, Vec<(&str, &ResultInstance)>> = BTreeMap::new();
    for sub in &results.submissions {
        for inst in &sub.instances {
            // categories 1-5; instances without one sort last
            groups
                .entry(inst.nist_category.unwrap_or(u8::MAX))
                .or_default()
                .push((&sub.id, inst));
        }
    }
    if groups.is_empty() {
        return;
    }
    let speedups: Vec<Speedup> = view.submissions.iter().flat_map(speedups).collect();
    doc.h(2, "By NIST security category");
    doc.p(
        "Instances of equal claimed strength side by side (the category each manifest gives), \
         cycles per operation (median of rounds, else mean); speed-up is the clean \
         implementation's cycles over \
         this one's (above ×1 faster, below slower).",
    );
    for (cat, insts) in groups {
        doc.h(
            3,
            if cat == u8::MAX {
                "No category given".to_string()
            } else {
                format!("NIST category {cat}")
            },
        );
        let mut t = Table::new(&[
            "submission",
            "instance",
            "keygen cycles",
            "enc cycles",
            "dec cycles",
            "pk + ct bytes",
            "speed-up over clean (keygen / enc / dec)",
        ]);
        for (sub, inst) in insts {
            let cyc = |op: Op| {
                inst.op(op)
                    .and_then(|o| o.cycles())
                    .map(fmt::cycles)
                    .unwrap_or_else(|| DASH.into())
            };
            let speed = speedups
                .iter()
                .find(|s| s.inst == inst.id)
                .map(|s| s.ratio.map(times).join(" / "))
                .unwrap_or_else(|| DASH.into());
            t.row(vec![
                link(sub, &format!("{sub}.md")),
                code(&inst.id),
                cyc(Op::Keygen),
                cyc(Op::Enc),
                cyc(Op::Dec),
                match (inst.pk, inst.ct) {
                    (Some(pk), Some(ct)) => (pk + ct).to_string(),
                    _ => DASH.into(),
                },
                speed,
            ]);
        }
        doc.table(t);
    }
    let slow = slower_than_clean(&speedups);
    if !slow.is_empty() {
        doc.p("Optimized implementations slower than their clean ones:");
        doc.list(slow);
    }
}
