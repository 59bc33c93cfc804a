//! DSL tests: loading the valid fixture campaign, one snapshot per error kind, the
//! "all problems at once" fixture, and a no-panic property test over mutated inputs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ngcc_pipe::dsl::{
    expand_template, load_campaign, load_campaign_with, parse_duration, Diagnostics, MemFs,
};
use ngcc_pipe::model::{KatMode, KatRng, Op, Source, StepKind, StepParams};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/dsl")
        .join(rel)
}

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

// ---------------------------------------------------------------------------------------
// All problems at once
// ---------------------------------------------------------------------------------------

/// Runs with the package root as working directory, so paths show relative to it.
fn render_fixture(rel: &str) -> (Diagnostics, String) {
    let d = load_campaign(Path::new("tests/fixtures/dsl").join(rel).as_path())
        .expect_err("the fixture has errors");
    let text = d.render(false);
    (d, text)
}

#[test]
fn four_errors_reported_at_once_with_locations() {
    let (d, text) = render_fixture("four-errors/pipelines/campaign.kdl");
    let messages: Vec<&str> = d.iter().map(|x| x.message()).collect();
    assert_eq!(d.len(), 4, "{text}");
    assert!(
        messages.contains(&"dependency cycle: `kat -> time -> kat`"),
        "{text}"
    );
    assert!(
        messages.contains(&"unknown node `algoritm` in `submission \"bad\"`"),
        "{text}"
    );
    assert!(messages
        .iter()
        .any(|m| m.starts_with("undefined template variable `lvl`")));
    assert!(
        messages.contains(&"duplicate instance id `Bad-512-clean`"),
        "{text}"
    );
    let locs: Vec<String> = d
        .iter()
        .map(|x| x.location().unwrap().to_string())
        .collect();
    assert_eq!(
        locs,
        [
            "tests/fixtures/dsl/four-errors/pipelines/campaign.kdl:8:27",
            "tests/fixtures/dsl/four-errors/submissions/bad/manifest.kdl:2:5",
            "tests/fixtures/dsl/four-errors/submissions/bad/manifest.kdl:6:55",
            "tests/fixtures/dsl/four-errors/submissions/bad/manifest.kdl:7:14",
        ]
    );
    for l in &locs {
        assert!(text.contains(&format!("[{l}]")), "{l} not in\n{text}");
    }
    insta::assert_snapshot!("four_errors", text);
}

// ---------------------------------------------------------------------------------------
// One snapshot per error kind (in memory)
// ---------------------------------------------------------------------------------------

const PIPELINE: &str = r#"system "box" {
    bench-cpu 1
}
flags "guide" "-O3"
submissions "../submissions/*/manifest.kdl"
outputs "../outputs"
step "build" flags="guide"
step "kat" needs="build"
step "time" needs="kat" trials=5 trial="1s"
"#;

const MANIFEST: &str = r#"submission "a" {
    algorithm "A-KEM"
    source path="src"
    kat manifest="kat.sha256"
    matrix level="1 3" impl="clean avx2"
    instance "A-{level}-{impl}" dir="a-{level}/{impl}" namespace="A{level}_{impl:upper}_"
}
"#;

/// Expected KAT hashes of the base campaign's four instances.
const KAT_SHA256: &str = "\
0000000000000000000000000000000000000000000000000000000000000001  A-1-clean
0000000000000000000000000000000000000000000000000000000000000002  A-1-avx2
0000000000000000000000000000000000000000000000000000000000000003  A-3-clean
0000000000000000000000000000000000000000000000000000000000000004  A-3-avx2
";

/// A small valid campaign in memory: /c/pipelines/p.kdl and /c/submissions/a/.
fn campaign_fs(pipeline: &str, manifest: &str) -> MemFs {
    let mut fs = MemFs::new();
    fs.add_file("/c/pipelines/p.kdl", pipeline)
        .add_file("/c/submissions/a/manifest.kdl", manifest)
        .add_file("/c/submissions/a/kat.sha256", KAT_SHA256)
        .add_dir("/c/submissions/a/src");
    fs
}

