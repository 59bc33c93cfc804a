//! Resume, explain and interrupt.

use super::*;

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
            .contains("Both runs timed the same yardstick object in their rounds"),
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
