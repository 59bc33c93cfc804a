//! Real KEMs, and hostile input refused by `check` and `run` with nothing written.

use super::*;

// ---------------------------------------------------------------------------------------
// 5. Real KEMs
// ---------------------------------------------------------------------------------------

fn cpu_has(flags: &[String]) -> bool {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let have: BTreeSet<&str> = info
        .lines()
        .find(|l| l.starts_with("flags"))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    flags.iter().all(|f| have.contains(f.as_str()))
}

/// `nistkat-sha256: <hex>` from a PQClean META.yml.
fn meta_nistkat(meta: &Path) -> String {
    let text = std::fs::read_to_string(meta).unwrap_or_else(|e| panic!("{}: {e}", meta.display()));
    text.lines()
        .find_map(|l| l.strip_prefix("nistkat-sha256:"))
        .unwrap_or_else(|| panic!("no nistkat-sha256 in {}", meta.display()))
        .trim()
        .to_string()
}

/// Every example instance passes its single and all KATs; each single hash equals the
/// one in the submission's `kat.sha256` and, independently, PQClean's META.yml.
#[test]
fn example_kems_pass_their_kats() {
    if !require_crates(&[MLKEM_CRATE, FRODO_CRATE]) {
        return;
    }
    let tmp = tempdir();
    let out = tmp.path().join("out");
    let r = run(&[
        "run",
        "pipelines/x86_1.kdl",
        "--only",
        "*/kat",
        "--outputs",
        &s(&out),
    ]);
    eprintln!("KAT-only run of the example campaign: {:.1} s", r.secs);
    assert_eq!(r.code, 0, "{}", r.show());

    let campaign = ngcc_pipe::dsl::load_campaign(&repo().join("pipelines/x86_1.kdl"))
        .unwrap_or_else(|d| panic!("{d}"));
    let mut c = Checks::default();
    let mut seen = BTreeSet::new();
    for sub in &campaign.submissions {
        let source = rec(&out, StepKind::Source, &sub.id, None, None);
        let root = match &source.data {
            Some(StepData::Source(sd)) => sd.root.clone(),
            other => panic!("{}: no source data {other:?}", sub.id),
        };
        let sums_text = std::fs::read_to_string(&sub.kat.manifest).unwrap();
        let sums: BTreeMap<&str, &str> = sums_text
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                Some((it.nth(1)?, l.split_whitespace().next()?))
            })
            .collect();
        for inst in &sub.instances {
            seen.insert((sub.id.clone(), inst.id.clone()));
            let kat = rec(&out, StepKind::Kat, &sub.id, Some(&inst.id), None);
            if !cpu_has(&inst.requires_cpu) {
                c.check(kat.status == Status::Unsupported, || {
                    format!(
                        "{}: {:?} on a CPU without {:?}",
                        kat.id, kat.status, inst.requires_cpu
                    )
                });
                continue;
            }
            c.check(kat.status == Status::Ok && kat.reason.is_none(), || {
                format!("{}: {:?}: {:?}", kat.id, kat.status, kat.reason)
            });
            let Some(StepData::Kat(k)) = &kat.data else {
                c.0.push(format!("{}: no KAT data", kat.id));
                continue;
            };
            let modes: BTreeSet<KatMode> = k.modes.iter().map(|m| m.mode).collect();
            c.check(modes == [KatMode::Single, KatMode::All].into(), || {
                format!("{}: modes {modes:?}", kat.id)
            });
            for m in &k.modes {
                c.check(m.status == KatStatus::Pass, || {
                    format!("{} {:?}: {:?} {:?}", kat.id, m.mode, m.status, m.reason)
                });
                let rsp = m.rsp.as_ref().map(|p| out.join(p));
                let on_disk = rsp.as_ref().and_then(|p| std::fs::read(p).ok());
                c.check(
                    on_disk.as_ref().map(|b| sha256_hex(b)) == m.actual_sha256,
                    || format!("{} {:?}: recorded hash is not the .rsp's", kat.id, m.mode),
                );
            }
            let single = k.modes.iter().find(|m| m.mode == KatMode::Single);
            let actual = single
                .and_then(|m| m.actual_sha256.clone())
                .unwrap_or_default();
            let listed = sums.get(inst.id.as_str()).copied().unwrap_or("(none)");
            c.check(actual == listed, || {
                format!("{}: single sha256 {actual} != kat.sha256 {listed}", kat.id)
            });
            let meta = root
                .join(&inst.dir)
                .parent()
                .expect("instance dir has a parent")
                .join("META.yml");
            let pqclean = meta_nistkat(&meta);
            c.check(actual == pqclean, || {
                format!(
                    "{}: single sha256 {actual} != nistkat-sha256 {pqclean} in {}",
                    kat.id,
                    meta.display()
                )
            });
        }
    }
    c.check(seen == example_instances(), || {
        format!("instances {seen:?} differ from the kat.sha256 files")
    });
    // Only the KATs and what they need ran: no timing record exists.
    c.check(!out.join("profile").exists(), || {
        "profile records written".into()
    });
    let camp = campaign_json(&out);
    c.check(
        camp.steps
            .iter()
            .all(|st| matches!(st.id.rsplit('/').next(), Some("source" | "build" | "kat"))),
        || "steps other than source/build/kat in campaign.json".into(),
    );
    c.done(&r.show());
}

