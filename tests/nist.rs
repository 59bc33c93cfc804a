//! NIST-round packages, as submitters deliver them (issue 25): made at test time from the
//! PQClean sources cargo downloads (`tests/nist_support`), imported with `ngcc-pipe
//! import`, checked, built, their KATs compared with the package's own submitted `.rsp`
//! files, and timed briefly. One package calls OpenSSL, one is given as an archive.

#[path = "nist_support/mod.rs"]
mod support;

use support::{kat_modes, ngcc, ok, pipeline, rec, work};

use std::path::{Path, PathBuf};
use std::process::Command;

use ngcc_pipe::model::{KatMode, Op, StepKind};
use ngcc_pipe::record::{KatStatus, StepData};

#[test]
fn nist_packages_import_check_build_kat_and_time() {
    assert!(
        support::openssl_available(),
        "OpenSSL's headers and libcrypto are needed (Debian: apt-get install libssl-dev pkg-config)"
    );
    let w = work();
    let dir = w.path();
    let scratch = dir.join("crates");
    let mlkem = support::pqclean("pqcrypto-mlkem", "0.1.1", &scratch);
    let frodo = support::pqclean("pqcrypto-frodo", "0.4.11", &scratch);
    let pkgs = dir.join("pkgs");
    let ml = support::ml_kem(&mlkem, &pkgs, &["512", "768", "1024"]);
    let shake = support::frodo_shake(&frodo, &pkgs, "FrodoKEM-SHAKE", "640");
    let aes = support::frodo_aes(&frodo, &pkgs);
    // `NGCC_KEEP_PACKAGES=DIR` keeps the three packages, and a fourth (FrodoKEM-1344-SHAKE),
    // in DIR for trying `import` by hand (docs/tests.md).
    if let Some(keep) = std::env::var_os("NGCC_KEEP_PACKAGES") {
        let keep = PathBuf::from(keep);
        support::frodo_shake(&frodo, &keep, "FrodoKEM-1344-SHAKE", "1344");
        let cp = Command::new("cp")
            .arg("-r")
            .args([&ml, &shake, &aes])
            .arg(&keep)
            .status()
            .unwrap();
        assert!(
            cp.success(),
            "cannot copy the packages into {}",
            keep.display()
        );
    }
    // The FrodoKEM-SHAKE package is delivered as an archive only.
    let archive = pkgs.join("FrodoKEM-SHAKE.tar.gz");
    support::tar_gz(&shake, &archive);
    std::fs::remove_dir_all(&shake).unwrap();

    for pkg in [&ml, &archive, &aes] {
        let out = ok(
            dir,
            &["import", &pkg.display().to_string(), "--into", "subs"],
        );
        for f in ["manifest.kdl", "kat.sha256", "sizes.csv"] {
            assert!(
                out.contains(f),
                "import of {} did not write {f}:\n{out}",
                pkg.display()
            );
        }
    }
    let aes_manifest = std::fs::read_to_string(dir.join("subs/FrodoKEM-AES/manifest.kdl")).unwrap();
    // Only FrodoKEM-640-AES's own code includes OpenSSL (976's rng.c does too, but the
    // harness leaves it out).
    assert!(
        aes_manifest
            .contains("when param=\"frodo640aes\" impl=\"Reference\" {\n        link \"crypto\""),
        "{aes_manifest}"
    );
    assert!(!aes_manifest.contains("param=\"frodo976aes\" impl=\"Reference\" {\n        link"));
    let shake_manifest =
        std::fs::read_to_string(dir.join("subs/FrodoKEM-SHAKE/manifest.kdl")).unwrap();
    assert!(
        shake_manifest.contains("source archive="),
        "{shake_manifest}"
    );
    assert!(
        shake_manifest.contains("requires-cpu \"avx2\""),
        "{shake_manifest}"
    );

    let p = pipeline(dir, "single all", true);
    let checked = ok(dir, &["check", "--deep", &p.display().to_string()]);
    assert!(checked.contains("7 instances"), "{checked}");
    assert!(
        checked.contains("left out, defining what the harness provides: PQCgenKAT_kem.c (main), rng.c (randombytes, randombytes_init)"),
        "{checked}"
    );
    let (code, _, progress) = ngcc(dir, &["run", &p.display().to_string()]);
    assert_eq!(code, 0, "{progress}");

    let out = dir.join("out");
    let instances = [
        ("ML-KEM", "ml-kem-512-reference"),
        ("ML-KEM", "ml-kem-768-reference"),
        ("ML-KEM", "ml-kem-1024-reference"),
        ("FrodoKEM-SHAKE", "frodo640shake-reference"),
        ("FrodoKEM-SHAKE", "frodo640shake-optimized"),
        ("FrodoKEM-AES", "frodo640aes-reference"),
        ("FrodoKEM-AES", "frodo976aes-reference"),
    ];
    for (sub, inst) in instances {
        let build = rec(&out, StepKind::Build, sub, inst, None);
        if inst.ends_with("optimized") && !support::cpu_has("avx2") {
            assert_eq!(build.status.name(), "unsupported");
            continue;
        }
        // The KAT's line in the run's output says its verdicts.
        let kat_line = format!("{sub}/{inst}/kat (");
        let line = progress.lines().find(|l| l.contains(&kat_line));
        assert!(
            line.is_some_and(|l| l.starts_with("ok") && l.ends_with("s): single PASS, all PASS")),
            "{kat_line}: {line:?}\n{progress}"
        );
        let Some(StepData::Build(b)) = &build.data else {
            panic!("{sub}/{inst}: build {:?}: {:?}", build.status, build.reason)
        };
        let left: Vec<String> = b
            .left_out
            .iter()
            .map(|(f, _)| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["PQCgenKAT_kem.c", "rng.c"], "{sub}/{inst}");
        assert_eq!(
            b.api_evaluated,
            sub == "ML-KEM",
            "{sub}/{inst}: sizes through params.h"
        );
        let libs: Vec<&str> = b.libraries.iter().map(|l| l.name.as_str()).collect();
        let want: &[&str] = if inst == "frodo640aes-reference" {
            &["crypto"]
        } else {
            &[]
        };
        assert_eq!(libs, want, "{sub}/{inst}");
        let kat = rec(&out, StepKind::Kat, sub, inst, None);
        let Some(StepData::Kat(k)) = &kat.data else {
            panic!("{sub}/{inst}: kat {:?}: {:?}", kat.status, kat.reason)
        };
        for (mode, counts) in [(KatMode::Single, 1), (KatMode::All, 100)] {
            let m = k.modes.iter().find(|m| m.mode == mode).expect("mode ran");
            assert_eq!(
                m.status,
                KatStatus::Pass,
                "{sub}/{inst} {mode:?}: {:?}",
                m.reason
            );
            let s = m
                .submitted
                .as_ref()
                .expect("compared with the submitted file");
            assert_eq!((s.counts, s.compared), (100, counts), "{sub}/{inst}");
            assert!(s.file.starts_with("KAT/crypto_kem/"), "{}", s.file);
        }
        // The kept all-mode file is byte-identical to the submitted one.
        let all = k.modes.iter().find(|m| m.mode == KatMode::All).unwrap();
        let mine = std::fs::read(out.join(all.rsp.as_ref().unwrap())).unwrap();
        let pkg_root = match sub {
            "FrodoKEM-SHAKE" => None,
            "ML-KEM" => Some(&ml),
            _ => Some(&aes),
        };
        if let Some(root) = pkg_root {
            let theirs = std::fs::read(root.join(&all.submitted.as_ref().unwrap().file)).unwrap();
            assert!(
                mine == theirs,
                "{sub}/{inst}: generated .rsp differs from the submitted one"
            );
        }
        let time = rec(&out, StepKind::Time, sub, inst, Some(Op::Keygen));
        assert_eq!(
            time.status.name(),
            "ok",
            "{sub}/{inst}: time {:?}",
            time.reason
        );
    }
}

