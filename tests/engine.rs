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
// 1. Fault fixtures
// ---------------------------------------------------------------------------------------

/// (fixture, expected KAT status, text the reason must contain)
const FAULTS: [(&str, Status, &str); 6] = [
    ("segv-keygen", Status::Failed, "SIGSEGV"),
    ("abort-enc", Status::Failed, "SIGABRT"),
    ("hang-dec", Status::TimedOut, "timed out"),
    ("enc-error", Status::Failed, "returned -1"),
    ("wrong-ss", Status::Failed, "shared secrets differ"),
    (
        "ct-overflow",
        Status::Failed,
        "wrote past the declared ciphertext size",
    ),
];

const WORKING: [&str; 4] = ["good", "own-keccak", "dead-keccak", "size-mismatch"];

/// The faults campaign, run once and checked fixture by fixture: each defect fails only its
/// own KAT with the right reason, its timing and profiling are skipped naming the KAT, and
/// the working fixtures pass every step with the expected survey and size-audit verdicts.
#[test]
fn fault_fixtures_fail_alone_with_their_reasons() {
    let tmp = tempdir();
    let out = tmp.path().join("out");
    let pipeline = pipeline_copy(
        "tests/fixtures/kems/faults.kdl",
        &tmp.path().join("faults.kdl"),
        &[],
    );
    let r = run(&["run", &s(&pipeline), "--outputs", &s(&out)]);
    eprintln!("faults campaign: {:.1} s", r.secs);
    let ctx = r.show();
    let mut c = Checks::default();
    c.check(r.code == 1, || format!("exit code {} (want 1)", r.code));

    for (fx, status, text) in FAULTS {
        let kat = rec(&out, StepKind::Kat, fx, Some(fx), None);
        let reason = kat.reason.clone().unwrap_or_default();
        c.check(kat.status == status, || {
            format!(
                "{fx}: kat status {:?} (want {status:?}): {reason}",
                kat.status
            )
        });
        c.check(reason.contains(text), || {
            format!("{fx}: kat reason `{reason}` lacks `{text}`")
        });
        if status == Status::Failed {
            c.check(reason.starts_with("FAIL"), || {
                format!("{fx}: kat reason `{reason}` does not start with FAIL")
            });
            let k = kat_data(&kat);
            c.check(
                k.modes
                    .iter()
                    .any(|m| m.mode == KatMode::Single && m.status == KatStatus::Fail),
                || format!("{fx}: single KAT mode is not FAIL: {:?}", k.modes),
            );
        }
        c.check(r.stderr.contains(&format!("{fx}/{fx}/kat")), || {
            format!("{fx}: the summary's failure list does not name `{fx}/{fx}/kat`")
        });
        // Everything that needs the KAT is skipped, naming it.
        let kat_id = format!("`{fx}/{fx}/kat`");
        let mut dependents: Vec<(String, StepRecord)> = Vec::new();
        for op in OPS {
            dependents.push((
                format!("time:{op}"),
                rec(&out, StepKind::Time, fx, Some(fx), Some(op)),
            ));
            dependents.push((
                format!("profile:{op}"),
                rec(&out, StepKind::Profile, fx, Some(fx), Some(op)),
            ));
        }
        dependents.push((
            "sizes".into(),
            rec(&out, StepKind::Sizes, fx, Some(fx), None),
        ));
        for (what, d) in &dependents {
            let why = d.reason.as_deref().unwrap_or("");
            c.check(d.status == Status::Skipped, || {
                format!("{fx}: {what} is {:?}, want skipped", d.status)
            });
            c.check(why.contains(&kat_id) && why.contains("failed"), || {
                format!("{fx}: {what} skip reason `{why}` does not name {kat_id}")
            });
            c.check(d.commands.is_empty(), || {
                format!("{fx}: skipped {what} ran commands {:?}", d.commands)
            });
        }
        // Build and survey do not need the KAT: they ran fine.
        for kind in [StepKind::Build, StepKind::Survey] {
            let b = rec(&out, kind, fx, Some(fx), None);
            c.check(b.status == Status::Ok, || {
                format!("{fx}: {kind} is {:?}: {:?}", b.status, b.reason)
            });
        }
    }

    // The working fixtures: every step ok, KAT PASS.
    let camp = campaign_json(&out);
    let mut sessions: BTreeSet<String> = BTreeSet::new();
    let mut yardsticks: BTreeSet<String> = BTreeSet::new();
    for fx in WORKING {
        let steps: Vec<_> = camp
            .steps
            .iter()
            .filter(|st| st.id.starts_with(&format!("{fx}/")))
            .collect();
        // source, build, kat, sizes, survey, 3 x time, 3 x profile, report
        c.check(steps.len() == 12, || {
            format!("{fx}: campaign.json lists {} steps, want 12", steps.len())
        });
        for st in &steps {
            c.check(st.status == Status::Ok && st.ran, || {
                format!(
                    "{fx}: step {} is {:?} (ran {}): {:?}",
                    st.id, st.status, st.ran, st.reason
                )
            });
        }
        let kat = rec(&out, StepKind::Kat, fx, Some(fx), None);
        let k = kat_data(&kat);
        c.check(
            !k.modes.is_empty() && k.modes.iter().all(|m| m.status == KatStatus::Pass),
            || format!("{fx}: KAT modes {:?}", k.modes),
        );
        c.check(
            k.profile_object_kat.as_ref().is_some_and(|p| p.equal),
            || format!("{fx}: profile object KAT {:?}", k.profile_object_kat),
        );
        for m in &k.modes {
            c.check(m.expected_sha256 == m.actual_sha256, || {
                format!(
                    "{fx}: expected {:?} != actual {:?}",
                    m.expected_sha256, m.actual_sha256
                )
            });
        }
        for op in OPS {
            let t = rec(&out, StepKind::Time, fx, Some(fx), Some(op));
            // Its runner ran contained, like every runner step's.
            c.check(t.sandbox.is_some(), || {
                format!("{fx}: time:{op} record has no sandbox field")
            });
            match &t.data {
                Some(StepData::Time(td)) => {
                    c.check(td.summary.n > 0, || {
                        format!("{fx}: time:{op} measured nothing")
                    });
                    // Timed in the campaign's one session: a trial per round, its position
                    // in every round, the median inside its CI, memory per process.
                    match &td.rounds {
                        Some(r) => {
                            sessions.insert(r.session.clone());
                            let s = &td.summary;
                            c.check(
                                r.positions.len() == td.output.trials.len()
                                    && r.interference.len() == r.positions.len()
                                    && s.rounds == Some(r.positions.len() as u32)
                                    && r.positions.iter().all(|&p| (p as usize) < r.members),
                                || format!("{fx}: time:{op} rounds do not match trials: {r:?}"),
                            );
                            c.check(
                                s.ci_low_cycles <= s.median_cycles
                                    && s.median_cycles <= s.ci_high_cycles
                                    && s.median_cycles
                                        .is_some_and(|m| m >= s.min_cycles && m <= s.max_cycles),
                                || format!("{fx}: time:{op} median outside its CI: {s:?}"),
                            );
                            c.check(
                                td.output.memory.peak_rss_kib.is_some()
                                    && td.output.memory.stack_bytes.is_some(),
                                || format!("{fx}: time:{op} memory missing"),
                            );
                            // The yardstick was timed in every round beside it, and the
                            // ratio to it is this member's median over the yardstick's.
                            match &r.yardstick {
                                Some(y) => {
                                    yardsticks.insert(y.id());
                                    c.check(
                                        y.name == "ngcc-yardstick-1"
                                            && y.values.len() == r.positions.len()
                                            && y.values.iter().all(|v| *v > 0.0)
                                            && y.relative.ci_low <= y.relative.median
                                            && y.relative.median <= y.relative.ci_high,
                                        || format!("{fx}: time:{op} yardstick: {y:?}"),
                                    );
                                }
                                None => c.0.push(format!("{fx}: time:{op} has no yardstick")),
                            }
                        }
                        None => c.0.push(format!("{fx}: time:{op} not timed in a session")),
                    }
                }
                other => {
                    c.0.push(format!("{fx}: time:{op} has no time data: {other:?}"))
                }
            }
        }
    }
    c.check(sessions.len() == 1, || {
        format!("the working fixtures were timed in {sessions:?}, not in one session")
    });
    c.check(yardsticks.len() == 1, || {
        format!("the session's members name different yardsticks: {yardsticks:?}")
    });
    // Exactly the six faulty KATs fail: the failure list has no other entry.
    let failed: BTreeSet<&str> = camp
        .steps
        .iter()
        .filter(|st| st.status.is_failure())
        .map(|st| st.id.as_str())
        .collect();
    let want: BTreeSet<String> = FAULTS
        .iter()
        .map(|(f, _, _)| format!("{f}/{f}/kat"))
        .collect();
    let want: BTreeSet<&str> = want.iter().map(String::as_str).collect();
    c.check(failed == want, || {
        format!("failed steps {failed:?}, want exactly {want:?}")
    });

    // Survey verdicts.
    let survey = |fx: &str| match rec(&out, StepKind::Survey, fx, Some(fx), None).data {
        Some(StepData::Survey(d)) => d,
        other => panic!("{fx}: no survey data: {other:?}"),
    };
    let own = survey("own-keccak");
    c.check(own.verdict == Verdict::Bypass, || {
        format!("own-keccak: verdict {:?} ({})", own.verdict, own.summary)
    });
    c.check(
        own.own_symbols
            .iter()
            .any(|o| o.name.contains("KeccakF1600_StatePermute") && o.family == "keccak"),
        || format!("own-keccak: own symbols {:?}", own.own_symbols),
    );
    c.check(own.summary.contains("KeccakF1600_StatePermute"), || {
        format!(
            "own-keccak: summary `{}` lacks the evidence symbol",
            own.summary
        )
    });
    let dead = survey("dead-keccak");
    c.check(dead.verdict == Verdict::ProvidedOnly, || {
        format!("dead-keccak: verdict {:?} ({})", dead.verdict, dead.summary)
    });
    let dead_hits: Vec<_> = dead
        .source_hits
        .iter()
        .filter(|h| h.file.ends_with("keccak.c"))
        .collect();
    c.check(!dead_hits.is_empty(), || {
        format!("dead-keccak: no keccak.c hit in {:?}", dead.source_hits)
    });
    c.check(dead_hits.iter().all(|h| !h.reachable), || {
        format!("dead-keccak: a keccak.c hit is marked reachable: {dead_hits:?}")
    });
    c.check(
        dead.provided_used
            .iter()
            .any(|p| p.contains("toy_shake256")),
        || format!("dead-keccak: provided_used {:?}", dead.provided_used),
    );
    let good = survey("good");
    c.check(good.verdict == Verdict::ProvidedOnly, || {
        format!("good: verdict {:?} ({})", good.verdict, good.summary)
    });

    // Size audit.
    let sizes = |fx: &str| match rec(&out, StepKind::Sizes, fx, Some(fx), None).data {
        Some(StepData::Sizes(d)) => d,
        other => panic!("{fx}: no sizes data: {other:?}"),
    };
    let sm = sizes("size-mismatch");
    c.check(
        sm.audit
            .iter()
            .any(|l| l.contains("pk") && l.contains("40") && l.contains("32")),
        || {
            format!(
                "size-mismatch: audit {:?} does not list pk 40 vs 32",
                sm.audit
            )
        },
    );
    c.check(sm.audit.iter().all(|l| l.contains("pk")), || {
        format!("size-mismatch: audit lists more than pk: {:?}", sm.audit)
    });
    let g = sizes("good");
    c.check(g.audit.is_empty(), || format!("good: audit {:?}", g.audit));
    c.done(&ctx);
}

