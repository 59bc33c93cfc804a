//! A foreign target (issue #14): `pipelines/arm_1.kdl`'s KAT steps for ML-KEM-512 clean and
//! aarch64, cross-compiled for aarch64 and run under qemu-user on a machine that is not
//! aarch64 (natively on one). Needs the cross tools (group `cross`, see
//! `tests/common/require.rs`) and the crate `pqcrypto-mlkem`.

mod common;

use std::path::Path;

use common::*;
use ngcc_pipe::model::{host_arch, KatMode, Op, StepKind};
use ngcc_pipe::record::{KatStatus, Status, StepData};
use object::Object;

/// What is missing for the cross test here, or `None` when it can run.
fn cross_tools_missing() -> Option<String> {
    if host_arch() == "aarch64" {
        return None;
    }
    let mut missing = Vec::new();
    for (tool, package) in [
        ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu"),
        ("qemu-aarch64", "qemu-user"),
    ] {
        if require::on_path(tool).is_none() {
            missing.push(format!("`{tool}` (Debian package {package})"));
        }
    }
    if !Path::new("/usr/aarch64-linux-gnu/lib/libc.so.6").is_file() {
        missing.push("the aarch64 libc (Debian package libc6-dev-arm64-cross)".into());
    }
    let sysroot = std::process::Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    if !Path::new(&sysroot)
        .join("lib/rustlib/aarch64-unknown-linux-gnu")
        .is_dir()
    {
        missing.push("the Rust target (`rustup target add aarch64-unknown-linux-gnu`)".to_string());
    }
    (!missing.is_empty()).then(|| format!("missing {}", missing.join(", ")))
}

/// ML-KEM-512 clean and aarch64 built for aarch64 pass both KATs with PQClean's hashes;
/// the objects are aarch64 ELF; the runner ran under the emulator, in the sandbox; avx2 is
/// unsupported on the target; time and count are unsupported with the emulation reason.
#[test]
fn arm_1_kats_of_ml_kem_512_pass_under_emulation() {
    if !require("cross", cross_tools_missing()) || !require_crates(&[MLKEM_CRATE]) {
        return;
    }
    let emulated = host_arch() != "aarch64";
    let tmp = tempdir();
    let out = tmp.path().join("arm_1");
    // (On an aarch64 machine time:keygen is timed: on a core this process may use.)
    let pipeline = pipeline_copy("pipelines/arm_1.kdl", &tmp.path().join("arm_1.kdl"), &[]);
    let r = run(&[
        "run",
        &s(&pipeline),
        "--only",
        "ml-kem/ML-KEM-512-*/kat",
        "--only",
        "ml-kem/ML-KEM-512-aarch64/time:keygen",
        "--only",
        "ml-kem/ML-KEM-512-aarch64/count:keygen",
        "--outputs",
        &s(&out),
    ]);
    eprintln!("arm_1 ML-KEM-512 KATs: {:.1} s", r.secs);
    assert_eq!(r.code, 0, "{}", r.show());

    let mut c = Checks::default();
    let sums = std::fs::read_to_string(repo().join("submissions/ml-kem/kat.sha256")).unwrap();
    let expected = |name: &str| {
        sums.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .and_then(|l| l.split_whitespace().next())
            .map(str::to_string)
    };
    for inst in ["ML-KEM-512-clean", "ML-KEM-512-aarch64"] {
        let kat = rec(&out, StepKind::Kat, "ml-kem", Some(inst), None);
        c.check(kat.status == Status::Ok, || {
            format!("{inst}: kat {:?}: {:?}", kat.status, kat.reason)
        });
        let k = kat_data(&kat);
        for (mode, name) in [
            (KatMode::Single, inst.to_string()),
            (KatMode::All, format!("{inst}.all")),
        ] {
            let m = k.modes.iter().find(|m| m.mode == mode);
            c.check(m.is_some_and(|m| m.status == KatStatus::Pass), || {
                format!("{inst} {mode:?}: {m:?}")
            });
            c.check(
                m.and_then(|m| m.actual_sha256.clone()) == expected(&name),
                || format!("{inst} {mode:?}: hash is not kat.sha256's {name}"),
            );
        }
        // PQClean's own value, independently of kat.sha256.
        c.check(
            expected(inst).as_deref()
                == Some("c70041a761e01cd6426fa60e9fd6a4412c2be817386c8d0f3334898082512782"),
            || format!("{inst}: kat.sha256 is not META.yml's nistkat-sha256"),
        );
        let runner_cmd = kat.commands.first().cloned().unwrap_or_default();
        let under_qemu = runner_cmd
            .first()
            .is_some_and(|p| p.ends_with("/qemu-aarch64"));
        c.check(under_qemu == emulated, || {
            format!("{inst}: runner command {runner_cmd:?} (emulated here: {emulated})")
        });
        c.check(
            runner_cmd
                .iter()
                .any(|a| a.ends_with("aarch64-unknown-linux-gnu/release/kem-runner"))
                || !emulated,
            || format!("{inst}: not the aarch64 kem-runner: {runner_cmd:?}"),
        );
        c.check(kat.sandbox.is_some(), || {
            format!("{inst}: no sandbox field")
        });

        let build = rec(&out, StepKind::Build, "ml-kem", Some(inst), None);
        let Some(StepData::Build(b)) = &build.data else {
            c.0.push(format!("{inst}: no build data: {:?}", build.reason));
            continue;
        };
        let bytes = std::fs::read(out.join(&b.object)).unwrap_or_default();
        let arch = object::File::parse(&bytes[..]).map(|f| f.architecture());
        c.check(matches!(arch, Ok(object::Architecture::Aarch64)), || {
            format!("{inst}: object {} is {arch:?}", b.object.display())
        });
        c.check(b.cc.starts_with("aarch64-linux-gnu-gcc"), || {
            format!("{inst}: compiled by {}", b.cc)
        });
    }
    let avx2 = rec(&out, StepKind::Kat, "ml-kem", Some("ML-KEM-512-avx2"), None);
    c.check(
        avx2.status == Status::Unsupported
            && avx2.reason.as_deref().unwrap_or("").contains("lacks avx2"),
        || format!("avx2 on aarch64: {:?} {:?}", avx2.status, avx2.reason),
    );
    if emulated {
        for kind in [StepKind::Time, StepKind::Count] {
            let t = rec(
                &out,
                kind,
                "ml-kem",
                Some("ML-KEM-512-aarch64"),
                Some(Op::Keygen),
            );
            c.check(
                t.status == Status::Unsupported
                    && t.reason
                        .as_deref()
                        .unwrap_or("")
                        .starts_with("emulated (qemu-user): timing needs a native aarch64 machine"),
                || format!("{kind} under emulation: {:?} {:?}", t.status, t.reason),
            );
        }
    }
    c.done(&r.show());
}
