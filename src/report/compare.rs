//! `ngcc-pipe compare A B`: per instance and operation, the ratio B/A of the median per-op
//! cycles of two system output folders, and whether it is beyond the noise of the two
//! measurements ([`crate::measure::stats::compare_samples`]: Mann-Whitney U on the trials
//! plus a dispersion-derived threshold; see that module's doc).
//!
//! Each folder is read from `reports/results.json` (which carries every trial's per-op
//! cycles) or, when that file is absent, from the timing records under `records/`.
//!
//! Where both folders counted the operation's instructions (`count` step), the row also
//! gives the instruction ratio B/A: exact, no noise to test (counts are deterministic).
//!
//! Where both sides timed the same yardstick object in their rounds
//! (`run/yardstick.rs`), the row also gives the host's speed ratio (yardstick median
//! B/A) and the comparison **adjusted** for it: the same test on each round's cycles divided
//! by the yardstick's cycles in that round, so that a host that ran slower during B than
//! during A is not taken for slower code.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::measure::stats::{self, Difference, NoiseTest};
use crate::model::{Op, StepKind};
use crate::record::{self, StepData, StepRecord};

use super::csv::field;
use super::results::{Results, RESULTS_SCHEMA};

/// Per-op trial cycles of one system, and the yardstick's cycles in the same rounds.
struct Series {
    values: Vec<f64>,
    /// (`name sha256:<hex>`, per-round cycles), one per value.
    yardstick: Option<(String, Vec<f64>)>,
}

/// (submission, instance, op) -> series.
type Trials = BTreeMap<(String, String, Op), Series>;

/// A comparison with the host's drift taken out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Adjusted {
    /// Yardstick median B / A: how much slower (> 1) the host ran during B.
    pub host_ratio: f64,
    /// The test on per-round cycles / yardstick cycles (medians are those ratios).
    pub difference: Difference,
}

/// Both sides' per-round values divided by the yardstick of their round, when both timed
/// the same yardstick object in every round.
fn adjusted(a: &Series, b: &Series, test: &NoiseTest) -> Option<Adjusted> {
    let ((id_a, ya), (id_b, yb)) = (a.yardstick.as_ref()?, b.yardstick.as_ref()?);
    if id_a != id_b {
        return None;
    }
    let host_ratio = stats::median(yb)? / stats::median(ya)?;
    let rel_a = stats::paired_ratios(ya, &a.values);
    let rel_b = stats::paired_ratios(yb, &b.values);
    Some(Adjusted {
        host_ratio,
        difference: stats::compare_samples(&rel_a, &rel_b, test)?,
    })
}

/// Mean instructions per operation of one system (from `count`), by the same key.
type Instructions = BTreeMap<(String, String, Op), f64>;

/// One compared instance and operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareRow {
    pub submission: String,
    pub instance: String,
    pub op: Op,
    pub trials_a: usize,
    pub trials_b: usize,
    /// `None` when a side has no usable trials.
    pub difference: Option<Difference>,
    /// Mean instructions per operation of each side, when both counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<(f64, f64)>,
    /// The comparison adjusted for the host's drift, when both sides timed the same
    /// yardstick in their rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adjusted: Option<Adjusted>,
}

impl CompareRow {
    /// Instructions B / A, exact.
    pub fn instruction_ratio(&self) -> Option<f64> {
        self.instructions
            .filter(|(a, _)| *a > 0.0)
            .map(|(a, b)| b / a)
    }
}

/// The result of comparing two system folders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub system_a: String,
    pub system_b: String,
    pub dir_a: PathBuf,
    pub dir_b: PathBuf,
    pub alpha: f64,
    pub spread_factor: f64,
    pub min_effect: f64,
    pub rows: Vec<CompareRow>,
    /// `submission/instance op` measured only in A (or only in B).
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
}

