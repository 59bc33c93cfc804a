//! The KEM fixtures of `tests/fixtures/hostile/containment/` run by the real engine beside
//! `good`: `move-core` tries to move itself to every other core while timed (it stays on the
//! bench core, and the time record says what held it there), `tsc-trap`'s constructor asks
//! for a faulting `rdtsc` and `cpuid` (both refused with EPERM; its KAT passes), and
//! `bidi-fail` prints a right-to-left override and terminal escapes and carries them in its
//! manifest (shown as escapes on the terminal, in records' reasons, reports, the site,
//! `results.csv` and `results.json`).

use ngcc_pipe::model::{Op, StepKind};
use ngcc_pipe::record::{KatStatus, Status};

use super::common::*;
use super::{contained, files_text, raw_control};

#[test]
fn timed_kems_keep_to_their_core_and_off_the_clock_and_their_text_stays_text() {
    if !contained() {
        return;
    }
    let tmp = tempdir();
    let out = tmp.path().join("out");
    let pipeline = pipeline_copy(
        "tests/fixtures/hostile/containment/containment.kdl",
        &tmp.path().join("containment.kdl"),
        &[],
    );
    let r = run(&[
        "run".as_ref(),
        pipeline.as_os_str(),
        "--outputs".as_ref(),
        out.as_os_str(),
    ]);
    let mut c = Checks::default();
    c.check(r.code == 1, || {
        format!("exit code {} (want 1: bidi-fail fails)", r.code)
    });
    let cpu = bench_cpu();
    let log = |sub: &str, job: &str| {
        std::fs::read_to_string(
            out.join("logs")
                .join(sub)
                .join(sub)
                .join(format!("{job}.log")),
        )
        .unwrap_or_default()
    };

    // move-core: timed on the bench core, every move refused, recorded.
    let t = rec(
        &out,
        StepKind::Time,
        "move-core",
        Some("move-core"),
        Some(Op::Keygen),
    );
    let timed = log("move-core", "time__keygen");
    let line = timed
        .lines()
        .find(|l| l.starts_with("move-core: moved"))
        .unwrap_or("")
        .to_string();
    c.check(line.starts_with("move-core: moved 0 "), || {
        format!("a timed move-core moved: `{line}`\n{timed}")
    });
    c.check(line.ends_with(&format!("on core {cpu}")), || {
        format!("a timed move-core is not on core {cpu}: `{line}`")
    });
    let protections = t
        .sandbox
        .as_ref()
        .map(|s| s.protections.clone())
        .unwrap_or_default();
    c.check(
        protections
            .iter()
            .any(|p| p.starts_with(&format!("kept on core {cpu}:"))),
        || {
            format!(
                "move-core's time record does not say what kept it on core {cpu}: {protections:?}"
            )
        },
    );
    c.check(t.status == Status::Ok, || {
        format!("move-core time {:?}: {:?}", t.status, t.reason)
    });

    // tsc-trap: both calls refused with EPERM (1), the KAT passes, it is timed.
    let kat = std::fs::read_to_string(out.join("kat/tsc-trap/tsc-trap.log")).unwrap_or_default();
    for call in ["prctl(PR_SET_TSC) = -1 errno 1"]
        .into_iter()
        .chain(cfg!(target_arch = "x86_64").then_some("arch_prctl(ARCH_SET_CPUID) = -1 errno 1"))
    {
        c.check(kat.contains(&format!("tsc-trap: {call}")), || {
            format!("tsc-trap's KAT log lacks `{call}`:\n{kat}")
        });
    }
    let k = rec(&out, StepKind::Kat, "tsc-trap", Some("tsc-trap"), None);
    let passed = kat_data(&k)
        .modes
        .iter()
        .all(|m| m.status == KatStatus::Pass);
    c.check(passed && k.status == Status::Ok, || {
        format!("tsc-trap KAT {:?}: {:?}", k.status, k.reason)
    });
    let t = rec(
        &out,
        StepKind::Time,
        "tsc-trap",
        Some("tsc-trap"),
        Some(Op::Keygen),
    );
    c.check(t.status == Status::Ok, || {
        format!("tsc-trap time {:?}: {:?}", t.status, t.reason)
    });

    // bidi-fail: its failure is shown, escaped, everywhere.
    let k = rec(&out, StepKind::Kat, "bidi-fail", Some("bidi-fail"), None);
    let reason = k.reason.clone().unwrap_or_default();
    c.check(reason.contains("\\u{202e}SSAP"), || {
        format!("bidi-fail's reason does not quote its output escaped: {reason:?}")
    });
    c.check(raw_control(&reason).is_none(), || {
        format!("raw control in the reason: {reason:?}")
    });
    for (what, text) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
        c.check(raw_control(text).is_none(), || {
            format!(
                "{what} of `run` holds a raw control: {:?}",
                raw_control(text)
            )
        });
    }
    for folder in ["reports", "site"] {
        for (file, text) in files_text(&out.join(folder)) {
            c.check(raw_control(&text).is_none(), || {
                format!(
                    "{folder}/{file} holds a raw control: {:?}",
                    raw_control(&text)
                )
            });
        }
    }
    let report = std::fs::read_to_string(out.join("reports/bidi-fail.md")).unwrap_or_default();
    c.check(report.contains("\\u{202e}SSAP"), || {
        format!("the report does not show the manifest's name escaped:\n{report}")
    });
    // The good fixture beside them is untouched.
    let g = rec(&out, StepKind::Time, "good", Some("good"), Some(Op::Keygen));
    c.check(g.status == Status::Ok, || {
        format!("good time {:?}: {:?}", g.status, g.reason)
    });
    c.done(&r.show());
}
