//! The symmetric-primitives section: survey verdict and evidence, hash/DRNG shares.

use std::collections::BTreeMap;

use crate::model::StepKind;
use crate::record::{ProfileData, SurveyData};

use super::{did_not_run, hash_only, listed, status_text};
use crate::report::doc::{code, Doc, Table};
use crate::report::format::{self as fmt, DASH};
use crate::report::results;
use crate::report::view::{self, CampaignView, InstanceView, SubmissionView};

const MAX_EVIDENCE: usize = 8;

/// The body's section: the survey's verdict, then the hash/DRNG shares of each operation.
pub(super) fn primitives(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "Symmetric primitives");
    survey_verdicts(doc, view, sub);
    profile_shares(doc, view, sub);
}

/// The survey's verdict: one line when every listed instance has the same, else a table.
fn survey_verdicts(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    let surveys: Vec<(&InstanceView, &crate::record::SurveyData)> = sub
        .instances
        .iter()
        .filter_map(|i| {
            i.record(StepKind::Survey)
                .and_then(view::survey_data)
                .map(|s| (i, s))
        })
        .collect();
    let any_survey = sub
        .instances
        .iter()
        .any(|i| i.record(StepKind::Survey).is_some());
    if let Some(line) = did_not_run(view, StepKind::Survey, any_survey, "no survey verdict") {
        doc.p(line);
    } else if surveys.is_empty() {
        doc.p("The survey produced no verdict:");
        doc.list(
            sub.instances
                .iter()
                .filter_map(|i| i.record(StepKind::Survey).map(|r| (i, r)))
                .map(|(i, r)| format!("{}: {}", code(&i.id), status_text(r)))
                .collect(),
        );
    } else {
        let first = surveys[0].1;
        let uniform = surveys
            .iter()
            .all(|(_, s)| s.verdict == first.verdict && s.summary == first.summary)
            && surveys.len() == listed(sub).count();
        if uniform {
            doc.p(format!(
                "Survey verdict: {} — {}",
                first.verdict.name(),
                summary_text(first)
            ));
        } else {
            survey_table(doc, sub);
        }
    }
}

/// The survey verdict and summary of each listed instance.
fn survey_table(doc: &mut Doc, sub: &SubmissionView) {
    let mut t = Table::new(&["instance", "survey verdict", "summary"]);
    for inst in listed(sub) {
        match inst.record(StepKind::Survey) {
            Some(r) => match view::survey_data(r) {
                Some(s) => t.row(vec![
                    code(&inst.id),
                    s.verdict.name().into(),
                    summary_text(s),
                ]),
                None => t.row(vec![code(&inst.id), DASH.into(), status_text(r)]),
            },
            None => t.row(vec![code(&inst.id), DASH.into(), "did not run".into()]),
        }
    }
    doc.table(t);
}

/// The shares of each operation spent in the provided hash/XOF and cipher functions and in
/// the DRNG, and the instances not profiled.
fn profile_shares(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    let any_profile = sub
        .instances
        .iter()
        .any(|i| i.ops(StepKind::Profile).any(|(_, r)| r.is_some()));
    if let Some(line) = did_not_run(view, StepKind::Profile, any_profile, "no hash/DRNG shares") {
        doc.p(line);
        return;
    }
    // Ciphers (AES) are a family of their own, not hash/XOF: a column each.
    let (ciphers, hashes): (Vec<&String>, Vec<&String>) = sub
        .primitive_families
        .iter()
        .partition(|f| results::CIPHER_FAMILIES.contains(&f.as_str()));
    let mut t = shares_table(doc, sub, &ciphers, &hashes);
    let missing = share_rows(&mut t, sub, &ciphers);
    if !t.rows.is_empty() {
        doc.table(t);
    }
    if !missing.is_empty() {
        doc.p("Not profiled:");
        doc.list(missing);
    }
    if let Some(line) = portable_aes(sub) {
        doc.p(line);
    }
}