// ---------------------------------------------------------------------------------------
// Hostile input (issue #10 items 5-6): refused by `check` and `run`, nothing written
// ---------------------------------------------------------------------------------------

/// Issue #10: `..` ids, a crate version with `/../`, `-wrapper`, a catalog outside the
/// manifest's folder, an absurd trial. Each is refused at its line by `check` (exit 2) and
/// by `run` (exit 2), nothing is written, and the catalog's content is not shown.
#[test]
fn hostile_manifests_are_refused_and_write_nothing() {
    let kems = repo().join("tests/fixtures/kems");
    let cases: [(&str, &str, &str, &str); 6] = [
        ("dots-submission", "submission \"good\"", "submission \"..\"", "manifest.kdl:2:12"),
        ("dots-instance", "instance \"good\"", "instance \"..\"", "manifest.kdl:10:14"),
        (
            "crate-version",
            "source path=\"..\"",
            "source crate=\"pqcrypto-mlkem\" version=\"1/../../x\"",
            "manifest.kdl:6:43",
        ),
        (
            "wrapper",
            "    instance \"good\" dir=\"good\" namespace=\"FIX_GOOD_\"\n",
            "    matrix impl=\"ref\"\n    instance \"good\" dir=\"good\" namespace=\"FIX_GOOD_\"\n    when impl=\"ref\" {\n        cflags \"-wrapper\" \"/bin/sh,-c,touch /tmp/ngcc-wrapper-ran\"\n    }\n",
            "manifest.kdl:13:16",
        ),
        ("catalog", "catalog=\"sizes.csv\"", "catalog=\"/etc/passwd\"", "manifest.kdl:9:19"),
        ("catalog-up", "catalog=\"sizes.csv\"", "catalog=\"../../../../../../etc/passwd\"", "manifest.kdl:9:19"),
    ];
    let good = std::fs::read_to_string(kems.join("good/manifest.kdl")).unwrap();
    for (name, from, to, at) in cases {
        let tmp = tempdir();
        let sub = tmp.path().join("subs").join(name);
        std::fs::create_dir_all(&sub).unwrap();
        assert!(good.contains(from), "{from}");
        let manifest = good
            .replace(from, to)
            .replace(
                "source path=\"..\"",
                &format!("source path=\"{}\"", s(&kems)),
            )
            .replace(
                "include=\"../primitives.kdl\"",
                "include=\"primitives.kdl\"",
            );
        std::fs::write(sub.join("manifest.kdl"), manifest).unwrap();
        for f in ["kat.sha256", "sizes.csv"] {
            std::fs::copy(kems.join("good").join(f), sub.join(f)).unwrap();
        }
        std::fs::copy(kems.join("primitives.kdl"), sub.join("primitives.kdl")).unwrap();
        let mut text = fixture_pipeline(name, &kems, &[], "single", "5ms");
        text = text
            .replace(
                "submissions \n",
                &format!("submissions \"{}\"\n", s(&sub.join("manifest.kdl"))),
            )
            .replace(&format!("submissions-root \"{}\"\n", s(&kems)), "");
        let pipeline = tmp.path().join("p.kdl");
        std::fs::write(&pipeline, text).unwrap();
        let before = tree(tmp.path());

        let r = run(&["check", &s(&pipeline)]);
        assert_eq!(r.code, 2, "{name}: {}", r.show());
        assert!(
            r.stderr.contains(at),
            "{name}: expected {at} in {}",
            r.show()
        );
        assert!(
            !r.stderr.contains("root:"),
            "{name} showed /etc/passwd: {}",
            r.show()
        );
        let out = tmp.path().join("out");
        let r = run(&["run", &s(&pipeline), "--outputs", &s(&out)]);
        assert_eq!(r.code, 2, "{name}: {}", r.show());
        assert_eq!(tree(tmp.path()), before, "{name}: files were written");
    }
    assert!(!Path::new("/tmp/ngcc-wrapper-ran").exists());
}

