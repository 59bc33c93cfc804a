//! Reading files that submission code could have written or replaced (a KEM's `.rsp`,
//! memcheck's XML, callgrind's profiles, anything in a scratch or output folder) without
//! trusting them: a symbolic link is not followed, a FIFO, device or socket is not read, a
//! file larger than the caller's cap is not read, and reading stops at a deadline. The
//! file is opened once (`O_NOFOLLOW | O_NONBLOCK`), checked with `fstat` on that
//! descriptor, and read through it, so it cannot be swapped between the check and the
//! read.
//!
//! [`tree`] walks and removes untrusted folders the same way: iteratively, never following
//! a link, within bounds of depth and count.

pub mod tree;

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

/// How long reading one file may take.
pub const DEADLINE: Duration = Duration::from_secs(10);
/// Cap of a record or other small JSON file read back.
pub const RECORD_CAP: u64 = 64 << 20;
/// Cap of an output file of a tool run on submission code (memcheck's XML, a callgrind
/// profile, a `.rsp` file): the largest file a contained process may write.
pub const OUTPUT_CAP: u64 = 1 << 30;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// A symbolic link.
    #[error("{0} is a symbolic link (not followed)")]
    Link(String),
    /// A FIFO, device, socket or folder.
    #[error("{name} is a {kind}, not a regular file (not read)")]
    NotRegular { name: String, kind: &'static str },
    /// More bytes than the cap.
    #[error("{name} holds more than {max} bytes (not read)")]
    TooLarge { name: String, max: u64 },
    /// Not read within [`DEADLINE`].
    #[error("{name} could not be read within {} s", DEADLINE.as_secs())]
    Slow { name: String },
    /// Resolves outside the folder it must stay in.
    #[error("{name} resolves outside {root} (not read)")]
    Outside { name: String, root: String },
    /// Any other error, e.g. missing.
    #[error("{name}: {source}")]
    Io { name: String, source: io::Error },
}

impl FileError {
    /// Whether the file does not exist.
    pub fn is_missing(&self) -> bool {
        matches!(self, FileError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    /// The error as an `io::Error` (for callers that report I/O errors).
    pub fn into_io(self) -> io::Error {
        match self {
            FileError::Io { source, .. } => source,
            other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
        }
    }
}

fn name_of(path: &Path) -> String {
    crate::text::clean_line(&path.display().to_string())
}

/// Open `path` for reading without following a final symbolic link and without blocking
/// (a FIFO opens at once), and check that it is a regular file.
pub fn open(path: &Path) -> Result<(File, u64), FileError> {
    let name = || name_of(path);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|source| match source.raw_os_error() {
            Some(libc::ELOOP) => FileError::Link(name()),
            _ => FileError::Io {
                name: name(),
                source,
            },
        })?;
    let meta = file.metadata().map_err(|source| FileError::Io {
        name: name(),
        source,
    })?;
    let ft = meta.file_type();
    let kind = if ft.is_file() {
        return Ok((file, meta.len()));
    } else if ft.is_dir() {
        "folder"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_char_device() || ft.is_block_device() {
        "device"
    } else if ft.is_socket() {
        "socket"
    } else {
        "special file"
    };
    Err(FileError::NotRegular { name: name(), kind })
}

/// Read the regular file at `path` (see the module): at most `cap` bytes, within
/// [`DEADLINE`].
pub fn read(path: &Path, cap: u64) -> Result<Vec<u8>, FileError> {
    let (mut file, len) = open(path)?;
    let too_large = || FileError::TooLarge {
        name: name_of(path),
        max: cap,
    };
    if len > cap {
        return Err(too_large());
    }
    let until = Instant::now() + DEADLINE;
    let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(FileError::Io {
                    name: name_of(path),
                    source,
                })
            }
        };
        out.extend_from_slice(&buf[..n]);
        if out.len() as u64 > cap {
            return Err(too_large());
        }
        if Instant::now() > until {
            return Err(FileError::Slow {
                name: name_of(path),
            });
        }
    }
    Ok(out)
}

/// [`read`] as UTF-8 text (invalid sequences replaced).
pub fn read_text(path: &Path, cap: u64) -> Result<String, FileError> {
    read(path, cap).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// [`read`] `from`, and write what was read to `to` (a path the engine owns, replaced):
/// keeping a file a contained process wrote. Returns the bytes.
pub fn keep(from: &Path, to: &Path, cap: u64) -> Result<Vec<u8>, FileError> {
    let bytes = read(from, cap)?;
    let io = |source| FileError::Io {
        name: name_of(to),
        source,
    };
    // A link or other file already at `to` is replaced, not written through.
    match std::fs::remove_file(to) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(to)
        .map_err(io)?;
    f.write_all(&bytes).map_err(io)?;
    Ok(bytes)
}

/// Read a submission's file at `path`, which may be reached through links but must
/// resolve inside `root` (its source tree): a link to `/etc/shadow` or to another
/// submission is not read.
pub fn read_within(root: &Path, path: &Path, cap: u64) -> Result<Vec<u8>, FileError> {
    let io = |p: &Path| {
        let name = name_of(p);
        move |source| FileError::Io { name, source }
    };
    let real_root = std::fs::canonicalize(root).map_err(io(root))?;
    let real = std::fs::canonicalize(path).map_err(io(path))?;
    if !real.starts_with(&real_root) {
        return Err(FileError::Outside {
            name: name_of(path),
            root: name_of(root),
        });
    }
    read(&real, cap)
}

/// Lexically normalised path: removes `.` and resolves `..` against the previous component
/// (the form the campaign loader and the library lookup compare paths in; no link is read).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                let popped = match out.components().next_back() {
                    Some(Component::Normal(_)) => out.pop(),
                    _ => false,
                };
                if !popped && !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Check that `path`, links followed, lies inside `root`: a folder of a submission's source
