//! How a run starts, stops and ends, on the real binary and the fault fixtures
//! (`tests/fixtures/kems/`): killed with SIGKILL mid-run, no process it started outlives it
//! and the next run resumes; `--fail-fast` stops starting steps after the first failure;
//! `isolation "machine"` never runs a parallel step beside an exclusive one; and the exit
//! codes of a missing tool, an unreadable file and an empty comparison.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use ngcc_pipe::model::{host_arch, StepKind};
use ngcc_pipe::record::{self, Status, StepRecord};

mod common;
use common::*;

/// Every record under `out` (records/ and profile/), parsed: relative path -> (bytes,
/// record). Panics naming a file that is not a whole record.
fn records(out: &Path) -> BTreeMap<PathBuf, (Vec<u8>, StepRecord)> {
    tree(out)
        .into_iter()
        .filter(|f| {
            (f.starts_with("records/") || f.starts_with("profile/")) && f.ends_with(".json")
        })
        .map(|f| {
            let bytes = std::fs::read(out.join(&f)).unwrap();
            let rec: StepRecord = serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("{f} is not a whole record: {e}"));
            (PathBuf::from(f), (bytes, rec))
        })
        .collect()
}

/// The fixture pipeline over `subs`, written into `dir`, with `edits` applied.
fn pipeline(dir: &Path, subs: &[&str], edits: &[(&str, &str)]) -> PathBuf {
    let kems = repo().join("tests/fixtures/kems");
    let mut text = fixture_pipeline("lifecycle", &kems, subs, "single", "5ms");
    for (from, to) in edits {
        assert!(text.contains(from), "{from}");
        text = text.replacen(from, to, 1);
    }
    let path = dir.join("p.kdl");
    std::fs::write(&path, text).unwrap();
    path
}

/// SIGKILL while `hang-dec`'s KAT runs (its runner spins for 60 s; the kill waits until
/// kem-runner itself runs, past the sandbox's setup) and after `good`'s KAT has its record: every process started for the run (kem-runner, bwrap, gcc) dies with
/// it; every record left is whole; the next run, which does not hold the dead run's lock,
/// keeps the finished records as they are and does only the rest.
#[test]
fn sigkill_leaves_no_process_behind_and_the_next_run_resumes() {
    let tmp = tempdir();
    let p = pipeline(tmp.path(), &["good", "hang-dec"], &[]);
    let out = tmp.path().join("out");
    let mut child = ngcc()
        .arg("run")
        .arg(&p)
        .arg("--outputs")
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ngcc-pipe starts");
    let good_kat = out.join(record::record_path(
        StepKind::Kat,
        "good",
        Some("good"),
        None,
    ));
    let t0 = Instant::now();
    loop {
        // kem-runner itself (`<pid> <comm> <command line>`), not bwrap setting it up.
        let hanging = survivors(&out)
            .iter()
            .any(|p| p.split(' ').nth(1) == Some("kem-runner") && p.contains("hang-dec"));
        if hanging && good_kat.exists() {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended ({status}) before hang-dec's KAT ran");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "hang-dec's KAT did not start within 5 min"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    child.wait().unwrap();
    let left = settled_survivors(&out);
    assert!(left.is_empty(), "processes outlived the engine: {left:?}");

    let first = records(&out);
    let finished: BTreeMap<&PathBuf, &(Vec<u8>, StepRecord)> = first
        .iter()
        .filter(|(_, (_, r))| r.status == Status::Ok)
        .collect();
    let good_kat_rel = record::record_path(StepKind::Kat, "good", Some("good"), None);
    assert!(
        finished.contains_key(&good_kat_rel),
        "{good_kat_rel:?} not among {:?}",
        finished.keys()
    );

    // hang-dec would hang again: the rest of the campaign is good's.
    let again = run(&["run", &s(&p), "--outputs", &s(&out), "--only", "good/*"]);
    assert_eq!(again.code, 0, "{}", again.show());
    let camp = campaign_json(&out);
    let after = records(&out);
    for (path, (bytes, rec)) in &finished {
        assert_eq!(&after[*path].0, bytes, "{} was written again", rec.id);
        let step = camp.steps.iter().find(|s| s.id == rec.id).expect("listed");
        assert!(!step.ran, "{} ran again", rec.id);
    }
    let good: Vec<_> = camp
        .steps
        .iter()
        .filter(|s| s.id.starts_with("good/"))
        .collect();
    assert!(good.len() > finished.len(), "{good:?}");
    for s in &good {
        assert_eq!(s.status, Status::Ok, "{}: {:?}", s.id, s.reason);
        let was_done = finished.values().any(|(_, r)| r.id == s.id);
        assert_eq!(s.ran, !was_done, "{}", s.id);
    }
}

/// `--fail-fast`: after `segv-keygen`'s KAT fails, no step starts; the run exits 1 saying
/// so, and the steps that need everything (the report and index steps) never ran. (The
/// reports are still rendered from what exists at the end of the run, as after any run.)
#[test]
fn fail_fast_starts_nothing_after_the_first_failure() {
    let tmp = tempdir();
    let p = pipeline(tmp.path(), &["segv-keygen", "good", "own-keccak"], &[]);
    let out = tmp.path().join("out");
    let r = run(&[
        "run",
        &s(&p),
        "--outputs",
        &s(&out),
        "--fail-fast",
        "-j",
        "1",
    ]);
    assert_eq!(r.code, 1, "{}", r.show());
    assert!(
        r.stderr.contains("stopped early (--fail-fast)"),
        "{}",
        r.show()
    );
    let all = records(&out);
    let failed: Vec<&StepRecord> = all
        .values()
        .map(|(_, r)| r)
        .filter(|r| r.status.is_failure())
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].id, "segv-keygen/segv-keygen/kat");
    // Nothing started after it ended (times in whole seconds: a later start can only tie).
    for (_, r) in all.values() {
        assert!(
            r.started <= failed[0].finished,
            "{} started at {}, after the failure at {}",
            r.id,
            r.started,
            failed[0].finished
        );
    }
    for kind in [StepKind::Report, StepKind::Index] {
        assert!(
            !all.values().any(|(_, r)| r.kind == kind),
            "a {kind} step ran: {:?}",
            all.keys()
        );
    }
}

