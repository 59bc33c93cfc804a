//! A child that stays alive and answers commands line by line ([`Served`]): the timing
//! session's runners.

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::{cancelled, reader, shell_line, Capture, Exit, Log, CAP, DRAIN};
use crate::run::sandbox::disk::{self, DiskGuard};

/// Open files the engine holds for one served child: its stdin, stdout and stderr pipes and
/// its log.
pub const FILES_PER_SERVED: u64 = 4;
/// Open files kept free for the rest of the engine (records, logs, sockets of other steps).
const FILES_SPARE: u64 = 256;

/// Make room for `children` served children at once: raise this process's soft limit on
/// open files (`RLIMIT_NOFILE`) up to its hard limit when the soft one is too low (Debian's
/// default soft limit of 1024 holds about 190 runners; a corpus session has hundreds).
/// Returns the soft limit now in force, or why there cannot be enough room.
pub fn make_room_for(children: usize) -> Result<u64, String> {
    use kem_native::sys::{open_files_limit, set_open_files_soft_limit};
    let needed = children as u64 * FILES_PER_SERVED + FILES_SPARE;
    let (soft, hard) =
        open_files_limit().map_err(|e| format!("cannot read the open-file limit: {e}"))?;
    if soft >= needed {
        return Ok(soft);
    }
    if hard < needed {
        return Err(format!(
            "{children} runners at once need about {needed} open files, but the hard limit is \
             {hard} (`ulimit -Hn`): raise it, or time fewer instances in one campaign"
        ));
    }
    set_open_files_soft_limit(hard)
        .map_err(|e| format!("cannot raise the open-file limit from {soft} to {hard}: {e}"))?;
    Ok(hard)
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
    /// The folders it may write, checked while it is waited for, and when next.
    guard: Option<(DiskGuard, Instant)>,
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
            guard: None,
        })
    }

    /// Check the folders the child may write with `guard` while waiting for its lines: a
    /// verdict kills it.
    pub fn watch(&mut self, guard: DiskGuard) {
        self.guard = Some((guard, Instant::now() + disk::EVERY));
    }

    /// The guard's verdict when a check is due.
    fn guard_due(&mut self) -> Option<String> {
        let (guard, next) = self.guard.as_mut()?;
        if Instant::now() < *next {
            return None;
        }
        *next = Instant::now() + disk::EVERY;
        guard.check()
    }

    /// The child's process id (bubblewrap's, around the program, when sandboxed).
    pub fn id(&self) -> u32 {
        self.child.id()
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
            if let Some(why) = self.guard_due() {
                let why = Exit::Exceeded(why);
                self.kill(&why.describe(), log);
                return Err(NoLine::Killed(why));
            }
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
#[cfg(test)]
mod tests {
    use super::super::tests::log;
    use super::*;

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
    fn room_for_runners_raises_the_soft_open_file_limit_or_says_why() {
        use kem_native::sys::{open_files_limit, set_open_files_soft_limit};
        let (soft, hard) = open_files_limit().unwrap();
        // More than the hard limit allows: refused, naming the limit; nothing changed.
        let too_many = (hard / FILES_PER_SERVED + 1) as usize;
        let why = make_room_for(too_many).unwrap_err();
        assert!(why.contains("hard limit"), "{why}");
        assert_eq!(open_files_limit().unwrap().0, soft);
        // A soft limit below what 100 runners need is raised to the hard limit (briefly
        // lowered to 512 here: 100 runners need 656).
        if hard >= 1024 {
            set_open_files_soft_limit(512).unwrap();
            assert_eq!(make_room_for(100), Ok(hard));
            assert_eq!(open_files_limit().unwrap(), (hard, hard));
            // Enough already: left as it is.
            assert_eq!(make_room_for(1), Ok(hard));
        }
    }
}
