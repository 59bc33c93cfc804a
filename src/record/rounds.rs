//! What a time record keeps of the session it was measured in: the rounds, their
//! interference marks, the estimate and the yardstick timed beside it. The session
//! (`run/session.rs`) writes these; reports and `compare` read them.

use serde::{Deserialize, Serialize};

use crate::measure::stats::Estimate;

/// What a member's record keeps of the yardstick timed in the same rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Yardstick {
    /// The workload (`ngcc-yardstick-1`) and the SHA-256 of the object timed: records are
    /// divided by it only against the same object.
    pub name: String,
    pub object_sha256: String,
    /// Its per-call cycles in every round (index = round, as the member's trials).
    pub values: Vec<f64>,
    /// Its median over the rounds this member's estimate used, with the 95% CI.
    pub estimate: Estimate,
    /// Median over those rounds of (member / yardstick) per round, with the 95% CI.
    pub relative: Estimate,
}

impl Yardstick {
    /// `name sha256:<hex>`: records are divided by yardsticks with the same id only.
    pub fn id(&self) -> String {
        format!("{} sha256:{}", self.name, self.object_sha256)
    }
}

/// A change of how often a member of a session was timed (adaptive allocation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Visit {
    /// The session round (0-based) from which it applies.
    pub from_round: u32,
    /// Timed in one round of this many (1: every round).
    pub every: u32,
    /// Why: its CI against the precision target, e.g. `CI ±0.8% within ±1.0% after 31
    /// rounds that count`.
    pub why: String,
}

/// Why the rounds stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stopped {
    /// Every member reached the precision.
    Precision,
    /// The measured batch time reached the budget first.
    Budget,
    /// No member was left (all failed).
    NoMembers,
}

/// What a record keeps of the session it was measured in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rounds {
    pub session: String,
    pub seed: u64,
    /// Runners of the session: the members and the yardstick, if any.
    pub members: usize,
    /// This member's position (0-based) in each round's order (yardstick included);
    /// `trials[i]` is round i's batch.
    pub positions: Vec<u32>,
    /// Per round: why the batch counts as interfered (empty: clean).
    pub interference: Vec<Vec<String>>,
    /// Whether the estimate uses the clean rounds only (enough of them) or all rounds.
    pub clean_only: bool,
    /// Median per-op cycles over the rounds used, with its 95% bootstrap interval.
    pub estimate: Estimate,
    /// Target CI half-width (fraction) and whether this member reached it.
    pub precision: f64,
    pub reached: bool,
    pub stopped: Stopped,
    pub budget_s: f64,
    /// The yardstick timed in the same rounds (absent when the session had none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yardstick: Option<Yardstick>,
    /// The session round (0-based) each of this member's rounds was timed in (`trials[i]` in
    /// round `session_rounds[i]`); empty in records from before members could be visited
    /// less than every round (every round then).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub session_rounds: Vec<u32>,
    /// Each change of how often this member was timed, in order; empty: every round of the
    /// session (or a record from before adaptive allocation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub visits: Vec<Visit>,
}
