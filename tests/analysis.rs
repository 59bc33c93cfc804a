//! Integration tests of the analyses on real code: prototypes of the PQClean headers of
//! both crate trees, a wrapped ML-KEM-768 build driven through `dlopen`, nested wrapper
//! counting, and the survey on fixtures and on ML-KEM-768 clean.
//!
//! They need `gcc` and the PQClean trees of `pqcrypto-mlkem` 0.1.1 and `pqcrypto-frodo`
//! 0.4.11, which they fetch with cargo (as the `source` step does) when not cached (group
//! `crates`, see `tests/common/require.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use ngcc_pipe::model::PrimitiveFn;
use ngcc_pipe::profile::{
    generate_wrappers, parse_prototypes, provided_symbols_used, wrap_link_flags,
};
use ngcc_pipe::record::Verdict;
use ngcc_pipe::survey::{family_of_symbol, survey, SurveyInput};

mod common;
use common::{require_crates, FRODO_CRATE, MLKEM_CRATE};

/// Whether both PQClean trees can be had (see [`require_crates`]); a test that reads them
/// returns at once when not.
fn trees() -> bool {
    require_crates(&[MLKEM_CRATE, FRODO_CRATE])
}

/// The PQClean tree of a crate (`pqcrypto-mlkem-0.1.1`), fetched with cargo if needed (once
/// per process: parallel tests share it).
fn pqclean(krate: &str) -> PathBuf {
    let (name, version) = krate.rsplit_once('-').expect("crate-version");
    common::registry_crate(name, version)
        .unwrap_or_else(|e| panic!("{e}"))
        .join("pqclean")
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/analysis")
}

/// Run gcc; panic with its output on failure.
fn gcc(args: &[&str]) {
    let out = Command::new("gcc").args(args).output().expect("run gcc");
    assert!(
        out.status.success(),
        "gcc {}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    // Our own C (generated wrappers, fixtures) must be warning-free.
    assert!(
        out.stderr.is_empty(),
        "gcc warnings for {}:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Compile `src` to `out_dir/<stem>.o` with `-fPIC -O2 -Wall -Wextra` and the includes.
fn compile(src: &Path, out_dir: &Path, includes: &[&Path]) -> PathBuf {
    compile_with(src, out_dir, includes, &[])
}

fn compile_with(src: &Path, out_dir: &Path, includes: &[&Path], extra: &[&str]) -> PathBuf {
    let stem = src.file_stem().unwrap().to_string_lossy();
    let parent = src.parent().unwrap().file_name().unwrap().to_string_lossy();
    let obj = out_dir.join(format!("{parent}_{stem}.o"));
    let mut args: Vec<String> = ["-c", "-fPIC", "-O2", "-Wall", "-Wextra"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    for i in includes {
        args.push(format!("-I{}", i.display()));
    }
    args.push(src.display().to_string());
    args.push("-o".into());
    args.push(obj.display().to_string());
    gcc(&args.iter().map(String::as_str).collect::<Vec<_>>());
    obj
}

fn c_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    v.sort();
    v
}

fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "c" || e == "h"))
        .collect();
    v.sort();
    v
}

/// Count lines that start a function declaration (`void name(` / `int name(`) — an
/// independent, regex-free count to compare the nom parser with.
fn naive_declaration_count(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            let l = l.trim_start();
            (l.starts_with("void ") || l.starts_with("int "))
                && l.contains('(')
                && !l.trim_end().ends_with('{')
        })
        .count()
}

#[test]
fn prototypes_of_real_pqclean_headers_in_both_trees() {
    if !trees() {
        return;
    }
    for krate in ["pqcrypto-mlkem-0.1.1", "pqcrypto-frodo-0.4.11"] {
        let common = pqclean(krate).join("common");
        for h in [
            "fips202.h",
            "sha2.h",
            "aes.h",
            "sp800-185.h",
            "randombytes.h",
        ] {
            let text = std::fs::read_to_string(common.join(h)).unwrap();
            let protos = parse_prototypes(&text);
            assert_eq!(
                protos.len(),
                naive_declaration_count(&text),
                "{krate} {h}: {:?}",
                protos.iter().map(|p| &p.name).collect::<Vec<_>>()
            );
            for p in &protos {
                assert!(!p.is_static && !p.variadic, "{krate} {h} {}", p.name);
                for q in &p.params {
                    assert!(q.name.is_some() || h == "randombytes.h", "{h} {}", p.name);
                }
            }
        }
        let fips = std::fs::read_to_string(common.join("fips202.h")).unwrap();
        let protos = parse_prototypes(&fips);
        let absorb = protos.iter().find(|p| p.name == "shake128_absorb").unwrap();
        assert_eq!(
            absorb.declare("f"),
            "void f(shake128ctx *a0, const uint8_t *a1, size_t a2)"
        );
        let shake256 = protos.iter().find(|p| p.name == "shake256").unwrap();
        assert_eq!(
            shake256.declare("f"),
            "void f(uint8_t *a0, size_t a1, const uint8_t *a2, size_t a3)"
        );
        let aes = std::fs::read_to_string(common.join("aes.h")).unwrap();
        let protos = parse_prototypes(&aes);
        let ecb = protos.iter().find(|p| p.name == "aes128_ecb").unwrap();
        assert_eq!(
            ecb.declare("f"),
            "void f(unsigned char *a0, const unsigned char *a1, size_t a2, const aes128ctx *a3)"
        );
        // fips202.h declares real names; randombytes.h declares a macro alias.
        let rb = std::fs::read_to_string(common.join("randombytes.h")).unwrap();
        let decls = ngcc_pipe::profile::parse_header(&rb);
        assert_eq!(decls.resolve("randombytes"), "PQCLEAN_randombytes");
        assert!(ngcc_pipe::profile::parse_header(&fips).aliases.is_empty());
    }
}

