//! Running child processes for steps: each in its own process group, with a deadline, its
//! output captured within a fixed bound and appended to the step's log, and killed (group
//! and all; with the sandbox, its whole PID namespace) on timeout, Ctrl-C or step end.
//!
//! Nothing here waits for a pipe to close after the child is gone: a descendant that keeps
//! the pipes open (outside a sandbox) cannot hold up a step or Ctrl-C. Captured output and
//! logs keep their first and last [`CAP`] bytes with the cut marked, so a KEM that writes
//! gigabytes costs the engine a few MiB of memory and disk.
//!
//! [`Served`] is the same for a child that stays alive and answers commands line by line
//! (the timing session's runners). [`slurm`] runs the contained ones as Slurm jobs.

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

mod capture;
mod served;
pub mod slurm;

pub use capture::{open_log, Capture, Log};
pub use served::{make_room_for, NoLine, Served, SERVED_QUEUE};

use super::sandbox::disk::{DiskGuard, Poll, DISK};
use super::sandbox::{Jail, Sandbox};

/// Set by the Ctrl-C handler; every running child is killed when it flips.
pub static CANCELLED: AtomicBool = AtomicBool::new(false);

/// Bytes kept at the start and at the end of a captured stream and of a log.
pub const CAP: usize = 1 << 20;
/// Longest stderr line passed to an observer (longer lines are cut).
const LINE_CAP: usize = 64 << 10;
/// How long the output readers may take to drain the pipes once the child is gone.
const DRAIN: Duration = Duration::from_millis(500);

/// Whether the run was interrupted.
pub fn cancelled() -> bool {
    CANCELLED.load(Ordering::SeqCst)
}

/// How a child process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal (not by us).
    Signal(i32),
    /// Killed by us after the deadline.
    TimedOut,
    /// Killed by us because the run was interrupted.
    Cancelled,
    /// Killed by us for what its folders hold (the reason; see `sandbox::disk`).
    Exceeded(String),
}

impl Exit {
    pub fn success(&self) -> bool {
        *self == Exit::Code(0)
    }

    /// The exit of the program inside bubblewrap: bwrap exits with 128 + N when the process
    /// it ran was killed by signal N.
    pub fn through_sandbox(self) -> Exit {
        match self {
            Exit::Code(c @ 129..=192) => Exit::Signal(c - 128),
            other => other,
        }
    }

    /// "exit code 2", "killed by SIGSEGV (segmentation fault)", ...
    pub fn describe(&self) -> String {
        match self {
            Exit::Code(c) => format!("exit code {c}"),
            Exit::Signal(s) => format!("killed by {}", kem_native::sys::signal_name(*s)),
            Exit::TimedOut => "timed out".to_string(),
            Exit::Cancelled => "interrupted".to_string(),
            Exit::Exceeded(why) => why.clone(),
        }
    }
}

/// What a finished child produced.
#[derive(Debug)]
pub struct Output {
    pub exit: Exit,
    /// stdout, with the middle cut out (and marked) beyond 2 x [`CAP`] bytes.
    pub stdout: Vec<u8>,
    /// stderr, likewise.
    pub stderr: Vec<u8>,
    /// Whether either stream was cut.
    pub truncated: bool,
}

/// The argv of a command, for records.
pub fn argv(cmd: &Command) -> Vec<String> {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|s| s.to_string_lossy().into_owned())
        .collect()
}

/// Run `cmd` until it exits or `deadline` passes. stdout and stderr are captured (within
/// the bound) and appended to `log`, with the command line first. The child gets its own
/// process group, so a timeout, Ctrl-C or the end of the step kills everything it started
/// that stayed in the group.
pub fn run(cmd: &mut Command, deadline: Instant, log: &mut Log) -> std::io::Result<Output> {
    let shown = argv(cmd);
    run_observed(cmd, &shown, deadline, log, &|_| {})
}

/// Read a pipe into a shared capture; each complete stderr line (cut at [`LINE_CAP`]) goes
/// to `on_line`.
fn reader(
    mut pipe: impl Read + Send + 'static,
    capture: Arc<Mutex<Capture>>,
    on_line: Option<mpsc::Sender<String>>,
    done: mpsc::Sender<()>,
) {
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 << 10];
        let mut line = Vec::new();
        loop {
            let n = match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            capture.lock().expect("capture lock").push(&buf[..n]);
            if let Some(tx) = &on_line {
                for chunk in buf[..n].split_inclusive(|&b| b == b'\n') {
                    if line.len() < LINE_CAP {
                        let room = LINE_CAP - line.len();
                        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
                    }
                    if chunk.ends_with(b"\n") {
                        let _ = tx.send(String::from_utf8_lossy(&line).trim_end().to_string());
                        line.clear();
                    }
                }
            }
        }
        let _ = done.send(());
    });
}