/// Loads the campaign and returns the rendered problems; asserts how many there are.
fn errors_of(fs: &MemFs, expected: usize) -> String {
    let d = load_campaign_with(Path::new("/c/pipelines/p.kdl"), fs).expect_err("expected problems");
    let text = d.render(false);
    assert_eq!(d.len(), expected, "{text}");
    for x in &d {
        let loc = x.location().expect("every problem points into a file");
        assert!(
            text.contains(&format!("[{loc}]")),
            "{loc} missing in\n{text}"
        );
    }
    text
}

/// Replaces `from` by `to` in `text`, asserting that `from` is there.
fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "{from:?} not in the base text");
    text.replacen(from, to, 1)
}

#[test]
fn base_campaign_is_valid() {
    let c = load_campaign_with(
        Path::new("/c/pipelines/p.kdl"),
        &campaign_fs(PIPELINE, MANIFEST),
    )
    .unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(c.submissions[0].instances.len(), 4);
    assert_eq!(c.outputs, PathBuf::from("/c/outputs"));
    assert_eq!(c.system.isolation, ngcc_pipe::model::Isolation::Core);
    let machine = edit(
        PIPELINE,
        "    bench-cpu 1\n",
        "    bench-cpu 1\n    isolation \"machine\"\n",
    );
    let c = load_campaign_with(
        Path::new("/c/pipelines/p.kdl"),
        &campaign_fs(&machine, MANIFEST),
    )
    .unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(c.system.isolation, ngcc_pipe::model::Isolation::Machine);
    // issue #27 item 5: a campaign is a measured system unless it says it is a smoke run
    assert_eq!(c.system.role, ngcc_pipe::model::Role::Measure);
    let smoke = edit(
        PIPELINE,
        "    bench-cpu 1\n",
        "    bench-cpu 1\n    role \"smoke\"\n",
    );
    let c = load_campaign_with(
        Path::new("/c/pipelines/p.kdl"),
        &campaign_fs(&smoke, MANIFEST),
    )
    .unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(c.system.role, ngcc_pipe::model::Role::Smoke);
    assert_eq!(c.system.executor, ngcc_pipe::model::Executor::Local);
    let slurm = edit(
        PIPELINE,
        "    bench-cpu 1\n",
        "    bench-cpu 1\n    executor \"slurm\" {\n        partition \"ngcc\"\n        qos \"short\"\n    }\n",
    );
    let c = load_campaign_with(
        Path::new("/c/pipelines/p.kdl"),
        &campaign_fs(&slurm, MANIFEST),
    )
    .unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(
        c.system.executor,
        ngcc_pipe::model::Executor::Slurm(ngcc_pipe::model::SlurmOptions {
            partition: Some("ngcc".into()),
            qos: Some("short".into()),
            ..Default::default()
        })
    );
}

macro_rules! error_case {
    ($name:ident, $expected:expr, pipeline: ($pf:expr, $pt:expr), manifest: ($mf:expr, $mt:expr)) => {
        #[test]
        fn $name() {
            let fs = campaign_fs(&edit(PIPELINE, $pf, $pt), &edit(MANIFEST, $mf, $mt));
            insta::assert_snapshot!(stringify!($name), errors_of(&fs, $expected));
        }
    };
    ($name:ident, $expected:expr, pipeline: ($pf:expr, $pt:expr)) => {
        error_case!($name, $expected, pipeline: ($pf, $pt), manifest: ("", ""));
    };
    ($name:ident, $expected:expr, manifest: ($mf:expr, $mt:expr)) => {
        error_case!($name, $expected, pipeline: ("", ""), manifest: ($mf, $mt));
    };
}

