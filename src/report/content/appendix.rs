//! The appendix's timing part: per operation the distribution of the trials (or rounds),
//! the single-call samples and what they mean, outliers, the host yardstick of each row,
//! the spread of the link orders, the flags the objects were built with, flag profiles
//! compared, and callgrind's instruction counts.

use super::*;
use crate::model::Op;
use crate::record::TimeData;

/// distributions and single-call samples of every timed operation.
pub(super) fn timing_detail(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "Timing: distributions, outliers, yardstick");
    if let Some(why) = emulated(sub) {
        doc.p(format!("Not timed: {why}."));
        return;
    }
    let any = listed(sub).any(|i| i.ops(StepKind::Time).any(|(op, _)| i.time_ok(op).is_some()));
    if !any {
        doc.p(did_not_run(view, StepKind::Time, false, "no timing")
            .unwrap_or_else(|| "No operation was timed successfully.".to_string()));
        return;
    }
    let mut t = Table::new(&[
        "instance",
        "operation",
        "mean cycles",
        "CV",
        "min / q1 / q3 / max cycles",
        "rounds (interfered)",
        "yardstick (cycles/call)",
        "flags",
    ]);
    let mut samples = Table::new(&[
        "instance",
        "operation",
        "headline cycles",
        "single call median (q1–q3)",
        "single / headline",
        "outlier calls",
    ]);
    let mut core_cycles: Vec<String> = Vec::new();
    for inst in listed(sub) {
        for (op, _) in inst.ops(StepKind::Time) {
            let Some(td) = inst.time_ok(op) else {
                continue;
            };
            let perf = match &td.output.core_cycles {
                crate::record::output::CoreCycles::Available => {
                    "recorded in every trial".to_string()
                }
                crate::record::output::CoreCycles::Unavailable { reason } => {
                    format!("unavailable ({reason})")
                }
            };
            if !core_cycles.contains(&perf) {
                core_cycles.push(perf);
            }
            t.row(distribution_row(&inst.id, op, td));
            if let Some(row) = sample_row(&inst.id, op, td) {
                samples.row(row);
            }
        }
    }
    doc.table(t);
    doc.p(format!(
        "Mean = total ticks / total iterations; CV and min/quartiles are over the per-call \
         cycles of the trials (in a timing session: of the rounds). Trials and rounds are \
         numbered from 0, as in the records' `trials` arrays; an outlier has a modified \
         Z-score above {}; \"unstable\" marks a CV above {} for trials timed in one block; \
         \"trial length off target\" gives trials that lasted less than half or more than \
         twice the requested length (as a multiple of it). Yardstick: the median cycles per \
         call of the host-speed workload timed in the rounds of this row's session (each row \
         its own). Core cycles (perf_event_open): {}.",
        crate::measure::stats::OUTLIER_Z,
        fmt::share(crate::measure::stats::UNSTABLE_CV),
        core_cycles.join("; ")
    ));
    if !samples.rows.is_empty() {
        doc.h(3, "Single-call samples");
        doc.p(
            "Besides the batches, the runner times single calls one by one (each between two \
             counter reads). Their median differs from the headline (a batch's total over its \
             iterations) for two reasons: every sample includes the timer's own overhead and \
             serialization around one call, which a batch spreads over thousands of calls, \
             and each call starts with caches, branch predictors and prefetchers left by the \
             previous call's bookkeeping rather than warmed by a run of the same operation. \
             A single call is therefore typically slower; it can also be faster when the batch \
             median includes a slow phase of the host. The headline is the figure to compare; \
             the single-call median is what one isolated call in an application costs.",
        );
        doc.table(samples);
    }
    host_speed(doc, sub);
    doc.h(2, "Objects timed and link orders");
    layout_spread(doc, sub);
    super::profiles::profiles_compared(doc, sub);
    build_commands(doc, sub);
}

