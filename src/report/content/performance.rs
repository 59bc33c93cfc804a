//! Section 4: performance (timing tables, rounds, build commands).

use super::*;

/// Rows of instances x operations whose timing record is not ok, as list items.
pub(super) fn not_timed(sub: &SubmissionView) -> Vec<String> {
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

pub(super) fn performance(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "4. Performance");
    if let Some(why) = emulated(sub) {
        doc.p(format!("Not timed: {why}."));
        return;
    }
    let any = sub
        .instances
        .iter()
        .any(|i| i.ops(StepKind::Time).any(|(_, r)| r.is_some()));
    if let Some(line) = did_not_run(view, StepKind::Time, any, "no timing") {
        doc.p(line);
        super::counts::instructions_table(doc, sub);
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
    let mut yardstick = None;
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
            // In rounds, "CI wider than the precision" below says it; the CV of rounds
            // taken across a whole session measures the host's drift, not this estimate.
            if s.unstable && td.rounds.is_none() {
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
            if yardstick.is_none() {
                yardstick = td.rounds.as_ref().and_then(|r| r.yardstick.as_ref());
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
             \"unstable\" marks a CV above 2% (trials timed in one block); outlier trials have a modified Z-score above 3.5; \
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
                 confidence interval; rounds marked interfered (steal, irq, waiting \
                 for the bench core over 1% of the batch, or a slow phase of the host: the \
                 round's yardstick batch more than {} robust standard deviations ({} × \
                 1.4826 MAD) and at least {} above its median) are left out when at least {} \
                 clean rounds exist; trials are the rounds. An operation whose interval is \
                 within the precision after at least {} rounds that count is timed in one \
                 round of {} from then on (in every round again should it widen), so the \
                 budget goes to those still above it.{}",
                crate::measure::interference::SLOW_K,
                crate::measure::interference::SLOW_K,
                fmt::share(crate::measure::interference::SLOW_FLOOR),
                crate::measure::rounds::MIN_ROUNDS,
                crate::measure::rounds::FULL_ROUNDS,
                crate::measure::rounds::SPARSE_EVERY,
                if not_reached {
                    " \"CI wider than the precision\": the time budget ran out first."
                } else {
                    ""
                }
            ));
            if let Some(y) = yardstick {
                doc.p(format!(
                    "Host speed: the yardstick {} (a fixed workload of Keccak-f[1600] \
                     permutations and a polynomial multiplication, built into ngcc-pipe and \
                     compiled with `-O2`; object SHA-256 {}) was timed in the same rounds: {} \
                     cycles per call (median over the session's {} rounds). `ngcc-pipe compare` divides every \
                     round by it when both runs timed the same yardstick, so that a host that \
                     ran slower in one run is not taken for slower code.",
                    code(&y.name),
                    code(&y.object_sha256[..12.min(y.object_sha256.len())]),
                    fmt::cycles(crate::measure::stats::median(&y.values).unwrap_or(0.0)),
                    y.values.len(),
                ));
            }
        }
    }
    layout_spread(doc, sub);
    super::profiles::profiles_compared(doc, sub);
    super::counts::instructions_table(doc, sub);
    build_commands(doc, sub);
    let slow = categories::slower_than_clean(&categories::speedups(sub));
    if !slow.is_empty() {
        doc.p("Optimized implementation slower than its clean one:");
        doc.list(slow);
    }
    let missing = not_timed(sub);
    if !missing.is_empty() {
        doc.p("Not timed:");
        doc.list(missing);
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
            "Link orders: every figure above is the mean over {orders} link orders of the \
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
pub(super) fn build_commands(doc: &mut Doc, sub: &SubmissionView) {
    let mut combos: BTreeMap<(String, String, String, String), Vec<String>> = BTreeMap::new();
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
