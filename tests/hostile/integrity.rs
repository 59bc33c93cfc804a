//! Fixtures that fake their results rather than escape (`tests/fixtures/hostile/integrity/`),
//! beside the `good` toy KEM: a submitted KAT file with more counts than the generator wrote
//! (`kat-extra`), ciphertexts that decapsulate only in the process that made them
//! (`kat-static`), a KEM with one face under valgrind and another natively (`two-faces`)
//! and one that repeats its outputs when called back to back (`lazy`). None of them gets a
//! PASS, a trusted figure or a clean constant-time verdict; `good` gets all of them.
//!
//! Needs valgrind (the `count` and `ct` steps), not root: `scripts/test.sh` runs this binary
//! again as an unprivileged user.

use ngcc_pipe::model::{KatMode, Op, StepKind};
use ngcc_pipe::record::{KatStatus, Status};
use ngcc_pipe::report::Results;

use super::common::*;

const OPS: [Op; 3] = [Op::Keygen, Op::Enc, Op::Dec];

/// The status of one KAT mode of an instance's KAT record, with its reason.
fn kat_mode(out: &std::path::Path, sub: &str, mode: KatMode) -> (Option<KatStatus>, String) {
    let r = rec(out, StepKind::Kat, sub, Some(sub), None);
    let m = kat_data(&r).modes.iter().find(|m| m.mode == mode);
    (
        m.map(|m| m.status),
        m.and_then(|m| m.reason.clone()).unwrap_or_default(),
    )
}

#[test]
fn faked_results_are_neither_passed_nor_trusted() {
    if !require_valgrind() {
        return;
    }
    let tmp = tempdir();
    let out = tmp.path().join("out");
    let pipeline = repo().join("tests/fixtures/hostile/integrity/integrity.kdl");
    let r = run(&[
        "run".as_ref(),
        pipeline.as_os_str(),
        "--outputs".as_ref(),
        out.as_os_str(),
    ]);
    let mut c = Checks::default();
    c.check(r.code == 1, || format!("exit code {} (want 1)", r.code));
    let results: Results = serde_json::from_slice(
        &std::fs::read(out.join("reports/results.json")).expect("results.json"),
    )
    .expect("results.json parses");
    let inst = |id: &str| results.instance(id, id).expect("listed in results.json");
    let index = std::fs::read_to_string(out.join("reports/index.md")).expect("index.md");

    // A submitted file of 5 counts where the generator wrote 3: `all` is a MISMATCH naming
    // the first extra count (3, whose values are wrong too); `single` still passes.
    let (all, why) = kat_mode(&out, "kat-extra", KatMode::All);
    c.check(
        all == Some(KatStatus::Mismatch) && why.contains("count 3"),
        || format!("kat-extra all: {all:?} {why:?} (want MISMATCH naming count 3)"),
    );
    let (single, why) = kat_mode(&out, "kat-extra", KatMode::Single);
    c.check(single == Some(KatStatus::Pass), || {
        format!("kat-extra single: {single:?} {why:?}")
    });

    // Ciphertexts that only the enc process can decapsulate: FAIL, from the fresh process.
    let (single, why) = kat_mode(&out, "kat-static", KatMode::Single);
    c.check(
        single == Some(KatStatus::Fail) && why.contains("fresh process"),
        || format!("kat-static single: {single:?} {why:?} (want FAIL from a fresh process)"),
    );

    for op in OPS {
        // Plain under valgrind, slow and leaky natively: time, count and ct not trusted,
        // and no clean constant-time verdict anywhere.
        let faces = inst("two-faces");
        let o = faces.op(op).expect("two-faces op");
        c.check(
            o.untrusted
                .as_deref()
                .is_some_and(|u| u.starts_with("behaves differently under valgrind")),
            || format!("two-faces {op}: untrusted {:?}", o.untrusted),
        );
        let ct = faces.constant_time.iter().find(|x| x.op == op);
        c.check(
            ct.is_some_and(|x| {
                x.untrusted.is_some()
                    && x.verdict
                        .starts_with("not trusted: behaves differently under valgrind")
            }),
            || format!("two-faces ct {op}: {ct:?}"),
        );
        // Repeats its outputs when called back to back: its fast figure is not trusted.
        let o = inst("lazy").op(op).expect("lazy op");
        c.check(
            o.status != Some(Status::Ok)
                || o.untrusted
                    .as_deref()
                    .is_some_and(|u| u.starts_with("does less when")),
            || {
                format!(
                    "lazy {op}: {:?} at {:?} cycles, untrusted {:?}",
                    o.status,
                    o.cycles(),
                    o.untrusted
                )
            },
        );
        // The honest KEM: measured, counted, checked, and trusted.
        let good = inst("good");
        let o = good.op(op).expect("good op");
        c.check(
            o.status == Some(Status::Ok) && o.untrusted.is_none() && o.instructions.is_some(),
            || format!("good {op}: {:?} untrusted {:?}", o.status, o.untrusted),
        );
        let ct = good.constant_time.iter().find(|x| x.op == op);
        c.check(
            ct.is_some_and(|x| x.untrusted.is_none() && x.locations == Some(0)),
            || format!("good ct {op}: {ct:?}"),
        );
        for kind in [StepKind::Time, StepKind::Count, StepKind::Ct] {
            let g = rec(&out, kind, "good", Some("good"), Some(op));
            c.check(g.status == Status::Ok, || {
                format!("good {kind:?} {op}: {:?} {:?}", g.status, g.reason)
            });
        }
    }
    let (good, why) = kat_mode(&out, "good", KatMode::Single);
    c.check(good == Some(KatStatus::Pass), || {
        format!("good KAT {good:?} {why:?}")
    });

    // The reports say so: the index's status block names the operations, the index claims
    // no clean run, and two-faces' report gives no clean verdict.
    // lazy: its time steps fail on their checked outputs ("outputs differ when timed",
    // tests/hostile/checked.rs), or a figure that passed them is marked.
    for (sub, whys) in [
        ("two-faces", &["behaves differently under valgrind"][..]),
        ("lazy", &["does less when", "outputs differ when timed"][..]),
    ] {
        c.check(
            index
                .lines()
                .any(|l| l.contains(sub) && whys.iter().any(|w| l.contains(w))),
            || format!("index.md does not name {sub}: {whys:?}"),
        );
    }
    c.check(
        index.contains("Figures that contradict each other") && !index.contains("Nothing failed"),
        || "index.md's status block does not list the contradicting figures".to_string(),
    );
    let faces = std::fs::read_to_string(out.join("reports/two-faces.md")).expect("report");
    c.check(
        !faces.contains("no secret-dependent branch or index found")
            && faces.contains("⚠ not trusted: behaves differently under valgrind"),
        || "two-faces.md shows a clean constant-time verdict or no mark".to_string(),
    );
    c.done(&r.show());
}
