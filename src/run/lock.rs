//! One `run` per output folder: an advisory lock (`flock`, through std's `File::try_lock`)
//! on `<outputs>/.lock`, held for the whole run. A second `run` on the same folder stops
//! at once with the pid of the holder instead of running every step a second time. The
//! kernel drops the lock when the holder exits, however it exits.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::error::Error;

/// The held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct OutputsLock {
    _file: File,
    path: PathBuf,
}

impl OutputsLock {
    /// Takes the lock of `out` (created if needed), or says who holds it
    /// ([`Error::LockHeld`]).
    pub fn acquire(out: &Path) -> Result<OutputsLock, Error> {
        let path = out.join(".lock");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(Error::io(path.display()))?;
        match file.try_lock() {
            Ok(()) => {
                let pid = std::process::id();
                file.set_len(0)
                    .and_then(|_| file.rewind())
                    .and_then(|_| writeln!(file, "{pid}"))
                    .map_err(Error::io(path.display()))?;
                Ok(OutputsLock { _file: file, path })
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                let holder = match text.trim() {
                    "" => "another process".to_string(),
                    pid => format!("process {pid}"),
                };
                Err(Error::LockHeld {
                    out: out.to_path_buf(),
                    holder,
                })
            }
            Err(std::fs::TryLockError::Error(e)) => {
                Err(Error::io(format_args!("cannot lock {}", path.display()))(e))
            }
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let held = OutputsLock::acquire(dir.path()).unwrap();
        let err = OutputsLock::acquire(dir.path()).unwrap_err();
        assert!(matches!(err, Error::LockHeld { .. }), "{err}");
        assert_eq!(err.exit_code(), 2);
        let err = err.to_string();
        assert!(
            err.contains(&format!("process {}", std::process::id())),
            "{err}"
        );
        assert!(err.contains("in use"), "{err}");
        drop(held);
        let again = OutputsLock::acquire(dir.path()).unwrap();
        assert!(again.path().ends_with(".lock"));
    }
}
