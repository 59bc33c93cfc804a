//! Section 7: the raw evidence index (records, logs, KAT responses of one submission): the
//! rows each kind gives for its records ([`rows`]).

use std::path::PathBuf;

use crate::model::{Op, StepKind};
use crate::record::{record_path, StepData, StepRecord};
use crate::report::doc::{code, link, Doc, Table};
use crate::report::format::{short_hash, DASH};
use crate::report::view::{CampaignView, SubmissionView};

use super::listed;

/// Section 7 of the body: per instance its KAT log (with its hash) and its records' folder;
/// the full index, record by record, is in the appendix.
pub(super) fn evidence_summary(
    doc: &mut Doc,
    view: &CampaignView,
    sub: &SubmissionView,
    appendix_href: &str,
) {
    doc.h(2, "7. Raw evidence index");
    doc.p(format!(
        "Paths are relative to the system's output folder ({}); each JSON record holds its \
         commands, environment, inputs hash and raw trials. Every record of this submission \
         (build, KAT, timing, profile, count and check records with their logs) is listed in \
         the {}.",
        code(&format!("{}/", view.out_dir_shown.trim_end_matches('/'))),
        link("appendix's evidence index", &evidence_href(appendix_href))
    ));
    let any = sub.by_kind.iter().any(|(_, r)| r.is_some())
        || sub.instances.iter().any(|i| !i.records().is_empty());
    if !any {
        doc.p("No records were found for this submission.");
        return;
    }
    let file = |s: &str| link(&code(s), &format!("../{s}"));
    let records = format!("records/{}/", sub.id);
    let mut t = Table::new(&["instance", "item", "file"]);
    for inst in listed(sub) {
        let Some(r) = inst.record(StepKind::Kat) else {
            continue;
        };
        for (item, f) in kat_rows(r, PathBuf::new()) {
            if item.starts_with("KAT log") {
                t.row(vec![
                    code(&inst.id),
                    item,
                    file(&f.to_string_lossy().replace('\\', "/")),
                ]);
            }
        }
    }
    t.row(vec![
        DASH.into(),
        "step records (`<instance>__<step or operation>.json`)".into(),
        file(&records),
    ]);
    doc.table(t);
}

/// Where the evidence index starts in the appendix (a fragment of its link).
const APPENDIX_ANCHOR: &str = "#raw-evidence-index";

/// The link to the evidence index: its heading in the appendix file, or the appendix part of
/// the same page (a fragment) as it is.
fn evidence_href(appendix_href: &str) -> String {
    if appendix_href.starts_with('#') {
        appendix_href.to_string()
    } else {
        format!("{appendix_href}{APPENDIX_ANCHOR}")
    }
}

/// The appendix part: every record, log and KAT response of the submission.
pub(super) fn evidence(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "Raw evidence index");
    doc.p(format!(
        "Paths are relative to the system's output folder ({}); each JSON record holds its \
         commands, environment, inputs hash and raw trials.",
        code(&format!("{}/", view.out_dir_shown.trim_end_matches('/')))
    ));
    if let Some(c) = &view.campaign {
        doc.p(format!(
            "Measured with {}; command: {}.",
            c.tool
                .as_deref()
                .unwrap_or("an ngcc-pipe version that did not record itself"),
            code(&c.command.join(" "))
        ));
    }
    let file = |p: &std::path::Path| {
        let s = p.to_string_lossy().replace('\\', "/");
        link(&code(&s), &format!("../{s}"))
    };
    let mut t = Table::new(&["instance", "item", "file"]);
    for (kind, r) in &sub.by_kind {
        let Some(r) = r else { continue };
        let p = record_path(*kind, &sub.id, None, None);
        for (item, f) in rows(*kind, r, None, p) {
            t.row(vec![DASH.into(), item, file(&f)]);
        }
    }
    for inst in &sub.instances {
        let id = code(&inst.id);
        // Kinds in the view's order; the operations of one kind by name.
        let mut kinds: Vec<StepKind> = inst.by_kind.iter().map(|((k, _), _)| *k).collect();
        kinds.dedup();
        for kind in kinds {
            let mut recs: Vec<(Option<Op>, &StepRecord)> = inst
                .by_kind
                .iter()
                .filter(|((k, _), _)| *k == kind)
                .filter_map(|((_, op), r)| r.as_ref().map(|r| (*op, r)))
                .collect();
            recs.sort_by_key(|(op, _)| op.map(Op::name));
            for (op, r) in recs {
                let p = record_path(kind, &sub.id, Some(&inst.id), op);
                for (item, f) in rows(kind, r, op, p) {
                    t.row(vec![id.clone(), item, file(&f)]);
                }
            }
        }
    }
    if t.rows.is_empty() {
        doc.p("No records were found for this submission.");
    } else {
        doc.table(t);
    }
}

/// Rows of the index for one record of `kind` at `path` (relative to the output folder):
/// item text (Markdown) and file.
fn rows(kind: StepKind, rec: &StepRecord, op: Option<Op>, path: PathBuf) -> Vec<(String, PathBuf)> {
    let op_name = op.map_or("", Op::name);
    let status = rec.status.name();
    match kind {
        StepKind::Build => {
            let mut rows = vec![(format!("build record ({status})"), path)];
            rows.extend(
                rec.logs
                    .iter()
                    .map(|l| ("build log".to_string(), l.clone())),
            );
            rows
        }
        StepKind::Kat => kat_rows(rec, path),
        StepKind::Sizes | StepKind::Survey => vec![(kind.name().to_string(), path)],
        StepKind::Time => vec![(format!("timing {op_name}"), path)],
        StepKind::Profile => vec![(format!("hash profile {op_name}"), path)],
        StepKind::Count => vec![(format!("instruction count {op_name} ({status})"), path)],
        StepKind::Ct => {
            let mut rows = vec![(format!("constant-time check {op_name}"), path)];
            if let Some(StepData::Ct(d)) = &rec.data {
                rows.push((format!("memcheck XML {op_name}"), d.raw_log.clone()));
            }
            rows
        }
        StepKind::Source | StepKind::Report | StepKind::Index => {
            vec![(format!("{kind} record ({status})"), path)]
        }
    }
}

/// A KAT record, its logs (the `.log` with its hash) and the responses of each mode.
fn kat_rows(rec: &StepRecord, path: PathBuf) -> Vec<(String, PathBuf)> {
    let mut rows = vec![(format!("KAT record ({})", rec.status.name()), path)];
    let data = match &rec.data {
        Some(StepData::Kat(d)) => Some(d),
        _ => None,
    };
    for l in &rec.logs {
        let item = match data {
            Some(d) if l.extension().is_some_and(|e| e == "log") => {
                format!("KAT log (sha256 {})", code(&short_hash(&d.log_sha256)))
            }
            _ => "KAT log".to_string(),
        };
        rows.push((item, l.clone()));
    }
    for m in data.iter().flat_map(|d| &d.modes) {
        if let Some(rsp) = &m.rsp {
            let item = match &m.actual_sha256 {
                Some(h) => format!(
                    "KAT {} response (sha256 {})",
                    m.mode.name(),
                    code(&short_hash(h))
                ),
                None => format!("KAT {} response", m.mode.name()),
            };
            rows.push((item, rsp.clone()));
        }
    }
    rows
}