/// [`run`], logging `shown` as the command line (the command as the user wrote it, not
/// the sandbox around it) and calling `on_stderr_line` with every stderr line as it
/// arrives (progress).
pub fn run_observed(
    cmd: &mut Command,
    shown: &[String],
    deadline: Instant,
    log: &mut Log,
    on_stderr_line: &(dyn Fn(&str) + Sync),
) -> std::io::Result<Output> {
    run_guarded(cmd, shown, deadline, log, on_stderr_line, None, None)
}

/// A kem-runner job started with its words on stdin (`kem-runner -`, see kem-runner's
/// docs), so that every job's command line reads the same to the KEM: `args` up to and
/// including the runner (a wrapper's or an emulator's words before it) and then `-`, and
/// the job's words as the JSON line to send. `None` when `program` is not `runner` and
/// `args` do not name it.
pub fn job_on_stdin(
    program: &Path,
    args: &[String],
    runner: &Path,
) -> Option<(Vec<String>, String)> {
    let at = if program == runner {
        0
    } else {
        args.iter().position(|a| Path::new(a) == runner)? + 1
    };
    let line = serde_json::to_string(&args[at..]).ok()?;
    let head = args[..at].iter().cloned().chain(["-".to_string()]);
    Some((head.collect(), line))
}

/// [`run_observed`], and with a disk guard, the folders the child may write are checked
/// while it runs ([`DiskGuard`]'s interval) and once after it ended: a verdict kills it
/// (group and all) and becomes its [`Exit::Exceeded`]. `stdin`: one line the child reads
/// on its stdin (a job's words, [`job_on_stdin`]), else it reads nothing there.
pub fn run_guarded(
    cmd: &mut Command,
    shown: &[String],
    deadline: Instant,
    log: &mut Log,
    on_stderr_line: &(dyn Fn(&str) + Sync),
    guard: Option<&DiskGuard>,
    stdin: Option<&str>,
) -> std::io::Result<Output> {
    let mut poll = guard.map(Poll::new);
    writeln!(log, "$ {}", shell_line(shown))?;
    let mut child = cmd
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()?;
    if let (Some(line), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // One short line, far under a pipe's buffer; a child that ended before reading it
        // makes this fail, and its exit says why.
        let _ = writeln!(pipe, "{line}");
    }
    let pgid = child.id();
    let out_cap = Arc::new(Mutex::new(Capture::new(CAP)));
    let err_cap = Arc::new(Mutex::new(Capture::new(CAP)));
    let (done_tx, done_rx) = mpsc::channel();
    let (line_tx, line_rx) = mpsc::channel();
    reader(
        child.stdout.take().expect("stdout is piped"),
        Arc::clone(&out_cap),
        None,
        done_tx.clone(),
    );
    reader(
        child.stderr.take().expect("stderr is piped"),
        Arc::clone(&err_cap),
        Some(line_tx),
        done_tx,
    );
    let mut killed = None;
    let status = loop {
        for line in line_rx.try_iter() {
            on_stderr_line(&line);
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        let reason = if cancelled() {
            Some(Exit::Cancelled)
        } else if Instant::now() >= deadline {
            Some(Exit::TimedOut)
        } else {
            poll.as_mut().and_then(Poll::due).map(Exit::Exceeded)
        };
        if let Some(reason) = reason {
            let _ = kem_native::sys::kill_process_group(pgid);
            killed = Some(reason);
            break child.wait()?;
        }
        thread::sleep(Duration::from_millis(20));
    };
    // The step is over: whatever it left in its group goes too.
    let _ = kem_native::sys::kill_process_group(pgid);
    // Drain what is buffered; a pipe still held open by an escaped descendant is abandoned
    // (its reader thread ends when the pipe closes).
    let until = Instant::now() + DRAIN;
    for _ in 0..2 {
        if done_rx
            .recv_timeout(until.saturating_duration_since(Instant::now()))
            .is_err()
        {
            break;
        }
    }
    for line in line_rx.try_iter() {
        on_stderr_line(&line);
    }
    let exit = match (killed, status.code(), status.signal()) {
        (Some(k), _, _) => k,
        (None, Some(c), _) => Exit::Code(c),
        (None, None, Some(s)) => Exit::Signal(s),
        (None, None, None) => Exit::Code(-1),
    };
    // What it left counts too (it may have been quicker than the interval).
    let exit = match guard.and_then(DiskGuard::check) {
        Some(why) if !matches!(exit, Exit::Cancelled | Exit::TimedOut) => Exit::Exceeded(why),
        _ => exit,
    };
    let (stdout, stderr, truncated) = {
        let o = out_cap.lock().expect("capture lock");
        let e = err_cap.lock().expect("capture lock");
        (o.bytes(), e.bytes(), o.truncated() || e.truncated())
    };
    for stream in [&stdout, &stderr] {
        if !stream.is_empty() {
            log.write_all(stream)?;
            if !stream.ends_with(b"\n") {
                writeln!(log)?;
            }
        }
    }
    writeln!(log, "# {}", exit.describe())?;
    Ok(Output {
        exit,
        stdout,
        stderr,
        truncated,
    })
}

/// `program` with `args` run by `sandbox` inside `jail`, as a one-shot compile outside a
/// step (the link check's objects, the import probe's): logged as written (not the sandbox
/// around it), stopped `timeout` from now, the folders it may write held to [`DISK`], its
/// exit read through the sandbox.
pub fn run_jailed(
    sandbox: &Sandbox,
    program: &str,
    args: Vec<String>,
    jail: &Jail,
    timeout: Duration,
    log: &mut Log,
) -> std::io::Result<Output> {
    let mut cmd = sandbox.command(Path::new(program), &args, jail);
    let shown: Vec<String> = std::iter::once(program.to_string()).chain(args).collect();
    let guard = DiskGuard::new(&jail.write, DISK);
    let deadline = Instant::now() + timeout;
    let mut ran = run_guarded(&mut cmd, &shown, deadline, log, &|_| {}, Some(&guard), None)?;
    ran.exit = ran.exit.through_sandbox();
    Ok(ran)
}

/// A command line as a user would paste it into a shell.
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The last `n` lines of a text, for failure summaries.
pub fn tail(text: &[u8], n: usize) -> String {
    let s = String::from_utf8_lossy(text);
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn log() -> (tempfile::TempDir, Log) {
        let dir = tempfile::tempdir().unwrap();
        let f = open_log(&dir.path().join("x.log")).unwrap();
        (dir, f)
    }

    #[test]
    fn captures_output_and_code() {
        let (_d, mut log) = log();
        let far = Instant::now() + Duration::from_secs(30);
        let out = run(
            Command::new("sh").args(["-c", "echo hi; echo err >&2; exit 3"]),
            far,
            &mut log,
        )
        .unwrap();
        assert_eq!(out.exit, Exit::Code(3));
        assert_eq!(out.stdout, b"hi\n");
        assert_eq!(out.stderr, b"err\n");
    }

    #[test]
    fn kills_the_whole_group_on_timeout() {
        let (_d, mut log) = log();
        let start = Instant::now();
        let out = run(
            Command::new("sh").args(["-c", "sleep 30 & sleep 30; echo never"]),
            start + Duration::from_millis(300),
            &mut log,
        )
        .unwrap();
        assert_eq!(out.exit, Exit::TimedOut);
        // The readers only return once every holder of the pipes (the background sleep too) is dead.
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn observes_stderr_lines_as_they_come() {
        let (_d, mut log) = log();
        let seen = std::sync::Mutex::new(Vec::new());
        let far = Instant::now() + Duration::from_secs(30);
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo a >&2; echo b >&2; echo out"]);
        let out = run_observed(&mut cmd, &["sh".to_string()], far, &mut log, &|l| {
            seen.lock().unwrap().push(l.to_string())
        })
        .unwrap();
        assert_eq!(out.stderr, b"a\nb\n");
        assert_eq!(*seen.lock().unwrap(), vec!["a", "b"]);
    }

    #[test]
    fn an_escaped_pipe_holder_does_not_hold_up_the_step() {
        // setsid leaves the process group, so only the drain bound ends the wait. The
        // holder lives 30 s and the deadline is 60 s away: a wait for either takes 30 s or
        // more, the drain bound far less; 15 s is generous on a loaded machine.
        let (_d, mut log) = log();
        let start = Instant::now();
        let far = start + Duration::from_secs(60);
        let out = run(
            Command::new("sh").args(["-c", "setsid sleep 30 & echo started"]),
            far,
            &mut log,
        )
        .unwrap();
        assert_eq!(out.exit, Exit::Code(0));
        assert_eq!(out.stdout, b"started\n");
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn reports_signals() {
        let (_d, mut log) = log();
        let far = Instant::now() + Duration::from_secs(30);
        let out = run(
            Command::new("sh").args(["-c", "kill -SEGV $$"]),
            far,
            &mut log,
        )
        .unwrap();
        assert_eq!(out.exit, Exit::Signal(11));
        assert_eq!(
            out.exit.describe(),
            "killed by SIGSEGV (segmentation fault)"
        );
    }

    #[test]
    fn quotes_for_the_shell() {
        assert_eq!(
            shell_line(&["gcc".into(), "-O2".into(), "a b".into()]),
            "gcc -O2 'a b'"
        );
    }

    #[test]
    fn bubblewrap_exit_codes_above_128_are_signals() {
        assert_eq!(Exit::Code(139).through_sandbox(), Exit::Signal(11));
        assert_eq!(Exit::Code(1).through_sandbox(), Exit::Code(1));
        assert_eq!(Exit::TimedOut.through_sandbox(), Exit::TimedOut);
    }
}
