//! Instruction counts (`count` records) in a submission's report: instructions per operation
//! and cycles per instruction under section 4, and the instruction shares beside the time
//! shares (wrappers) in the symmetric-primitives section, flagged where they differ by more
//! than [`MAX_SHARE_GAP`].

use crate::model::StepKind;
use crate::record::CountData;

use super::status_text;
use crate::report::doc::{code, Doc, Table};
use crate::report::format::{self as fmt, DASH};
use crate::report::integrity;
use crate::report::view::SubmissionView;

/// Largest gap between a time share and the instruction share of the same operation, in
/// share points (0.10 = 10 points), not flagged.
pub const MAX_SHARE_GAP: f64 = 0.10;

/// The cycles-per-instruction column: which cycles over which instructions.
pub const CPI_HEAD: &str = "cycles per instruction (median timed cycles ÷ counted instructions)";

/// Instructions grouped in thousands/millions like cycles: "1.58 M".
fn instructions(x: f64) -> String {
    fmt::cycles(x)
}

fn any_count(sub: &SubmissionView) -> bool {
    sub.instances
        .iter()
        .any(|i| i.ops(StepKind::Count).any(|(_, r)| r.is_some()))
}

/// Section 4's instruction table: instructions per operation (mean, min–max over the
/// counted calls) and cycles per instruction.
pub(super) fn instructions_table(doc: &mut Doc, sub: &SubmissionView) {
    if !any_count(sub) {
        return;
    }
    let mut t = Table::new(&[
        "instance",
        "operation",
        "instructions (mean)",
        "min – max",
        "calls",
        CPI_HEAD,
    ]);
    let mut missing = Vec::new();
    let mut flags: Vec<String> = Vec::new();
    let mut excluded: Vec<String> = Vec::new();
    let mut counters: Vec<String> = Vec::new();
    let mut any_mean = false;
    let mut contradicted: Vec<String> = Vec::new();
    for inst in &sub.instances {
        for (op, r) in inst.ops(StepKind::Count) {
            let Some(c) = inst.count_ok(op) else {
                if let Some(r) = r {
                    missing.push(format!(
                        "{} {}: {}",
                        code(&inst.id),
                        op.name(),
                        status_text(r)
                    ));
                }
                continue;
            };
            let f = c.flags.join(" ");
            if !flags.contains(&f) {
                flags.push(f);
            }
            for x in &c.excluded {
                if !excluded.contains(x) {
                    excluded.push(x.clone());
                }
            }
            if let Some(t) = inst.time_ok(op) {
                if !counters.contains(&t.output.counter) {
                    counters.push(t.output.counter.clone());
                }
            }
            let cpi = inst.cycles_per_instruction(op);
            any_mean |= cpi.is_some_and(|(_, median)| !median);
            let untrusted = inst.untrusted(op);
            if let Some(u) = &untrusted {
                contradicted.push(format!("{} {}: {}", code(&inst.id), op.name(), u.reason()));
            }
            let mark = if untrusted.is_some() {
                " ⚠ not trusted"
            } else {
                ""
            };
            t.row(vec![
                code(&inst.id),
                op.name().into(),
                format!("{}{mark}", instructions(c.instructions_mean)),
                if c.instructions_min == c.instructions_max {
                    "same in every call".into()
                } else {
                    format!(
                        "{} – {}",
                        instructions(c.instructions_min as f64),
                        instructions(c.instructions_max as f64)
                    )
                },
                c.per_call.len().to_string(),
                match cpi {
                    Some((x, true)) => format!("{x:.2}{mark}"),
                    Some((x, false)) => format!("{x:.2} (mean){mark}"),
                    None => DASH.into(),
                },
            ]);
        }
    }
    if !t.rows.is_empty() {
        doc.p(
            "Instructions per operation, counted by valgrind's callgrind (deterministic: the \
             same object and seed give the same counts on any machine), only inside the \
             operation's calls; the KAT generator seeded with a fixed seed:",
        );
        doc.table(t);
        let ticks = if counters.is_empty() {
            String::new()
        } else {
            format!(
                " ({} ticks)",
                counters
                    .iter()
                    .map(|c| code(c))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        doc.p(format!(
            "Counted object flags: {}.{} Cycles per instruction = the timed object's median \
             cycles per call over the timing session's rounds{ticks} ÷ the counted object's \
             mean instructions per call{}.",
            flags.iter().map(|f| code(f)).collect::<Vec<_>>().join("; "),
            if excluded.is_empty() {
                " Same code as the timed object (`-g` adds debug information only).".to_string()
            } else {
                format!(
                    " {} turn off instructions valgrind cannot run: the counted code is not \
                     the timed code, and cycles per instruction compare the two.",
                    code(&excluded.join(" "))
                )
            },
            if any_mean {
                "; \"(mean)\" marks an operation timed in one block of trials, whose mean \
                 cycles per call are divided instead"
            } else {
                ""
            }
        ));
    }
    if !contradicted.is_empty() {
        doc.p(format!(
            "⚠ not trusted: cycles per instruction outside the plausible {}–{} (or batches \
             far below single calls): the counted code and the timed code did not do the \
             same work, so neither figure is the submission's:",
            integrity::CPI_LOW,
            integrity::CPI_HIGH
        ));
        doc.list(contradicted);
    }
    if !missing.is_empty() {
        doc.p("Instructions not counted:");
        doc.list(missing);
    }
}

/// The symmetric-primitives table of instruction shares, with the time shares of the
/// `profile` step beside them.
pub(super) fn shares_table(doc: &mut Doc, sub: &SubmissionView) {
    let families = "hash/XOF";
    if !any_count(sub) {
        return;
    }
    let mut t = Table::new(&[
        "instance",
        "operation",
        &format!("{families} (instructions)"),
        "(time)",
        "DRNG (instructions)",
        "(time)",
        "by family (instructions)",
        "calls per operation",
        "flag",
    ]);
    let mut ambiguous = Vec::new();
    for inst in &sub.instances {
        for (op, _) in inst.ops(StepKind::Count) {
            let Some(c) = inst.count_ok(op) else {
                continue;
            };
            let p = inst.profile_ok(op);
            // AES is a family of its own (its share is in `by family`), not hash/XOF.
            let hash = super::hash_only(c.hash_share, &[ciphers(&c.family_shares)]);
            let p_hash = p.map(|p| super::hash_only(p.hash_share, &[ciphers(&p.family_shares)]));
            let gap = |what: &str, instr: f64, time: Option<f64>| {
                time.filter(|t| (t - instr).abs() > MAX_SHARE_GAP).map(|t| {
                    format!(
                        "{what}: time − instructions = {:+.0} points",
                        (t - instr) * 100.0
                    )
                })
            };
            let flag: Vec<String> = [
                gap(families, hash, p_hash),
                gap("DRNG", c.drng_share, p.map(|p| p.drng_share)),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !c.nesting_ambiguous.is_empty() {
                ambiguous.push(format!(
                    "{} {}: {}",
                    code(&inst.id),
                    op.name(),
                    c.nesting_ambiguous.join(", ")
                ));
            }
            t.row(vec![
                code(&inst.id),
                op.name().into(),
                fmt::share(hash),
                p_hash.map(fmt::share).unwrap_or_else(|| DASH.into()),
                fmt::share(c.drng_share),
                p.map(|p| fmt::share(p.drng_share))
                    .unwrap_or_else(|| DASH.into()),
                by_family(c),
                c.calls_per_op
                    .iter()
                    .map(|(s, n)| format!("{s} {}", fmt::calls(*n)))
                    .collect::<Vec<_>>()
                    .join(", "),
                if flag.is_empty() {
                    DASH.into()
                } else {
                    flag.join("; ")
                },
            ]);
        }
    }
    if t.rows.is_empty() {
        return;
    }
    doc.p(format!(
        "Instruction shares (callgrind's inclusive counts on the counted object; a primitive \
         called inside another counts once) beside the time shares of the wrapped profile; \
         a difference above {:.0} points is flagged:",
        MAX_SHARE_GAP * 100.0
    ));
    doc.table(t);
    if !ambiguous.is_empty() {
        doc.p("Shares that are upper bounds (a function called both inside and outside a primitive calls it):");
        doc.list(ambiguous);
    }
}

/// The share of the cipher families (AES) among `family_shares`.
fn ciphers(family_shares: &[(String, f64)]) -> f64 {
    family_shares
        .iter()
        .filter(|(f, _)| crate::report::results::CIPHER_FAMILIES.contains(&f.as_str()))
        .map(|(_, s)| *s)
        .sum()
}

fn by_family(c: &CountData) -> String {
    let mut v: Vec<&(String, f64)> = c
        .family_shares
        .iter()
        .filter(|(f, x)| f != crate::profile::DRNG_FAMILY && *x > 0.0)
        .collect();
    if v.is_empty() {
        return DASH.to_string();
    }
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v.iter()
        .map(|(f, x)| format!("{f} {}", fmt::share(*x)))
        .collect::<Vec<_>>()
        .join(", ")
}
