//! Tests that need something outside Rust (valgrind, bubblewrap, Graphviz, a Slurm cluster,
//! the aarch64 cross tools, the PQClean crates): [`require`] says whether the test can run.
//!
//! When it cannot, the test either fails naming what is missing (strict mode:
//! `NGCC_STRICT_TESTS=1`, set by `scripts/test.sh` and `.ci/run`, so CI never skips
//! silently) or returns early, and when the test binary ends it prints one line per group of
//! tests that could not run, on stderr after the binary's `test result:` line:
//!
//! ```text
//! skipped: valgrind (ct: leaky_fixtures_are_caught_at_their_lines_and_findings_repeat): `valgrind` is not on PATH (Debian package valgrind)
//! ```
//!
//! Shared by the integration tests (`tests/common/mod.rs`), `kem-native/tests/runner.rs`
//! and the library's unit tests (each includes this file by path): only `std` and `libc`.

#![allow(dead_code)] // each includer uses its own subset

use std::sync::{Mutex, Once};

/// The environment variable that turns a test that cannot run into a failure.
pub const STRICT: &str = "NGCC_STRICT_TESTS";

/// Groups that could not run in this process: (group, why, tests).
static SKIPPED: Mutex<Vec<(String, String, Vec<String>)>> = Mutex::new(Vec::new());
static AT_EXIT: Once = Once::new();

/// Whether strict mode is on (`NGCC_STRICT_TESTS=1`).
pub fn strict() -> bool {
    std::env::var(STRICT).is_ok_and(|v| v == "1")
}

/// `true` when nothing is `missing` and the test can go on. Otherwise, in strict mode, the
/// test fails with `group: why`; outside it, the skip is recorded for the summary line and
/// the caller returns.
#[must_use]
pub fn require(group: &str, missing: Option<String>) -> bool {
    let Some(why) = missing else {
        return true;
    };
    if strict() {
        panic!(
            "{group}: {why}\n({STRICT}=1, as scripts/test.sh and .ci/run set it: a test that \
             cannot run fails; without it the test is skipped and named at the end)"
        );
    }
    let test = std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .unwrap_or("?")
        .to_string();
    let mut list = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
    match list.iter_mut().find(|(g, _, _)| g == group) {
        Some((_, _, tests)) => tests.push(test),
        None => list.push((group.to_string(), why, vec![test])),
    }
    drop(list);
    AT_EXIT.call_once(|| {
        // SAFETY: registers a plain `extern "C"` function without arguments.
        unsafe { libc::atexit(print_skipped) };
    });
    false
}

/// [`require`] with [`tool_missing`].
#[must_use]
pub fn require_tool(group: &str, tool: &str, package: &str) -> bool {
    require(group, tool_missing(tool, package))
}

/// `None` when the program `tool` is on `PATH`, else why it is missing.
pub fn tool_missing(tool: &str, package: &str) -> Option<String> {
    on_path(tool)
        .is_none()
        .then(|| format!("`{tool}` is not on PATH (Debian package {package})"))
}

/// The executable file `name` in a `PATH` folder.
pub fn on_path(name: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// At exit: one line per group that could not run, with its tests (written to stderr
/// directly, past the test harness's output capture).
extern "C" fn print_skipped() {
    let Ok(list) = SKIPPED.try_lock() else {
        return;
    };
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| match s.rsplit_once('-') {
            Some((name, hash)) if hash.bytes().all(|b| b.is_ascii_hexdigit()) => name.to_string(),
            _ => s,
        })
        .unwrap_or_default();
    let mut text = String::new();
    for (group, why, tests) in list.iter() {
        let mut tests = tests.clone();
        tests.sort();
        tests.dedup();
        text.push_str(&format!(
            "skipped: {group} ({binary}: {}): {why}\n",
            tests.join(", ")
        ));
    }
    let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
}
