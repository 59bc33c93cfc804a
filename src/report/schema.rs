//! The machine-readable results as stored: `reports/results.json`, serde types only.
//!
//! [`Results`] is derived from a [`super::CampaignView`] by [`super::results`] and is also
//! what the campaign index, the site's charts, other systems' side-by-side figures and
//! `compare` read (other systems' files are read back into it). Its JSON form is versioned
//! by [`RESULTS_SCHEMA`]; [`RESULTS_SCHEMA_DOC`] documents it in `docs/figures.md`.

use serde::{Deserialize, Serialize};

use crate::model::Op;
use crate::record::{Environment, KatStatus, Status};

/// Schema id written as `"schema"`; bumped when a field changes meaning.
pub const RESULTS_SCHEMA: &str = "ngcc-pipe/results/1";

/// Markdown description of `results.json`, as `docs/figures.md` gives it.
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
      "implementation": "ML-KEM-512-clean" (the one this is a cell of) | absent,
      "compiler": "clang-16" (when the pipeline names several) | absent,
      "kat": "PASS" | "MISMATCH" | "NOKAT" | "FAIL" | "skipped" | "failed" | ... | null,
      "kat_modes": [ { "mode": "single", "status": "PASS" } ],
      "build_flags": "guide" | null, "static_bytes": 12345 | null,
      "layouts": link orders of the object every timing figure is the mean over | null,
      "pk": 800, "sk": 1632, "ct": 768, "ss": 32,          (each | null)
      "survey": "provided-only" | "bypass" | "mixed" | null,
      "ops": [ {
        "op": "keygen", "status": "ok" | "failed" | "skipped" | ... | null, "reason": ...,
        "mean_cycles", "mean_ns", "ops_per_s", "median_trial_ns", "median_trial_cycles",
        "trials", "iters", "cv", "unstable", "min_cycles", "q1_cycles", "q3_cycles",
        "max_cycles", "trial_cycles": [per-op cycles of every trial],
        "baseline_rss_kib", "peak_rss_kib", "stack_bytes",
        "hash_share": every provided family (ciphers included),
        "cipher_share": the part of hash_share in AES (absent when no cipher family is declared),
        "drng_share", "calls_per_op": [["shake256", 2.0], ...],
        "counter_ghz": measured counter rate (ticks / monotonic ns of the trials),
        "median_cycles", "ci_low_cycles", "ci_high_cycles", "rounds", "interfered_rounds",
        "instructions": mean instructions per call (count step),
        "cycles_per_instruction": median timed cycles (else mean) / instructions,
        "hash_share_instr", "drng_share_instr",
        "yardstick_cycles": the yardstick's median per-call cycles in the same rounds,
        "per_yardstick": median of the per-round ratio operation / yardstick,
        "yardstick_id": "ngcc-yardstick-1 sha256:<object>", "yardstick_trial_cycles": [per round],
        "interfered_trials": [indices into trial_cycles of the rounds marked interfered],
        "used_trials": [indices of the rounds the median used] | absent,
        "trial_processes": [the runner process of each of trial_cycles] | absent,
        "uncontended_share": share of the rounds in the host's uncontended state | absent,
        "timing_flags": [why the figure does not earn its precision] | absent,
        "untrusted": why time, count and ct contradict each other ("does less when timed:
          ...", "behaves differently under valgrind: ...") | absent
      } ],
      "constant_time": [ {                                   (absent without a ct step)
        "op": "dec", "verdict": "2 locations, all declared benign" | "not checked: why",
        "locations": not declared benign | null, "benign": declared benign | null,
        "latency_verdict": the variable-latency scan in words | null,
        "variable_latency": instructions in the instance's own code | null,
        "variable_latency_provided": in the provided primitives | null,
        "untrusted": as the op's (the verdict is then "not trusted: ...") | absent
      } ]
    } ]
  } ]
}
```
`kat` is the worst mode status (FAIL > NOKAT > MISMATCH > PASS), or the KAT record's status
when it produced no result. `ops` lists the operations of the `time`, `profile` and `count`
steps; `constant_time` those of the `ct` step (`null` counts: not checked, or a record from
before the variable-latency scan). `results.csv` has the same figures per operation (an
operation only the `ct` step ran gets a row of its own); its last eight columns are
`instructions,cycles_per_instruction,hash_share_instr,drng_share_instr,yardstick_cycles,per_yardstick,variable_latency,untrusted`.
`untrusted` (an op's and its `constant_time` entry's) is set when the operation's figures
contradict each other (timed cycles per counted instruction outside 0.1–20, or the batch
figure below half the single calls'; see "Figures that contradict each other"): its time,
count and constant-time results are then not to be used.
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
    /// The implementation (manifest id) this instance is one cell of, when the pipeline
    /// builds each implementation several ways (compilers, flag profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation: Option<String>,
    /// The compiler this cell is built with, by its file name, when the pipeline names
    /// several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiler: Option<String>,
    pub level: Option<u64>,
    /// NIST security category from the manifest (absent in older results files).
    #[serde(default)]
    pub nist_category: Option<u8>,
    pub kat: Option<String>,
    pub kat_modes: Vec<KatModeStatus>,
    pub build_flags: Option<String>,
    pub static_bytes: Option<u64>,
    /// Link orders of the object the timing figures are the mean over (the build record's).
    #[serde(default)]
    pub layouts: Option<u32>,
    pub pk: Option<u64>,
    pub sk: Option<u64>,
    pub ct: Option<u64>,
    pub ss: Option<u64>,
    pub survey: Option<String>,
    pub ops: Vec<ResultOp>,
    /// The constant-time check per operation (absent without a `ct` step).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constant_time: Vec<ResultCt>,
}

/// The constant-time verdict of one operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultCt {
    pub op: Op,
    /// `no secret-dependent branch or index found`, `N locations ...` or `not checked: why`.
    pub verdict: String,
    /// Locations not declared benign, and declared benign; `None` when not checked.
    pub locations: Option<usize>,
    pub benign: Option<usize>,
    /// The variable-latency scan in words (absent in older results files).
    #[serde(default)]
    pub latency_verdict: Option<String>,
    /// Variable-latency instructions (division, square root) reachable in the instance's
    /// own code, and in the provided primitives; `None` when not scanned.
    #[serde(default)]
    pub variable_latency: Option<usize>,
    #[serde(default)]
    pub variable_latency_provided: Option<usize>,
    /// Why the operation's figures are not trusted (see [`ResultOp::untrusted`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untrusted: Option<String>,
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
    /// Share of all provided primitive families together (ciphers included).
    pub hash_share: Option<f64>,
    /// The part of `hash_share` spent in cipher families (AES); absent when the profile
    /// lists none (and in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cipher_share: Option<f64>,
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
    /// The yardstick timed in the same rounds (`run/yardstick.rs`): its median
    /// cycles, the median per-round ratio of this operation to it, which yardstick object
    /// (`name sha256:<hex>`), and its per-call cycles in every round (as `trial_cycles`).
    #[serde(default)]
    pub yardstick_cycles: Option<f64>,
    #[serde(default)]
    pub per_yardstick: Option<f64>,
    #[serde(default)]
    pub yardstick_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub yardstick_trial_cycles: Vec<f64>,
    /// Timed in rounds: the indices (into `trial_cycles`) of the rounds marked interfered,
    /// which estimates leave out when enough clean ones remain (absent in older files and
    /// for trials timed in one block).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfered_trials: Option<Vec<u32>>,
    /// Timed in rounds since the host's states are measured: the indices (into
    /// `trial_cycles`) of the rounds the median used (with two host states, the clean ones of
    /// the uncontended state), and that state's share of the rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_trials: Option<Vec<u32>>,
    /// Timed by several runner processes: the process (0-based) of each of `trial_cycles`
    /// (empty: one process, or a file from before several).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trial_processes: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncontended_share: Option<f64>,
    /// Why the timing figure does not earn its precision although it is `ok` (most rounds
    /// interfered, too few in the host's uncontended state); empty when it does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timing_flags: Vec<String>,
    /// Why the time, count and constant-time results of this operation are not trusted:
    /// they contradict each other (`crate::report::integrity`); absent when they agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untrusted: Option<String>,
}

impl ResultOp {
    /// The headline cycles: the median of the interleaved rounds (of each runner process's,
    /// their mean), or the mean where the operation was timed in one block of trials.
    pub fn cycles(&self) -> Option<f64> {
        self.median_cycles.or(self.mean_cycles)
    }
}

impl Results {
    /// One instance of one submission, if listed.
    pub fn instance(&self, submission: &str, instance: &str) -> Option<&ResultInstance> {
        self.submissions
            .iter()
            .find(|s| s.id == submission)
            .and_then(|s| s.instances.iter().find(|i| i.id == instance))
    }
}

impl ResultInstance {
    /// The figures of one operation, if listed.
    pub fn op(&self, op: Op) -> Option<&ResultOp> {
        self.ops.iter().find(|o| o.op == op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documentation (`docs/figures.md`, where the README's reference is moving) gives
    /// the schema with exactly this text; a change to one must be made to the other.
    #[test]
    fn docs_document_the_results_schema() {
        let figures = include_str!("../../docs/figures.md");
        assert!(
            figures.contains(RESULTS_SCHEMA_DOC),
            "docs/figures.md is missing RESULTS_SCHEMA_DOC verbatim"
        );
    }
}
