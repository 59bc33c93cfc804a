//! The analysis steps on a NIST-round package (issue 25): `profile`, `count` and `ct` on
//! an `api "nist"` instance (un-prefixed functions, the harness's NIST `randombytes`),
//! a generated ML-KEM-512 package imported with `ngcc-pipe import`.
//!
//! Needs valgrind (group `valgrind`, see `tests/common/require.rs`).

mod common;
#[path = "nist_support/mod.rs"]
mod support;

use common::{rec, require_valgrind, run, s, tempdir};
use ngcc_pipe::model::{Op, StepKind};
use ngcc_pipe::record::{Status, StepData};

#[test]
fn profile_count_and_ct_run_on_a_nist_package() {
    if !require_valgrind() {
        return;
    }
    let tmp = tempdir();
    let dir = tmp.path();
    let mlkem = support::pqclean("pqcrypto-mlkem", "0.1.1", &dir.join("crates"));
    let pkg = support::ml_kem(&mlkem, &dir.join("pkgs"), &["512"]);
    let subs = dir.join("subs");
    let r = run(&["import", &s(&pkg), "--into", &s(&subs)]);
    assert_eq!(r.code, 0, "{}", r.show());
    // As in submissions/ml-kem: the rejection sampling on the public seed rho, which
    // memcheck sees as secret (rho is hashed from the secret seed in keygen, read from
    // the secret key in dec), is declared benign.
    let manifest = subs.join("ML-KEM/manifest.kdl");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let text = text.replacen(
        "    api \"nist\"\n",
        "    api \"nist\"\n    ct-benign \"rej_uniform\" reason=\"rejection sampling on the XOF output of the public seed rho\"\n",
        1,
    );
    std::fs::write(&manifest, text).unwrap();
    let pipeline = dir.join("steps.kdl");
    std::fs::write(
        &pipeline,
        format!(
            "system \"nist\" {{\n    bench-cpu {}\n    cc \"cc\"\n}}\n\
             flags \"guide\" \"-O2\"\n\
             submissions \"{}\"\nsubmissions-root \"{}\"\noutputs \"{}\"\ndefaults timeout=\"20m\"\n\
             step \"source\"\nstep \"build\" needs=\"source\" flags=\"guide\"\n\
             step \"kat\" needs=\"build\" modes=\"single\"\n\
             step \"profile\" needs=\"kat\" exclusive=#true ops=\"keygen enc dec\" iters=3\n\
             step \"count\" needs=\"build\" ops=\"keygen enc dec\" iters=2\n\
             step \"ct\" needs=\"kat\" ops=\"keygen enc dec\" iters=1\n\
             step \"report\" needs=\"kat profile count ct\"\n",
            support::allowed_cpu(),
            s(&subs.join("*/manifest.kdl")),
            s(dir),
            s(&dir.join("out")),
        ),
    )
    .unwrap();
    let r = run(&["run", &s(&pipeline)]);
    assert_eq!(r.code, 0, "{}", r.show());
    let out = dir.join("out");
    let inst = Some("ml-kem-512-reference");
    for op in Op::ALL {
        let p = rec(&out, StepKind::Profile, "ML-KEM", inst, Some(op));
        assert_eq!(p.status, Status::Ok, "profile {op}: {:?}", p.reason);
        let Some(StepData::Profile(_)) = p.data else {
            panic!("profile {op}: no profile data");
        };
        let c = rec(&out, StepKind::Count, "ML-KEM", inst, Some(op));
        assert_eq!(c.status, Status::Ok, "count {op}: {:?}", c.reason);
        let Some(StepData::Count(c)) = c.data else {
            panic!("count {op}: no count data");
        };
        assert_eq!(c.per_call.len(), 2, "{op}");
        assert!(c.instructions_min > 10_000, "{op}: {:?}", c.per_call);
        // Keygen and enc draw their randomness from the harness's NIST `randombytes`,
        // which is counted as the DRNG; dec draws none.
        if op == Op::Dec {
            assert_eq!(c.drng_share, 0.0, "{op}");
        } else {
            assert!(c.drng_share > 0.0, "{op}: the DRNG is not counted");
        }
        let t = rec(&out, StepKind::Ct, "ML-KEM", inst, Some(op));
        assert_eq!(t.status, Status::Ok, "ct {op}: {:?}", t.reason);
        let Some(StepData::Ct(t)) = t.data else {
            panic!("ct {op}: no ct data");
        };
        assert_eq!(t.runs, 1);
        // The secrets the harness's `randombytes` hands out are marked: keygen's are
        // followed into the matrix sampling, the one place ML-KEM's reference code
        // branches on data memcheck sees as secret, under its un-prefixed name.
        if op == Op::Keygen {
            assert!(!t.findings.is_empty(), "ct keygen: nothing marked?");
        }
        for f in &t.findings {
            assert_eq!(f.function, "rej_uniform", "ct {op}: {f:?}");
            assert!(f.benign.is_some(), "ct {op}: {f:?}");
        }
    }
    let md = std::fs::read_to_string(out.join("reports/ML-KEM.md")).expect("report");
    assert!(md.contains("## Constant-time check"), "{md}");
}
