//! One timing at a time per bench CPU, machine-wide: whatever times on a bench CPU — `run`'s
//! timing session and its other exclusive steps, `compare --measure`, `bench fidelity` —
//! holds an advisory lock (`flock`) on `ngcc-pipe-bench-cpu<N>.lock` in the machine's lock
//! folder (`$NGCC_LOCK_DIR`, else `/run/lock`, else the temporary folder), not in an
//! outputs folder: two campaigns with different outputs on one machine share the core.
//!
//! Why: two campaigns started a second apart used to time on bench core 1 at the same time;
//! each saw the other's batches as a slower host and published figures up to 2× too slow
//! with tight intervals. A second timer now waits, saying which process and outputs folder
//! hold the core (the rest of its run goes on meanwhile), or with `--no-wait` gives up at
//! once. The kernel drops the lock when its holder exits, however it exits, so a stale
//! lock of a dead process is taken over at once; the holder's pid, outputs folder and what
//! it does are written into the file for the others to name (any user may write them: the
//! text is shown escaped and never trusted for anything but a message).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::Error;

/// How often a waiting timer tries the lock again.
pub const POLL: Duration = Duration::from_millis(200);

/// The held lock of one bench CPU; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct BenchLock {
    _file: File,
    path: PathBuf,
    /// When it was taken.
    pub since: Instant,
}

/// Who holds a bench CPU, as its lock file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The lock file.
    pub path: PathBuf,
    /// `process 123 (outputs /x, timing session)`, escaped; `another process` when the file
    /// names none.
    pub who: String,
}

/// The folder the bench locks live in: `$NGCC_LOCK_DIR`, else `/run/lock` where it is a
/// folder, else the temporary folder.
pub fn lock_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("NGCC_LOCK_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let run = Path::new("/run/lock");
    if run.is_dir() {
        return run.to_path_buf();
    }
    std::env::temp_dir()
}

/// The lock file of bench CPU `cpu`.
pub fn lock_path(cpu: usize) -> PathBuf {
    lock_dir().join(format!("ngcc-pipe-bench-cpu{cpu}.lock"))
}

/// Open the lock file without following a link, read-write where this user may (it is made
/// writable by every user, so the next holder can name itself), else read-only (`flock`
/// needs no write access); refuse anything but a regular file.
fn open(path: &Path) -> Result<(File, bool), Error> {
    let mut o = OpenOptions::new();
    o.read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o666)
        .custom_flags(libc::O_NOFOLLOW);
    let (file, writable) = match o.open(path) {
        Ok(f) => (f, true),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => (
            OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
                .map_err(Error::io(path.display()))?,
            false,
        ),
        Err(e) => return Err(Error::io(format_args!("bench lock {}", path.display()))(e)),
    };
    let meta = file.metadata().map_err(Error::io(path.display()))?;
    if !meta.file_type().is_file() {
        return Err(Error::io(path.display())(std::io::Error::other(
            "not a regular file",
        )));
    }
    // Only the owner may change the mode (the umask took some bits away); for anyone else
    // this fails and changes nothing.
    if writable && meta.mode() & 0o777 != 0o666 {
        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o666));
    }
    Ok((file, writable))
}

/// One bench CPU and its lock file.
#[derive(Debug, Clone)]
pub struct BenchCpu {
    pub cpu: usize,
    pub path: PathBuf,
}

impl BenchCpu {
    /// Bench CPU `cpu`, its lock in [`lock_dir`].
    pub fn new(cpu: usize) -> BenchCpu {
        BenchCpu {
            cpu,
            path: lock_path(cpu),
        }
    }

    /// Take its lock for `what` (e.g. `timing session`) of the campaign writing to
    /// `outputs`, or say who holds it.
    pub fn try_take(&self, outputs: &Path, what: &str) -> Result<Result<BenchLock, Holder>, Error> {
        let path = self.path.clone();
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let (mut file, writable) = open(&path)?;
        match file.try_lock() {
            Ok(()) => {
                if writable {
                    let text = format!(
                        "{}\n{}\n{what}\n",
                        std::process::id(),
                        std::path::absolute(outputs)
                            .unwrap_or_else(|_| outputs.to_path_buf())
                            .display()
                    );
                    let _ = file
                        .set_len(0)
                        .and_then(|_| file.rewind())
                        .and_then(|_| file.write_all(text.as_bytes()));
                }
                Ok(Ok(BenchLock {
                    _file: file,
                    path,
                    since: Instant::now(),
                }))
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = (&file).take(4096).read_to_string(&mut text);
                Ok(Err(Holder {
                    who: describe(&text),
                    path,
                }))
            }
            Err(std::fs::TryLockError::Error(e)) => {
                Err(Error::io(format_args!("cannot lock {}", path.display()))(e))
            }
        }
    }

