//! Helpers shared by the integration tests that run the real `ngcc-pipe` binary: the
//! binary with the runner beside it, temporary output folders, pipelines that run on this
//! machine wherever the clone lives, records, a collector of failed checks, and the checks
//! for what a test needs outside Rust ([`require`]).
#![allow(dead_code)] // each test binary uses its own subset

pub mod require;

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use require::{require, require_tool};

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
    run_with_env(args, &[])
}

/// [`run`] with more environment variables.
pub fn run_with_env<S: AsRef<std::ffi::OsStr>>(args: &[S], env: &[(&str, &str)]) -> Run {
    let t0 = Instant::now();
    let out: Output = ngcc()
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("ngcc-pipe starts");
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

/// The core the tests pin timing to: the first of the cores this process may run on (not a
/// fixed 0, which a cgroup or `taskset` may exclude).
pub fn bench_cpu() -> usize {
    kem_native::sys::thread_affinity()
        .ok()
        .and_then(|cpus| cpus.first().copied())
        .expect("sched_getaffinity lists the cores this process may run on")
}

/// `text` as a KDL string literal (quotes included).
pub fn kdl_str(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// `path` with `.` and `..` resolved lexically (for glob patterns, which cannot be
/// canonicalized).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// A copy of the repository's pipeline `rel` written to `to`, runnable from there on this
/// machine: its `submissions`, `submissions-root` and `outputs` paths made absolute,
/// `bench-cpu` set to [`bench_cpu`], then each `(from, to)` edit applied (each must match).
pub fn pipeline_copy(rel: &str, to: &Path, edits: &[(&str, &str)]) -> PathBuf {
    let src = repo().join(rel);
    let base = src.parent().expect("the pipeline is in a folder");
    let text = std::fs::read_to_string(&src).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let mut lines = Vec::new();
    for line in text.lines() {
        let word = line.split_whitespace().next().unwrap_or("");
        let line = if word == "bench-cpu" {
            let indent = &line[..line.len() - line.trim_start().len()];
            format!("{indent}bench-cpu {}", bench_cpu())
        } else if ["submissions", "submissions-root", "outputs"].contains(&word)
            && !line.starts_with(' ')
        {
            // `word "a" "b" // comment`: each quoted path made absolute.
            let code = line.split("//").next().unwrap_or(line);
            let paths: Vec<String> = code
                .split('"')
                .skip(1)
                .step_by(2)
                .map(|p| kdl_str(&lexical(&base.join(p)).display().to_string()))
                .collect();
            format!("{word} {}", paths.join(" "))
        } else {
            line.to_string()
        };
        lines.push(line);
    }
    let mut text = lines.join("\n") + "\n";
    for (from, to) in edits {
        assert!(text.contains(from), "{rel} has no `{from}`");
        text = text.replacen(from, to, 1);
    }
    std::fs::write(to, text).expect("write the pipeline copy");
    to.to_path_buf()
}

/// The unpacked folder of crate `name` at exactly `version`, fetched with cargo (offline
/// first, then from the registry; checksum-verified) as the `source` step does, or why it
/// cannot be had. Once per process and crate, in a fetch project of this process's own.
pub fn registry_crate(name: &str, version: &str) -> Result<PathBuf, String> {
    static SCRATCH: OnceLock<tempfile::TempDir> = OnceLock::new();
    static FOUND: Mutex<BTreeMap<String, Result<PathBuf, String>>> = Mutex::new(BTreeMap::new());
    let scratch = SCRATCH.get_or_init(|| {
        tempfile::Builder::new()
            .prefix("ngcc-test-fetch-")
            .tempdir()
            .expect("temp dir")
    });
    let mut found = FOUND.lock().unwrap_or_else(|e| e.into_inner());
    found
        .entry(format!("{name}-{version}"))
        .or_insert_with(|| {
            ngcc_pipe::run::steps::source::fetch_crate(scratch.path(), name, version)
                .map_err(|e| format!("crate `{name}` {version} cannot be fetched with cargo: {e}"))
        })
        .clone()
}

/// [`require`] for the crates the example submissions are built from (group `crates`).
#[must_use]
pub fn require_crates(crates: &[(&str, &str)]) -> bool {
    let missing = crates.iter().find_map(|(n, v)| registry_crate(n, v).err());
    require("crates", missing)
}

/// The crates of `submissions/` and `pipelines/quick/`.
pub const MLKEM_CRATE: (&str, &str) = ("pqcrypto-mlkem", "0.1.1");
pub const FRODO_CRATE: (&str, &str) = ("pqcrypto-frodo", "0.4.11");

/// [`require`] for valgrind (group `valgrind`: the `count` and `ct` steps).
#[must_use]
pub fn require_valgrind() -> bool {
    require_tool("valgrind", "valgrind", "valgrind")
}

/// Every file under `dir`, relative, sorted.
pub fn tree(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            // A link a KEM left is listed, never followed (it may point at `/` or loop).
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Processes alive whose command line, working folder or environment names the run's
/// outputs folder: bwrap and gcc (their command lines), kem-runner (`kem-runner -`, working
/// in its scratch folder, its `HOME`), and what hostile fixtures fork (they inherit
/// kem-runner's folder and environment; their names, shown here too, are `ngcc-hostile-*`).
/// Each as `<pid> <comm> <command line> (in <working folder>)`.
pub fn survivors(out: &Path) -> Vec<String> {
    let needle = out.display().to_string();
    let mut found = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        let cmdline = std::fs::read(e.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        let cwd = std::fs::read_link(e.path().join("cwd"))
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let home = std::fs::read(e.path().join("environ"))
            .map(|b| {
                b.split(|&c| c == 0)
                    .any(|v| v.starts_with(format!("HOME={needle}").as_bytes()))
            })
            .unwrap_or(false);
        if cmdline.contains(&needle) || cwd.starts_with(&needle) || home {
            found.push(format!("{name} {} {cmdline} (in {cwd})", comm.trim()));
        }
    }
    found
}

/// Survivors after giving the kernel a moment to reap what was just killed.
pub fn settled_survivors(out: &Path) -> Vec<String> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let s = survivors(out);
        if s.is_empty() || Instant::now() > until {
            return s;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A pipeline over fixture KEMs in `kems` (absolute), with short measurements.
pub fn fixture_pipeline(
    name: &str,
    kems: &Path,
    subs: &[&str],
    kat_modes: &str,
    trial: &str,
) -> String {
    let manifests: Vec<String> = subs
        .iter()
        .map(|sub| format!("\"{}\"", s(&kems.join(sub).join("manifest.kdl"))))
        .collect();
    format!(
        r#"system "{name}" {{
    bench-cpu {cpu}
    cc "gcc"
}}
flags "fixture" "-O2"
flags "harness-default" "-O2"
submissions {}
submissions-root "{}"
outputs "outputs"
defaults timeout="60s"
step "source"
step "build" needs="source" flags="fixture"
step "kat" needs="build" modes="{kat_modes}"
step "sizes" needs="kat"
step "survey" needs="build"
step "time" needs="kat" exclusive=#true ops="keygen enc dec" trials=2 trial="{trial}" min-iters=5 samples=11
step "profile" needs="kat" exclusive=#true ops="keygen enc dec" iters=5
step "report" needs="kat time sizes profile survey"
step "index" needs="report"
"#,
        manifests.join(" "),
        s(kems),
        cpu = bench_cpu(),
    )
}
