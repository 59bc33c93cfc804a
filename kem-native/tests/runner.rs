//! Integration tests: build real PQClean KEMs (and small fault fixtures) into shared
//! objects with gcc, then run the `kem-runner` binary on them.
//!
//! Real KEM sources come from the PQClean trees shipped in `pqcrypto-mlkem` and
//! `oqs-sys`, fetched with cargo into its registry when missing. A test whose gcc or crate
//! is missing cannot run: see `tests/common/require.rs` (groups `gcc` and `crates`; a
//! failure under `NGCC_STRICT_TESTS=1`, else named at the end).
//!
//! Every object is built once per test process (parallel tests share it), in a private
//! folder, and renamed into place.

use kem_native::output::{KatOutput, ProfileOutput, TimeOutput};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex, OnceLock};

#[path = "../../tests/common/require.rs"]
mod require;
use require::require;

/// The unpacked folder of crate `name` at exactly `version`, fetched (checksum-verified)
/// by cargo into its registry if it is not there yet (offline first), or why not. Once per
/// process and crate.
fn registry_crate(name: &str, version: &str) -> Result<PathBuf, String> {
    static FOUND: Mutex<BTreeMap<String, Result<PathBuf, String>>> = Mutex::new(BTreeMap::new());
    let mut found = FOUND.lock().unwrap_or_else(|e| e.into_inner());
    found
        .entry(format!("{name}-{version}"))
        .or_insert_with(|| fetch_crate(name, version))
        .clone()
}

fn fetch_crate(name: &str, version: &str) -> Result<PathBuf, String> {
    let dir = work_dir(&format!("fetch-{name}-{version}"));
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    std::fs::create_dir_all(dir.join("src")).map_err(io)?;
    std::fs::write(dir.join("src/lib.rs"), "").map_err(io)?;
    let manifest = dir.join("Cargo.toml");
    std::fs::write(
        &manifest,
        format!(
            "[package]\nname = \"fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n\
             [dependencies]\n{name} = \"={version}\"\n\n[workspace]\n"
        ),
    )
    .map_err(io)?;
    let mut why = String::new();
    for offline in [true, false] {
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["metadata", "--format-version", "1", "--manifest-path"])
            .arg(&manifest);
        if offline {
            cmd.arg("--offline");
        }
        let out = cmd.output().map_err(|e| format!("cannot run cargo: {e}"))?;
        if !out.status.success() {
            why = String::from_utf8_lossy(&out.stderr).trim().to_string();
            continue;
        }
        let meta: serde_json::Value =
            serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata: {e}"))?;
        let path = meta["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == name)
            .and_then(|p| p["manifest_path"].as_str())
            .ok_or("cargo metadata does not list the crate")?;
        return Path::new(path)
            .parent()
            .map(Path::to_path_buf)
            .ok_or_else(|| format!("{path} has no folder"));
    }
    Err(format!(
        "crate `{name}` {version} cannot be fetched with cargo: {}",
        why.lines().last().unwrap_or("")
    ))
}

/// `require` for crate `name` `version`: its folder, or `None` when the test cannot run.
fn crate_or_skip(name: &str, version: &str) -> Option<PathBuf> {
    match registry_crate(name, version) {
        Ok(dir) => Some(dir),
        Err(why) => {
            let _ = require("crates", Some(why));
            None
        }
    }
}