/// One parsed `ENTRY` line of the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    family: String,
    calls: u64,
    outer: u64,
    cycles: u64,
}

/// What the driver printed: entries by symbol, ticks of the whole loop, calibration.
#[derive(Debug)]
struct Run {
    entries: BTreeMap<String, Entry>,
    total: u64,
    cal_outer: f64,
    cal_inner: f64,
}

impl Run {
    fn family_cycles(&self, family: &str) -> u64 {
        self.entries
            .values()
            .filter(|e| e.family == family)
            .map(|e| e.cycles)
            .sum()
    }
}

fn run_driver(driver: &Path, so: &Path, func: &str, iters: u32) -> Run {
    let out = Command::new(driver)
        .arg(so)
        .arg(func)
        .arg(iters.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "driver failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut run = Run {
        entries: BTreeMap::new(),
        total: 0,
        cal_outer: f64::NAN,
        cal_inner: f64::NAN,
    };
    for line in stdout.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["ENTRY", sym, fam, calls, outer, cycles] => {
                run.entries.insert(
                    sym.to_string(),
                    Entry {
                        family: fam.to_string(),
                        calls: calls.parse().unwrap(),
                        outer: outer.parse().unwrap(),
                        cycles: cycles.parse().unwrap(),
                    },
                );
            }
            ["TOTAL", t] => run.total = t.parse().unwrap(),
            ["CAL", o, i] => {
                (run.cal_outer, run.cal_inner) = (o.parse().unwrap(), i.parse().unwrap())
            }
            _ => panic!("unexpected driver line `{line}`"),
        }
    }
    run
}

const RNG_SHIM: &str = "#include <stddef.h>\n#include <stdint.h>\n\
    void ngcc_set_randombytes(int (*g)(uint8_t *, size_t));\n\
    int PQCLEAN_randombytes(uint8_t *b, size_t n);\n\
    static int (*f)(uint8_t *, size_t);\n\
    void ngcc_set_randombytes(int (*g)(uint8_t *, size_t)) { f = g; }\n\
    int PQCLEAN_randombytes(uint8_t *b, size_t n) { return f(b, n); }\n";

fn build_driver(dir: &Path) -> PathBuf {
    let driver = dir.join("driver");
    gcc(&[
        "-O2",
        "-Wall",
        "-Wextra",
        fixtures().join("driver.c").to_str().unwrap(),
        "-o",
        driver.to_str().unwrap(),
        "-ldl",
    ]);
    driver
}

fn link_shared(out: &Path, objects: &[PathBuf], flags: &[String]) {
    let mut args: Vec<String> = vec!["-shared".into(), "-o".into(), out.display().to_string()];
    args.extend(objects.iter().map(|o| o.display().to_string()));
    args.extend(flags.iter().cloned());
    gcc(&args.iter().map(String::as_str).collect::<Vec<_>>());
}

/// A profile build of one PQClean instance, as the engine would make it: instance
/// objects, primitive objects, generated wrappers for every provided function the
/// instance uses (family from its name), the DRNG shim, linked with `--wrap`.
struct WrappedBuild {
    so: PathBuf,
    functions: Vec<PrimitiveFn>,
    used: Vec<String>,
    generated: String,
}

