//! The index's status block: what failed, timed out, was unsupported (with the reason and
//! the instances), which KAT modes had no expected hash (NOKAT: not checked, no failure),
//! which timings did not earn their precision (flagged: most rounds interfered, too few in
//! the host's uncontended state) and which missed their target (with the precision
//! reached), the operations whose figures contradict each other (`report::integrity`: not
//! trusted at all), and the cross-check warnings of the profile and count steps. "Nothing failed"
//! is said only when every one of these lists is empty, and claims only the checks whose
//! records it read. The timing lists show their [`WORST`] worst cases only, so that the
//! results table stays on a reader's first screen; [`precision_in_full`] lists every one at
//! the end of the index.

use std::collections::BTreeMap;

use crate::model::{Op, StepKind};
use crate::record::{KatStatus, Status, StepRecord};

use super::status_text;
use crate::report::doc::{code, Doc};
use crate::report::view::{self, CampaignView, InstanceView};

/// Timings shown in the status block per list; the rest are counted and listed in full at
/// the end of the index.
pub const WORST: usize = 3;

/// How far a timing is from its precision target, when it missed it or did not earn it.
pub(crate) struct Miss {
    pub inst: String,
    pub op: Op,
    /// "±1.7% (target ±1%)" or "CV 4.3% (above 2%)", with the flags' reasons first.
    pub what: String,
    /// Flagged (the figure does not earn its precision), not only wider than the target.
    pub flagged: bool,
    /// For ordering, worst first: the relative half width (or CV).
    pub how_far: f64,
}

/// "±1.7%": a CI's half width relative to its median, as a percentage.
pub(crate) fn plus_minus(half: f64) -> String {
    let pct = half * 100.0;
    if pct < 10.0 {
        format!("±{pct:.1}%")
    } else {
        format!("±{pct:.0}%")
    }
}

/// "±1.7%" of a timing in rounds (its 95% CI's half width); "CV 4.3%" of a block of trials
/// ("(CV 4.3%)") whose CV is above the 2% rule; `None` for a block of trials within it.
pub(crate) fn precision_cell(o: &crate::report::results::ResultOp) -> Option<String> {
    match (o.median_cycles, o.ci_low_cycles, o.ci_high_cycles) {
        (Some(m), Some(lo), Some(hi)) if m > 0.0 => Some(plus_minus((hi - lo) / 2.0 / m)),
        _ => (o.unstable == Some(true))
            .then(|| o.cv.map(|cv| format!("(CV {:.1}%)", cv * 100.0)))
            .flatten(),
    }
}

/// Every timing of an instance that missed its precision target.
fn misses(inst: &InstanceView) -> Vec<Miss> {
    inst.ops(StepKind::Time)
        .filter(|&(op, _)| inst.untrusted(op).is_none())
        .filter_map(|(op, _)| {
            let t = inst.time_ok(op)?;
            let (what, flagged, how_far) = match &t.rounds {
                Some(r) if !r.flags.is_empty() => (
                    format!(
                        "{}; {} claimed, not earned",
                        r.flags.join("; "),
                        plus_minus(r.estimate.rel_half_width())
                    ),
                    true,
                    r.estimate.rel_half_width(),
                ),
                Some(r) if !r.reached => (
                    format!(
                        "{} (target {})",
                        plus_minus(r.estimate.rel_half_width()),
                        plus_minus(r.precision)
                    ),
                    false,
                    r.estimate.rel_half_width(),
                ),
                None if t.summary.unstable => (
                    format!(
                        "CV {:.1}% over {} trials (above 2%)",
                        t.summary.cv * 100.0,
                        t.summary.trials
                    ),
                    false,
                    t.summary.cv,
                ),
                _ => return None,
            };
            Some(Miss {
                inst: inst.id.clone(),
                op,
                what,
                flagged,
                how_far,
            })
        })
        .collect()
}

/// The lists of the status block, each `(id, why)`.
#[derive(Default)]
struct Lists {
    failed: BTreeMap<String, String>,
    timed_out: BTreeMap<String, String>,
    /// (scope, reason) -> step ids: a scope is an instance (`sub/inst`) or a step id.
    unsupported: BTreeMap<(String, String), Vec<String>>,
    nokat: Vec<String>,
    /// (how far, text) of timings wider than their target, and of flagged ones.
    misses: Vec<(f64, String)>,
    flagged: Vec<(f64, String)>,
    /// Operations whose figures contradict each other (`report::integrity`).
    untrusted: Vec<String>,
    warnings: Vec<String>,
    skipped: usize,
    /// Measurements left to another cell of the implementation (`cells="best"`).
    other_cells: usize,
    /// The kinds of the records read: "nothing failed" claims only what ran.
    ran: Vec<StepKind>,
}

