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
//! (the timing session's runners).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

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

/// A stream kept within a bound: its first `head_cap` bytes, its last `tail_cap` bytes,
/// and how many bytes in between were dropped.
#[derive(Debug)]
pub struct Capture {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    cut: u64,
}

impl Capture {
    /// Keep the first and the last `cap` bytes.
    pub fn new(cap: usize) -> Capture {
        Capture {
            head_cap: cap,
            tail_cap: cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            cut: 0,
        }
    }

    pub fn push(&mut self, mut data: &[u8]) {
        let n = data.len().min(self.head_cap - self.head.len());
        self.head.extend_from_slice(&data[..n]);
        data = &data[n..];
        if data.len() >= self.tail_cap {
            self.cut += (self.tail.len() + data.len() - self.tail_cap) as u64;
            self.tail.clear();
            self.tail.extend(&data[data.len() - self.tail_cap..]);
            return;
        }
        let over = (self.tail.len() + data.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..over);
        self.cut += over as u64;
        self.tail.extend(data);
    }

    /// Whether bytes were dropped.
    pub fn truncated(&self) -> bool {
        self.cut > 0
    }

    /// Head, the cut marker (if any), tail.
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = self.head.clone();
        if self.cut > 0 {
            if !out.is_empty() && !out.ends_with(b"\n") {
                out.push(b'\n');
            }
            out.extend_from_slice(cut_marker(self.cut).as_bytes());
        }
        out.extend(self.tail.iter());
        out
    }
}

fn cut_marker(bytes: u64) -> String {
    format!("[... {bytes} bytes cut by ngcc-pipe: only the first and last MiB are kept ...]\n")
}

/// A step's log file, capped like a [`Capture`]: the first [`CAP`] bytes go straight to
/// the file, the last [`CAP`] bytes are held in memory and written (after the cut marker)
/// when the log is dropped.
pub struct Log {
    file: File,
    written: usize,
    rest: Capture,
}

impl Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let direct = buf.len().min(CAP - self.written);
        if direct > 0 {
            self.file.write_all(&buf[..direct])?;
            self.written += direct;
        }
        self.rest.push(&buf[direct..]);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        let _ = self.file.write_all(&self.rest.bytes());
    }
}

/// Open (truncate) a step's log file.
pub fn open_log(path: &Path) -> std::io::Result<Log> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    Ok(Log {
        file: File::create(path)?,
        written: 0,
        rest: Capture {
            head_cap: 0,
            ..Capture::new(CAP)
        },
    })
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
    writeln!(log, "$ {}", shell_line(shown))?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()?;
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
            None
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

/// A child that stays alive and answers line by line: commands go to its stdin, its stdout
/// lines arrive through a reader thread (each cut at [`CAP`] bytes, at most
/// [`SERVED_QUEUE`] waiting), its stderr is captured like [`run`]'s and appended to the log
/// when it ends. It has its own process group, killed with everything in it when the value
/// is dropped.
pub struct Served {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<String>,
    reader: Option<thread::JoinHandle<()>>,
    stderr: Arc<Mutex<Capture>>,
    stderr_done: mpsc::Receiver<()>,
    /// Whether the child is bubblewrap around the program (its exit codes 129-192 then
    /// stand for the program's signals).
    sandboxed: bool,
    started: Instant,
    /// How it ended and when the engine saw it end.
    exit: Option<(Exit, Instant)>,
}

/// Stdout lines of a [`Served`] child read ahead of the engine.
pub const SERVED_QUEUE: usize = 64;

/// Why no answer line came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoLine {
    /// The child closed its stdout; how it ended.
    Ended(Exit),
    /// The deadline passed or the run was interrupted (the child is killed).
    Killed(Exit),
}

/// Split a stream into lines of at most [`CAP`] bytes (the rest of a longer line is
/// dropped) and send them until the receiver is gone.
fn line_reader(mut pipe: impl Read + Send + 'static, tx: mpsc::SyncSender<String>) {
    let mut buf = vec![0u8; 64 << 10];
    let mut line = Vec::new();
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for chunk in buf[..n].split_inclusive(|&b| b == b'\n') {
            let room = CAP.saturating_sub(line.len());
            line.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if chunk.ends_with(b"\n") {
                let text = String::from_utf8_lossy(&line).trim_end().to_string();
                line.clear();
                if tx.send(text).is_err() {
                    return;
                }
            }
        }
    }
}