    /// Take the lock, waiting for it unless `no_wait`: `on_wait(holder)` is told once when
    /// the lock is held by another process, and the wait stops early (`Ok(None)`) when
    /// `give_up()` says so (Ctrl-C). With `no_wait`, a held lock is [`Error::BenchBusy`].
    pub fn take(
        &self,
        outputs: &Path,
        what: &str,
        no_wait: bool,
        on_wait: &mut dyn FnMut(&Holder),
        give_up: &dyn Fn() -> bool,
    ) -> Result<Option<BenchLock>, Error> {
        let mut told = false;
        loop {
            match self.try_take(outputs, what)? {
                Ok(l) => return Ok(Some(l)),
                Err(h) if no_wait => {
                    return Err(Error::BenchBusy {
                        cpu: self.cpu,
                        holder: h.who,
                    })
                }
                Err(h) => {
                    if !told {
                        on_wait(&h);
                        told = true;
                    }
                }
            }
            if give_up() {
                return Ok(None);
            }
            std::thread::sleep(POLL);
        }
    }
}

/// For the commands that time on their own (`compare --measure`, `bench fidelity`): the
/// lock of bench CPU `cpu`, waiting for it (said once on standard error) unless `no_wait`;
/// [`Error::Interrupted`] when Ctrl-C ends the wait.
pub fn take_for(cpu: usize, outputs: &Path, what: &str, no_wait: bool) -> Result<BenchLock, Error> {
    let mut tell = |h: &Holder| {
        eprintln!(
            "waiting for bench CPU {cpu}: in use by {} (lock {})",
            h.who,
            h.path.display()
        )
    };
    BenchCpu::new(cpu)
        .take(outputs, what, no_wait, &mut tell, &super::exec::cancelled)?
        .ok_or(Error::Interrupted)
}

impl BenchLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The holder a lock file's text names: `process <pid> (outputs <dir>, <what>)`, escaped
/// for the terminal.
fn describe(text: &str) -> String {
    let mut lines = text.lines().map(str::trim);
    let pid = lines
        .next()
        .filter(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
    let out = lines.next().filter(|o| !o.is_empty());
    let what = lines.next().filter(|w| !w.is_empty());
    let Some(pid) = pid else {
        return "another process".to_string();
    };
    let mut s = format!("process {pid}");
    let extra: Vec<String> = [
        out.map(|o| format!("outputs {o}")),
        what.map(str::to_string),
    ]
    .into_iter()
    .flatten()
    .map(|t| crate::text::excerpt(&t, 200))
    .collect();
    if !extra.is_empty() {
        s.push_str(&format!(" ({})", extra.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_is_told_who_holds_the_cpu_and_takes_it_once_released() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let bench = BenchCpu {
            cpu: 7,
            path: out.join("bench.lock"),
        };
        let held = bench.try_take(out, "timing session").unwrap().unwrap();
        let h = bench
            .try_take(Path::new("/elsewhere"), "bench fidelity")
            .unwrap()
            .unwrap_err();
        assert!(
            h.who
                .starts_with(&format!("process {}", std::process::id())),
            "{}",
            h.who
        );
        assert!(h.who.contains("timing session"), "{}", h.who);
        assert!(h.who.contains(&out.display().to_string()), "{}", h.who);
        let e = bench
            .take(out, "x", true, &mut |_| {}, &|| false)
            .unwrap_err();
        assert!(matches!(e, Error::BenchBusy { cpu: 7, .. }), "{e}");
        assert_eq!(e.exit_code(), 2);
        // Waiting: told once, then gives up when asked.
        let mut told = Vec::new();
        let got = bench
            .take(out, "x", false, &mut |h| told.push(h.who.clone()), &|| true)
            .unwrap();
        assert!(got.is_none());
        assert_eq!(told.len(), 1);
        drop(held);
        // Another test's child forked before its exec may hold a copy of the descriptor for
        // a moment: the lock is free again once it is gone.
        let end = Instant::now() + Duration::from_secs(5);
        let again = bench
            .take(out, "again", false, &mut |_| {}, &|| Instant::now() > end)
            .unwrap()
            .expect("free again");
        assert!(again.path().ends_with("bench.lock"));
        let mode = std::fs::metadata(again.path()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o666);
    }

    #[test]
    fn what_a_lock_file_says_is_shown_escaped() {
        assert_eq!(describe(""), "another process");
        assert_eq!(describe("not a pid\n"), "another process");
        assert_eq!(describe("42\n"), "process 42");
        assert_eq!(
            describe("42\n/o\x1b]0;x\x07\ntime\n"),
            "process 42 (outputs /o\\x1b]0;x\\x07, time)"
        );
    }

    #[test]
    fn a_link_in_place_of_the_lock_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("l.lock");
        std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
        assert!(open(&link).is_err());
        let folder = dir.path().join("f.lock");
        std::fs::create_dir(&folder).unwrap();
        assert!(open(&folder).is_err());
    }
}
