//! NIST-round packages of other shapes (issue 38), made at test time from the PQClean
//! sources cargo downloads (`tests/nist_support`): a build script instead of a Makefile, a
//! source in a subfolder, the package below loose files in an archive; `check --deep`
//! predicting a link that would fail; an instance this CPU cannot run said once; KAT files
//! named after their parameter set in a tree of their own.

#[path = "nist_support/mod.rs"]
mod support;

use ngcc_pipe::model::StepKind;
use support::{check_run_pass, ngcc, ok, pipeline, rec, squash, work};

#[test]
fn check_deep_names_a_symbol_that_no_compiled_file_defines() {
    let w = work();
    let dir = w.path();
    let pkg = support::imported_ml_kem_512(dir);
    let p = pipeline(dir, "single", false);
    ok(dir, &["check", "--deep", &p.display().to_string()]);
    // The Keccak code moves into a subfolder after import: the manifest no longer
    // compiles the file that defines what kem.c needs.
    let folder = pkg.join("Reference_Implementation/crypto_kem/ml-kem-512");
    std::fs::create_dir(folder.join("keccak")).unwrap();
    std::fs::rename(folder.join("fips202.c"), folder.join("keccak/fips202.c")).unwrap();
    let (code, out, err) = ngcc(dir, &["check", "--deep", &p.display().to_string()]);
    assert_ne!(code, 0, "{out}\n{err}");
    let text = std::fs::read_to_string(dir.join("subs/ML-KEM/manifest.kdl")).unwrap();
    let line = 1 + text
        .lines()
        .position(|l| l.trim_start().starts_with("instance "))
        .unwrap();
    // The diagnostic's lines are wrapped: compared without the wrapping.
    let flat = squash(&err);
    assert!(
        flat.contains(&squash(
            "`sha3_256` (needed by `Reference_Implementation/crypto_kem/ml-kem-512/kem.c`)"
        )),
        "{err}"
    );
    assert!(
        flat.contains(&squash("`Reference_Implementation/crypto_kem/ml-kem-512/keccak/fips202.c` defines it but is not compiled for this instance: add `sources \"Reference_Implementation/crypto_kem/ml-kem-512/keccak/fips202.c\"`")),
        "{err}"
    );
    assert_eq!(
        err.matches("undefined symbols").count(),
        1,
        "one diagnostic for one missing file:\n{err}"
    );
    assert!(
        err.contains(&format!("manifest.kdl:{line}:14]")),
        "not at line {line}:\n{err}"
    );
}

/// `check --deep` names what an AVX2 assembly file and an AVX2 intrinsic need that the
/// manifest does not give (with `-march=native` in the flag profile, which hides the
/// intrinsic's missing flag from the build); once given, the run's report says that the
/// assembly file, without a `.note.GNU-stack`, makes the library ask for an executable
/// stack (the linker's warning, otherwise only in the build log).
#[test]
fn cpu_features_and_an_executable_stack_are_named_before_and_after_the_run() {
    if !support::cpu_has("avx2") {
        eprintln!(
            "skipped: this CPU has no avx2 (the intrinsic compiles only under -march=native here)"
        );
        return;
    }
    let w = work();
    let dir = w.path();
    let pkg = support::imported_ml_kem_512(dir);
    let p = pipeline(dir, "single", true);
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, text.replace("\"-O2\"", "\"-O2 -march=native\"")).unwrap();
    // Reference code compiled with -march=native needs nothing beyond what it says.
    ok(dir, &["check", "--deep", &p.display().to_string()]);
    // An AVX2 assembly file and an AVX2 intrinsic that only -march=native enables.
    let folder = pkg.join("Reference_Implementation/crypto_kem/ml-kem-512");
    std::fs::write(
        folder.join("probe_asm.S"),
        ".text\n.globl probe_asm\nprobe_asm:\n vpaddd %ymm2, %ymm1, %ymm0\n ret\n",
    )
    .unwrap();
    std::fs::write(
        folder.join("probe_intrinsic.c"),
        "#include <immintrin.h>\n__m256i probe_intrinsic(__m256i a, __m256i b) { return _mm256_add_epi32(a, b); }\n",
    )
    .unwrap();
    let (code, out, err) = ngcc(dir, &["check", "--deep", &p.display().to_string()]);
    assert_ne!(code, 0, "{out}\n{err}");
    let flat = squash(&err);
    assert!(
        flat.contains(&squash("`Reference_Implementation/crypto_kem/ml-kem-512/probe_asm.S` uses CPU features that `requires-cpu` does not list: avx2 (`vpaddd")),
        "{err}"
    );
    assert!(
        flat.contains(&squash("`Reference_Implementation/crypto_kem/ml-kem-512/probe_intrinsic.c` compiles only with the flag profile's `-march`")),
        "{err}"
    );
    assert!(flat.contains(&squash("requires-cpu \"avx2\"")), "{err}");
    // Given in the manifest, both are fine.
    support::add_after_api(dir, "    when param=\"ml-kem-512\" {\n        cflags \"-mavx2\"\n        requires-cpu \"avx2\"\n    }\n");
    ok(dir, &["check", "--deep", &p.display().to_string()]);
    let (code, _, progress) = ngcc(dir, &["run", &p.display().to_string()]);
    assert_eq!(code, 0, "{progress}");
    let build = rec(
        &dir.join("out"),
        StepKind::Build,
        "ML-KEM",
        "ml-kem-512-reference",
        None,
    );
    let Some(ngcc_pipe::record::StepData::Build(b)) = &build.data else {
        panic!("build {:?}: {:?}", build.status, build.reason)
    };
    assert_eq!(
        b.executable_stack,
        Some(vec![
            "Reference_Implementation/crypto_kem/ml-kem-512/probe_asm.S".into()
        ])
    );
    let report = std::fs::read_to_string(dir.join("out/reports/ML-KEM.md")).unwrap();
    assert!(report.contains("ask for an executable stack"), "{report}");
    assert!(
        report.contains("`Reference_Implementation/crypto_kem/ml-kem-512/probe_asm.S` without `.note.GNU-stack`"),
        "{report}"
    );
}

