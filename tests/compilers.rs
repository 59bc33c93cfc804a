//! Issue #39 items 2 and 5: a real KEM (ML-KEM-512 clean, PQClean) built by gcc and by
//! clang-16 as two cells of one instance, every analysis step run on each.

mod common;
use common::*;
use ngcc_pipe::model::{Op, StepKind};
use ngcc_pipe::record::{Status, StepData};

#[test]
fn every_step_runs_on_gcc_and_clang_cells() {
    if !require_valgrind()
        || !require_crates(&[MLKEM_CRATE])
        || !require_tool("compilers", "clang-16", "clang-16")
    {
        return;
    }
    let tmp = tempdir();
    let out = tmp.path().join("out");
    let pipeline = pipeline_copy(
        "pipelines/quick.kdl",
        &tmp.path().join("cc.kdl"),
        &[
            ("    cc \"gcc\"", "    compilers \"gcc\" \"clang-16\""),
            ("trials=20", "trials=3"),
        ],
    );
    let text = std::fs::read_to_string(&pipeline).unwrap();
    let outputs = text.lines().find(|l| l.starts_with("outputs ")).unwrap();
    let text = text.replace(outputs, &format!("outputs {}", kdl_str(&s(&out))));
    std::fs::write(&pipeline, text).unwrap();
    let r = run(&["run", pipeline.to_str().unwrap(), "--only", "*512*"]);
    assert_eq!(r.code, 0, "{}", r.show());
    for cc in ["gcc", "clang-16"] {
        let id = format!("ML-KEM-512-clean@{cc}");
        let inst = Some(id.as_str());
        let build = rec(&out, StepKind::Build, "ml-kem", inst, None);
        assert_eq!(build.status, Status::Ok, "{id}: {:?}", build.reason);
        match &build.data {
            Some(StepData::Build(b)) => {
                assert_eq!(b.cc, cc, "{id}");
                let family = if cc == "gcc" { "gcc" } else { "clang" };
                assert!(b.cc_version.contains(family), "{id}: {}", b.cc_version);
            }
            other => panic!("{id}: {other:?}"),
        }
        for kind in [StepKind::Kat, StepKind::Sizes, StepKind::Survey] {
            let r = rec(&out, kind, "ml-kem", inst, None);
            assert_eq!(r.status, Status::Ok, "{id} {kind:?}: {:?}", r.reason);
        }
        for kind in [
            StepKind::Time,
            StepKind::Profile,
            StepKind::Count,
            StepKind::Ct,
        ] {
            for op in Op::ALL {
                let r = rec(&out, kind, "ml-kem", inst, Some(op));
                assert_eq!(r.status, Status::Ok, "{id} {kind:?} {op}: {:?}", r.reason);
            }
        }
    }
    let index = std::fs::read_to_string(out.join("reports/index.md")).unwrap();
    assert!(index.contains("(best of 2 cells)"), "{index}");
    assert!(
        index.contains("(best of 2 cells by enc + dec cycles: `gcc` "),
        "{index}"
    );

    // Issue #39 item 4: the same campaign with `time cells="best"` times only the cell with
    // fewer counted instructions for enc + dec; the other's time steps are skipped with
    // both counts, the rest stays as it was.
    let text = std::fs::read_to_string(&pipeline).unwrap();
    let text = text.replacen(
        "step \"time\" needs=\"kat\"",
        "step \"time\" needs=\"kat\" cells=\"best\"",
        1,
    );
    assert!(text.contains("cells=\"best\""));
    std::fs::write(&pipeline, text).unwrap();
    // Each cell's time waits for every cell's count, its own too: a cell whose own count
    // had not finished was timed as if it had nothing to compare.
    let g = run(&["graph", pipeline.to_str().unwrap(), "--format", "json"]);
    assert_eq!(g.code, 0, "{}", g.show());
    let g: serde_json::Value = serde_json::from_str(&g.stdout).expect("graph json");
    let id = |i: &serde_json::Value| g["nodes"][i.as_u64().unwrap() as usize]["id"].clone();
    for cc in ["gcc", "clang-16"] {
        let (count, time) = (
            format!("ml-kem/ML-KEM-512-clean@{cc}/count:enc"),
            format!("ml-kem/ML-KEM-512-clean@{cc}/time:keygen"),
        );
        let edge = g["edges"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| id(&e[0]) == count && id(&e[1]) == time);
        assert!(edge, "no edge {count} -> {time}");
    }
    let r = run(&["run", pipeline.to_str().unwrap(), "--only", "*512*"]);
    assert_eq!(r.code, 0, "{}", r.show());
    let enc_dec = |cc: &str| -> f64 {
        [Op::Enc, Op::Dec]
            .iter()
            .map(|&op| {
                let id = format!("ML-KEM-512-clean@{cc}");
                match rec(&out, StepKind::Count, "ml-kem", Some(&id), Some(op)).data {
                    Some(StepData::Count(c)) => c.instructions_mean,
                    other => panic!("{id} count {op}: {other:?}"),
                }
            })
            .sum()
    };
    let (gcc, clang) = (enc_dec("gcc"), enc_dec("clang-16"));
    let (best, other) = if clang < gcc {
        ("clang-16", "gcc")
    } else {
        ("gcc", "clang-16")
    };
    for op in Op::ALL {
        let timed = rec(
            &out,
            StepKind::Time,
            "ml-kem",
            Some(&format!("ML-KEM-512-clean@{best}")),
            Some(op),
        );
        assert_eq!(timed.status, Status::Ok, "{best} {op}: {:?}", timed.reason);
        let left = rec(
            &out,
            StepKind::Time,
            "ml-kem",
            Some(&format!("ML-KEM-512-clean@{other}")),
            Some(op),
        );
        assert_eq!(left.status, Status::Skipped, "{other} {op}");
        let why = left.reason.unwrap_or_default();
        assert!(
            why.starts_with("not the best cell (`cells=\"best\"`): `ML-KEM-512-clean@")
                && why.contains(&format!(
                    "{:.0} against {:.0} here",
                    gcc.min(clang),
                    gcc.max(clang)
                )),
            "{why}"
        );
    }
    let index = std::fs::read_to_string(out.join("reports/index.md")).unwrap();
    assert!(
        index.contains("3 measurements were left to a better cell"),
        "{index}"
    );
    // The category row compares the cells by what chose between them, instructions.
    assert!(
        index.contains(&format!(
            "(best of 2 cells by enc + dec instructions counted: `gcc` {}, `clang-16` {}; only the best is timed",
            ngcc_pipe::report::format::cycles(gcc),
            ngcc_pipe::report::format::cycles(clang)
        )),
        "{index}"
    );
}

