//! Profile builds: wrapped calls counted and timed, per primitive family.

use super::*;

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
