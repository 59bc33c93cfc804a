//! `ngcc-pipe history DIR...`: how each instance and operation moved over a series of
//! campaigns (a submitter's revised packages, re-runs weeks apart), read from their records
//! or `results.json` only.
//!
//! Per row (submission, instance, operation) and campaign: the **adjusted median**, the
//! median over the campaign's rounds of the operation's cycles divided by the yardstick's
//! cycles in the same round, times the yardstick's median cycles in the row's first
//! campaign, so that every campaign is shown in the cycles of the first one's host speed.
//! A row whose campaigns did not all time the same yardstick object shows raw medians
//! instead, and says so. Each step from one campaign to the next, and the last against the
//! first, is a ratio with its 95% bootstrap interval judged against the equivalence band as
//! by `compare` ([`crate::measure::stats::ratio_ci`], [`crate::measure::stats::band_verdict`]):
//! with a common yardstick the verdict must hold on the raw medians' ratio too
//! ([`super::compare::both`]).

use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::compare::{
    both, key_text, load, ratio_ci_text, sorted_keys, NoAdjustment, Series, Used, SEED,
};
use super::csv::field;
use super::doc::{code, Doc, Table};
use super::format;
use crate::measure::stats::{self, band_verdict, ratio_ci_grouped, Change, Estimate};
use crate::model::Op;

/// One campaign of the series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Campaign {
    pub dir: PathBuf,
    pub system: String,
    pub started: Option<String>,
}

/// A ratio between two campaigns (later / earlier) and its verdict.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub ratio: Estimate,
    pub change: Change,
}

/// One instance and operation over the campaigns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryRow {
    pub submission: String,
    pub instance: String,
    pub op: Op,
    /// Adjusted medians, or raw ones (with why) when the campaigns do not share a yardstick.
    pub used: Used,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_because: Option<NoAdjustment>,
    /// Per campaign: the median (`None` where the campaign did not time it).
    pub medians: Vec<Option<f64>>,
    /// Per campaign: the step from the previous campaign that timed it (`None` for the
    /// first, and where there is no value).
    pub steps: Vec<Option<Step>>,
    /// The last campaign that timed it against the first (when two did).
    pub from_first: Option<Step>,
}

/// The result of `history`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    pub campaigns: Vec<Campaign>,
    pub band: f64,
    pub rows: Vec<HistoryRow>,
}

/// The values a row's estimates use in one campaign: per-round cycles relative to the
/// yardstick, or the raw cycles.
fn values(s: &Series, used: Used) -> Vec<f64> {
    match used {
        Used::Both => s.relative().map(|(_, r)| r).unwrap_or_default(),
        Used::Raw => s.values.clone(),
    }
}

/// Adjusted when every campaign that timed the row timed the same yardstick object.
fn row_basis(present: &[&Series]) -> Result<(), NoAdjustment> {
    let ids: Vec<Option<&str>> = present
        .iter()
        .map(|s| s.yardstick.as_ref().map(|(id, _)| id.as_str()))
        .collect();
    if ids.iter().any(Option::is_none) {
        let all = ids.iter().all(Option::is_none);
        return Err(if all {
            NoAdjustment::MissingBoth
        } else if ids[0].is_none() {
            NoAdjustment::MissingA
        } else {
            NoAdjustment::MissingB
        });
    }
    if ids.windows(2).any(|w| w[0] != w[1]) {
        return Err(NoAdjustment::Different);
    }
    Ok(())
}