/// Issue #10: a second `run` on an outputs folder in use exits 2 naming the holder, and
/// runs nothing.
#[test]
fn second_run_on_locked_outputs_exits_2() {
    let kems = repo().join("tests/fixtures/kems");
    let tmp = tempdir();
    let pipeline = tmp.path().join("p.kdl");
    std::fs::write(
        &pipeline,
        fixture_pipeline("locked", &kems, &["good"], "single", "5ms"),
    )
    .unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let held = ngcc_pipe::run::lock::OutputsLock::acquire(&out).unwrap();
    let r = run(&["run", &s(&pipeline), "--outputs", &s(&out)]);
    assert_eq!(r.code, 2, "{}", r.show());
    let want = format!("in use by process {}", std::process::id());
    assert!(r.stderr.contains(&want), "{}", r.show());
    assert_eq!(tree(&out), [".lock"], "the second run wrote something");
    drop(held);
}

/// Whether the diagnostics `text` say `what`, however they were wrapped: the renderer wraps
/// at a fixed width, so where a line breaks depends on the length of the paths in it (on
/// where the clone lives). Compared without whitespace and without the gutter (`×`, `│`)
/// that starts a continued line.
fn said(text: &str, what: &str) -> bool {
    let squeeze = |s: &str| -> String {
        s.lines()
            .map(|l| l.trim_start().trim_start_matches(['×', '│']))
            .flat_map(|l| l.chars())
            .filter(|c| !c.is_whitespace())
            .collect()
    };
    squeeze(text).contains(&squeeze(what))
}

