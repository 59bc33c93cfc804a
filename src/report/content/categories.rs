//! Comparisons a reader asks for: the schemes of one NIST security category side by side,
//! each by its best implementation and against the category's ML-KEM (index), and each
//! optimized implementation against its clean one (index and section 4).

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

/// Headline cycles of an operation in the results (median of rounds, else mean).
fn op_cycles(inst: &ResultInstance, op: Op) -> Option<f64> {
    inst.op(op).and_then(|o| o.cycles()).filter(|c| *c > 0.0)
}

/// enc + dec cycles of an instance, when both were timed.
fn enc_dec(inst: &ResultInstance) -> Option<f64> {
    Some(op_cycles(inst, Op::Enc)? + op_cycles(inst, Op::Dec)?)
}

/// Whether a submission is the category's yardstick (its algorithm is ML-KEM).
fn is_ml_kem(algorithm: &str, id: &str) -> bool {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '_', ' '], "");
    norm(algorithm).starts_with("mlkem") || norm(id) == "mlkem"
}

/// One scheme's row of a category: its best implementation there (lowest enc + dec), or
/// its first instance when none has both timed.
pub(crate) struct SchemeBest<'a> {
    pub sub: &'a str,
    pub ml_kem: bool,
    pub inst: &'a ResultInstance,
    pub enc_dec: Option<f64>,
}

/// Per NIST category (instances without one under `u8::MAX`): one entry per submission
/// with its best implementation, in the results' order.
pub(crate) fn best_per_category(results: &Results) -> BTreeMap<u8, Vec<SchemeBest<'_>>> {
    let mut out: BTreeMap<u8, Vec<SchemeBest<'_>>> = BTreeMap::new();
    for sub in &results.submissions {
        let mut cats: BTreeMap<u8, Vec<&ResultInstance>> = BTreeMap::new();
        for inst in &sub.instances {
            cats.entry(inst.nist_category.unwrap_or(u8::MAX))
                .or_default()
                .push(inst);
        }
        for (cat, insts) in cats {
            let best = insts
                .iter()
                .filter_map(|i| enc_dec(i).map(|c| (c, *i)))
                .min_by(|a, b| a.0.total_cmp(&b.0));
            out.entry(cat).or_default().push(SchemeBest {
                sub: &sub.id,
                ml_kem: is_ml_kem(&sub.algorithm, &sub.id),
                inst: best.map_or(insts[0], |(_, i)| i),
                enc_dec: best.map(|(c, _)| c),
            });
        }
    }
    out
}

/// The index's per-category section: per NIST category one row per scheme with its best
/// implementation on this system and its enc + dec against the category's ML-KEM; then the
/// optimized implementations slower than their clean ones.
pub(super) fn by_category(doc: &mut Doc, view: &CampaignView, results: &Results) {
    let groups = best_per_category(results);
    if groups.is_empty() {
        return;
    }
    doc.h(2, "Across schemes, by NIST security category");
    doc.p(
        "One row per scheme (submission) and NIST security category (as its manifest gives \
         it): its best implementation on this system, the one with the lowest enc + dec \
         cycles (median of rounds, else mean). `vs ML-KEM` is that enc + dec over the \
         category's ML-KEM one (above ×1 slower); pk + ct are the bytes on the wire for one \
         key exchange.",
    );
    for (cat, rows) in groups {
        doc.h(
            3,
            if cat == u8::MAX {
                "No category given".to_string()
            } else {
                format!("NIST category {cat}")
            },
        );
        let yard = rows.iter().find(|r| r.ml_kem).and_then(|r| r.enc_dec);
        let mut t = Table::new(&[
            "scheme",
            "best implementation",
            "keygen cycles",
            "enc cycles",
            "dec cycles",
            "enc + dec cycles",
            "pk + ct bytes",
            "vs ML-KEM",
        ]);
        for r in rows {
            let cyc = |op: Op| {
                op_cycles(r.inst, op)
                    .map(fmt::cycles)
                    .unwrap_or_else(|| DASH.into())
            };
            let timed = r.enc_dec.is_some();
            t.row(vec![
                link(r.sub, &format!("{}.md", r.sub)),
                if timed {
                    code(&r.inst.id)
                } else {
                    format!("none timed ({})", code(&r.inst.id))
                },
                cyc(Op::Keygen),
                cyc(Op::Enc),
                cyc(Op::Dec),
                r.enc_dec.map(fmt::cycles).unwrap_or_else(|| DASH.into()),
                match (r.inst.pk, r.inst.ct) {
                    (Some(pk), Some(ct)) => (pk + ct).to_string(),
                    _ => DASH.into(),
                },
                match (r.enc_dec, yard) {
                    (Some(c), Some(y)) if y > 0.0 => format!("×{:.2}", c / y),
                    _ => String::new(),
                },
            ]);
        }
        doc.table(t);
    }
    let speedups: Vec<Speedup> = view.submissions.iter().flat_map(speedups).collect();
    let slow = slower_than_clean(&speedups);
    if !slow.is_empty() {
        doc.p("Optimized implementations slower than their clean ones:");
        doc.list(slow);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// arm_1's fixture results (three ML-KEM instances, one per category).
    fn arm_results() -> Results {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/records/arm_1/reports/results.json");
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
    }

    /// Issue #27 item 4: the best implementation is the one with the lowest enc + dec;
    /// `vs ML-KEM` divides by the category's ML-KEM; a scheme with no ML-KEM in its
    /// category has no ratio.
    #[test]
    fn best_implementation_per_scheme_and_category() {
        let mut r = arm_results();
        // ML-KEM-768 claimed as category 1: ML-KEM-512 stays the best there
        r.submissions[0].instances[1].nist_category = Some(1);
        let mut other = r.submissions[0].clone();
        other.id = "other".into();
        other.algorithm = "Other KEM".into();
        // only in category 5
        other.instances.retain(|i| i.nist_category == Some(5));
        r.submissions.push(other);
        let groups = best_per_category(&r);
        let one = &groups[&1];
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].inst.id, "ML-KEM-512-clean");
        assert!(one[0].ml_kem);
        let ed = |i: &ResultInstance| {
            i.op(Op::Enc).unwrap().cycles().unwrap() + i.op(Op::Dec).unwrap().cycles().unwrap()
        };
        assert_eq!(one[0].enc_dec, Some(ed(&r.submissions[0].instances[0])));
        let five = &groups[&5];
        assert_eq!(five.len(), 2);
        assert!(!five[1].ml_kem);
        assert!(!groups.contains_key(&3));
        assert!(
            is_ml_kem("ML-KEM", "x") && is_ml_kem("Kyber", "ml-kem") && !is_ml_kem("HQC", "hqc")
        );
    }
}
