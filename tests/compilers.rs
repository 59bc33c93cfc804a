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
            ("trials=10", "trials=3"),
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
        index.contains("(best of 2 cells by enc + dec: `gcc` "),
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
}