/// A KAT crash names the call it happened in ("SIGSEGV in keygen", "SIGABRT in enc"), not
/// only the signal: once it read "crashed: killed by SIGSEGV (at before count 0)".
#[test]
fn kat_crash_names_the_operation() {
    let tmp = tempdir();
    let kems = repo().join("tests/fixtures/kems");
    let pipeline = tmp.path().join("crash.kdl");
    std::fs::write(
        &pipeline,
        fixture_pipeline(
            "engine-crash",
            &kems,
            &["segv-keygen", "abort-enc"],
            "single",
            "5ms",
        ),
    )
    .unwrap();
    let out = tmp.path().join("out");
    let r = run(&[
        "run",
        &s(&pipeline),
        "--only",
        "*/kat",
        "--outputs",
        &s(&out),
    ]);
    assert_eq!(r.code, 1, "{}", r.show());
    let reason = |fx: &str| {
        rec(&out, StepKind::Kat, fx, Some(fx), None)
            .reason
            .unwrap_or_default()
    };
    let segv = reason("segv-keygen");
    assert!(segv.contains("SIGSEGV"), "{segv}");
    assert!(
        segv.contains("keygen") || segv.contains("crypto_kem_keypair"),
        "{segv}"
    );
    assert!(!segv.contains("at before"), "{segv}");
    let abort = reason("abort-enc");
    assert!(abort.contains("SIGABRT"), "{abort}");
    assert!(
        abort.contains("crypto_kem_enc") || abort.contains(" enc"),
        "{abort}"
    );
}

// ---------------------------------------------------------------------------------------
// 2. KAT checks on an edited copy of the `good` fixture
// ---------------------------------------------------------------------------------------