impl Served {
    /// Start `cmd`, logging `shown` as its command line (the command as written, not the
    /// sandbox around it); `sandboxed` says that `cmd` is bubblewrap around it.
    pub fn spawn(
        cmd: &mut Command,
        shown: &[String],
        sandboxed: bool,
        log: &mut Log,
    ) -> std::io::Result<Served> {
        writeln!(log, "$ {}", shell_line(shown))?;
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()?;
        let started = Instant::now();
        let stdin = child.stdin.take();
        let out = child.stdout.take().expect("stdout is piped");
        let (tx, lines) = mpsc::sync_channel(SERVED_QUEUE);
        let lines_thread = thread::spawn(move || line_reader(out, tx));
        let stderr = Arc::new(Mutex::new(Capture::new(CAP)));
        let (done_tx, stderr_done) = mpsc::channel();
        reader(
            child.stderr.take().expect("stderr is piped"),
            Arc::clone(&stderr),
            None,
            done_tx,
        );
        Ok(Served {
            child,
            stdin,
            lines,
            reader: Some(lines_thread),
            stderr,
            stderr_done,
            sandboxed,
            started,
            exit: None,
        })
    }

    /// Send one command line.
    pub fn send(&mut self, command: &str) -> std::io::Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::other("stdin already closed"))?;
        writeln!(stdin, "{command}")?;
        stdin.flush()
    }

    /// The next stdout line that starts with one of `words` (followed by a space); other
    /// lines are appended to `log` and skipped.
    pub fn next_line(
        &mut self,
        words: &[&str],
        deadline: Instant,
        log: &mut Log,
    ) -> Result<(String, String), NoLine> {
        loop {
            let wait = deadline
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(200));
            match self.lines.recv_timeout(wait) {
                Ok(line) => {
                    if let Some((w, rest)) = line.split_once(' ') {
                        if words.contains(&w) {
                            return Ok((w.to_string(), rest.to_string()));
                        }
                    }
                    let _ = writeln!(log, "{line}");
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(NoLine::Ended(self.wait(log)));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let why = if cancelled() {
                        Exit::Cancelled
                    } else if Instant::now() >= deadline {
                        Exit::TimedOut
                    } else {
                        continue;
                    };
                    self.kill(&why.describe(), log);
                    return Err(NoLine::Killed(why));
                }
            }
        }
    }

    /// Close stdin, wait for the child to exit, and append its stderr and exit to `log`
    /// (once).
    pub fn wait(&mut self, log: &mut Log) -> Exit {
        if let Some((e, _)) = &self.exit {
            return e.clone();
        }
        self.stdin = None;
        let status = self.child.wait();
        // The group goes with it (a descendant still holding the pipes).
        let _ = kem_native::sys::kill_process_group(self.child.id());
        let exit = match status {
            Ok(status) => match (status.code(), status.signal()) {
                (Some(c), _) => Exit::Code(c),
                (None, Some(s)) => Exit::Signal(s),
                (None, None) => Exit::Code(-1),
            },
            Err(_) => Exit::Code(-1),
        };
        let exit = if self.sandboxed {
            exit.through_sandbox()
        } else {
            exit
        };
        let why = exit.describe();
        self.finish(exit, &why, log)
    }

    /// Kill the child's whole process group, reap it, and append its stderr and `why` to
    /// `log` (nothing when it has already ended).
    pub fn kill(&mut self, why: &str, log: &mut Log) {
        if self.exit.is_some() {
            return;
        }
        let _ = kem_native::sys::kill_process_group(self.child.id());
        self.stdin = None;
        let _ = self.child.wait();
        self.finish(Exit::Signal(libc::SIGKILL), why, log);
    }

    /// How long the child ran: from its start until it was seen to end (or until now).
    pub fn elapsed(&self) -> Duration {
        let end = self.exit.as_ref().map_or_else(Instant::now, |(_, t)| *t);
        end.saturating_duration_since(self.started)
    }

    /// Collect the stderr of the ended child into `log`, then `# why`; remember `exit`.
    fn finish(&mut self, exit: Exit, why: &str, log: &mut Log) -> Exit {
        let ended = Instant::now();
        let until = Instant::now() + DRAIN;
        let _ = self
            .stderr_done
            .recv_timeout(until.saturating_duration_since(Instant::now()));
        if let Some(r) = self.reader.take() {
            // The reader ends at the pipe's end; a pipe held open by an escaped descendant
            // is abandoned with it.
            if r.is_finished() {
                let _ = r.join();
            }
        }
        let err = self.stderr.lock().expect("capture lock").bytes();
        if !err.is_empty() {
            let _ = log.write_all(&err);
            if !err.ends_with(b"\n") {
                let _ = writeln!(log);
            }
        }
        let _ = writeln!(log, "# {why}");
        self.exit = Some((exit.clone(), ended));
        exit
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if self.exit.is_none() {
            let _ = kem_native::sys::kill_process_group(self.child.id());
            self.stdin = None;
            let _ = self.child.wait();
        }
    }
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

    fn log() -> (tempfile::TempDir, Log) {
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
        // setsid leaves the process group, so only the drain bound ends the wait.
        let (_d, mut log) = log();
        let start = Instant::now();
        let far = start + Duration::from_secs(30);
        let out = run(
            Command::new("sh").args(["-c", "setsid sleep 5 & echo started"]),
            far,
            &mut log,
        )
        .unwrap();
        assert_eq!(out.exit, Exit::Code(0));
        assert_eq!(out.stdout, b"started\n");
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn captures_are_bounded_and_marked() {
        let mut c = Capture::new(4);
        c.push(b"abcdefghij");
        c.push(b"kl");
        assert_eq!(
            c.bytes(),
            b"abcd\n[... 4 bytes cut by ngcc-pipe: only the first and last MiB are kept ...]\nijkl"
        );
        let mut small = Capture::new(4);
        small.push(b"abc");
        small.push(b"def");
        assert_eq!(small.bytes(), b"abcdef");
        assert!(!small.truncated());

        let (d, mut log) = log();
        let far = Instant::now() + Duration::from_secs(30);
        let out = run(
            Command::new("sh").args(["-c", "yes x | head -c 5000000 >&2; echo end >&2"]),
            far,
            &mut log,
        )
        .unwrap();
        drop(log);
        assert!(out.truncated);
        assert!(out.stderr.len() < 2 * CAP + 200, "{}", out.stderr.len());
        assert!(out.stderr.ends_with(b"x\nx\nend\n"));
        let kept = std::fs::read(d.path().join("x.log")).unwrap();
        assert!(kept.len() < 2 * CAP + 400, "{}", kept.len());
        assert!(String::from_utf8_lossy(&kept).contains("bytes cut by ngcc-pipe"));
        assert!(kept.ends_with(b"end\n# exit code 0\n"));
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
    fn served_children_answer_line_by_line_and_die_on_timeout() {
        let (d, mut log) = log();
        let far = Instant::now() + Duration::from_secs(30);
        let script =
            "echo ready 1; echo diag >&2; while read c; do echo noise; echo \"got $c\"; done";
        let sh = ["sh".to_string()];
        let mut s = Served::spawn(
            Command::new("sh").args(["-c", script]),
            &sh,
            false,
            &mut log,
        )
        .unwrap();
        assert_eq!(
            s.next_line(&["ready"], far, &mut log).unwrap(),
            ("ready".to_string(), "1".to_string())
        );
        s.send("batch").unwrap();
        assert_eq!(
            s.next_line(&["got"], far, &mut log).unwrap(),
            ("got".to_string(), "batch".to_string())
        );
        let soon = Instant::now() + Duration::from_millis(200);
        assert_eq!(
            s.next_line(&["got"], soon, &mut log),
            Err(NoLine::Killed(Exit::TimedOut))
        );
        let mut done = Served::spawn(
            Command::new("sh").args(["-c", "exit 4"]),
            &sh,
            false,
            &mut log,
        )
        .unwrap();
        assert_eq!(
            done.next_line(&["ready"], far, &mut log),
            Err(NoLine::Ended(Exit::Code(4)))
        );
        drop(log);
        let kept = std::fs::read_to_string(d.path().join("x.log")).unwrap();
        assert!(kept.contains("noise\ndiag\n# timed out\n"), "{kept}");
        assert!(kept.ends_with("$ sh\n# exit code 4\n"), "{kept}");
    }

    #[test]
    fn bubblewrap_exit_codes_above_128_are_signals() {
        assert_eq!(Exit::Code(139).through_sandbox(), Exit::Signal(11));
        assert_eq!(Exit::Code(1).through_sandbox(), Exit::Code(1));
        assert_eq!(Exit::TimedOut.through_sandbox(), Exit::TimedOut);
    }
}
