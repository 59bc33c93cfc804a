//! Running child processes for steps: each in its own process group, with a deadline, its
//! output appended to the step's log, and killed (group and all) on timeout or Ctrl-C.
//! [`Served`] is the same for a child that stays alive and answers commands line by line
//! (the timing session's runners).

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Set by the Ctrl-C handler; every running child is killed when it flips.
pub static CANCELLED: AtomicBool = AtomicBool::new(false);

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
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// The argv of a command, for records.
pub fn argv(cmd: &Command) -> Vec<String> {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|s| s.to_string_lossy().into_owned())
        .collect()
}

/// Run `cmd` until it exits or `deadline` passes. stdout and stderr are captured in full and
/// also appended to `log` (with the command line first). The child gets its own process
/// group, so a timeout or Ctrl-C kills everything it started.
pub fn run(cmd: &mut Command, deadline: Instant, log: &mut File) -> std::io::Result<Output> {
    run_observed(cmd, deadline, log, &|_| {})
}

/// [`run`], calling `on_stderr_line` with every stderr line as it arrives (progress).
pub fn run_observed(
    cmd: &mut Command,
    deadline: Instant,
    log: &mut File,
    on_stderr_line: &(dyn Fn(&str) + Sync),
) -> std::io::Result<Output> {
    writeln!(log, "$ {}", shell_line(&argv(cmd)))?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()?;
    let pgid = child.id();
    let mut out_pipe = child.stdout.take().expect("stdout is piped");
    let err_pipe = child.stderr.take().expect("stderr is piped");
    let (status, killed, stdout, stderr) = thread::scope(|scope| -> std::io::Result<_> {
        let out_reader = scope.spawn(move || {
            let mut buf = Vec::new();
            let _ = out_pipe.read_to_end(&mut buf);
            buf
        });
        let err_reader = scope.spawn(move || {
            let mut buf = Vec::new();
            let mut reader = BufReader::new(err_pipe);
            let mut line = Vec::new();
            while let Ok(n) = reader.read_until(b'\n', &mut line) {
                if n == 0 {
                    break;
                }
                on_stderr_line(String::from_utf8_lossy(&line).trim_end());
                buf.append(&mut line);
            }
            buf
        });
        let mut killed = None;
        let status = loop {
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
        let stdout = out_reader.join().unwrap_or_default();
        let stderr = err_reader.join().unwrap_or_default();
        Ok((status, killed, stdout, stderr))
    })?;
    let exit = match (killed, status.code(), status.signal()) {
        (Some(k), _, _) => k,
        (None, Some(c), _) => Exit::Code(c),
        (None, None, Some(s)) => Exit::Signal(s),
        (None, None, None) => Exit::Code(-1),
    };
    if !stdout.is_empty() {
        log.write_all(&stdout)?;
        if !stdout.ends_with(b"\n") {
            writeln!(log)?;
        }
    }
    if !stderr.is_empty() {
        log.write_all(&stderr)?;
        if !stderr.ends_with(b"\n") {
            writeln!(log)?;
        }
    }
    writeln!(log, "# {}", exit.describe())?;
    Ok(Output {
        exit,
        stdout,
        stderr,
    })
}

/// A child that stays alive and answers line by line: commands go to its stdin, its stdout
/// lines arrive through a reader thread, its stderr goes to the log. It has its own process
/// group, killed with everything in it when the value is dropped.
pub struct Served {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<String>,
    reader: Option<thread::JoinHandle<()>>,
}

/// Why no answer line came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoLine {
    /// The child closed its stdout; how it ended.
    Ended(Exit),
    /// The deadline passed or the run was interrupted (the child is killed).
    Killed(Exit),
}

impl Served {
    /// Start `cmd` with its stderr appended to `log` (after the command line).
    pub fn spawn(cmd: &mut Command, log: &mut File) -> std::io::Result<Served> {
        writeln!(log, "$ {}", shell_line(&argv(cmd)))?;
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log.try_clone()?))
            .process_group(0)
            .spawn()?;
        let stdin = child.stdin.take();
        let out = child.stdout.take().expect("stdout is piped");
        let (tx, lines) = mpsc::channel();
        let reader = thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Served {
            child,
            stdin,
            lines,
            reader: Some(reader),
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
    /// lines (a KEM writing to stdout) are appended to `log` and skipped.
    pub fn next_line(
        &mut self,
        words: &[&str],
        deadline: Instant,
        log: &mut File,
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
                    return Err(NoLine::Ended(self.wait()));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let why = if cancelled() {
                        Exit::Cancelled
                    } else if Instant::now() >= deadline {
                        Exit::TimedOut
                    } else {
                        continue;
                    };
                    self.kill();
                    return Err(NoLine::Killed(why));
                }
            }
        }
    }

    /// Close stdin and wait for the child to exit.
    pub fn wait(&mut self) -> Exit {
        self.stdin = None;
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        match self.child.wait() {
            Ok(status) => match (status.code(), status.signal()) {
                (Some(c), _) => Exit::Code(c),
                (None, Some(s)) => Exit::Signal(s),
                (None, None) => Exit::Code(-1),
            },
            Err(_) => Exit::Code(-1),
        }
    }

    /// Kill the child's whole process group and reap it.
    pub fn kill(&mut self) {
        let _ = kem_native::sys::kill_process_group(self.child.id());
        self.stdin = None;
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
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

/// Open (truncate) a step's log file.
pub fn open_log(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    File::create(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log() -> (tempfile::TempDir, File) {
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
        let out = run_observed(
            Command::new("sh").args(["-c", "echo a >&2; echo b >&2; echo out"]),
            far,
            &mut log,
            &|l| seen.lock().unwrap().push(l.to_string()),
        )
        .unwrap();
        assert_eq!(out.stderr, b"a\nb\n");
        assert_eq!(*seen.lock().unwrap(), vec!["a", "b"]);
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
        let (_d, mut log) = log();
        let far = Instant::now() + Duration::from_secs(30);
        let script = "echo ready 1; while read c; do echo noise; echo \"got $c\"; done";
        let mut s = Served::spawn(Command::new("sh").args(["-c", script]), &mut log).unwrap();
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
        let mut done = Served::spawn(Command::new("sh").args(["-c", "exit 4"]), &mut log).unwrap();
        assert_eq!(
            done.next_line(&["ready"], far, &mut log),
            Err(NoLine::Ended(Exit::Code(4)))
        );
    }
}
