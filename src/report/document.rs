//! The content of the reports, section by section, as format-neutral [`Doc`]s.
//!
//! [`submission_doc`] follows the seed reports (`shared/seeds/`): title, intro, sections
//! 1-6, symmetric primitives, 7 raw evidence index. [`index_doc`] is the campaign index.
//! Links are relative to the folder the rendered file sits in (`reports/` or `site/`, both
//! one level below the system folder); links to other reports end in `.md` and the HTML
//! renderer rewrites them to `.html`.

use std::collections::BTreeMap;

use crate::model::{Op, StepKind};
use crate::record::{KatStatus, Status, StepRecord};

use super::doc::{code, link, Doc, Table};
use super::format::{self as fmt, DASH};
use super::results::{self, Results};
use super::view::{self, CampaignView, InstanceView, SubmissionView};

const UNKNOWN: &str = "unknown";

fn or_unknown(v: Option<&str>) -> String {
    v.map(str::to_string).unwrap_or_else(|| UNKNOWN.to_string())
}

/// One line saying why a section is empty, or `None` when some record exists.
fn did_not_run(view: &CampaignView, kind: StepKind, any: bool, what: &str) -> Option<String> {
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
struct Footnotes {
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

fn sentence(s: &str) -> String {
    let s = s.trim();
    if s.ends_with('.') || s.ends_with('!') || s.ends_with('?') {
        s.to_string()
    } else {
        format!("{s}.")
    }
}

fn status_text(r: &StepRecord) -> String {
    match &r.reason {
        Some(reason) => format!("{}: {}", r.status.name(), reason),
        None => r.status.name().to_string(),
    }
}

/// Breadcrumb with the system switch ("system: x86_1 · arm_1").
fn breadcrumb(view: &CampaignView, sub: Option<&str>) -> String {
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
    primitives(&mut doc, view, sub);
    evidence(&mut doc, view, sub);
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
    let versions = if !meta.versions.is_empty() {
        meta.versions.join(", ")
    } else if !sub.impls.is_empty() {
        sub.impls.join(", ")
    } else {
        UNKNOWN.to_string()
    };
    items.push(format!("Implementation versions measured: {versions}"));
    items.push(format!(
        "Parameter sets: {}",
        sub.instances
            .iter()
            .map(|i| i.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    match sub.source.as_ref() {
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
            or_unknown(env.smt.as_deref())
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

fn kat_mode_names(sub: &SubmissionView) -> Vec<String> {
    let mut modes: Vec<String> = Vec::new();
    for inst in &sub.instances {
        if let Some(d) = inst.kat.as_ref().and_then(view::kat_data) {
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
    let any = sub.instances.iter().any(|i| i.kat.is_some());
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
    let notes: String = sub
        .meta
        .notes
        .iter()
        .map(|n| format!(" {}", sentence(n)))
        .collect();
    let mut notes_used = false;
    let mut foot = Footnotes::default();
    for inst in &sub.instances {
        let flags = match inst.build.as_ref() {
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
            let cell = match inst.kat.as_ref() {
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
                            if m.status != KatStatus::Fail && !notes.is_empty() {
                                text.push_str(&notes);
                                notes_used = true;
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
    if !notes_used {
        for n in &sub.meta.notes {
            doc.p(format!("Note: {}", sentence(n)));
        }
    }
    let failed_profile: Vec<String> = sub
        .instances
        .iter()
        .filter(|i| {
            i.kat
                .as_ref()
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
        for (op, r) in &inst.time {
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
        .any(|i| i.time.iter().any(|(_, r)| r.is_some()));
    if let Some(line) = did_not_run(view, StepKind::Time, any, "no timing") {
        doc.p(line);
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
        i.time
            .iter()
            .any(|(op, _)| i.time_ok(*op).is_some_and(|t| t.rounds.is_some()))
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
        for (op, _) in &inst.time {
            let Some(td) = inst.time_ok(*op) else {
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
             \"unstable\" marks a CV above 2%; outlier trials have a modified Z-score above 3.5. \
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
    let missing = not_timed(sub);
    if !missing.is_empty() {
        doc.p("Not timed:");
        doc.list(missing);
    }
}

fn resources(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "5. Resource consumption");
    let any = sub
        .instances
        .iter()
        .any(|i| i.time.iter().any(|(op, _)| i.time_ok(*op).is_some()));
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
        for (op, _) in &inst.time {
            let Some(td) = inst.time_ok(*op) else {
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
    let any_sizes = sub.instances.iter().any(|i| i.sizes.is_some());
    let any_build = sub
        .instances
        .iter()
        .any(|i| i.build.as_ref().and_then(view::build_data).is_some());
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
            .filter_map(|i| i.sizes.as_ref().and_then(view::sizes_data).map(|d| (i, d)))
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

const MAX_EVIDENCE: usize = 8;

fn primitives(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "Symmetric primitives");
    // survey
    let surveys: Vec<(&InstanceView, &crate::record::SurveyData)> = sub
        .instances
        .iter()
        .filter_map(|i| {
            i.survey
                .as_ref()
                .and_then(view::survey_data)
                .map(|s| (i, s))
        })
        .collect();
    let any_survey = sub.instances.iter().any(|i| i.survey.is_some());
    if let Some(line) = did_not_run(view, StepKind::Survey, any_survey, "no survey verdict") {
        doc.p(line);
    } else if surveys.is_empty() {
        doc.p("The survey produced no verdict:");
        doc.list(
            sub.instances
                .iter()
                .filter_map(|i| i.survey.as_ref().map(|r| (i, r)))
                .map(|(i, r)| format!("{}: {}", code(&i.id), status_text(r)))
                .collect(),
        );
    } else {
        let first = surveys[0].1;
        let uniform = surveys
            .iter()
            .all(|(_, s)| s.verdict == first.verdict && s.summary == first.summary)
            && surveys.len() == sub.instances.len();
        if uniform {
            doc.p(format!(
                "Survey verdict: {} — {}",
                first.verdict.name(),
                first.summary
            ));
        } else {
            let mut t = Table::new(&["instance", "survey verdict", "summary"]);
            for inst in &sub.instances {
                match inst.survey.as_ref() {
                    Some(r) => match view::survey_data(r) {
                        Some(s) => t.row(vec![
                            code(&inst.id),
                            s.verdict.name().into(),
                            s.summary.clone(),
                        ]),
                        None => t.row(vec![code(&inst.id), DASH.into(), status_text(r)]),
                    },
                    None => t.row(vec![code(&inst.id), DASH.into(), "did not run".into()]),
                }
            }
            doc.table(t);
        }
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
                items.push(format!(
                    "{}: provided primitives referenced: {}",
                    code(&inst.id),
                    s.provided_used.join(", ")
                ));
            }
        }
        if !items.is_empty() {
            doc.p("Survey evidence:");
            doc.list(items);
        }
    }
    // profile
    let any_profile = sub
        .instances
        .iter()
        .any(|i| i.profile.iter().any(|(_, r)| r.is_some()));
    if let Some(line) = did_not_run(view, StepKind::Profile, any_profile, "no hash/DRNG shares") {
        doc.p(line);
        return;
    }
    let families = if sub.primitive_families.is_empty() {
        "hash/XOF".to_string()
    } else {
        format!("hash/XOF ({})", sub.primitive_families.join("/"))
    };
    doc.p(format!(
        "Share of each operation spent in the provided {families} functions and in the DRNG{} \
         (plain build linked with `--wrap` wrappers, measured in the same campaign):",
        sub.drng_symbol
            .as_deref()
            .map(|d| format!(" ({})", code(d)))
            .unwrap_or_default()
    ));
    let mut t = Table::new(&[
        "instance",
        "operation",
        &families,
        "by family",
        "DRNG",
        "calls per operation",
    ]);
    let mut missing: Vec<(String, String, Vec<&str>)> = Vec::new();
    for inst in &sub.instances {
        for (op, r) in &inst.profile {
            match inst.profile_ok(*op) {
                Some(p) => t.row(vec![
                    code(&inst.id),
                    op.name().into(),
                    fmt::share(p.hash_share),
                    by_family(&p.family_shares),
                    fmt::share(p.drng_share),
                    fmt::calls_list(&results::calls_named(p)),
                ]),
                None => {
                    let why = r
                        .as_ref()
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
    let missing: Vec<String> = missing
        .into_iter()
        .map(|(i, why, ops)| format!("{} {}: {why}", code(&i), ops.join(", ")))
        .collect();
    if !t.rows.is_empty() {
        doc.table(t);
    }
    if !missing.is_empty() {
        doc.p("Not profiled:");
        doc.list(missing);
    }
}

fn evidence(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "7. Raw evidence index");
    doc.p(format!(
        "Paths are relative to the system's output folder ({}); each JSON record holds its \
         commands, environment, inputs hash and raw trials.",
        code(&format!("outputs/{}/", view.system))
    ));
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

/// Per-instance row cells of the campaign index for one system's results.
fn index_table(results: &Results, link_ext: &str, prefix: &str) -> Table {
    let mut t = Table::new(&[
        "submission",
        "instance",
        "KAT",
        "keygen cycles",
        "enc cycles",
        "dec cycles",
        "pk bytes",
        "ct bytes",
        "hash share (keygen / enc / dec)",
    ]);
    for sub in &results.submissions {
        for inst in &sub.instances {
            let cyc = |op: Op| {
                inst.op(op)
                    .and_then(|o| o.mean_cycles)
                    .map(|c| {
                        let unstable = inst.op(op).and_then(|o| o.unstable).unwrap_or(false);
                        format!(
                            "{}{}",
                            fmt::cycles(c),
                            if unstable { " (unstable)" } else { "" }
                        )
                    })
                    .unwrap_or_else(|| DASH.into())
            };
            let shares: Vec<String> = Op::ALL
                .iter()
                .map(|&op| {
                    inst.op(op)
                        .and_then(|o| o.hash_share)
                        .map(fmt::share)
                        .unwrap_or_else(|| DASH.into())
                })
                .collect();
            t.row(vec![
                link(&sub.id, &format!("{prefix}{}.{link_ext}", sub.id)),
                code(&inst.id),
                inst.kat.clone().unwrap_or_else(|| "did not run".into()),
                cyc(Op::Keygen),
                cyc(Op::Enc),
                cyc(Op::Dec),
                fmt::opt_int(inst.pk),
                fmt::opt_int(inst.ct),
                shares.join(" / "),
            ]);
        }
    }
    t
}

/// The campaign index (`reports/index.md`): one row per instance, links, failures.
pub fn index_doc(view: &CampaignView, results: &Results) -> Doc {
    let mut doc = Doc {
        title: format!("{} — performance measurements", view.system),
        blocks: Vec::new(),
    };
    doc.p(breadcrumb(view, None));
    doc.h(
        1,
        format!(
            "Performance measurements on {} (system {})",
            view.arch, view.system
        ),
    );
    if let Some(c) = &view.campaign {
        doc.p(format!(
            "Campaign start / end (UTC): {} / {}.",
            fmt::utc(&c.started),
            c.finished
                .as_deref()
                .map(fmt::utc)
                .unwrap_or_else(|| UNKNOWN.into())
        ));
    }
    doc.p(
        "Mean cycles per operation; KAT is the worst status over the checked modes. \
           Machine-readable: [`results.csv`](results.csv), [`results.json`](results.json).",
    );
    doc.table(index_table(results, "md", ""));
    if !view.other_systems.is_empty() {
        let mut all: Vec<&Results> = view.other_systems.iter().collect();
        all.push(results);
        all.sort_by(|a, b| a.system.cmp(&b.system));
        doc.h(2, "Across systems");
        doc.p(
            "Mean cycles per operation on every system whose outputs sit beside this one \
             (read from their `reports/results.json`); cycles of different counters \
             (`rdtsc`, `cntvct_el0`) are not comparable across architectures.",
        );
        doc.table(systems_table(&all));
    }
    failures(&mut doc, view);
    doc
}

/// One row per submission, instance and operation; one column per system.
pub fn systems_table(all: &[&Results]) -> Table {
    let mut head = vec![
        "submission".to_string(),
        "instance".into(),
        "operation".into(),
    ];
    head.extend(all.iter().map(|r| r.system.clone()));
    let mut t = Table {
        head,
        rows: Vec::new(),
    };
    // keys in first-seen order over the systems, sorted systems first
    let mut keys: Vec<(String, String, Op)> = Vec::new();
    for r in all {
        for sub in &r.submissions {
            for inst in &sub.instances {
                for o in &inst.ops {
                    let k = (sub.id.clone(), inst.id.clone(), o.op);
                    if !keys.contains(&k) {
                        keys.push(k);
                    }
                }
            }
        }
    }
    for (sub, inst, op) in keys {
        let mut row = vec![sub.clone(), code(&inst), op.name().to_string()];
        for r in all {
            let cell = r
                .submissions
                .iter()
                .find(|s| s.id == sub)
                .and_then(|s| s.instances.iter().find(|i| i.id == inst))
                .and_then(|i| i.op(op))
                .and_then(|o| o.mean_cycles)
                .map(fmt::cycles)
                .unwrap_or_else(|| DASH.into());
            row.push(cell);
        }
        t.row(row);
    }
    t
}

/// The failure list of the index: every failed or timed-out step with its reason.
pub fn failures(doc: &mut Doc, view: &CampaignView) {
    doc.h(2, "Failures");
    let mut failed: BTreeMap<String, String> = BTreeMap::new();
    let mut skipped = 0usize;
    for sub in &view.submissions {
        let mut recs: Vec<&StepRecord> = sub.source.iter().collect();
        for inst in &sub.instances {
            recs.extend(inst.records());
        }
        for r in recs {
            if r.status == Status::Skipped {
                skipped += 1;
            }
            match view::kat_data(r) {
                // a KAT with results: one line per mode that did not pass
                Some(d) => {
                    for m in d.modes.iter().filter(|m| m.status != KatStatus::Pass) {
                        failed.insert(
                            format!("{} ({})", r.id, m.mode.name()),
                            format!(
                                "KAT {}{}",
                                results::kat_status_name(m.status),
                                m.reason
                                    .as_deref()
                                    .map(|r| format!(": {r}"))
                                    .unwrap_or_default()
                            ),
                        );
                    }
                }
                None if r.status.is_failure() => {
                    failed.insert(r.id.clone(), status_text(r));
                }
                None => {}
            }
        }
    }
    // steps of campaign.json without a record here (e.g. a source that failed)
    if let Some(c) = &view.campaign {
        for s in c.steps.iter().filter(|s| s.status.is_failure()) {
            if !failed
                .keys()
                .any(|k| k == &s.id || k.starts_with(&format!("{} (", s.id)))
            {
                failed.insert(
                    s.id.clone(),
                    format!(
                        "{}{}",
                        s.status.name(),
                        s.reason
                            .as_deref()
                            .map(|r| format!(": {r}"))
                            .unwrap_or_default()
                    ),
                );
            }
        }
    }
    if failed.is_empty() {
        doc.p("No step failed and every KAT passed.");
    } else {
        doc.list(
            failed
                .into_iter()
                .map(|(id, why)| format!("{}: {why}", code(&id)))
                .collect(),
        );
    }
    if skipped > 0 {
        doc.p(format!(
            "{skipped} step{} skipped because a step {} depended on did not succeed.",
            if skipped == 1 { " was" } else { "s were" },
            if skipped == 1 { "it" } else { "they" }
        ));
    }
}

/// The index table of another system (site side-by-side view).
pub fn other_system_table(results: &Results) -> Table {
    index_table(results, "md", &format!("../../{}/reports/", results.system))
}

/// The index table of this system, with links relative to `reports/`.
pub fn this_system_table(results: &Results) -> Table {
    index_table(results, "md", "")
}

/// Per-family shares without the DRNG, by name: "aes 69%, keccak 10%"; "–" when unknown.
fn by_family(shares: &[(String, f64)]) -> String {
    let mut v: Vec<&(String, f64)> = shares
        .iter()
        .filter(|(f, _)| f != crate::profile::DRNG_FAMILY)
        .collect();
    if v.is_empty() {
        return "–".to_string();
    }
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v.iter()
        .map(|(f, x)| format!("{f} {}", fmt::share(*x)))
        .collect::<Vec<_>>()
        .join(", ")
}