error_case!(kdl_syntax_error, 1, manifest: ("\"A-KEM\"", "\"A-KEM"));
error_case!(kdl_syntax_error_in_pipeline, 1, pipeline: ("bench-cpu 1", "bench-cpu 1.0.0"));
error_case!(unknown_node, 1, manifest: ("algorithm", "algoritm"));
error_case!(unknown_node_in_pipeline, 1, pipeline: ("outputs", "output"));
error_case!(unknown_property, 1, pipeline: ("flags=\"guide\"", "flag=\"guide\""));
error_case!(property_of_other_step, 1, pipeline: ("step \"kat\" needs=\"build\"", "step \"kat\" needs=\"build\" iters=3"));
error_case!(wrong_value_type, 1, pipeline: ("trials=5", "trials=\"5\""));
error_case!(wrong_value_type_bool, 1, pipeline: ("trial=\"1s\"", "trial=\"1s\" exclusive=\"yes\""));
error_case!(missing_required_node, 1, manifest: ("    algorithm \"A-KEM\"\n", ""));
error_case!(missing_required_property, 1, manifest: (" namespace=\"A{level}_{impl:upper}_\"", ""));
error_case!(missing_bench_cpu, 1, pipeline: ("    bench-cpu 1\n", ""));
error_case!(undefined_template_variable, 1, manifest: ("a-{level}", "a-{lvl}"));
error_case!(bad_template_syntax, 1, manifest: ("A{level}_", "A{level_"));
error_case!(bad_template_filter, 1, manifest: ("{impl:upper}", "{impl:uper}"));
error_case!(bad_duration, 1, pipeline: ("trial=\"1s\"", "trial=\"1sec\""));
error_case!(unknown_step_in_needs, 1, pipeline: ("needs=\"build\"", "needs=\"biuld\""));
error_case!(undeclared_step_in_needs, 1, pipeline: ("needs=\"build\"", "needs=\"build sizes\""));
error_case!(unknown_step_kind, 1, pipeline: ("step \"time\"", "step \"tme\""));
error_case!(duplicate_step, 1, pipeline: ("step \"kat\" needs=\"build\"", "step \"kat\" needs=\"build\"\nstep \"build\" flags=\"guide\""));
error_case!(dependency_cycle, 1, pipeline: ("step \"build\" flags=\"guide\"", "step \"build\" flags=\"guide\" needs=\"time\""));
error_case!(dependency_cycle_self, 1, pipeline: ("needs=\"build\"", "needs=\"build kat\""));
error_case!(unknown_flags_profile, 1, pipeline: ("flags=\"guide\"", "flags=\"gide\""));
error_case!(duplicate_instance_ids, 1, manifest: ("}\n", "    instance \"A-3-avx2\" dir=\"x\" namespace=\"X_\"\n}\n"));
error_case!(duplicate_instance_ids_from_matrix, 1, manifest: ("\"A-{level}-{impl}\"", "\"A-{level}\""));
error_case!(glob_matching_nothing, 1, pipeline: ("*/manifest.kdl", "*/manifst.kdl"));
error_case!(missing_source_path, 1, manifest: ("path=\"src\"", "path=\"sources\""));
error_case!(missing_kat_manifest_file, 1, manifest: ("manifest=\"kat.sha256\"", "manifest=\"kat.sha265\""));
error_case!(unknown_when_variable, 1, manifest: ("}\n", "    when imp=\"avx2\" {\n        cflags \"-mavx2\"\n    }\n}\n"));
error_case!(unknown_isolation, 1, pipeline: ("    bench-cpu 1\n", "    bench-cpu 1\n    isolation \"full\"\n"));
error_case!(unknown_role, 1, pipeline: ("    bench-cpu 1\n", "    bench-cpu 1\n    role \"trial\"\n"));
error_case!(unknown_cpu_feature_of_target, 1, pipeline: ("    bench-cpu 1\n", "    bench-cpu 1\n    cpu-features \"fp\" \"asmid\"\n"));
error_case!(unknown_executor, 1, pipeline: ("    bench-cpu 1\n", "    bench-cpu 1\n    executor \"k8s\"\n"));
error_case!(unknown_executor_property, 1, pipeline: ("    bench-cpu 1\n", "    bench-cpu 1\n    executor \"slurm\" {\n        partiton \"ngcc\"\n    }\n"));
error_case!(unknown_when_value, 1, manifest: ("}\n", "    when impl=\"avx\" {\n        cflags \"-mavx2\"\n    }\n}\n"));
// Hostile or careless input (issue #10 item 5-6, #12 item 1).
error_case!(submission_id_with_dots, 1, manifest: ("submission \"a\"", "submission \"..\""));
error_case!(instance_id_with_slash, 1, manifest: ("\"A-{level}-{impl}\"", "\"A-{level}/{impl}\""));
error_case!(instance_id_traversal, 1, manifest: ("\"A-{level}-{impl}\"", "\"..{level}{impl}\""));
error_case!(crate_version_traversal, 1, manifest: ("path=\"src\"", "crate=\"pqcrypto-mlkem\" version=\"1/../../x\""));
error_case!(crate_name_invalid, 1, manifest: ("path=\"src\"", "crate=\"../x\" version=\"0.1.1\""));
error_case!(crate_root_outside, 1, manifest: ("path=\"src\"", "crate=\"pqcrypto-mlkem\" version=\"0.1.1\" root=\"../..\""));
error_case!(cflags_wrapper, 2, manifest: ("}\n", "    when impl=\"avx2\" {\n        cflags \"-wrapper\" \"/bin/sh,-c,touch /tmp/x\"\n    }\n}\n"));
error_case!(cflags_plugin_and_specs, 3, manifest: ("}\n", "    when impl=\"avx2\" {\n        cflags \"-mavx2\" \"-fplugin=./p.so\" \"-specs=x\" \"@opts\"\n    }\n}\n"));
error_case!(flags_profile_linker_option, 1, pipeline: ("\"-O3\"", "\"-O3 -B/tmp/evil\""));
error_case!(catalog_outside_manifest_folder, 1, manifest: ("    kat", "    sizes catalog=\"/etc/passwd\"\n    kat"));
error_case!(kat_manifest_outside_manifest_folder, 1, manifest: ("manifest=\"kat.sha256\"", "manifest=\"../../../etc/shadow\""));
error_case!(absurd_trial, 1, pipeline: ("trial=\"1s\"", "trial=\"1000000h\""));
error_case!(absurd_timeout, 1, pipeline: ("step \"kat\" needs=\"build\"", "step \"kat\" needs=\"build\" timeout=\"9000h\""));
error_case!(submissions_root_missing, 1, pipeline: ("outputs", "submissions-root \"../nope\"\noutputs"));
error_case!(bad_nist_category, 1, manifest: ("}\n", "    nist-category 7\n}\n"));
error_case!(nist_category_unknown_value, 1, manifest: ("}\n", "    nist-category 3 level=\"2\"\n}\n"));
error_case!(nist_category_twice, 1, manifest: ("}\n", "    nist-category 1\n    nist-category 3 level=\"3\"\n}\n"));