/// Replaces one hex digit of `ss` in count `n` of an `.rsp`.
fn corrupt_count(rsp: &Path, n: u32) {
    let text = std::fs::read_to_string(rsp).unwrap();
    let at = text.find(&format!("count = {n}\n")).unwrap();
    let ss = at + text[at..].find("ss = ").unwrap() + "ss = ".len() + 6;
    let old = text.as_bytes()[ss];
    let new = if old == b'0' { '1' } else { '0' };
    let mut t = text.clone();
    t.replace_range(ss..ss + 1, &new.to_string());
    std::fs::write(rsp, t).unwrap();
}

#[test]
fn a_wrong_digit_in_count_57_is_a_mismatch_naming_count_57() {
    let w = work();
    let dir = w.path();
    let mlkem = support::pqclean("pqcrypto-mlkem", "0.1.1", &dir.join("crates"));
    let pkg = support::ml_kem(&mlkem, &dir.join("pkgs"), &["512"]);
    let rsp = pkg.join("KAT/crypto_kem/ml-kem-512/PQCkemKAT_1632.rsp");
    corrupt_count(&rsp, 57);
    ok(
        dir,
        &["import", &pkg.display().to_string(), "--into", "subs"],
    );
    let p = pipeline(dir, "single all", false);
    let (code, _, err) = ngcc(dir, &["run", &p.display().to_string()]);
    assert_eq!(code, 1, "the KAT step fails:\n{err}");
    let out = dir.join("out");
    let kat = rec(&out, StepKind::Kat, "ML-KEM", "ml-kem-512-reference", None);
    let Some(StepData::Kat(k)) = &kat.data else {
        panic!("{:?}", kat.reason)
    };
    let single = k.modes.iter().find(|m| m.mode == KatMode::Single).unwrap();
    assert_eq!(
        single.status,
        KatStatus::Pass,
        "count 0 is intact: {:?}",
        single.reason
    );
    let all = k.modes.iter().find(|m| m.mode == KatMode::All).unwrap();
    assert_eq!(all.status, KatStatus::Mismatch);
    let d = all.diff.as_ref().expect("first difference");
    assert_eq!((d.count, d.field.as_str(), d.offset), (57, "ss", 3));
    let reason = kat.reason.unwrap_or_default();
    assert!(
        reason.contains("count 57, field `ss`: first differing byte at offset 3"),
        "{reason}"
    );

    // The pinned hash notices a package changed after import: the single mode is then
    // not trusted either.
    corrupt_count(&rsp, 3);
    let (code, _, _) = ngcc(dir, &["run", &p.display().to_string()]);
    assert_eq!(code, 1);
    let kat = rec(&out, StepKind::Kat, "ML-KEM", "ml-kem-512-reference", None);
    let Some(StepData::Kat(k)) = &kat.data else {
        panic!("{:?}", kat.reason)
    };
    for m in &k.modes {
        assert_eq!(m.status, KatStatus::Mismatch);
        assert!(
            m.reason
                .as_deref()
                .unwrap_or_default()
                .contains("the package changed"),
            "{:?}",
            m.reason
        );
    }
}

