//! Running a campaign: cache keys, decisions (run or up to date, and why), the scheduler
//! (a rayon pool for parallel steps, one bench lane for exclusive ones), and the steps.

pub mod bench_lock;
pub mod campaign;
pub mod ctx;
pub mod decide;
pub mod dry_run;
pub mod exec;
pub mod keys;
pub mod libs;
pub mod link_check;
pub mod lock;
pub mod outside;
pub mod paired;
pub mod progress;
pub mod sandbox;
mod scheduler;
pub mod session;
pub mod steps;
pub mod stop;
#[cfg(test)]
pub(crate) mod test_ctx;
pub mod yardstick;

pub use scheduler::{execute, RunOptions, Summary};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use petgraph::graph::NodeIndex;

use crate::graph::{Node, Plan};
use crate::model::{Campaign, Instance, KindFacts, StepKind, StepSpec, Submission};
use crate::record::{self, Environment, StepRecord};

/// Everything a step may read while it runs. Shared read-only across workers; built by
/// [`Ctx::new`] (`ctx.rs`).
pub struct Ctx {
    pub campaign: Campaign,
    pub plan: Plan,
    /// The system's output folder.
    pub out: PathBuf,
    pub facts: keys::Facts,
    pub env: Environment,
    /// Named inputs of every node (index = node index).
    pub inputs: Vec<BTreeMap<String, String>>,
    /// CPU feature flags of this machine (for `requires-cpu`).
    pub cpu_flags: BTreeSet<String>,
    /// The kem-runner binary (built for the system's target when it is foreign).
    pub runner: PathBuf,
    /// The emulator command kem-runner runs under (program absolute), when the system's
    /// target is emulated here.
    pub emulator: Option<Vec<String>>,
    /// How submission-controlled processes are contained.
    pub sandbox: sandbox::Sandbox,
    /// The Slurm executor (`executor "slurm"`); `None`: steps run here.
    pub slurm: Option<exec::slurm::Slurm>,
    /// Objects shared between instances, built once.
    pub shared_objects: steps::build::SharedObjects,
    /// Where running steps report how far they are (set when a run starts).
    pub progress: std::sync::OnceLock<std::sync::Arc<progress::Progress>>,
    /// The run's campaign header (set when a run starts; [`campaign::begin`]).
    pub campaign_header: std::sync::OnceLock<record::CampaignRecord>,
}

impl Ctx {
    pub fn node(&self, ix: NodeIndex) -> &Node {
        &self.plan.graph[ix]
    }

    pub fn submission(&self, node: &Node) -> &Submission {
        &self.campaign.submissions[node.submission]
    }

    /// A node's timeout: its instance's `instances` entry's, else its step's.
    pub fn timeout(&self, node: &Node) -> std::time::Duration {
        let Some(spec) = self.spec(node.kind) else {
            return std::time::Duration::ZERO;
        };
        match self.campaign.submissions.get(node.submission) {
            Some(sub) => spec.timeout_for(&sub.id, self.instance(node).map(|i| i.id.as_str())),
            None => spec.timeout,
        }
    }

    pub fn instance(&self, node: &Node) -> Option<&Instance> {
        node.instance.map(|i| &self.submission(node).instances[i])
    }

    /// The sandbox of node `ix`'s contained commands: through its Slurm job when it has one.
    pub fn sandbox_for(&self, ix: NodeIndex) -> sandbox::Sandbox {
        match self
            .slurm
            .as_ref()
            .and_then(|s| Some((s, s.job_of(ix.index())?)))
        {
            Some((s, job)) => self.sandbox.via(s.launcher(&job)),
            None => self.sandbox.clone(),
        }
    }

    /// The environment node `ix` is measured in: its Slurm node's (captured there, once per
    /// node), else this machine's.
    pub fn env_of(&self, ix: NodeIndex) -> Environment {
        match self
            .slurm
            .as_ref()
            .and_then(|s| Some((s, s.job_of(ix.index())?)))
        {
            Some((s, job)) => s.node_env(&job, &self.campaign.system, &self.env),
            None => self.env.clone(),
        }
    }

    pub fn spec(&self, kind: StepKind) -> Option<&StepSpec> {
        self.campaign.steps.iter().find(|s| s.kind == kind)
    }

    pub fn key(&self, ix: NodeIndex) -> String {
        keys::key_at(&self.inputs, ix)
    }

    /// Path of a node's record, absolute.
    pub fn record_path(&self, node: &Node) -> PathBuf {
        if node.kind.scope() == crate::model::StepScope::Campaign {
            return self
                .out
                .join("records")
                .join(format!("_{}.json", node.kind));
        }
        let sub = self.submission(node);
        self.out.join(record::record_path(
            node.kind,
            &sub.id,
            self.instance(node).map(|i| i.id.as_str()),
            node.op,
        ))
    }

    /// The current record of a node, if any (unreadable records count as absent).
    pub fn read_record(&self, node: &Node) -> Option<StepRecord> {
        record::read_json(&self.record_path(node)).ok().flatten()
    }

    /// The record of the step of `kind` for the same submission/instance as `node`.
    pub fn sibling_record(&self, node: &Node, kind: StepKind) -> Option<StepRecord> {
        let sub = self.submission(node);
        let instance = if kind.scope() == crate::model::StepScope::Submission {
            None
        } else {
            self.instance(node).map(|i| i.id.as_str())
        };
        let path = self
            .out
            .join(record::record_path(kind, &sub.id, instance, None));
        record::read_json(&path).ok().flatten()
    }

    /// Make `path` relative to the output folder for records.
    pub fn rel(&self, path: &Path) -> PathBuf {
        path.strip_prefix(&self.out)
            .map(Path::to_path_buf)
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

/// UTC timestamp in RFC 3339 with seconds (`2026-09-25T10:02:21Z`).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    utc_from_unix(secs)
}

/// Civil-from-days (Howard Hinnant's algorithm), so no date crate is needed.
pub fn utc_from_unix(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc() {
        assert_eq!(utc_from_unix(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_from_unix(1_758_794_541), "2025-09-25T10:02:21Z");
        assert_eq!(utc_from_unix(951_782_400), "2000-02-29T00:00:00Z");
    }
}