/// `flags` are added to every compile (e.g. the campaign's `-O3 -march=native`),
/// `link` to the link.
fn wrapped_build(
    root: &Path,
    instance: &str,
    primitives: &[&str],
    flags: &[&str],
    link: &[String],
    dir: &Path,
) -> WrappedBuild {
    let common = root.join("common");
    let inst_dir = root.join(instance);
    let inst_objs: Vec<PathBuf> = c_files(&inst_dir)
        .iter()
        .map(|c| compile_with(c, dir, &[&common, &inst_dir], flags))
        .collect();
    let prim_objs: Vec<PathBuf> = primitives
        .iter()
        .map(|p| compile_with(&common.join(p), dir, &[&common], flags))
        .collect();
    // Which provided functions does the instance call? Undefined in the instance
    // objects, defined by the primitive objects.
    let used = provided_symbols_used(&inst_objs, &prim_objs).unwrap();
    let functions: Vec<PrimitiveFn> = used
        .iter()
        .map(|s| PrimitiveFn {
            symbol: s.clone(),
            family: family_of_symbol(s).expect("a hash/cipher name").to_string(),
        })
        .collect();
    let headers: Vec<(String, String)> = [
        "common/fips202.h",
        "common/aes.h",
        "common/sha2.h",
        "common/randombytes.h",
    ]
    .iter()
    .map(|h| {
        (
            h.to_string(),
            std::fs::read_to_string(root.join(h)).unwrap(),
        )
    })
    .collect();
    let generated = generate_wrappers(&headers, &functions, Some("PQCLEAN_randombytes")).unwrap();
    let wrappers_c = dir.join("prof_wrappers.c");
    std::fs::write(&wrappers_c, &generated).unwrap();
    let wrap_obj = compile(&wrappers_c, dir, &[root]);
    let shim_c = dir.join("rng_shim.c");
    std::fs::write(&shim_c, RNG_SHIM).unwrap();
    let shim_obj = compile(&shim_c, dir, &[]);
    let so = dir.join("libinstance_prof.so");
    let mut objects = inst_objs;
    objects.extend(prim_objs);
    objects.extend([wrap_obj, shim_obj]);
    let mut link_flags = wrap_link_flags(&functions, Some("PQCLEAN_randombytes"));
    link_flags.extend(link.iter().cloned());
    link_shared(&so, &objects, &link_flags);
    WrappedBuild {
        so,
        functions,
        used,
        generated,
    }
}

#[test]
fn wrapped_ml_kem_768_counts_calls_reproducibly() {
    if !trees() {
        return;
    }
    let root = pqclean("pqcrypto-mlkem-0.1.1");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let b = wrapped_build(
        &root,
        "crypto_kem/ml-kem-768/clean",
        &["fips202.c"],
        &[],
        &[],
        dir,
    );
    if let Ok(keep) = std::env::var("NGCC_KEEP_GENERATED") {
        std::fs::write(keep, &b.generated).unwrap();
    }
    for expected in [
        "sha3_256",
        "sha3_512",
        "shake128_absorb",
        "shake128_squeezeblocks",
        "shake256",
    ] {
        assert!(
            b.used.iter().any(|u| u == expected),
            "{expected} not in {:?}",
            b.used
        );
    }

    // The linked object exports the API and the profiling ABI.
    let so_syms = ngcc_pipe::survey::read_object_symbols(&b.so).unwrap();
    for name in [
        "PQCLEAN_MLKEM768_CLEAN_crypto_kem_keypair",
        "ngcc_prof_entries",
        "ngcc_prof_reset",
        "ngcc_prof_calibrate",
        "__wrap_shake256",
    ] {
        assert!(
            so_syms
                .defined
                .iter()
                .any(|d| d.name == name && d.global && d.function),
            "{name} not exported"
        );
    }

    let driver = build_driver(dir);
    let keygen = "PQCLEAN_MLKEM768_CLEAN_crypto_kem_keypair";
    let first = run_driver(&driver, &b.so, keygen, 20);
    let second = run_driver(&driver, &b.so, keygen, 20);
    let (e1, e2) = (&first.entries, &second.entries);

    // Every wrapped symbol has a table entry, the DRNG under family "drng".
    assert_eq!(e1.len(), b.functions.len() + 1);
    assert_eq!(e1["PQCLEAN_randombytes"].family, "drng");
    // ML-KEM keygen draws its 64 random bytes with one call.
    assert_eq!(e1["PQCLEAN_randombytes"].calls, 20);
    // hash_g (sha3_512) once per keygen, the matrix from SHAKE128.
    assert_eq!(e1["sha3_512"].calls, 20);
    assert!(e1["shake128_absorb"].calls >= 20 * 9, "{e1:?}");
    assert!(e1["shake128_squeezeblocks"].calls >= e1["shake128_absorb"].calls);
    let total_calls: u64 = e1.values().map(|e| e.calls).sum();
    assert!(total_calls > 0);
    for (sym, e) in e1 {
        // Calls are deterministic: the same in two runs.
        assert_eq!(e.calls, e2[sym].calls, "{sym}");
        assert_eq!(e.outer, e2[sym].outer, "{sym}");
        // Nested counting never exceeds the total.
        assert!(e.outer <= e.calls, "{sym}: {e:?}");
        // ML-KEM calls each primitive from its own code: nothing nests here.
        assert_eq!(e.outer, e.calls, "{sym}");
        if e.outer > 0 {
            assert!(e.cycles > 0, "{sym}: outermost calls but no ticks");
        }
    }
    assert!(
        first.cal_outer.is_finite() && first.cal_outer >= 0.0,
        "{first:?}"
    );
    assert!(
        first.cal_inner.is_finite() && first.cal_inner > 0.0,
        "{first:?}"
    );
    // The hash/XOF share of keygen, wrapper overhead subtracted as the runner does
    // (inner ticks per outermost call from the hash, outer ticks per call from the total).
    let outer_calls: u64 = e1
        .values()
        .filter(|e| e.family != "drng")
        .map(|e| e.outer)
        .sum();
    let hash = first.family_cycles("keccak") as f64 - outer_calls as f64 * first.cal_inner;
    let total =
        first.total as f64 - e1.values().map(|e| e.outer).sum::<u64>() as f64 * first.cal_outer;
    let share = hash / total;
    eprintln!(
        "ML-KEM-768 keygen x20: {total_calls} wrapped calls, keccak share {:.1}%, calibration outer {:.1} inner {:.1} ticks/call",
        share * 100.0,
        first.cal_outer,
        first.cal_inner
    );
    // Measured here: 34-40% at -O2 and 29-32% at -O3 -march=native, best of 5 rounds on a
    // shared 2-core machine. The band is 30-90%; the floor sits on this machine's
    // figure, so the test asserts a looser band to stay stable under load.
    assert!((0.15..=0.90).contains(&share), "keccak share {share}");
}

