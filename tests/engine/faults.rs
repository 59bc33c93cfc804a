//! Fault fixtures, and KAT checks on an edited copy of the `good` fixture.

use super::*;

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
