//! `compare`'s Markdown and CSV.

use std::collections::BTreeMap;

use super::super::csv::field;
use super::super::doc::{code, Doc, Table};
use super::super::format;
use super::{Basis, CodeVerdict, CompareRow, Comparison, NoAdjustment, Used, CODE_CHANGE};
use crate::measure::stats::{self, Change, Estimate};

/// `1.023 (1.011–1.035)`.
pub fn ratio_ci_text(e: &Estimate) -> String {
    format!("{:.3} ({:.3}–{:.3})", e.median, e.ci_low, e.ci_high)
}

/// Which estimate the verdicts used and why, in one line.
fn verdict_line(c: &Comparison) -> String {
    let used = |u: Used| {
        c.rows
            .iter()
            .filter(|r| r.estimates.verdict.is_some_and(|(_, x)| x == u))
            .count()
    };
    let (both, raw) = (used(Used::Both), used(Used::Raw));
    let mut why: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &c.rows {
        if let (Err(n), Some((_, Used::Raw))) = (&r.estimates.adjusted, r.estimates.verdict) {
            *why.entry(n.text()).or_default() += 1;
        }
    }
    let reasons = why
        .iter()
        .map(|(w, n)| format!("{w} ({n})"))
        .collect::<Vec<_>>()
        .join("; ");
    let hosts: Vec<f64> = c
        .rows
        .iter()
        .filter_map(|r| r.estimates.adjusted.as_ref().ok().map(|a| a.host_ratio))
        .collect();
    const BOTH: &str = "a verdict must hold on the raw ratio and on the ratio adjusted for the \
                        host's speed (yardstick B/A), else it is undecided: the host's speed \
                        change reaches each KEM by a factor of its own, between none of it \
                        (raw) and all of it (adjusted)";
    match (both, raw) {
        (0, 0) => "No operation has usable values on both sides.".to_string(),
        (_, 0) => format!(
            "Both runs timed the same yardstick object in their rounds (yardstick B/A \
             {:.3}), so {BOTH}.",
            stats::median(&hosts).unwrap_or(1.0)
        ),
        (0, _) => format!(
            "Verdicts use the raw ratio: {reasons}, so a host that ran at another speed \
             during one run is not taken out (`ngcc-pipe compare --measure` times both \
             objects now, in the same rounds)."
        ),
        _ => format!(
            "For {both} operations both runs timed the same yardstick object, so {BOTH}; \
             for {raw} the raw ratio decides ({reasons}: a host speed change stays in)."
        ),
    }
}

/// What each side's values are, where that is not rounds with their interference marks.
fn fallbacks(c: &Comparison) -> Vec<String> {
    let mut out = Vec::new();
    for (side, basis) in [
        ("A", c.rows.iter().map(|r| r.basis_a).collect::<Vec<_>>()),
        ("B", c.rows.iter().map(|r| r.basis_b).collect()),
    ] {
        let trials = basis
            .iter()
            .filter(|b| matches!(b, Basis::Trials { .. }))
            .count();
        if trials > 0 {
            out.push(format!(
                "{side}: {trials} operation{} timed in one block of trials, not in rounds \
                 (records from before timing sessions): the interval resamples those trials, \
                 and there is no yardstick.",
                if trials == 1 { " was" } else { "s were" }
            ));
        }
        let unmarked = basis
            .iter()
            .filter(|b| matches!(b, Basis::Rounds { marked: false, .. }))
            .count();
        if unmarked > 0 {
            out.push(format!(
                "{side}: `results.json` does not list which rounds were interfered (written \
                 before it did) for {unmarked} operation{}: every round is used.",
                if unmarked == 1 { "" } else { "s" }
            ));
        }
    }
    out
}

fn count(c: &Comparison, change: Change) -> usize {
    c.rows.iter().filter(|r| r.change() == Some(change)).count()
}

/// `rounds 140 (12 left out)` / `trials 5`.
fn basis_text(b: &Basis) -> String {
    match *b {
        Basis::Rounds {
            rounds, left_out, ..
        } if left_out > 0 => format!("{rounds} ({left_out})"),
        Basis::Rounds { rounds, .. } => rounds.to_string(),
        Basis::Trials { trials } => format!("{trials} trials"),
    }
}

