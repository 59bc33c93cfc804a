//! The command line's own behaviour, on the real binary: a closed standard output.

mod common;

use std::process::Stdio;

use common::ngcc;

/// Issue #16: `ngcc-pipe graph … | head -1` exited 101 with a panic message (`print!` on a
/// closed pipe). Each printing command now exits 0 with nothing on stderr when its reader
/// has gone. The pipe's read end is closed before the command starts, so every write to
/// standard output fails with EPIPE.
#[test]
fn closed_stdout_pipe_exits_0_without_a_message() {
    let commands: [&[&str]; 6] = [
        &["graph", "pipelines/x86_1.kdl"],
        &["graph", "pipelines/x86_1.kdl", "--format", "json"],
        &["list", "pipelines/x86_1.kdl", "steps"],
        &["run", "--dry-run", "pipelines/x86_1.kdl"],
        &[
            "explain",
            "pipelines/x86_1.kdl",
            "ml-kem/ML-KEM-768-clean/time:keygen",
        ],
        &["check", "pipelines/x86_1.kdl"],
    ];
    let out = common::tempdir();
    for args in commands {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let r = ngcc()
            .args(args)
            .arg("--outputs")
            .arg(out.path())
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .expect("ngcc-pipe starts");
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(0), "{args:?}: {}\n{stderr}", r.status);
        assert!(stderr.is_empty(), "{args:?}: stderr:\n{stderr}");
    }
}

/// `compare --csv` with a closed standard output still writes its CSV, the same as with a
/// reader.
#[test]
fn closed_stdout_pipe_still_writes_the_compare_csv() {
    let fixtures = "tests/fixtures/records/x86_1";
    let tmp = common::tempdir();
    let (open_csv, closed_csv) = (tmp.path().join("open.csv"), tmp.path().join("closed.csv"));
    let open = ngcc()
        .args(["compare", fixtures, fixtures, "--csv"])
        .arg(&open_csv)
        .output()
        .expect("ngcc-pipe starts");
    assert_eq!(open.status.code(), Some(0));
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let closed = ngcc()
        .args(["compare", fixtures, fixtures, "--csv"])
        .arg(&closed_csv)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("ngcc-pipe starts");
    let stderr = String::from_utf8_lossy(&closed.stderr);
    assert_eq!(closed.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    let want = std::fs::read(&open_csv).unwrap();
    assert!(
        want.starts_with(b"system_a,system_b,"),
        "{}",
        String::from_utf8_lossy(&want)
    );
    assert_eq!(std::fs::read(&closed_csv).unwrap(), want);
}

/// The same commands with a reader print what they printed before (the pipe's reader is
/// not what makes them succeed).
#[test]
fn open_stdout_pipe_gets_the_whole_output() {
    let r = ngcc()
        .args(["graph", "pipelines/x86_1.kdl"])
        .output()
        .expect("ngcc-pipe starts");
    assert_eq!(r.status.code(), Some(0));
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(text.starts_with("digraph ngcc {"), "{text}");
    assert!(text.trim_end().ends_with('}'), "{text}");
}
