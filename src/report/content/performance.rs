//! Section 4: performance (timing tables, rounds, build commands).

use super::*;
use crate::record::TimeData;

/// Rows of instances x operations whose timing record is not ok, as list items.
pub(super) fn not_timed(sub: &SubmissionView) -> Vec<String> {
    let mut items = Vec::new();
    for inst in listed(sub) {
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

/// The headline figure of a timing record: the session's estimate over the per-round cycles
/// (the mean of its runner processes' medians) with its 95% CI when it was timed in a
/// session, else the mean over the trials (no interval).
pub(super) fn headline(td: &TimeData) -> (f64, Option<(f64, f64)>) {
    let s = &td.summary;
    match (s.median_cycles, &td.rounds) {
        (Some(m), Some(r)) => (m, Some((r.estimate.ci_low, r.estimate.ci_high))),
        _ => (s.mean_cycles, None),
    }
}

/// Nanoseconds of `cycles` counter ticks at the record's measured counter rate (else at the
/// rate of its mean).
fn ns_of(td: &TimeData, cycles: f64) -> f64 {
    let s = &td.summary;
    match s.counter_ghz {
        Some(g) if g > 0.0 => cycles / g,
        _ if s.mean_cycles > 0.0 => cycles * s.mean_ns / s.mean_cycles,
        _ => s.mean_ns,
    }
}

/// The lists under section 4's table of the rows marked ⚠ not trusted: figures that
/// contradict each other (`report::integrity`), and figures that do not earn their interval.
fn not_trusted(doc: &mut Doc, contradicted: Vec<String>, flagged: Vec<String>) {
    if !contradicted.is_empty() {
        doc.p(
            "⚠ not trusted: the figures of these operations contradict each other (timed \
             cycles against counted instructions, or batches against single calls; see \
             docs/figures.md), so neither their time nor their instruction count nor their \
             constant-time verdict is a measurement of the code as submitted:",
        );
        doc.list(contradicted);
    }
    if !flagged.is_empty() {
        doc.p(
            "⚠ not trusted: the figure does not earn its interval, whatever its width \
             (compare it with care):",
        );
        doc.list(flagged);
    }
}

/// Section 4 of the body: the seed's columns with the headline figure and its CI, one
/// sentence saying which statistic it is, and the rows that missed the precision target.
pub(super) fn performance(
    doc: &mut Doc,
    view: &CampaignView,
    sub: &SubmissionView,
    appendix_href: &str,
) {
    doc.h(2, "4. Performance");
    if let Some(why) = emulated(sub) {
        doc.p(format!("Not timed: {why}."));
        return;
    }
    let any = listed(sub).any(|i| i.ops(StepKind::Time).any(|(_, r)| r.is_some()));
    if let Some(line) = did_not_run(view, StepKind::Time, any, "no timing") {
        doc.p(line);
        return;
    }
    let in_rounds = listed(sub).any(|i| {
        i.ops(StepKind::Time)
            .any(|(op, _)| i.time_ok(op).is_some_and(|t| t.rounds.is_some()))
    });
    let mut t = timing_table(in_rounds);
    let seen = timing_rows(&mut t, sub);
    if t.rows.is_empty() {
        doc.p("No operation was timed successfully.");
    } else {
        doc.table(t);
        doc.p(headline_note(&seen, in_rounds, appendix_href));
        not_trusted(doc, seen.contradicted, seen.flagged);
        wide_note(doc, sub, &seen.wide);
    }
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

/// The timing table's head: medians over rounds, or means over trials.
fn timing_table(in_rounds: bool) -> Table {
    Table::new(&[
        "instance",
        "operation",
        if in_rounds {
            "median cycles (95% CI)"
        } else {
            "mean cycles"
        },
        if in_rounds {
            "median time"
        } else {
            "mean time"
        },
        "ops/s",
        if in_rounds {
            "n (rounds × iters)"
        } else {
            "n (trials × iters)"
        },
    ])
}

/// What the timing rows saw, for the sentences under the table.
#[derive(Default)]
struct Seen {
    /// The cycle counters used, in the order met.
    counters: Vec<String>,
    /// The most link orders an object was timed in.
    orders: usize,
    /// Operations whose interval missed the precision target, with its half-width.
    wide: Vec<String>,
    /// Operations the rounds flagged, with the flags.
    flagged: Vec<String>,
    /// Operations whose figures contradict each other, with the reason.
    contradicted: Vec<String>,
    /// Whether the host switched between two speed states during a session.
    within_state: bool,
}

/// A row per timed operation of each listed instance.
fn timing_rows(t: &mut Table, sub: &SubmissionView) -> Seen {
    let mut seen = Seen::default();
    for inst in listed(sub) {
        for (op, _) in inst.ops(StepKind::Time) {
            let Some(td) = inst.time_ok(op) else {
                continue;
            };
            let s = &td.summary;
            if !seen.counters.contains(&td.output.counter) {
                seen.counters.push(td.output.counter.clone());
            }
            seen.orders = seen.orders.max(td.output.layouts.len());
            let (cycles, ci) = headline(td);
            let ns = ns_of(td, cycles);
            let untrusted = inst.untrusted(op);
            let flags = td.rounds.as_ref().map_or(&[][..], |r| &r.flags[..]);
            let mark = if let Some(u) = &untrusted {
                seen.contradicted
                    .push(format!("{} {}: {}", code(&inst.id), op.name(), u.reason()));
                " ⚠ not trusted"
            } else if !flags.is_empty() {
                seen.flagged.push(format!(
                    "{} {}: {}",
                    code(&inst.id),
                    op.name(),
                    flags.join("; ")
                ));
                " ⚠ not trusted"
            } else {
                ""
            };
            seen.within_state |= td
                .rounds
                .as_ref()
                .and_then(|r| r.host.as_ref())
                .is_some_and(|h| h.two_states);
            if let Some(r) = td
                .rounds
                .as_ref()
                .filter(|r| !r.reached && r.flags.is_empty() && untrusted.is_none())
            {
                seen.wide.push(format!(
                    "{} {} (±{:.1}%)",
                    code(&inst.id),
                    op.name(),
                    r.estimate.rel_half_width() * 100.0
                ));
            }
            t.row(vec![
                code(&inst.id),
                op.name().to_string(),
                match ci {
                    Some((lo, hi)) => format!(
                        "{} ({}–{}){mark}",
                        fmt::cycles(cycles),
                        fmt::cycles(lo),
                        fmt::cycles(hi)
                    ),
                    None => format!("{}{mark}", fmt::cycles(cycles)),
                },
                fmt::time_ns(ns),
                fmt::ops_per_s(if ns > 0.0 { 1e9 / ns } else { 0.0 }),
                format!("{} ({} × {})", s.n, s.trials, s.iters),
            ]);
        }
    }
    seen
}

/// The sentence saying which statistic the headline figure is, in which ticks, over how
/// many link orders.
fn headline_note(seen: &Seen, in_rounds: bool, appendix_href: &str) -> String {
    let counter = seen
        .counters
        .iter()
        .map(|c| code(c))
        .collect::<Vec<_>>()
        .join(", ");
    let orders = seen.orders;
    let orders = if orders > 1 {
        format!(
            "; every batch times the object in all its {orders} link orders and a \
             figure is the mean over them"
        )
    } else {
        String::new()
    };
    if in_rounds {
        format!(
            "Headline figure, one per operation: the median over the timing session's \
             rounds of the per-call cycles ({counter} ticks), with its 95% bootstrap \
             confidence interval{orders}.{} Time is cycles over the measured counter rate; \
             ops/s is one over time. The {} gives the distributions, single-call samples, \
             outliers, the host's states and link-order spread.",
            if seen.within_state {
                " The host switched between two speed states during the session (the \
                 yardstick timed inside every batch says which): the median is over the \
                 clean rounds of its uncontended state, the one closest to a dedicated \
                 core."
            } else {
                ""
            },
            link("appendix", appendix_href)
        )
    } else {
        format!(
            "Headline figure, one per operation: the mean of the per-call cycles \
             ({counter} ticks) over all trials (total ticks / total iterations){orders}. \
             Time is cycles over the measured counter rate; ops/s is one over time. The \
             {} gives the distributions, single-call samples, outliers and link-order \
             spread.",
            link("appendix", appendix_href)
        )
    }
}

/// The operations whose interval is wider than the precision target, if any.
fn wide_note(doc: &mut Doc, sub: &SubmissionView, wide: &[String]) {
    if wide.is_empty() {
        return;
    }
    let precision = listed(sub)
        .flat_map(|i| i.ops(StepKind::Time).filter_map(|(op, _)| i.time_ok(op)))
        .find_map(|td| td.rounds.as_ref().map(|r| r.precision))
        .unwrap_or(0.0);
    doc.p(format!(
        "Interval wider than the ±{:.1}% precision target when the time budget ran \
         out (achieved half-width): {}.",
        precision * 100.0,
        wide.join(", ")
    ));
}