/// Issue #9: the engine's local binding (`CODEGEN_FLAGS` and the export map) leaves the
/// `--wrap` wrappers every call of a declared primitive and exports only the API and hooks.
#[test]
fn local_binding_keeps_every_wrapped_call_and_exports_only_the_api() {
    if !trees() {
        return;
    }
    use ngcc_pipe::run::steps::link::{export_map, CODEGEN_FLAGS};
    use object::{Object, ObjectSymbol};
    let root = pqclean("pqcrypto-mlkem-0.1.1");
    let tmp = tempfile::tempdir().unwrap();
    let (plain_dir, local_dir) = (tmp.path().join("plain"), tmp.path().join("local"));
    std::fs::create_dir_all(&plain_dir).unwrap();
    std::fs::create_dir_all(&local_dir).unwrap();
    let inst = "crypto_kem/ml-kem-768/clean";
    let flags = ["-O3", "-march=native"];
    let plain = wrapped_build(&root, inst, &["fips202.c"], &flags, &[], &plain_dir);
    let map = local_dir.join("exports.map");
    std::fs::write(&map, export_map("PQCLEAN_MLKEM768_CLEAN_")).unwrap();
    let local_flags: Vec<&str> = flags.iter().chain(CODEGEN_FLAGS).copied().collect();
    let local = wrapped_build(
        &root,
        inst,
        &["fips202.c"],
        &local_flags,
        &[format!("-Wl,--version-script={}", map.display())],
        &local_dir,
    );
    assert_eq!(plain.used, local.used);

    // Dynamic symbols: the API and the ngcc_ hooks only.
    let data = std::fs::read(&local.so).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let mut exported: Vec<String> = file
        .dynamic_symbols()
        .filter(|s| s.is_definition() && s.is_global())
        .map(|s| s.name().unwrap().to_string())
        .collect();
    exported.sort();
    assert!(
        exported
            .iter()
            .all(|n| n.starts_with("PQCLEAN_MLKEM768_CLEAN_crypto_kem_") || n.starts_with("ngcc_")),
        "{exported:?}"
    );
    for name in [
        "PQCLEAN_MLKEM768_CLEAN_crypto_kem_keypair",
        "PQCLEAN_MLKEM768_CLEAN_crypto_kem_enc",
        "PQCLEAN_MLKEM768_CLEAN_crypto_kem_dec",
        "ngcc_set_randombytes",
        "ngcc_prof_entries",
    ] {
        assert!(
            exported.iter().any(|n| n == name),
            "{name} not in {exported:?}"
        );
    }

    // Calls per wrapped symbol are the same with and without local binding.
    let driver = build_driver(tmp.path());
    let keygen = "PQCLEAN_MLKEM768_CLEAN_crypto_kem_keypair";
    let a = run_driver(&driver, &plain.so, keygen, 5);
    let b = run_driver(&driver, &local.so, keygen, 5);
    let calls = |r: &Run| -> Vec<(String, u64)> {
        r.entries
            .iter()
            .map(|(s, e)| (s.clone(), e.calls))
            .collect()
    };
    assert_eq!(calls(&a), calls(&b));
    assert!(
        b.entries["shake128_absorb"].calls >= 5 * 9,
        "{:?}",
        b.entries
    );
}

