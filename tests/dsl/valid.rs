//! The valid campaign fixture loads with everything applied.

use super::*;

// ---------------------------------------------------------------------------------------
// Valid campaign
// ---------------------------------------------------------------------------------------

#[test]
fn valid_fixture_loads_with_everything_applied() {
    let c = load_campaign(&fixture("valid/pipelines/main.kdl")).unwrap_or_else(|d| panic!("{d}"));
    let root = fixture("valid");

    assert_eq!(c.pipeline_path, root.join("pipelines/main.kdl"));
    assert_eq!(c.system.name, "test-box");
    assert_eq!(c.system.arch, "x86-64");
    assert_eq!(c.system.bench_cpu, 1);
    assert_eq!(c.system.cc, "gcc");
    assert_eq!(c.outputs, root.join("outputs/test-box"));
    assert_eq!(
        c.flags["guide"].flags,
        ["-O3", "-march=native", "-fomit-frame-pointer"]
    );
    assert_eq!(c.flags["harness-default"].flags, ["-O2"]);

    // Steps in declaration order, with params, needs and timeouts.
    let kinds: Vec<StepKind> = c.steps.iter().map(|s| s.kind).collect();
    use StepKind as K;
    assert_eq!(
        kinds,
        [
            K::Source,
            K::Build,
            K::Kat,
            K::Sizes,
            K::Survey,
            K::Time,
            K::Profile,
            K::Report
        ]
    );
    let step = |k: StepKind| c.steps.iter().find(|s| s.kind == k).unwrap();
    assert_eq!(step(StepKind::Source).timeout, Duration::from_secs(20 * 60));
    assert_eq!(step(StepKind::Source).params, StepParams::default());
    assert_eq!(step(StepKind::Build).timeout, Duration::from_secs(600));
    assert_eq!(step(StepKind::Build).params.flags.as_deref(), Some("guide"));
    assert_eq!(
        step(StepKind::Kat).params.kat_modes,
        [KatMode::Single, KatMode::All]
    );
    assert_eq!(step(StepKind::Kat).needs, [StepKind::Build]);
    let time = step(StepKind::Time);
    assert!(time.exclusive);
    assert_eq!(time.timeout, Duration::from_secs(5400));
    assert_eq!(time.params.ops, Op::ALL.to_vec());
    assert_eq!(time.params.trials, 7);
    assert_eq!(time.params.trial, Duration::from_millis(250));
    assert_eq!(time.params.min_iters, 30);
    assert_eq!(time.params.samples, 0);
    let profile = step(StepKind::Profile);
    assert_eq!(profile.params.ops, [Op::Enc]);
    assert_eq!(profile.params.iters, 3);
    assert!(!step(StepKind::Survey).exclusive);
    assert_eq!(
        step(StepKind::Report).needs,
        [
            StepKind::Kat,
            StepKind::Time,
            StepKind::Sizes,
            StepKind::Profile,
            StepKind::Survey
        ]
    );

    // Submissions sorted by id.
    let ids: Vec<&str> = c.submissions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["crate-kem", "toy"]);

    let ck = &c.submissions[0];
    match &ck.source {
        Source::Crate {
            name,
            version,
            root,
        } => assert_eq!(
            (name.as_str(), version.as_str(), root.as_str()),
            ("pqcrypto-mlkem", "0.1.1", "pqclean")
        ),
        other => panic!("expected a crate source, got {other:?}"),
    }
    assert_eq!(ck.meta.versions, ["clean"]);
    assert_eq!(
        ck.primitives.includes,
        ["common", "common/extra", "common/more"]
    );
    assert_eq!(ck.primitives.functions.len(), 1);
    assert_eq!(ck.kat.rng, KatRng::Nist);
    assert_eq!(ck.kat.all_count, 100);
    assert_eq!(
        ck.kat.manifest,
        root.join("submissions/crate-kem/kat.sha256")
    );
    assert_eq!(ck.sizes.len(), 2);
    assert_eq!(ck.sizes["Crate-KEM-512"].pk, Some(800));
    assert_eq!(ck.sizes["Other"].sk, None);
    assert_eq!(ck.sizes["Other"].ss, Some(4));
    assert_eq!(ck.instances.len(), 2);
    assert_eq!(ck.instances[0].id, "Crate-KEM-512");
    assert!(ck.instances[0].vars.is_empty());

    let toy = &c.submissions[1];
    assert_eq!(toy.manifest_path, root.join("submissions/toy/manifest.kdl"));
    assert_eq!(toy.dir, root.join("submissions/toy"));
    assert_eq!(toy.meta.algorithm, "Toy-KEM");
    assert_eq!(toy.meta.category.as_deref(), Some("public-key algorithm"));
    assert_eq!(toy.meta.function.as_deref(), Some("key encapsulation"));
    assert_eq!(toy.meta.notes, ["first note", "second note"]);
    assert_eq!(
        toy.meta.links,
        [(
            "Submission".to_string(),
            "https://example.org/toy".to_string()
        )]
    );
    // No `versions` node: the values of the `impl` matrix variable.
    assert_eq!(toy.meta.versions, ["clean", "avx2", "avx-512"]);
    match &toy.source {
        Source::Path { path } => assert_eq!(path, &root.join("submissions/toy/src")),
        other => panic!("expected a path source, got {other:?}"),
    }
    // Included primitives file.
    let p = &toy.primitives;
    assert_eq!(p.sources, ["common/fips202.c", "common/sha2.c"]);
    assert_eq!(p.includes, ["common"]);
    assert_eq!(p.headers, ["common/fips202.h", "common/sha2.h"]);
    let fns: Vec<(&str, &str)> = p
        .functions
        .iter()
        .map(|f| (f.family.as_str(), f.symbol.as_str()))
        .collect();
    assert_eq!(
        fns,
        [
            ("keccak", "shake128_absorb"),
            ("keccak", "shake256"),
            ("sha2", "sha256")
        ]
    );
    assert_eq!(p.drng.as_deref(), Some("PQCLEAN_randombytes"));
    assert_eq!(toy.kat.rng, KatRng::Hqc);
    assert_eq!(toy.kat.all_count, 10);
    assert_eq!(
        toy.kat.reference_dir,
        Some(root.join("submissions/toy/kat"))
    );
    assert_eq!(toy.sizes["Toy-1-clean"].ct, Some(768));
    assert_eq!(toy.sizes["Toy-3-avx2"].sk, None);

    // Matrix: 2 levels x 3 impls x 2 instance templates, first variable outermost.
    let ids: Vec<&str> = toy.instances.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "Toy-1-clean",
            "Toy-1-avx2",
            "Toy-1-avx-512",
            "Toy-3-clean",
            "Toy-3-avx2",
            "Toy-3-avx-512",
            "Toy-1-clean-ref",
            "Toy-1-avx2-ref",
            "Toy-1-avx512-ref",
            "Toy-3-clean-ref",
            "Toy-3-avx2-ref",
            "Toy-3-avx512-ref",
        ]
    );
    let inst = |id: &str| toy.instances.iter().find(|i| i.id == id).unwrap();
    let i = inst("Toy-3-avx2");
    assert_eq!(i.dir, "crypto_kem/toy-3/avx2");
    assert_eq!(i.namespace, "PQCLEAN_TOY3_AVX2_");
    assert_eq!(i.cflags, ["-mavx2", "-mbmi2"]);
    assert_eq!(i.requires_cpu, ["avx2"]);
    assert_eq!(i.exclude, ["*_test.c"]);
    assert!(i.extra_sources.is_empty());
    assert_eq!(
        i.vars,
        BTreeMap::from([
            ("impl".to_string(), "avx2".to_string()),
            ("level".to_string(), "3".to_string())
        ])
    );
    let clean = inst("Toy-1-clean");
    assert_eq!(clean.namespace, "PQCLEAN_TOY1_CLEAN_");
    assert!(clean.cflags.is_empty() && clean.requires_cpu.is_empty() && clean.exclude.is_empty());
    // Both `when` blocks apply to level 3 avx-512, in order; only the first to level 1.
    let big = inst("Toy-3-avx-512");
    assert_eq!(big.namespace, "PQCLEAN_TOY3_AVX-512_");
    assert_eq!(big.cflags, ["-mavx2", "-mbmi2", "-mavx512f"]);
    assert_eq!(big.requires_cpu, ["avx2", "avx512f"]);
    assert_eq!(big.extra_sources, ["common/keccak8x.c"]);
    assert_eq!(inst("Toy-1-avx-512").cflags, ["-mavx2", "-mbmi2"]);
    // Filters and literal braces in the second template.
    let r = inst("Toy-1-avx512-ref");
    assert_eq!(r.dir, "ref/avx_512");
    assert_eq!(r.namespace, "TOY_{x}_1_");
}

#[test]
fn public_helpers() {
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert!(parse_duration("5 minutes").is_err());
    let vars = BTreeMap::from([("impl".to_string(), "clean".to_string())]);
    assert_eq!(expand_template("X_{impl:upper}", &vars).unwrap(), "X_CLEAN");
    assert!(expand_template("{lvl}", &vars)
        .unwrap_err()
        .contains("undefined template variable `lvl`"));
}