/// Flip byte `offset` of field `field` in entry `count` of an `.rsp` text.
fn flip_rsp_byte(text: &str, count: u32, field: &str, offset: usize) -> String {
    let mut in_count = false;
    let mut done = false;
    let mut out = String::new();
    for line in text.lines() {
        let mut line = line.to_string();
        if let Some(n) = line.strip_prefix("count = ") {
            in_count = n.trim() == count.to_string();
        } else if in_count && !done {
            if let Some(hexval) = line.strip_prefix(&format!("{field} = ")) {
                let mut bytes = hex::decode(hexval.trim()).expect("hex field");
                assert!(offset < bytes.len(), "{field} has {} bytes", bytes.len());
                bytes[offset] ^= 0x01;
                line = format!("{field} = {}", hex::encode_upper(bytes));
                done = true;
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    assert!(done, "no `{field}` in count {count}");
    out
}

/// MISMATCH (soft: timing still runs), NOKAT, and the first difference from a reference
/// `.rsp`, on a copy of the fixtures whose `good` manifest and `kat.sha256` are edited.
#[test]
fn kat_mismatch_nokat_and_reference_difference() {
    let tmp = tempdir();
    let kems = tmp.path().join("kems");
    copy_dir(&repo().join("tests/fixtures/kems"), &kems);
    let out = tmp.path().join("out");
    let pipeline = tmp.path().join("kat.kdl");
    std::fs::write(
        &pipeline,
        fixture_pipeline("engine-kat", &kems, &["good"], "single all", "5ms"),
    )
    .unwrap();
    let manifest = kems.join("good/manifest.kdl");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let old = r#"kat rng="nist" manifest="kat.sha256""#;
    assert!(text.contains(old), "{text}");
    std::fs::write(
        &manifest,
        text.replace(old, &format!(r#"{old} all-count=5 reference="ref""#)),
    )
    .unwrap();
    let sums = kems.join("good/kat.sha256");
    let original = std::fs::read_to_string(&sums).unwrap();
    let good_hash = original.split_whitespace().next().unwrap().to_string();
    assert_eq!(good_hash.len(), 64);
    let run_it = || run(&["run", &s(&pipeline), "--outputs", &s(&out)]);

    // (a) One hex digit changed: MISMATCH; the KAT ran and agreed, so timing runs anyway.
    let first = good_hash.chars().next().unwrap();
    let flipped_digit = if first == '0' { '1' } else { '0' };
    let wrong = format!("{flipped_digit}{}", &good_hash[1..]);
    std::fs::write(&sums, format!("{wrong}  good\n")).unwrap();
    let r = run_it();
    assert_eq!(r.code, 1, "{}", r.show());
    let kat = rec(&out, StepKind::Kat, "good", Some("good"), None);
    assert_eq!(kat.status, Status::Failed, "{:?}", kat.reason);
    let reason = kat.reason.clone().unwrap_or_default();
    assert!(reason.contains("MISMATCH"), "{reason}");
    assert!(
        reason.contains(&good_hash) && reason.contains(&wrong),
        "{reason}"
    );
    let k = kat_data(&kat);
    let single = k.modes.iter().find(|m| m.mode == KatMode::Single).unwrap();
    assert_eq!(single.status, KatStatus::Mismatch);
    assert_eq!(single.expected_sha256.as_deref(), Some(wrong.as_str()));
    assert_eq!(single.actual_sha256.as_deref(), Some(good_hash.as_str()));
    let all = k.modes.iter().find(|m| m.mode == KatMode::All).unwrap();
    assert_eq!(all.status, KatStatus::Nokat, "{all:?}");
    assert_eq!(all.counts, 5);
    let camp = campaign_json(&out);
    for op in OPS {
        let t = rec(&out, StepKind::Time, "good", Some("good"), Some(op));
        assert_eq!(
            t.status,
            Status::Ok,
            "time:{op} after a MISMATCH: {:?}",
            t.reason
        );
        assert!(matches!(t.data, Some(StepData::Time(_))));
        let id = format!("good/good/time:{op}");
        let st = camp.steps.iter().find(|st| st.id == id).unwrap();
        assert!(st.ran, "{id} did not run after a soft KAT failure");
    }
    // The generated all-count file has the 5 counts.
    let all_rsp_rel = all.rsp.clone().expect("all-mode rsp");
    let all_rsp = std::fs::read_to_string(out.join(&all_rsp_rel)).unwrap();
    assert_eq!(all_rsp.matches("count = ").count(), 5, "{all_rsp}");

    // A mismatch is final until an input changes: the next run redoes nothing but still
    // reports the failure.
    let again = run_it();
    assert_eq!(again.code, 1, "{}", again.show());
    let ran: Vec<String> = campaign_json(&out)
        .steps
        .into_iter()
        .filter(|st| st.ran)
        .map(|st| st.id)
        .collect();
    assert!(ran.is_empty(), "ran again after a MISMATCH: {ran:?}");
    assert!(
        again.stderr.contains("good/good/kat [failed]"),
        "{}",
        again.show()
    );

    // (b) Its line deleted: NOKAT, which is not a failure.
    std::fs::write(&sums, "").unwrap();
    let r = run_it();
    assert_eq!(r.code, 0, "{}", r.show());
    let kat = rec(&out, StepKind::Kat, "good", Some("good"), None);
    assert_eq!(kat.status, Status::Ok, "{:?}", kat.reason);
    let reason = kat.reason.clone().unwrap_or_default();
    assert!(reason.contains("NOKAT"), "{reason}");
    assert!(
        kat_data(&kat)
            .modes
            .iter()
            .all(|m| m.status == KatStatus::Nokat && m.expected_sha256.is_none()),
        "{:?}",
        kat_data(&kat).modes
    );
    assert!(
        kat.ran_because
            .as_deref()
            .is_some_and(|w| w.contains("inputs changed") && w.contains("expected")),
        "{:?}",
        kat.ran_because
    );

    // (c) A reference .rsp that differs in one byte of ct in count 3, and the expected
    // hash of that reference: the reason names count 3, field ct and the byte offset.
    let offset = 5;
    let reference = flip_rsp_byte(&all_rsp, 3, "ct", offset);
    std::fs::create_dir_all(kems.join("good/ref")).unwrap();
    std::fs::write(kems.join("good/ref/good.all.rsp"), &reference).unwrap();
    std::fs::write(
        &sums,
        format!(
            "{good_hash}  good\n{}  good.all\n",
            sha256_hex(reference.as_bytes())
        ),
    )
    .unwrap();
    let r = run_it();
    assert_eq!(r.code, 1, "{}", r.show());
    let kat = rec(&out, StepKind::Kat, "good", Some("good"), None);
    let reason = kat.reason.clone().unwrap_or_default();
    assert_eq!(kat.status, Status::Failed, "{reason}");
    assert!(reason.contains("MISMATCH (all)"), "{reason}");
    assert!(reason.contains("count 3"), "{reason}");
    assert!(reason.contains("field ct"), "{reason}");
    assert!(
        reason.contains(&format!("byte offset {offset}")),
        "{reason}"
    );
    let k = kat_data(&kat);
    let single = k.modes.iter().find(|m| m.mode == KatMode::Single).unwrap();
    assert_eq!(single.status, KatStatus::Pass, "{single:?}");
    let all = k.modes.iter().find(|m| m.mode == KatMode::All).unwrap();
    assert_eq!(all.status, KatStatus::Mismatch, "{all:?}");
    assert_eq!(
        all.diff,
        Some(RspDiff {
            count: 3,
            field: "ct".into(),
            offset
        })
    );

    // Source edits, in the instance's folder or in the provided library, are inputs of
    // the build; `explain` names them.
    let explain = || {
        let r = run(&[
            "explain",
            &s(&pipeline),
            "good/good/build",
            "--outputs",
            &s(&out),
        ]);
        assert_eq!(r.code, 0, "{}", r.show());
        r.stdout
    };
    assert!(explain().contains("up to date"), "{}", explain());
    for file in ["good/kem.c", "common/toyhash.c"] {
        let path = kems.join(file);
        let original = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, format!("{original}\n/* edited by the test */\n")).unwrap();
        let e = explain();
        assert!(
            e.contains("would run: inputs changed: files"),
            "{file}: {e}"
        );
        std::fs::write(&path, original).unwrap();
        assert!(explain().contains("up to date"), "{file} restored");
    }
}

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

#[test]
fn check_accepts_the_example_and_reports_every_problem_at_once() {
    let r = run(&["check", "pipelines/x86_1.kdl"]);
    assert_eq!(r.code, 0, "{}", r.show());
    assert!(r.stdout.starts_with("ok: system `x86_1`"), "{}", r.show());

    let r = run(&[
        "check",
        "tests/fixtures/dsl/four-errors/pipelines/campaign.kdl",
    ]);
    assert_eq!(r.code, 2, "{}", r.show());
    assert!(r.stderr.contains("4 problems"), "{}", r.show());
    for loc in [
        "tests/fixtures/dsl/four-errors/pipelines/campaign.kdl:8:27",
        "tests/fixtures/dsl/four-errors/submissions/bad/manifest.kdl:2:5",
        "tests/fixtures/dsl/four-errors/submissions/bad/manifest.kdl:6:55",
        "tests/fixtures/dsl/four-errors/submissions/bad/manifest.kdl:7:14",
    ] {
        assert!(r.stderr.contains(loc), "{loc} missing:\n{}", r.show());
    }
    for msg in [
        "dependency cycle",
        "unknown node `algoritm`",
        "undefined template variable `lvl`",
        "duplicate instance id",
    ] {
        assert!(r.stderr.contains(msg), "`{msg}` missing:\n{}", r.show());
    }

    // A missing pipeline is bad input, not a panic.
    let r = run(&["check", "tests/fixtures/engine/no-such-pipeline.kdl"]);
    assert_eq!(r.code, 2, "{}", r.show());
    assert!(!r.stderr.contains("panicked"), "{}", r.show());
}

#[test]
fn dry_run_lists_the_plan_and_creates_nothing() {
    let tmp = tempdir();
    let out = tmp.path().join("out");
    let r = run(&[
        "run",
        "--dry-run",
        "pipelines/x86_1.kdl",
        "--outputs",
        &s(&out),
    ]);
    assert_eq!(r.code, 0, "{}", r.show());
    assert!(!out.exists(), "the dry run created {}", out.display());
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "the dry run wrote into the temp dir"
    );
    let planned: BTreeSet<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("run "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for (sub, inst) in example_instances() {
        for step in ["build", "kat", "time:keygen", "time:enc", "time:dec"] {
            let id = format!("{sub}/{inst}/{step}");
            assert!(
                planned.contains(id.as_str()),
                "{id} not planned:\n{}",
                r.stdout
            );
        }
    }
    assert!(r.stdout.contains("no record"), "{}", r.stdout);
    assert!(r.stdout.contains("dry run"), "{}", r.stdout);
}

#[test]
fn graph_exports_every_instance_in_every_format() {
    let instances = example_instances();

    let dot = run(&["graph", "pipelines/x86_1.kdl", "--format", "dot"]);
    assert_eq!(dot.code, 0, "{}", dot.show());
    assert!(dot.stdout.starts_with("digraph"), "{}", dot.stdout);
    for (sub, inst) in &instances {
        assert!(
            dot.stdout.contains(&format!("\"{sub}/{inst}/kat")),
            "{inst}"
        );
    }
    // Graphviz accepts it (group `graphviz`; the rest of the test runs without it).
    if require_tool("graphviz", "dot", "graphviz") {
        let mut child = Command::new("dot")
            .arg("-Tsvg")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dot starts");
        let mut stdin = child.stdin.take().unwrap();
        let text = dot.stdout.clone();
        let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
        let o = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        assert!(
            o.status.success(),
            "dot -Tsvg rejected the graph: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(String::from_utf8_lossy(&o.stdout).contains("<svg"));
    }

    let mermaid = run(&["graph", "pipelines/x86_1.kdl", "--format", "mermaid"]);
    assert_eq!(mermaid.code, 0, "{}", mermaid.show());
    assert!(
        mermaid.stdout.starts_with("flowchart"),
        "{}",
        mermaid.stdout
    );
    for (sub, inst) in &instances {
        assert!(
            mermaid.stdout.contains(&format!("{sub}/{inst}/build")),
            "{inst} missing from mermaid"
        );
    }

    let json = run(&["graph", "pipelines/x86_1.kdl", "--format", "json"]);
    assert_eq!(json.code, 0, "{}", json.show());
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("graph json parses");
    let nodes = v["nodes"].as_array().expect("nodes");
    let ids: BTreeSet<&str> = nodes.iter().filter_map(|n| n["id"].as_str()).collect();
    assert_eq!(ids.len(), nodes.len(), "node ids are not unique");
    for (sub, inst) in &instances {
        for step in [
            "build",
            "kat",
            "sizes",
            "survey",
            "time:keygen",
            "profile:dec",
        ] {
            let id = format!("{sub}/{inst}/{step}");
            assert!(
                ids.contains(id.as_str()),
                "{id} missing from the json graph"
            );
        }
    }
    let edges = v["edges"].as_array().expect("edges");
    assert!(edges
        .iter()
        .all(|e| e[0].as_u64().unwrap() < nodes.len() as u64
            && e[1].as_u64().unwrap() < nodes.len() as u64));
    // The full graph has as many nodes as `check` counts steps.
    let check = run(&["check", "pipelines/x86_1.kdl"]);
    assert!(
        check.stdout.contains(&format!("{} steps", nodes.len())),
        "check says `{}`, graph has {} nodes",
        check.stdout.trim(),
        nodes.len()
    );

    // Step level: one node per declared step kind.
    let step = run(&[
        "graph",
        "pipelines/x86_1.kdl",
        "--format",
        "json",
        "--level",
        "step",
    ]);
    assert_eq!(step.code, 0, "{}", step.show());
    let v: serde_json::Value = serde_json::from_str(&step.stdout).unwrap();
    let kinds: Vec<&str> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    let unique: BTreeSet<&str> = kinds.iter().copied().collect();
    assert_eq!(kinds.len(), unique.len(), "{kinds:?}");
    let want: BTreeSet<&str> = [
        "source", "build", "kat", "sizes", "survey", "time", "profile", "count", "ct", "report",
        "index",
    ]
    .into_iter()
    .collect();
    assert_eq!(unique, want);
    let total: u64 = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["count"].as_u64().unwrap())
        .sum();
    assert_eq!(
        total as usize,
        nodes.len(),
        "step-level counts add up to the full graph"
    );
    let step_dot = run(&["graph", "pipelines/x86_1.kdl", "--level", "step"]);
    assert_eq!(
        step_dot.stdout.matches("label=").count(),
        want.len(),
        "{}",
        step_dot.stdout
    );
}

#[test]
fn list_names_submissions_instances_and_steps() {
    let instances = example_instances();
    let subs: BTreeSet<&str> = instances.iter().map(|(s, _)| s.as_str()).collect();

    let r = run(&["list", "pipelines/x86_1.kdl", "submissions"]);
    assert_eq!(r.code, 0, "{}", r.show());
    let listed: BTreeSet<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(listed, subs);

    let r = run(&["list", "pipelines/x86_1.kdl", "instances"]);
    assert_eq!(r.code, 0, "{}", r.show());
    let listed: BTreeSet<(String, String)> = r
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|id| id.split_once('/'))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(listed, instances);

    let r = run(&["list", "pipelines/x86_1.kdl", "steps"]);
    assert_eq!(r.code, 0, "{}", r.show());
    let lines: Vec<&str> = r.stdout.lines().collect();
    let pos = |id: &str| {
        lines
            .iter()
            .position(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("{id} not listed"))
    };
    // Execution order: a step comes after what it needs; timing is marked exclusive.
    let build = pos("ml-kem/ML-KEM-768-clean/build");
    let kat = pos("ml-kem/ML-KEM-768-clean/kat");
    let time = pos("ml-kem/ML-KEM-768-clean/time:keygen");
    assert!(pos("ml-kem/source") < build && build < kat && kat < time);
    assert!(lines[time].contains("[exclusive]"));
    assert!(!lines[kat].contains("[exclusive]"));
}

// ---------------------------------------------------------------------------------------
// 4. Resume, explain and interrupt
// ---------------------------------------------------------------------------------------

/// A finished campaign run again runs nothing; `explain` says "up to date", and after the
/// flags change, "inputs changed: flags" (the dry run agrees).
#[test]
fn rerun_runs_nothing_and_explain_names_the_changed_input() {
    let tmp = tempdir();
    let kems = repo().join("tests/fixtures/kems");
    let pipeline = tmp.path().join("resume.kdl");
    let text = fixture_pipeline(
        "engine-resume",
        &kems,
        &["good", "dead-keccak"],
        "single",
        "5ms",
    );
    std::fs::write(&pipeline, &text).unwrap();
    let out = tmp.path().join("out");
    let p = s(&pipeline);
    let o = s(&out);

    let first = run(&["run", &p, "--outputs", &o]);
    assert_eq!(first.code, 0, "{}", first.show());
    let camp = campaign_json(&out);
    assert!(camp.steps.len() >= 20, "{}", camp.steps.len());
    assert!(camp
        .steps
        .iter()
        .all(|st| st.ran && st.status == Status::Ok));
    let before = record_files(&out);
    let campaign_before = camp;
    let reports_before = report_files(&out);
    assert!(
        reports_before.contains_key(Path::new("index.md")),
        "{:?}",
        reports_before.keys()
    );

    let second = run(&["run", &p, "--outputs", &o]);
    eprintln!(
        "second run of a finished campaign: {:.2} s (first: {:.2} s)",
        second.secs, first.secs
    );
    assert_eq!(second.code, 0, "{}", second.show());
    let camp = campaign_json(&out);
    let ran: Vec<&str> = camp
        .steps
        .iter()
        .filter(|st| st.ran)
        .map(|st| st.id.as_str())
        .collect();
    assert!(ran.is_empty(), "ran again: {ran:?}");
    assert!(camp.steps.iter().all(|st| st.status == Status::Ok));
    assert_eq!(record_files(&out), before, "records were rewritten");
    // The campaign record is the first run's (its command, environment and times: the
    // evidence is that run's), only its `ran` flags say that this run ran nothing; the
    // reports were not written again.
    let mut want = serde_json::to_value(&campaign_before).unwrap();
    for st in want["steps"].as_array_mut().unwrap() {
        st["ran"] = false.into();
    }
    assert_eq!(
        serde_json::to_value(&camp).unwrap(),
        want,
        "campaign.json is not the first run's with `ran` false"
    );
    assert!(
        report_files(&out) == reports_before,
        "reports were written again"
    );
    // Nothing to build, run or render: far quicker than the run that did it all (a ratio,
    // not a number of seconds, so that a loaded machine slows both alike).
    assert!(
        second.secs < first.secs / 2.0,
        "a run with nothing to do took {:.1} s, the first run {:.1} s",
        second.secs,
        first.secs
    );
    // The summary table: nothing ran, everything up to date.
    for line in second.stderr.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() == 6 && ["source", "build", "kat", "time"].contains(&cols[0]) {
            assert_eq!(cols[1], "0", "summary line `{line}`");
        }
    }

    let explain = |step: &str| {
        let r = run(&["explain", &p, step, "--outputs", &o]);
        assert_eq!(r.code, 0, "{}", r.show());
        r.stdout
    };
    let e = explain("good/good/build");
    assert!(e.contains("up to date"), "{e}");
    let e = explain("good/good/time:keygen");
    assert!(e.contains("up to date"), "{e}");

    // --force re-runs the matching steps and what depends on them, nothing else.
    let forced = run(&["run", &p, "--force", "good/*/time:*", "--outputs", &o]);
    assert_eq!(forced.code, 0, "{}", forced.show());
    let camp = campaign_json(&out);
    let ran: BTreeSet<&str> = camp
        .steps
        .iter()
        .filter(|st| st.ran)
        .map(|st| st.id.as_str())
        .collect();
    let want: BTreeSet<&str> = [
        "good/good/time:keygen",
        "good/good/time:enc",
        "good/good/time:dec",
        "good/report",
        "index",
    ]
    .into_iter()
    .collect();
    assert_eq!(ran, want, "{}", forced.show());
    let t = rec(&out, StepKind::Time, "good", Some("good"), Some(Op::Enc));
    assert_eq!(t.ran_because.as_deref(), Some("forced"));
    let before = record_files(&out);

    let unknown = run(&["explain", &p, "good/good/bild", "--outputs", &o]);
    assert_eq!(unknown.code, 2, "{}", unknown.show());
    assert!(unknown.stderr.contains("no step"), "{}", unknown.show());

    // Change the build flags in the pipeline.
    let edited = text.replace(r#"flags "fixture" "-O2""#, r#"flags "fixture" "-O1""#);
    assert_ne!(edited, text);
    std::fs::write(&pipeline, &edited).unwrap();
    let e = explain("good/good/build");
    assert!(e.contains("would run: inputs changed: flags"), "{e}");
    assert!(e.contains("-O1"), "{e}");
    let e = explain("good/good/time:keygen");
    assert!(e.contains("would run"), "{e}");
    let dry = run(&["run", "--dry-run", &p, "--outputs", &o]);
    assert_eq!(dry.code, 0, "{}", dry.show());
    let line = dry
        .stdout
        .lines()
        .find(|l| l.contains("good/good/build"))
        .expect("build in the plan");
    assert!(
        line.trim_start().starts_with("run") && line.contains("inputs changed: flags"),
        "{line}"
    );
    let source = dry
        .stdout
        .lines()
        .find(|l| l.contains("good/source"))
        .expect("source in the plan");
    assert!(source.contains("up-to-date"), "{source}");
    assert_eq!(record_files(&out), before, "the dry run touched records");

    // `report` re-renders from the records alone; `compare` of a folder with itself finds
    // every timed operation (2 submissions x 3 ops) at ratio 1, within noise.
    let rep = run(&["report", &p, "--outputs", &o]);
    assert_eq!(rep.code, 0, "{}", rep.show());
    let files: Vec<&str> = rep.stdout.lines().collect();
    assert!(!files.is_empty(), "{}", rep.show());
    for f in &files {
        assert!(
            Path::new(f).is_file(),
            "report lists {f}, which does not exist"
        );
        assert!(
            Path::new(f).starts_with(&out),
            "report wrote {f} outside the outputs"
        );
    }
    assert_eq!(record_files(&out), before, "`report` touched records");
    let cmp = run(&["compare", &o, &o]);
    assert_eq!(cmp.code, 0, "{}", cmp.show());
    assert!(
        cmp.stdout
            .contains("0 of 6 compared operations differ beyond ±2.0%"),
        "{}",
        cmp.show()
    );
    // Every row: ratio 1.000, and (the same yardstick on both sides) host 1.000 and
    // adjusted 1.000, each with an interval around 1.
    let rows = cmp
        .stdout
        .lines()
        .filter(|l| l.matches("| 1.000 (").count() == 2 && l.contains("| 1.000 | 1.000 ("))
        .count();
    assert_eq!(rows, 6, "{}", cmp.stdout);
    assert!(
        cmp.stdout
            .contains("Verdicts use the adjusted ratio (all 6 operations)"),
        "{}",
        cmp.stdout
    );
}

/// An instance whose CPU flags are missing is unsupported, with its dependents, and does
/// not fail the campaign; the record is final (a second run does not retry it).
#[test]
fn missing_cpu_flag_makes_an_instance_unsupported_not_failed() {
    let tmp = tempdir();
    let kems = repo().join("tests/fixtures/kems");
    let sub = tmp.path().join("nocpu");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("kat.sha256"), "").unwrap();
    std::fs::write(
        sub.join("manifest.kdl"),
        format!(
            r#"submission "nocpu" {{
    algorithm "Fixture: good, on a CPU flag no CPU has"
    source path="{root}"
    primitives include="{root}/primitives.kdl"
    kat rng="nist" manifest="kat.sha256"
    matrix impl="ref"
    instance "nocpu" dir="good" namespace="FIX_GOOD_"
    when impl="ref" {{
        requires-cpu "{absent}"
    }}
}}
"#,
            root = s(&kems),
            absent = ABSENT_CPU_FLAG
        ),
    )
    .unwrap();
    let mut text = fixture_pipeline("engine-nocpu", &kems, &["good"], "single", "5ms");
    text = text.replace(
        "submissions ",
        &format!("submissions \"{}\" ", s(&sub.join("manifest.kdl"))),
    );
    let pipeline = tmp.path().join("nocpu.kdl");
    std::fs::write(&pipeline, text).unwrap();
    let out = tmp.path().join("out");
    let (p, o) = (s(&pipeline), s(&out));

    let r = run(&["run", &p, "--outputs", &o]);
    assert_eq!(r.code, 0, "{}", r.show());
    let build = rec(&out, StepKind::Build, "nocpu", Some("nocpu"), None);
    assert_eq!(build.status, Status::Unsupported, "{:?}", build.reason);
    assert!(
        build
            .reason
            .as_deref()
            .is_some_and(|w| w.contains(ABSENT_CPU_FLAG)),
        "{:?}",
        build.reason
    );
    assert!(build.commands.is_empty(), "{:?}", build.commands);
    let mut dependents = vec![
        rec(&out, StepKind::Kat, "nocpu", Some("nocpu"), None),
        rec(&out, StepKind::Sizes, "nocpu", Some("nocpu"), None),
        rec(&out, StepKind::Survey, "nocpu", Some("nocpu"), None),
    ];
    for op in OPS {
        dependents.push(rec(&out, StepKind::Time, "nocpu", Some("nocpu"), Some(op)));
        dependents.push(rec(
            &out,
            StepKind::Profile,
            "nocpu",
            Some("nocpu"),
            Some(op),
        ));
    }
    for d in &dependents {
        assert_eq!(d.status, Status::Unsupported, "{}: {:?}", d.id, d.reason);
        assert!(d.commands.is_empty(), "{} ran {:?}", d.id, d.commands);
    }
    let camp = campaign_json(&out);
    for st in camp.steps.iter().filter(|st| st.id.starts_with("good/")) {
        assert_eq!(st.status, Status::Ok, "{}: {:?}", st.id, st.reason);
    }
    assert!(!r.stderr.contains("failures:"), "{}", r.show());

    let again = run(&["run", &p, "--outputs", &o]);
    assert_eq!(again.code, 0, "{}", again.show());
    let ran: Vec<String> = campaign_json(&out)
        .steps
        .into_iter()
        .filter(|st| st.ran)
        .map(|st| st.id)
        .collect();
    assert!(ran.is_empty(), "ran again: {ran:?}");
}