fn collect(view: &CampaignView) -> Lists {
    let mut s = Lists::default();
    for sub in &view.submissions {
        let mut recs: Vec<&StepRecord> = sub.record(StepKind::Source).into_iter().collect();
        for inst in &sub.instances {
            recs.extend(inst.records());
            for (op, _) in inst.ops(StepKind::Time) {
                if let Some(u) = inst.untrusted(op) {
                    s.untrusted.push(format!(
                        "{} {}: {}; its time, instruction count and constant-time verdict \
                         are not trusted",
                        code(&inst.id),
                        op.name(),
                        u.reason()
                    ));
                }
            }
            for m in misses(inst) {
                let line = (
                    m.how_far,
                    format!("{} {}: {}", code(&m.inst), m.op.name(), m.what),
                );
                if m.flagged {
                    s.flagged.push(line);
                } else {
                    s.misses.push(line);
                }
            }
        }
        for r in recs {
            note(&mut s, r);
        }
    }
    for l in [&mut s.misses, &mut s.flagged] {
        l.sort_by(|a, b| b.0.total_cmp(&a.0));
    }
    // steps of campaign.json without a record here (e.g. a source that failed)
    if let Some(c) = &view.campaign {
        let known = |s: &Lists, id: &str| {
            let prefix = format!("{id} (");
            s.failed
                .keys()
                .chain(s.timed_out.keys())
                .any(|k| k == id || k.starts_with(&prefix))
                || s.unsupported.values().flatten().any(|k| k == id)
        };
        for st in &c.steps {
            if known(&s, &st.id) {
                continue;
            }
            let why = st.reason.clone().unwrap_or_default();
            match st.status {
                Status::Failed => {
                    s.failed.insert(st.id.clone(), format!("failed: {why}"));
                }
                Status::TimedOut => {
                    s.timed_out.insert(st.id.clone(), why);
                }
                Status::Unsupported => {
                    let scope = st.id.rsplit_once('/').map_or(st.id.as_str(), |(a, _)| a);
                    s.unsupported
                        .entry((scope.to_string(), why))
                        .or_default()
                        .push(st.id.clone());
                }
                _ => {}
            }
        }
    }
    s
}

/// Sort one record into the lists.
fn note(s: &mut Lists, r: &StepRecord) {
    if !s.ran.contains(&r.kind) {
        s.ran.push(r.kind);
    }
    if let Some(d) = view::kat_data(r) {
        // a KAT with results: a line per mode; NOKAT (no expected hash) is "not checked"
        let passed: Vec<&str> = d
            .modes
            .iter()
            .filter(|m| m.status == KatStatus::Pass)
            .map(|m| m.mode.name())
            .collect();
        for m in &d.modes {
            let why = m
                .reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            match m.status {
                KatStatus::Pass => {}
                KatStatus::Nokat => s.nokat.push(format!(
                    "{} ({}): no expected hash{}{}",
                    code(&r.id),
                    m.mode.name(),
                    why,
                    if passed.is_empty() {
                        String::new()
                    } else {
                        format!("; {} passed", passed.join(", "))
                    }
                )),
                st => {
                    s.failed.insert(
                        format!("{} ({})", r.id, m.mode.name()),
                        format!("KAT {}{why}", st.name()),
                    );
                }
            }
        }
        return;
    }
    match r.status {
        Status::Failed => {
            s.failed.insert(r.id.clone(), status_text(r));
        }
        Status::TimedOut => {
            s.timed_out
                .insert(r.id.clone(), r.reason.clone().unwrap_or_default());
        }
        Status::Unsupported => {
            let scope = match &r.instance {
                Some(i) => format!("{}/{i}", r.submission),
                None => r.id.clone(),
            };
            s.unsupported
                .entry((scope, r.reason.clone().unwrap_or_default()))
                .or_default()
                .push(r.id.clone());
        }
        Status::Skipped
            if r.reason
                .as_deref()
                .is_some_and(|w| w.starts_with(crate::model::NOT_BEST_CELL)) =>
        {
            s.other_cells += 1
        }
        Status::Skipped => s.skipped += 1,
        // a step that succeeded with a warning: the cross-checks of profile and count
        Status::Ok if matches!(r.kind, StepKind::Profile | StepKind::Count) => {
            if let Some(why) = &r.reason {
                s.warnings.push(format!("{}: {why}", code(&r.id)));
            }
        }
        Status::Ok => {}
    }
}