/// What the distribution table's `flags` column says of one timed operation.
fn timing_flags(td: &TimeData) -> Vec<String> {
    let s = &td.summary;
    let mut flags = Vec::new();
    // In rounds, the CV of rounds taken across a whole session measures the host's
    // drift, not this estimate: the body gives the CI instead.
    if s.unstable && td.rounds.is_none() {
        flags.push("unstable".to_string());
    }
    if !s.trial_outliers.is_empty() {
        flags.push(format!(
            "outlier {} #{}",
            if td.rounds.is_some() {
                "round"
            } else {
                "trial"
            },
            s.trial_outliers
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", #")
        ));
    }
    if !s.off_target_trials.is_empty() {
        let target = td.output.calibration.target_trial_ns as f64;
        flags.push(format!(
            "trial length off target: {}",
            s.off_target_trials
                .iter()
                .filter_map(|&i| td.output.trials.get(i).map(|t| (i, t)))
                .map(|(i, t)| format!("#{i} {:.2}×", t.ns as f64 / target))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if td.rounds.as_ref().is_some_and(|r| !r.reached) {
        flags.push("CI wider than the precision".to_string());
    }
    flags
}

/// One row of the distribution table.
fn distribution_row(id: &str, op: Op, td: &TimeData) -> Vec<String> {
    let s = &td.summary;
    let flags = timing_flags(td);
    let yardstick = td
        .rounds
        .as_ref()
        .and_then(|r| r.yardstick.as_ref())
        .and_then(|y| crate::measure::stats::median(&y.values).map(|m| (y, m)));
    vec![
        code(id),
        op.name().to_string(),
        fmt::cycles(s.mean_cycles),
        fmt::cv(s.cv),
        format!(
            "{} / {} / {} / {}",
            fmt::cycles(s.min_cycles),
            fmt::cycles(s.q1_cycles),
            fmt::cycles(s.q3_cycles),
            fmt::cycles(s.max_cycles)
        ),
        match (s.rounds, s.interfered_rounds) {
            (Some(n), i) => format!("{n} ({})", i.unwrap_or(0)),
            _ => DASH.to_string(),
        },
        match yardstick {
            Some((y, m)) => format!("{} ({} rounds)", fmt::cycles(m), y.values.len()),
            None => DASH.to_string(),
        },
        if flags.is_empty() {
            DASH.to_string()
        } else {
            flags.join("; ")
        },
    ]
}

/// One row of the single-call samples table, when the operation has samples.
fn sample_row(id: &str, op: Op, td: &TimeData) -> Option<Vec<String>> {
    let s = &td.summary;
    let (Some(m), Some(q1), Some(q3)) = (s.sample_median, s.sample_q1, s.sample_q3) else {
        return None;
    };
    let (h, _) = super::performance::headline(td);
    Some(vec![
        code(id),
        op.name().to_string(),
        fmt::cycles(h),
        format!(
            "{} ({}–{})",
            fmt::cycles(m),
            fmt::cycles(q1),
            fmt::cycles(q3)
        ),
        if h > 0.0 {
            format!("{:+.1}%", (m / h - 1.0) * 100.0)
        } else {
            DASH.to_string()
        },
        s.sample_outliers.to_string(),
    ])
}

/// How the host's speed is tracked (the yardstick) and what interleaved rounds do, with the
/// host's states per operation.
fn host_speed(doc: &mut Doc, sub: &SubmissionView) {
    if let Some(y) = listed(sub)
        .flat_map(|i| i.ops(StepKind::Time).filter_map(|(op, _)| i.time_ok(op)))
        .find_map(|td| td.rounds.as_ref().and_then(|r| r.yardstick.as_ref()))
    {
        doc.p(format!(
            "Host speed: the yardstick {} (a fixed workload of Keccak-f[1600] permutations and \
             a polynomial multiplication, built into ngcc-pipe and compiled with `-O2`; object \
             SHA-256 {}) is timed {}. `ngcc-pipe compare` divides every round by it when both \
             runs timed the same yardstick the same way, so that a host that ran slower in one \
             run is not taken for slower code.",
            code(&y.name),
            code(&y.object_sha256[..12.min(y.object_sha256.len())]),
            if y.placement == "in-batch" {
                "in short blocks inside every batch"
            } else {
                "in a batch of its own in every round"
            },
        ));
    }
    if listed(sub).any(|i| {
        i.ops(StepKind::Time)
            .any(|(op, _)| i.time_ok(op).is_some_and(|t| t.rounds.is_some()))
    }) {
        doc.p(format!(
            "Timed in interleaved rounds: each round times one short batch of every runner \
             process of every instance and operation of the session (several processes each; \
             the figure is the mean of the processes' medians, and the interval resamples \
             processes, then batches within each, widened because they are few, so it covers \
             how processes differ), in a freshly shuffled order, with the yardstick \
             timed in short blocks inside every batch (before each block of the KEM and after \
             the last). Rounds marked interfered (steal, irq, waiting for the bench core over \
             1% of the batch, CPU used outside the batches) are left out when at least {} clean \
             rounds exist. Where the yardstick's blocks fall into two clusters at least {} \
             apart (the host's two speed states), a batch is uncontended when all its blocks \
             lie in the faster one, and the medians are over the clean uncontended batches \
             when there are at least {}; otherwise the figure is flagged, as is one whose \
             rounds were mostly interfered. An operation whose interval is within the \
             precision after at least {} batches that count is timed in one round of {} from \
             then on (in every round again should it widen), so the budget goes to those still \
             above it.",
            crate::measure::rounds::MIN_ROUNDS,
            fmt::share(crate::measure::states::MIN_STATE_GAP),
            crate::measure::rounds::MIN_ROUNDS,
            crate::measure::rounds::FULL_ROUNDS,
            crate::measure::rounds::SPARSE_EVERY,
        ));
        host_states(doc, sub);
    }
}

/// The host's states per operation: the share of its batches in each, its figure within
/// each, and how many changed state during the batch.
fn host_states(doc: &mut Doc, sub: &SubmissionView) {
    let mut t = Table::new(&[
        "instance",
        "operation",
        "uncontended: batches, median (95% CI)",
        "contended: batches, median (95% CI)",
        "mixed",
        "contended / uncontended",
    ]);
    let cell = |f: Option<&crate::record::rounds::StateFigure>| match f {
        Some(f) => format!(
            "{}, {} ({}–{})",
            f.batches,
            fmt::cycles(f.estimate.median),
            fmt::cycles(f.estimate.ci_low),
            fmt::cycles(f.estimate.ci_high)
        ),
        None => DASH.to_string(),
    };
    let mut cut = None;
    for inst in listed(sub) {
        for (op, _) in inst.ops(StepKind::Time) {
            let Some(h) = inst
                .time_ok(op)
                .and_then(|td| td.rounds.as_ref())
                .and_then(|r| r.host.as_ref())
                .filter(|h| h.two_states)
            else {
                continue;
            };
            cut = cut.or(h
                .uncontended_yardstick
                .zip(h.contended_yardstick)
                .zip(h.uncontended_share));
            t.row(vec![
                code(&inst.id),
                op.name().to_string(),
                cell(h.uncontended.as_ref()),
                cell(h.contended.as_ref()),
                h.mixed.to_string(),
                match (&h.uncontended, &h.contended) {
                    (Some(u), Some(c)) if u.estimate.median > 0.0 => {
                        format!("{:.2}", c.estimate.median / u.estimate.median)
                    }
                    _ => DASH.to_string(),
                },
            ]);
        }
    }
    let Some(((u, c), share)) = cut else {
        return;
    };
    doc.h(3, "The host's states");
    doc.p(format!(
        "The yardstick inside the batches ran at {} cycles per call in the host's uncontended \
         state and {} in its contended one ({:.0}% of its blocks uncontended). Each \
         operation's clean batches in each state (a mixed batch changed state while it ran):",
        fmt::cycles(u),
        fmt::cycles(c),
        share * 100.0
    ));
    doc.table(t);
}

/// callgrind's instruction counts.
pub(super) fn instructions(doc: &mut Doc, sub: &SubmissionView) {
    if sub
        .instances
        .iter()
        .any(|i| i.ops(StepKind::Count).any(|(_, r)| r.is_some()))
    {
        doc.h(2, "Instruction counts");
        super::counts::instructions_table(doc, sub);
    }
}

/// How far the link orders of the timed objects spread (`layouts=`): per instance and
/// operation, each order's median per-call cycles over its shares of the batches, the
/// widest (max - min) / mean said in one sentence.
fn layout_spread(doc: &mut Doc, sub: &SubmissionView) {
    let med = |v: Vec<f64>| crate::measure::stats::median(&v).unwrap_or(f64::NAN);
    let mut widest: Option<(f64, String)> = None;
    let (mut timed, mut orders) = (0, 0);
    for inst in &sub.instances {
        for (op, r) in inst.ops(StepKind::Time) {
            let Some(t) = r.and_then(view::time_data) else {
                continue;
            };
            let k = t.output.layouts.len();
            let trials: Vec<_> = t
                .output
                .trials
                .iter()
                .filter(|tr| tr.layout_cycles.len() == k && tr.iters >= k as u64)
                .collect();
            if k < 2 || trials.is_empty() {
                continue;
            }
            let each: Vec<f64> = (0..k)
                .map(|j| {
                    med(trials
                        .iter()
                        .map(|tr| tr.layout_cycles[j] as f64 / (tr.iters / k as u64) as f64)
                        .collect())
                })
                .collect();
            let mean = each.iter().sum::<f64>() / k as f64;
            let lo = each.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = each.iter().copied().fold(0.0, f64::max);
            let spread = (hi - lo) / mean;
            timed += 1;
            orders = k;
            if widest.as_ref().is_none_or(|(w, _)| spread > *w) {
                widest = Some((spread, format!("{} {}", code(&inst.id), op.name())));
            }
        }
    }
    if let Some((w, what)) = widest {
        doc.p(format!(
            "Link orders: every timing figure is the mean over {orders} link orders of the \
             object, timed in every batch (listed below). Each order's median over its \
             shares of the batches spreads, from the fastest to the slowest, by up to {:.1}% \
             of their mean over the {timed} operations ({what}); the time records keep every \
             batch's share per order (`layout_cycles`).",
            w * 100.0
        ));
    }
}

/// The compile and link flags the timed objects were really built with, from the build
/// records (the generated version script named by its file name, not its path).
fn build_commands(doc: &mut Doc, sub: &SubmissionView) {
    let mut combos: BTreeMap<(String, String, String, String), Vec<String>> = BTreeMap::new();
    // Only instances with a successful timing record are objects timed.
    for inst in sub
        .instances
        .iter()
        .filter(|i| i.ops(StepKind::Time).any(|(op, _)| i.time_ok(op).is_some()))
    {
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
        // Where the linker put the KEM's code (run::steps::link).
        let placement = match (&b.anchor_object, b.layouts.len()) {
            (None, _) => String::new(),
            (Some(_), 0) => ", the KEM's objects after `ngcc_anchor.o` (page-anchored)".into(),
            (Some(_), n) => format!(
                ", the KEM's objects after `ngcc_anchor.o` (page-anchored) in {} link orders \
                 ({}), all timed in every batch: a figure is the mean over them",
                n + 1,
                std::iter::once("listed")
                    .chain(b.layouts.iter().map(|l| l.name.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        // System libraries (`link "crypto"`), and files the harness's own functions replace.
        let mut extra = String::new();
        if !b.libraries.is_empty() {
            extra.push_str(&format!(
                ", against {}",
                b.libraries
                    .iter()
                    .map(|l| format!("{} ({})", code(&l.real.display().to_string()), l.version))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if !b.left_out.is_empty() {
            extra.push_str(&format!(
                "; left out, as they define functions the harness provides: {}",
                b.left_out
                    .iter()
                    .map(|(f, defs)| format!(
                        "{} ({})",
                        code(
                            &f.file_name()
                                .map(|n| n.to_string_lossy().into_owned())
                                .unwrap_or_default()
                        ),
                        defs.join(", ")
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        combos
            .entry((
                format!("{} {}", b.cc, compile.collect::<Vec<_>>().join(" ")),
                link.collect::<Vec<_>>().join(" "),
                placement,
                extra,
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
            .map(|((compile, link, placement, extra), ids)| {
                let link = if link.is_empty() {
                    "flags not recorded".to_string()
                } else {
                    code(&link)
                };
                format!(
                    "{}: compiled with {}, linked with {}{extra}{placement}",
                    ids.iter().map(|i| code(i)).collect::<Vec<_>>().join(", "),
                    code(&compile),
                    link
                )
            })
            .collect(),
    );
}