fn system_name(dir: &Path) -> String {
    if let Ok(Some(c)) = record::read_json::<record::CampaignRecord>(&dir.join("campaign.json")) {
        return c.system;
    }
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

fn from_results(r: &Results) -> (Trials, Instructions) {
    let mut t = Trials::new();
    let mut n = Instructions::new();
    for sub in &r.submissions {
        for inst in &sub.instances {
            for o in &inst.ops {
                if let Some(i) = o.instructions {
                    n.insert((sub.id.clone(), inst.id.clone(), o.op), i);
                }
                if !o.trial_cycles.is_empty() {
                    let yardstick = o
                        .yardstick_id
                        .clone()
                        .filter(|_| o.yardstick_trial_cycles.len() == o.trial_cycles.len())
                        .map(|id| (id, o.yardstick_trial_cycles.clone()));
                    t.insert(
                        (sub.id.clone(), inst.id.clone(), o.op),
                        Series {
                            values: o.trial_cycles.clone(),
                            yardstick,
                        },
                    );
                }
            }
        }
    }
    (t, n)
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

/// Mean instructions of the ok `count` records under `<dir>/count/`.
fn instructions_from_records(dir: &Path) -> io::Result<Instructions> {
    let mut n = Instructions::new();
    for f in record_files(&dir.join("count"))? {
        let rec: Option<StepRecord> = record::read_json(&f).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot read record `{}`: {e}", f.display()),
            )
        })?;
        if let Some(StepRecord {
            status: record::Status::Ok,
            instance: Some(inst),
            op: Some(op),
            data: Some(StepData::Count(c)),
            submission,
            ..
        }) = rec
        {
            n.insert((submission, inst, op), c.instructions_mean);
        }
    }
    Ok(n)
}

fn from_records(dir: &Path) -> io::Result<Trials> {
    let records = dir.join("records");
    let mut t = Trials::new();
    if let Err(e) = std::fs::read_dir(&records) {
        return Err(io::Error::new(
            e.kind(),
            format!(
                "`{}` has neither reports/results.json nor a readable records/ folder: {e}",
                dir.display()
            ),
        ));
    }
    let files = record_files(&records)?;
    for f in files {
        let rec: Option<StepRecord> = record::read_json(&f).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot read record `{}`: {e}", f.display()),
            )
        })?;
        let Some(rec) = rec else { continue };
        if rec.kind != StepKind::Time || rec.status != record::Status::Ok {
            continue;
        }
        let (Some(inst), Some(op), Some(StepData::Time(td))) = (&rec.instance, rec.op, &rec.data)
        else {
            continue;
        };
        let values = stats::per_op_cycles(&td.output);
        let yardstick = td
            .rounds
            .as_ref()
            .and_then(|r| r.yardstick.as_ref())
            .filter(|y| y.values.len() == values.len())
            .map(|y| (y.id(), y.values.clone()));
        t.insert(
            (rec.submission.clone(), inst.clone(), op),
            Series { values, yardstick },
        );
    }
    Ok(t)
}

fn load(dir: &Path) -> io::Result<(String, Trials, Instructions)> {
    let results_path = dir.join("reports").join("results.json");
    match record::read_json::<Results>(&results_path) {
        Ok(Some(r)) if r.schema == RESULTS_SCHEMA => {
            let (t, n) = from_results(&r);
            Ok((r.system.clone(), t, n))
        }
        Ok(Some(r)) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "`{}` has schema `{}`, expected `{RESULTS_SCHEMA}`",
                results_path.display(),
                r.schema
            ),
        )),
        Ok(None) => Ok((
            system_name(dir),
            from_records(dir)?,
            instructions_from_records(dir)?,
        )),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("cannot read `{}`: {e}", results_path.display()),
        )),
    }
}

/// Compare two system output folders with the default [`NoiseTest`].
pub fn compare(a: &Path, b: &Path) -> io::Result<Comparison> {
    compare_with(a, b, &NoiseTest::default())
}

