//! One output folder as `compare` and `history` read it: per instance and operation, the
//! per-round cycles an estimate uses and the yardstick's cycles in the same rounds, from
//! `reports/results.json` or, when that file is absent, from the records under `records/`.
//!
//! The rounds used are the record's: the list it keeps (`used`, `used_trials`: with two host
//! states, the clean rounds of the uncontended one), or in records from before that list,
//! those not marked interfered when at least [`crate::measure::rounds::MIN_ROUNDS`] clean
//! ones exist, else all ([`rounds_used`]). Older files say less, and
//! what is used instead is kept in [`Basis`] so the comparison can say it: a `results.json`
//! from before the marks were listed uses every round; records from before timing sessions
//! have trials timed in one block and no yardstick.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::measure::rounds::rounds_used;
use crate::measure::stats;
use crate::model::{Op, StepKind};
use crate::record::{self, StepData, StepRecord};

use super::super::results::{Results, RESULTS_SCHEMA};

/// (submission, instance, op).
pub type Key = (String, String, Op);

/// How one side's values were taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Basis {
    /// Rounds of a timing session: how many there were and how many interfered ones were
    /// left out; `marked` is false when the file does not list which rounds were interfered
    /// (a `results.json` from before it did): every round is used then.
    Rounds {
        rounds: usize,
        left_out: usize,
        marked: bool,
    },
    /// Trials timed in one block (no rounds: records from before timing sessions).
    Trials { trials: usize },
}

impl Basis {
    /// Values the estimate uses.
    pub fn used(&self) -> usize {
        match *self {
            Basis::Rounds {
                rounds, left_out, ..
            } => rounds - left_out,
            Basis::Trials { trials } => trials,
        }
    }
}

/// One run's values of one instance and operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Per-op cycles of the rounds (or trials) the estimate uses.
    pub values: Vec<f64>,
    /// (`name sha256:<hex>`, the yardstick's per-call cycles in those same rounds).
    pub yardstick: Option<(String, Vec<f64>)>,
    /// The runner process of each of `values` (empty: one process, or a record from before
    /// several): the intervals resample processes, then batches.
    pub processes: Vec<u32>,
    pub basis: Basis,
}

impl Series {
    /// `values` and the yardstick's cycles of the rounds used of all `all` rounds: those
    /// `listed` (the record's own list), else the rule of [`rounds_used`] with `interfered`
    /// marking the interfered ones; the yardstick and the `processes` only when they have a
    /// value per round.
    fn rounds(
        all: &[f64],
        yardstick: Option<(String, &[f64])>,
        processes: &[u32],
        listed: Option<&[u32]>,
        interfered: Option<&dyn Fn(usize) -> bool>,
    ) -> Series {
        let n = all.len();
        let (used, marked) = match (listed, interfered) {
            (Some(l), _) if l.iter().all(|&i| (i as usize) < n) => {
                (l.iter().map(|&i| i as usize).collect(), true)
            }
            (_, Some(f)) => (rounds_used(n, f).0, true),
            _ => ((0..n).collect(), false),
        };
        Series {
            values: used.iter().map(|&i| all[i]).collect(),
            yardstick: yardstick
                .filter(|(_, y)| y.len() == n)
                .map(|(id, y)| (id, used.iter().map(|&i| y[i]).collect())),
            processes: if processes.len() == n {
                used.iter().map(|&i| processes[i]).collect()
            } else {
                Vec::new()
            },
            basis: Basis::Rounds {
                rounds: n,
                left_out: n - used.len(),
                marked,
            },
        }
    }

    /// Every round's cycles divided by the yardstick's in that round, with the yardstick's
    /// id; `None` without a yardstick.
    pub fn relative(&self) -> Option<(&str, Vec<f64>)> {
        let (id, y) = self.yardstick.as_ref()?;
        Some((id.as_str(), stats::paired_ratios(y, &self.values)))
    }
}