#[test]
fn frodokem_640_aes_and_shake_time_is_attributed_to_aes_and_shake() {
    if !trees() {
        return;
    }
    let root = pqclean("pqcrypto-frodo-0.4.11");
    let tmp = tempfile::tempdir().unwrap();
    let aes_dir = tmp.path().join("aes");
    let shake_dir = tmp.path().join("shake");
    std::fs::create_dir_all(&aes_dir).unwrap();
    std::fs::create_dir_all(&shake_dir).unwrap();
    let prims = ["fips202.c", "aes.c"];
    let aes = wrapped_build(
        &root,
        "crypto_kem/frodokem640aes/clean",
        &prims,
        &[],
        &[],
        &aes_dir,
    );
    let shake = wrapped_build(
        &root,
        "crypto_kem/frodokem640shake/clean",
        &prims,
        &[],
        &[],
        &shake_dir,
    );
    let driver = build_driver(tmp.path());
    let ra = run_driver(
        &driver,
        &aes.so,
        "PQCLEAN_FRODOKEM640AES_CLEAN_crypto_kem_keypair",
        3,
    );
    let rs = run_driver(
        &driver,
        &shake.so,
        "PQCLEAN_FRODOKEM640SHAKE_CLEAN_crypto_kem_keypair",
        3,
    );
    assert!(ra.family_cycles("aes") > 0, "{ra:?}");
    assert!(rs.family_cycles("keccak") > 0, "{rs:?}");
    assert!(
        !shake.functions.iter().any(|f| f.family == "aes"),
        "{:?}",
        shake.used
    );
    // Generating the matrix A dominates FrodoKEM: it runs in AES for one, SHAKE for the other.
    let a_share = ra.family_cycles("aes") as f64 / ra.total as f64;
    let s_share = rs.family_cycles("keccak") as f64 / rs.total as f64;
    eprintln!(
        "FrodoKEM-640 keygen: AES variant {:.1}% in aes, SHAKE variant {:.1}% in keccak",
        a_share * 100.0,
        s_share * 100.0
    );
    assert!(a_share > 0.05 && a_share <= 1.0, "{a_share}");
    assert!(s_share > 0.05 && s_share <= 1.0, "{s_share}");
}

#[test]
fn nested_wrapped_calls_are_counted_but_timed_once() {
    let nest = fixtures().join("nest");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let objs: Vec<PathBuf> = ["caller.c", "outer.c", "inner.c"]
        .iter()
        .map(|c| compile(&nest.join(c), dir, &[&nest]))
        .collect();
    let functions = vec![
        PrimitiveFn {
            symbol: "outer_hash".into(),
            family: "toy".into(),
        },
        PrimitiveFn {
            symbol: "inner_hash".into(),
            family: "toy".into(),
        },
        PrimitiveFn {
            symbol: "ghost_hash".into(),
            family: "toy".into(),
        },
    ];
    let headers = vec![(
        "prims.h".to_string(),
        std::fs::read_to_string(nest.join("prims.h")).unwrap(),
    )];
    let c = generate_wrappers(&headers, &functions, None).unwrap();
    assert!(c.contains("void __wrap_outer_hash(uint8_t *a0, const uint8_t *a1, size_t a2)"));
    let wrappers_c = dir.join("prof_wrappers.c");
    std::fs::write(&wrappers_c, &c).unwrap();
    let mut objects = objs;
    objects.push(compile(&wrappers_c, dir, &[&nest]));
    let so = dir.join("libnest.so");
    link_shared(&so, &objects, &wrap_link_flags(&functions, None));
    let driver = build_driver(dir);
    let e = run_driver(&driver, &so, "nest_keypair", 10).entries;
    // Per call: outer_hash once (3 nested inner_hash), inner_hash once directly.
    assert_eq!((e["outer_hash"].calls, e["outer_hash"].outer), (10, 10));
    assert_eq!((e["inner_hash"].calls, e["inner_hash"].outer), (40, 10));
    assert!(e["outer_hash"].cycles > 0 && e["inner_hash"].cycles > 0);
    // Declared but defined nowhere: the object still loads, the entry stays at zero.
    assert_eq!(e["ghost_hash"].calls, 0);
}

fn survey_fixture(name: &str, compiled: &[&str], dir: &Path) -> ngcc_pipe::record::SurveyData {
    let mlkem = pqclean("pqcrypto-mlkem-0.1.1");
    let common = mlkem.join("common");
    let root = fixtures();
    let fixture = root.join(name);
    let instance_objects: Vec<(PathBuf, PathBuf)> = compiled
        .iter()
        .map(|c| {
            let src = fixture.join(c);
            let obj = compile(&src, dir, &[&fixture, &common]);
            (src, obj)
        })
        .collect();
    let fips_obj = compile(&common.join("fips202.c"), dir, &[&common]);
    let input = SurveyInput {
        root: root.clone(),
        instance_sources: all_files(&fixture),
        compiled: compiled.iter().map(|c| fixture.join(c)).collect(),
        primitive_sources: vec![common.join("fips202.c")],
        instance_objects,
        primitive_objects: vec![fips_obj],
        primitives: ["shake256", "sha3_256", "shake128_absorb"]
            .iter()
            .map(|s| PrimitiveFn {
                symbol: s.to_string(),
                family: "keccak".into(),
            })
            .collect(),
        api_symbols: Vec::new(),
        namespace: String::new(),
    };
    survey(&input).unwrap()
}