/// Compare two system output folders with explicit test parameters.
pub fn compare_with(a: &Path, b: &Path, test: &NoiseTest) -> io::Result<Comparison> {
    let (system_a, ta, na) = load(a)?;
    let (system_b, tb, nb) = load(b)?;
    let key_text = |k: &(String, String, Op)| format!("{}/{} {}", k.0, k.1, k.2);
    let mut rows = Vec::new();
    let mut only_a = Vec::new();
    let mut keys: Vec<&(String, String, Op)> = ta.keys().collect();
    keys.sort_by(|x, y| {
        natural_cmp(&x.0, &y.0)
            .then_with(|| natural_cmp(&x.1, &y.1))
            .then(x.2.cmp(&y.2))
    });
    for k in keys {
        let va = &ta[k];
        match tb.get(k) {
            Some(vb) => rows.push(CompareRow {
                submission: k.0.clone(),
                instance: k.1.clone(),
                op: k.2,
                trials_a: va.values.len(),
                trials_b: vb.values.len(),
                difference: stats::compare_samples(&va.values, &vb.values, test),
                instructions: na.get(k).zip(nb.get(k)).map(|(x, y)| (*x, *y)),
                adjusted: adjusted(va, vb, test),
            }),
            None => only_a.push(key_text(k)),
        }
    }
    let only_b = tb
        .keys()
        .filter(|k| !ta.contains_key(*k))
        .map(key_text)
        .collect();
    Ok(Comparison {
        system_a,
        system_b,
        dir_a: a.to_path_buf(),
        dir_b: b.to_path_buf(),
        alpha: test.alpha,
        spread_factor: test.spread_factor,
        min_effect: test.min_effect,
        rows,
        only_a,
        only_b,
    })
}