/// One output folder's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub dir: PathBuf,
    pub system: String,
    /// When the campaign started, when the folder says.
    pub started: Option<String>,
    pub series: BTreeMap<Key, Series>,
    /// Mean instructions per operation (`count`).
    pub instructions: BTreeMap<Key, f64>,
}

/// Read one output folder: `reports/results.json` when present (schema
/// [`RESULTS_SCHEMA`]), else its records.
pub fn load(dir: &Path) -> io::Result<Run> {
    let results_path = dir.join("reports").join("results.json");
    match record::read_json::<Results>(&results_path) {
        Ok(Some(r)) if r.schema == RESULTS_SCHEMA => Ok(from_results(dir, &r)),
        Ok(Some(r)) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "`{}` has schema `{}`, expected `{RESULTS_SCHEMA}`",
                results_path.display(),
                r.schema
            ),
        )),
        Ok(None) => from_records(dir),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("cannot read `{}`: {e}", results_path.display()),
        )),
    }
}

fn from_results(dir: &Path, r: &Results) -> Run {
    let mut series = BTreeMap::new();
    let mut instructions = BTreeMap::new();
    for sub in &r.submissions {
        for inst in &sub.instances {
            for o in &inst.ops {
                let key = (sub.id.clone(), inst.id.clone(), o.op);
                if let Some(i) = o.instructions {
                    instructions.insert(key.clone(), i);
                }
                if o.trial_cycles.is_empty() {
                    continue;
                }
                let s = if o.rounds.is_some() || o.interfered_trials.is_some() {
                    let yardstick = o
                        .yardstick_id
                        .clone()
                        .map(|id| (id, o.yardstick_trial_cycles.as_slice()));
                    let marks = o
                        .interfered_trials
                        .as_ref()
                        .map(|list| move |i: usize| list.iter().any(|&j| j as usize == i));
                    Series::rounds(
                        &o.trial_cycles,
                        yardstick,
                        &o.trial_processes,
                        o.used_trials.as_deref(),
                        marks.as_ref().map(|f| f as &dyn Fn(usize) -> bool),
                    )
                } else {
                    trials(o.trial_cycles.clone())
                };
                series.insert(key, s);
            }
        }
    }
    Run {
        dir: dir.to_path_buf(),
        system: r.system.clone(),
        started: r.started.clone(),
        series,
        instructions,
    }
}

fn trials(values: Vec<f64>) -> Series {
    Series {
        basis: Basis::Trials {
            trials: values.len(),
        },
        values,
        yardstick: None,
        processes: Vec::new(),
    }
}

/// The `.json` files one folder below `dir` (`<dir>/<sub>/*.json`), sorted; none when `dir`
/// does not exist.
fn record_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = Vec::new();
    let Ok(subs) = std::fs::read_dir(dir) else {
        return Ok(files);
    };
    for sub in subs {
        let sub = sub?.path();
        if !sub.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&sub)? {
            let f = f?.path();
            if f.extension().is_some_and(|e| e == "json") {
                files.push(f);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The ok records of `kind` under `dir`, each with its key.
fn ok_records(dir: &Path, kind: StepKind) -> io::Result<Vec<(Key, StepData)>> {
    let mut out = Vec::new();
    for f in record_files(dir)? {
        let rec: Option<StepRecord> = record::read_json(&f).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot read record `{}`: {e}", f.display()),
            )
        })?;
        let Some(rec) = rec else { continue };
        if rec.kind != kind || rec.status != record::Status::Ok {
            continue;
        }
        if let (Some(inst), Some(op), Some(data)) = (rec.instance, rec.op, rec.data) {
            out.push(((rec.submission, inst, op), data));
        }
    }
    Ok(out)
}

