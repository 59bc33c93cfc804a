//! Outputs checked while timed (`kem_native::checked`), end to end over `kem-runner serve`:
//! a timed runner and a reference runner of the same object with the same setup seed; the
//! timed batch's fold must equal the reference's replay (keygen, enc) or the fold of the
//! shared secrets its enc made (dec, whose ciphertexts it feeds). The toy KEM `good` agrees
//! with itself; `lazy` (hands back its last outputs from the third call of one operation in
//! a row) does not, and `caching` (hands back the outputs it made for the same input) is
//! named by the reference for its enc and gains nothing in dec, whose inputs all differ.

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use kem_native::serve::{BatchReply, Checked, Ready};

use super::*;

/// The toy fixture `dir/kem.c` (under the repository's `tests/fixtures`) with the toy KEM's
/// primitives and the runner's shim, built once; `None` without gcc.
fn toy(name: &str, dir: &str) -> Option<(PathBuf, PathBuf)> {
    if !have_gcc() {
        return None;
    }
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let so = build_so(
        &format!("checked-{name}"),
        &[
            f.join(dir).join("kem.c"),
            f.join("kems/common/toyhash.c"),
            fixtures().join("ngcc_shim.c"),
        ],
        &[f.join(dir), f.join("kems/common")],
        &[],
        &[],
    );
    Some((so, f.join(dir).join("api.h")))
}

