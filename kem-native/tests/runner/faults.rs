//! Faulty fixtures, load and usage errors, and `serve`'s layouts.

use super::*;

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
    // Each as words on the command line, and as the engine sends them: `-` and the words
    // as a JSON line on stdin.
    let on_stdin = |line: &str| {
        use std::io::Write;
        let mut c = runner_command()
            .arg("-")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run kem-runner");
        let _ = writeln!(c.stdin.take().unwrap(), "{line}");
        c.wait_with_output().unwrap()
    };
    let mut runs = Vec::new();
    for (args, want) in cases {
        runs.push((format!("{args:?}"), runner(&args), want));
        let line = serde_json::to_string(&args).unwrap();
        runs.push((format!("- < {line}"), on_stdin(&line), want));
    }
    for bad in ["kat --lib x", "[\"kat\", 3]", ""] {
        runs.push((
            format!("- < {bad:?}"),
            on_stdin(bad),
            "`-`: no job on stdin",
        ));
    }
    for (what, o, want) in runs {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{what}: {err}");
        assert!(o.stdout.is_empty(), "{what}");
        assert!(err.contains(want), "{what}: {err}");
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