/// Ctrl-C midway: finished steps keep their records; the next run does only the rest.
#[test]
fn interrupted_run_resumes_without_redoing_finished_steps() {
    let tmp = tempdir();
    let kems = repo().join("tests/fixtures/kems");
    let pipeline = tmp.path().join("interrupt.kdl");
    // 2 trials of 300 ms per operation: the bench lane is busy for seconds after the
    // first KAT record appears, so the interrupt lands midway.
    std::fs::write(
        &pipeline,
        fixture_pipeline(
            "engine-interrupt",
            &kems,
            &["good", "own-keccak"],
            "single",
            "300ms",
        ),
    )
    .unwrap();
    let out = tmp.path().join("out");
    let (p, o) = (s(&pipeline), s(&out));

    let mut child = ngcc()
        .args(["run", &p, "--outputs", &o])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ngcc-pipe starts");
    let trigger = out.join(record::record_path(
        StepKind::Kat,
        "good",
        Some("good"),
        None,
    ));
    let t0 = Instant::now();
    while !trigger.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended ({status}) before a KAT record appeared");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "no KAT record after 5 min"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "interrupted run exit status {status}"
    );

    let first = record_files(&out);
    let finished: BTreeMap<PathBuf, StepRecord> = first
        .iter()
        .map(|(p, b)| (p.clone(), serde_json::from_slice::<StepRecord>(b).unwrap()))
        .filter(|(_, r)| r.status == Status::Ok)
        .collect();
    assert!(!finished.is_empty());
    assert!(
        first.values().all(|b| {
            let r: StepRecord = serde_json::from_slice(b).unwrap();
            r.status == Status::Ok
        }),
        "an interrupted step left a non-ok record"
    );

    let second = run(&["run", &p, "--outputs", &o]);
    assert_eq!(second.code, 0, "{}", second.show());
    let camp = campaign_json(&out);
    let total = camp.steps.len();
    assert!(
        finished.len() < total,
        "every step had finished before the interrupt ({total} steps)"
    );
    let after = record_files(&out);
    for (path, old) in &finished {
        let new: StepRecord = record::read_json(&out.join(path)).unwrap().unwrap();
        assert_eq!(new.finished, old.finished, "{} was redone", old.id);
        assert_eq!(new.cache_key, old.cache_key, "{} changed key", old.id);
        assert_eq!(after[path], first[path], "{} was rewritten", old.id);
        let st = camp.steps.iter().find(|st| st.id == old.id).unwrap();
        assert!(!st.ran, "{} ran again", old.id);
    }
    // The rest ran now, and everything is done.
    let ran = camp.steps.iter().filter(|st| st.ran).count();
    assert_eq!(ran, total - finished.len(), "{:#?}", camp.steps);
    assert!(
        camp.steps.iter().all(|st| st.status == Status::Ok),
        "{:#?}",
        camp.steps
    );
    assert_eq!(after.len(), total);
}

