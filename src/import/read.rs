//! Reading a package without trusting it. `ngcc-pipe import` is the first command anyone
//! runs on an untrusted package, so every folder it lists and every file it reads goes
//! through [`Package`], as the engine's other readers go through `safe_fs`:
//!
//! - a path is resolved with its links followed and must stay inside the package: a link
//!   inside is fine, one that leaves it (or resolves to nothing) is not followed;
//! - only regular files are read: the file is opened once without blocking and without
//!   following a link, and checked with `fstat` on that descriptor (a FIFO, device or
//!   socket is not read), within a size cap ([`TEXT_CAP`], [`KAT_CAP`]) and
//!   [`safe_fs::DEADLINE`];
//! - folders are walked without following links, within [`WALK`] (depth and entries), and
//!   a listing holds at most [`LISTING`] entries.
//!
//! Whatever is not read is remembered with why ([`Package::skipped`]); import names each.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::safe_fs::tree::{walk_with, Bounds, Kind, WalkError};
use crate::safe_fs::{self, FileError};

/// Largest source, header or build file read.
pub const TEXT_CAP: u64 = 64 << 20;
/// Largest KAT file hashed (Classic McEliece's are a few hundred MiB).
pub const KAT_CAP: u64 = safe_fs::OUTPUT_CAP;
/// Bounds of a walk of the whole package.
pub const WALK: Bounds = Bounds {
    depth: 32,
    entries: 100_000,
};
/// Most entries one folder listing reads.
pub const LISTING: usize = 10_000;

/// A package folder, read defensively (see the module).
pub struct Package {
    /// The package's folder, links resolved.
    root: PathBuf,
    /// Path relative to the package -> why it was not read.
    skipped: RefCell<BTreeMap<String, String>>,
}

/// What a folder holds, names sorted (UTF-8 names only; links resolved inside).
#[derive(Debug, Default)]
pub struct Listing {
    pub folders: Vec<String>,
    /// Everything else that is there: regular files, links to them, special files.
    pub files: Vec<String>,
}

impl Package {
    /// The package at `root` (a folder).
    pub fn new(root: &Path) -> Result<Package, String> {
        let root = std::fs::canonicalize(root).map_err(|e| {
            format!(
                "{}: {e}",
                crate::text::clean_line(&root.display().to_string())
            )
        })?;
        Ok(Package {
            root,
            skipped: RefCell::new(BTreeMap::new()),
        })
    }