/// `isolation "machine"`: no parallel step (a build, a KAT) runs while an exclusive one
/// (time, profile) does. `hang-dec`'s KAT spins for its 5 s timeout while `good`'s timing
/// and profiling are ready to go: they wait for it.
#[test]
fn machine_isolation_runs_exclusive_steps_alone() {
    let tmp = tempdir();
    let p = pipeline(
        tmp.path(),
        &["good", "hang-dec"],
        &[
            (
                "    cc \"gcc\"\n",
                "    cc \"gcc\"\n    isolation \"machine\"\n",
            ),
            (
                "step \"kat\" needs=\"build\" modes=\"single\"",
                "step \"kat\" needs=\"build\" modes=\"single\" timeout=\"5s\"",
            ),
        ],
    );
    let out = tmp.path().join("out");
    let r = run(&["run", &s(&p), "--outputs", &s(&out), "-j", "2"]);
    assert_eq!(r.code, 1, "hang-dec's KAT times out: {}", r.show());
    let ran: Vec<StepRecord> = records(&out)
        .into_values()
        .map(|(_, r)| r)
        .filter(|r| r.status != Status::Skipped)
        .collect();
    let exclusive = |r: &StepRecord| matches!(r.kind, StepKind::Time | StepKind::Profile);
    let hang_kat = ran
        .iter()
        .find(|r| r.id == "hang-dec/hang-dec/kat")
        .expect("hang-dec's KAT record");
    assert_eq!(hang_kat.status, Status::TimedOut, "{:?}", hang_kat.reason);
    let timed: Vec<&StepRecord> = ran.iter().filter(|r| exclusive(r)).collect();
    assert_eq!(timed.len(), 6, "good's time and profile steps: {timed:?}");
    // Whole seconds: two intervals overlap for sure when each starts before the other ends
    // (`a < b` between truncated times implies it between the true ones).
    for e in &timed {
        assert_eq!(e.status, Status::Ok, "{}: {:?}", e.id, e.reason);
        for p in ran.iter().filter(|r| !exclusive(r)) {
            assert!(
                !(p.started < e.finished && e.started < p.finished),
                "{} ({} - {}) ran beside the exclusive {} ({} - {})",
                p.id,
                p.started,
                p.finished,
                e.id,
                e.started,
                e.finished
            );
        }
    }
}

/// Exit codes: 2 for a missing tool, a file that cannot be read, and output folders with
/// nothing to compare; the message names the cause, never a panic.
#[test]
fn missing_tool_unreadable_file_and_empty_comparison_exit_2() {
    let tmp = tempdir();
    let expect = |r: &Run, code: i32, text: &str| {
        assert_eq!(r.code, code, "{}", r.show());
        assert!(r.stderr.contains(text), "`{text}` missing: {}", r.show());
        assert!(!r.stderr.contains("panicked"), "{}", r.show());
    };

    // A missing tool: the emulator a foreign system names.
    let foreign = if host_arch() == "aarch64" {
        "x86-64"
    } else {
        "aarch64"
    };
    let p = pipeline(
        tmp.path(),
        &["good"],
        &[(
            "    cc \"gcc\"\n",
            &format!(
                "    cc \"gcc\"\n    arch \"{foreign}\"\n    emulator \"ngcc-no-such-emulator\"\n"
            ),
        )],
    );
    let r = run_with_env(
        &["run", &s(&p), "--outputs", &s(&tmp.path().join("out"))],
        // The target's runner is not what this is about: no cross build.
        &[("NGCC_KEM_RUNNER_TARGET", "/nonexistent/kem-runner")],
    );
    expect(&r, 2, "emulator `ngcc-no-such-emulator` not found on PATH");

    // A file that cannot be read: the pipeline is a folder.
    let folder = tmp.path().join("folder.kdl");
    std::fs::create_dir(&folder).unwrap();
    for cmd in ["check", "run"] {
        let r = run(&[cmd, &s(&folder)]);
        expect(&r, 2, &s(&folder));
    }

    // Nothing to compare: no records, or no operation timed in both.
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(empty.join("records")).unwrap();
    let r = run(&["compare", &s(&empty), &s(&empty)]);
    assert_eq!(r.code, 2, "{}", r.show());
    assert!(!r.stderr.trim().is_empty() && !r.stderr.contains("panicked"));
    let r = run(&["compare", "--measure", &s(&empty), &s(&empty)]);
    expect(&r, 2, "no operation is timed successfully in both");
    let r = run(&[
        "compare",
        &s(&tmp.path().join("none")),
        &s(&tmp.path().join("none")),
    ]);
    assert_eq!(r.code, 2, "{}", r.show());
}