// ---------------------------------------------------------------------------------------
// 5. Real KEMs
// ---------------------------------------------------------------------------------------

fn cpu_has(flags: &[String]) -> bool {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let have: BTreeSet<&str> = info
        .lines()
        .find(|l| l.starts_with("flags"))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    flags.iter().all(|f| have.contains(f.as_str()))
}

/// `nistkat-sha256: <hex>` from a PQClean META.yml.
fn meta_nistkat(meta: &Path) -> String {
    let text = std::fs::read_to_string(meta).unwrap_or_else(|e| panic!("{}: {e}", meta.display()));
    text.lines()
        .find_map(|l| l.strip_prefix("nistkat-sha256:"))
        .unwrap_or_else(|| panic!("no nistkat-sha256 in {}", meta.display()))
        .trim()
        .to_string()
}

/// Every example instance passes its single and all KATs; each single hash equals the
/// one in the submission's `kat.sha256` and, independently, PQClean's META.yml.
#[test]
fn example_kems_pass_their_kats() {
    if !require_crates(&[MLKEM_CRATE, FRODO_CRATE]) {
        return;
    }
    let tmp = tempdir();
    let out = tmp.path().join("out");
    let r = run(&[
        "run",
        "pipelines/x86_1.kdl",
        "--only",
        "*/kat",
        "--outputs",
        &s(&out),
    ]);
    eprintln!("KAT-only run of the example campaign: {:.1} s", r.secs);
    assert_eq!(r.code, 0, "{}", r.show());

    let campaign = ngcc_pipe::dsl::load_campaign(&repo().join("pipelines/x86_1.kdl"))
        .unwrap_or_else(|d| panic!("{d}"));
    let mut c = Checks::default();
    let mut seen = BTreeSet::new();
    for sub in &campaign.submissions {
        let source = rec(&out, StepKind::Source, &sub.id, None, None);
        let root = match &source.data {
            Some(StepData::Source(sd)) => sd.root.clone(),
            other => panic!("{}: no source data {other:?}", sub.id),
        };
        let sums_text = std::fs::read_to_string(&sub.kat.manifest).unwrap();
        let sums: BTreeMap<&str, &str> = sums_text
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                Some((it.nth(1)?, l.split_whitespace().next()?))
            })
            .collect();
        for inst in &sub.instances {
            seen.insert((sub.id.clone(), inst.id.clone()));
            let kat = rec(&out, StepKind::Kat, &sub.id, Some(&inst.id), None);
            if !cpu_has(&inst.requires_cpu) {
                c.check(kat.status == Status::Unsupported, || {
                    format!(
                        "{}: {:?} on a CPU without {:?}",
                        kat.id, kat.status, inst.requires_cpu
                    )
                });
                continue;
            }
            c.check(kat.status == Status::Ok && kat.reason.is_none(), || {
                format!("{}: {:?}: {:?}", kat.id, kat.status, kat.reason)
            });
            let Some(StepData::Kat(k)) = &kat.data else {
                c.0.push(format!("{}: no KAT data", kat.id));
                continue;
            };
            let modes: BTreeSet<KatMode> = k.modes.iter().map(|m| m.mode).collect();
            c.check(modes == [KatMode::Single, KatMode::All].into(), || {
                format!("{}: modes {modes:?}", kat.id)
            });
            for m in &k.modes {
                c.check(m.status == KatStatus::Pass, || {
                    format!("{} {:?}: {:?} {:?}", kat.id, m.mode, m.status, m.reason)
                });
                let rsp = m.rsp.as_ref().map(|p| out.join(p));
                let on_disk = rsp.as_ref().and_then(|p| std::fs::read(p).ok());
                c.check(
                    on_disk.as_ref().map(|b| sha256_hex(b)) == m.actual_sha256,
                    || format!("{} {:?}: recorded hash is not the .rsp's", kat.id, m.mode),
                );
            }
            let single = k.modes.iter().find(|m| m.mode == KatMode::Single);
            let actual = single
                .and_then(|m| m.actual_sha256.clone())
                .unwrap_or_default();
            let listed = sums.get(inst.id.as_str()).copied().unwrap_or("(none)");
            c.check(actual == listed, || {
                format!("{}: single sha256 {actual} != kat.sha256 {listed}", kat.id)
            });
            let meta = root
                .join(&inst.dir)
                .parent()
                .expect("instance dir has a parent")
                .join("META.yml");
            let pqclean = meta_nistkat(&meta);
            c.check(actual == pqclean, || {
                format!(
                    "{}: single sha256 {actual} != nistkat-sha256 {pqclean} in {}",
                    kat.id,
                    meta.display()
                )
            });
        }
    }
    c.check(seen == example_instances(), || {
        format!("instances {seen:?} differ from the kat.sha256 files")
    });
    // Only the KATs and what they need ran: no timing record exists.
    c.check(!out.join("profile").exists(), || {
        "profile records written".into()
    });
    let camp = campaign_json(&out);
    c.check(
        camp.steps
            .iter()
            .all(|st| matches!(st.id.rsplit('/').next(), Some("source" | "build" | "kat"))),
        || "steps other than source/build/kat in campaign.json".into(),
    );
    c.done(&r.show());
}