/// The row of one key over the campaigns' series (`None` where a campaign did not time it).
pub fn history_row(key: &super::compare::Key, series: &[Option<&Series>], band: f64) -> HistoryRow {
    let present: Vec<&Series> = series.iter().flatten().copied().collect();
    let basis = row_basis(&present);
    // With a common yardstick each step's verdict must hold on the adjusted and on the raw
    // values alike (`compare::both`: the host's change reaches each KEM by a share of its own).
    let used = if basis.is_ok() { Used::Both } else { Used::Raw };
    // Adjusted medians are shown in the cycles of the first campaign's host speed.
    let scale = match used {
        Used::Both => present
            .first()
            .and_then(|s| s.yardstick.as_ref())
            .and_then(|(_, y)| stats::median(y))
            .unwrap_or(1.0),
        Used::Raw => 1.0,
    };
    let vals: Vec<Option<Vec<f64>>> = series.iter().map(|s| s.map(|s| values(s, used))).collect();
    // Each campaign's values by the runner process that timed them.
    let by = |i: usize| series[i].map_or(&[][..], |s| s.processes.as_slice());
    let medians = (vals.iter().enumerate())
        .map(|(i, v)| {
            let v = v.as_ref()?;
            stats::mean_of_medians(v, by(i)).map(|m| m * scale)
        })
        .collect();
    let raws: Vec<Option<&[f64]>> = series
        .iter()
        .map(|s| s.map(|s| s.values.as_slice()))
        .collect();
    let step = |from: usize, to: usize| {
        let (f, t) = (vals[from].as_deref()?, vals[to].as_deref()?);
        let (pf, pt) = (by(from), by(to));
        let ratio = ratio_ci_grouped((f, pf), (t, pt), SEED, stats::BOOTSTRAP_RESAMPLES)?;
        let mut change = band_verdict(&ratio, band);
        if used == Used::Both {
            let (rf, rt) = (raws[from]?, raws[to]?);
            let raw = ratio_ci_grouped((rf, pf), (rt, pt), SEED, stats::BOOTSTRAP_RESAMPLES)?;
            change = both(band_verdict(&raw, band), change);
        }
        Some(Step { change, ratio })
    };
    let mut steps = Vec::with_capacity(vals.len());
    let mut previous: Option<usize> = None;
    for (i, v) in vals.iter().enumerate() {
        steps.push(previous.and_then(|p| step(p, i)));
        if v.is_some() {
            previous = Some(i);
        }
    }
    let given: Vec<usize> = (0..vals.len()).filter(|&i| vals[i].is_some()).collect();
    let from_first = match given.as_slice() {
        [first, .., last] => step(*first, *last),
        _ => None,
    };
    HistoryRow {
        submission: key.0.clone(),
        instance: key.1.clone(),
        op: key.2,
        used,
        raw_because: basis.err(),
        medians,
        steps,
        from_first,
    }
}

/// The history of the output folders `dirs`, in the order given.
pub fn history(dirs: &[PathBuf], band: f64) -> io::Result<History> {
    let runs = dirs
        .iter()
        .map(|d| load(d))
        .collect::<io::Result<Vec<_>>>()?;
    let keys = sorted_keys(runs.iter().flat_map(|r| r.series.keys()));
    let rows = keys
        .into_iter()
        .map(|k| {
            let series: Vec<Option<&Series>> = runs.iter().map(|r| r.series.get(k)).collect();
            history_row(k, &series, band)
        })
        .collect();
    Ok(History {
        campaigns: runs
            .into_iter()
            .map(|r| Campaign {
                dir: r.dir,
                system: r.system,
                started: r.started,
            })
            .collect(),
        band,
        rows,
    })
}

/// `+4.1%` (ratio 1.041).
fn change_text(ratio: f64) -> String {
    format!("{:+.1}%", (ratio - 1.0) * 100.0)
}

/// `▲` slower / `▼` faster beyond the band, nothing otherwise.
fn mark(c: Change) -> &'static str {
    match c {
        Change::Slower => " ▲",
        Change::Faster => " ▼",
        Change::Same | Change::Undecided => "",
    }
}

/// Why a row is raw, in a history's words.
fn raw_text(n: NoAdjustment) -> &'static str {
    match n {
        NoAdjustment::MissingA => "the first campaign's records have no yardstick",
        NoAdjustment::MissingB => "a later campaign's records have no yardstick",
        NoAdjustment::MissingBoth => "no campaign's records have a yardstick",
        NoAdjustment::Different => "the campaigns timed different yardstick objects",
    }
}

/// The history as Markdown.
pub fn history_markdown(h: &History) -> String {
    super::markdown::to_markdown(&history_doc(h))
}

