//! The hostile fixtures that used to stop the engine (`tests/fixtures/hostile/stopping/`):
//! a `.rsp` replaced by a FIFO or by a link to `/dev/zero`, 40,000 nested folders left in
//! a scratch folder, a symbolic-link loop in a source folder. Their campaign runs twice
//! into the same outputs: each run ends, every case ends within its timeout with its reason,
//! the good fixture beside them passes, and nothing is left in `scratch/`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ngcc_pipe::model::StepKind;
use ngcc_pipe::record::Status;

use super::common::*;

fn pipeline() -> PathBuf {
    repo().join("tests/fixtures/hostile/stopping/stopping.kdl")
}

/// (fixture, KAT status, text its reason must contain); `None`: the KAT passes.
const CASES: [(&str, Option<&str>); 5] = [
    ("rsp-fifo", Some("is a FIFO, not a regular file")),
    ("rsp-zero", Some("is a symbolic link (not followed)")),
    ("deep-scratch", Some("nested folders")),
    ("source-loop", None),
    ("good", None),
];

/// The KAT step's timeout in `stopping.kdl`.
const KAT_TIMEOUT: f64 = 30.0;

fn check_run(out: &Path, r: &Run, c: &mut Checks, round: usize) {
    c.check(r.code == 1, || {
        format!("run {round}: exit code {} (want 1)", r.code)
    });
    for (case, want) in CASES {
        let kat = rec(out, StepKind::Kat, case, Some(case), None);
        match want {
            None => c.check(kat.status == Status::Ok, || {
                format!(
                    "run {round}: {case}: KAT {:?}: {:?}",
                    kat.status, kat.reason
                )
            }),
            Some(text) => c.check(
                kat.status == Status::Failed
                    && kat.reason.as_deref().is_some_and(|r| r.contains(text)),
                || {
                    format!(
                        "run {round}: {case}: KAT {:?} {:?}, want failed naming `{text}`",
                        kat.status, kat.reason
                    )
                },
            ),
        }
        c.check(kat.duration_s < KAT_TIMEOUT + 5.0, || {
            format!(
                "run {round}: {case}: KAT took {} s (timeout {KAT_TIMEOUT} s)",
                kat.duration_s
            )
        });
    }
    let left = out.join("scratch");
    c.check(!left.exists(), || {
        format!("run {round}: {} is left", left.display())
    });
}

#[test]
fn stopping_cases_end_with_their_reason_and_a_rerun_works() {
    let tmp = tempdir();
    let out = tmp.path().join("out");
    let mut c = Checks::default();
    let mut shown = String::new();

    // The plan ends (the source tree hash does not follow the loop).
    let started = Instant::now();
    let dry = run(&[
        "run".as_ref(),
        pipeline().as_os_str(),
        "--outputs".as_ref(),
        out.as_os_str(),
        "--dry-run".as_ref(),
    ]);
    c.check(
        dry.code == 0 && started.elapsed() < Duration::from_secs(30),
        || format!("dry run: {}", dry.show()),
    );

    for round in 1..=2 {
        let r = run(&[
            "run".as_ref(),
            pipeline().as_os_str(),
            "--outputs".as_ref(),
            out.as_os_str(),
        ]);
        shown.push_str(&r.show());
        check_run(&out, &r, &mut c, round);
        // The failed cases ran again in the second run.
        if round == 2 {
            let ran = campaign_json(&out)
                .steps
                .iter()
                .filter(|s| s.ran && s.id.ends_with("/kat"))
                .count();
            c.check(ran == 3, || format!("run 2 re-ran {ran} KATs (want 3)"));
        }
    }
    c.done(&shown);
}