fn from_records(dir: &Path) -> io::Result<Run> {
    let records = dir.join("records");
    if let Err(e) = std::fs::read_dir(&records) {
        return Err(io::Error::new(
            e.kind(),
            format!(
                "`{}` has neither reports/results.json nor a readable records/ folder: {e}",
                dir.display()
            ),
        ));
    }
    let mut series = BTreeMap::new();
    for (key, data) in ok_records(&records, StepKind::Time)? {
        let StepData::Time(td) = data else { continue };
        let values = stats::per_op_cycles(&td.output);
        let s = match &td.rounds {
            Some(r) => {
                let interfered = |i: usize| r.interference.get(i).is_some_and(|w| !w.is_empty());
                Series::rounds(
                    &values,
                    r.yardstick.as_ref().map(|y| (y.id(), y.values.as_slice())),
                    &r.processes,
                    (!r.used.is_empty()).then_some(r.used.as_slice()),
                    Some(&interfered),
                )
            }
            None => trials(values),
        };
        series.insert(key, s);
    }
    let mut instructions = BTreeMap::new();
    for (key, data) in ok_records(&dir.join("count"), StepKind::Count)? {
        if let StepData::Count(c) = data {
            instructions.insert(key, c.instructions_mean);
        }
    }
    let campaign = record::read_json::<record::CampaignRecord>(&dir.join("campaign.json"))
        .ok()
        .flatten();
    Ok(Run {
        dir: dir.to_path_buf(),
        system: campaign
            .as_ref()
            .map(|c| c.system.clone())
            .unwrap_or_else(|| folder_name(dir)),
        started: campaign.map(|c| c.started),
        series,
        instructions,
    })
}

fn folder_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interfered_rounds_are_left_out_with_their_yardstick_when_enough_remain() {
        let all: Vec<f64> = (0..14).map(|i| 100.0 + i as f64).collect();
        let y: Vec<f64> = (0..14).map(|i| 10.0 + i as f64).collect();
        let marks = |i: usize| i == 3 || i == 7;
        let s = Series::rounds(&all, Some(("y".into(), &y)), &[], None, Some(&marks));
        assert_eq!(s.values.len(), 12);
        assert!(!s.values.contains(&103.0) && !s.values.contains(&107.0));
        let (_, ys) = s.yardstick.as_ref().unwrap();
        assert!(!ys.contains(&13.0) && ys.contains(&14.0));
        assert_eq!(
            s.basis,
            Basis::Rounds {
                rounds: 14,
                left_out: 2,
                marked: true
            }
        );
        assert_eq!(s.basis.used(), 12);
        // Per round: 100 + i over 10 + i.
        assert_eq!(s.relative().unwrap().1[0], 10.0);
        // Too few clean rounds: all are used. No marks: all, and said.
        let many = |i: usize| i < 5;
        assert_eq!(
            Series::rounds(&all, None, &[], None, Some(&many))
                .values
                .len(),
            14
        );
        // The record's own list wins (the uncontended state's clean rounds).
        let listed = Series::rounds(
            &all,
            Some(("y".into(), &y)),
            &[],
            Some(&[0, 2, 4]),
            Some(&marks),
        );
        assert_eq!(listed.values, [100.0, 102.0, 104.0]);
        assert_eq!(listed.yardstick.as_ref().unwrap().1, [10.0, 12.0, 14.0]);
        assert_eq!(listed.basis.used(), 3);
        let unmarked = Series::rounds(&all, None, &[], None, None);
        assert_eq!(
            unmarked.basis,
            Basis::Rounds {
                rounds: 14,
                left_out: 0,
                marked: false
            }
        );
        // The processes of the rounds used, when there is one per round.
        let by: Vec<u32> = (0..14).map(|i| i % 2).collect();
        let two = Series::rounds(&all, None, &by, Some(&[0, 1, 3]), None);
        assert_eq!(two.processes, [0, 1, 1]);
        assert!(Series::rounds(&all, None, &by[1..], None, None)
            .processes
            .is_empty());
        // A yardstick without a value per round is not used.
        assert!(
            Series::rounds(&all, Some(("y".into(), &y[1..])), &[], None, None)
                .yardstick
                .is_none()
        );
    }
}
