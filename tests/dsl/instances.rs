//! Time layouts, per-instance settings and flag profiles.

use super::*;

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
