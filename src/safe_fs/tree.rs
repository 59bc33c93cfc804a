//! Walking and removing folders whose contents submission code controls (a scratch folder,
//! a build folder, a submission's source tree): iteratively (no recursion, so depth cannot
//! exhaust a stack), never following a symbolic link (a link is an entry like a file, so a
//! `a -> .` loop is one entry), and within [`Bounds`] of depth and count.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Limits of a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Deepest folder level below the root (the root's entries are at depth 1).
    pub depth: usize,
    /// Most entries (files, folders, links).
    pub entries: usize,
}

/// Bounds of a submission's source tree (hashed for cache keys).
pub const SOURCE_BOUNDS: Bounds = Bounds {
    depth: 32,
    entries: 100_000,
};

/// What an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A regular file of this length.
    File(u64),
    Dir,
    /// A symbolic link and its target (not followed).
    Link(PathBuf),
    /// A FIFO, socket or device.
    Other,
}

/// One entry of a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Path relative to the walk's root.
    pub rel: PathBuf,
    pub kind: Kind,
    /// Disk space it takes (`st_blocks` × 512).
    pub disk: u64,
}

/// Why a walk stopped.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    #[error("{root}: more than {max} nested folders (at {at})")]
    TooDeep {
        root: String,
        max: usize,
        at: String,
    },
    #[error("{root}: more than {max} files, folders and links")]
    TooMany { root: String, max: usize },
    #[error("{root}: {source}")]
    Io { root: String, source: io::Error },
}

fn shown(p: &Path) -> String {
    crate::text::excerpt(&p.display().to_string(), 200)
}

/// Visit every entry below `root` (not `root` itself), folders before their contents; a
/// missing `root` has none.
pub fn walk_with(
    root: &Path,
    bounds: Bounds,
    mut visit: impl FnMut(&Entry),
) -> Result<(), WalkError> {
    let io = |source| WalkError::Io {
        root: shown(root),
        source,
    };
    match std::fs::symlink_metadata(root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(e)),
    }
    let mut count = 0usize;
    let mut stack: Vec<(PathBuf, usize)> = vec![(PathBuf::new(), 0)];
    while let Some((rel, depth)) = stack.pop() {
        let mut names: Vec<OsString> = Vec::new();
        for e in std::fs::read_dir(root.join(&rel)).map_err(io)? {
            names.push(e.map_err(io)?.file_name());
            if count + names.len() > bounds.entries {
                return Err(WalkError::TooMany {
                    root: shown(root),
                    max: bounds.entries,
                });
            }
        }
        names.sort();
        count += names.len();
        // Pushed in reverse so that folders are visited in name order.
        let mut dirs = Vec::new();
        for name in names {
            let rel = rel.join(&name);
            let path = root.join(&rel);
            let meta = match std::fs::symlink_metadata(&path) {
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(e)),
            };
            let ft = meta.file_type();
            let kind = if ft.is_symlink() {
                Kind::Link(std::fs::read_link(&path).unwrap_or_default())
            } else if ft.is_dir() {
                Kind::Dir
            } else if ft.is_file() {
                Kind::File(meta.len())
            } else {
                Kind::Other
            };
            if kind == Kind::Dir {
                if depth + 1 >= bounds.depth {
                    return Err(WalkError::TooDeep {
                        root: shown(root),
                        max: bounds.depth,
                        at: shown(&rel),
                    });
                }
                dirs.push(rel.clone());
            }
            visit(&Entry {
                rel,
                kind,
                disk: meta.blocks() * 512,
            });
        }
        stack.extend(dirs.into_iter().rev().map(|d| (d, depth + 1)));
    }
    Ok(())
}

/// Every entry below `root` ([`walk_with`]).
pub fn walk(root: &Path, bounds: Bounds) -> Result<Vec<Entry>, WalkError> {
    let mut all = Vec::new();
    walk_with(root, bounds, |e| all.push(e.clone()))?;
    Ok(all)
}

/// Disk space and entries below `root`.
pub fn usage(root: &Path, bounds: Bounds) -> Result<(u64, usize), WalkError> {
    let (mut disk, mut n) = (0u64, 0usize);
    walk_with(root, bounds, |e| {
        disk += e.disk;
        n += 1;
    })?;
    Ok((disk, n))
}

