//! The machine-readable results (`reports/results.json`) and the flat rows of `results.csv`.
//!
//! [`Results`] is derived from a [`CampaignView`] and is also what the campaign index, the
//! site's charts, other systems' side-by-side figures and `compare` read. Its JSON form is
//! versioned by [`RESULTS_SCHEMA`]; [`RESULTS_SCHEMA_DOC`] documents it for the README.

use serde::{Deserialize, Serialize};

use crate::measure::stats;
use crate::model::{Op, StepKind};
use crate::record::{Environment, KatStatus, Status};

use super::view::{self, CampaignView, InstanceView};

/// Schema id written as `"schema"`; bumped when a field changes meaning.
pub const RESULTS_SCHEMA: &str = "ngcc-pipe/results/1";

/// Markdown description of `results.json`, ready to copy into the README.
pub const RESULTS_SCHEMA_DOC: &str = r#"### `reports/results.json` (schema `ngcc-pipe/results/1`)

One JSON object per system. Absent values are `null`; shares are fractions (0..1); cycles
are counter ticks per operation; times are nanoseconds per operation.

```text
{
  "schema": "ngcc-pipe/results/1",
  "system": "x86_1", "arch": "x86-64",
  "started": "2026-09-25T10:02:21Z" | null, "finished": ... | null,
  "environment": { cpu_model, bench_cpu, governor, turbo, smt, ... } | null,
  "submissions": [ {
    "id": "ml-kem", "algorithm": "ML-KEM",
    "instances": [ {
      "id": "ML-KEM-512-clean", "level": 512 | null, "nist_category": 1 | null,
      "kat": "PASS" | "MISMATCH" | "NOKAT" | "FAIL" | "skipped" | "failed" | ... | null,
      "kat_modes": [ { "mode": "single", "status": "PASS" } ],
      "build_flags": "guide" | null, "static_bytes": 12345 | null,
      "pk": 800, "sk": 1632, "ct": 768, "ss": 32,          (each | null)
      "survey": "provided-only" | "bypass" | "mixed" | null,
      "ops": [ {
        "op": "keygen", "status": "ok" | "failed" | "skipped" | ... | null, "reason": ...,
        "mean_cycles", "mean_ns", "ops_per_s", "median_trial_ns", "median_trial_cycles",
        "trials", "iters", "cv", "unstable", "min_cycles", "q1_cycles", "q3_cycles",
        "max_cycles", "trial_cycles": [per-op cycles of every trial],
        "baseline_rss_kib", "peak_rss_kib", "stack_bytes",
        "hash_share", "drng_share", "calls_per_op": [["shake256", 2.0], ...],
        "counter_ghz": measured counter rate (ticks / monotonic ns of the trials),
        "median_cycles", "ci_low_cycles", "ci_high_cycles", "rounds", "interfered_rounds",
        "instructions": mean instructions per call (count step),
        "cycles_per_instruction", "hash_share_instr", "drng_share_instr"
      } ]
    } ]
  } ]
}
```
`kat` is the worst mode status (FAIL > NOKAT > MISMATCH > PASS), or the KAT record's status
when it produced no result. `ops` lists the operations of the `time`, `profile` and `count`
steps. `results.csv` has the same figures per operation; its last four columns are
`instructions,cycles_per_instruction,hash_share_instr,drng_share_instr`.
"#;

