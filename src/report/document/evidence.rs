//! Section 7: the raw evidence index (records, logs, KAT responses of one submission): the
//! rows each kind gives for its records ([`crate::run::steps::KindSpec::evidence`]).

use crate::model::{Op, StepKind};
use crate::record::{record_path, StepRecord};
use crate::report::doc::{code, link, Doc, Table};
use crate::report::format::DASH;
use crate::report::view::{CampaignView, SubmissionView};

pub(super) fn evidence(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "7. Raw evidence index");
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
        for (item, f) in kind.describe().evidence(r, None, p) {
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
                for (item, f) in kind.describe().evidence(r, op, p) {
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
