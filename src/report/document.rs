//! The content of the reports, section by section, as format-neutral [`Doc`]s.
//!
//! [`submission_doc`] follows the seed reports (`shared/seeds/`): title, intro, sections
//! 1-6, symmetric primitives, 7 raw evidence index. [`index_doc`] is the campaign index.
//! The index is in [`index`], the symmetric-primitives section in [`primitives`], the
//! raw evidence index in [`evidence`].
//! Links are relative to the folder the rendered file sits in (`reports/` or `site/`, both
//! one level below the system folder); links to other reports end in `.md` and the HTML
//! renderer rewrites them to `.html`.

mod categories;
mod counts;
mod evidence;
mod index;
mod primitives;

pub use index::{failures, index_doc, other_system_table, systems_table, this_system_table};

use std::collections::BTreeMap;

use crate::model::StepKind;
use crate::record::{KatStatus, Status, StepRecord};

use super::doc::{code, link, Doc, Table};
use super::format::{self as fmt, DASH};
use super::results;
use super::view::{self, CampaignView, SubmissionView};

const UNKNOWN: &str = "unknown";

pub(super) fn or_unknown(v: Option<&str>) -> String {
    v.map(str::to_string).unwrap_or_else(|| UNKNOWN.to_string())
}

/// One line saying why a section is empty, or `None` when some record exists.
pub(super) fn did_not_run(
    view: &CampaignView,
    kind: StepKind,
    any: bool,
    what: &str,
) -> Option<String> {
    if any {
        None
    } else if !view.declared.contains(&kind) {
        Some(format!(
            "Not measured: the pipeline has no {} step ({what}).",
            code(kind.name())
        ))
    } else {
        Some(format!(
            "The {} step did not run for this submission: no records ({what}).",
            code(kind.name())
        ))
    }
}

/// Footnote numbering deduplicated by text.
#[derive(Default)]
pub(super) struct Footnotes {
    texts: Vec<String>,
}

impl Footnotes {
    fn mark(&mut self, text: String) -> String {
        let n = match self.texts.iter().position(|t| *t == text) {
            Some(i) => i + 1,
            None => {
                self.texts.push(text);
                self.texts.len()
            }
        };
        format!("[{n}]")
    }

    fn write(self, doc: &mut Doc) {
        for (i, t) in self.texts.into_iter().enumerate() {
            doc.p(format!("[{}] {}", i + 1, t));
        }
    }
}

pub(super) fn sentence(s: &str) -> String {
    let s = s.trim();
    if s.ends_with('.') || s.ends_with('!') || s.ends_with('?') {
        s.to_string()
    } else {
        format!("{s}.")
    }
}

pub(super) fn status_text(r: &StepRecord) -> String {
    match &r.reason {
        Some(reason) => format!("{}: {}", r.status.name(), reason),
        None => r.status.name().to_string(),
    }
}

/// Breadcrumb with the system switch ("system: x86_1 · arm_1").
pub(super) fn breadcrumb(view: &CampaignView, sub: Option<&str>) -> String {
    let names = view.system_names();
    let switch: Vec<String> = names
        .iter()
        .map(|n| {
            if *n == view.system {
                n.clone()
            } else {
                let has_sub = |s: &str| {
                    view.other_systems
                        .iter()
                        .any(|r| r.system == *n && r.submissions.iter().any(|x| x.id == s))
                };
                let target = match sub {
                    Some(s) if has_sub(s) => format!("../../{n}/reports/{s}.md"),
                    _ => format!("../../{n}/reports/index.md"),
                };
                link(n, &target)
            }
        })
        .collect();
    let mut s = format!(
        "Performance measurements › {}",
        link(&view.system, "index.md")
    );
    if let Some(sub) = sub {
        s.push_str(&format!(" › {sub}"));
    }
    s.push_str(&format!(" · system: {}", switch.join(" · ")));
    s
}

/// The per-submission report.
pub fn submission_doc(view: &CampaignView, sub: &SubmissionView) -> Doc {
    let mut doc = Doc {
        title: format!("{} {} — {}", sub.id, sub.meta.algorithm, view.system),
        blocks: Vec::new(),
    };
    doc.p(breadcrumb(view, Some(&sub.id)));
    doc.h(
        1,
        format!(
            "{} {} — performance on {} (system {})",
            sub.id, sub.meta.algorithm, view.arch, view.system
        ),
    );
    doc.p(
        "Independent measurement by ngcc-pipe following the structure of the NICCS x86 \
         self-assessment guide, §3.5 (1)–(7). Not a submitter self-assessment.",
    );
    basic_information(&mut doc, view, sub);
    environment(&mut doc, view);
    functional_testing(&mut doc, view, sub);
    performance(&mut doc, view, sub);
    resources(&mut doc, view, sub);
    sizes(&mut doc, view, sub);
    primitives::primitives(&mut doc, view, sub);
    evidence::evidence(&mut doc, view, sub);
    doc
}