#[test]
fn an_instance_this_cpu_cannot_run_is_planned_away_in_one_line() {
    // An Arm feature on an x86 machine, as the example campaign's aarch64 instances.
    if support::cpu_has("asimd") {
        eprintln!("skipped: this CPU has asimd");
        return;
    }
    let w = work();
    let dir = w.path();
    support::imported_ml_kem_512(dir);
    support::add_after_api(
        dir,
        "    when param=\"ml-kem-512\" {\n        requires-cpu \"asimd\"\n    }\n",
    );
    let p = pipeline(dir, "single all", true);
    let (code, _, err) = ngcc(dir, &["run", &p.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    let about: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("ml-kem-512-reference"))
        .collect();
    assert_eq!(
        about,
        ["unsupported ML-KEM/ml-kem-512-reference: this CPU lacks asimd (not in /proc/cpuinfo flags); its 3 steps planned away"],
        "{err}"
    );
    // The records still say why each step did not run.
    let out = dir.join("out");
    let kat = rec(&out, StepKind::Kat, "ML-KEM", "ml-kem-512-reference", None);
    assert_eq!(kat.status.name(), "unsupported");
    assert!(kat.reason.unwrap_or_default().contains("lacks asimd"));
    // `-v` shows every step's line.
    let (_, _, verbose) = ngcc(dir, &["run", "-v", &p.display().to_string()]);
    assert!(
        verbose.contains("ML-KEM/ml-kem-512-reference/kat"),
        "{verbose}"
    );
}

#[test]
fn a_package_with_a_build_script_a_subfolder_and_a_nested_root_passes_unedited() {
    let w = work();
    let dir = w.path();
    let mlkem = support::pqclean("pqcrypto-mlkem", "0.1.1", &dir.join("crates"));
    // Delivered as `delivery/{SHA256SUMS,README}` beside `delivery/round3/ML-KEM/`.
    let delivery = dir.join("delivery");
    let pkg = support::ml_kem(&mlkem, &delivery.join("round3"), &["512"]);
    std::fs::write(delivery.join("SHA256SUMS"), "0  round3/ML-KEM\n").unwrap();
    std::fs::write(delivery.join("README"), "The round-3 package.\n").unwrap();
    // Its Keccak in a subfolder, and a shell script instead of the Makefile.
    let param = pkg.join("Reference_Implementation/crypto_kem/ml-kem-512");
    std::fs::create_dir(param.join("keccak")).unwrap();
    std::fs::rename(param.join("fips202.c"), param.join("keccak/fips202.c")).unwrap();
    std::fs::remove_file(param.join("Makefile")).unwrap();
    let bmi2 = support::cpu_has("bmi2");
    let m = if bmi2 { " -mbmi2" } else { "" };
    std::fs::write(
        param.join("build.sh"),
        format!("#!/bin/sh\nset -e\ncc -O3 -std=c99{m} -o PQCgenKAT_kem *.c keccak/fips202.c\n"),
    )
    .unwrap();
    let archive = dir.join("ML-KEM-r3.tar.gz");
    support::tar_gz(&delivery, &archive);
    // The same folder, given one level above the package, and with `--root`.
    let said = ok(
        dir,
        &[
            "import",
            &delivery.join("round3").display().to_string(),
            "--into",
            "other",
        ],
    );
    assert!(
        said.contains("note: the package is `ML-KEM` inside"),
        "{said}"
    );
    let other = std::fs::read_to_string(dir.join("other/ML-KEM/manifest.kdl")).unwrap();
    assert!(
        other.contains("source path=\"../../delivery/round3/ML-KEM\""),
        "{other}"
    );
    let (code, _, err) = ngcc(
        dir,
        &[
            "import",
            &delivery.display().to_string(),
            "--into",
            "other",
            "--root",
            "../x",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("without `..`"), "{err}");

    let said = ok(
        dir,
        &["import", &archive.display().to_string(), "--into", "subs"],
    );
    assert!(
        said.contains("note: the package is `round3/ML-KEM` inside"),
        "{said}"
    );
    let manifest = std::fs::read_to_string(dir.join("subs/ML-KEM/manifest.kdl")).unwrap();
    for want in [
        "root=\"delivery/round3/ML-KEM\"".to_string(),
        "sources \"Reference_Implementation/crypto_kem/ml-kem-512/keccak/fips202.c\"".to_string(),
        "nist-category 1 param=\"ml-kem-512\"".to_string(),
        "// ml-kem-512-reference: from Reference_Implementation/crypto_kem/ml-kem-512/build.sh"
            .to_string(),
    ] {
        assert!(manifest.contains(&want), "{want}\n--- manifest\n{manifest}");
    }
    assert_eq!(manifest.contains("cflags \"-mbmi2\""), bmi2, "{manifest}");
    assert!(!manifest.contains("TODO nist-category"), "{manifest}");
    let checked = check_run_pass(dir, "single all", "ML-KEM", &["ml-kem-512-reference"]);
    assert!(checked.contains("1 instances"), "{checked}");
}

/// KAT files named after their parameter set in a `KATs/` tree of their own
/// (`KATs/ml-kem-512/ml-kem-512_kat.rsp`), not `KAT/crypto_kem/<param>/PQCkemKAT_<sk>.rsp`:
/// found by the sizes of their first record and the parameter set's name, one template for
/// both, and both PASS unedited.
#[test]
fn kat_files_named_after_their_parameter_set_are_found_and_pass() {
    let w = work();
    let dir = w.path();
    let mlkem = support::pqclean("pqcrypto-mlkem", "0.1.1", &dir.join("crates"));
    let pkg = support::ml_kem(&mlkem, &dir.join("pkgs"), &["512", "768"]);
    for (level, sk) in [("512", 1632), ("768", 2400)] {
        let from = pkg.join(format!("KAT/crypto_kem/ml-kem-{level}/PQCkemKAT_{sk}.rsp"));
        let to = pkg.join(format!("KATs/ml-kem-{level}"));
        std::fs::create_dir_all(&to).unwrap();
        std::fs::rename(&from, to.join(format!("ml-kem-{level}_kat.rsp"))).unwrap();
    }
    std::fs::remove_dir_all(pkg.join("KAT")).unwrap();
    ok(
        dir,
        &["import", &pkg.display().to_string(), "--into", "subs"],
    );
    let manifest = std::fs::read_to_string(dir.join("subs/ML-KEM/manifest.kdl")).unwrap();
    assert!(
        manifest.contains("submitted=\"KATs/{param}/{param}_kat.rsp\""),
        "{manifest}"
    );
    check_run_pass(
        dir,
        "single all",
        "ML-KEM",
        &["ml-kem-512-reference", "ml-kem-768-reference"],
    );
}

/// A parameter set's sources in `src/` with shared code in `lib/` beside it and a Makefile
/// above both that builds into `bin/` (`Reference_Implementation/ml-kem-512/{src,lib,bin}`,
/// no `crypto_kem/`), its KAT file named after it: import finds the instance, compiles
/// `lib/`'s Keccak with its `-I lib/fips202`, and the KAT PASSes unedited.
#[test]
fn a_src_and_lib_layout_with_a_wildcard_makefile_passes_unedited() {
    let w = work();
    let dir = w.path();
    let mlkem = support::pqclean("pqcrypto-mlkem", "0.1.1", &dir.join("crates"));
    let pkg = support::ml_kem(&mlkem, &dir.join("pkgs"), &["512"]);
    let reference = pkg.join("Reference_Implementation");
    let param = reference.join("ml-kem-512");
    std::fs::rename(reference.join("crypto_kem/ml-kem-512"), dir.join("flat")).unwrap();
    std::fs::remove_dir(reference.join("crypto_kem")).unwrap();
    std::fs::create_dir_all(param.join("lib/fips202")).unwrap();
    std::fs::create_dir_all(param.join("bin")).unwrap();
    std::fs::rename(dir.join("flat"), param.join("src")).unwrap();
    for f in ["fips202.c", "fips202.h"] {
        std::fs::rename(param.join("src").join(f), param.join("lib/fips202").join(f)).unwrap();
    }
    std::fs::remove_file(param.join("src/Makefile")).unwrap();
    std::fs::write(
        param.join("Makefile"),
        "CC ?= cc\nCFLAGS := -O3 -std=c99\nHASH_SRC := lib/fips202/fips202.c\n\
         INCLUDE := -I src -I lib/fips202\n\n\
         bin/PQCgenKAT_kem: $(wildcard src/*.c) $(HASH_SRC)\n\
         \t$(CC) $(CFLAGS) $(INCLUDE) -o $@ $(wildcard src/*.c) $(HASH_SRC)\n",
    )
    .unwrap();
    let from = pkg.join("KAT/crypto_kem/ml-kem-512/PQCkemKAT_1632.rsp");
    let kats = pkg.join("KATs/Reference_Implementation/ml-kem-512");
    std::fs::create_dir_all(&kats).unwrap();
    std::fs::rename(&from, kats.join("ml-kem-512_kat.rsp")).unwrap();
    std::fs::remove_dir_all(pkg.join("KAT")).unwrap();

    let said = ok(
        dir,
        &["import", &pkg.display().to_string(), "--into", "subs"],
    );
    let manifest = std::fs::read_to_string(dir.join("subs/ML-KEM/manifest.kdl")).unwrap();
    for want in [
        "when impl=\"Reference\" {\n        dir \"Reference_Implementation/{param}/src\"",
        "sources \"Reference_Implementation/ml-kem-512/lib/fips202/fips202.c\"",
        "cflags \"-IReference_Implementation/ml-kem-512/lib/fips202\"",
        "submitted=\"KATs/Reference_Implementation/{param}/{param}_kat.rsp\"",
    ] {
        assert!(
            manifest.contains(want),
            "{want}\n--- manifest\n{manifest}\n--- import\n{said}"
        );
    }
    check_run_pass(dir, "single all", "ML-KEM", &["ml-kem-512-reference"]);
}

/// The fourth package: a round-3-style ML-KEM-512 with its reference and an AVX2
/// implementation (PQClean's C, `.S` and `.inc` files, the 4-way Keccak in `keccak4x/`)
/// that a plain `build.sh` describes, with `-I` and `-m` flags: import, `check --deep` and
/// KAT PASS for both against the submitted file, with no edit.
#[test]
fn a_round3_style_avx2_implementation_with_assembly_and_keccak4x_passes_unedited() {
    if !support::cpu_has("avx2") {
        eprintln!("skipped: this CPU has no avx2");
        return;
    }
    let w = work();
    let dir = w.path();
    let mlkem = support::pqclean("pqcrypto-mlkem", "0.1.1", &dir.join("crates"));
    let pkg = support::ml_kem(&mlkem, &dir.join("pkgs"), &["512"]);
    support::ml_kem_avx2(&mlkem, &pkg, "512");
    let said = ok(
        dir,
        &["import", &pkg.display().to_string(), "--into", "subs"],
    );
    let manifest = std::fs::read_to_string(dir.join("subs/ML-KEM/manifest.kdl")).unwrap();
    for want in [
        "sources \"Optimized_Implementation/crypto_kem/ml-kem-512/keccak4x/KeccakP-1600-times4-SIMD256.c\"",
        "requires-cpu \"avx2\" \"bmi2\" \"popcnt\"",
    ] {
        assert!(
            manifest.contains(want),
            "{want}\n--- manifest\n{manifest}\n--- import\n{said}"
        );
    }
    let checked = check_run_pass(
        dir,
        "single all",
        "ML-KEM",
        &["ml-kem-512-reference", "ml-kem-512-optimized"],
    );
    assert!(checked.contains("2 instances"), "{checked}");
    assert!(checked.contains("ntt.S"), "{checked}");
}
