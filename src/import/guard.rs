//! Folders and files `ngcc-pipe import` makes for its own use (an unpacked archive, the
//! headers copied for the compiler, the submission folder before it is renamed into place)
//! are removed however the import ends: when the guard is dropped (success, error, panic),
//! and when the process is killed, even with `SIGKILL`, by a watcher — a `sh` started in its
//! own process group (so a Ctrl-C or a kill of the import's group does not reach it) that
//! waits on a pipe only the import holds: end of file without the import's last word means
//! it died, and the watcher removes the paths (`rm -rf`, which does not follow links, a few
//! passes over a second). An import that ends normally removes them itself, says so on the
//! pipe, and the watcher exits at once.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Paths removed when the guard goes (see the module).
pub struct Guard {
    paths: Vec<PathBuf>,
    watcher: Option<Child>,
}

impl Guard {
    /// A guard over `paths` (absolute; they need not exist yet).
    pub fn over(paths: Vec<PathBuf>) -> io::Result<Guard> {
        // A line on the pipe: the import ended and removed the paths itself. End of file
        // without one: it was killed; a few passes catch what its dying children still wrote.
        let script = "if read -r _done; then exit 0; fi; \
                      for _ in 1 2 3 4 5; do rm -rf -- \"$@\"; sleep 0.2; done";
        let watcher = Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .arg("ngcc-import-cleanup")
            .args(&paths)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        Ok(Guard {
            paths,
            watcher: Some(watcher),
        })
    }

    /// A fresh folder under `TMPDIR` named `ngcc-import-…`, readable by any user (a jailed
    /// compiler's user reads what is copied into it), and its guard.
    pub fn temp_dir() -> io::Result<(PathBuf, Guard)> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("ngcc-import-")
            .tempdir()?
            .keep();
        let guard = match Guard::over(vec![dir.clone()]) {
            Ok(g) => g,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(e);
            }
        };
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
        Ok((dir, guard))
    }

    /// Stop guarding `path`, which was renamed into place: the drop leaves it alone, and the
    /// watcher, which knows only the old name, finds nothing there.
    pub fn release(&mut self, path: &Path) {
        self.paths.retain(|p| p != path);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        for p in &self.paths {
            let _ = crate::safe_fs::tree::remove_tree(p);
        }
        if let Some(mut w) = self.watcher.take() {
            // The line that tells it all went well; then it exits at once.
            if let Some(mut pipe) = w.stdin.take() {
                let _ = std::io::Write::write_all(&mut pipe, b"done\n");
            }
            let _ = w.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_guards_remove_their_folders() {
        let (dir, guard) = Guard::temp_dir().unwrap();
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        std::fs::write(dir.join("a/b/c"), "x").unwrap();
        drop(guard);
        assert!(!dir.exists());
    }
}