/// Compare strings with digit runs as numbers (`ML-KEM-512` before `ML-KEM-1024`).
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let b = s.as_bytes();
        for i in 1..=b.len() {
            if i == b.len() || b[i].is_ascii_digit() != b[i - 1].is_ascii_digit() {
                out.push((b[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(&cb) {
        let ord = match (x, y) {
            ((true, xs), (true, ys)) => {
                let (xt, yt) = (xs.trim_start_matches('0'), ys.trim_start_matches('0'));
                xt.len().cmp(&yt.len()).then_with(|| xt.cmp(yt))
            }
            ((_, xs), (_, ys)) => xs.cmp(ys),
        };
        if ord != std::cmp::Ordering::Equal {
            return ord;
        }
    }
    ca.len().cmp(&cb.len()).then_with(|| a.cmp(b))
}

fn verdict(d: &Difference) -> &'static str {
    match (d.significant, d.ratio > 1.0) {
        (true, true) => "slower (significant)",
        (true, false) => "faster (significant)",
        (false, _) => "within noise",
    }
}

/// The comparison as Markdown.
pub fn compare_markdown(c: &Comparison) -> String {
    use super::format;
    let mut o = format!(
        "# Comparison: {} (B) against {} (A)\n\n",
        c.system_b, c.system_a
    );
    o.push_str(&format!(
        "A: `{}`; B: `{}`. Ratio = median per-op cycles of B / A. A difference is significant \
         when the trials are separated (two-sided Mann-Whitney U, alpha {}; disjoint min..max \
         ranges when there are too few trials for the test) and |ratio − 1| exceeds the \
         threshold: {} × the combined robust relative spread of both sides, at least {}.\n\n",
        c.dir_a.display(),
        c.dir_b.display(),
        c.alpha,
        c.spread_factor,
        format::share(c.min_effect)
    ));
    o.push_str(
        "These are two separate runs: each side's trials show only the noise within its own \
         run, not how the host drifted between the runs, so a difference here may be the host \
         rather than the code. `ngcc-pipe compare --measure A B` times both objects now, \
         interleaved in the same rounds with an A/A pair, and gives a CI of the ratio.\n\n",
    );
    let significant = c
        .rows
        .iter()
        .filter(|r| r.difference.as_ref().is_some_and(|d| d.significant))
        .count();
    o.push_str(&format!(
        "{} of {} compared operations differ beyond noise.\n\n",
        significant,
        c.rows.len()
    ));
    let hosts: Vec<f64> = c
        .rows
        .iter()
        .filter_map(|r| r.adjusted.as_ref().map(|a| a.host_ratio))
        .collect();
    let with_yardstick = !hosts.is_empty();
    if let Some(host) = stats::median(&hosts) {
        let adjusted_significant = c
            .rows
            .iter()
            .filter(|r| {
                r.adjusted
                    .as_ref()
                    .is_some_and(|a| a.difference.significant)
            })
            .count();
        o.push_str(&format!(
            "Host speed: the yardstick (a fixed workload timed in the same rounds as every \
             operation, the same object on both sides) took {host:.3} × as many cycles in B as \
             in A (median over {} rows), so the host ran {} during B. The adjusted columns \
             divide every round's cycles by the yardstick's cycles in that round and apply the \
             same test to those ratios: they separate the code from the host's drift. \
             {adjusted_significant} of {} adjusted operations differ beyond noise.\n\n",
            hosts.len(),
            if host >= 1.0 {
                format!("{} slower", format::share(host - 1.0))
            } else {
                format!("{} faster", format::share(1.0 - host))
            },
            hosts.len(),
        ));
    }
    let counted = c.rows.iter().any(|r| r.instructions.is_some());
    if counted {
        o.push_str(
            "Instructions B/A: mean instructions per operation counted by callgrind \
             (`count` step) on both sides; deterministic, so exact.\n\n",
        );
    }
    o.push_str(
        "| submission | instance | op | median A | median B | B/A | p | threshold | verdict |",
    );
    if with_yardstick {
        o.push_str(" host B/A | adjusted B/A | adjusted verdict |");
    }
    o.push_str(if counted {
        " instructions B/A |\n"
    } else {
        "\n"
    });
    o.push_str("|---|---|---|---|---|---|---|---|---|");
    if with_yardstick {
        o.push_str("---|---|---|");
    }
    o.push_str(if counted { "---|\n" } else { "\n" });
    for r in &c.rows {
        let cells = match &r.difference {
            Some(d) => format!(
                "{} | {} | {:.3} | {} | ±{} | {}",
                format::cycles(d.median_a),
                format::cycles(d.median_b),
                d.ratio,
                d.p_value
                    .map(|p| format!("{p:.3}"))
                    .unwrap_or_else(|| d.method.name().to_string()),
                format::share(d.threshold),
                verdict(d)
            ),
            None => "– | – | – | – | – | no usable trials".to_string(),
        };
        o.push_str(&format!(
            "| {} | `{}` | {} | {} |",
            r.submission, r.instance, r.op, cells
        ));
        if with_yardstick {
            o.push_str(&match &r.adjusted {
                Some(a) => format!(
                    " {:.3} | {:.3} | {} |",
                    a.host_ratio,
                    a.difference.ratio,
                    verdict(&a.difference)
                ),
                None => " – | – | no common yardstick |".to_string(),
            });
        }
        if counted {
            o.push_str(&match r.instruction_ratio() {
                Some(x) => format!(" {x:.4} |"),
                None => " – |".to_string(),
            });
        }
        o.push('\n');
    }
    for (label, list) in [("A", &c.only_a), ("B", &c.only_b)] {
        if !list.is_empty() {
            o.push_str(&format!("\nMeasured only in {label}:\n\n"));
            for k in list {
                o.push_str(&format!("- `{k}`\n"));
            }
        }
    }
    o
}

/// The comparison as CSV.
pub fn compare_csv(c: &Comparison) -> String {
    let mut o = String::from(
        "system_a,system_b,submission,instance,op,trials_a,trials_b,median_cycles_a,\
         median_cycles_b,ratio,p_value,method,threshold,significant,instructions_a,\
         instructions_b,instruction_ratio,host_ratio,adjusted_ratio,adjusted_threshold,\
         adjusted_significant\n",
    );
    for r in &c.rows {
        let d = r.difference.as_ref();
        let adj = r.adjusted.as_ref();
        let cells = [
            c.system_a.clone(),
            c.system_b.clone(),
            r.submission.clone(),
            r.instance.clone(),
            r.op.name().to_string(),
            r.trials_a.to_string(),
            r.trials_b.to_string(),
            d.map(|d| format!("{:.1}", d.median_a)).unwrap_or_default(),
            d.map(|d| format!("{:.1}", d.median_b)).unwrap_or_default(),
            d.map(|d| format!("{:.6}", d.ratio)).unwrap_or_default(),
            d.and_then(|d| d.p_value)
                .map(|p| format!("{p:.6}"))
                .unwrap_or_default(),
            d.map(|d| d.method.name().to_string()).unwrap_or_default(),
            d.map(|d| format!("{:.6}", d.threshold)).unwrap_or_default(),
            d.map(|d| d.significant.to_string()).unwrap_or_default(),
            r.instructions
                .map(|(a, _)| format!("{a:.1}"))
                .unwrap_or_default(),
            r.instructions
                .map(|(_, b)| format!("{b:.1}"))
                .unwrap_or_default(),
            r.instruction_ratio()
                .map(|x| format!("{x:.6}"))
                .unwrap_or_default(),
            adj.map(|a| format!("{:.6}", a.host_ratio))
                .unwrap_or_default(),
            adj.map(|a| format!("{:.6}", a.difference.ratio))
                .unwrap_or_default(),
            adj.map(|a| format!("{:.6}", a.difference.threshold))
                .unwrap_or_default(),
            adj.map(|a| a.difference.significant.to_string())
                .unwrap_or_default(),
        ];
        o.push_str(&cells.iter().map(|s| field(s)).collect::<Vec<_>>().join(","));
        o.push('\n');
    }
    o
}

#[cfg(test)]
mod tests {
    use super::{adjusted, natural_cmp, Series};
    use crate::measure::stats::{self, NoiseTest};
    use std::cmp::Ordering::*;

    /// 40 rounds of an operation costing `code` yardsticks on a host whose speed wobbles
    /// by ±2% round to round and runs `host` times slower overall.
    fn series(code: f64, host: f64, id: &str) -> Series {
        let ys: Vec<f64> = (0..40)
            .map(|i| 100_000.0 * host * (1.0 + 0.02 * ((i * 7 % 11) as f64 / 5.0 - 1.0)))
            .collect();
        let values = ys
            .iter()
            .enumerate()
            .map(|(i, y)| y * code * (1.0 + 0.002 * ((i * 3 % 5) as f64 - 2.0)))
            .collect();
        Series {
            values,
            yardstick: Some((id.into(), ys)),
        }
    }

    #[test]
    fn host_drift_is_taken_out_and_code_changes_are_not() {
        let t = NoiseTest::default();
        // Same code, host 8% slower in B: raw says slower, adjusted says same.
        let (a, b) = (series(1.5, 1.0, "y1"), series(1.5, 1.08, "y1"));
        let raw = stats::compare_samples(&a.values, &b.values, &t).unwrap();
        assert!(raw.significant && raw.ratio > 1.07, "{raw:?}");
        let adj = adjusted(&a, &b, &t).unwrap();
        assert!((adj.host_ratio - 1.08).abs() < 0.005, "{adj:?}");
        assert!(!adj.difference.significant, "{adj:?}");
        assert!((adj.difference.ratio - 1.0).abs() < 0.005, "{adj:?}");
        // Code 10% slower on an unchanged host: both say slower.
        let c = series(1.65, 1.0, "y1");
        let adj = adjusted(&a, &c, &t).unwrap();
        assert!(adj.difference.significant && (adj.difference.ratio - 1.1).abs() < 0.005);
        // Different yardstick objects are never divided by.
        assert!(adjusted(&a, &series(1.5, 1.0, "y2"), &t).is_none());
        let none = Series {
            values: a.values.clone(),
            yardstick: None,
        };
        assert!(adjusted(&a, &none, &t).is_none());
    }

    #[test]
    fn natural_order() {
        assert_eq!(natural_cmp("ML-KEM-512", "ML-KEM-1024"), Less);
        assert_eq!(natural_cmp("HQC-256", "HQC-128"), Greater);
        assert_eq!(natural_cmp("a", "a"), Equal);
        assert_eq!(natural_cmp("", "x"), Less);
        assert_eq!(natural_cmp("x2", "x10"), Less);
    }
}