#[test]
fn survey_own_keccak_is_a_bypass_with_the_symbol_named() {
    if !trees() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = survey_fixture("bypass", &["kem.c", "keccak.c"], tmp.path());
    assert_eq!(d.verdict, Verdict::Bypass, "{}", d.summary);
    assert!(
        d.summary.contains("KeccakF1600_StatePermute"),
        "{}",
        d.summary
    );
    let own: BTreeMap<&str, bool> = d
        .own_symbols
        .iter()
        .map(|s| (s.name.as_str(), s.referenced))
        .collect();
    assert_eq!(own.get("KeccakF1600_StatePermute"), Some(&true), "{own:?}");
    assert_eq!(own.get("fixture_shake256"), Some(&true), "{own:?}");
    assert!(d.provided_used.is_empty(), "{:?}", d.provided_used);
    let hit = d
        .source_hits
        .iter()
        .find(|h| h.file == "bypass/keccak.c" && h.text.contains("0x0000000000008082"))
        .expect("round-constant hit");
    assert!(hit.reachable && hit.family == "keccak");
    eprintln!("bypass fixture: {}", d.summary);
}

#[test]
fn survey_dead_keccak_file_is_provided_only_with_unreachable_hits() {
    if !trees() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = survey_fixture("dead", &["kem.c", "sha256_unused.c"], tmp.path());
    assert_eq!(d.verdict, Verdict::ProvidedOnly, "{}", d.summary);
    assert_eq!(d.provided_used, ["shake256"]);
    let dead: Vec<_> = d
        .source_hits
        .iter()
        .filter(|h| h.file == "dead/keccak_unused.c")
        .collect();
    assert!(!dead.is_empty());
    assert!(dead.iter().all(|h| !h.reachable));
    assert_eq!(
        dead[0].note.as_deref(),
        Some("file not compiled into the object")
    );
    // Compiled, but nothing calls it.
    let sha = d
        .source_hits
        .iter()
        .find(|h| h.file == "dead/sha256_unused.c")
        .expect("sha2 constant hit");
    assert_eq!(sha.family, "sha2");
    assert!(!sha.reachable);
    assert!(
        sha.note
            .as_deref()
            .unwrap()
            .contains("fixture_sha256_first_round_constant"),
        "{:?}",
        sha.note
    );
    assert!(d.summary.contains("not reachable"), "{}", d.summary);
    eprintln!("dead fixture: {}", d.summary);
}

#[test]
fn survey_ml_kem_768_clean_is_provided_only() {
    if !trees() {
        return;
    }
    let root = pqclean("pqcrypto-mlkem-0.1.1");
    let common = root.join("common");
    let inst_dir = root.join("crypto_kem/ml-kem-768/clean");
    let tmp = tempfile::tempdir().unwrap();
    let sources = all_files(&inst_dir);
    let compiled: BTreeSet<PathBuf> = c_files(&inst_dir).into_iter().collect();
    let instance_objects: Vec<(PathBuf, PathBuf)> = compiled
        .iter()
        .map(|c| (c.clone(), compile(c, tmp.path(), &[&common, &inst_dir])))
        .collect();
    let prim_srcs = ["fips202.c", "sha2.c", "aes.c", "sp800-185.c"];
    let primitive_objects: Vec<PathBuf> = prim_srcs
        .iter()
        .map(|c| compile(&common.join(c), tmp.path(), &[&common]))
        .collect();
    let input = SurveyInput {
        root: root.clone(),
        instance_sources: sources,
        compiled,
        primitive_sources: prim_srcs.iter().map(|c| common.join(c)).collect(),
        instance_objects,
        primitive_objects,
        primitives: Vec::new(),
        api_symbols: Vec::new(),
        namespace: String::new(),
    };
    let d = survey(&input).unwrap();
    assert_eq!(d.verdict, Verdict::ProvidedOnly, "{}", d.summary);
    assert!(d.provided_used.iter().any(|s| s == "shake128_absorb"));
    // ML-KEM's kyber_shake128_absorb wraps the provided function: not own code.
    assert!(
        d.own_symbols.iter().all(|s| !s.referenced),
        "{:?}",
        d.own_symbols
    );
    eprintln!("ML-KEM-768 clean: {}", d.summary);
}