/// The shares table's head (a column per cipher family), after the paragraph that says
/// what the shares are.
fn shares_table(
    doc: &mut Doc,
    sub: &SubmissionView,
    ciphers: &[&String],
    hashes: &[&String],
) -> Table {
    let hash_head = if hashes.is_empty() {
        "hash/XOF".to_string()
    } else {
        format!(
            "hash/XOF ({})",
            hashes
                .iter()
                .map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join("/")
        )
    };
    let cipher_heads: Vec<String> = ciphers.iter().map(|f| f.to_uppercase()).collect();
    doc.p(format!(
        "Share of each operation spent in the provided {hash_head}{} functions and in the DRNG{} \
         (plain build linked with `--wrap` wrappers, measured in the same campaign):",
        cipher_heads
            .iter()
            .map(|c| format!(", {c}"))
            .collect::<String>(),
        sub.drng_symbol
            .as_deref()
            .map(|d| format!(" ({})", code(d)))
            .unwrap_or_default()
    ));
    let mut head = vec!["instance".to_string(), "operation".to_string(), hash_head];
    head.extend(cipher_heads.iter().cloned());
    head.extend(["DRNG".to_string(), "calls per operation".to_string()]);
    Table {
        head,
        rows: Vec::new(),
    }
}

/// A row per profiled operation of each listed instance; the operations not profiled, by
/// instance and reason.
fn share_rows(t: &mut Table, sub: &SubmissionView, ciphers: &[&String]) -> Vec<String> {
    let mut missing: Vec<(String, String, Vec<&str>)> = Vec::new();
    for inst in listed(sub) {
        for (op, r) in inst.ops(StepKind::Profile) {
            match inst.profile_ok(op) {
                Some(p) => {
                    let share_of = |f: &str| {
                        p.family_shares
                            .iter()
                            .find(|(x, _)| x == f)
                            .map_or(0.0, |(_, s)| *s)
                    };
                    let cipher: Vec<f64> = ciphers.iter().map(|f| share_of(f)).collect();
                    let mut row = vec![
                        code(&inst.id),
                        op.name().into(),
                        fmt::share(hash_only(p.hash_share, &cipher)),
                    ];
                    row.extend(cipher.iter().map(|x| fmt::share(*x)));
                    row.extend([fmt::share(p.drng_share), calls_by_family(p)]);
                    t.row(row);
                }
                None => {
                    let why = r
                        .map(status_text)
                        .unwrap_or_else(|| "did not run (no record)".into());
                    match missing
                        .iter_mut()
                        .find(|(i, w, _)| *i == inst.id && *w == why)
                    {
                        Some((_, _, ops)) => ops.push(op.name()),
                        None => missing.push((inst.id.clone(), why, vec![op.name()])),
                    }
                }
            }
        }
    }
    missing
        .into_iter()
        .map(|(i, why, ops)| format!("{} {}: {why}", code(&i), ops.join(", ")))
        .collect()
}

/// The appendix part: the survey's evidence, line by line, and callgrind's instruction
/// shares beside the time shares.
pub(super) fn primitives_detail(doc: &mut Doc, sub: &SubmissionView) {
    doc.h(
        2,
        "Symmetric primitives: survey evidence and instruction shares",
    );
    let surveys: Vec<(&InstanceView, &SurveyData)> = listed(sub)
        .filter_map(|i| {
            i.record(StepKind::Survey)
                .and_then(view::survey_data)
                .map(|s| (i, s))
        })
        .collect();
    let mut items = Vec::new();
    for (inst, s) in &surveys {
        for o in &s.own_symbols {
            items.push(format!(
                "{}: own {} symbol {} ({})",
                code(&inst.id),
                o.family,
                code(&o.name),
                if o.referenced {
                    "referenced in the object"
                } else {
                    "not referenced"
                }
            ));
        }
        let reachable: Vec<_> = s.source_hits.iter().filter(|h| h.reachable).collect();
        for h in reachable.iter().take(MAX_EVIDENCE) {
            let mut line = format!(
                "{}: {} {}:{} {}",
                code(&inst.id),
                h.family,
                code(&h.file),
                h.line,
                code(h.text.trim())
            );
            if let Some(n) = &h.note {
                line.push_str(&format!(" — {n}"));
            }
            items.push(line);
        }
        if reachable.len() > MAX_EVIDENCE {
            items.push(format!(
                "{}: … and {} more reachable source hits (see the survey record)",
                code(&inst.id),
                reachable.len() - MAX_EVIDENCE
            ));
        }
        let unreachable = s.source_hits.len() - reachable.len();
        if unreachable > 0 {
            items.push(format!(
                "{}: {unreachable} source hit{} not reachable in the built object",
                code(&inst.id),
                if unreachable == 1 { "" } else { "s" }
            ));
        }
        if !s.provided_used.is_empty() {
            items.push(referenced_and_called(inst, s));
        }
    }
    if !items.is_empty() {
        doc.p("Survey evidence:");
        doc.list(items);
    }
    if surveys.is_empty() {
        doc.p("No survey record.");
    }
    super::counts::shares_table(doc, sub);
}

