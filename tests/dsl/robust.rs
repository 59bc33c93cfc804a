//! Never a panic on mutated or truncated input, and scale checks (ignored by default).

use super::*;

// ---------------------------------------------------------------------------------------
// Never a panic
// ---------------------------------------------------------------------------------------

/// The pipeline example of the DSL spec.
const SPEC_PIPELINE: &str = r#"// pipelines/x86_1.kdl
system "x86_1" {
    arch "x86-64"                // optional; default: host arch ("x86-64", "aarch64")
    bench-cpu 1                  // core pinned for exclusive steps (required)
    cc "gcc"                     // optional; default "cc"
}
flags "guide" "-O3 -march=native -fomit-frame-pointer"   // name, flag string (split on whitespace)
flags "harness-default" "-O2"
submissions "../submissions/*/manifest.kdl"   // one or more args; globs relative to THIS file; each must match >= 1 file
outputs "../outputs/x86_1"                    // relative to this file
defaults timeout="30m"                        // optional; default timeout of every step
step "source"
step "build"   flags="guide" timeout="10m"
step "kat"     needs="build" modes="single all"
step "sizes"   needs="kat"
step "survey"  needs="build"
step "time"    needs="kat" exclusive=#true ops="keygen enc dec" trials=5 trial="1s" min-iters=20 samples=101 timeout="10m"
step "profile" needs="kat" exclusive=#true ops="keygen enc dec" iters=20
step "report"  needs="kat time sizes profile survey"
"#;

/// The manifest example of the DSL spec (with `source path=` and inline primitives).
const SPEC_MANIFEST: &str = r#"submission "ml-kem" {
    algorithm "ML-KEM"                       // required
    category "public-key algorithm"          // optional
    function "key encapsulation"             // optional
    versions "clean" "avx2"                  // optional
    note "free text shown as a footnote"     // optional, repeatable
    link "Submission" "https://example.org"  // optional, repeatable
    source path="src"
    primitives {
        sources "common/fips202.c" "common/sha2.c" "common/aes.c" "common/sp800-185.c"
        include "common"
        header "common/fips202.h" "common/sha2.h" "common/aes.h"
        hash family="keccak" "shake128_absorb" "shake128_squeezeblocks" "shake256" "sha3_256" "sha3_512"
        hash family="aes" "aes128_ecb" "aes256_ctr"
        drng "PQCLEAN_randombytes"
    }
    kat rng="nist" manifest="kat.sha256" all-count=100 reference="kat"
    sizes {
        instance "ML-KEM-512-clean" pk=800 sk=1632 ct=768 ss=32
    }
    matrix level="512 768 1024" impl="clean avx2"
    instance "ML-KEM-{level}-{impl}" dir="crypto_kem/ml-kem-{level}/{impl}" namespace="PQCLEAN_MLKEM{level}_{impl:upper}_"
    when impl="avx2" {
        cflags "-mavx2" "-mbmi2" "-mpopcnt"
        sources "common/keccak4x/KeccakP-1600-times4-SIMD256.c"
        requires-cpu "avx2" "bmi2" "popcnt"
        exclude "*_test.c"
    }
}
"#;

/// Loads the spec examples with one of them replaced; must return, never panic.
fn load_spec_with(pipeline: &str, manifest: &str) -> Result<usize, usize> {
    let mut fs = MemFs::new();
    fs.add_file("/w/pipelines/x86_1.kdl", pipeline)
        .add_file("/w/submissions/ml-kem/manifest.kdl", manifest)
        .add_file("/w/submissions/ml-kem/kat.sha256", "")
        .add_dir("/w/submissions/ml-kem/src");
    match load_campaign_with(Path::new("/w/pipelines/x86_1.kdl"), &fs) {
        Ok(c) => Ok(c.submissions.iter().map(|s| s.instances.len()).sum()),
        Err(d) => {
            // Rendering must not panic either, and every problem has a message.
            let text = d.render(false);
            assert!(
                !d.is_empty() && d.iter().all(|x| !x.message().is_empty()),
                "{text}"
            );
            Err(d.len())
        }
    }
}

#[test]
fn spec_examples_load() {
    assert_eq!(load_spec_with(SPEC_PIPELINE, SPEC_MANIFEST), Ok(6));
}

#[test]
fn truncations_of_the_spec_examples_are_handled() {
    // Every 11th cut (KDL parsing is slow in debug builds; proptest covers the rest).
    for text in [SPEC_PIPELINE, SPEC_MANIFEST] {
        for (i, _) in text.char_indices().step_by(11) {
            let cut = &text[..i];
            if text == SPEC_PIPELINE {
                let _ = load_spec_with(cut, SPEC_MANIFEST);
            } else {
                let _ = load_spec_with(SPEC_PIPELINE, cut);
            }
        }
    }
}