#[test]
fn survey_ml_kem_768_avx2_is_provided_only_with_glue_noted() {
    if !trees() {
        return;
    }
    let root = pqclean("pqcrypto-mlkem-0.1.1");
    let common = root.join("common");
    let keccak4x = common.join("keccak4x");
    let inst_dir = root.join("crypto_kem/ml-kem-768/avx2");
    let tmp = tempfile::tempdir().unwrap();
    let avx2 = ["-mavx2", "-mbmi2", "-mpopcnt"];
    let mut compiled: BTreeSet<PathBuf> = c_files(&inst_dir).into_iter().collect();
    let asm: Vec<PathBuf> = std::fs::read_dir(&inst_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "S"))
        .collect();
    compiled.extend(asm);
    let instance_objects: Vec<(PathBuf, PathBuf)> = compiled
        .iter()
        .map(|c| {
            let o = compile_with(c, tmp.path(), &[&common, &inst_dir], &avx2);
            (c.clone(), o)
        })
        .collect();
    // The 4-way Keccak of PQClean's common/ is part of the provided library.
    let prim_srcs = [
        common.join("fips202.c"),
        keccak4x.join("KeccakP-1600-times4-SIMD256.c"),
    ];
    let primitive_objects: Vec<PathBuf> = prim_srcs
        .iter()
        .map(|c| compile_with(c, tmp.path(), &[&common, &keccak4x], &avx2))
        .collect();
    let input = SurveyInput {
        root: root.clone(),
        instance_sources: all_files(&inst_dir),
        compiled,
        primitive_sources: prim_srcs.to_vec(),
        instance_objects,
        primitive_objects,
        primitives: Vec::new(),
        api_symbols: Vec::new(),
        namespace: String::new(),
    };
    let d = survey(&input).unwrap();
    eprintln!("ML-KEM-768 avx2: {}", d.summary);
    assert_eq!(d.verdict, Verdict::ProvidedOnly, "{}", d.summary);
    assert!(
        d.provided_used
            .iter()
            .any(|s| s == "KeccakP1600times4_PermuteAll_24rounds"),
        "{:?}",
        d.provided_used
    );
    assert!(d.summary.contains("fips202x4.c"), "{}", d.summary);
    // One verdict, not two that disagree: the glue is named as calling the provided
    // primitives, never as "own" code beside "no own ... code reachable".
    assert!(
        d.summary
            .contains("provided primitives (glue code, not an implementation)"),
        "{}",
        d.summary
    );
    assert!(!d.summary.contains("own glue"), "{}", d.summary);
    assert!(
        !d.summary.contains("no own symmetric code"),
        "{}",
        d.summary
    );
}

/// Survey a clean PQClean instance against the whole provided library of its tree.
fn survey_clean(krate: &str, instance: &str, dir: &Path) -> ngcc_pipe::record::SurveyData {
    let root = pqclean(krate);
    let common = root.join("common");
    let inst_dir = root.join(instance);
    let compiled: BTreeSet<PathBuf> = c_files(&inst_dir).into_iter().collect();
    let instance_objects: Vec<(PathBuf, PathBuf)> = compiled
        .iter()
        .map(|c| (c.clone(), compile(c, dir, &[&common, &inst_dir])))
        .collect();
    let prim_srcs: Vec<PathBuf> = ["fips202.c", "sha2.c", "aes.c", "sp800-185.c"]
        .iter()
        .map(|c| common.join(c))
        .collect();
    let primitive_objects: Vec<PathBuf> = prim_srcs
        .iter()
        .map(|c| compile(c, dir, &[&common]))
        .collect();
    let input = SurveyInput {
        root: root.clone(),
        instance_sources: all_files(&inst_dir),
        compiled,
        primitive_sources: prim_srcs,
        instance_objects,
        primitive_objects,
        primitives: Vec::new(),
        api_symbols: Vec::new(),
        namespace: String::new(),
    };
    survey(&input).unwrap()
}