/// A raw tar entry: name, type, data (a symbolic link's target).
type RawEntry<'a> = (&'a str, tar::EntryType, &'a str);

/// A `.tar.gz` whose entries are given raw (the tar builder refuses these names).
fn hostile(path: &Path, entries: &[RawEntry<'_>]) {
    let f = std::fs::File::create(path).unwrap();
    let gz = flate2::write::GzEncoder::new(f, flate2::Compression::default());
    let mut b = tar::Builder::new(gz);
    for (name, kind, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(*kind);
        h.set_mode(0o644);
        if *kind == tar::EntryType::Symlink {
            h.set_size(0);
            h.set_link_name(data).unwrap();
        } else {
            h.set_size(data.len() as u64);
        }
        let gnu = h.as_gnu_mut().unwrap();
        gnu.name = [0; 100];
        gnu.name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_cksum();
        let body: &[u8] = if *kind == tar::EntryType::Symlink {
            &[]
        } else {
            data.as_bytes()
        };
        b.append(&h, body).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap();
}

#[test]
fn hostile_archives_are_refused_and_write_nothing_outside() {
    let w = work();
    let dir = w.path();
    let victim = dir.join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    let abs = format!("{}/abs.c", victim.display());
    let reg = tar::EntryType::Regular;
    let cases: Vec<(&str, Vec<RawEntry<'_>>, &str)> = vec![
        (
            "dotdot",
            vec![("pkg/../../victim/up.c", reg, "int x;")],
            "climbs out with `..`",
        ),
        ("absolute", vec![(abs.as_str(), reg, "int x;")], "absolute"),
        (
            "symlink",
            vec![
                ("pkg/out", tar::EntryType::Symlink, "../../victim"),
                ("pkg/out/through.c", reg, "int x;"),
            ],
            "leaves the folder",
        ),
    ];
    for (name, entries, why) in &cases {
        let a = dir.join(format!("{name}.tar.gz"));
        hostile(&a, entries);
        let (code, out, err) = ngcc(dir, &["import", &a.display().to_string(), "--into", "subs"]);
        assert_eq!(code, 2, "{name}: refused\n{out}\n{err}");
        assert!(
            err.contains("refused") && err.contains(why),
            "{name}: {err}"
        );
        assert!(!dir.join("subs").exists(), "{name}: wrote a submission");
    }
    let left: Vec<_> = std::fs::read_dir(&victim).unwrap().collect();
    assert!(left.is_empty(), "files written outside: {left:?}");
    let strays: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".tar.gz") && n != "victim")
        .collect();
    assert!(strays.is_empty(), "left behind: {strays:?}");
}