/// shown to a contained process (bubblewrap binds what a link points to) must not be a link
/// to `/root` or another submission. A missing `path` is fine (nothing is shown).
pub fn inside(root: &Path, path: &Path) -> Result<(), FileError> {
    let real_root = std::fs::canonicalize(root).map_err(|source| FileError::Io {
        name: name_of(root),
        source,
    })?;
    match std::fs::canonicalize(path) {
        Ok(real) if real.starts_with(&real_root) => Ok(()),
        Ok(_) => Err(FileError::Outside {
            name: name_of(path),
            root: name_of(root),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(FileError::Io {
            name: name_of(path),
            source,
        }),
    }
}

/// Check that the folder `path` (links followed) neither holds `other` nor lies in it: a
/// submission's folder shown to its compiler must not be, or contain, the campaign's
/// outputs. A missing `path` is fine.
pub fn apart(path: &Path, other: &Path) -> Result<(), FileError> {
    let (Ok(real), Ok(o)) = (std::fs::canonicalize(path), std::fs::canonicalize(other)) else {
        return Ok(());
    };
    if real.starts_with(&o) || o.starts_with(&real) {
        return Err(FileError::Outside {
            name: name_of(path),
            root: format!("the source (it overlaps {})", name_of(other)),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_resolves_dots() {
        assert_eq!(
            normalize(Path::new("/a/pipelines/../submissions/./x")),
            PathBuf::from("/a/submissions/x")
        );
        assert_eq!(normalize(Path::new("/../x")), PathBuf::from("/x"));
        assert_eq!(normalize(Path::new("../x")), PathBuf::from("../x"));
    }

    #[test]
    fn reads_regular_files_and_refuses_the_rest() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("a.rsp");
        std::fs::write(&f, "count = 0\n").unwrap();
        assert_eq!(read(&f, 100).unwrap(), b"count = 0\n");
        assert!(matches!(
            read(&f, 3),
            Err(FileError::TooLarge { max: 3, .. })
        ));

        let link = d.path().join("link.rsp");
        std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
        let e = read(&link, 100).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");

        let zero = d.path().join("zero.rsp");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(matches!(read(&zero, 100), Err(FileError::Link(_))));
        let e = read(Path::new("/dev/zero"), 100).unwrap_err();
        assert!(e.to_string().contains("device"), "{e}");

        let missing = read(&d.path().join("none"), 100).unwrap_err();
        assert!(missing.is_missing());
        assert!(read(d.path(), 100)
            .unwrap_err()
            .to_string()
            .contains("folder"));
    }

    #[test]
    fn a_fifo_is_refused_at_once() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("kat.rsp");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let start = Instant::now();
        let e = read(&fifo, 100).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        assert!(start.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn keeping_replaces_a_link_at_the_destination() {
        let d = tempfile::tempdir().unwrap();
        let from = d.path().join("memcheck.xml");
        std::fs::write(&from, "<x/>").unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep me").unwrap();
        let to = d.path().join("kept.xml");
        std::os::unix::fs::symlink(&victim, &to).unwrap();
        assert_eq!(keep(&from, &to, 100).unwrap(), b"<x/>");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
        assert_eq!(std::fs::read(&to).unwrap(), b"<x/>");
    }

    #[test]
    fn submission_files_must_resolve_inside_their_tree() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("sub");
        std::fs::create_dir_all(root.join("k")).unwrap();
        std::fs::write(root.join("k/api.h"), "#define X 1\n").unwrap();
        std::os::unix::fs::symlink("k/api.h", root.join("alias.h")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("shadow.h")).unwrap();
        assert_eq!(
            read_within(&root, &root.join("alias.h"), 100).unwrap(),
            b"#define X 1\n"
        );
        let e = read_within(&root, &root.join("shadow.h"), 1 << 20).unwrap_err();
        assert!(matches!(e, FileError::Outside { .. }), "{e}");
        // Folders: a link inside is fine, one to `/root` is not.
        std::os::unix::fs::symlink("k", root.join("inst")).unwrap();
        std::os::unix::fs::symlink("/root", root.join("home")).unwrap();
        assert!(inside(&root, &root.join("inst")).is_ok());
        assert!(inside(&root, &root.join("none")).is_ok());
        assert!(matches!(
            inside(&root, &root.join("home")),
            Err(FileError::Outside { .. })
        ));
        // The outputs: neither held by a shown folder nor holding one.
        let out = d.path().join("sub/k/out");
        std::fs::create_dir_all(&out).unwrap();
        assert!(apart(&root.join("inst"), &d.path().join("elsewhere")).is_ok());
        assert!(apart(&root.join("inst"), &out).is_err());
        assert!(apart(&out, &root).is_err());
        assert!(apart(&root.join("none"), &out).is_ok());
    }
}