/// Issue #39's hidden case on real code: the older PQClean Kyber768 (pqcrypto-frodo 0.4.11)
/// at `-Os` under clang-16 gets a secret-dependent branch in `poly_frommsg` that its source
/// does not have (the "clangover" finding: `mask & ((KYBER_Q + 1) / 2)` compiled to a
/// jump); gcc at the same flags and both compilers at the guide flags do not. The report
/// calls it introduced by clang-16 at `os`; ML-KEM-768 clean has no such location in any
/// cell. Manifests and primitives files are copied into a temporary folder; the code is
/// the crates' own, fetched by the `source` step.
#[test]
fn a_branch_clang_alone_introduces_is_named_with_its_compiler() {
    if !require_valgrind()
        || !require_crates(&[MLKEM_CRATE, FRODO_CRATE])
        || !require_tool("compilers", "clang-16", "clang-16")
    {
        return;
    }
    let tmp = tempdir();
    let dir = tmp.path();
    let subs = repo().join("submissions");
    for (folder, id, (krate, version), prims, inst, path, ns) in [
        (
            "kyber",
            "kyber-2021",
            FRODO_CRATE,
            "pqclean-2021-primitives.kdl",
            "Kyber768-clean",
            "crypto_kem/kyber768/clean",
            "PQCLEAN_KYBER768_CLEAN_",
        ),
        (
            "mlkem",
            "ml-kem",
            MLKEM_CRATE,
            "pqclean-primitives.kdl",
            "ML-KEM-768-clean",
            "crypto_kem/ml-kem-768/clean",
            "PQCLEAN_MLKEM768_CLEAN_",
        ),
    ] {
        std::fs::copy(subs.join(prims), dir.join(prims)).unwrap();
        std::fs::create_dir_all(dir.join(folder)).unwrap();
        std::fs::write(
            dir.join(folder).join("manifest.kdl"),
            format!(
                "submission \"{id}\" {{\n    algorithm \"{id}\"\n    \
                 source crate=\"{krate}\" version=\"{version}\" root=\"pqclean\"\n    \
                 primitives include=\"../{prims}\"\n    \
                 instance \"{inst}\" dir=\"{path}\" namespace=\"{ns}\"\n    \
                 ct-benign \"rej_uniform\" reason=\"rejection sampling on the public seed\"\n}}\n"
            ),
        )
        .unwrap();
        std::fs::write(dir.join(folder).join("kat.sha256"), "").unwrap();
    }
    let out = dir.join("out");
    let pipeline = dir.join("clangover.kdl");
    std::fs::write(
        &pipeline,
        format!(
            "system \"clangover\" {{\n    bench-cpu 0\n    compilers \"gcc\" \"clang-16\"\n}}\n\
             flags \"os\" \"-Os\"\n\
             flags \"guide\" \"-O3 -march=native -fomit-frame-pointer\"\n\
             submissions \"*/manifest.kdl\"\n\
             submissions-root {}\n\
             outputs {}\n\
             step \"source\"\n\
             step \"build\" needs=\"source\" flags=\"os guide\"\n\
             step \"ct\" needs=\"build\" ops=\"enc dec\" iters=1 timeout=\"10m\"\n\
             step \"report\" needs=\"ct\"\n",
            kdl_str(&s(dir)),
            kdl_str(&s(&out)),
        ),
    )
    .unwrap();
    let r = run(&["run", pipeline.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.show());

    // The records: the branch in poly_frommsg, flagged as the compiler's, in clang-16 at
    // os only.
    for cc in ["gcc", "clang-16"] {
        for profile in ["os", "guide"] {
            let inst = format!("Kyber768-clean@{cc}@{profile}");
            for op in [Op::Enc, Op::Dec] {
                let r = rec(&out, StepKind::Ct, "kyber-2021", Some(&inst), Some(op));
                assert_eq!(r.status, Status::Ok, "{inst} {op}: {:?}", r.reason);
                let Some(StepData::Ct(d)) = r.data else {
                    panic!("{inst} {op}: no ct data");
                };
                let frommsg: Vec<_> = d
                    .findings
                    .iter()
                    .filter(|f| f.function.ends_with("poly_frommsg"))
                    .collect();
                if (cc, profile) == ("clang-16", "os") {
                    assert!(
                        !frommsg.is_empty() && frommsg.iter().all(|f| f.compiler),
                        "{inst} {op}: {:?}",
                        d.findings
                    );
                } else {
                    assert!(frommsg.is_empty(), "{inst} {op}: {frommsg:?}");
                }
            }
        }
    }
    let md = std::fs::read_to_string(out.join("reports/kyber-2021.md")).unwrap();
    let row = md
        .lines()
        .find(|l| l.contains("poly_frommsg") && l.starts_with("| `Kyber768-clean` |"))
        .unwrap_or_else(|| panic!("no cross-cell row for poly_frommsg:\n{md}"));
    assert!(
        row.contains("| clang-16 at os |")
            && row.ends_with(
                "| introduced by `clang-16` at `os`: no cell of another compiler has it |"
            ),
        "{row}"
    );
    let appendix = std::fs::read_to_string(out.join("reports/kyber-2021.appendix.md")).unwrap();
    assert!(
        appendix.contains("introduced by the compiler `clang-16` (flags -Os -gdwarf-4)"),
        "{appendix}"
    );
    assert!(appendix.contains("## The build matrix"), "{appendix}");
    // ML-KEM clean: no location introduced by either compiler, at either profile.
    let md = std::fs::read_to_string(out.join("reports/ml-kem.md")).unwrap();
    assert!(md.contains("### Across the build matrix"), "{md}");
    assert!(!md.contains("introduced by `"), "{md}");
}