fn pqclean() -> Option<PathBuf> {
    crate_or_skip("pqcrypto-mlkem", "0.1.1").map(|p| p.join("pqclean"))
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn work_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("kem-runner-tests")
        .join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Compile `sources` to objects one by one (so `--wrap` sees cross-object calls), then link
/// them into `<name>.so`. Once per process and name (parallel tests wait for the first);
/// built in a private folder and renamed into place, so no test ever links or loads a
/// half-written file.
fn build_so(
    name: &str,
    sources: &[PathBuf],
    includes: &[PathBuf],
    defines: &[&str],
    link: &[String],
) -> PathBuf {
    static BUILT: Mutex<BTreeMap<String, Arc<OnceLock<PathBuf>>>> = Mutex::new(BTreeMap::new());
    let cell = BUILT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(name.to_string())
        .or_default()
        .clone();
    cell.get_or_init(|| {
        let dir = work_dir(name);
        let private = dir.join(format!("building-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&private);
        std::fs::create_dir_all(&private).unwrap();
        let mut objects = Vec::new();
        for (i, src) in sources.iter().enumerate() {
            let obj = private.join(format!(
                "{i}_{}.o",
                src.file_stem().unwrap().to_string_lossy()
            ));
            let mut cmd = Command::new(cc());
            cmd.args(["-O2", "-fPIC", "-c"])
                .arg(src)
                .arg("-o")
                .arg(&obj);
            for inc in includes {
                cmd.arg("-I").arg(inc);
            }
            for d in defines {
                cmd.arg(format!("-D{d}"));
            }
            run(&mut cmd);
            objects.push(obj);
        }
        let built = private.join(format!("{name}.so"));
        run(Command::new(cc())
            .arg("-shared")
            .args(&objects)
            .args(link)
            .arg("-o")
            .arg(&built));
        let so = dir.join(format!("{name}.so"));
        std::fs::rename(&built, &so).unwrap();
        std::fs::remove_dir_all(&private).unwrap();
        so
    })
    .clone()
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

/// The C compiler for this test's own target: `TARGET_CC` (the `cc` crate's name for it;
/// `aarch64-linux-gnu-gcc` when the suite is cross-built and run under qemu-user), else gcc.
fn cc() -> String {
    std::env::var("TARGET_CC").unwrap_or_else(|_| "gcc".into())
}

/// kem-runner as a command; cross-built and run under an emulator (cargo's
/// `CARGO_TARGET_<TRIPLE>_RUNNER`, inherited from the environment, e.g. `qemu-aarch64 -L
/// /usr/aarch64-linux-gnu`), the runner runs under that emulator too.
fn runner_command() -> Command {
    let runner = env!("CARGO_BIN_EXE_kem-runner");
    let var = format!(
        "CARGO_TARGET_{}_UNKNOWN_LINUX_GNU_RUNNER",
        std::env::consts::ARCH.to_uppercase()
    );
    match std::env::var(var) {
        Ok(emu) if !emu.trim().is_empty() => {
            let mut words = emu.split_whitespace();
            let mut cmd = Command::new(words.next().expect("not empty"));
            cmd.args(words).arg(runner);
            cmd
        }
        _ => Command::new(runner),
    }
}

/// Whether the C compiler runs (`require`, group `gcc`).
fn have_gcc() -> bool {
    let cc = cc();
    let runs = Command::new(&cc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    require(
        "gcc",
        (!runs).then(|| format!("the C compiler `{cc}` does not run (Debian package gcc)")),
    )
}

/// The core to pin timing to: the first this process may run on (not a fixed 0, which a
/// cgroup or `taskset` may exclude).
fn allowed_cpu() -> usize {
    kem_native::sys::thread_affinity()
        .ok()
        .and_then(|cpus| cpus.first().copied())
        .expect("sched_getaffinity lists the cores this process may run on")
}

/// A PQClean clean instance + the listed common files + the shim, built once per test run.
fn pqclean_so(
    scheme: &str,
    common: &[&str],
    wrap: Option<(&str, &[&str])>,
) -> Option<(PathBuf, PathBuf)> {
    if !have_gcc() {
        return None;
    }
    let tree = pqclean()?;
    let clean = tree.join("crypto_kem").join(scheme).join("clean");
    let mut sources = c_files(&clean);
    sources.extend(common.iter().map(|c| tree.join("common").join(c)));
    sources.push(fixtures().join("ngcc_shim.c"));
    let mut link = Vec::new();
    let mut name = scheme.to_string();
    if let Some((fixture, symbols)) = wrap {
        sources.push(fixtures().join(fixture));
        link.extend(symbols.iter().map(|s| format!("-Wl,--wrap={s}")));
        name.push_str("-prof");
    }
    let so = build_so(
        &name,
        &sources,
        &[clean.clone(), tree.join("common")],
        &[],
        &link,
    );
    Some((so, clean.join("api.h")))
}

static MLKEM768: OnceLock<Option<(PathBuf, PathBuf)>> = OnceLock::new();
fn mlkem768() -> Option<(PathBuf, PathBuf)> {
    MLKEM768
        .get_or_init(|| pqclean_so("ml-kem-768", &["fips202.c"], None))
        .clone()
}

fn runner(args: &[&str]) -> Output {
    runner_command()
        .args(args)
        .output()
        .expect("run kem-runner")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn meta_hash(scheme: &str) -> String {
    let meta = std::fs::read_to_string(
        pqclean()
            .unwrap()
            .join("crypto_kem")
            .join(scheme)
            .join("META.yml"),
    )
    .unwrap();
    meta.lines()
        .find_map(|l| l.strip_prefix("nistkat-sha256:"))
        .expect("nistkat-sha256 in META.yml")
        .trim()
        .to_string()
}

fn kat(
    so: &Path,
    api: &Path,
    ns: &str,
    rng: &str,
    mode: &str,
    counts: &str,
    out: &Path,
) -> (Output, KatOutput) {
    let o = runner(&[
        "kat",
        "--lib",
        s(so),
        "--api",
        s(api),
        "--ns",
        ns,
        "--rng",
        rng,
        "--mode",
        mode,
        "--counts",
        counts,
        "--out",
        s(out),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    let rec: KatOutput = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "bad JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o, rec)
}

#[test]
fn mlkem768_single_kat_matches_pqclean_meta() {
    let Some((so, api)) = mlkem768() else { return };
    let out = work_dir("kat").join("mlkem768-single.rsp");
    let (o, rec) = kat(
        &so,
        &api,
        "PQCLEAN_MLKEM768_CLEAN_",
        "nist",
        "single",
        "1",
        &out,
    );
    assert!(o.status.success(), "{rec:?}");
    let expected = meta_hash("ml-kem-768");
    assert_eq!(
        expected,
        "5352539586b6c3df58be6158a6250aeff402bd73060b0a3de68850ac074c17c3"
    );
    assert_eq!(rec.rsp_sha256, expected);
    assert_eq!((rec.counts, rec.failure.as_deref()), (1, None));
    assert_eq!(rec.sizes.algname.as_deref(), Some("ML-KEM-768"));
    // The evidence on disk is the hashed text.
    use sha2::Digest;
    let text = std::fs::read(&out).unwrap();
    assert_eq!(hex::encode(sha2::Sha256::digest(&text)), expected);
    assert!(text.starts_with(
        b"count = 0\nseed = 061550234D158C5EC95595FE04EF7A25767F2E24CC2BC479D09D86DC9ABCFDE7"
    ));
}

#[test]
fn hqc128_single_kat_matches_pqclean_meta() {
    let Some((so, api)) = pqclean_so("hqc-128", &["fips202.c"], None) else {
        return;
    };
    let out = work_dir("kat").join("hqc128-single.rsp");
    let (o, rec) = kat(
        &so,
        &api,
        "PQCLEAN_HQC128_CLEAN_",
        "hqc",
        "single",
        "1",
        &out,
    );
    assert!(o.status.success(), "{rec:?}");
    assert_eq!(rec.rsp_sha256, meta_hash("hqc-128"));
    assert_eq!(rec.rng, "hqc");
    // With the wrong generator the text must differ (the rng choice matters).
    let (_, nist) = kat(
        &so,
        &api,
        "PQCLEAN_HQC128_CLEAN_",
        "nist",
        "single",
        "1",
        &work_dir("kat").join("hqc128-nist.rsp"),
    );
    assert_ne!(nist.rsp_sha256, rec.rsp_sha256);
    // liboqs `kat_kem HQC-128 --all` uses the same SHAKE PRNG with saved/restored state.
    let Some(kats) = liboqs_kats() else { return };
    let (o, all) = kat(
        &so,
        &api,
        "PQCLEAN_HQC128_CLEAN_",
        "hqc",
        "all",
        "100",
        &work_dir("kat").join("hqc128-all.rsp"),
    );
    assert!(o.status.success(), "{all:?}");
    assert_eq!(all.rsp_sha256, kats["HQC-128"]["all"].as_str().unwrap());
}

fn liboqs_kats() -> Option<serde_json::Value> {
    let oqs = crate_or_skip("oqs-sys", "0.11.0")?;
    let text = std::fs::read_to_string(oqs.join("liboqs/tests/KATs/kem/kats.json")).unwrap();
    Some(serde_json::from_str(&text).unwrap())
}

#[test]
fn mlkem512_all_kat_matches_liboqs() {
    let Some(kats) = liboqs_kats() else { return };
    let Some((so, api)) = pqclean_so("ml-kem-512", &["fips202.c"], None) else {
        return;
    };
    let out = work_dir("kat").join("mlkem512-all.rsp");
    let (o, rec) = kat(
        &so,
        &api,
        "PQCLEAN_MLKEM512_CLEAN_",
        "nist",
        "all",
        "100",
        &out,
    );
    assert!(o.status.success(), "{rec:?}");
    assert_eq!(rec.counts, 100);
    assert_eq!(rec.rsp_sha256, kats["ML-KEM-512"]["all"].as_str().unwrap());
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("\n\ncount = 99\n") && !text.ends_with("\n\n"));
    // One count in `all` mode is the `single` file.
    let (_, one) = kat(
        &so,
        &api,
        "PQCLEAN_MLKEM512_CLEAN_",
        "nist",
        "all",
        "1",
        &work_dir("kat").join("mlkem512-1.rsp"),
    );
    assert_eq!(
        one.rsp_sha256,
        kats["ML-KEM-512"]["single"].as_str().unwrap()
    );
}

/// An upper bound for overhead figures: the slowest trial's ticks per op.
fn mean_guard(rec: &TimeOutput) -> f64 {
    rec.trials
        .iter()
        .map(|t| t.cycles as f64 / t.iters as f64)
        .fold(0.0, f64::max)
}

fn time(so: &Path, api: &Path, ns: &str, op: &str, extra: &[&str]) -> (Output, TimeOutput) {
    let mut args = vec![
        "time",
        "--lib",
        s(so),
        "--api",
        s(api),
        "--ns",
        ns,
        "--op",
        op,
    ];
    args.extend_from_slice(extra);
    let o = runner(&args);
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    let rec: TimeOutput = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "bad JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o, rec)
}

#[test]
fn mlkem768_time_records_are_sane() {
    let Some((so, api)) = mlkem768() else { return };
    let cpu = allowed_cpu().to_string();
    for op in ["keygen", "enc", "dec"] {
        let (o, rec) = time(
            &so,
            &api,
            "PQCLEAN_MLKEM768_CLEAN_",
            op,
            &[
                "--cpu",
                &cpu,
                "--trials",
                "4",
                "--trial-ns",
                "20000000",
                "--min-iters",
                "10",
                "--samples",
                "31",
            ],
        );
        assert!(o.status.success(), "{rec:?}");
        assert_eq!(rec.failure, None);
        assert_eq!(rec.rng, "ctr-drbg");
        assert_eq!(rec.pinned_cpu, Some(allowed_cpu()), "{:?}", rec.pin_error);
        // aarch64's cntvct_el0 (1-1000 MHz) may not tick during an empty call.
        assert!(
            (rec.overhead.single_call_cycles > 0.0 || !cfg!(target_arch = "x86_64"))
                && rec.overhead.single_call_cycles >= 0.0
                && rec.overhead.single_call_cycles < mean_guard(&rec)
        );
        assert_eq!(rec.trials.len(), 4);
        assert_eq!(rec.samples.len(), 31);
        let c = &rec.calibration;
        assert!(c.iters >= 10 && c.batch_ns >= 2_000_000, "{c:?}");
        for t in &rec.trials {
            assert_eq!(t.iters, c.iters);
            assert!(t.cycles > 0 && t.ns > 0);
        }
        let per_op: Vec<f64> = rec
            .trials
            .iter()
            .map(|t| t.cycles as f64 / t.iters as f64)
            .collect();
        let mean = per_op.iter().sum::<f64>() / per_op.len() as f64;
        // ML-KEM-768 clean ops take tens of thousands of cycles, far above the loop cost.
        assert!(mean > 5_000.0 && mean < 50_000_000.0, "{op}: {mean}");
        assert!(
            rec.overhead.cycles_per_call > 0.0 && rec.overhead.cycles_per_call < mean / 20.0,
            "{:?}",
            rec.overhead
        );
        let mut samples = rec.samples.clone();
        samples.sort();
        let median = samples[samples.len() / 2] as f64;
        // The least disturbed trial and the median single call measure the same thing.
        // Loose bounds: on a shared machine (6 agents on 2 cores) a 20 ms trial is
        // preempted far more often than one ~100 µs call, so trials inflate most.
        let best = per_op.iter().cloned().fold(f64::MAX, f64::min);
        assert!(
            median > best / 20.0 && median < best * 4.0,
            "{op}: median sample {median} vs best trial {best}"
        );
        let m = &rec.memory;
        let (base, peak, stack) = (
            m.baseline_rss_kib.unwrap(),
            m.peak_rss_kib.unwrap(),
            m.stack_bytes.unwrap(),
        );
        assert!(base > 0 && peak >= base, "{m:?}");
        // keygen on ML-KEM-768 clean keeps a 3x3 polynomial matrix (4.6 KiB) and more on the stack.
        assert!(stack > 4_000 && stack < 200_000, "{op}: stack {stack}");
        assert!(m.stack_painted_bytes > 60 << 20);
        eprintln!(
            "ML-KEM-768 clean {op}: mean {mean:.0} ticks/op, median sample {median:.0}, overhead {:.2} ticks/call, \
             stack {stack} B, rss {base}->{peak} KiB, core cycles {:?}",
            rec.overhead.cycles_per_call, rec.core_cycles
        );
    }
}

#[test]
fn os_random_source_can_be_chosen_for_timing() {
    let Some((so, api)) = mlkem768() else { return };
    let quick = [
        "--trials",
        "2",
        "--trial-ns",
        "5000000",
        "--samples",
        "5",
        "--rng",
        "os",
    ];
    let (o, rec) = time(&so, &api, "PQCLEAN_MLKEM768_CLEAN_", "keygen", &quick);
    assert!(o.status.success(), "{rec:?}");
    assert_eq!((rec.rng.as_str(), rec.trials.len()), ("os", 2));
    let o = runner(&[
        "time",
        "--lib",
        s(&so),
        "--api",
        s(&api),
        "--ns",
        "PQCLEAN_MLKEM768_CLEAN_",
        "--op",
        "enc",
        "--rng",
        "aes",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown rng `aes`"));
}

#[test]
fn mceliece348864_keygen_needs_far_more_memory_than_mlkem() {
    let Some((so, api)) = pqclean_so("mceliece348864", &["fips202.c", "aes.c"], None) else {
        return;
    };
    let quick = [
        "--trials",
        "1",
        "--trial-ns",
        "1000000",
        "--min-iters",
        "1",
        "--samples",
        "1",
    ];
    let (o, mc) = time(&so, &api, "PQCLEAN_MCELIECE348864_CLEAN_", "keygen", &quick);
    assert!(o.status.success(), "{mc:?}");
    let Some((so7, api7)) = mlkem768() else {
        return;
    };
    let (_, ml) = time(&so7, &api7, "PQCLEAN_MLKEM768_CLEAN_", "keygen", &quick);
    let (mcs, mls) = (
        mc.memory.stack_bytes.unwrap(),
        ml.memory.stack_bytes.unwrap(),
    );
    assert!(mcs > 10 * mls, "stack: McEliece {mcs} vs ML-KEM {mls}");
    let growth =
        |r: &TimeOutput| r.memory.peak_rss_kib.unwrap() - r.memory.baseline_rss_kib.unwrap();
    assert!(
        growth(&mc) > growth(&ml) + 200,
        "rss growth: McEliece {} KiB vs ML-KEM {} KiB",
        growth(&mc),
        growth(&ml)
    );
    // The 10-count liboqs KAT (McEliece's `all` has 10 counts) and PQClean's one-count KAT.
    let Some(kats) = liboqs_kats() else { return };
    let (o, all) = kat(
        &so,
        &api,
        "PQCLEAN_MCELIECE348864_CLEAN_",
        "nist",
        "all",
        "10",
        &work_dir("kat").join("mceliece348864-all.rsp"),
    );
    assert!(o.status.success(), "{all:?}");
    assert_eq!(
        all.rsp_sha256,
        kats["Classic-McEliece-348864"]["all"].as_str().unwrap()
    );
    eprintln!(
        "keygen stack: McEliece-348864 {mcs} B, ML-KEM-768 {mls} B; rss growth {} vs {} KiB",
        growth(&mc),
        growth(&ml)
    );
}

#[test]
#[cfg_attr(
    not(target_arch = "x86_64"),
    ignore = "the profile fixture uses rdtsc (x86-64 only)"
)]
fn profile_reads_the_hand_made_wrapper_table() {
    let wrapped = [
        "PQCLEAN_MLKEM768_CLEAN_indcpa_keypair_derand",
        "sha3_512",
        "sha3_256",
        "PQCLEAN_randombytes",
    ];
    let Some((so, api)) = pqclean_so(
        "ml-kem-768",
        &["fips202.c"],
        Some(("prof_wrap_mlkem768.c", &wrapped)),
    ) else {
        return;
    };
    let args = [
        "profile",
        "--lib",
        s(&so),
        "--api",
        s(&api),
        "--ns",
        "PQCLEAN_MLKEM768_CLEAN_",
        "--op",
        "keygen",
        "--iters",
        "25",
    ];
    let o = runner(&args);
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rec: ProfileOutput = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (rec.op.as_str(), rec.iters, rec.failure.as_deref()),
        ("keygen", 25, None)
    );
    let names: Vec<&str> = rec.symbols.iter().map(|s| s.symbol.as_str()).collect();
    assert_eq!(names, wrapped);
    // keygen: one indcpa keypair (which calls sha3_512 inside), one sha3_256 of pk, one randombytes.
    for sym in &rec.symbols {
        assert_eq!(sym.calls, 25, "{sym:?}");
    }
    let by = |n: &str| rec.symbols.iter().find(|s| s.symbol == n).unwrap();
    assert_eq!(
        by("sha3_512").cycles,
        0.0,
        "nested calls must not count as outermost"
    );
    assert_eq!(by("PQCLEAN_randombytes").family, "drng");
    let cpa_share = |r: &ProfileOutput| {
        let cpa = r.symbols[0].cycles;
        assert!(
            cpa > 0.0 && cpa < r.total_cycles as f64,
            "{cpa} of {}",
            r.total_cycles
        );
        cpa / r.total_cycles as f64
    };
    // Most of keygen is inside indcpa_keypair_derand, and a wrapper costs little beside
    // the operation it is subtracted from: a few dozen ticks on a quiet machine, up to
    // ~2000 seen on a loaded 2-vCPU VM (the calibration is a mean over 100000 calls; one
    // 10 ms preemption there adds 300), against ~100000 per ML-KEM-768 keygen. Hence a
    // bound relative to the operation, not a number of ticks. A preemption can skew one
    // short run on a shared machine, so each must hold in one of 3 runs.
    let overhead_ok = |r: &ProfileOutput| {
        let per_op = r.total_cycles as f64 / r.iters as f64;
        r.wrapper_overhead_cycles > 0.0 && r.wrapper_overhead_cycles < per_op / 20.0
    };
    let mut shares = vec![cpa_share(&rec)];
    let mut overheads = vec![rec.wrapper_overhead_cycles];
    let mut overhead_seen = overhead_ok(&rec);
    while (shares.iter().all(|&x| x <= 0.5) || !overhead_seen) && shares.len() < 3 {
        let o = runner(&args);
        let again: ProfileOutput = serde_json::from_slice(&o.stdout).unwrap();
        shares.push(cpa_share(&again));
        overheads.push(again.wrapper_overhead_cycles);
        overhead_seen |= overhead_ok(&again);
    }
    assert!(
        shares.iter().any(|&x| x > 0.5),
        "indcpa share of keygen: {shares:?}"
    );
    assert!(overhead_seen, "wrapper overhead per call: {overheads:?}");
    let sum: f64 = rec.symbols.iter().map(|s| s.cycles).sum();
    assert!(sum < rec.total_cycles as f64);
}

fn faulty(fault: &str) -> Option<(PathBuf, PathBuf)> {
    if !have_gcc() {
        return None;
    }
    let f = fixtures();
    let so = build_so(
        &format!("faulty-{fault}"),
        &[f.join("faulty_kem.c"), f.join("ngcc_shim.c")],
        &[],
        &[&format!("FAULT_{fault}")],
        &[],
    );
    Some((so, f.join("faulty_api.h")))
}

fn faulty_kat(fault: &str) -> Option<(Output, KatOutput)> {
    let (so, api) = faulty(fault)?;
    let out = work_dir("kat").join(format!("faulty-{fault}.rsp"));
    Some(kat(&so, &api, "FAULTY_", "nist", "all", "5", &out))
}

#[test]
fn well_behaved_fixture_passes_all_counts() {
    let Some((o, rec)) = faulty_kat("NONE") else {
        return;
    };
    assert_eq!(o.status.code(), Some(0), "{rec:?}");
    assert_eq!((rec.counts, rec.failure), (5, None));
}

/// What the KEM prints on stdout goes to stderr: stdout carries the record alone (a
/// debugging `printf` used to break the KAT with "trailing characters").
#[test]
fn kem_output_on_stdout_does_not_touch_the_record() {
    let Some((o, rec)) = faulty_kat("PRINTF") else {
        return;
    };
    assert_eq!(o.status.code(), Some(0), "{rec:?}");
    assert_eq!((rec.counts, rec.failure), (5, None));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.matches("debug: keypair").count(), 5, "{stderr}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("debug"));
}

/// `serve` answers on the record channel too: `batch` lines a KEM prints on stdout while it
/// is timed go to stderr, and every answer is the runner's own measurement.
#[test]
fn serve_answers_cannot_be_forged_by_printing_them() {
    use std::io::{BufRead, BufReader, Write};
    let Some((so, api)) = faulty("PROTOCOL") else {
        return;
    };
    let mut child = runner_command()
        .args([
            "serve",
            "--lib",
            s(&so),
            "--api",
            s(&api),
            "--ns",
            "FAULTY_",
        ])
        .args(["--op", "keygen", "--batch-ns", "2000000", "--samples", "5"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kem-runner serve");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let mut next = || lines.next().expect("a line").expect("utf-8");
    assert!(next().starts_with("ready {"));
    for _ in 0..3 {
        writeln!(stdin, "batch").unwrap();
        let line = next();
        let json = line.strip_prefix("batch ").expect("a batch answer");
        let b: kem_native::serve::BatchReply = serde_json::from_str(json).unwrap();
        assert!(b.iters < 1_000_000 && b.cycles >= b.iters, "{line}");
    }
    writeln!(stdin, "finish").unwrap();
    let line = next();
    let rec: TimeOutput = serde_json::from_str(line.strip_prefix("done ").unwrap()).unwrap();
    assert_eq!((rec.trials.len(), rec.failure), (3, None));
    assert!(child.wait().unwrap().success());
    let err = err.join().unwrap();
    assert!(
        err.contains("batch {\"iters\":1000000,\"cycles\":1,"),
        "{err}"
    );
}

#[test]
fn enc_error_return_is_reported_with_its_count() {
    let Some((o, rec)) = faulty_kat("ENC_RC") else {
        return;
    };
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        rec.failure.as_deref(),
        Some("crypto_kem_enc returned -1 in count 0")
    );
    assert_eq!(rec.counts, 0);
    // Partial evidence: count, seed, pk, sk of count 0 are on disk.
    let text = std::fs::read_to_string(&rec.rsp_path).unwrap();
    assert!(
        text.starts_with("count = 0\nseed = ")
            && text.contains("\nsk = ")
            && !text.contains("ct = ")
    );
}

#[test]
fn differing_shared_secrets_are_reported() {
    let Some((o, rec)) = faulty_kat("WRONG_SS") else {
        return;
    };
    assert_eq!(o.status.code(), Some(1));
    let f = rec.failure.unwrap();
    assert!(
        f.starts_with("shared secrets differ") && f.ends_with("in count 0"),
        "{f}"
    );
}

#[test]
fn ciphertext_overflow_is_caught_by_the_guard() {
    let Some((o, rec)) = faulty_kat("OVERFLOW") else {
        return;
    };
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        rec.failure.as_deref(),
        Some(
            "crypto_kem_enc wrote past the declared ciphertext size (CRYPTO_CIPHERTEXTBYTES = 32): \
             16 bytes beyond it in count 0"
        )
    );
    // The timing job notices it too, and still prints its record.
    let (so, api) = faulty("OVERFLOW").unwrap();
    let (o, rec) = time(
        &so,
        &api,
        "FAULTY_",
        "enc",
        &["--trials", "1", "--trial-ns", "1000000", "--samples", "3"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(rec
        .failure
        .unwrap()
        .contains("wrote past the declared ciphertext size"));
}

#[test]
fn failing_input_preparation_is_reported_without_calling_the_op() {
    let Some((so, api)) = faulty("ENC_RC") else {
        return;
    };
    let (o, rec) = time(
        &so,
        &api,
        "FAULTY_",
        "dec",
        &["--trials", "1", "--trial-ns", "1000000"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        rec.failure.as_deref(),
        Some("crypto_kem_enc returned -1 while preparing dec inputs")
    );
    assert!(rec.trials.is_empty() && rec.memory.baseline_rss_kib.is_some());
    // The time job of enc itself: the first warm-up batch already fails.
    let (o, rec) = time(
        &so,
        &api,
        "FAULTY_",
        "enc",
        &["--trials", "1", "--trial-ns", "1000000"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        rec.failure.as_deref(),
        Some("crypto_kem_enc returned nonzero during warm-up (OR of return codes = -1)")
    );
}

#[test]
fn load_and_usage_errors_exit_2_with_one_line() {
    let Some((so, api)) = faulty("NONE") else {
        return;
    };
    // Plain `CRYPTO_*` names: api.h parses for any namespace, so the symbol lookup fails.
    let plain = work_dir("plain-api").join("api.h");
    std::fs::write(
        &plain,
        "#define CRYPTO_SECRETKEYBYTES 32\n#define CRYPTO_PUBLICKEYBYTES 32\n\
         #define CRYPTO_CIPHERTEXTBYTES 32\n#define CRYPTO_BYTES 16\n",
    )
    .unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "kat",
                "--lib",
                s(&so),
                "--api",
                s(&plain),
                "--ns",
                "NOPE_",
                "--rng",
                "nist",
                "--mode",
                "single",
                "--out",
                "/tmp/x.rsp",
            ],
            "symbol `NOPE_crypto_kem_keypair` not found",
        ),
        (
            vec![
                "time",
                "--lib",
                "/nonexistent.so",
                "--api",
                s(&api),
                "--ns",
                "FAULTY_",
                "--op",
                "enc",
            ],
            "`/nonexistent.so` does not exist",
        ),
        (
            vec![
                "time",
                "--lib",
                s(&so),
                "--api",
                s(&api),
                "--ns",
                "FAULTY_",
                "--op",
                "sign",
            ],
            "unknown op `sign`",
        ),
        (
            vec![
                "time",
                "--lib",
                s(&so),
                "--api",
                s(&api),
                "--ns",
                "FAULTY_",
                "--op",
                "enc",
                "--trials",
                "x",
            ],
            "`--trials x`",
        ),
        (
            vec![
                "kat",
                "--lib",
                s(&so),
                "--api",
                s(&api),
                "--ns",
                "FAULTY_",
                "--rng",
                "nist",
                "--mode",
                "single",
            ],
            "needs `--out`",
        ),
        (
            vec![
                "profile",
                "--lib",
                s(&so),
                "--api",
                s(&api),
                "--ns",
                "FAULTY_",
                "--op",
                "enc",
            ],
            "symbol `ngcc_prof_entries` not found",
        ),
        (vec!["bench"], "unknown job `bench`"),
        (
            vec![
                "kat",
                "--lib",
                s(&so),
                "--api",
                s(&api),
                "--ns",
                "NOPE_",
                "--rng",
                "nist",
                "--mode",
                "single",
                "--out",
                "/tmp/x",
            ],
            "missing `#define NOPE_CRYPTO_SECRETKEYBYTES`",
        ),
        (
            vec![
                "kat",
                "--api",
                "/nonexistent/api.h",
                "--lib",
                s(&so),
                "--ns",
                "X",
                "--rng",
                "nist",
                "--mode",
                "single",
                "--out",
                "/tmp/x",
            ],
            "cannot read `/nonexistent/api.h`",
        ),
    ];
    for (args, want) in cases {
        let o = runner(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
}

/// `serve --layout`: every batch times each layout, the same calls each; a layout that
/// cannot be loaded ends the runner before `ready` with a record naming the object.
#[test]
fn serve_times_every_layout_in_every_batch() {
    use std::io::{BufRead, BufReader, Write};
    let Some((so, api)) = mlkem768() else {
        return;
    };
    let copy = work_dir("layouts").join("copy.so");
    std::fs::copy(&so, &copy).unwrap();
    let args = |layout: &Path| {
        let mut c = runner_command();
        c.args(["serve", "--lib", s(&so), "--api", s(&api)])
            .args(["--ns", "PQCLEAN_MLKEM768_CLEAN_", "--op", "enc"])
            .args([
                "--batch-ns",
                "2000000",
                "--samples",
                "5",
                "--layout",
                s(layout),
            ]);
        c
    };
    let mut child = args(&copy)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run kem-runner serve");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || lines.next().expect("a line").expect("utf-8");
    assert!(next().starts_with("ready {"));
    for _ in 0..3 {
        writeln!(stdin, "batch").unwrap();
        let line = next();
        let b: kem_native::serve::BatchReply =
            serde_json::from_str(line.strip_prefix("batch ").unwrap()).unwrap();
        assert_eq!(b.layout_cycles.len(), 2, "{line}");
        assert_eq!(b.layout_cycles.iter().sum::<u64>(), b.cycles, "{line}");
        assert!(b.layout_cycles.iter().all(|&c| c > 0), "{line}");
        assert_eq!(b.iters % 2, 0, "{line}");
    }
    writeln!(stdin, "finish").unwrap();
    let line = next();
    let rec: TimeOutput = serde_json::from_str(line.strip_prefix("done ").unwrap()).unwrap();
    assert_eq!(rec.failure, None);
    assert_eq!(rec.layouts, [s(&so), s(&copy)]);
    assert_eq!((rec.trials.len(), rec.samples.len()), (3, 5));
    assert!(child.wait().unwrap().success());

    let missing = work_dir("layouts").join("missing.so");
    let o = args(&missing)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run kem-runner serve");
    assert_ne!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("done "))
        .expect(&out);
    let rec: TimeOutput = serde_json::from_str(line).unwrap();
    let failure = rec.failure.unwrap_or_default();
    assert!(
        failure.starts_with("layout ") && failure.contains("missing.so"),
        "{failure}"
    );
}