/// `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub schema: String,
    pub system: String,
    pub arch: String,
    pub started: Option<String>,
    pub finished: Option<String>,
    pub environment: Option<Environment>,
    pub submissions: Vec<ResultSubmission>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultSubmission {
    pub id: String,
    pub algorithm: String,
    pub instances: Vec<ResultInstance>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KatModeStatus {
    pub mode: String,
    pub status: KatStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultInstance {
    pub id: String,
    pub level: Option<u64>,
    /// NIST security category from the manifest (absent in older results files).
    #[serde(default)]
    pub nist_category: Option<u8>,
    pub kat: Option<String>,
    pub kat_modes: Vec<KatModeStatus>,
    pub build_flags: Option<String>,
    pub static_bytes: Option<u64>,
    pub pk: Option<u64>,
    pub sk: Option<u64>,
    pub ct: Option<u64>,
    pub ss: Option<u64>,
    pub survey: Option<String>,
    pub ops: Vec<ResultOp>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultOp {
    pub op: Op,
    pub status: Option<Status>,
    pub reason: Option<String>,
    pub mean_cycles: Option<f64>,
    pub mean_ns: Option<f64>,
    pub ops_per_s: Option<f64>,
    pub median_trial_ns: Option<f64>,
    pub median_trial_cycles: Option<f64>,
    pub trials: Option<u32>,
    pub iters: Option<u64>,
    pub cv: Option<f64>,
    pub unstable: Option<bool>,
    pub min_cycles: Option<f64>,
    pub q1_cycles: Option<f64>,
    pub q3_cycles: Option<f64>,
    pub max_cycles: Option<f64>,
    pub trial_cycles: Vec<f64>,
    pub baseline_rss_kib: Option<u64>,
    pub peak_rss_kib: Option<u64>,
    pub stack_bytes: Option<u64>,
    pub hash_share: Option<f64>,
    pub drng_share: Option<f64>,
    pub calls_per_op: Vec<(String, f64)>,
    pub counter_ghz: Option<f64>,
    /// Interleaved rounds: median per-op cycles, its 95% bootstrap interval, rounds.
    pub median_cycles: Option<f64>,
    pub ci_low_cycles: Option<f64>,
    pub ci_high_cycles: Option<f64>,
    pub rounds: Option<u32>,
    pub interfered_rounds: Option<u32>,
    /// `count`: mean instructions per call, timed cycles per instruction, and the
    /// instruction shares of the hash/XOF families together and of the DRNG.
    #[serde(default)]
    pub instructions: Option<f64>,
    #[serde(default)]
    pub cycles_per_instruction: Option<f64>,
    #[serde(default)]
    pub hash_share_instr: Option<f64>,
    #[serde(default)]
    pub drng_share_instr: Option<f64>,
}

impl ResultInstance {
    /// The figures of one operation, if listed.
    pub fn op(&self, op: Op) -> Option<&ResultOp> {
        self.ops.iter().find(|o| o.op == op)
    }
}

/// KAT status of an instance as one word (see [`RESULTS_SCHEMA_DOC`]).
pub fn kat_word(inst: &InstanceView) -> Option<String> {
    let r = inst.record(StepKind::Kat)?;
    match view::kat_data(r).and_then(|d| d.modes.iter().map(|m| m.status).max()) {
        Some(worst) => Some(kat_status_name(worst).to_string()),
        None => Some(r.status.name().to_string()),
    }
}

pub fn kat_status_name(s: KatStatus) -> &'static str {
    match s {
        KatStatus::Pass => "PASS",
        KatStatus::Mismatch => "MISMATCH",
        KatStatus::Nokat => "NOKAT",
        KatStatus::Fail => "FAIL",
    }
}

/// pk/sk/ct/ss shown for an instance: the sizes record's `shown`, else api.h from the build.
pub fn shown_sizes(inst: &InstanceView) -> [Option<u64>; 4] {
    if let Some(s) = inst.record(StepKind::Sizes).and_then(view::sizes_data) {
        let sh = s.shown;
        return [sh.pk, sh.sk, sh.ct, sh.ss];
    }
    if let Some(b) = inst.record(StepKind::Build).and_then(view::build_data) {
        return [
            Some(b.api.pk),
            Some(b.api.sk),
            Some(b.api.ct),
            Some(b.api.ss),
        ];
    }
    [None; 4]
}

/// Static ELF bytes: the build record's figure, else a timing record's.
pub fn static_bytes(inst: &InstanceView) -> Option<u64> {
    inst.record(StepKind::Build)
        .and_then(view::build_data)
        .and_then(|b| b.static_bytes)
        .or_else(|| {
            inst.ops(StepKind::Time)
                .filter_map(|(_, r)| r.and_then(view::time_data))
                .find_map(|t| t.static_bytes)
        })
}

/// Calls per operation with the DRNG symbol shown as `drng` (as the seeds do).
pub fn calls_named(p: &crate::record::ProfileData) -> Vec<(String, f64)> {
    p.calls_per_op
        .iter()
        .map(|(sym, n)| {
            let is_drng = p
                .output
                .symbols
                .iter()
                .any(|s| &s.symbol == sym && s.family == "drng");
            (
                if is_drng {
                    "drng".to_string()
                } else {
                    sym.clone()
                },
                *n,
            )
        })
        .collect()
}

fn result_op(inst: &InstanceView, op: Op) -> ResultOp {
    let rec = inst
        .ops(StepKind::Time)
        .find(|(o, _)| *o == op)
        .and_then(|(_, r)| r);
    let t = inst.time_ok(op);
    let s = t.map(|t| &t.summary);
    let p = inst.profile_ok(op);
    let n = inst.count_ok(op);
    ResultOp {
        op,
        status: rec.map(|r| r.status),
        reason: rec.and_then(|r| r.reason.clone()),
        mean_cycles: s.map(|s| s.mean_cycles),
        mean_ns: s.map(|s| s.mean_ns),
        ops_per_s: s.map(|s| s.ops_per_s),
        median_trial_ns: s.map(|s| s.median_trial_ns),
        median_trial_cycles: s.map(|s| s.median_trial_cycles),
        trials: s.map(|s| s.trials),
        iters: s.map(|s| s.iters),
        cv: s.map(|s| s.cv),
        unstable: s.map(|s| s.unstable),
        min_cycles: s.map(|s| s.min_cycles),
        q1_cycles: s.map(|s| s.q1_cycles),
        q3_cycles: s.map(|s| s.q3_cycles),
        max_cycles: s.map(|s| s.max_cycles),
        trial_cycles: t
            .map(|t| stats::per_op_cycles(&t.output))
            .unwrap_or_default(),
        baseline_rss_kib: t.and_then(|t| t.output.memory.baseline_rss_kib),
        peak_rss_kib: t.and_then(|t| t.output.memory.peak_rss_kib),
        stack_bytes: t.and_then(|t| t.output.memory.stack_bytes),
        hash_share: p.map(|p| p.hash_share),
        drng_share: p.map(|p| p.drng_share),
        calls_per_op: p.map(calls_named).unwrap_or_default(),
        counter_ghz: s.and_then(|s| s.counter_ghz),
        median_cycles: s.and_then(|s| s.median_cycles),
        ci_low_cycles: s.and_then(|s| s.ci_low_cycles),
        ci_high_cycles: s.and_then(|s| s.ci_high_cycles),
        rounds: s.and_then(|s| s.rounds),
        interfered_rounds: s.and_then(|s| s.interfered_rounds),
        instructions: n.map(|n| n.instructions_mean),
        cycles_per_instruction: inst.cycles_per_instruction(op),
        hash_share_instr: n.map(|n| n.hash_share),
        drng_share_instr: n.map(|n| n.drng_share),
    }
}

/// Operations listed for an instance: the time step's, then any profile-only ones.
pub fn instance_ops(inst: &InstanceView) -> Vec<Op> {
    let mut ops: Vec<Op> = inst.ops(StepKind::Time).map(|(o, _)| o).collect();
    for (o, _) in inst.ops(StepKind::Profile).chain(inst.ops(StepKind::Count)) {
        if !ops.contains(&o) {
            ops.push(o);
        }
    }
    ops
}

impl Results {
    /// Derive the results of a view.
    pub fn from_view(view: &CampaignView) -> Results {
        let submissions = view
            .submissions
            .iter()
            .map(|sub| ResultSubmission {
                id: sub.id.clone(),
                algorithm: sub.meta.algorithm.clone(),
                instances: sub
                    .instances
                    .iter()
                    .map(|inst| {
                        let [pk, sk, ct, ss] = shown_sizes(inst);
                        ResultInstance {
                            id: inst.id.clone(),
                            level: inst.level,
                            nist_category: inst.nist_category,
                            kat: kat_word(inst),
                            kat_modes: inst
                                .record(StepKind::Kat)
                                .and_then(view::kat_data)
                                .map(|d| {
                                    d.modes
                                        .iter()
                                        .map(|m| KatModeStatus {
                                            mode: m.mode.name().to_string(),
                                            status: m.status,
                                        })
                                        .collect()
                                })
                                .unwrap_or_default(),
                            build_flags: inst
                                .record(StepKind::Build)
                                .and_then(view::build_data)
                                .map(|b| b.flags_profile.clone())
                                .or_else(|| view.build_flags.clone()),
                            static_bytes: static_bytes(inst),
                            pk,
                            sk,
                            ct,
                            ss,
                            survey: inst
                                .record(StepKind::Survey)
                                .and_then(view::survey_data)
                                .map(|s| s.verdict.name().to_string()),
                            ops: instance_ops(inst)
                                .into_iter()
                                .map(|op| result_op(inst, op))
                                .collect(),
                        }
                    })
                    .collect(),
            })
            .collect();
        Results {
            schema: RESULTS_SCHEMA.to_string(),
            system: view.system.clone(),
            arch: view.arch.clone(),
            started: view.campaign.as_ref().map(|c| c.started.clone()),
            finished: view.campaign.as_ref().and_then(|c| c.finished.clone()),
            environment: view.environment().cloned(),
            submissions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README documents the schema with exactly this text; a change to one must be made
    /// to the other.
    #[test]
    fn readme_documents_the_results_schema() {
        let readme = include_str!("../../README.md");
        assert!(
            readme.contains(RESULTS_SCHEMA_DOC),
            "README.md is missing RESULTS_SCHEMA_DOC verbatim"
        );
    }
}