fn basic_information(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "1. Basic information");
    let meta = &sub.meta;
    let mut items = Vec::new();
    match (&meta.category, &meta.function) {
        (Some(c), Some(f)) => items.push(format!("Category: {c}; function: {f}")),
        (Some(c), None) => items.push(format!("Category: {c}")),
        (None, Some(f)) => items.push(format!("Function: {f}")),
        (None, None) => {}
    }
    items.push(format!("Algorithm: {}", meta.algorithm));
    items.push(versions_measured(sub));
    items.push(format!(
        "Parameter sets: {}",
        sub.instances
            .iter()
            .map(|i| i.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    match sub.record(StepKind::Source) {
        Some(r) => match view::source_data(r) {
            Some(s) => items.push(format!("Source: {}", s.origin)),
            None => items.push(format!("Source: {}", status_text(r))),
        },
        None if view.declared.contains(&StepKind::Source) => {
            items.push("Source: the `source` step did not run".to_string())
        }
        None => {}
    }
    if !meta.links.is_empty() {
        let links: Vec<String> = meta.links.iter().map(|(n, u)| link(n, u)).collect();
        items.push(format!("Links: {}", links.join(", ")));
    }
    doc.list(items);
}

/// "Implementation versions measured: clean; not measured: avx2 (unsupported on this
/// machine)". A version is measured when one of its instances (matrix variable `impl`) has
/// a successful timing record; without an `impl` variable every declared version is listed.
fn versions_measured(sub: &SubmissionView) -> String {
    let declared = if !sub.meta.versions.is_empty() {
        &sub.meta.versions
    } else {
        &sub.impls
    };
    if declared.is_empty() {
        return format!("Implementation versions measured: {UNKNOWN}");
    }
    let of = |v: &String| {
        sub.instances
            .iter()
            .filter(|i| i.vars.get("impl") == Some(v))
            .collect::<Vec<_>>()
    };
    if sub.impls.is_empty() || declared.iter().all(|v| of(v).is_empty()) {
        return format!("Implementation versions measured: {}", declared.join(", "));
    }
    let mut measured = Vec::new();
    let mut not = Vec::new();
    for v in declared {
        let insts = of(v);
        let timed = insts
            .iter()
            .any(|i| i.ops(StepKind::Time).any(|(op, _)| i.time_ok(op).is_some()));
        if timed {
            measured.push(v.clone());
            continue;
        }
        let unsupported = !insts.is_empty()
            && insts.iter().all(|i| {
                i.records()
                    .into_iter()
                    .any(|r| r.status == Status::Unsupported)
            });
        not.push(if unsupported {
            format!("{v} (unsupported on this machine)")
        } else if insts.is_empty() {
            format!("{v} (no instance)")
        } else {
            format!("{v} (no successful timing)")
        });
    }
    let mut line = format!(
        "Implementation versions measured: {}",
        if measured.is_empty() {
            "none".to_string()
        } else {
            measured.join(", ")
        }
    );
    if !not.is_empty() {
        line.push_str(&format!("; not measured: {}", not.join(", ")));
    }
    line
}

/// SMT control values of `/sys/devices/system/cpu/smt/control` in words.
fn smt_words(v: Option<&str>) -> String {
    match v {
        Some("notsupported") => "not supported".to_string(),
        Some("notimplemented") => "not implemented".to_string(),
        Some("forceoff") => "forced off".to_string(),
        other => or_unknown(other),
    }
}

fn environment(doc: &mut Doc, view: &CampaignView) {
    doc.h(2, "2. Assessment environment");
    let Some(env) = view.environment() else {
        doc.p("No environment was recorded (`campaign.json` and timing records are missing).");
        return;
    };
    let mut t = Table::new(&["item", "value"]);
    t.row(vec![
        "processor".into(),
        format!(
            "{} (CPU {}, one core)",
            or_unknown(env.cpu_model.as_deref()),
            env.bench_cpu
        ),
    ]);
    let clock = match env.max_mhz {
        Some(m) => format!("max {:.2} GHz", m / 1000.0),
        None => "max unknown".to_string(),
    };
    t.row(vec![
        "clock".into(),
        format!(
            "{clock}, governor {}, turbo {}, SMT {}",
            or_unknown(env.governor.as_deref()),
            or_unknown(env.turbo.as_deref()),
            smt_words(env.smt.as_deref())
        ),
    ]);
    t.row(vec![
        "isolated cores".into(),
        match env.isolated_cpus.as_deref() {
            Some("") => "none".to_string(),
            other => or_unknown(other),
        },
    ]);
    t.row(vec![
        "logical CPUs".into(),
        env.logical_cpus
            .map(|n| n.to_string())
            .unwrap_or_else(|| UNKNOWN.into()),
    ]);
    t.row(vec![
        "memory".into(),
        env.mem_total_mib
            .map(|m| format!("{m} MiB"))
            .unwrap_or_else(|| UNKNOWN.into()),
    ]);
    t.row(vec![
        "OS / kernel".into(),
        format!(
            "{} / {}",
            or_unknown(env.os.as_deref()),
            or_unknown(env.kernel.as_deref())
        ),
    ]);
    t.row(vec![
        "compiler / build tool".into(),
        format!(
            "{} / {}",
            or_unknown(env.cc_version.as_deref()),
            or_unknown(env.build_tool.as_deref())
        ),
    ]);
    t.row(vec!["cycle counter".into(), cycle_counter(view)]);
    if let Some(sb) = &env.sandbox {
        t.row(vec![
            "sandbox for submission code".into(),
            if sb.missing.is_empty() {
                format!("{}: {}", sb.tool, sb.protections.join("; "))
            } else {
                format!(
                    "{}: {}; not in force: {}",
                    sb.tool,
                    sb.protections.join("; "),
                    sb.missing.join("; ")
                )
            },
        ]);
    }
    t.row(vec![
        "load average (1 min)".into(),
        env.loadavg
            .map(|l| format!("{l:.2}"))
            .unwrap_or_else(|| UNKNOWN.into()),
    ]);
    let (start, end) = match &view.campaign {
        Some(c) => (
            fmt::utc(&c.started),
            c.finished
                .as_deref()
                .map(fmt::utc)
                .unwrap_or_else(|| UNKNOWN.into()),
        ),
        None => (UNKNOWN.into(), UNKNOWN.into()),
    };
    t.row(vec![
        "campaign start / end (UTC)".into(),
        format!("{start} / {end}"),
    ]);
    doc.table(t);
    if env.warnings.is_empty() {
        doc.p("No environment warnings: nothing recorded that spoils timing.");
    } else {
        doc.p("Environment warnings (conditions that spoil timing, each with its fix):");
        doc.list(
            env.warnings
                .iter()
                .map(|w| format!("{} — fix: {}", w.what, w.fix))
                .collect(),
        );
    }
}

/// What a cycle is in this campaign: the counter of the timing records, its measured rate
/// (median over the records of ticks / monotonic ns of the trials), and whether perf core
/// cycles were available.
fn cycle_counter(view: &CampaignView) -> String {
    let mut counters: Vec<String> = Vec::new();
    let mut rates: Vec<f64> = Vec::new();
    let mut core = false;
    for inst in view.submissions.iter().flat_map(|s| &s.instances) {
        for (op, _) in inst.ops(StepKind::Time) {
            let Some(td) = inst.time_ok(op) else {
                continue;
            };
            if !counters.contains(&td.output.counter) {
                counters.push(td.output.counter.clone());
            }
            rates.extend(td.summary.counter_ghz);
            core |= matches!(
                td.output.core_cycles,
                kem_native::output::CoreCycles::Available
            );
        }
    }
    if counters.is_empty() {
        return "no timing record".to_string();
    }
    let name = |c: &str| match c {
        "rdtsc" => "TSC (`rdtsc`)".to_string(),
        "cntvct_el0" => "generic timer (`cntvct_el0`)".to_string(),
        other => code(other),
    };
    let rate = match crate::measure::stats::median(&rates) {
        Some(g) => format!(
            "measured rate {g:.2} GHz (ticks / monotonic ns over the timed trials, median of {} records)",
            rates.len()
        ),
        None => "rate not measured".to_string(),
    };
    let what = if core {
        "perf core cycles were recorded beside them in every trial"
    } else if counters.iter().any(|c| c == "rdtsc") {
        "TSC ticks are reference cycles at this constant rate, not core cycles (perf core cycles were not available)"
    } else {
        "counter ticks, not core cycles (perf core cycles were not available)"
    };
    format!(
        "{}; {rate}; {what}",
        counters
            .iter()
            .map(|c| name(c))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn kat_mode_names(sub: &SubmissionView) -> Vec<String> {
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

fn functional_testing(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "3. Functional testing (KAT)");
    let any = sub
        .instances
        .iter()
        .any(|i| i.record(StepKind::Kat).is_some());
    if let Some(line) = did_not_run(view, StepKind::Kat, any, "no KAT was checked") {
        doc.p(line);
        return;
    }
    doc.p(format!(
        "Each library was checked against the submitted KAT vectors (SHA-256 manifest {}) \
         before timing.",
        code(&sub.kat_manifest)
    ));
    let modes = kat_mode_names(sub);
    let mut head = vec!["instance".to_string(), "build flags".to_string()];
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
    for inst in &sub.instances {
        let flags = match inst.record(StepKind::Build) {
            Some(r) => match view::build_data(r) {
                Some(b) => b.flags_profile.clone(),
                None => {
                    let f = view.build_flags.clone().unwrap_or_else(|| DASH.into());
                    format!(
                        "{f} (build {} {})",
                        r.status.name(),
                        foot.mark(sentence(&status_text(r)))
                    )
                }
            },
            None => view.build_flags.clone().unwrap_or_else(|| DASH.into()),
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
                            let status = results::kat_status_name(m.status);
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

/// Rows of instances x operations whose timing record is not ok, as list items.
fn not_timed(sub: &SubmissionView) -> Vec<String> {
    let mut items = Vec::new();
    for inst in &sub.instances {
        let mut by_reason: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for (op, r) in inst.ops(StepKind::Time) {
            let why = match r {
                None => "did not run (no record)".to_string(),
                Some(r) if r.status != Status::Ok => status_text(r),
                Some(r) if view::time_data(r).is_none() => "record has no timing data".into(),
                _ => continue,
            };
            by_reason.entry(why).or_default().push(op.name());
        }
        for (why, ops) in by_reason {
            items.push(format!("{} {}: {}", code(&inst.id), ops.join(", "), why));
        }
    }
    items
}

fn performance(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "4. Performance");
    let any = sub
        .instances
        .iter()
        .any(|i| i.ops(StepKind::Time).any(|(_, r)| r.is_some()));
    if let Some(line) = did_not_run(view, StepKind::Time, any, "no timing") {
        doc.p(line);
        counts::instructions_table(doc, sub);
        return;
    }
    let mut t = Table::new(&[
        "instance",
        "operation",
        "mean cycles",
        "mean time",
        "ops/s",
        "median trial",
        "n (trials × iters)",
        "CV",
        "min / q1 / q3 / max cycles",
        "single call median (q1–q3)",
        "flags",
    ]);
    // Records from a timing session add the median of the rounds with its 95% CI.
    let in_rounds = sub.instances.iter().any(|i| {
        i.ops(StepKind::Time)
            .any(|(op, _)| i.time_ok(op).is_some_and(|t| t.rounds.is_some()))
    });
    if in_rounds {
        t.head.splice(
            2..2,
            ["median cycles (95% CI)", "rounds (interfered)"].map(String::from),
        );
    }
    let mut counters: Vec<String> = Vec::new();
    let mut core_cycles: Vec<String> = Vec::new();
    let mut not_reached = false;
    for inst in &sub.instances {
        for (op, _) in inst.ops(StepKind::Time) {
            let Some(td) = inst.time_ok(op) else {
                continue;
            };
            let s = &td.summary;
            if !counters.contains(&td.output.counter) {
                counters.push(td.output.counter.clone());
            }
            let perf = match &td.output.core_cycles {
                kem_native::output::CoreCycles::Available => "recorded in every trial".to_string(),
                kem_native::output::CoreCycles::Unavailable { reason } => {
                    format!("unavailable ({reason})")
                }
            };
            if !core_cycles.contains(&perf) {
                core_cycles.push(perf);
            }
            let mut flags = Vec::new();
            if s.unstable {
                flags.push("unstable".to_string());
            }
            if !s.trial_outliers.is_empty() {
                flags.push(format!(
                    "outlier trial{} {}",
                    if s.trial_outliers.len() > 1 { "s" } else { "" },
                    s.trial_outliers
                        .iter()
                        .map(|i| (i + 1).to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            if !s.off_target_trials.is_empty() {
                let target = td.output.calibration.target_trial_ns as f64;
                flags.push(format!(
                    "trial length off target: {}",
                    s.off_target_trials
                        .iter()
                        .filter_map(|&i| td.output.trials.get(i))
                        .map(|t| format!("{:.2}×", t.ns as f64 / target))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            if td.rounds.as_ref().is_some_and(|r| !r.reached) {
                not_reached = true;
                flags.push("CI wider than the precision".to_string());
            }
            let mut row = vec![
                code(&inst.id),
                op.name().to_string(),
                fmt::cycles(s.mean_cycles),
                fmt::time_ns(s.mean_ns),
                fmt::ops_per_s(s.ops_per_s),
                fmt::time_ns(s.median_trial_ns),
                format!("{} ({} × {})", s.n, s.trials, s.iters),
                fmt::cv(s.cv),
                format!(
                    "{} / {} / {} / {}",
                    fmt::cycles(s.min_cycles),
                    fmt::cycles(s.q1_cycles),
                    fmt::cycles(s.q3_cycles),
                    fmt::cycles(s.max_cycles)
                ),
                match (s.sample_median, s.sample_q1, s.sample_q3) {
                    (Some(m), Some(q1), Some(q3)) => format!(
                        "{} ({}–{})",
                        fmt::cycles(m),
                        fmt::cycles(q1),
                        fmt::cycles(q3)
                    ),
                    _ => DASH.to_string(),
                },
                if flags.is_empty() {
                    DASH.to_string()
                } else {
                    flags.join("; ")
                },
            ];
            if in_rounds {
                let (median, rounds) = match (&td.rounds, s.median_cycles, s.rounds) {
                    (Some(r), Some(m), Some(n)) => (
                        format!(
                            "{} ({}–{})",
                            fmt::cycles(m),
                            fmt::cycles(r.estimate.ci_low),
                            fmt::cycles(r.estimate.ci_high)
                        ),
                        format!("{n} ({})", s.interfered_rounds.unwrap_or(0)),
                    ),
                    _ => (DASH.to_string(), DASH.to_string()),
                };
                row.splice(2..2, [median, rounds]);
            }
            t.row(row);
        }
    }
    if t.rows.is_empty() {
        doc.p("No operation was timed successfully.");
    } else {
        doc.table(t);
        doc.p(format!(
            "Cycles are {} ticks per operation; mean = total ticks / total iterations; \
             CV and min/quartiles are over the per-operation cycles of the trials, \
             the single-call column over calls timed one by one; \
             \"unstable\" marks a CV above 2%; outlier trials have a modified Z-score above 3.5; \
             \"trial length off target\" gives trials that lasted less than half or more than twice \
             the requested trial length (as a multiple of it). \
             Core cycles (perf_event_open): {}.",
            counters
                .iter()
                .map(|c| code(c))
                .collect::<Vec<_>>()
                .join(", "),
            core_cycles.join("; ")
        ));
        if in_rounds {
            doc.p(format!(
                "Timed in interleaved rounds: each round times one short batch of every \
                 instance and operation of the session, in a freshly shuffled order. Median \
                 cycles are the median of the per-round values with a 95% bootstrap \
                 confidence interval; rounds marked interfered (steal, irq, preemption or \
                 waiting for the bench core) are left out when at least {} clean rounds \
                 exist; trials are the rounds.{}",
                crate::run::session::MIN_ROUNDS,
                if not_reached {
                    " \"CI wider than the precision\": the time budget ran out first."
                } else {
                    ""
                }
            ));
        }
    }
    counts::instructions_table(doc, sub);
    build_commands(doc, sub);
    let slow = categories::slower_than_clean(&categories::speedups(sub));
    if !slow.is_empty() {
        doc.p("Optimized implementation slower than its clean one (mean cycles):");
        doc.list(slow);
    }
    let missing = not_timed(sub);
    if !missing.is_empty() {
        doc.p("Not timed:");
        doc.list(missing);
    }
}

/// The compile and link flags the timed objects were really built with, from the build
/// records (the generated version script named by its file name, not its path).
fn build_commands(doc: &mut Doc, sub: &SubmissionView) {
    let mut combos: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for inst in &sub.instances {
        let Some(b) = inst.record(StepKind::Build).and_then(view::build_data) else {
            continue;
        };
        let compile = b.flags.iter().chain(&b.codegen_flags).cloned();
        let link = b
            .link_flags
            .iter()
            .map(|f| match f.strip_prefix("-Wl,--version-script=") {
                Some(p) => format!(
                    "-Wl,--version-script={}",
                    std::path::Path::new(p)
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default()
                ),
                None => f.clone(),
            });
        combos
            .entry((
                format!("{} {}", b.cc, compile.collect::<Vec<_>>().join(" ")),
                link.collect::<Vec<_>>().join(" "),
            ))
            .or_default()
            .push(inst.id.clone());
    }
    if combos.is_empty() {
        return;
    }
    doc.p("Objects timed, with the flags of their build records:");
    doc.list(
        combos
            .into_iter()
            .map(|((compile, link), ids)| {
                let link = if link.is_empty() {
                    "flags not recorded".to_string()
                } else {
                    code(&link)
                };
                format!(
                    "{}: compiled with {}, linked with {}",
                    ids.iter().map(|i| code(i)).collect::<Vec<_>>().join(", "),
                    code(&compile),
                    link
                )
            })
            .collect(),
    );
}

fn resources(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "5. Resource consumption");
    let any = sub
        .instances
        .iter()
        .any(|i| i.ops(StepKind::Time).any(|(op, _)| i.time_ok(op).is_some()));
    if let Some(line) = did_not_run(view, StepKind::Time, any, "no memory figures") {
        doc.p(line);
        return;
    }
    if !any {
        doc.p("No operation was run successfully: no memory figures.");
        return;
    }
    doc.p(
        "Static memory is approximated by the library's loadable ELF segments (sum of PT_LOAD \
         sizes); baseline RSS is the process's VmRSS after loading the object and allocating \
         buffers, peak RSS its high-water mark (VmHWM) after the operation loop, both including \
         the runner and libc, so they are upper-bound proxies rather than isolated algorithm \
         memory. Stack is the bytes of a painted thread stack that one call touched.",
    );
    let mut t = Table::new(&[
        "instance",
        "operation",
        "static: ELF image (bytes)",
        "baseline RSS",
        "peak RSS",
        "stack (bytes)",
    ]);
    for inst in &sub.instances {
        let stat = results::static_bytes(inst);
        for (op, _) in inst.ops(StepKind::Time) {
            let Some(td) = inst.time_ok(op) else {
                continue;
            };
            let m = &td.output.memory;
            t.row(vec![
                code(&inst.id),
                op.name().to_string(),
                fmt::opt_int(td.static_bytes.or(stat)),
                fmt::kib(m.baseline_rss_kib),
                fmt::kib(m.peak_rss_kib),
                fmt::opt_int(m.stack_bytes),
            ]);
        }
    }
    doc.table(t);
}

fn sizes(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "6. Transmission and storage overhead");
    let any_sizes = sub
        .instances
        .iter()
        .any(|i| i.record(StepKind::Sizes).is_some());
    let any_build = sub.instances.iter().any(|i| {
        i.record(StepKind::Build)
            .and_then(view::build_data)
            .is_some()
    });
    if let Some(line) = did_not_run(view, StepKind::Sizes, any_sizes || any_build, "no sizes") {
        doc.p(line);
        return;
    }
    if any_sizes {
        doc.p(
            "Public-key and ciphertext sizes follow the submission's size catalog where it \
             gives them; secret-key and shared-secret lengths are the api.h figures. See the \
             size audit for disagreements.",
        );
    } else {
        doc.p("No `sizes` record: the figures below are the api.h sizes recorded by the build.");
    }
    let mut t = Table::new(&[
        "instance",
        "public key",
        "secret key",
        "ciphertext",
        "shared secret",
    ]);
    for inst in &sub.instances {
        let [pk, sk, ct, ss] = results::shown_sizes(inst);
        if [pk, sk, ct, ss].iter().all(Option::is_none) {
            continue;
        }
        t.row(vec![
            code(&inst.id),
            fmt::opt_int(pk),
            fmt::opt_int(sk),
            fmt::opt_int(ct),
            fmt::opt_int(ss),
        ]);
    }
    doc.table(t);
    if any_sizes {
        let audit: Vec<String> = sub
            .instances
            .iter()
            .filter_map(|i| {
                i.record(StepKind::Sizes)
                    .and_then(view::sizes_data)
                    .map(|d| (i, d))
            })
            .flat_map(|(i, d)| d.audit.iter().map(move |a| format!("{}: {a}", code(&i.id))))
            .collect();
        if audit.is_empty() {
            doc.p("Size audit: catalog, api.h and KAT lengths agree for every instance.");
        } else {
            doc.p("Size audit:");
            doc.list(audit);
        }
    }
}