pub(super) fn verdict_cell(r: &CompareRow) -> String {
    if r.host_moved() {
        let moved = |c: Change| matches!(c, Change::Slower | Change::Faster);
        let time = match (&r.estimates.raw, &r.estimates.adjusted) {
            (Some(raw), _) if moved(raw.change) => raw.change,
            (_, Ok(adj)) => adj.change,
            _ => Change::Undecided,
        };
        return format!(
            "undecided (time {} on the same code: run to run)",
            time.name()
        );
    }
    match (r.estimates.verdict, &r.estimates.raw, &r.estimates.adjusted) {
        (Some((c, Used::Raw)), _, _) => format!("{} (raw)", c.name()),
        (Some((c, Used::Both)), Some(raw), Ok(adj)) if raw.change != adj.change => format!(
            "{} (raw {}, adjusted {})",
            c.name(),
            raw.change.name(),
            adj.change.name()
        ),
        (Some((c, Used::Both)), _, _) => c.name().to_string(),
        (None, _, _) => "no usable rounds".to_string(),
    }
}

/// The comparison as Markdown.
pub fn compare_markdown(c: &Comparison) -> String {
    super::super::markdown::to_markdown(&compare_doc(c))
}

/// The comparison as a document: its explanation, the verdicts in numbers, the table.
fn compare_doc(c: &Comparison) -> Doc {
    let band = format::share(c.band);
    let mut d = Doc::default();
    d.h(
        1,
        format!("Comparison: {} (B) against {} (A)", c.system_b, c.system_a),
    );
    d.p(format!(
        "A: {}; B: {}. B/A = median per-op cycles of B / A over the rounds each run's \
         estimate used (interfered rounds left out when enough clean ones remain), with a 95% \
         bootstrap confidence interval (each run's rounds resampled on their own). Where a \
         run timed a member in several runner processes, its median is the mean of theirs, \
         and the interval resamples by process, then by batch, expanded for the few \
         processes. Host B/A = \
         the yardstick's median cycles B / A (a fixed workload timed in the same rounds as \
         every operation; above 1: the host ran slower during B). Adjusted B/A = the same \
         ratio on every round's cycles divided by the yardstick's cycles in that round, with \
         its own interval. Verdict: `slower` or `faster` when the whole interval lies beyond \
         1 ± {band} (the equivalence band, `--band`), `same` when it lies within it, \
         `undecided` when it crosses an edge of the band. Rounds: per side, with the \
         interfered ones left out in brackets.",
        code(&c.dir_a.display().to_string()),
        code(&c.dir_b.display().to_string()),
    ));
    d.p(verdict_line(c));
    let (slower, faster) = (count(c, Change::Slower), count(c, Change::Faster));
    d.p(format!(
        "{} of {} compared operations differ beyond ±{band}: {slower} slower, {faster} \
         faster; {} the same within ±{band}, {} undecided.",
        slower + faster,
        c.rows.len(),
        count(c, Change::Same),
        count(c, Change::Undecided),
    ));
    let notes = fallbacks(c);
    if !notes.is_empty() {
        d.p("Fallbacks:");
        d.list(notes);
    }
    let counted = c.rows.iter().any(|r| r.instructions.is_some());
    if counted {
        d.p(instructions_line(c));
    }
    d.table(compare_table(c, counted));
    for (label, list) in [("A", &c.only_a), ("B", &c.only_b)] {
        if !list.is_empty() {
            d.p(format!("Measured only in {label}:"));
            d.list(list.iter().map(|k| code(k)).collect());
        }
    }
    d
}

/// What the instruction ratios say, in one paragraph.
fn instructions_line(c: &Comparison) -> String {
    let code = |v| {
        c.rows
            .iter()
            .filter(|r| r.code_verdict() == Some(v))
            .count()
    };
    let moved = c.rows.iter().filter(|r| r.host_moved()).count();
    format!(
        "Instructions B/A: mean instructions per operation counted by callgrind \
         (`count` step) on both sides; deterministic, so exact, with a verdict of its own: \
         `code changed` at {} or more. {} of them: code changed, {} the same code.{}",
        format::share(CODE_CHANGE),
        code(CodeVerdict::CodeChanged),
        code(CodeVerdict::SameCode),
        if moved > 0 {
            format!(
                " For {moved} operation{} the time moved beyond the band but the \
                 instructions did not: the host moved, not the code, and the verdict is \
                 undecided (the same object moves more from run to run, with its process's \
                 memory layout and the host, than one run's interval says).",
                if moved == 1 { "" } else { "s" }
            )
        } else {
            String::new()
        }
    )
}

