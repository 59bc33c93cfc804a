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

/// Counted instructions for enc + dec of an instance, when both were counted.
fn counted_enc_dec(inst: &ResultInstance) -> Option<f64> {
    let n = |op| {
        inst.op(op)
            .and_then(|o| o.instructions)
            .filter(|n| *n > 0.0)
    };
    Some(n(Op::Enc)? + n(Op::Dec)?)
}

/// The instance with the lowest enc + dec among `insts` (those with both timed), with it.
fn lowest_enc_dec<'a>(insts: &[&'a ResultInstance]) -> Option<(f64, &'a ResultInstance)> {
    insts
        .iter()
        .filter_map(|i| enc_dec(i).map(|c| (c, *i)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
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
    /// When the best implementation is one cell of several (compilers, flag profiles):
    /// every cell of that implementation in this category, by its cell name (`gcc`,
    /// `clang-16@O2`), with its enc + dec cycles and counted instructions.
    pub cells: Vec<(&'a str, Option<f64>, Option<f64>)>,
}

/// The cells of `inst`'s implementation among `insts`, each by the part of its id after
/// the implementation's (`clang-16@O2`); empty when `inst` is not a cell.
fn cells_of<'a>(
    inst: &ResultInstance,
    insts: &[&'a ResultInstance],
) -> Vec<(&'a str, Option<f64>, Option<f64>)> {
    let Some(imp) = &inst.implementation else {
        return Vec::new();
    };
    insts
        .iter()
        .filter(|i| i.implementation.as_ref() == Some(imp))
        .map(|i| {
            let name =
                i.id.strip_prefix(imp.as_str())
                    .and_then(|s| s.strip_prefix('@'))
                    .unwrap_or(&i.id);
            (name, enc_dec(i), counted_enc_dec(i))
        })
        .collect()
}

/// Per implementation built several ways: its best cell (lowest enc + dec) and how many
/// cells it has, keyed by the best cell's id.
pub(super) fn best_cells(insts: &[ResultInstance]) -> BTreeMap<&str, usize> {
    let mut by_imp: BTreeMap<&str, Vec<&ResultInstance>> = BTreeMap::new();
    for i in insts {
        if let Some(imp) = &i.implementation {
            by_imp.entry(imp).or_default().push(i);
        }
    }
    by_imp
        .values()
        .filter_map(|cells| lowest_enc_dec(cells).map(|(_, i)| (i.id.as_str(), cells.len())))
        .collect()
}

/// The best-implementation cell of the category table: the instance, and for a cell the
/// others it was chosen from ("best of 2 cells by enc + dec cycles: `gcc` 61.2 k,
/// `clang-16` 64.0 k"). When `cells="best"` left cells untimed, the choice was made by
/// counted instructions, and the row compares every cell by those, never cycles of one
/// cell against instructions of another.
fn best_cell(r: &SchemeBest<'_>) -> String {
    let id = code(&r.inst.id);
    if r.enc_dec.is_none() {
        return format!("none timed ({id})");
    }
    if r.cells.len() < 2 {
        return id;
    }
    let untimed = r.cells.iter().any(|(_, c, _)| c.is_none());
    let each: Vec<String> = r
        .cells
        .iter()
        .map(|(name, c, counted)| {
            let figure = match (untimed, c, counted) {
                (false, Some(c), _) => fmt::cycles(*c),
                (true, _, Some(n)) => fmt::cycles(*n),
                (true, _, None) => "not counted".into(),
                (false, None, _) => "not timed".into(),
            };
            format!("{} {figure}", code(name))
        })
        .collect();
    if untimed {
        format!(
            "{id} (best of {} cells by enc + dec instructions counted: {}; only the best is \
             timed, `cells=\"best\"`)",
            r.cells.len(),
            each.join(", ")
        )
    } else {
        format!(
            "{id} (best of {} cells by enc + dec cycles: {})",
            r.cells.len(),
            each.join(", ")
        )
    }
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
            let best = lowest_enc_dec(&insts);
            let inst = best.map_or(insts[0], |(_, i)| i);
            out.entry(cat).or_default().push(SchemeBest {
                sub: &sub.id,
                ml_kem: is_ml_kem(&sub.algorithm, &sub.id),
                inst,
                enc_dec: best.map(|(c, _)| c),
                cells: cells_of(inst, &insts),
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
    if groups.values().flatten().any(|r| r.cells.len() > 1) {
        doc.p(
            "Where an implementation is built several ways (compilers, flag profiles), the \
             row gives its best cell by enc + dec and the cells it was chosen from, as eBACS \
             keeps the best compiler line.",
        );
    }
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
            t.row(vec![
                link(r.sub, &format!("{}.md", r.sub)),
                best_cell(&r),
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
                    _ => DASH.into(),
                },
            ]);
        }
        doc.table(t);
        if yard.is_none() {
            doc.p(format!(
                "`vs ML-KEM` has no figure here: {}.",
                if cat == u8::MAX {
                    "these schemes give no category to compare within".to_string()
                } else {
                    format!("no timed ML-KEM instance claims category {cat} in this campaign")
                }
            ));
        }
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

    /// Issue #39 item 3: with an implementation built by two compilers, the category row
    /// and the index pick its cell with the lowest enc + dec and name the cells it was
    /// chosen from.
    #[test]
    fn best_cell_of_a_compiler_matrix_is_named() {
        let mut r = arm_results();
        let sub = &mut r.submissions[0];
        sub.instances.truncate(1);
        let mut slow = sub.instances[0].clone();
        let imp = slow.id.clone();
        for o in &mut slow.ops {
            o.median_cycles = o.median_cycles.map(|c| c * 2.0);
            o.mean_cycles = o.mean_cycles.map(|c| c * 2.0);
        }
        slow.id = format!("{imp}@gcc");
        slow.implementation = Some(imp.clone());
        let mut fast = sub.instances[0].clone();
        fast.id = format!("{imp}@clang-16");
        fast.implementation = Some(imp.clone());
        sub.instances = vec![slow, fast];
        let best = best_cells(&sub.instances);
        assert_eq!(best.len(), 1);
        assert_eq!(best.get(format!("{imp}@clang-16").as_str()), Some(&2));
        let groups = best_per_category(&r);
        let row = &groups[&1][0];
        assert_eq!(row.inst.id, format!("{imp}@clang-16"));
        let names: Vec<&str> = row.cells.iter().map(|c| c.0).collect();
        assert_eq!(names, ["gcc", "clang-16"]);
        let text = best_cell(row);
        assert!(
            text.starts_with(&format!(
                "`{imp}@clang-16` (best of 2 cells by enc + dec cycles: `gcc` "
            )),
            "{text}"
        );
        assert!(text.contains(", `clang-16` "), "{text}");

        // Issue #39 item 4: with `cells="best"` the gcc cell was left untimed for its
        // counted instructions: the row compares both cells by those, not one cell's
        // cycles with the other's instructions.
        let gcc = &mut r.submissions[0].instances[0];
        for o in &mut gcc.ops {
            o.median_cycles = None;
            o.mean_cycles = None;
            o.instructions = Some(150_000.0);
        }
        for o in &mut r.submissions[0].instances[1].ops {
            o.instructions = Some(100_000.0);
        }
        let groups = best_per_category(&r);
        let text = best_cell(&groups[&1][0]);
        assert_eq!(
            text,
            format!(
                "`{imp}@clang-16` (best of 2 cells by enc + dec instructions counted: `gcc` \
                 300.0 k, `clang-16` 200.0 k; only the best is timed, `cells=\"best\"`)"
            )
        );
    }
}