// ---------------------------------------------------------------------------------------
// Hostile input (issue #10 items 5-6): refused by `check` and `run`, nothing written
// ---------------------------------------------------------------------------------------

/// A real /proc/cpuinfo feature name this machine cannot have (the other architecture's).
const ABSENT_CPU_FLAG: &str = if cfg!(target_arch = "x86_64") {
    "sve2"
} else {
    "avx512f"
};

/// Issue #10: `..` ids, a crate version with `/../`, `-wrapper`, a catalog outside the
/// manifest's folder, an absurd trial. Each is refused at its line by `check` (exit 2) and
/// by `run` (exit 2), nothing is written, and the catalog's content is not shown.
#[test]
fn hostile_manifests_are_refused_and_write_nothing() {
    let kems = repo().join("tests/fixtures/kems");
    let cases: [(&str, &str, &str, &str); 6] = [
        ("dots-submission", "submission \"good\"", "submission \"..\"", "manifest.kdl:2:12"),
        ("dots-instance", "instance \"good\"", "instance \"..\"", "manifest.kdl:10:14"),
        (
            "crate-version",
            "source path=\"..\"",
            "source crate=\"pqcrypto-mlkem\" version=\"1/../../x\"",
            "manifest.kdl:6:43",
        ),
        (
            "wrapper",
            "    instance \"good\" dir=\"good\" namespace=\"FIX_GOOD_\"\n",
            "    matrix impl=\"ref\"\n    instance \"good\" dir=\"good\" namespace=\"FIX_GOOD_\"\n    when impl=\"ref\" {\n        cflags \"-wrapper\" \"/bin/sh,-c,touch /tmp/ngcc-wrapper-ran\"\n    }\n",
            "manifest.kdl:13:16",
        ),
        ("catalog", "catalog=\"sizes.csv\"", "catalog=\"/etc/passwd\"", "manifest.kdl:9:19"),
        ("catalog-up", "catalog=\"sizes.csv\"", "catalog=\"../../../../../../etc/passwd\"", "manifest.kdl:9:19"),
    ];
    let good = std::fs::read_to_string(kems.join("good/manifest.kdl")).unwrap();
    for (name, from, to, at) in cases {
        let tmp = tempdir();
        let sub = tmp.path().join("subs").join(name);
        std::fs::create_dir_all(&sub).unwrap();
        assert!(good.contains(from), "{from}");
        let manifest = good
            .replace(from, to)
            .replace(
                "source path=\"..\"",
                &format!("source path=\"{}\"", s(&kems)),
            )
            .replace(
                "include=\"../primitives.kdl\"",
                "include=\"primitives.kdl\"",
            );
        std::fs::write(sub.join("manifest.kdl"), manifest).unwrap();
        for f in ["kat.sha256", "sizes.csv"] {
            std::fs::copy(kems.join("good").join(f), sub.join(f)).unwrap();
        }
        std::fs::copy(kems.join("primitives.kdl"), sub.join("primitives.kdl")).unwrap();
        let mut text = fixture_pipeline(name, &kems, &[], "single", "5ms");
        text = text
            .replace(
                "submissions \n",
                &format!("submissions \"{}\"\n", s(&sub.join("manifest.kdl"))),
            )
            .replace(&format!("submissions-root \"{}\"\n", s(&kems)), "");
        let pipeline = tmp.path().join("p.kdl");
        std::fs::write(&pipeline, text).unwrap();
        let before = tree(tmp.path());

        let r = run(&["check", &s(&pipeline)]);
        assert_eq!(r.code, 2, "{name}: {}", r.show());
        assert!(
            r.stderr.contains(at),
            "{name}: expected {at} in {}",
            r.show()
        );
        assert!(
            !r.stderr.contains("root:"),
            "{name} showed /etc/passwd: {}",
            r.show()
        );
        let out = tmp.path().join("out");
        let r = run(&["run", &s(&pipeline), "--outputs", &s(&out)]);
        assert_eq!(r.code, 2, "{name}: {}", r.show());
        assert_eq!(tree(tmp.path()), before, "{name}: files were written");
    }
    assert!(!Path::new("/tmp/ngcc-wrapper-ran").exists());
}