// NIST-round packages (issue 25): paths confined to the source root, library names,
// no namespace under `api "nist"`.
error_case!(when_sources_absolute, 1, manifest: ("}\n", "    when impl=\"avx2\" {\n        sources \"/etc/hostname.c\"\n    }\n}\n"));
error_case!(when_sources_climbing_out, 1, manifest: ("}\n", "    when impl=\"avx2\" {\n        sources \"../../../../../../etc/hostname.c\"\n    }\n}\n"));
error_case!(instance_dir_outside_source, 1, manifest: ("dir=\"a-{level}/{impl}\"", "dir=\"../a-{level}/{impl}\""));
error_case!(link_linker_option, 1, manifest: ("}\n", "    link \"-lcrypto\"\n}\n"));
error_case!(link_library_path, 1, manifest: ("}\n", "    when impl=\"avx2\" {\n        link \"/usr/lib/x86_64-linux-gnu/libcrypto.so\"\n    }\n}\n"));
error_case!(link_two_libraries_in_one, 1, manifest: ("}\n", "    link \"crypto\" \"gmp\"\n}\n"));
error_case!(namespace_under_api_nist, 1, manifest: ("}\n", "    api \"nist\"\n}\n"));
error_case!(kat_submitted_outside_source, 1, manifest: ("manifest=\"kat.sha256\"", "manifest=\"kat.sha256\" submitted=\"../KAT/{level}/PQCkemKAT_{sk}.rsp\""));
error_case!(kat_submitted_unknown_variable, 1, manifest: ("manifest=\"kat.sha256\"", "manifest=\"kat.sha256\" submitted=\"KAT/{param}/PQCkemKAT_{sk}.rsp\""));
error_case!(source_path_and_archive, 1, manifest: ("path=\"src\"", "path=\"src\" archive=\"p.tar.gz\" sha256=\"00\""));

