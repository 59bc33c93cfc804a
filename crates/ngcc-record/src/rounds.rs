//! What a time record keeps of the session it was measured in: the rounds, their
//! interference marks, the estimate and the yardstick timed beside it. The session
//! (`run/session/`) writes these; reports and `compare` read them. [`Estimate`] is the
//! figure the engine's `measure::stats::median_ci` computes.

use serde::{Deserialize, Serialize};

/// A median with its 95% bootstrap confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub median: f64,
    pub ci_low: f64,
    pub ci_high: f64,
}

impl Estimate {
    /// Half the width of the interval relative to the median (a fraction); infinite for a
    /// median that is not positive.
    pub fn rel_half_width(&self) -> f64 {
        if self.median > 0.0 {
            (self.ci_high - self.ci_low) / 2.0 / self.median
        } else {
            f64::INFINITY
        }
    }
}

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
    /// Where it was timed: `in-batch` (blocks inside each of the member's batches, the
    /// value of a batch being their mean), or empty in records from before, where it was
    /// timed in a batch of its own in every round.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub placement: String,
}

impl Yardstick {
    /// `name [in-batch] sha256:<hex>`: records are divided by yardsticks with the same id
    /// only (the same object, timed the same way).
    pub fn id(&self) -> String {
        if self.placement.is_empty() {
            format!("{} sha256:{}", self.name, self.object_sha256)
        } else {
            format!(
                "{} {} sha256:{}",
                self.name, self.placement, self.object_sha256
            )
        }
    }
}

/// The host's states as the yardstick inside the batches saw them (`measure::states`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostStates {
    /// Whether the session's yardstick blocks fell into two states.
    pub two_states: bool,
    /// With two states: the yardstick's per-call cycles between them, its median in each,
    /// and the share of the session's blocks below the cut.
    pub cut: Option<f64>,
    pub uncontended_yardstick: Option<f64>,
    pub contended_yardstick: Option<f64>,
    pub uncontended_share: Option<f64>,
    /// The state of each of this member's batches, one letter each (`u` uncontended, `c`
    /// contended, `m` mixed), index as `trials`.
    pub batches: String,
    /// This member's median per-op cycles within each state, over its clean batches there
    /// (absent with fewer than two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncontended: Option<StateFigure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contended: Option<StateFigure>,
    /// Clean batches in which the state changed.
    pub mixed: u32,
}

/// A member's figure within one state of the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateFigure {
    /// Clean batches in the state.
    pub batches: u32,
    pub estimate: Estimate,
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
    /// The session's bench time reached the budget first (in records from before 7
    /// December 2026: the members' measured batch time).
    Budget,
    /// No member was left (all failed).
    NoMembers,
}

/// What a record keeps of the session it was measured in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rounds {
    pub session: String,
    pub seed: u64,
    /// Runner processes of the session that timed batches (every member's, all together).
    pub members: usize,
    /// This member's position (0-based) in each round's order (yardstick included);
    /// `trials[i]` is round i's batch.
    pub positions: Vec<u32>,
    /// Per round: why the batch counts as interfered (empty: clean).
    pub interference: Vec<Vec<String>>,
    /// Whether the estimate uses the clean rounds only (enough of them) or all rounds.
    pub clean_only: bool,
    /// Median per-op cycles over the rounds used, with its 95% bootstrap interval: with a
    /// host of two states, over the clean batches of the uncontended one.
    pub estimate: Estimate,
    /// Target CI half-width (fraction) and whether this member reached it: within the
    /// target and not flagged.
    pub precision: f64,
    pub reached: bool,
    /// The batches (indices into `trials`) the estimate used; empty in records from before
    /// the host's states were measured (there: the clean rounds when at least ten, else all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub used: Vec<u32>,
    /// The host's states during this member's batches (absent without a yardstick inside
    /// the batches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostStates>,
    /// Why the figure does not earn its precision although the step is `ok`: most batches
    /// interfered, too few in the host's uncontended state (`measure::states`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    pub stopped: Stopped,
    /// The session's budget of bench time, s: its members' `trials x trial` together.
    pub budget_s: f64,
    /// The session's bench time, s: from its first runner's start to its last runner's
    /// finish (absent in records from before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bench_s: Option<f64>,
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
    /// This machine's counter rate in ticks per ns, as the engine measured it at the
    /// session's start; every batch's own rate (cycles / ns) was checked against it, and its
    /// reported time against the engine's clock around it (`None`: not measured, or a record
    /// from before the check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_rate: Option<f64>,
    /// The runner process (0-based) each batch was timed in (`trials[i]` by process
    /// `processes[i]`): a member is timed by several processes at once, each a `serve` of
    /// its own, and its interval resamples processes, then batches within each. Empty: one
    /// process (or a record from before several).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<u32>,
}

impl Rounds {
    /// How many runner processes timed this member.
    pub fn process_count(&self) -> usize {
        self.processes.iter().max().map_or(1, |&p| p as usize + 1)
    }
}