    /// What was not read and why, by path relative to the package, sorted.
    pub fn skipped(&self) -> Vec<(String, String)> {
        self.skipped
            .borrow()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Remember that `rel` was not read (the first reason given stays).
    pub fn skip(&self, rel: &str, why: impl Into<String>) {
        self.skipped
            .borrow_mut()
            .entry(rel.to_string())
            .or_insert_with(|| why.into());
    }

    /// The real path of `rel` (links followed), when it exists inside the package; a link
    /// that leaves the package or resolves to nothing is remembered as skipped.
    pub fn resolve(&self, rel: &str) -> Option<PathBuf> {
        let path = self.root.join(rel);
        match std::fs::canonicalize(&path) {
            Ok(real) if real.starts_with(&self.root) => Some(real),
            Ok(_) => {
                self.skip(rel, "a link that leaves the package (not followed)");
                None
            }
            Err(e) => {
                if std::fs::symlink_metadata(&path).is_ok() {
                    // There, but not resolvable: a dangling link, a loop, no permission.
                    let why = match e.raw_os_error() {
                        Some(libc::ENOENT) => {
                            "a link that resolves to nothing (not followed)".into()
                        }
                        Some(libc::ELOOP) => "a loop of links (not followed)".into(),
                        _ => format!("cannot be resolved: {e}"),
                    };
                    self.skip(rel, why);
                }
                None
            }
        }
    }

    /// `rel` relative to the package after its links are resolved (`a/link/x` -> `b/x`).
    pub fn real_rel(&self, rel: &str) -> Option<PathBuf> {
        let real = self.resolve(rel)?;
        real.strip_prefix(&self.root).ok().map(Path::to_path_buf)
    }

    /// Whether `rel` is a folder inside the package.
    pub fn is_dir(&self, rel: &str) -> bool {
        self.resolve(rel)
            .and_then(|p| std::fs::metadata(p).ok())
            .is_some_and(|m| m.is_dir())
    }

    /// The folders and other entries of folder `rel`.
    pub fn list(&self, rel: &str) -> Listing {
        let mut out = Listing::default();
        let Some(dir) = self.resolve(rel) else {
            return out;
        };
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return out;
        };
        for (n, e) in rd.flatten().enumerate() {
            let name = e.file_name();
            let child = join(rel, &name.to_string_lossy());
            if n >= LISTING {
                self.skip(
                    rel,
                    format!("the folder holds more than {LISTING} entries: the rest was not read"),
                );
                break;
            }
            let Some(name) = name.to_str().map(str::to_string) else {
                self.skip(&child, "its name is not UTF-8 (not read)");
                continue;
            };
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                out.folders.push(name);
            } else if t.is_symlink() {
                match self.resolve(&child).and_then(|p| std::fs::metadata(p).ok()) {
                    Some(m) if m.is_dir() => out.folders.push(name),
                    Some(_) => out.files.push(name),
                    None => {}
                }
            } else {
                out.files.push(name);
            }
        }
        out.folders.sort();
        out.files.sort();
        out
    }

    /// Whether `rel` exists inside the package (links resolved), of any kind.
    pub fn exists(&self, rel: &str) -> bool {
        self.resolve(rel).is_some()
    }

    /// The bytes of the regular file `rel`, at most `cap` of them; `None` (remembered as
    /// skipped unless it is simply missing) otherwise.
    pub fn read(&self, rel: &str, cap: u64) -> Option<Vec<u8>> {
        let real = self.resolve(rel)?;
        match safe_fs::read(&real, cap) {
            Ok(b) => Some(b),
            Err(e) => {
                self.skip(rel, reason(&e, cap));
                None
            }
        }
    }

    /// [`read`](Self::read) as text (invalid UTF-8 replaced), within [`TEXT_CAP`].
    pub fn read_text(&self, rel: &str) -> Option<String> {
        self.read(rel, TEXT_CAP)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// The first line and the SHA-256 of the regular file `rel`, read in pieces (at most
    /// [`KAT_CAP`] bytes, within the deadline), so a large file is never held whole; `each`
    /// sees every piece.
    pub fn digest(&self, rel: &str, each: &mut dyn FnMut(&[u8])) -> Option<(String, String)> {
        use sha2::{Digest, Sha256};
        let real = self.resolve(rel)?;
        let fail = |e: FileError| {
            self.skip(rel, reason(&e, KAT_CAP));
            None
        };
        let (mut file, len) = match safe_fs::open(&real) {
            Ok(f) => f,
            Err(e) => return fail(e),
        };
        let too_large = || FileError::TooLarge {
            name: rel.to_string(),
            max: KAT_CAP,
        };
        if len > KAT_CAP {
            return fail(too_large());
        }
        let until = Instant::now() + safe_fs::DEADLINE;
        let mut hash = Sha256::new();
        let mut first: Option<Vec<u8>> = None;
        let mut head = Vec::new();
        let mut total = 0u64;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return fail(FileError::Io {
                        name: rel.to_string(),
                        source,
                    })
                }
            };
            hash.update(&buf[..n]);
            each(&buf[..n]);
            total += n as u64;
            if first.is_none() {
                let room = 4096usize.saturating_sub(head.len());
                head.extend_from_slice(&buf[..n.min(room)]);
                if let Some(i) = head.iter().position(|&b| b == b'\n') {
                    first = Some(head[..i].to_vec());
                } else if head.len() >= 4096 {
                    first = Some(head.clone());
                }
            }
            if total > KAT_CAP {
                return fail(too_large());
            }
            if Instant::now() > until {
                return fail(FileError::Slow {
                    name: rel.to_string(),
                });
            }
        }
        let first = first.unwrap_or(head);
        Some((
            String::from_utf8_lossy(&first).into_owned(),
            hex::encode(hash.finalize()),
        ))
    }

    /// Every entry below the package's folder that is not a folder (regular files, links,
    /// special files), relative paths sorted; a walk that meets its bounds stops there
    /// (remembered as skipped). Links are not followed: a folder reached only through a
    /// link is not walked.
    pub fn walk(&self) -> Vec<String> {
        let mut out = Vec::new();
        let got = walk_with(&self.root, WALK, |e| {
            if e.kind == Kind::Dir {
                return;
            }
            match e.rel.to_str() {
                Some(r) => out.push(r.to_string()),
                None => self.skip(&e.rel.to_string_lossy(), "its name is not UTF-8 (not read)"),
            }
        });
        match got {
            Ok(()) => {}
            Err(WalkError::TooDeep { max, .. }) => self.skip(
                ".",
                format!("folders nested deeper than {max} levels were not searched"),
            ),
            Err(WalkError::TooMany { max, .. }) => self.skip(
                ".",
                format!("the package holds more than {max} entries: the rest was not searched"),
            ),
            Err(WalkError::Io { source, .. }) => {
                self.skip(".", format!("the walk stopped: {source}"))
            }
        }
        out.sort();
        out
    }

    /// Folders below the package's folder that are reached through links staying inside,
    /// with the folder each resolves to (both relative): the copy for the compiler makes
    /// the same links.
    fn folder_links(&self) -> Vec<(String, PathBuf)> {
        let mut out = Vec::new();
        let _ = walk_with(&self.root, WALK, |e| {
            if let (Kind::Link(_), Some(r)) = (&e.kind, e.rel.to_str()) {
                let real = self.root.join(r);
                let inside = std::fs::canonicalize(&real)
                    .ok()
                    .filter(|p| p.starts_with(&self.root) && p.is_dir());
                if let Some(t) =
                    inside.and_then(|p| p.strip_prefix(&self.root).ok().map(Path::to_path_buf))
                {
                    out.push((r.to_string(), t));
                }
            }
        });
        out
    }

    /// A copy of the package's headers under `to` (an empty folder), laid out as in the
    /// package, for a compiler that must not see the package itself: regular files named
    /// like headers (`.h`, `.hpp`, `.hh`, `.inc`), each at most [`TEXT_CAP`] and together at
    /// most [`COPY_CAP`]; links to files inside are copied as files, links to folders
    /// inside become links to the copied folder. Everything is readable by any user (the
    /// jail's user reads it). Returns the number of files copied.
    pub fn copy_headers(&self, to: &Path) -> std::io::Result<usize> {
        use std::os::unix::fs::PermissionsExt;
        let mut copied = 0usize;
        let mut total = 0u64;
        for rel in self.walk() {
            let header = [".h", ".hpp", ".hh", ".inc"]
                .iter()
                .any(|ext| rel.ends_with(ext));
            if !header {
                continue;
            }
            let Some(bytes) = self.read(&rel, TEXT_CAP) else {
                continue;
            };
            total += bytes.len() as u64;
            if total > COPY_CAP {
                self.skip(
                    &rel,
                    format!(
                        "the headers hold more than {} MiB together: not copied for the compiler",
                        COPY_CAP >> 20
                    ),
                );
                continue;
            }
            let dest = to.join(&rel);
            if let Some(parent) = dest.parent() {
                make_dirs(to, parent)?;
            }
            std::fs::write(&dest, &bytes)?;
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o644))?;
            copied += 1;
        }
        for (link, target) in self.folder_links() {
            let dest = to.join(&link);
            if let Some(parent) = dest.parent() {
                make_dirs(to, parent)?;
            }
            let real = to.join(&target);
            make_dirs(to, &real)?;
            if std::fs::symlink_metadata(&dest).is_err() {
                std::os::unix::fs::symlink(&real, &dest)?;
            }
        }
        Ok(copied)
    }
}

