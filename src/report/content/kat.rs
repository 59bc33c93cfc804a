//! Section 3: functional testing (KAT results per instance and mode).

use super::*;

pub(super) fn kat_mode_names(sub: &SubmissionView) -> Vec<String> {
    let mut modes: Vec<String> = Vec::new();
    for inst in &sub.instances {
        if let Some(d) = inst.record(StepKind::Kat).and_then(view::kat_data) {
            for m in &d.modes {
                let n = m.mode.name().to_string();
                if !modes.contains(&n) {
                    modes.push(n);
                }
            }
        }
    }
    modes.sort_by_key(|m| if m == "single" { 0 } else { 1 });
    if modes.is_empty() {
        modes.push("single".into());
    }
    modes
}

/// What the KATs were compared with, as recorded: the package's own KAT files, the
/// manifest's hashes, or nothing (every mode NOKAT or failed).
fn compared_sentence(sub: &SubmissionView) -> String {
    let (mut files, mut hashes) = (Vec::new(), 0);
    for inst in &sub.instances {
        let Some(d) = inst.record(StepKind::Kat).and_then(view::kat_data) else {
            continue;
        };
        for m in &d.modes {
            let compared = matches!(m.status, KatStatus::Pass | KatStatus::Mismatch);
            match &m.submitted {
                Some(s) if compared && !files.contains(&s.file) => files.push(s.file.clone()),
                Some(_) => {}
                None if compared && m.expected_sha256.is_some() => hashes += 1,
                None => {}
            }
        }
    }
    let manifest = code(&sub.kat_manifest);
    match (files.is_empty(), hashes) {
        (false, 0) => format!(
            "Each library was checked against the submitted KAT vectors before timing: the \
             package's own `.rsp` files ({} of them, each pinned by its SHA-256 in {manifest}), \
             which the generated file, written in NIST's format, must equal byte for byte.",
            files.len()
        ),
        (false, _) => format!(
            "Each library was checked before timing, against the submitted KAT vectors (the \
             package's own `.rsp` files, pinned by SHA-256 in {manifest}) where the manifest \
             names them, and against the expected SHA-256 in {manifest} elsewhere."
        ),
        (true, 0) => format!(
            "No KAT was compared with an expected answer: {manifest} holds none for the modes \
             that ran (NOKAT), so the results below only show that each library runs and that \
             decapsulation recovers the encapsulated secret."
        ),
        (true, _) => format!(
            "Each library was checked against the submitted KAT vectors (SHA-256 manifest \
             {manifest}) before timing."
        ),
    }
}

pub(super) fn functional_testing(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "3. Functional testing (KAT)");
    let any = sub
        .instances
        .iter()
        .any(|i| i.record(StepKind::Kat).is_some());
    if let Some(line) = did_not_run(view, StepKind::Kat, any, "no KAT was checked") {
        doc.p(line);
        return;
    }
    doc.p(compared_sentence(sub));
    let modes = kat_mode_names(sub);
    let compilers = listed(sub).any(|i| i.compiler().is_some());
    let build_head = if compilers {
        "build (compiler · flags)"
    } else {
        "build flags"
    };
    let mut head = vec!["instance".to_string(), build_head.to_string()];
    if modes.len() == 1 {
        head.push("KAT".into());
    } else {
        head.extend(modes.iter().map(|m| format!("KAT {m}")));
    }
    let mut t = Table {
        head,
        rows: Vec::new(),
    };
    let mut foot = Footnotes::default();
    for inst in listed(sub) {
        let flags = match inst.record(StepKind::Build) {
            Some(r) => match view::build_data(r) {
                Some(b) => b.flags_profile.clone(),
                None => {
                    let f = inst
                        .flags_profile(&view.build_flags)
                        .unwrap_or_else(|| DASH.into());
                    format!(
                        "{f} (build {} {})",
                        r.status.name(),
                        foot.mark(sentence(&status_text(r)))
                    )
                }
            },
            None => inst
                .flags_profile(&view.build_flags)
                .unwrap_or_else(|| DASH.into()),
        };
        let flags = match inst.compiler() {
            Some(c) => format!("{c} · {flags}"),
            None => flags,
        };
        let mut row = vec![code(&inst.id), flags];
        for mode in &modes {
            let cell = match inst.record(StepKind::Kat) {
                None => "did not run".to_string(),
                Some(r) => match view::kat_data(r) {
                    None => format!(
                        "{} {}",
                        r.status.name(),
                        foot.mark(sentence(&status_text(r)))
                    ),
                    Some(d) => match d.modes.iter().find(|m| m.mode.name() == mode) {
                        None => DASH.to_string(),
                        Some(m) if m.status == KatStatus::Pass => "PASS".to_string(),
                        Some(m) => {
                            let mut text = match &m.reason {
                                Some(r) => sentence(r),
                                None => match m.status {
                                    KatStatus::Nokat => {
                                        "No expected hash in the KAT manifest.".to_string()
                                    }
                                    KatStatus::Mismatch => {
                                        "The generated KAT differs from the manifest's hash."
                                            .to_string()
                                    }
                                    _ => "The KAT run failed.".to_string(),
                                },
                            };
                            if let Some(diff) = &m.diff {
                                text.push_str(&format!(
                                    " First difference in count {}, field {}, byte {}.",
                                    diff.count,
                                    code(&diff.field),
                                    diff.offset
                                ));
                            }
                            let status = m.status.name();
                            format!("{status} {}", foot.mark(text))
                        }
                    },
                },
            };
            row.push(cell);
        }
        t.row(row);
    }
    doc.table(t);
    foot.write(doc);
    for n in &sub.meta.notes {
        doc.p(format!("Note: {}", sentence(n)));
    }
    let failed_profile: Vec<String> = sub
        .instances
        .iter()
        .filter(|i| {
            i.record(StepKind::Kat)
                .and_then(view::kat_data)
                .and_then(|d| d.profile_object_kat.as_ref())
                .is_some_and(|p| !p.equal)
        })
        .map(|i| code(&i.id))
        .collect();
    if !failed_profile.is_empty() {
        doc.p(format!(
            "The profile (wrapped) object's KAT differs from the plain object's for {}: \
             its shares below are not trustworthy.",
            failed_profile.join(", ")
        ));
    }
}