/// Removes the `#define CRYPTO_ALGNAME` line of an api.h.
fn drop_algname(api_h: &Path) {
    let text = std::fs::read_to_string(api_h).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| !l.contains("CRYPTO_ALGNAME"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(kept, text, "{} had a CRYPTO_ALGNAME", api_h.display());
    std::fs::write(api_h, kept).unwrap();
}

#[test]
fn an_api_h_without_algname_takes_the_name_from_the_submitted_file() {
    let w = work();
    let dir = w.path();
    let mlkem = support::pqclean("pqcrypto-mlkem", "0.1.1", &dir.join("crates"));
    let pkg = support::ml_kem(&mlkem, &dir.join("pkgs"), &["512"]);
    drop_algname(&pkg.join("Reference_Implementation/crypto_kem/ml-kem-512/api.h"));
    // Another file of the same size, in another folder: the parameter set's own wins.
    let submitted = pkg.join("KAT/crypto_kem/ml-kem-512/PQCkemKAT_1632.rsp");
    let text = std::fs::read_to_string(&submitted).unwrap();
    std::fs::create_dir_all(pkg.join("KAT/crypto_kem/draft")).unwrap();
    std::fs::write(
        pkg.join("KAT/crypto_kem/draft/PQCkemKAT_1632.rsp"),
        text.replacen("# ML-KEM-512", "# Kyber512-draft", 1),
    )
    .unwrap();
    let said = ok(
        dir,
        &["import", &pkg.display().to_string(), "--into", "subs"],
    );
    assert!(
        said.contains("note: Reference_Implementation/crypto_kem/ml-kem-512: api.h defines no CRYPTO_ALGNAME: its submitted KAT file is `KAT/crypto_kem/ml-kem-512/PQCkemKAT_1632.rsp`, the only one of that size in a folder named `ml-kem-512`; the KAT step takes the algorithm's name `ML-KEM-512` from that file's first line"),
        "{said}"
    );
    let manifest = std::fs::read_to_string(dir.join("subs/ML-KEM/manifest.kdl")).unwrap();
    assert!(manifest.contains("algorithm \"ML-KEM-512\""), "{manifest}");
    support::check_run_pass(dir, "single all", "ML-KEM", &["ml-kem-512-reference"]);
    let out = dir.join("out");
    // The header written is the submitted file's: the whole file is byte-identical.
    let kat = rec(&out, StepKind::Kat, "ML-KEM", "ml-kem-512-reference", None);
    let Some(StepData::Kat(k)) = &kat.data else {
        panic!()
    };
    let all = k.modes.iter().find(|m| m.mode == KatMode::All).unwrap();
    let mine = std::fs::read_to_string(out.join(all.rsp.as_ref().unwrap())).unwrap();
    assert!(
        mine == text,
        "generated .rsp differs from the submitted one"
    );
}

#[test]
fn additional_implementations_with_the_common_layout_are_imported() {
    let w = work();
    let dir = w.path();
    let mlkem = support::pqclean("pqcrypto-mlkem", "0.1.1", &dir.join("crates"));
    let pkgs = dir.join("pkgs");
    let pkg = support::ml_kem(&mlkem, &pkgs, &["512"]);
    // `Additional_Implementations/avx2/crypto_kem/ml-kem-512/`: the clean code again,
    // built with the `-m` options an AVX2 build gives in its Makefile.
    let spec = support::ParamSpec {
        from: "crypto_kem/ml-kem-512/clean",
        namespace: "PQCLEAN_MLKEM512_CLEAN_",
        name: "ml-kem-512",
        common: &["fips202.c", "fips202.h", "compat.h"],
        own: vec![(
            "Makefile",
            "CFLAGS = -O3 -std=c99 -mavx2 -mbmi2\nSOURCES = $(wildcard *.c)\n\nPQCgenKAT_kem: $(SOURCES)\n\t$(CC) $(CFLAGS) -o $@ $(SOURCES)\n".to_string(),
        )],
        api_via_params: Some("ML-KEM-512"),
        rng_openssl: false,
    };
    support::make_param(&mlkem, &pkg, "Additional_Implementations/avx2", &spec);
    // A folder of another layout is named, not guessed at.
    std::fs::create_dir_all(pkg.join("Additional_Implementations/fpga/rtl")).unwrap();
    std::fs::write(
        pkg.join("Additional_Implementations/fpga/rtl/top.v"),
        "module top; endmodule\n",
    )
    .unwrap();
    let said = ok(
        dir,
        &["import", &pkg.display().to_string(), "--into", "subs"],
    );
    assert!(
        said.contains("note: Additional_Implementations/fpga/ not imported: it is not laid out as `Additional_Implementations/<name>/crypto_kem/<param>/`"),
        "{said}"
    );
    let manifest = std::fs::read_to_string(dir.join("subs/ML-KEM/manifest.kdl")).unwrap();
    for want in [
        "matrix param=\"ml-kem-512\" impl=\"Reference avx2\"",
        "when impl=\"avx2\" {\n        dir \"Additional_Implementations/avx2/crypto_kem/{param}\"\n    }",
        "when param=\"ml-kem-512\" impl=\"avx2\" {\n        cflags \"-mavx2\" \"-mbmi2\"\n        requires-cpu \"avx2\" \"bmi2\"",
    ] {
        assert!(manifest.contains(want), "{want}\n--- manifest\n{manifest}");
    }
    let sha = std::fs::read_to_string(dir.join("subs/ML-KEM/kat.sha256")).unwrap();
    assert!(sha.contains("  ml-kem-512-avx2\n"), "{sha}");
    let p = pipeline(dir, "single", false);
    let checked = ok(dir, &["check", "--deep", &p.display().to_string()]);
    assert!(checked.contains("2 instances"), "{checked}");
    assert!(
        checked.contains("ML-KEM/ml-kem-512-avx2: aes.c cbd.c"),
        "{checked}"
    );
    ok(dir, &["run", &p.display().to_string()]);
    let out = dir.join("out");
    let build = rec(&out, StepKind::Build, "ML-KEM", "ml-kem-512-avx2", None);
    if !support::cpu_has("avx2") {
        assert_eq!(build.status.name(), "unsupported");
        return;
    }
    let Some(StepData::Build(b)) = &build.data else {
        panic!("build {:?}: {:?}", build.status, build.reason)
    };
    // Built from its own folder, with its Makefile's `-m` options.
    let folder = Path::new("Additional_Implementations/avx2/crypto_kem/ml-kem-512");
    assert!(!b.objects.is_empty());
    for (src, _) in &b.objects {
        assert!(
            src.parent().is_some_and(|d| d.ends_with(folder)),
            "{}",
            src.display()
        );
    }
    assert!(b.flags.iter().any(|f| f == "-mavx2"), "{:?}", b.flags);
    for (mode, status, reason) in kat_modes(&out, "ML-KEM", "ml-kem-512-avx2") {
        assert_eq!(status, KatStatus::Pass, "{mode:?}: {reason:?}");
    }
}

#[test]
fn check_deep_names_a_link_whose_library_is_not_found() {
    let w = work();
    let dir = w.path();
    support::imported_ml_kem_512(dir);
    let text = support::add_after_api(dir, "    link \"ngccnosuchlib\"\n");
    let line = 1 + text
        .lines()
        .position(|l| l.contains("ngccnosuchlib"))
        .unwrap();
    let p = pipeline(dir, "single", false);
    // The plain check does not look for libraries; the deep one does.
    ok(dir, &["check", &p.display().to_string()]);
    let (code, out, err) = ngcc(dir, &["check", "--deep", &p.display().to_string()]);
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("`link \"ngccnosuchlib\"`: system library `ngccnosuchlib` not found"),
        "{err}"
    );
    assert!(
        err.contains(&format!("manifest.kdl:{line}:10]")),
        "not at line {line}:\n{err}"
    );
}
