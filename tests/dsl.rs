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

// Flag-profile matrix and per-instance settings (issue #15).
error_case!(unknown_flags_profile_in_a_list, 1, pipeline: ("flags=\"guide\"", "flags=\"guide gide\""));
error_case!(matrix_variable_flags_is_reserved, 1, manifest: ("impl=\"clean avx2\"", "impl=\"clean avx2\" flags=\"a\""));
error_case!(instances_setting_nothing, 1, pipeline: ("step \"kat\" needs=\"build\"", "step \"kat\" needs=\"build\" {\n    instances \"a/*\"\n}"));
error_case!(instances_all_count_on_time, 1, pipeline: ("trial=\"1s\"", "trial=\"1s\" {\n    instances \"a/A-3-*\" all-count=2\n}"));

// `layouts` on time: at most 8, and above 1 only in the timing session (issue #9).
error_case!(layouts_above_the_maximum, 1, pipeline: ("trial=\"1s\"", "trial=\"1s\" exclusive=#true layouts=9"));
error_case!(layouts_outside_the_session, 1, pipeline: ("trial=\"1s\"", "trial=\"1s\" layouts=4"));

#[path = "dsl/instances.rs"]
mod instances;
#[path = "dsl/robust.rs"]
mod robust;
#[path = "dsl/valid.rs"]
mod valid;

/// Issue #39 item 4: `time cells="best"` measures each implementation's best cell only; the
/// choice reads the counted instructions, so it needs a `count` step of enc and dec.
#[test]
fn best_cell_needs_a_count_of_enc_and_dec() {
    let best = edit(PIPELINE, "trial=\"1s\"", "trial=\"1s\" cells=\"best\"");
    let text = errors_of(&campaign_fs(&best, MANIFEST), 1);
    assert!(
        text.contains("no `count` step counts enc and dec") && text.contains("p.kdl:9:"),
        "{text}"
    );
    let bad = edit(PIPELINE, "trial=\"1s\"", "trial=\"1s\" cells=\"fastest\"");
    let text = errors_of(&campaign_fs(&bad, MANIFEST), 1);
    assert!(text.contains("expected `all` or `best`"), "{text}");

    let counted = format!("{best}step \"count\" needs=\"build\" ops=\"keygen enc dec\"\n");
    let c = load_campaign_with(
        Path::new("/c/pipelines/p.kdl"),
        &campaign_fs(&counted, MANIFEST),
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let time = c.steps.iter().find(|s| s.kind.name() == "time").unwrap();
    assert!(time.params.best_cell);
}