/// Issue #12: planted mistakes are named at their manifest lines, all in one go: a typo'd
/// kat key and a gcc-style CPU flag by `check`; a wrong namespace and a wrong `dir` by
/// `check --deep` (which reads the sources).
#[test]
fn check_names_planted_mistakes_at_their_lines() {
    let kems = repo().join("tests/fixtures/kems");
    let tmp = tempdir();
    let sub = tmp.path().join("planted");
    std::fs::create_dir_all(&sub).unwrap();
    let manifest = |body: &str| {
        format!(
            "submission \"planted\" {{\n    algorithm \"Planted\"\n    source path=\"{}\"\n    primitives include=\"{}/primitives.kdl\"\n    kat rng=\"nist\" manifest=\"kat.sha256\"\n{body}}}\n",
            s(&kems),
            s(&kems)
        )
    };
    let hash = "71212ed169c745ff45cf36e87283a83fad0ff63ce7a71d1f930218d32b82a24d";
    std::fs::write(
        sub.join("kat.sha256"),
        format!("{hash}  good-ref\n{hash}  good_opt\nnot-a-hash good-ref.all\n"),
    )
    .unwrap();
    let mut text = fixture_pipeline("planted", &kems, &[], "single", "5ms");
    text = text.replace(
        "submissions \n",
        &format!("submissions \"{}\"\n", s(&sub.join("manifest.kdl"))),
    );
    let pipeline = tmp.path().join("p.kdl");
    std::fs::write(&pipeline, text).unwrap();
    let m = s(&sub.join("manifest.kdl"));
    let k = s(&sub.join("kat.sha256"));

    // 1. Without sources: kat keys and CPU flag names.
    std::fs::write(
        sub.join("manifest.kdl"),
        manifest("    matrix impl=\"ref opt\"\n    instance \"good-{impl}\" dir=\"good\" namespace=\"FIX_GOOD_\"\n    when impl=\"opt\" {\n        requires-cpu \"pclmul\" \"bmi\"\n    }\n"),
    )
    .unwrap();
    let r = run(&["check", &s(&pipeline)]);
    assert_eq!(r.code, 2, "{}", r.show());
    for (at, what) in [
        (
            format!("{k}:2:67"),
            "`good_opt` in the kat manifest names no declared instance",
        ),
        (format!("{k}:3:1"), "malformed kat manifest line"),
        (format!("{m}:9:22"), "`pclmul` is not a CPU feature name"),
        (format!("{m}:9:31"), "`bmi` is not a CPU feature name"),
    ] {
        assert!(
            said(&r.stderr, &at) && said(&r.stderr, what),
            "{at} {what}\n{}",
            r.show()
        );
    }
    assert!(said(&r.stderr, "did you mean `good-opt`?"), "{}", r.show());
    assert!(said(&r.stderr, "did you mean `pclmulqdq`?"), "{}", r.show());
    assert!(said(&r.stderr, "did you mean `bmi1`?"), "{}", r.show());

    // 2. With sources: a wrong namespace and a wrong folder.
    std::fs::write(
        sub.join("kat.sha256"),
        format!("{hash}  good-ref\n{hash}  good-opt\n"),
    )
    .unwrap();
    std::fs::write(
        sub.join("manifest.kdl"),
        manifest("    instance \"good-ref\" dir=\"good\" namespace=\"FIX_GOD_\"\n    instance \"good-opt\" dir=\"goood\" namespace=\"FIX_GOOD_\"\n"),
    )
    .unwrap();
    let r = run(&["check", &s(&pipeline)]);
    assert_eq!(r.code, 0, "plain check does not read sources: {}", r.show());
    let r = run(&[
        "check",
        "--deep",
        &s(&pipeline),
        "--outputs",
        &s(&tmp.path().join("out")),
    ]);
    assert_eq!(r.code, 2, "{}", r.show());
    let col = |line: &str, word: &str| line.find(word).unwrap() + 1;
    let ns_line = "    instance \"good-ref\" dir=\"good\" namespace=\"FIX_GOD_\"";
    let dir_line = "    instance \"good-opt\" dir=\"goood\" namespace=\"FIX_GOOD_\"";
    let ns_at = format!("{m}:6:{}", col(ns_line, "\"FIX_GOD_"));
    assert!(said(&r.stderr, &ns_at), "{ns_at}\n{}", r.show());
    assert!(
        said(&r.stderr, "namespace `FIX_GOD_` is not what")
            && said(&r.stderr, "it has namespace `FIX_GOOD_`"),
        "{}",
        r.show()
    );
    let dir_at = format!("{m}:7:{}", col(dir_line, "\"goood"));
    assert!(said(&r.stderr, &dir_at), "{dir_at}\n{}", r.show());
    assert!(
        said(&r.stderr, "folder `goood` does not exist"),
        "{}",
        r.show()
    );
    assert!(r.stdout.contains("planted/good-ref: kem.c"), "{}", r.show());
}

