//! The CLI's commands: check, dry runs, graph exports, list.

use super::*;

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