/// A fresh working folder for one case's runners.
fn scratch(name: &str) -> PathBuf {
    let d = work_dir("checked").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `kem-runner serve` of `op` of the object `so` (its `api` header, namespace `ns`), before
/// the timing options.
fn serve_command(so: &Path, api: &Path, ns: &str, op: &str) -> std::process::Command {
    let mut cmd = runner_command();
    cmd.args(op_job("serve", so, api, ns, op));
    cmd
}

/// A `kem-runner serve` of `op` working in `cwd`: its stdin, its answer lines, and the
/// calls of each batch from its `ready` line.
struct Runner {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    calls: u64,
}

/// The setup seed both runners of a case share.
const SETUP: &str = concat!(
    "5e70e5e75e70e5e75e70e5e75e70e5e7",
    "5e70e5e75e70e5e75e70e5e75e70e5e7",
    "5e70e5e75e70e5e75e70e5e75e70e5e7"
);

impl Runner {
    fn start(so: &Path, api: &Path, ns: &str, op: &str, cwd: &Path) -> Runner {
        Runner::with(so, api, ns, op, cwd, &[])
    }

    /// [`Runner::start`] with `extra` options.
    fn with(so: &Path, api: &Path, ns: &str, op: &str, cwd: &Path, extra: &[&str]) -> Runner {
        let mut child = serve_command(so, api, ns, op)
            .args([
                "--batch-ns",
                "2000000",
                "--min-iters",
                "20",
                "--samples",
                "3",
            ])
            .args(["--setup-seed", SETUP])
            .args(extra)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run kem-runner serve");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut r = Runner {
            child,
            stdin,
            lines,
            calls: 0,
        };
        let (w, json) = r.ask(None);
        assert_eq!(w, "ready", "{json}");
        r.calls = serde_json::from_str::<Ready>(&json).unwrap().batch_calls;
        r
    }

    /// Send `line` (if any) and read the answer: its word and JSON.
    fn ask(&mut self, line: Option<&str>) -> (String, String) {
        if let Some(l) = line {
            writeln!(self.stdin, "{l}").unwrap();
        }
        let got = self.lines.next().expect("an answer").unwrap();
        let (w, json) = got.split_once(' ').unwrap();
        (w.to_string(), json.to_string())
    }

    fn batch(&mut self, line: &str) -> BatchReply {
        let (w, json) = self.ask(Some(line));
        assert_eq!(w, "batch", "{json}");
        serde_json::from_str(&json).unwrap()
    }

    fn checked(&mut self, line: &str, word: &str) -> Checked {
        let (w, json) = self.ask(Some(line));
        assert_eq!(w, word, "{json}");
        serde_json::from_str(&json).unwrap()
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the timed runner's folds agreed with the reference's over two batches (`Err`:
/// the reference's own failure).
fn agree(so: &Path, api: &Path, ns: &str, op: &str) -> Result<bool, String> {
    let (mine, theirs) = (
        scratch(&format!("{ns}{op}")),
        scratch(&format!("{ns}{op}-r")),
    );
    let mut timed = Runner::start(so, api, ns, op, &mine);
    let mut reference = Runner::start(so, api, ns, op, &theirs);
    let mut all = true;
    for b in 0..2u8 {
        let seed = format!("{:02x}", b + 1).repeat(48);
        let n = timed.calls;
        let (fold, due) = if op == "dec" {
            let fed = reference.checked(&format!("feed {seed} {n} fed.ct"), "fed");
            let due = fed.fold.ok_or(fed.failure.unwrap_or_default())?;
            let cts = std::fs::read(theirs.join("fed.ct")).unwrap();
            assert_eq!(cts.len() as u64, n * 32);
            std::fs::write(mine.join("fed.ct"), cts).unwrap();
            (timed.batch(&format!("batch {seed} fed.ct")).fold, due)
        } else {
            let reply = timed.batch(&format!("batch {seed}"));
            assert_eq!(reply.iters, n);
            let again = reference.checked(&format!("replay {seed} {n}"), "replayed");
            (
                reply.fold,
                again.fold.ok_or(again.failure.unwrap_or_default())?,
            )
        };
        all &= fold.as_deref() == Some(due.as_str());
    }
    Ok(all)
}

#[test]
fn an_honest_kem_agrees_with_its_reference_and_cheats_do_not() {
    let Some((good, good_api)) = toy("good", "kems/good") else {
        return;
    };
    let (lazy, lazy_api) = toy("lazy", "hostile/integrity/lazy").unwrap();
    let (caching, caching_api) = toy("caching", "hostile/integrity/caching").unwrap();
    for op in ["keygen", "enc", "dec"] {
        assert_eq!(agree(&good, &good_api, "FIX_GOOD_", op), Ok(true), "{op}");
        assert_eq!(agree(&lazy, &lazy_api, "INT_LAZY_", op), Ok(false), "{op}");
    }
    // Its enc repeats its outputs for the one public key: the reference says so (a seeded
    // DRBG never gives two calls the same ciphertext).
    let why = agree(&caching, &caching_api, "INT_CACHE_", "enc").unwrap_err();
    assert_eq!(why, "call 2 returned the ciphertext of an earlier call");
    // Its dec never sees a ciphertext twice, but the reference's enc that makes them
    // repeats its ciphertext: the reference says so.
    let why = agree(&caching, &caching_api, "INT_CACHE_", "dec").unwrap_err();
    assert_eq!(why, "call 2 returned the ciphertext of an earlier call");
}

/// A member's further processes take its first one's calls per batch (`--batch-iters`,
/// no calibration of their own), so one feed of ciphertexts serves them all: each
/// decapsulates the same file to the fold the reference's enc made.
#[test]
fn processes_given_the_batch_calls_share_one_feed() {
    let Some((good, api)) = toy("good", "kems/good") else {
        return;
    };
    let ns = "FIX_GOOD_";
    let cwds: Vec<PathBuf> = (1..4).map(|k| scratch(&format!("share-{k}"))).collect();
    let mut timed = vec![Runner::start(&good, &api, ns, "dec", &cwds[0])];
    let iters = timed[0].calls.to_string();
    let given = ["--batch-iters", iters.as_str()];
    for cwd in &cwds[1..] {
        timed.push(Runner::with(&good, &api, ns, "dec", cwd, &given));
    }
    assert!(timed.iter().all(|r| r.calls == timed[0].calls));
    let theirs = scratch("share-r");
    let mut reference = Runner::start(&good, &api, ns, "dec", &theirs);
    let seed = "07".repeat(48);
    let fed = reference.checked(&format!("feed {seed} {iters} fed.ct"), "fed");
    let due = fed.fold.expect("the reference's fold");
    for (k, (r, cwd)) in timed.iter_mut().zip(&cwds).enumerate() {
        std::fs::copy(theirs.join("fed.ct"), cwd.join("fed.ct")).unwrap();
        let reply = r.batch(&format!("batch {seed} fed.ct"));
        assert_eq!(reply.iters, r.calls);
        assert_eq!(
            reply.fold.as_deref(),
            Some(due.as_str()),
            "process {}",
            k + 1
        );
    }
}

/// `key SEED` makes the same key pair in every process (`kem_native::checked::rekey`: the
/// same fold of it in the timed runner and the reference): ciphertexts fed under one key
/// decapsulate to the reference's fold with that key, not after `key` with another seed;
/// an enc batch replays to its fold under its key, not under another.
#[test]
fn a_key_command_makes_the_same_key_pair_in_every_process() {
    let Some((good, api)) = toy("good", "kems/good") else {
        return;
    };
    let ns = "FIX_GOOD_";
    let (s, t, b) = ("0a".repeat(48), "0b".repeat(48), "0c".repeat(48));
    for op in ["dec", "enc"] {
        let (mine, theirs) = (
            scratch(&format!("key-{op}")),
            scratch(&format!("key-{op}-r")),
        );
        let mut timed = Runner::start(&good, &api, ns, op, &mine);
        let mut reference = Runner::start(&good, &api, ns, op, &theirs);
        let key = |r: &mut Runner, seed: &str| r.checked(&format!("key {seed}"), "keyed").fold;
        let made = key(&mut timed, &s);
        assert!(made.is_some());
        assert_eq!(key(&mut reference, &s), made, "{op}");
        assert_ne!(key(&mut reference, &t), made, "{op}");
        assert_eq!(key(&mut reference, &s), made, "{op}");
        let n = timed.calls;
        let (fold, due) = if op == "dec" {
            let due = reference
                .checked(&format!("feed {b} {n} fed.ct"), "fed")
                .fold;
            std::fs::copy(theirs.join("fed.ct"), mine.join("fed.ct")).unwrap();
            (timed.batch(&format!("batch {b} fed.ct")).fold, due)
        } else {
            let fold = timed.batch(&format!("batch {b}")).fold;
            (
                fold,
                reference
                    .checked(&format!("replay {b} {n}"), "replayed")
                    .fold,
            )
        };
        assert!(due.is_some());
        assert_eq!(fold, due, "{op}");
        // Under another key the same batch folds otherwise.
        if op == "dec" {
            key(&mut timed, &t);
            assert_ne!(timed.batch(&format!("batch {b} fed.ct")).fold, due);
        } else {
            key(&mut reference, &t);
            let again = reference
                .checked(&format!("replay {b} {n}"), "replayed")
                .fold;
            assert_ne!(again, fold);
        }
    }
}

/// A dec that answers its calibration's repeated ciphertext from a cache (and a keygen that
/// idles when called back to back) calibrates to no more calls per batch than the cap, so
/// the reference's feed (replay) stays short.
#[test]
fn a_caching_dec_calibrates_to_at_most_the_cap() {
    let Some((caching, api)) = toy("caching", "hostile/integrity/caching") else {
        return;
    };
    let (lazy, lazy_api) = toy("lazy", "hostile/integrity/lazy").unwrap();
    let cap = kem_native::checked::MAX_BATCH_CALLS;
    let timed = Runner::start(&caching, &api, "INT_CACHE_", "dec", &scratch("cap"));
    assert!(timed.calls <= cap, "{}", timed.calls);
    let lazy = Runner::start(&lazy, &lazy_api, "INT_LAZY_", "keygen", &scratch("cap-k"));
    assert!(lazy.calls <= cap, "{}", lazy.calls);
}

/// A batch whose fed file holds the wrong number of ciphertexts fails with the reason,
/// before anything is timed.
#[test]
fn a_fed_file_of_the_wrong_size_fails_the_batch() {
    let Some((good, api)) = toy("good", "kems/good") else {
        return;
    };
    let cwd = scratch("short");
    std::fs::write(cwd.join("short.ct"), [0u8; 5]).unwrap();
    let mut timed = Runner::start(&good, &api, "FIX_GOOD_", "dec", &cwd);
    let (w, json) = timed.ask(Some(&format!("batch {} short.ct", "00".repeat(48))));
    assert_eq!(w, "done");
    assert!(json.contains("short.ct holds 5 bytes, not the"), "{json}");
}

/// `serve`'s `finish` with `--stack WORD` (after one batch): its record, or how it ended.
fn finish_with_stack(so: &Path, api: &Path, word: &str) -> Result<TimeOutput, String> {
    let out = serve_command(so, api, "FIX_GOOD_", "keygen")
        .args(["--batch-ns", "2000000", "--samples", "3"])
        .args(["--stack", word])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            writeln!(child.stdin.take().unwrap(), "batch\nfinish")?;
            child.wait_with_output()
        })
        .expect("run kem-runner serve");
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().find_map(|l| l.strip_prefix("done ")) {
        Some(json) => Ok(serde_json::from_str(json).unwrap()),
        None => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

/// A session's further processes of a member skip the stack (`--stack skip`): their record
/// has none and no painted bytes, the rest as usual; `measure` (the default) has it; any
/// other word is refused.
#[test]
fn a_process_that_skips_the_stack_records_none() {
    let Some((good, api)) = toy("good", "kems/good") else {
        return;
    };
    let skipped = finish_with_stack(&good, &api, "skip").unwrap();
    assert_eq!(skipped.failure, None);
    assert_eq!(skipped.trials.len(), 1);
    assert_eq!(skipped.samples.len(), 3);
    assert_eq!(skipped.memory.stack_bytes, None);
    assert_eq!(skipped.memory.stack_painted_bytes, 0);
    assert!(skipped.memory.peak_rss_kib.is_some());
    let measured = finish_with_stack(&good, &api, "measure").unwrap();
    assert!(measured.memory.stack_bytes.is_some_and(|b| b > 0));
    assert!(measured.memory.stack_painted_bytes > 0);
    let refused = finish_with_stack(&good, &api, "sometimes").unwrap_err();
    assert!(
        refused.contains("unknown `--stack sometimes` (expected measure or skip)"),
        "{refused}"
    );
}
