//! Disk use of a contained process, bounded per step: the folders it may write are walked
//! (iteratively, no link followed, see `crate::safe_fs::tree`) while it runs and once more
//! when it has ended; more than [`DISK`] allows — bytes, files, nesting — stops it with
//! that reason. The outputs' file system also keeps [`RESERVE_BYTES`] and
//! [`RESERVE_INODES`] free for the engine's own records and logs: a step that writes and
//! finds less left is stopped too (a step that wrote next to nothing is not).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::safe_fs::tree::{usage, Bounds, WalkError};

/// What a step's writable folders may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskLimits {
    pub bytes: u64,
    pub entries: usize,
    pub depth: usize,
}

/// The limits of every contained step.
pub const DISK: DiskLimits = DiskLimits {
    bytes: 4 << 30,
    entries: 20_000,
    depth: 64,
};
/// Free space kept on the outputs' file system for the engine.
pub const RESERVE_BYTES: u64 = 256 << 20;
/// Free inodes kept on the outputs' file system for the engine.
pub const RESERVE_INODES: u64 = 4096;
/// A step whose folders hold less than this is never blamed for a full disk.
const NEGLIGIBLE: u64 = 1 << 20;
/// How often a running process's folders are walked.
pub const EVERY: Duration = Duration::from_millis(250);

/// The writable folders of one contained process and their limits.
#[derive(Debug, Clone)]
pub struct DiskGuard {
    dirs: Vec<PathBuf>,
    limits: DiskLimits,
}

impl DiskGuard {
    pub fn new(dirs: &[PathBuf], limits: DiskLimits) -> DiskGuard {
        DiskGuard {
            dirs: dirs.to_vec(),
            limits,
        }
    }

    /// Why the process must stop, if it must.
    pub fn check(&self) -> Option<String> {
        let l = self.limits;
        let (mut bytes, mut entries) = (0u64, 0usize);
        for dir in &self.dirs {
            let bounds = Bounds {
                depth: l.depth,
                entries: l.entries.saturating_sub(entries),
            };
            match usage(dir, bounds) {
                Ok((b, n)) => {
                    bytes += b;
                    entries += n;
                }
                Err(WalkError::TooDeep { max, .. }) => {
                    return Some(format!(
                        "stopped by ngcc-pipe: more than {max} nested folders in the folder it \
                         may write"
                    ))
                }
                Err(WalkError::TooMany { .. }) => {
                    return Some(format!(
                        "stopped by ngcc-pipe: more than {} files and folders in the folders \
                         it may write",
                        l.entries
                    ))
                }
                // Unreadable now (e.g. removed while walked): judged at the next check.
                Err(WalkError::Io { .. }) => {}
            }
        }
        if bytes > l.bytes {
            return Some(format!(
                "stopped by ngcc-pipe: more than {} MiB written in the folders it may write",
                l.bytes >> 20
            ));
        }
        if bytes < NEGLIGIBLE && entries < 1000 {
            return None;
        }
        let (free, inodes) = self
            .dirs
            .first()
            .and_then(|d| kem_native::sys::free_space(d).ok())?;
        (free < RESERVE_BYTES || inodes < RESERVE_INODES).then(|| {
            format!(
                "stopped by ngcc-pipe: the outputs' file system is nearly full ({} MiB and \
                 {inodes} inodes left, {} MiB and {RESERVE_INODES} inodes are kept for the \
                 engine) and this step wrote {} MiB in {entries} files",
                free >> 20,
                RESERVE_BYTES >> 20,
                bytes >> 20
            )
        })
    }
}

/// A [`DiskGuard`] checked at most every [`EVERY`].
pub struct Poll<'g> {
    guard: &'g DiskGuard,
    next: Instant,
}

impl<'g> Poll<'g> {
    pub fn new(guard: &'g DiskGuard) -> Poll<'g> {
        Poll {
            guard,
            next: Instant::now() + EVERY,
        }
    }

    /// The guard's verdict when it is time to check again, else `None`.
    pub fn due(&mut self) -> Option<String> {
        if Instant::now() < self.next {
            return None;
        }
        let verdict = self.guard.check();
        self.next = Instant::now() + EVERY;
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_on_depth_count_and_bytes() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("scratch");
        std::fs::create_dir_all(&dir).unwrap();
        let small = DiskLimits {
            bytes: 64 << 10,
            entries: 10,
            depth: 4,
        };
        let g = DiskGuard::new(std::slice::from_ref(&dir), small);
        assert_eq!(g.check(), None);
        std::fs::create_dir_all(dir.join("a/b/c/d/e")).unwrap();
        assert!(g.check().unwrap().contains("more than 4 nested folders"));
        crate::safe_fs::tree::remove_tree(&dir.join("a")).unwrap();
        for i in 0..11 {
            std::fs::write(dir.join(format!("f{i}")), "").unwrap();
        }
        assert!(g.check().unwrap().contains("more than 10 files"));
        crate::safe_fs::tree::remove_tree(&dir).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("big"), vec![1u8; 128 << 10]).unwrap();
        assert!(g.check().unwrap().contains("MiB written"));
    }
}