/// Issue #10: a second `run` on an outputs folder in use exits 2 naming the holder, and
/// runs nothing.
#[test]
fn second_run_on_locked_outputs_exits_2() {
    let kems = repo().join("tests/fixtures/kems");
    let tmp = tempdir();
    let pipeline = tmp.path().join("p.kdl");
    std::fs::write(
        &pipeline,
        fixture_pipeline("locked", &kems, &["good"], "single", "5ms"),
    )
    .unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let held = ngcc_pipe::run::lock::OutputsLock::acquire(&out).unwrap();
    let r = run(&["run", &s(&pipeline), "--outputs", &s(&out)]);
    assert_eq!(r.code, 2, "{}", r.show());
    let want = format!("in use by process {}", std::process::id());
    assert!(r.stderr.contains(&want), "{}", r.show());
    assert_eq!(tree(&out), [".lock"], "the second run wrote something");
    drop(held);
}

/// Whether the diagnostics `text` say `what`, however they were wrapped: the renderer wraps
/// at a fixed width, so where a line breaks depends on the length of the paths in it (on
/// where the clone lives). Compared without whitespace and without the gutter (`×`, `│`)
/// that starts a continued line.
fn said(text: &str, what: &str) -> bool {
    let squeeze = |s: &str| -> String {
        s.lines()
            .map(|l| l.trim_start().trim_start_matches(['×', '│']))
            .flat_map(|l| l.chars())
            .filter(|c| !c.is_whitespace())
            .collect()
    };
    squeeze(text).contains(&squeeze(what))
}

