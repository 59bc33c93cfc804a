//! The file system as the loader sees it: real, or in memory for tests and benchmarks.
//!
//! Everything the loader touches (reading files, checking that folders exist, expanding
//! globs, showing a path) goes through [`SourceFs`], so a 1000-instance campaign can be
//! loaded without touching the disk.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use crate::safe_fs::normalize;

/// What the DSL loader needs from a file system. Paths passed in are absolute and normalised.
pub trait SourceFs {
    /// The whole file as UTF-8.
    fn read_to_string(&self, path: &Path) -> io::Result<String>;
    /// True for an existing file or folder.
    fn exists(&self, path: &Path) -> bool;
    /// True for an existing folder.
    fn is_dir(&self, path: &Path) -> bool;
    /// Files matching an absolute glob pattern (`*` does not cross `/`), sorted.
    fn glob(&self, pattern: &str) -> Result<Vec<PathBuf>, String>;
    /// Absolute form of a path given by the user (relative to the working directory).
    fn absolute(&self, path: &Path) -> PathBuf;
    /// How a path is shown in messages (relative to the working directory when possible).
    fn display(&self, path: &Path) -> String;
    /// The path with symbolic links resolved (as far as it exists), for containment checks.
    fn canonical(&self, path: &Path) -> PathBuf {
        path.to_path_buf()
    }
    /// The SHA-256 of a file's bytes (lower-case hex), when it can be read; a file system
    /// that cannot tell (in memory) answers `None` and the check is left to the run.
    fn sha256(&self, _path: &Path) -> Option<String> {
        None
    }
    /// The program a command names: a path as it is when it is a file, else the first
    /// `PATH` folder holding it; `None` when there is none.
    fn program(&self, command: &str) -> Option<PathBuf>;
}

/// `command` on this machine: a path (holding `/`) when it is a file, else the first `PATH`
/// folder holding a file of that name.
pub fn find_program(command: &str) -> Option<PathBuf> {
    if command.contains('/') {
        let p = PathBuf::from(command);
        return p.is_file().then_some(p);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(command))
        .find(|f| f.is_file())
}

/// The real file system, relative paths taken from the working directory.
#[derive(Debug, Clone)]
pub struct RealFs {
    cwd: PathBuf,
}

impl RealFs {
    /// The real file system seen from the current working directory.
    pub fn new() -> Self {
        RealFs {
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        }
    }
}

impl Default for RealFs {
    fn default() -> Self {
        RealFs::new()
    }
}

impl SourceFs for RealFs {
    fn program(&self, command: &str) -> Option<PathBuf> {
        find_program(command)
    }
    fn sha256(&self, path: &Path) -> Option<String> {
        use sha2::{Digest, Sha256};
        let mut f = std::fs::File::open(path).ok()?;
        let mut h = Sha256::new();
        io::copy(&mut f, &mut h).ok()?;
        Some(hex::encode(h.finalize()))
    }
    fn read_to_string(&self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn glob(&self, pattern: &str) -> Result<Vec<PathBuf>, String> {
        let opts = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        let paths = glob::glob_with(pattern, opts).map_err(|e| e.msg.to_string())?;
        let mut out: Vec<PathBuf> = paths
            .filter_map(Result::ok)
            .filter(|p| p.is_file())
            .map(|p| normalize(&p))
            .collect();
        out.sort();
        Ok(out)
    }

    fn absolute(&self, path: &Path) -> PathBuf {
        normalize(&self.cwd.join(path))
    }

    fn canonical(&self, path: &Path) -> PathBuf {
        // The longest existing ancestor resolved, the rest appended as written.
        let mut rest = Vec::new();
        let mut cur = path;
        loop {
            if let Ok(c) = std::fs::canonicalize(cur) {
                return rest.iter().rev().fold(c, |acc: PathBuf, r| acc.join(r));
            }
            match (cur.parent(), cur.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_os_string());
                    cur = parent;
                }
                _ => return path.to_path_buf(),
            }
        }
    }

    fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.cwd) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
            _ => path.display().to_string(),
        }
    }
}

/// An in-memory file system: files with their text, and folders (implied by files or added).
/// Every program is installed (`/usr/bin/<name>`) unless [`MemFs::without_program`] says not.
#[derive(Debug, Clone, Default)]
pub struct MemFs {
    files: BTreeMap<PathBuf, String>,
    dirs: BTreeSet<PathBuf>,
    missing_programs: BTreeSet<String>,
}

impl MemFs {
    /// An empty in-memory file system.
    pub fn new() -> Self {
        MemFs::default()
    }

    /// Adds (or replaces) a file; its parent folders exist from then on. Relative paths are
    /// taken from `/`.
    pub fn add_file(&mut self, path: impl AsRef<Path>, text: impl Into<String>) -> &mut Self {
        let p = self.absolute(path.as_ref());
        self.add_parents(&p);
        self.files.insert(p, text.into());
        self
    }

    /// Adds an (empty) folder.
    pub fn add_dir(&mut self, path: impl AsRef<Path>) -> &mut Self {
        let p = self.absolute(path.as_ref());
        self.add_parents(&p);
        self.dirs.insert(p);
        self
    }

    /// Makes a program missing (a compiler `check` must refuse).
    pub fn without_program(&mut self, command: &str) -> &mut Self {
        self.missing_programs.insert(command.to_string());
        self
    }

    fn add_parents(&mut self, p: &Path) {
        let mut cur = p.parent();
        while let Some(d) = cur {
            if !self.dirs.insert(d.to_path_buf()) {
                break;
            }
            cur = d.parent();
        }
    }
}

impl SourceFs for MemFs {
    fn program(&self, command: &str) -> Option<PathBuf> {
        (!self.missing_programs.contains(command)).then(|| Path::new("/usr/bin").join(command))
    }
    fn read_to_string(&self, path: &Path) -> io::Result<String> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))
    }

    fn exists(&self, path: &Path) -> bool {
        self.files.contains_key(path) || self.dirs.contains(path)
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.dirs.contains(path)
    }

    fn glob(&self, pattern: &str) -> Result<Vec<PathBuf>, String> {
        let m = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| e.kind().to_string())?
            .compile_matcher();
        Ok(self
            .files
            .keys()
            .filter(|p| m.is_match(p))
            .cloned()
            .collect())
    }

    fn absolute(&self, path: &Path) -> PathBuf {
        normalize(&Path::new("/").join(path))
    }

    fn display(&self, path: &Path) -> String {
        path.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memfs_globs_and_dirs() {
        let mut fs = MemFs::new();
        fs.add_file("/p/subs/a/manifest.kdl", "")
            .add_file("/p/subs/b/manifest.kdl", "")
            .add_file("/p/subs/b/deep/manifest.kdl", "");
        let got = fs.glob("/p/subs/*/manifest.kdl").unwrap();
        assert_eq!(
            got,
            vec![
                PathBuf::from("/p/subs/a/manifest.kdl"),
                PathBuf::from("/p/subs/b/manifest.kdl")
            ]
        );
        assert!(fs.is_dir(Path::new("/p/subs/b/deep")));
        assert!(!fs.is_dir(Path::new("/p/subs/b/manifest.kdl")));
        assert!(fs.exists(Path::new("/p/subs/b/manifest.kdl")));
    }
}
