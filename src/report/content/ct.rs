//! The constant-time section: per instance and operation the verdict of the `ct` step,
//! every location it found (benign ones labelled with the manifest's reason), and one line
//! on the method and its limits. Present only when the pipeline declares a `ct` step.

use crate::model::StepKind;
use crate::record::ct::CtData;
use crate::record::{Status, StepData, StepRecord};

use super::{did_not_run, listed};
use crate::report::doc::{code, Doc, Table};
use crate::report::results::ct_verdict as verdict_of;
use crate::report::view::{CampaignView, SubmissionView};

/// The method in one line (shown under the heading).
pub const METHOD: &str = "Method (TIMECOP): each operation runs under valgrind's memcheck on \
an object built with the build's flags plus `-g` (AVX-512 excluded), with the secret data \
marked undefined through memcheck's client requests (the random bytes of keygen and enc, the \
secret key before dec; pk, ct and ss declassified when the call returns); every conditional \
jump or memory index that depends on them is a finding. Limits: only the paths executed with \
these inputs are seen, what is checked is the compiler's output at these flags, and a location \
the manifest declares benign (rejection sampling on a public seed, say) is labelled, not \
hidden.";

fn ct_data(r: &StepRecord) -> Option<&CtData> {
    match &r.data {
        Some(StepData::Ct(d)) if r.status == Status::Ok => Some(d),
        _ => None,
    }
}

/// The body's constant-time section: one verdict per instance and operation (the
/// locations are in the appendix, [`locations`]).
pub(super) fn constant_time(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    if !view.declared.contains(&StepKind::Ct) {
        return;
    }
    doc.h(2, "Constant-time check");
    doc.p(METHOD);
    let any = sub
        .instances
        .iter()
        .any(|i| i.ops(StepKind::Ct).any(|(_, r)| r.is_some()));
    if let Some(line) = did_not_run(view, StepKind::Ct, any, "no constant-time verdict") {
        doc.p(line);
        return;
    }
    let mut verdicts = Table::new(&["instance", "operation", "verdict"]);
    for inst in listed(sub) {
        for (op, r) in inst.ops(StepKind::Ct) {
            verdicts.row(vec![code(&inst.id), op.name().to_string(), verdict_of(r)]);
        }
    }
    doc.table(verdicts);
}

/// The appendix part: every location the `ct` step found, benign ones labelled.
pub(super) fn locations(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    if !view.declared.contains(&StepKind::Ct) {
        return;
    }
    doc.h(2, "Constant-time locations");
    let mut places = Table::new(&[
        "instance",
        "operation",
        "function",
        "location",
        "kind",
        "count",
        "declared benign",
    ]);
    for inst in listed(sub) {
        for (op, r) in inst.ops(StepKind::Ct) {
            let Some(d) = r.and_then(ct_data) else {
                continue;
            };
            for f in &d.findings {
                places.row(vec![
                    code(&inst.id),
                    op.name().to_string(),
                    code(&f.function),
                    f.location(),
                    f.kinds.join(", "),
                    format!(
                        "{} ({} stack{})",
                        f.count,
                        f.contexts,
                        if f.contexts == 1 { "" } else { "s" }
                    ),
                    f.benign.clone().unwrap_or_else(|| "no".to_string()),
                ]);
            }
        }
    }
    if places.rows.is_empty() {
        doc.p("No location found in any checked operation.");
    } else {
        doc.p(
            "Locations (the first frame inside the object; count: how many times memcheck saw it):",
        );
        doc.table(places);
    }
}