/// Issue #9: `layouts=3` links the instance in three orders, each after the page anchor,
/// and the session times all of them in every batch: the build record names the objects,
/// the time record lists them and each batch's share, and each batch is the sum of them.
#[test]
fn layouts_are_linked_after_the_anchor_and_timed_in_every_batch() {
    let tmp = tempdir();
    let kems = repo().join("tests/fixtures/kems");
    let pipeline = tmp.path().join("layouts.kdl");
    let text = fixture_pipeline("engine-layouts", &kems, &["good"], "single", "5ms").replacen(
        "samples=11",
        "samples=11 layouts=3",
        1,
    );
    std::fs::write(&pipeline, &text).unwrap();
    let out = tmp.path().join("out");
    let r = run(&["run", &s(&pipeline), "--outputs", &s(&out)]);
    assert_eq!(r.code, 0, "{}", r.show());

    let build = rec(&out, StepKind::Build, "good", Some("good"), None);
    let Some(StepData::Build(b)) = &build.data else {
        panic!("no build data: {build:?}");
    };
    let names: Vec<&str> = b.layouts.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["reversed", "shuffle-1"]);
    let anchor = b.anchor_object.as_ref().expect("the anchor is recorded");
    assert!(out.join(anchor).is_file());
    for l in &b.layouts {
        let bytes = std::fs::read(out.join(&l.object)).unwrap();
        assert_eq!(sha256_hex(&bytes), l.object_sha256, "{}", l.name);
    }
    // Two objects (kem.o, toyhash.o): reversed is another link order, another object.
    assert_ne!(b.layouts[0].object_sha256, b.object_sha256);
    // The link commands put the anchor first and the objects in each layout's order.
    let log = std::fs::read_to_string(out.join(&build.logs[0])).unwrap();
    // (`<id>.unanchored.so` is linked only to measure the static size without the padding.)
    let links: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" -shared ") && !l.contains("unanchored"))
        .collect();
    assert!(links.len() >= 3, "{log}");
    for l in &links {
        let anchor_at = l.find("ngcc_anchor.o").expect(l);
        assert!(anchor_at < l.find("kem.o").expect(l), "{l}");
        assert!(anchor_at < l.find("toyhash.o").expect(l), "{l}");
    }
    let reversed = links
        .iter()
        .find(|l| l.contains("good.reversed.so"))
        .expect("the reversed layout's link");
    assert!(
        reversed.find("toyhash.o") < reversed.find("kem.o"),
        "{reversed}"
    );

    for op in OPS {
        let t = rec(&out, StepKind::Time, "good", Some("good"), Some(op));
        assert_eq!(t.status, Status::Ok, "{op:?}: {:?}", t.reason);
        let Some(StepData::Time(td)) = &t.data else {
            panic!("{op:?}: no time data");
        };
        let o = &td.output;
        assert_eq!(o.layouts.len(), 3, "{op:?}: {:?}", o.layouts);
        assert!(o.layouts[0].ends_with("good.so"), "{:?}", o.layouts);
        assert!(
            o.layouts[1].ends_with("good.reversed.so"),
            "{:?}",
            o.layouts
        );
        assert!(!o.trials.is_empty());
        for tr in &o.trials {
            assert_eq!(tr.layout_cycles.len(), 3, "{op:?}");
            assert!(tr.layout_cycles.iter().all(|&c| c > 0), "{op:?}: {tr:?}");
            assert_eq!(tr.layout_cycles.iter().sum::<u64>(), tr.cycles, "{op:?}");
            assert_eq!(tr.iters % 3, 0, "{op:?}: the same calls in every layout");
        }
        // The 11 samples asked for, split among the member's runner processes and within
        // each among the layouts, no more and no fewer.
        assert_eq!(o.samples.len(), 11, "{op:?}");
    }
}