/// The history as a document: the campaigns, how to read a cell, the rows.
fn history_doc(h: &History) -> Doc {
    let band = format::share(h.band);
    let mut d = Doc::default();
    d.h(1, format!("History of {} campaigns", h.campaigns.len()));
    let mut t = Table::new(&["#", "folder", "system", "started"]);
    for (i, c) in h.campaigns.iter().enumerate() {
        t.row(vec![
            (i + 1).to_string(),
            code(&c.dir.display().to_string()),
            c.system.clone(),
            c.started.as_deref().map(format::utc).unwrap_or("–".into()),
        ]);
    }
    d.table(t);
    d.p(format!(
        "Each cell is the median cycles per operation of that campaign, adjusted for the \
         host's speed: the median over its rounds of the cycles divided by the yardstick's \
         cycles in the same round, times the yardstick's median cycles in the row's first \
         campaign (the figures are in that campaign's cycles). Rows whose campaigns did not \
         all time the same yardstick object give raw medians (basis `raw`). In brackets: the \
         change from the previous campaign; ▲ / ▼ mark a significant step, slower / faster: \
         its 95% bootstrap interval lies wholly beyond 1 ± {band} (`--band`). Last / first: \
         the last campaign against the first, with its interval and verdict."
    ));
    let significant = h
        .rows
        .iter()
        .flat_map(|r| r.steps.iter().flatten())
        .filter(|s| s.change.significant())
        .count();
    d.p(format!(
        "{significant} significant step{} over {} rows.",
        if significant == 1 { "" } else { "s" },
        h.rows.len()
    ));
    d.table(rows_table(h));
    let raw: Vec<String> = h
        .rows
        .iter()
        .filter_map(|r| {
            r.raw_because.map(|n| {
                format!(
                    "{}: {}",
                    code(&key_text(&(r.submission.clone(), r.instance.clone(), r.op))),
                    raw_text(n)
                )
            })
        })
        .collect();
    if !raw.is_empty() {
        d.p("Raw medians (no common yardstick):");
        d.list(raw);
    }
    d
}

/// One row per instance and operation, a column per campaign, then last against first.
fn rows_table(h: &History) -> Table {
    let numbers: Vec<String> = (1..=h.campaigns.len()).map(|i| format!("#{i}")).collect();
    let mut head = vec!["submission", "instance", "op", "basis"];
    head.extend(numbers.iter().map(String::as_str));
    head.push("last / first (95% CI)");
    let mut t = Table::new(&head);
    for r in &h.rows {
        let mut cells = vec![
            r.submission.clone(),
            code(&r.instance),
            r.op.to_string(),
            r.used.name().to_string(),
        ];
        for (m, s) in r.medians.iter().zip(&r.steps) {
            cells.push(match (m, s) {
                (None, _) => "–".to_string(),
                (Some(m), None) => format::cycles(*m),
                (Some(m), Some(s)) => format!(
                    "{} ({}{})",
                    format::cycles(*m),
                    change_text(s.ratio.median),
                    mark(s.change)
                ),
            });
        }
        cells.push(match &r.from_first {
            Some(s) => format!("{} {}", ratio_ci_text(&s.ratio), s.change.name()),
            None => "–".to_string(),
        });
        t.row(cells);
    }
    t
}

