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

/// The words of kem-runner's `job` of `op` on the object `so` (its `api` header, namespace
/// `ns`), before the job's other options.
fn op_job<'a>(job: &'a str, so: &'a Path, api: &'a Path, ns: &'a str, op: &'a str) -> Vec<&'a str> {
    vec![job, "--lib", s(so), "--api", s(api), "--ns", ns, "--op", op]
}

fn time(so: &Path, api: &Path, ns: &str, op: &str, extra: &[&str]) -> (Output, TimeOutput) {
    let mut args = op_job("time", so, api, ns, op);
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

fn liboqs_kats() -> Option<serde_json::Value> {
    let oqs = crate_or_skip("oqs-sys", "0.11.0")?;
    let text = std::fs::read_to_string(oqs.join("liboqs/tests/KATs/kem/kats.json")).unwrap();
    Some(serde_json::from_str(&text).unwrap())
}

#[path = "runner/checked.rs"]
mod checked;
#[path = "runner/faults.rs"]
mod faults;
#[path = "runner/kats.rs"]
mod kats;
#[path = "runner/timing.rs"]
mod timing;
