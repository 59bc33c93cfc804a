//! Section 7: the raw evidence index (records, logs, KAT responses of one submission).

use crate::model::{Op, StepKind};

use crate::report::doc::{code, link, Doc, Table};
use crate::report::format::{self as fmt, DASH};
use crate::report::view::{self, CampaignView, SubmissionView};

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
    if let Some(r) = &sub.source {
        let p = crate::record::record_path(StepKind::Source, &sub.id, None, None);
        t.row(vec![
            DASH.into(),
            format!("source record ({})", r.status.name()),
            file(&p),
        ]);
    }
    for inst in &sub.instances {
        let id = code(&inst.id);
        let rp = |kind: StepKind, op: Option<Op>| {
            crate::record::record_path(kind, &sub.id, Some(&inst.id), op)
        };
        if let Some(r) = &inst.build {
            t.row(vec![
                id.clone(),
                format!("build record ({})", r.status.name()),
                file(&rp(StepKind::Build, None)),
            ]);
            for l in &r.logs {
                t.row(vec![id.clone(), "build log".into(), file(l)]);
            }
        }
        if let Some(r) = &inst.kat {
            t.row(vec![
                id.clone(),
                format!("KAT record ({})", r.status.name()),
                file(&rp(StepKind::Kat, None)),
            ]);
            let data = view::kat_data(r);
            let logs: Vec<&std::path::PathBuf> = r.logs.iter().collect();
            for l in &logs {
                let item = match data {
                    Some(d) if l.extension().is_some_and(|e| e == "log") => {
                        format!("KAT log (sha256 {})", code(&fmt::short_hash(&d.log_sha256)))
                    }
                    _ => "KAT log".to_string(),
                };
                t.row(vec![id.clone(), item, file(l)]);
            }
            if let Some(d) = data {
                for m in &d.modes {
                    if let Some(rsp) = &m.rsp {
                        let item = match &m.actual_sha256 {
                            Some(h) => format!(
                                "KAT {} response (sha256 {})",
                                m.mode.name(),
                                code(&fmt::short_hash(h))
                            ),
                            None => format!("KAT {} response", m.mode.name()),
                        };
                        t.row(vec![id.clone(), item, file(rsp)]);
                    }
                }
            }
        }
        if inst.sizes.is_some() {
            t.row(vec![
                id.clone(),
                "sizes".into(),
                file(&rp(StepKind::Sizes, None)),
            ]);
        }
        if inst.survey.is_some() {
            t.row(vec![
                id.clone(),
                "survey".into(),
                file(&rp(StepKind::Survey, None)),
            ]);
        }
        let mut time: Vec<&Op> = inst
            .time
            .iter()
            .filter(|(_, r)| r.is_some())
            .map(|(o, _)| o)
            .collect();
        time.sort_by_key(|o| o.name());
        for op in time {
            t.row(vec![
                id.clone(),
                format!("timing {op}"),
                file(&rp(StepKind::Time, Some(*op))),
            ]);
        }
        let mut prof: Vec<&Op> = inst
            .profile
            .iter()
            .filter(|(_, r)| r.is_some())
            .map(|(o, _)| o)
            .collect();
        prof.sort_by_key(|o| o.name());
        for op in prof {
            t.row(vec![
                id.clone(),
                format!("hash profile {op}"),
                file(&rp(StepKind::Profile, Some(*op))),
            ]);
        }
    }
    if t.rows.is_empty() {
        doc.p("No records were found for this submission.");
    } else {
        doc.table(t);
    }
}
