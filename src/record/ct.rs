//! What a `ct` record holds: memcheck's findings with the secrets marked, and the
//! variable-latency scan of the same object.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::ct::latency::Latency;
use crate::ct::Finding;

/// What a `ct` record holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CtData {
    /// Operations run under memcheck with the secrets marked.
    pub runs: u32,
    /// What was secret and what declassified, in words (from kem-runner).
    pub marked: String,
    /// The valgrind object, relative to the output folder, and its flags.
    pub object: PathBuf,
    pub flags: Vec<String>,
    /// `valgrind --version`.
    pub valgrind: String,
    /// memcheck's XML output, relative to the output folder.
    pub raw_log: PathBuf,
    /// Secret-dependent branches and indexes inside the object, by location.
    pub findings: Vec<Finding>,
    /// `no secret-dependent branch or index found` / `N locations` (with the benign count).
    pub verdict: String,
    /// Other memcheck errors inside the run (invalid reads, ...), by kind.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other_errors: BTreeMap<String, u64>,
    /// Secret-dependent reports with no frame in the object (the runner's own code).
    #[serde(default)]
    pub outside_object: u64,
    /// The variable-latency scan of the object from this operation's API function (absent
    /// in records written before the scan existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
}

impl CtData {
    /// How many variable-latency instructions the scan found in the instance's own code
    /// and in the provided primitives (`None`: not scanned).
    pub fn variable_latency(&self) -> Option<(usize, usize)> {
        let s = self.latency.as_ref().and_then(Latency::scanned)?;
        let (own, provided) = crate::ct::latency::split(s);
        Some((own.len(), provided.len()))
    }
}