#[test]
fn survey_other_clean_pqclean_kems_are_provided_only() {
    if !trees() {
        return;
    }
    for (krate, instance) in [
        ("pqcrypto-mlkem-0.1.1", "crypto_kem/hqc-128/clean"),
        ("pqcrypto-frodo-0.4.11", "crypto_kem/frodokem640aes/clean"),
        ("pqcrypto-frodo-0.4.11", "crypto_kem/frodokem640shake/clean"),
        ("pqcrypto-frodo-0.4.11", "crypto_kem/sntrup761/clean"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let d = survey_clean(krate, instance, tmp.path());
        eprintln!("{instance}: {} — {}", d.verdict.name(), d.summary);
        assert_eq!(
            d.verdict,
            Verdict::ProvidedOnly,
            "{instance}: {}",
            d.summary
        );
        assert!(!d.provided_used.is_empty(), "{instance}");
    }
}

/// Issue #9: `bench fidelity`'s reference is a separate static executable built from the
/// instance's sources (no program interpreter, no DT_NEEDED, so no campaign `.so`), and
/// it runs.
#[test]
fn fidelity_reference_is_a_separate_static_executable() {
    if !trees() {
        return;
    }
    use ngcc_pipe::bench::{build_reference, static_elf_kind, ReferenceSpec};
    use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
    let root = pqclean("pqcrypto-mlkem-0.1.1");
    let inst = root.join("crypto_kem/ml-kem-768/clean");
    let tmp = tempfile::tempdir().unwrap();
    let mut sources = c_files(&inst);
    sources.push(root.join("common/fips202.c"));
    // The build record's flags and code-generation flags, as `bench fidelity` passes them.
    let flags: Vec<String> = std::iter::once("-O2")
        .chain(ngcc_pipe::run::steps::link::CODEGEN_FLAGS.iter().copied())
        .map(String::from)
        .collect();
    let spec = ReferenceSpec {
        cc: "gcc".into(),
        flags: flags.clone(),
        includes: vec![
            format!("-I{}", inst.display()),
            format!("-I{}", root.join("common").display()),
        ],
        sources,
        namespace: "PQCLEAN_MLKEM768_CLEAN_".into(),
        drng: "PQCLEAN_randombytes".into(),
        api: kem_native::api::parse_api_h(
            &std::fs::read_to_string(inst.join("api.h")).unwrap(),
            "PQCLEAN_MLKEM768_CLEAN_",
        )
        .unwrap(),
    };
    let sandbox = ngcc_pipe::run::sandbox::Sandbox::detect();
    let (exe, command) = build_reference(&spec, tmp.path(), &sandbox).unwrap();
    assert!(command.iter().any(|a| a == "-static"), "{command:?}");
    assert!(!command.iter().any(|a| a.ends_with(".so")), "{command:?}");
    let kind = static_elf_kind(&exe).unwrap();
    assert!(kind.contains("statically linked"), "{kind}");

    // Read the ELF here too: an executable with no interpreter and no dynamic section.
    let data = std::fs::read(&exe).unwrap();
    let elf = ElfFile64::<object::Endianness>::parse(&*data).unwrap();
    let endian = elf.endian();
    assert!(matches!(
        elf.elf_header().e_type(endian),
        object::elf::ET_EXEC | object::elf::ET_DYN
    ));
    for ph in elf.elf_program_headers() {
        assert_ne!(ph.p_type(endian), object::elf::PT_INTERP);
        assert!(ph.dynamic(endian, &*data).unwrap().is_none_or(|d| d
            .iter()
            .all(|e| object::read::elf::Dyn::tag(e, endian) != object::elf::DT_NEEDED)));
    }
    // A dynamically linked executable (this test) is refused.
    let own = std::env::current_exe().unwrap();
    assert!(static_elf_kind(&own).is_err());

    // The anchor: the same sources linked as the campaign links its shared objects (the
    // anchor first, then the sources in the same order) sit at the same addresses modulo
    // 4096 as in the reference.
    let anchor = tmp.path().join("anchor.c");
    std::fs::write(&anchor, ngcc_pipe::run::steps::link::ANCHOR_C).unwrap();
    let so = tmp.path().join("kem.so");
    let status = Command::new("gcc")
        .args(&flags)
        .args(&spec.includes)
        .arg("-shared")
        .arg("-o")
        .arg(&so)
        .arg(&anchor)
        .args(&spec.sources)
        .status()
        .unwrap();
    assert!(status.success());
    let kem_functions = |path: &std::path::Path| -> BTreeMap<String, u64> {
        use object::{Object, ObjectSymbol, SymbolKind};
        let data = std::fs::read(path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        file.symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.is_definition())
            .filter_map(|s| Some((s.name().ok()?.to_string(), s.address())))
            // Cold parts go to `.text.unlikely`, before `.text` and the anchor.
            .filter(|(n, _)| {
                (n.starts_with("PQCLEAN_MLKEM768_CLEAN_") || n == "KeccakF1600_StatePermute")
                    && !n.contains(".cold")
            })
            .collect()
    };
    let (in_exe, in_so) = (kem_functions(&exe), kem_functions(&so));
    assert!(in_exe.len() >= 20, "{in_exe:?}");
    assert!(
        in_exe.contains_key("KeccakF1600_StatePermute"),
        "{in_exe:?}"
    );
    for (name, addr) in &in_exe {
        let other = in_so
            .get(name)
            .unwrap_or_else(|| panic!("{name} not in the .so"));
        assert_eq!(addr % 4096, other % 4096, "{name}: {addr:#x} vs {other:#x}");
    }

    // It serves batches: `ready`, then one `cycles C` per batch size sent, until stdin ends.
    for op in ["keygen", "enc", "dec"] {
        let mut child = Command::new(&exe)
            .arg(op)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"3\n5\n").unwrap();
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{op}: {:?}", out.status);
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.first(), Some(&"ready minimal_loop"), "{op}: {text}");
        assert_eq!(lines.len(), 3, "{op}: {text}");
        for l in &lines[1..] {
            let cycles: u64 = l
                .strip_prefix("cycles ")
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{op}: {text}"));
            assert!(cycles > 0, "{op}: {text}");
        }
    }
}