/// Most entries [`remove_tree`] removes before it gives up.
const REMOVE_MAX: u64 = 50_000_000;

fn open_dir(path: &Path) -> io::Result<File> {
    let open = || {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(path)
    };
    match open() {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            // A folder made unreadable by the code that wrote it (same user).
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
            open()
        }
        other => other,
    }
}

fn via_fd(dir: &File) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()))
}

/// Remove `path` and everything below it, however deep, without following links and with
/// two open folders at a time: it descends through `/proc/self/fd/N/<name>` and comes back
/// through `..`, so neither the stack nor the path length grows with the depth. Missing:
/// nothing to do.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return std::fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    let mut cur = open_dir(path)?;
    let mut names: Vec<OsString> = Vec::new();
    let mut work = 0u64;
    loop {
        let here = via_fd(&cur);
        let mut sub = None;
        for e in std::fs::read_dir(&here)? {
            let e = e?;
            work += 1;
            if work > REMOVE_MAX {
                return Err(io::Error::other(format!(
                    "{}: more than {REMOVE_MAX} entries, not removed",
                    shown(path)
                )));
            }
            if e.file_type()?.is_dir() {
                sub = Some(e.file_name());
                break;
            }
            match std::fs::remove_file(e.path()) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        match sub {
            Some(name) => {
                cur = open_dir(&here.join(&name))?;
                names.push(name);
            }
            None => match names.pop() {
                None => break,
                Some(name) => {
                    let parent = open_dir(&here.join(".."))?;
                    drop(cur);
                    std::fs::remove_dir(via_fd(&parent).join(&name))?;
                    cur = parent;
                }
            },
        }
    }
    drop(cur);
    std::fs::remove_dir(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_without_following_links() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        std::fs::create_dir_all(r.join("k/sub")).unwrap();
        std::fs::write(r.join("k/a.c"), "int a;").unwrap();
        std::fs::write(r.join("k/sub/b.c"), "int b;").unwrap();
        std::os::unix::fs::symlink(".", r.join("k/a")).unwrap();
        std::os::unix::fs::symlink(".", r.join("k/b")).unwrap();
        let all = walk(&r.join("k"), SOURCE_BOUNDS).unwrap();
        let names: Vec<String> = all.iter().map(|e| e.rel.display().to_string()).collect();
        assert_eq!(names, ["a", "a.c", "b", "sub", "sub/b.c"]);
        assert_eq!(all[0].kind, Kind::Link(PathBuf::from(".")));
        assert_eq!(all[1].kind, Kind::File(6));
        assert!(walk(&r.join("missing"), SOURCE_BOUNDS).unwrap().is_empty());
    }

    #[test]
    fn depth_and_count_are_bounded() {
        let d = tempfile::tempdir().unwrap();
        let deep = (0..10).fold(d.path().to_path_buf(), |p, _| p.join("d"));
        std::fs::create_dir_all(&deep).unwrap();
        let e = walk(
            d.path(),
            Bounds {
                depth: 5,
                entries: 100,
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("more than 5 nested folders"), "{e}");
        let e = walk(
            d.path(),
            Bounds {
                depth: 50,
                entries: 3,
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("more than 3 files"), "{e}");
    }

    #[test]
    fn removes_trees_deeper_than_a_path_can_name() {
        let d = tempfile::tempdir().unwrap();
        let top = d.path().join("scratch");
        std::fs::create_dir(&top).unwrap();
        // 3,000 levels of a 9-character name: 30 KB of path, far beyond PATH_MAX; built
        // through /proc/self/fd like the removal itself.
        let mut cur = open_dir(&top).unwrap();
        for _ in 0..3000 {
            let next = via_fd(&cur).join("deeper.d");
            std::fs::create_dir(&next).unwrap();
            std::fs::write(via_fd(&cur).join("f"), "x").unwrap();
            cur = open_dir(&next).unwrap();
        }
        std::os::unix::fs::symlink("/", via_fd(&cur).join("root")).unwrap();
        drop(cur);
        let keep = d.path().join("outside");
        std::fs::write(&keep, "kept").unwrap();
        remove_tree(&top).unwrap();
        assert!(!top.exists());
        assert_eq!(std::fs::read(&keep).unwrap(), b"kept");
        remove_tree(&top).unwrap();
    }
}
