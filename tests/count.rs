//! Instruction counts: the callgrind parser and the shares on real callgrind output
//! (`tests/fixtures/callgrind/`, generated from `nested.c` as its header says).

use ngcc_pipe::count::{self, Declared};

fn fixture(n: usize) -> count::Profile {
    let path = format!(
        "{}/tests/fixtures/callgrind/nested.out.{n}",
        env!("CARGO_MANIFEST_DIR")
    );
    count::parse(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn declared() -> Vec<Declared> {
    [
        ("sha3", "keccak"),
        ("shake", "keccak"),
        ("randombytes", "drng"),
    ]
    .map(|(s, f)| Declared {
        symbol: s.into(),
        family: f.into(),
    })
    .to_vec()
}

#[test]
fn parses_real_callgrind_dumps() {
    let p = fixture(1);
    assert_eq!(p.events, ["Ir"]);
    assert_eq!(p.totals, Some(vec![815]));
    assert_eq!(p.self_total(0), 815);
    let names: Vec<&str> = p.functions.iter().map(|f| f.name.as_str()).collect();
    for n in [
        "crypto_kem_keypair",
        "sha3",
        "absorb",
        "shake",
        "permute",
        "randombytes",
    ] {
        assert!(names.contains(&n), "{n} in {names:?}");
    }
    let id = |n: &str| p.functions.iter().position(|f| f.name == n).unwrap();
    // `fn=(546)` (shake) calls `cfn=(548)` (permute) on two arcs of 2 calls each.
    let shake_permute: Vec<_> = p
        .calls
        .iter()
        .filter(|c| c.caller == id("shake") && c.callee == id("permute"))
        .map(|c| (c.count, c.inclusive[0]))
        .collect();
    assert_eq!(shake_permute, [(2, 204), (2, 204)]);
}

#[test]
fn shares_from_real_dumps_count_nested_primitives_once() {
    let profiles: Vec<_> = (1..=3).map(fixture).collect();
    let s = count::summarize(&profiles, &declared(), "drng").unwrap();
    assert_eq!(s.per_call, [815, 815, 815]);
    // keypair -> sha3 (329, with the shake inside it through `absorb`) + keypair -> shake
    // (221); the shake under sha3 is not counted again. DRNG: keypair -> randombytes (150).
    assert_eq!(s.family_shares[0], ("keccak".to_string(), 550.0 / 815.0));
    assert_eq!(s.drng_share, 150.0 / 815.0);
    assert_eq!(s.hash_share, 550.0 / 815.0);
    assert_eq!(
        s.calls_per_op,
        [
            ("sha3".to_string(), 1.0),
            ("shake".to_string(), 2.0),
            ("randombytes".to_string(), 1.0)
        ]
    );
    assert!(s.ambiguous.is_empty());
}

mod common;
use common::*;
use ngcc_pipe::model::{Op, StepKind};
use ngcc_pipe::record::{Status, StepData};

/// Issue #11: two runs of the `count` step on the same object give identical counts;
/// issue #27: calls per operation are exact.
#[test]
fn counts_are_identical_in_two_runs() {
    if !require_valgrind() || !require_crates(&[MLKEM_CRATE]) {
        return;
    }
    let tmp = tempdir();
    let pipeline = tmp.path().join("count.kdl");
    std::fs::write(
        &pipeline,
        format!(
            "system \"count\" {{\n    bench-cpu {}\n    cc \"gcc\"\n}}\n\
             flags \"guide\" \"-O3 -march=native -fomit-frame-pointer\"\n\
             submissions \"{}\"\nsubmissions-root \"{}\"\noutputs \"{}\"\n\
             step \"source\"\nstep \"build\" needs=\"source\" flags=\"guide\"\n\
             step \"count\" needs=\"build\" ops=\"keygen enc dec\" iters=5\n",
            bench_cpu(),
            s(&repo().join("pipelines/quick/ml-kem/manifest.kdl")),
            s(repo()),
            s(&tmp.path().join("out")),
        ),
    )
    .unwrap();
    let out = tmp.path().join("out");
    let counts = |force: bool| {
        let mut args = vec!["run", pipeline.to_str().unwrap(), "--only", "*512*/count*"];
        if force {
            args.extend(["--force", "*/count*"]);
        }
        let r = run(&args);
        assert_eq!(r.code, 0, "{}", r.show());
        Op::ALL
            .iter()
            .map(|&op| {
                let rec = rec(
                    &out,
                    StepKind::Count,
                    "ml-kem",
                    Some("ML-KEM-512-clean"),
                    Some(op),
                );
                assert_eq!(rec.status, Status::Ok, "{:?}", rec.reason);
                match rec.data {
                    Some(StepData::Count(c)) => {
                        assert_eq!(c.per_call.len(), 5);
                        assert!(c.instructions_min > 10_000, "{op}: {:?}", c.per_call);
                        assert!(
                            c.hash_share > 0.2 && c.hash_share < 0.9,
                            "{op}: {}",
                            c.hash_share
                        );
                        // Issue #27: ML-KEM-512 (k = 2) absorbs the seed once per matrix
                        // entry, k * k = 4 times, in keygen, in enc and in dec (its
                        // re-encryption), exactly: the calls the runner makes to prepare
                        // the inputs (keygen before enc, both before dec) are not counted.
                        let absorb = c.calls_per_op.iter().find(|(s, _)| s == "shake128_absorb");
                        assert_eq!(
                            absorb.map(|(_, n)| *n),
                            Some(4.0),
                            "{op}: {:?}",
                            c.calls_per_op
                        );
                        (c.per_call, c.hash_share, c.drng_share, c.output.seed)
                    }
                    other => panic!("{op}: {other:?}"),
                }
            })
            .collect::<Vec<_>>()
    };
    let first = counts(false);
    let second = counts(true);
    // The second run did count again (not kept the first run's records): each record says
    // it was forced, and campaign.json marks the steps as run.
    let camp = campaign_json(&out);
    for op in Op::ALL {
        let r = rec(
            &out,
            StepKind::Count,
            "ml-kem",
            Some("ML-KEM-512-clean"),
            Some(op),
        );
        assert_eq!(r.ran_because.as_deref(), Some("forced"), "{}", r.id);
        let step = camp.steps.iter().find(|s| s.id == r.id).expect("listed");
        assert!(step.ran, "{} did not run again", r.id);
    }
    assert_eq!(first, second);
}
