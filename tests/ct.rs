//! The constant-time check on the fixtures of `tests/fixtures/ct/` (the real binary, the
//! valgrind object, memcheck in the sandbox): the KEM that branches on a secret-key byte in
//! dec and the one that indexes a table with secret bytes in keygen are caught at the lines
//! marked `LEAK`, the constant-time one has no finding, and a second run gives the same
//! findings.
//!
//! Needs valgrind (group `valgrind`, see `tests/common/require.rs`).

mod common;

use std::path::Path;

use common::{rec, repo, require_valgrind, run, s, tempdir};
use ngcc_pipe::ct::Finding;
use ngcc_pipe::model::{Op, StepKind};
use ngcc_pipe::record::{Status, StepData};

/// The line of `kem.c` of fixture `name` that holds the `LEAK` marker.
fn leak_line(name: &str) -> u32 {
    let text = std::fs::read_to_string(repo().join("tests/fixtures/ct").join(name).join("kem.c"))
        .expect("fixture source");
    let lines: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("/* LEAK:"))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(lines.len(), 1, "{name}: one LEAK marker");
    lines[0] as u32
}

/// The findings of every fixture and operation, after a run into `out`.
fn findings(out: &Path) -> Vec<(String, Op, Vec<Finding>)> {
    let mut all = Vec::new();
    for name in ["ct-branch", "ct-clean", "ct-table"] {
        for op in Op::ALL {
            let r = rec(out, StepKind::Ct, name, Some(name), Some(op));
            assert_eq!(r.status, Status::Ok, "{name} {op}: {:?}", r.reason);
            let Some(StepData::Ct(d)) = r.data else {
                panic!("{name} {op}: no ct data");
            };
            assert_eq!(d.runs, 3);
            assert!(out.join(&d.raw_log).is_file(), "raw XML kept");
            all.push((name.to_string(), op, d.findings));
        }
    }
    all
}

#[test]
fn leaky_fixtures_are_caught_at_their_lines_and_findings_repeat() {
    if !require_valgrind() {
        return;
    }
    let tmp = tempdir();
    let out = tmp.path().join("out");
    let args = |extra: &[&str]| {
        let mut a = vec![
            "run".to_string(),
            "tests/fixtures/ct/ct.kdl".into(),
            "--outputs".into(),
            s(&out),
        ];
        a.extend(extra.iter().map(|x| x.to_string()));
        a
    };
    let r = run(&args(&[]));
    assert_eq!(r.code, 0, "{}", r.show());
    let first = findings(&out);
    for (name, op, f) in &first {
        let expected = match (name.as_str(), op) {
            ("ct-branch", Op::Dec) => Some(("FIX_CTBRANCH_crypto_kem_dec", "UninitCondition")),
            ("ct-table", Op::Keygen) => Some(("FIX_CTTABLE_crypto_kem_keypair", "UninitValue")),
            _ => None,
        };
        match expected {
            None => assert!(f.is_empty(), "{name} {op}: unexpected findings {f:?}"),
            Some((function, kind)) => {
                assert_eq!(f.len(), 1, "{name} {op}: {f:?}");
                let f = &f[0];
                assert_eq!(f.function, function);
                assert!(f.file.ends_with(&format!("{name}/kem.c")), "{}", f.file);
                assert_eq!(f.line, leak_line(name), "{name} {op}");
                assert_eq!(f.kinds, [kind]);
                assert!(f.benign.is_none());
            }
        }
    }
    // The report's section and the index's column.
    let md = std::fs::read_to_string(out.join("reports/ct-branch.md")).expect("report");
    assert!(md.contains("## Constant-time check"), "{md}");
    assert!(md.contains("| `ct-branch` | dec | 1 location |"), "{md}");
    assert!(md.contains("| `ct-branch` | keygen | no secret-dependent branch or index found |"));
    let line = leak_line("ct-branch");
    assert!(
        md.contains(&format!(
            "| `ct-branch` | dec | `FIX_CTBRANCH_crypto_kem_dec` | kem.c:{line} | UninitCondition | 3 (1 stack) | no |"
        )),
        "{md}"
    );
    let clean = std::fs::read_to_string(out.join("reports/ct-clean.md")).expect("report");
    assert!(clean.contains("No location found in any checked operation."));
    let index = std::fs::read_to_string(out.join("reports/index.md")).expect("index");
    assert!(
        index.contains("constant-time locations (not benign)"),
        "{index}"
    );
    assert!(index.contains("keygen 1 / enc 0 / dec 0"), "{index}");
    // Deterministic: forced again, the same findings (counts included); every ct step did
    // run again (its record says forced, campaign.json that it ran).
    let r = run(&args(&["--force", "*/ct:*"]));
    assert_eq!(r.code, 0, "{}", r.show());
    let camp = common::campaign_json(&out);
    for name in ["ct-branch", "ct-clean", "ct-table"] {
        for op in Op::ALL {
            let r = rec(&out, StepKind::Ct, name, Some(name), Some(op));
            assert_eq!(r.ran_because.as_deref(), Some("forced"), "{}", r.id);
            let step = camp.steps.iter().find(|s| s.id == r.id).expect("listed");
            assert!(step.ran, "{} did not run again", r.id);
        }
    }
    assert_eq!(findings(&out), first);
}