/// Fragments that make interesting KDL and DSL mistakes when spliced in.
const TOKENS: &[&str] = &[
    "{",
    "}",
    "\"",
    "=",
    "#true",
    "#null",
    "1.5",
    "-",
    "\n",
    ";",
    "/-",
    "//",
    "/*",
    "(u8)",
    "needs=\"kat\"",
    "{level}",
    "{x:upper}",
    "{{",
    "}}",
    "µs",
    "r#\"",
    "\"\"\"",
    "\\",
    "0",
    "step \"time\" needs=\"time\"",
    "instance \"a\" dir=\"d\" namespace=\"n\"",
    "matrix a=\"\"",
    "when impl=\"avx2\" { }",
    "999999999999999999999999999999999999999999",
];

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Delete(usize, usize),
    Insert(usize, usize),
    Truncate(usize),
}

fn mutate(text: &str, muts: &[Mutation]) -> String {
    let mut b = text.as_bytes().to_vec();
    for m in muts {
        let n = b.len().max(1);
        match *m {
            Mutation::Flip(at, x) => {
                if !b.is_empty() {
                    b[at % n] ^= x;
                }
            }
            Mutation::Delete(at, len) => {
                let s = (at % n).min(b.len());
                let e = (s + len).min(b.len());
                b.drain(s..e);
            }
            Mutation::Insert(at, tok) => {
                let s = (at % n).min(b.len());
                let t = TOKENS[tok % TOKENS.len()].as_bytes();
                b.splice(s..s, t.iter().copied());
            }
            Mutation::Truncate(at) => b.truncate(at % n),
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

mod no_panic {
    use super::*;
    use proptest::prelude::*;

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            (any::<usize>(), 1u8..=255).prop_map(|(a, x)| Mutation::Flip(a, x)),
            (any::<usize>(), 1usize..40).prop_map(|(a, l)| Mutation::Delete(a, l)),
            (any::<usize>(), any::<usize>()).prop_map(|(a, t)| Mutation::Insert(a, t)),
            any::<usize>().prop_map(Mutation::Truncate),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn mutated_manifest_never_panics(muts in prop::collection::vec(mutation(), 1..6)) {
            let _ = load_spec_with(SPEC_PIPELINE, &mutate(SPEC_MANIFEST, &muts));
        }

        #[test]
        fn mutated_pipeline_never_panics(muts in prop::collection::vec(mutation(), 1..6)) {
            let _ = load_spec_with(&mutate(SPEC_PIPELINE, &muts), SPEC_MANIFEST);
        }

        #[test]
        fn arbitrary_included_files_never_panic(prims in "\\PC{0,300}", csv in "[a-z0-9,\\n -]{0,120}") {
            let m = edit(
                MANIFEST,
                "    kat",
                "    primitives include=\"../prims.kdl\"\n    sizes catalog=\"sizes.csv\"\n    kat",
            );
            let mut fs = campaign_fs(PIPELINE, &m);
            fs.add_file("/c/submissions/prims.kdl", prims)
                .add_file("/c/submissions/a/sizes.csv", csv);
            if let Err(d) = load_campaign_with(Path::new("/c/pipelines/p.kdl"), &fs) {
                let _ = d.render(false);
            }
        }

        #[test]
        fn arbitrary_text_never_panics(p in "\\PC{0,200}", m in "\\PC{0,200}") {
            let _ = load_spec_with(&p, &m);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Scale and ad-hoc checks (ignored by default)
// ---------------------------------------------------------------------------------------

/// A generated campaign: `subs` submissions of `per` instances each (matrix 4 x per/4),
/// six steps, in memory.
fn generated_campaign(subs: usize, per: usize) -> MemFs {
    let mut fs = MemFs::new();
    fs.add_file(
        "/g/pipelines/big.kdl",
        r#"system "big" {
    bench-cpu 1
}
flags "guide" "-O3 -march=native"
submissions "../submissions/*/manifest.kdl"
outputs "../outputs/big"
step "build" flags="guide"
step "kat" needs="build"
step "sizes" needs="kat"
step "time" needs="kat" exclusive=#true
step "survey" needs="build"
step "report" needs="kat time sizes survey"
"#,
    );
    let impls: Vec<String> = (0..per / 4).map(|i| format!("impl{i}")).collect();
    for s in 0..subs {
        fs.add_file(
            format!("/g/submissions/kem{s:04}/manifest.kdl"),
            format!(
                r#"submission "kem{s:04}" {{
    algorithm "KEM {s}"
    source crate="pqcrypto-mlkem" version="0.1.1" root="pqclean"
    matrix level="1 2 3 4" impl="{}"
    instance "KEM{s}-{{level}}-{{impl}}" dir="crypto_kem/kem{s}-{{level}}/{{impl}}" namespace="KEM{s}_{{level}}_{{impl:upper}}_"
    when impl="impl0" {{
        cflags "-mavx2"
        requires-cpu "avx2"
    }}
}}
"#,
                impls.join(" ")
            ),
        )
        .add_file(format!("/g/submissions/kem{s:04}/kat.sha256"), "");
    }
    fs
}

#[test]
fn generated_campaign_expands_every_instance() {
    let c = load_campaign_with(Path::new("/g/pipelines/big.kdl"), &generated_campaign(5, 8))
        .unwrap_or_else(|d| panic!("{d}"));
    let n: usize = c.submissions.iter().map(|s| s.instances.len()).sum();
    assert_eq!(n, 40);
    assert_eq!(c.steps.len(), 6);
}
