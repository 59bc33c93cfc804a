//! Fixtures that fake their results rather than escape (`tests/fixtures/hostile/integrity/`),
//! beside the `good` toy KEM: a submitted KAT file with more counts than the generator wrote
//! (`kat-extra`), ciphertexts that decapsulate only in the process that made them
//! (`kat-static`), a KEM with one face under valgrind and another natively (`two-faces`)
//! and one that repeats its outputs when called back to back (`lazy`). None of them gets a
//! PASS, a trusted figure or a clean constant-time verdict; `good` gets all of them. One
//! that does less when its command line, environment or working folder names a timing job
//! (`argv-peek`) never finds out: every job reads alike to it, and it is timed computing.
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
    jobs_look_alike(&out, &mut c);
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

/// What `argv-peek` saw of each job it was loaded for (its `job-view:` lines in the logs):
/// the same command line in KAT, time, count and ct, the same environment (but for its
/// scratch folder, `HOME`, and what valgrind adds: `LD_PRELOAD`, `VALGRIND_*`), a working
/// folder that names no job; never a timing job, so its steps are `ok` and trusted.
fn jobs_look_alike(out: &std::path::Path, c: &mut Checks) {
    let mut views = Vec::new();
    let mut stack = vec![out.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "log") {
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                for l in text.lines().filter_map(|l| l.split_once("job-view: ")) {
                    views.push((p.display().to_string(), l.1.to_string()));
                }
            }
        }
    }
    // A scratch folder's random name (the working folder, HOME and PWD).
    let scratch = |path: &str| -> String {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        let random = name.len() == 16 && name.bytes().all(|b| b.is_ascii_hexdigit());
        format!("{dir}/{}", if random { "<random>" } else { name })
    };
    // What valgrind adds to the environment of its client (Debian's wrapper script
    // included).
    let valgrinds = [
        "LD_PRELOAD=",
        "VALGRIND_",
        "GLIBCPP_FORCE_NEW=",
        "GLIBCXX_FORCE_NEW=",
        "LD_LIBRARY_PATH=/usr/lib/debug",
    ];
    let normal = |view: &str| -> String {
        view.split("| ")
            .map(|part| {
                if let Some(env) = part.strip_prefix("environ=") {
                    let mut kept: Vec<String> = env
                        .split(';')
                        .filter(|v| !v.is_empty() && !valgrinds.iter().any(|w| v.starts_with(w)))
                        .map(|v| match v.split_once('=') {
                            Some((k @ ("HOME" | "PWD"), path)) => format!("{k}={}", scratch(path)),
                            _ => v.to_string(),
                        })
                        .collect();
                    kept.sort();
                    format!("environ={}", kept.join(";"))
                } else if let Some(cwd) = part.strip_prefix("cwd=") {
                    format!("cwd={}", scratch(cwd))
                } else {
                    part.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("| ")
    };
    let kinds = ["kat", "time", "count", "ct"];
    c.check(
        kinds.iter().all(|k| {
            views
                .iter()
                .any(|(p, _)| p.contains(&format!("/{k}/")) || p.contains(&format!("/{k}__")))
        }),
        || format!("argv-peek's job views do not cover {kinds:?}: {views:#?}"),
    );
    let first = views.first().map(|(_, v)| normal(v)).unwrap_or_default();
    c.check(
        views
            .iter()
            .all(|(_, v)| normal(v) == first && v.ends_with("timed=0")),
        || format!("argv-peek's jobs do not look alike (or one names a timing job): {views:#?}"),
    );
    c.check(first.contains("cwd=") && first.contains("<random>"), || {
        format!("argv-peek's working folder is not a scratch folder of a random name: {first}")
    });
    for op in OPS {
        for kind in [StepKind::Time, StepKind::Count, StepKind::Ct] {
            let r = rec(out, kind, "argv-peek", Some("argv-peek"), Some(op));
            c.check(r.status == Status::Ok, || {
                format!("argv-peek {kind:?} {op}: {:?} {:?}", r.status, r.reason)
            });
        }
    }
}