/// The survey summary without the verdict it starts with ("provided-only: ...").
fn summary_text(s: &SurveyData) -> String {
    let v = s.verdict.name();
    [format!("{v}: "), format!("{v} — ")]
        .iter()
        .find_map(|p| s.summary.strip_prefix(p.as_str()))
        .unwrap_or(&s.summary)
        .to_string()
}

/// Provided primitives the object references (survey) against those the profiled
/// operations called (profile): a referenced function may be called by nothing.
fn referenced_and_called(inst: &InstanceView, s: &SurveyData) -> String {
    let mut line = format!(
        "{}: provided primitives referenced by the object: {}",
        code(&inst.id),
        s.provided_used.join(", ")
    );
    let profiles: Vec<&ProfileData> = inst
        .ops(StepKind::Profile)
        .filter_map(|(op, _)| inst.profile_ok(op))
        .collect();
    if profiles.is_empty() {
        return line;
    }
    let called = |sym: &str| {
        profiles
            .iter()
            .any(|p| p.calls_per_op.iter().any(|(c, n)| c == sym && *n > 0.0))
    };
    let (used, unused): (Vec<&str>, Vec<&str>) = s
        .provided_used
        .iter()
        .map(String::as_str)
        .partition(|sym| called(sym));
    let ops: Vec<&str> = inst
        .ops(StepKind::Profile)
        .filter(|(op, _)| inst.profile_ok(*op).is_some())
        .map(|(op, _)| op.name())
        .collect();
    line.push_str(&format!(
        "; called by {}: {}",
        ops.join("/"),
        if used.is_empty() {
            "none".to_string()
        } else {
            used.join(", ")
        }
    ));
    if !unused.is_empty() {
        line.push_str(&format!(
            "; referenced but never called: {}",
            unused.join(", ")
        ));
    }
    line
}

/// Calls per operation grouped by family, as the seed reports do ("drng 1, keccak 15
/// (shake128_absorb 4, shake256 4, ...)"): families by name, functions by name within.
fn calls_by_family(p: &ProfileData) -> String {
    let family_of = |sym: &str| {
        p.output
            .symbols
            .iter()
            .find(|s| s.symbol == sym)
            .map(|s| s.family.clone())
            .unwrap_or_else(|| "other".to_string())
    };
    let mut fams: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
    for (name, n) in results::calls_named(p) {
        let fam = if name == "drng" {
            "drng".to_string()
        } else {
            family_of(&name)
        };
        fams.entry(fam).or_default().push((name, n));
    }
    if fams.is_empty() {
        return DASH.to_string();
    }
    fams.into_iter()
        .map(|(fam, mut calls)| {
            let total: f64 = calls.iter().map(|(_, n)| n).sum();
            if fam == "drng" {
                return format!("drng {}", fmt::calls(total));
            }
            calls.sort_by(|a, b| a.0.cmp(&b.0));
            let detail: Vec<String> = calls
                .iter()
                .map(|(f, n)| format!("{f} {}", fmt::calls(*n)))
                .collect();
            format!("{fam} {} ({})", fmt::calls(total), detail.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A note when profiled operations call the `aes` family and the provided primitives
/// compile PQClean's `common/aes.c`: the portable constant-time C AES (from BearSSL), which
/// uses no AES-NI instruction (its source has no intrinsics, whatever `-march` says).
fn portable_aes(sub: &SubmissionView) -> Option<String> {
    if !sub
        .primitive_sources
        .iter()
        .any(|s| s == "common/aes.c" || s.ends_with("/common/aes.c"))
    {
        return None;
    }
    let users: Vec<String> = sub
        .instances
        .iter()
        .filter(|i| {
            i.ops(StepKind::Profile).any(|(op, _)| {
                i.profile_ok(op).is_some_and(|p| {
                    p.family_shares
                        .iter()
                        .any(|(f, share)| f == "aes" && *share > 0.0)
                })
            })
        })
        .map(|i| code(&i.id))
        .collect();
    if users.is_empty() {
        return None;
    }
    Some(format!(
        "AES in {} is PQClean's portable constant-time C implementation ({}, from BearSSL): \
         it uses no AES-NI instructions, so AES-based instances run slower here than they \
         would with hardware AES.",
        users.join(", "),
        code("common/aes.c")
    ))
}
