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