#[test]
fn nist_package_manifest_lowers() {
    let manifest = edit(
        &edit(
            MANIFEST,
            " namespace=\"A{level}_{impl:upper}_\"",
            "",
        ),
        "    kat manifest=\"kat.sha256\"\n",
        "    api \"nist\"\n    exclude \"test_*.c\"\n    link \"crypto\"\n    link \"Source\" \"https://example.org\"\n    kat manifest=\"kat.sha256\" submitted=\"KAT/{level}/PQCkemKAT_{sk}.rsp\"\n    when level=\"3\" {\n        link \"gmp\"\n        kat-submitted \"KAT/three/PQCkemKAT_{sk}.rsp\"\n        sources \"common/../shared/x.c\"\n        dir \"extra/{impl}/{level}\"\n    }\n",
    );
    let c = load_campaign_with(
        Path::new("/c/pipelines/p.kdl"),
        &campaign_fs(PIPELINE, &manifest),
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let sub = &c.submissions[0];
    assert_eq!(sub.api, ngcc_pipe::model::Api::Nist);
    assert!(sub.kat.submitted);
    assert_eq!(
        sub.meta.links,
        [("Source".to_string(), "https://example.org".to_string())]
    );
    let one = &sub.instances[0];
    assert_eq!((one.id.as_str(), one.namespace.as_str()), ("A-1-clean", ""));
    assert_eq!(one.exclude, ["test_*.c"]);
    assert_eq!(one.libraries, ["crypto"]);
    assert_eq!(
        one.kat_submitted.as_deref(),
        Some("KAT/1/PQCkemKAT_{sk}.rsp")
    );
    let three = &sub.instances[2];
    assert_eq!(three.id, "A-3-clean");
    assert_eq!(three.libraries, ["crypto", "gmp"]);
    assert_eq!(
        three.kat_submitted.as_deref(),
        Some("KAT/three/PQCkemKAT_{sk}.rsp")
    );
    assert_eq!(three.extra_sources, ["common/../shared/x.c"]);
    // `dir` in a `when` block replaces the instance line's `dir=`.
    assert_eq!(
        (one.dir.as_str(), three.dir.as_str()),
        ("a-1/clean", "extra/clean/3")
    );
    assert_eq!(sub.instances[3].dir, "extra/avx2/3");
    // Where each library is named, for `check --deep`.
    let at: Vec<(&str, usize, usize)> = three
        .origin
        .links
        .iter()
        .map(|(l, p)| (l.as_str(), p.line, p.col))
        .collect();
    assert_eq!(at, [("crypto", 6, 10), ("gmp", 10, 14)]);
}

error_case!(when_dir_outside_source, 1, manifest: ("}\n", "    when level=\"3\" {\n        dir \"../{impl}\"\n    }\n}\n"));

error_case!(ct_benign_without_reason, 1, manifest: ("}\n", "    ct-benign \"rej_uniform\"\n}\n"));
error_case!(ct_benign_empty_reason, 1, manifest: ("}\n", "    ct-benign \"rej_uniform\" reason=\" \"\n}\n"));
error_case!(ct_benign_not_a_function, 1, manifest: ("}\n", "    ct-benign \"indcpa.c:128\" reason=\"public seed\"\n}\n"));
error_case!(ct_benign_twice, 1, manifest: ("}\n", "    ct-benign \"rej_uniform\" reason=\"a\"\n    ct-benign \"rej_uniform\" reason=\"b\"\n}\n"));
error_case!(ct_benign_unknown_property, 1, manifest: ("}\n", "    ct-benign \"rej_uniform\" reason=\"a\" because=\"b\"\n}\n"));

#[test]
fn ct_benign_declarations_are_kept_in_order() {
    let m = edit(
        MANIFEST,
        "}\n",
        "    ct-benign \"rej_uniform\" reason=\"rejection sampling on the public seed rho\"\n    ct-benign \"gen_matrix\" reason=\"expands the public matrix\"\n}\n",
    );
    let c = load_campaign_with(Path::new("/c/pipelines/p.kdl"), &campaign_fs(PIPELINE, &m))
        .unwrap_or_else(|d| panic!("{d}"));
    let b: Vec<(&str, &str)> = c.submissions[0]
        .ct_benign
        .iter()
        .map(|b| (b.function.as_str(), b.reason.as_str()))
        .collect();
    assert_eq!(
        b,
        [
            ("rej_uniform", "rejection sampling on the public seed rho"),
            ("gen_matrix", "expands the public matrix")
        ]
    );
}

#[test]
fn nist_category_by_matrix_value() {
    let m = edit(
        MANIFEST,
        "}\n",
        "    nist-category 1 level=\"1\"\n    nist-category 3 level=\"3\" impl=\"clean\"\n}\n",
    );
    let c = load_campaign_with(Path::new("/c/pipelines/p.kdl"), &campaign_fs(PIPELINE, &m))
        .unwrap_or_else(|d| panic!("{d}"));
    let got: Vec<(&str, Option<u8>)> = c.submissions[0]
        .instances
        .iter()
        .map(|i| (i.id.as_str(), i.nist_category))
        .collect();
    assert_eq!(
        got,
        [
            ("A-1-clean", Some(1)),
            ("A-1-avx2", Some(1)),
            ("A-3-clean", Some(3)),
            ("A-3-avx2", None)
        ]
    );
}

#[test]
fn duplicate_submission_ids() {
    let mut fs = campaign_fs(PIPELINE, MANIFEST);
    fs.add_file(
        "/c/submissions/b/manifest.kdl",
        edit(MANIFEST, "path=\"src\"", "crate=\"x\" version=\"1.0.0\""),
    )
    .add_file("/c/submissions/b/kat.sha256", "");
    insta::assert_snapshot!("duplicate_submission_ids", errors_of(&fs, 1));
}

#[test]
fn errors_in_included_primitives_point_into_that_file() {
    let mut fs = campaign_fs(
        &edit(
            PIPELINE,
            "outputs",
            "submissions-root \"../submissions\"\noutputs",
        ),
        &edit(
            MANIFEST,
            "    kat",
            "    primitives include=\"../prims.kdl\"\n    kat",
        ),
    );
    fs.add_file(
        "/c/submissions/prims.kdl",
        "primitives {\n    sources \"a.c\"\n    hash \"sha3_256\"\n    drgn \"x\"\n}\n",
    );
    // A second manifest including the same file: its problems are reported once.
    fs.add_file(
        "/c/submissions/b/manifest.kdl",
        edit(
            &edit(MANIFEST, "\"a\"", "\"b\""),
            "    kat",
            "    primitives include=\"../prims.kdl\"\n    kat",
        ),
    )
    .add_file("/c/submissions/b/kat.sha256", "")
    .add_dir("/c/submissions/b/src");
    let text = errors_of(&fs, 2);
    assert!(text.contains("[/c/submissions/prims.kdl:3:5]"), "{text}");
    insta::assert_snapshot!("included_primitives_errors", text);
}

#[test]
fn missing_primitives_file_and_bad_catalog() {
    let m = edit(
        MANIFEST,
        "    kat",
        "    primitives include=\"nope.kdl\"\n    sizes catalog=\"sizes.csv\"\n    kat",
    );
    let mut fs = campaign_fs(PIPELINE, &m);
    fs.add_file(
        "/c/submissions/a/sizes.csv",
        "instance,pk,sk,ct,ss\nA-1-clean,800,x,768,32\nA-3-clean,1,2\n",
    );
    insta::assert_snapshot!("primitives_and_catalog_errors", errors_of(&fs, 3));
}

#[test]
fn many_problems_in_many_files_at_once() {
    // Every file's problems are collected: pipeline, two manifests.
    let p = edit(
        &edit(PIPELINE, "trials=5", "trials=0"),
        "step \"time\"",
        "step \"time\" foo=1",
    );
    let mut fs = campaign_fs(&p, &edit(MANIFEST, "algorithm", "algoritm"));
    fs.add_file(
        "/c/submissions/b/manifest.kdl",
        "submission \"b\" {\n    source path=\"none\"\n}\n",
    );
    let d = load_campaign_with(Path::new("/c/pipelines/p.kdl"), &fs).unwrap_err();
    let text = d.to_string();
    assert_eq!(d.len(), 7, "{text}");
    insta::assert_snapshot!("many_problems", text);
}

#[test]
fn kdl_v1_keywords_get_a_hint() {
    let fs = campaign_fs(
        &edit(PIPELINE, "trials=5", "trials=5 exclusive=true"),
        MANIFEST,
    );
    let text = errors_of(&fs, 1);
    assert!(
        text.contains("KDL v2 writes this keyword as `#true`"),
        "{text}"
    );
}

#[test]
fn colour_rendering_and_display() {
    let fs = campaign_fs(
        &edit(PIPELINE, "needs=\"build\"", "needs=\"biuld\""),
        MANIFEST,
    );
    let d = load_campaign_with(Path::new("/c/pipelines/p.kdl"), &fs).unwrap_err();
    let coloured = d.render(true);
    assert!(coloured.contains('\u{1b}'), "{coloured}");
    assert!(coloured.contains("/c/pipelines/p.kdl:8:19"));
    assert!(!d.to_string().contains('\u{1b}'));
    assert_eq!(d.to_string(), d.render(false));
    let first = d.iter().next().unwrap();
    assert_eq!(first.help_text(), Some("did you mean `build`?"));
    assert_eq!(first.file(), Some(Path::new("/c/pipelines/p.kdl")));
}

#[test]
fn unreadable_pipeline_is_a_diagnostic() {
    let d = load_campaign_with(Path::new("/nowhere.kdl"), &MemFs::new()).unwrap_err();
    assert_eq!(d.len(), 1);
    assert!(d
        .to_string()
        .contains("cannot read pipeline `/nowhere.kdl`"));
}

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

// Flag-profile matrix and per-instance settings (issue #15).
error_case!(unknown_flags_profile_in_a_list, 1, pipeline: ("flags=\"guide\"", "flags=\"guide gide\""));
error_case!(matrix_variable_flags_is_reserved, 1, manifest: ("impl=\"clean avx2\"", "impl=\"clean avx2\" flags=\"a\""));
error_case!(instances_setting_nothing, 1, pipeline: ("step \"kat\" needs=\"build\"", "step \"kat\" needs=\"build\" {\n    instances \"a/*\"\n}"));
error_case!(instances_all_count_on_time, 1, pipeline: ("trial=\"1s\"", "trial=\"1s\" {\n    instances \"a/A-3-*\" all-count=2\n}"));

// `layouts` on time: at most 8, and above 1 only in the timing session (issue #9).
error_case!(layouts_above_the_maximum, 1, pipeline: ("trial=\"1s\"", "trial=\"1s\" exclusive=#true layouts=9"));
error_case!(layouts_outside_the_session, 1, pipeline: ("trial=\"1s\"", "trial=\"1s\" layouts=4"));

#[test]
fn time_layouts_are_read_and_default_to_one() {
    let step = |pipeline: &str| {
        let c = load_campaign_with(
            Path::new("/c/pipelines/p.kdl"),
            &campaign_fs(pipeline, MANIFEST),
        )
        .unwrap_or_else(|d| panic!("{d}"));
        let time = c.steps.iter().find(|s| s.kind == StepKind::Time).unwrap();
        time.params.layouts
    };
    assert_eq!(step(PIPELINE), 1);
    let four = edit(
        PIPELINE,
        "trial=\"1s\"",
        "trial=\"1s\" exclusive=#true layouts=4",
    );
    assert_eq!(step(&four), 4);
}

#[test]
fn profile_iters_and_time_samples_per_instance() {
    let pipeline = edit(
        PIPELINE,
        "step \"time\" needs=\"kat\" trials=5 trial=\"1s\"",
        "step \"time\" needs=\"kat\" trials=5 trial=\"1s\" samples=101 {\n    \
         instances \"a/A-3-*\" samples=11\n}\n\
         step \"profile\" needs=\"kat\" iters=20 {\n    instances \"a/A-3-clean\" iters=5\n}",
    );
    let c = load_campaign_with(
        Path::new("/c/pipelines/p.kdl"),
        &campaign_fs(&pipeline, MANIFEST),
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let step = |k| c.steps.iter().find(|s| s.kind == k).unwrap();
    let (time, profile) = (step(StepKind::Time), step(StepKind::Profile));
    assert_eq!(time.samples_for("a", "A-3-avx2"), 11);
    assert_eq!(time.samples_for("a", "A-1-avx2"), 101);
    assert_eq!(profile.iters_for("a", "A-3-clean"), 5);
    assert_eq!(profile.iters_for("a", "A-3-avx2"), 20);
    // `iters` belongs to profile, `samples` to time: elsewhere an error at the property.
    for (from, to) in [("iters=5", "samples=5"), ("samples=11", "iters=11")] {
        let bad = pipeline.replacen(from, to, 1);
        let d = load_campaign_with(
            Path::new("/c/pipelines/p.kdl"),
            &campaign_fs(&bad, MANIFEST),
        )
        .expect_err("a setting of another step kind");
        let text = d.to_string();
        let prop = to.split('=').next().unwrap();
        assert!(
            text.contains(&format!("unknown property `{prop}` on `instances`")),
            "{text}"
        );
    }
}

#[test]
fn two_flag_profiles_double_the_instances_and_instances_blocks_apply() {
    let pipeline = edit(
        &edit(
            PIPELINE,
            "flags \"guide\" \"-O3\"\n",
            "flags \"guide\" \"-O3\"\nflags \"O2\" \"-O2\"\n",
        ),
        "step \"build\" flags=\"guide\"\nstep \"kat\" needs=\"build\"",
        "step \"build\" flags=\"guide O2\"\nstep \"kat\" needs=\"build\" modes=\"single\" {\n    \
         instances \"a/A-3-*\" modes=\"single all\" all-count=3 timeout=\"2h\"\n}",
    );
    let c = load_campaign_with(
        Path::new("/c/pipelines/p.kdl"),
        &campaign_fs(&pipeline, MANIFEST),
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let ids: Vec<&str> = c.submissions[0]
        .instances
        .iter()
        .map(|i| i.id.as_str())
        .collect();
    assert_eq!(
        ids,
        [
            "A-1-clean@guide",
            "A-1-clean@O2",
            "A-1-avx2@guide",
            "A-1-avx2@O2",
            "A-3-clean@guide",
            "A-3-clean@O2",
            "A-3-avx2@guide",
            "A-3-avx2@O2"
        ]
    );
    let i = &c.submissions[0].instances[5];
    assert_eq!((i.profile(), i.manifest_id()), (Some("O2"), "A-3-clean"));
    let kat = c.steps.iter().find(|s| s.kind == StepKind::Kat).unwrap();
    let s = kat.settings_for("a", &i.id).expect("A-3-* matches");
    assert_eq!(s.all_count, Some(3));
    assert_eq!(kat.timeout_for("a", Some(&i.id)), Duration::from_secs(7200));
    assert_eq!(kat.timeout_for("a", Some("A-1-clean@O2")), kat.timeout);
    assert!(kat.settings_for("a", "A-1-clean@O2").is_none());
}