/// Most bytes of headers copied for the compiler.
pub const COPY_CAP: u64 = 256 << 20;

/// `dir` and the folders between `top` and it, made readable by any user.
fn make_dirs(top: &Path, dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    let mut d = Some(dir);
    while let Some(p) = d.filter(|p| p.starts_with(top)) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))?;
        d = p.parent();
    }
    Ok(())
}

/// `a/b` from a folder path relative to the package (`""` or `.` for its top) and a name.
pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() || dir == "." {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// Why a file was not read, without its path (the caller names it).
fn reason(e: &FileError, cap: u64) -> String {
    match e {
        FileError::Link(_) => "a symbolic link (not followed)".into(),
        FileError::NotRegular { kind, .. } => format!("a {kind}, not a regular file (not read)"),
        FileError::TooLarge { .. } => format!("larger than {} MiB (not read)", cap >> 20),
        FileError::Slow { .. } => format!(
            "could not be read within {} s (not read)",
            safe_fs::DEADLINE.as_secs()
        ),
        FileError::Outside { .. } => "a link that leaves the package (not followed)".into(),
        FileError::Io { source, .. } => format!("cannot be read: {source}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_inside_are_followed_and_the_rest_is_named() {
        let d = tempfile::tempdir().unwrap();
        let outside = d.path().join("secret");
        std::fs::write(&outside, "root:$6$secret").unwrap();
        let p = d.path().join("pkg");
        std::fs::create_dir_all(p.join("a/b")).unwrap();
        std::fs::write(p.join("a/b/api.h"), "#define X 1\n").unwrap();
        std::os::unix::fs::symlink("a/b", p.join("inside")).unwrap();
        std::os::unix::fs::symlink(&outside, p.join("Makefile")).unwrap();
        std::os::unix::fs::symlink(d.path(), p.join("out")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", p.join("zero.h")).unwrap();
        let fifo = p.join("fifo.h");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let pkg = Package::new(&p).unwrap();
        assert_eq!(pkg.read_text("inside/api.h").unwrap(), "#define X 1\n");
        assert_eq!(pkg.real_rel("inside").unwrap(), PathBuf::from("a/b"));
        assert!(pkg.read_text("Makefile").is_none());
        assert!(pkg.read_text("zero.h").is_none());
        let start = Instant::now();
        assert!(pkg.read_text("fifo.h").is_none());
        assert!(start.elapsed().as_secs() < 2);
        let l = pkg.list("");
        assert_eq!(l.folders, ["a", "inside"]);
        let skipped = pkg.skipped();
        let why = |f: &str| {
            skipped
                .iter()
                .find(|(r, _)| r == f)
                .map(|(_, w)| w.clone())
                .unwrap_or_default()
        };
        assert!(
            why("Makefile").contains("leaves the package"),
            "{skipped:?}"
        );
        assert!(why("out").contains("leaves the package"), "{skipped:?}");
        assert!(why("zero.h").contains("leaves the package"), "{skipped:?}");
        assert!(why("fifo.h").contains("FIFO"), "{skipped:?}");
        assert!(!format!("{skipped:?}").contains("secret"));
    }

    #[test]
    fn large_files_are_refused_at_their_size_and_hashed_in_pieces() {
        let d = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(d.path().join("big.c")).unwrap();
        f.set_len(8 << 30).unwrap();
        std::fs::write(d.path().join("PQCkemKAT_1.rsp"), "# Name\n\ncount = 0\n").unwrap();
        let pkg = Package::new(d.path()).unwrap();
        let start = Instant::now();
        assert!(pkg.read_text("big.c").is_none());
        assert!(pkg.digest("big.c", &mut |_| {}).is_none());
        assert!(start.elapsed().as_secs() < 2);
        assert!(pkg.skipped()[0].1.contains("larger than"));
        let (first, sha) = pkg.digest("PQCkemKAT_1.rsp", &mut |_| {}).unwrap();
        assert_eq!(first, "# Name");
        assert_eq!(sha, crate::run::keys::sha256_hex(b"# Name\n\ncount = 0\n"));
        assert_eq!(pkg.walk(), ["PQCkemKAT_1.rsp", "big.c"]);
    }

    #[test]
    fn headers_are_copied_with_inside_links_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pkg");
        std::fs::create_dir_all(p.join("Ref/crypto_kem/x")).unwrap();
        std::fs::write(p.join("Ref/crypto_kem/x/api.h"), "#include \"params.h\"\n").unwrap();
        std::fs::write(p.join("Ref/crypto_kem/x/params.h"), "#define N 1\n").unwrap();
        std::fs::write(p.join("Ref/crypto_kem/x/kem.c"), "int x;\n").unwrap();
        std::fs::create_dir_all(p.join("Opt/crypto_kem")).unwrap();
        std::os::unix::fs::symlink("../../Ref/crypto_kem/x", p.join("Opt/crypto_kem/x")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", p.join("Ref/crypto_kem/x/host.h")).unwrap();
        let pkg = Package::new(&p).unwrap();
        let to = d.path().join("copy");
        std::fs::create_dir(&to).unwrap();
        assert_eq!(pkg.copy_headers(&to).unwrap(), 2);
        assert_eq!(
            std::fs::read_to_string(to.join("Opt/crypto_kem/x/params.h")).unwrap(),
            "#define N 1\n"
        );
        assert!(!to.join("Ref/crypto_kem/x/kem.c").exists());
        assert!(!to.join("Ref/crypto_kem/x/host.h").exists());
    }
}
