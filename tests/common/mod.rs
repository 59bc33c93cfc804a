//! Helpers shared by the integration tests that run the real `ngcc-pipe` binary
//! (`tests/engine.rs`, `tests/hostile.rs`): the binary with the runner beside it, temporary
//! output folders, records, and a collector of failed checks.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

use ngcc_pipe::model::{Op, StepKind};
use ngcc_pipe::record::{self, CampaignRecord, KatData, StepData, StepRecord};

/// The repository root (tests run with it as working directory).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `ngcc-pipe` with the repository as working directory and the runner beside it.
pub fn ngcc() -> Command {
    let exe = Path::new(env!("CARGO_BIN_EXE_ngcc-pipe"));
    let mut cmd = Command::new(exe);
    cmd.current_dir(repo()).env("NO_COLOR", "1");
    if let Some(runner) = exe.parent().map(|d| d.join("kem-runner")) {
        if runner.is_file() {
            cmd.env("NGCC_KEM_RUNNER", runner);
        }
    }
    cmd
}

/// A finished `ngcc-pipe` invocation.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub secs: f64,
}

impl Run {
    pub fn show(&self) -> String {
        format!(
            "exit {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

pub fn run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Run {
    let t0 = Instant::now();
    let out: Output = ngcc().args(args).output().expect("ngcc-pipe starts");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        secs: t0.elapsed().as_secs_f64(),
    }
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ngcc-engine-test-")
        .tempdir()
        .expect("temp dir")
}

pub fn s(p: &Path) -> String {
    p.display().to_string()
}

/// A step's record in an output folder (panics with the path when it is missing).
pub fn rec(
    out: &Path,
    kind: StepKind,
    sub: &str,
    inst: Option<&str>,
    op: Option<Op>,
) -> StepRecord {
    try_rec(out, kind, sub, inst, op).unwrap_or_else(|| {
        panic!(
            "no record {}",
            out.join(record::record_path(kind, sub, inst, op)).display()
        )
    })
}

pub fn try_rec(
    out: &Path,
    kind: StepKind,
    sub: &str,
    inst: Option<&str>,
    op: Option<Op>,
) -> Option<StepRecord> {
    let path = out.join(record::record_path(kind, sub, inst, op));
    record::read_json(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn campaign_json(out: &Path) -> CampaignRecord {
    record::read_json(&out.join("campaign.json"))
        .expect("campaign.json is valid JSON")
        .expect("campaign.json exists")
}

pub fn kat_data(r: &StepRecord) -> &KatData {
    match &r.data {
        Some(StepData::Kat(k)) => k,
        other => panic!("{}: no KAT data: {other:?}", r.id),
    }
}

/// Collects failed checks so one run reports every problem at once.
#[derive(Default)]
pub struct Checks(pub Vec<String>);

impl Checks {
    pub fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }

    pub fn done(self, context: &str) {
        assert!(
            self.0.is_empty(),
            "{} problem(s):\n  - {}\n{context}",
            self.0.len(),
            self.0.join("\n  - ")
        );
    }
}