/// Issue #12: planted mistakes are named at their manifest lines, all in one go: a typo'd
/// kat key and a gcc-style CPU flag by `check`; a wrong namespace and a wrong `dir` by
/// `check --deep` (which reads the sources).
#[test]
fn check_names_planted_mistakes_at_their_lines() {
    let kems = repo().join("tests/fixtures/kems");
    let tmp = tempdir();
    let sub = tmp.path().join("planted");
    std::fs::create_dir_all(&sub).unwrap();
    let manifest = |body: &str| {
        format!(
            "submission \"planted\" {{\n    algorithm \"Planted\"\n    source path=\"{}\"\n    primitives include=\"{}/primitives.kdl\"\n    kat rng=\"nist\" manifest=\"kat.sha256\"\n{body}}}\n",
            s(&kems),
            s(&kems)
        )
    };
    let hash = "71212ed169c745ff45cf36e87283a83fad0ff63ce7a71d1f930218d32b82a24d";
    std::fs::write(
        sub.join("kat.sha256"),
        format!("{hash}  good-ref\n{hash}  good_opt\nnot-a-hash good-ref.all\n"),
    )
    .unwrap();
    let mut text = fixture_pipeline("planted", &kems, &[], "single", "5ms");
    text = text.replace(
        "submissions \n",
        &format!("submissions \"{}\"\n", s(&sub.join("manifest.kdl"))),
    );
    let pipeline = tmp.path().join("p.kdl");
    std::fs::write(&pipeline, text).unwrap();
    let m = s(&sub.join("manifest.kdl"));
    let k = s(&sub.join("kat.sha256"));

    // 1. Without sources: kat keys and CPU flag names.
    std::fs::write(
        sub.join("manifest.kdl"),
        manifest("    matrix impl=\"ref opt\"\n    instance \"good-{impl}\" dir=\"good\" namespace=\"FIX_GOOD_\"\n    when impl=\"opt\" {\n        requires-cpu \"pclmul\" \"bmi\"\n    }\n"),
    )
    .unwrap();
    let r = run(&["check", &s(&pipeline)]);
    assert_eq!(r.code, 2, "{}", r.show());
    for (at, what) in [
        (
            format!("{k}:2:67"),
            "`good_opt` in the kat manifest names no declared instance",
        ),
        (format!("{k}:3:1"), "malformed kat manifest line"),
        (format!("{m}:9:22"), "`pclmul` is not a CPU feature name"),
        (format!("{m}:9:31"), "`bmi` is not a CPU feature name"),
    ] {
        assert!(
            said(&r.stderr, &at) && said(&r.stderr, what),
            "{at} {what}\n{}",
            r.show()
        );
    }
    assert!(said(&r.stderr, "did you mean `good-opt`?"), "{}", r.show());
    assert!(said(&r.stderr, "did you mean `pclmulqdq`?"), "{}", r.show());
    assert!(said(&r.stderr, "did you mean `bmi1`?"), "{}", r.show());

    // 2. With sources: a wrong namespace and a wrong folder.
    std::fs::write(
        sub.join("kat.sha256"),
        format!("{hash}  good-ref\n{hash}  good-opt\n"),
    )
    .unwrap();
    std::fs::write(
        sub.join("manifest.kdl"),
        manifest("    instance \"good-ref\" dir=\"good\" namespace=\"FIX_GOD_\"\n    instance \"good-opt\" dir=\"goood\" namespace=\"FIX_GOOD_\"\n"),
    )
    .unwrap();
    let r = run(&["check", &s(&pipeline)]);
    assert_eq!(r.code, 0, "plain check does not read sources: {}", r.show());
    let r = run(&[
        "check",
        "--deep",
        &s(&pipeline),
        "--outputs",
        &s(&tmp.path().join("out")),
    ]);
    assert_eq!(r.code, 2, "{}", r.show());
    let col = |line: &str, word: &str| line.find(word).unwrap() + 1;
    let ns_line = "    instance \"good-ref\" dir=\"good\" namespace=\"FIX_GOD_\"";
    let dir_line = "    instance \"good-opt\" dir=\"goood\" namespace=\"FIX_GOOD_\"";
    let ns_at = format!("{m}:6:{}", col(ns_line, "\"FIX_GOD_"));
    assert!(said(&r.stderr, &ns_at), "{ns_at}\n{}", r.show());
    assert!(
        said(&r.stderr, "namespace `FIX_GOD_` is not what")
            && said(&r.stderr, "it has namespace `FIX_GOOD_`"),
        "{}",
        r.show()
    );
    let dir_at = format!("{m}:7:{}", col(dir_line, "\"goood"));
    assert!(said(&r.stderr, &dir_at), "{dir_at}\n{}", r.show());
    assert!(
        said(&r.stderr, "folder `goood` does not exist"),
        "{}",
        r.show()
    );
    assert!(r.stdout.contains("planted/good-ref: kem.c"), "{}", r.show());
}

/// Issue #9: `layouts=3` links the instance in three orders, each after the page anchor,
/// and the session times all of them in every batch: the build record names the objects,
/// the time record lists them and each batch's share, and each batch is the sum of them.
#[test]
fn layouts_are_linked_after_the_anchor_and_timed_in_every_batch() {
    let tmp = tempdir();
    let kems = repo().join("tests/fixtures/kems");
    let pipeline = tmp.path().join("layouts.kdl");
    let text = fixture_pipeline("engine-layouts", &kems, &["good"], "single", "5ms").replacen(
        "samples=11",
        "samples=11 layouts=3",
        1,
    );
    std::fs::write(&pipeline, &text).unwrap();
    let out = tmp.path().join("out");
    let r = run(&["run", &s(&pipeline), "--outputs", &s(&out)]);
    assert_eq!(r.code, 0, "{}", r.show());

    let build = rec(&out, StepKind::Build, "good", Some("good"), None);
    let Some(StepData::Build(b)) = &build.data else {
        panic!("no build data: {build:?}");
    };
    let names: Vec<&str> = b.layouts.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["reversed", "shuffle-1"]);
    let anchor = b.anchor_object.as_ref().expect("the anchor is recorded");
    assert!(out.join(anchor).is_file());
    for l in &b.layouts {
        let bytes = std::fs::read(out.join(&l.object)).unwrap();
        assert_eq!(sha256_hex(&bytes), l.object_sha256, "{}", l.name);
    }
    // Two objects (kem.o, toyhash.o): reversed is another link order, another object.
    assert_ne!(b.layouts[0].object_sha256, b.object_sha256);
    // The link commands put the anchor first and the objects in each layout's order.
    let log = std::fs::read_to_string(out.join(&build.logs[0])).unwrap();
    // (`<id>.unanchored.so` is linked only to measure the static size without the padding.)
    let links: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" -shared ") && !l.contains("unanchored"))
        .collect();
    assert!(links.len() >= 3, "{log}");
    for l in &links {
        let anchor_at = l.find("ngcc_anchor.o").expect(l);
        assert!(anchor_at < l.find("kem.o").expect(l), "{l}");
        assert!(anchor_at < l.find("toyhash.o").expect(l), "{l}");
    }
    let reversed = links
        .iter()
        .find(|l| l.contains("good.reversed.so"))
        .expect("the reversed layout's link");
    assert!(
        reversed.find("toyhash.o") < reversed.find("kem.o"),
        "{reversed}"
    );

    for op in OPS {
        let t = rec(&out, StepKind::Time, "good", Some("good"), Some(op));
        assert_eq!(t.status, Status::Ok, "{op:?}: {:?}", t.reason);
        let Some(StepData::Time(td)) = &t.data else {
            panic!("{op:?}: no time data");
        };
        let o = &td.output;
        assert_eq!(o.layouts.len(), 3, "{op:?}: {:?}", o.layouts);
        assert!(o.layouts[0].ends_with("good.so"), "{:?}", o.layouts);
        assert!(
            o.layouts[1].ends_with("good.reversed.so"),
            "{:?}",
            o.layouts
        );
        assert!(!o.trials.is_empty());
        for tr in &o.trials {
            assert_eq!(tr.layout_cycles.len(), 3, "{op:?}");
            assert!(tr.layout_cycles.iter().all(|&c| c > 0), "{op:?}: {tr:?}");
            assert_eq!(tr.layout_cycles.iter().sum::<u64>(), tr.cycles, "{op:?}");
            assert_eq!(tr.iters % 3, 0, "{op:?}: the same calls in every layout");
        }
        // The samples are shared between the layouts: 11 = 4 + 4 + 3.
        assert_eq!(o.samples.len(), 11, "{op:?}");
    }
}