/// The measurements `cells="best"` left to a better cell: not failures, said apart.
fn left_to_best_cell(doc: &mut Doc, n: usize) {
    if n > 0 {
        doc.p(format!(
            "{} left to a better cell of the same implementation (`cells=\"best\"`: only \
             the cell with the fewest counted instructions for enc + dec is measured).",
            plural(n, "measurement was", "measurements were")
        ));
    }
}

/// "Nothing failed: ..." claiming only what the records show ran (`ran`: their kinds), and
/// naming the checks of which no record was read.
fn nothing_failed(ran: &[StepKind]) -> String {
    let checks = [
        (
            &[StepKind::Kat][..],
            "every KAT mode was checked and passed",
            "KAT",
        ),
        (
            &[StepKind::Time][..],
            "every timing reached its precision target",
            "timing",
        ),
        (
            &[StepKind::Profile, StepKind::Count][..],
            "no cross-check warned",
            "profile or count",
        ),
    ];
    let mut said = vec!["every step succeeded"];
    let mut absent = Vec::new();
    for (kinds, claim, name) in checks {
        if kinds.iter().any(|k| ran.contains(k)) {
            said.push(claim);
        } else {
            absent.push(name);
        }
    }
    let mut text = format!("Nothing failed: {}", said.join(", "));
    if let Some(pos) = text.rfind(", ") {
        if said.len() > 1 {
            text.replace_range(pos..pos + 2, " and ");
        }
    }
    text.push('.');
    if !absent.is_empty() {
        text.push_str(&format!(
            " No {} step has a record here (not declared, not selected or not run yet).",
            absent.join(", no ")
        ));
    }
    text
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The status block of the index (see the module doc).
pub fn status(doc: &mut Doc, view: &CampaignView) {
    let s = collect(view);
    doc.h(2, "Status");
    let unsupported_steps: usize = s.unsupported.values().map(Vec::len).sum();
    let clean = s.failed.is_empty()
        && s.timed_out.is_empty()
        && s.unsupported.is_empty()
        && s.nokat.is_empty()
        && s.misses.is_empty()
        && s.flagged.is_empty()
        && s.untrusted.is_empty()
        && s.warnings.is_empty()
        && s.skipped == 0;
    left_to_best_cell(doc, s.other_cells);
    if clean {
        doc.p(nothing_failed(&s.ran));
        return;
    }
    doc.p(format!("{}.", summary(&s, unsupported_steps).join("; ")));
    lists(doc, s, unsupported_steps);
}

/// The status block's first sentence, in parts: how many steps failed, timed out, were
/// unsupported or skipped, and how many KAT modes, figures and timings need a word.
fn summary(s: &Lists, unsupported_steps: usize) -> Vec<String> {
    let counts = [
        (s.failed.len(), "failed"),
        (s.timed_out.len(), "timed out"),
        (unsupported_steps, "unsupported"),
        (s.skipped, "skipped"),
    ];
    let mut said: Vec<String> = counts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{} {what}", plural(*n, "step", "steps")))
        .collect();
    if !s.nokat.is_empty() {
        said.push(format!(
            "{} not checked (no expected hash, NOKAT)",
            plural(s.nokat.len(), "KAT mode", "KAT modes")
        ));
    }
    if !s.untrusted.is_empty() {
        said.push(format!(
            "{} not trusted (time, count and ct contradict each other)",
            plural(
                s.untrusted.len(),
                "operation's figures",
                "operations' figures"
            )
        ));
    }
    if !s.flagged.is_empty() {
        said.push(format!(
            "{} not trusted to {} precision",
            plural(s.flagged.len(), "timing", "timings"),
            if s.flagged.len() == 1 { "its" } else { "their" }
        ));
    }
    if !s.misses.is_empty() {
        said.push(format!(
            "{} missed the precision target",
            plural(s.misses.len(), "timing", "timings")
        ));
    }
    if !s.warnings.is_empty() {
        said.push(plural(
            s.warnings.len(),
            "cross-check warning",
            "cross-check warnings",
        ));
    }
    said
}

/// The status block's lists, one per kind of problem, after its first sentence.
fn lists(doc: &mut Doc, s: Lists, unsupported_steps: usize) {
    let list = |doc: &mut Doc, title: String, items: Vec<String>| {
        if !items.is_empty() {
            doc.h(3, title);
            doc.list(items);
        }
    };
    list(
        doc,
        format!("Failed ({})", s.failed.len()),
        s.failed
            .into_iter()
            .map(|(id, why)| format!("{}: {why}", code(&id)))
            .collect(),
    );
    list(
        doc,
        format!("Timed out ({})", s.timed_out.len()),
        s.timed_out
            .into_iter()
            .map(|(id, why)| format!("{}: {why}", code(&id)))
            .collect(),
    );
    list(
        doc,
        format!("Unsupported ({unsupported_steps} steps)"),
        s.unsupported
            .into_iter()
            .map(|((scope, why), ids)| {
                let why = if why.is_empty() {
                    "no reason recorded".to_string()
                } else {
                    why
                };
                if ids.len() == 1 && ids[0] == scope {
                    format!("{}: {why}", code(&scope))
                } else {
                    format!(
                        "{}: {why} ({})",
                        code(&scope),
                        plural(ids.len(), "step", "steps")
                    )
                }
            })
            .collect(),
    );
    list(
        doc,
        format!("KAT not checked: no expected hash ({})", s.nokat.len()),
        s.nokat,
    );
    list(
        doc,
        format!(
            "Figures that contradict each other: not trusted ({})",
            s.untrusted.len()
        ),
        s.untrusted,
    );
    worst(
        doc,
        format!(
            "Timings not trusted to their precision ({})",
            s.flagged.len()
        ),
        &s.flagged,
    );
    worst(
        doc,
        format!("Precision target missed ({})", s.misses.len()),
        &s.misses,
    );
    list(
        doc,
        format!("Cross-check warnings ({})", s.warnings.len()),
        s.warnings,
    );
    if s.skipped > 0 {
        doc.p(format!(
            "{} skipped because a step {} depended on did not succeed.",
            plural(s.skipped, "step was", "steps were"),
            if s.skipped == 1 { "it" } else { "they" }
        ));
    }
}

/// A timing list of the status block: its [`WORST`] worst cases, and how many more there
/// are (listed by [`precision_in_full`]).
fn worst(doc: &mut Doc, title: String, items: &[(f64, String)]) {
    if items.is_empty() {
        return;
    }
    doc.h(3, title);
    let mut shown: Vec<String> = items.iter().take(WORST).map(|(_, t)| t.clone()).collect();
    if items.len() > WORST {
        shown.push(format!(
            "and {} more, listed under \"Timing precision in full\" at the end of this page",
            items.len() - WORST
        ));
    }
    doc.list(shown);
}

/// Every timing that did not earn or missed its precision, at the end of the index (the
/// status block shows the worst only); nothing when every timing earned it.
pub fn precision_in_full(doc: &mut Doc, view: &CampaignView) {
    let s = collect(view);
    if s.flagged.len() + s.misses.len() <= WORST {
        return;
    }
    doc.h(2, "Timing precision in full");
    doc.p(
        "Every timing that was not trusted to its precision (its figure rests on rounds that \
         were mostly interfered, or on too few rounds in the host's uncontended state; see \
         docs/figures.md) or whose 95% CI stayed wider than the target, widest first.",
    );
    for (title, items) in [
        ("Not trusted to their precision", &s.flagged),
        ("Wider than the target", &s.misses),
    ] {
        if !items.is_empty() {
            doc.h(3, format!("{title} ({})", items.len()));
            doc.list(items.iter().map(|(_, t)| t.clone()).collect());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_failed_claims_only_what_ran() {
        let all = [
            StepKind::Build,
            StepKind::Kat,
            StepKind::Time,
            StepKind::Count,
        ];
        assert_eq!(
            nothing_failed(&all),
            "Nothing failed: every step succeeded, every KAT mode was checked and passed, \
             every timing reached its precision target and no cross-check warned."
        );
        // A run of the KATs alone claims nothing about timings.
        assert_eq!(
            nothing_failed(&[StepKind::Build, StepKind::Kat]),
            "Nothing failed: every step succeeded and every KAT mode was checked and passed. \
             No timing, no profile or count step has a record here (not declared, not \
             selected or not run yet)."
        );
        assert_eq!(
            nothing_failed(&[StepKind::Source]),
            "Nothing failed: every step succeeded. No KAT, no timing, no profile or count \
             step has a record here (not declared, not selected or not run yet)."
        );
    }
}