/// The history as CSV, one line per row and campaign: `index` from 1, the median, the step
/// from the previous campaign and the last-against-first ratio (on the last campaign's line).
pub fn history_csv(h: &History) -> String {
    let mut o = String::from(
        "submission,instance,op,campaign,dir,system,basis,median_cycles,step_ratio,\
         step_ci_low,step_ci_high,step_verdict,from_first_ratio,from_first_ci_low,\
         from_first_ci_high,from_first_verdict\n",
    );
    let f6 = |x: f64| format!("{x:.6}");
    for r in &h.rows {
        let last = r.medians.iter().rposition(Option::is_some);
        for (i, (c, (m, s))) in h
            .campaigns
            .iter()
            .zip(r.medians.iter().zip(&r.steps))
            .enumerate()
        {
            let Some(m) = m else { continue };
            let first = r.from_first.filter(|_| Some(i) == last);
            let cells = [
                r.submission.clone(),
                r.instance.clone(),
                r.op.name().to_string(),
                (i + 1).to_string(),
                c.dir.display().to_string(),
                c.system.clone(),
                r.used.name().to_string(),
                format!("{m:.1}"),
                s.map(|s| f6(s.ratio.median)).unwrap_or_default(),
                s.map(|s| f6(s.ratio.ci_low)).unwrap_or_default(),
                s.map(|s| f6(s.ratio.ci_high)).unwrap_or_default(),
                s.map(|s| s.change.name().to_string()).unwrap_or_default(),
                first.map(|s| f6(s.ratio.median)).unwrap_or_default(),
                first.map(|s| f6(s.ratio.ci_low)).unwrap_or_default(),
                first.map(|s| f6(s.ratio.ci_high)).unwrap_or_default(),
                first
                    .map(|s| s.change.name().to_string())
                    .unwrap_or_default(),
            ];
            o.push_str(&cells.iter().map(|s| field(s)).collect::<Vec<_>>().join(","));
            o.push('\n');
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::compare::Basis;

    fn series(values: Vec<f64>, y: Option<(&str, Vec<f64>)>) -> Series {
        Series {
            basis: Basis::Rounds {
                rounds: values.len(),
                left_out: 0,
                marked: true,
            },
            values,
            yardstick: y.map(|(id, v)| (id.to_string(), v)),
            processes: Vec::new(),
        }
    }

    #[test]
    fn adjusted_medians_are_in_the_first_campaigns_cycles_and_steps_are_judged() {
        // Campaign 1: yardstick 100, op 1000 (10 yardsticks). Campaign 2: host 10% slower
        // (yardstick 110), same code (op 1100): adjusted 1000, raw 1.10: undecided (how much
        // of the host's change reached the KEM is not known). Campaign 3: missing.
        // Campaign 4: host as 1, code 5% slower (1050): adjusted 1.05 but raw 0.955 from
        // campaign 2, undecided again; against campaign 1 both say 1.05: slower.
        let wobble = |base: f64| -> Vec<f64> {
            (0..30)
                .map(|i| base * (1.0 + 0.001 * ((i % 5) as f64 - 2.0)))
                .collect()
        };
        let s1 = series(wobble(1000.0), Some(("y", vec![100.0; 30])));
        let s2 = series(wobble(1100.0), Some(("y", vec![110.0; 30])));
        let s4 = series(wobble(1050.0), Some(("y", vec![100.0; 30])));
        let key = (
            "ml-kem".to_string(),
            "ML-KEM-512-clean".to_string(),
            Op::Keygen,
        );
        let r = history_row(&key, &[Some(&s1), Some(&s2), None, Some(&s4)], 0.02);
        assert_eq!(r.used, Used::Both);
        let m: Vec<Option<f64>> = r.medians.iter().map(|m| m.map(|x| x.round())).collect();
        assert_eq!(m, [Some(1000.0), Some(1000.0), None, Some(1050.0)]);
        assert_eq!(r.steps[0], None);
        assert_eq!(r.steps[1].unwrap().change, Change::Undecided);
        assert_eq!(r.steps[2], None);
        let up = r.steps[3].unwrap();
        assert!((up.ratio.median - 1.05).abs() < 1e-9 && up.change == Change::Undecided);
        let first = r.from_first.unwrap();
        assert!((first.ratio.median - 1.05).abs() < 1e-9 && first.change == Change::Slower);
        // The same host throughout: the adjusted and raw steps agree.
        let s5 = series(wobble(1000.0), Some(("y", vec![100.0; 30])));
        let r = history_row(&key, &[Some(&s1), Some(&s5), Some(&s4)], 0.02);
        let changes: Vec<_> = r.steps.iter().map(|s| s.map(|s| s.change)).collect();
        assert_eq!(changes, [None, Some(Change::Same), Some(Change::Slower)]);
        // Without the yardstick in one campaign the row is raw, and says why.
        let bare = series(wobble(1100.0), None);
        let r = history_row(&key, &[Some(&s1), Some(&bare)], 0.02);
        assert_eq!(
            (r.used, r.raw_because),
            (Used::Raw, Some(NoAdjustment::MissingB))
        );
        assert_eq!(r.medians[1].map(f64::round), Some(1100.0));
        assert_eq!(r.steps[1].unwrap().change, Change::Slower);
        let other = series(wobble(1000.0), Some(("y2", vec![100.0; 30])));
        let r = history_row(&key, &[Some(&s1), Some(&other)], 0.02);
        assert_eq!(r.raw_because, Some(NoAdjustment::Different));
        // One campaign only: nothing to compare.
        assert_eq!(history_row(&key, &[Some(&s1), None], 0.02).from_first, None);
    }
}