/// One row per compared operation; the instruction ratio's column when either side counted.
fn compare_table(c: &Comparison, counted: bool) -> Table {
    let mut head = vec![
        "submission",
        "instance",
        "op",
        "rounds A",
        "rounds B",
        "median A",
        "median B",
        "B/A (95% CI)",
        "host B/A",
        "adjusted B/A (95% CI)",
        "verdict",
    ];
    if counted {
        head.push("instructions B/A");
    }
    let mut t = Table::new(&head);
    for r in &c.rows {
        let e = &r.estimates;
        let mut cells = vec![
            r.submission.clone(),
            code(&r.instance),
            r.op.to_string(),
            basis_text(&r.basis_a),
            basis_text(&r.basis_b),
        ];
        match &e.raw {
            Some(x) => cells.extend([
                format::cycles(x.median_a),
                format::cycles(x.median_b),
                ratio_ci_text(&x.ratio),
            ]),
            None => cells.extend(["–".into(), "–".into(), "–".into()]),
        }
        match &e.adjusted {
            Ok(a) => cells.extend([format!("{:.3}", a.host_ratio), ratio_ci_text(&a.ratio)]),
            Err(_) => cells.extend(["–".into(), "–".into()]),
        }
        cells.push(verdict_cell(r));
        if counted {
            cells.push(match (r.instruction_ratio(), r.code_verdict()) {
                (Some(x), Some(v)) if r.host_moved() => {
                    format!("{x:.4} ({}: the host moved)", v.name())
                }
                (Some(x), Some(v)) => format!("{x:.4} ({})", v.name()),
                _ => "–".to_string(),
            });
        }
        t.row(cells);
    }
    t
}

/// The comparison as CSV: one line per operation; ratios with six decimals, cycles with
/// one; `verdict_from` is `raw and adjusted` or `raw`, `no_adjustment` why there
/// is no adjusted ratio.
pub fn compare_csv(c: &Comparison) -> String {
    let mut o = String::from(
        "system_a,system_b,submission,instance,op,rounds_a,rounds_b,used_a,used_b,\
         median_cycles_a,median_cycles_b,ratio,ci_low,ci_high,host_ratio,adjusted_ratio,\
         adjusted_ci_low,adjusted_ci_high,band,verdict,verdict_from,no_adjustment,\
         instructions_a,instructions_b,instruction_ratio,code_verdict,host_moved\n",
    );
    let f6 = |x: f64| format!("{x:.6}");
    let rounds = |b: &Basis| match *b {
        Basis::Rounds { rounds, .. } => rounds,
        Basis::Trials { trials } => trials,
    };
    for r in &c.rows {
        let e = &r.estimates;
        let raw = e.raw.as_ref();
        let adj = e.adjusted.as_ref().ok();
        let cells = [
            c.system_a.clone(),
            c.system_b.clone(),
            r.submission.clone(),
            r.instance.clone(),
            r.op.name().to_string(),
            rounds(&r.basis_a).to_string(),
            rounds(&r.basis_b).to_string(),
            r.basis_a.used().to_string(),
            r.basis_b.used().to_string(),
            raw.map(|x| format!("{:.1}", x.median_a))
                .unwrap_or_default(),
            raw.map(|x| format!("{:.1}", x.median_b))
                .unwrap_or_default(),
            raw.map(|x| f6(x.ratio.median)).unwrap_or_default(),
            raw.map(|x| f6(x.ratio.ci_low)).unwrap_or_default(),
            raw.map(|x| f6(x.ratio.ci_high)).unwrap_or_default(),
            adj.map(|a| f6(a.host_ratio)).unwrap_or_default(),
            adj.map(|a| f6(a.ratio.median)).unwrap_or_default(),
            adj.map(|a| f6(a.ratio.ci_low)).unwrap_or_default(),
            adj.map(|a| f6(a.ratio.ci_high)).unwrap_or_default(),
            f6(c.band),
            e.verdict
                .map(|v| v.0.name())
                .unwrap_or_default()
                .to_string(),
            e.verdict
                .map(|v| v.1.name())
                .unwrap_or_default()
                .to_string(),
            e.adjusted
                .as_ref()
                .err()
                .map(|n: &NoAdjustment| n.text())
                .unwrap_or_default()
                .to_string(),
            r.instructions
                .map(|(a, _)| format!("{a:.1}"))
                .unwrap_or_default(),
            r.instructions
                .map(|(_, b)| format!("{b:.1}"))
                .unwrap_or_default(),
            r.instruction_ratio().map(f6).unwrap_or_default(),
            r.code_verdict()
                .map(|v| v.name().to_string())
                .unwrap_or_default(),
            if r.code_verdict().is_some() {
                r.host_moved().to_string()
            } else {
                String::new()
            },
        ];
        o.push_str(&cells.iter().map(|s| field(s)).collect::<Vec<_>>().join(","));
        o.push('\n');
    }
    o
}
