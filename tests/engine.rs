//! End-to-end tests of the engine: they run the real `ngcc-pipe` binary (and the
//! `kem-runner` beside it) on the fault fixture KEMs, on edited copies of the `good`
//! fixture, and on the example campaign, and check exit codes, the CLI's output and the
//! JSON records it leaves behind. Every run writes into a temporary folder (`--outputs`).
//!
//! Expensive runs are shared: one faults campaign is checked by every fault assertion, one
//! KAT-only run of the example campaign by every real-KEM assertion.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ngcc_pipe::model::{KatMode, Op, StepKind};
use ngcc_pipe::record::{self, KatStatus, RspDiff, Status, StepData, StepRecord, Verdict};
use sha2::{Digest, Sha256};

mod common;
use common::*;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for e in std::fs::read_dir(from).expect("read dir").flatten() {
        let p = e.path();
        let dst = to.join(e.file_name());
        if p.is_dir() {
            copy_dir(&p, &dst);
        } else {
            std::fs::copy(&p, &dst).expect("copy file");
        }
    }
}

/// Every record file below `out` (records/ and profile/): relative path -> bytes.
fn record_files(out: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, base: &Path, acc: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, base, acc);
            } else if p.extension().is_some_and(|x| x == "json") {
                let rel = p.strip_prefix(base).expect("below base").to_path_buf();
                acc.insert(rel, std::fs::read(&p).expect("read record"));
            }
        }
    }
    let mut acc = BTreeMap::new();
    for d in ["records", "profile"] {
        walk(&out.join(d), out, &mut acc);
    }
    acc
}

/// Every file below `out/reports`: relative path -> (bytes, modification time). A report
/// written again with the same bytes has a new modification time.
fn report_files(out: &Path) -> BTreeMap<PathBuf, (Vec<u8>, std::time::SystemTime)> {
    let base = out.join("reports");
    let mut acc = BTreeMap::new();
    let mut stack = vec![base.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read reports").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let modified = e.metadata().and_then(|m| m.modified()).expect("mtime");
                let bytes = std::fs::read(&p).expect("read report");
                acc.insert(
                    p.strip_prefix(&base).unwrap().to_path_buf(),
                    (bytes, modified),
                );
            }
        }
    }
    acc
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

const OPS: [Op; 3] = [Op::Keygen, Op::Enc, Op::Dec];

// ---------------------------------------------------------------------------------------
// 3. CLI
// ---------------------------------------------------------------------------------------

/// Instance ids of the example campaign, from the submissions' `kat.sha256` files (not
/// from the engine): every line not ending in `.all`.
fn example_instances() -> BTreeSet<(String, String)> {
    let mut set = BTreeSet::new();
    for e in std::fs::read_dir(repo().join("submissions"))
        .unwrap()
        .flatten()
    {
        let sums = e.path().join("kat.sha256");
        let Ok(text) = std::fs::read_to_string(&sums) else {
            continue;
        };
        let sub = e.file_name().to_string_lossy().into_owned();
        for line in text.lines() {
            if let Some(name) = line.split_whitespace().nth(1) {
                if !name.ends_with(".all") {
                    set.insert((sub.clone(), name.to_string()));
                }
            }
        }
    }
    assert!(set.len() >= 10, "{set:?}");
    set
}

/// A real /proc/cpuinfo feature name this machine cannot have (the other architecture's).
const ABSENT_CPU_FLAG: &str = if cfg!(target_arch = "x86_64") {
    "sve2"
} else {
    "avx512f"
};

#[path = "engine/commands.rs"]
mod commands;
#[path = "engine/faults.rs"]
mod faults;
#[path = "engine/real_kems.rs"]
mod real_kems;
#[path = "engine/resume.rs"]
mod resume;
