//! Unpacking a submission package given as an archive (`source archive="pkgs/x.tar.gz"`,
//! `ngcc-pipe import pkg.zip`): `.tar`, `.tar.gz`/`.tgz` and `.zip`.
//!
//! An archive is data from outside, so every entry is checked before anything is written:
//! its path must be relative without `..`; no entry may be written through a link (every
//! folder on its way must be a real folder under the destination); a symbolic link must be
//! relative and point inside the folder, climbing with leading `..` only (so no chain of
//! links can leave it); a hard link must name a file already unpacked (its bytes are
//! copied, no link is made); devices, FIFOs and other special files are refused; file modes
//! keep only the owner's execute bit. The number of entries and the bytes written are
//! bounded ([`MAX_ENTRIES`], [`MAX_BYTES`]). [`extract`] unpacks into a fresh folder beside
//! the destination and renames it into place only when every entry passed, so a refused
//! archive leaves nothing behind.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};

/// Most entries an archive may hold.
pub const MAX_ENTRIES: usize = 100_000;
/// Most bytes its files may unpack to, together.
pub const MAX_BYTES: u64 = 2 << 30;

/// Why an archive cannot be unpacked.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// Not a name this module knows how to read.
    #[error("{}: not a .tar, .tar.gz, .tgz or .zip archive", .0.display())]
    Format(PathBuf),
    /// The archive cannot be read or is corrupt.
    #[error("{}: {source}", path.display())]
    Read {
        /// The archive.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The zip reader refused it.
    #[error("{}: {source}", path.display())]
    Zip {
        /// The archive.
        path: PathBuf,
        /// Why.
        source: zip::result::ZipError,
    },
    /// An entry that would escape the folder or is not a plain file, folder or link.
    #[error("{}: entry `{entry}` refused: {why}", archive.display())]
    Refused {
        /// The archive.
        archive: PathBuf,
        /// The entry's name as stored.
        entry: String,
        /// What is wrong with it.
        why: String,
    },
    /// Too many entries or bytes.
    #[error("{}: {what}", archive.display())]
    TooLarge {
        /// What limit was passed.
        what: String,
        /// The archive.
        archive: PathBuf,
    },
    /// Writing the unpacked tree failed.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// Where.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// The kinds of archive read here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `.tar`
    Tar,
    /// `.tar.gz`, `.tgz`
    TarGz,
    /// `.zip`
    Zip,
}

/// The kind of archive a file name says it is.
pub fn kind_of(path: &Path) -> Option<Kind> {
    let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
    if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
        Some(Kind::TarGz)
    } else if name.ends_with(".tar") {
        Some(Kind::Tar)
    } else if name.ends_with(".zip") {
        Some(Kind::Zip)
    } else {
        None
    }
}

/// Unpacks `archive` into `dest`, which must not exist yet (its parent must). Nothing is
/// left at `dest` or beside it when an entry is refused.
pub fn extract(archive: &Path, dest: &Path) -> Result<(), ArchiveError> {
    let kind = kind_of(archive).ok_or_else(|| ArchiveError::Format(archive.to_path_buf()))?;
    let parent = dest.parent().unwrap_or(Path::new("."));
    let tmp = tempfile::Builder::new()
        .prefix(".unpacking-")
        .tempdir_in(parent)
        .map_err(|source| ArchiveError::Write {
            path: parent.to_path_buf(),
            source,
        })?;
    let mut out = Unpacker {
        archive: archive.to_path_buf(),
        root: tmp.path().to_path_buf(),
        entries: 0,
        bytes: 0,
    };
    let read_err = |source| ArchiveError::Read {
        path: archive.to_path_buf(),
        source,
    };
    let file = File::open(archive).map_err(read_err)?;
    match kind {
        Kind::Tar => out.tar(tar::Archive::new(io::BufReader::new(file)))?,
        Kind::TarGz => out.tar(tar::Archive::new(flate2::read::GzDecoder::new(
            io::BufReader::new(file),
        )))?,
        Kind::Zip => out.zip(file)?,
    }
    let tmp = tmp.keep();
    std::fs::rename(&tmp, dest).map_err(|source| {
        let _ = std::fs::remove_dir_all(&tmp);
        ArchiveError::Write {
            path: dest.to_path_buf(),
            source,
        }
    })
}

/// The unpacking state: where, and how much so far.
struct Unpacker {
    archive: PathBuf,
    root: PathBuf,
    entries: usize,
    bytes: u64,
}

/// What one entry is, once read.
enum Entry<'a> {
    Dir,
    File { exec: bool, data: &'a mut dyn Read },
    Symlink(String),
    HardLink(String),
}

impl Unpacker {
    fn refuse(&self, entry: &str, why: impl Into<String>) -> ArchiveError {
        ArchiveError::Refused {
            archive: self.archive.clone(),
            entry: entry.to_string(),
            why: why.into(),
        }
    }

    fn write_err(path: &Path) -> impl FnOnce(io::Error) -> ArchiveError + '_ {
        move |source| ArchiveError::Write {
            path: path.to_path_buf(),
            source,
        }
    }

    fn tar<R: Read>(&mut self, mut a: tar::Archive<R>) -> Result<(), ArchiveError> {
        let archive = self.archive.clone();
        let read_err = |source| ArchiveError::Read {
            path: archive.clone(),
            source,
        };
        for e in a.entries().map_err(read_err)? {
            let mut e = e.map_err(read_err)?;
            let name = String::from_utf8_lossy(&e.path_bytes()).into_owned();
            let kind = e.header().entry_type();
            let link = || -> Result<String, ArchiveError> {
                Ok(e.link_name_bytes()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default())
            };
            use tar::EntryType as T;
            match kind {
                // Metadata the tar reader has already applied (long names, pax records).
                T::XGlobalHeader | T::XHeader | T::GNULongName | T::GNULongLink => continue,
                T::Directory => self.entry(&name, Entry::Dir)?,
                T::Symlink => {
                    let target = link()?;
                    self.entry(&name, Entry::Symlink(target))?
                }
                T::Link => {
                    let target = link()?;
                    self.entry(&name, Entry::HardLink(target))?
                }
                T::Regular | T::Continuous => {
                    let exec = e.header().mode().map(|m| m & 0o100 != 0).unwrap_or(false);
                    self.entry(&name, Entry::File { exec, data: &mut e })?
                }
                other => {
                    return Err(self.refuse(
                        &name,
                        format!(
                            "a {} is not a file, folder or link",
                            special_name(other.as_byte())
                        ),
                    ))
                }
            }
        }
        Ok(())
    }

    fn zip(&mut self, file: File) -> Result<(), ArchiveError> {
        let zerr = |source| ArchiveError::Zip {
            path: self.archive.clone(),
            source,
        };
        let mut z = zip::ZipArchive::new(io::BufReader::new(file)).map_err(zerr)?;
        if z.len() > MAX_ENTRIES {
            return Err(ArchiveError::TooLarge {
                what: format!("more than {MAX_ENTRIES} entries"),
                archive: self.archive.clone(),
            });
        }
        for i in 0..z.len() {
            let mut f = z.by_index(i).map_err(|source| ArchiveError::Zip {
                path: self.archive.clone(),
                source,
            })?;
            let name = f.name().to_string();
            let mode = f.unix_mode();
            let ftype = mode.map(|m| m & 0o170000).unwrap_or(0);
            if f.is_dir() {
                self.entry(&name, Entry::Dir)?;
            } else if ftype == 0o120000 {
                let mut target = String::new();
                (&mut f)
                    .take(4096)
                    .read_to_string(&mut target)
                    .map_err(|source| ArchiveError::Read {
                        path: self.archive.clone(),
                        source,
                    })?;
                self.entry(&name, Entry::Symlink(target))?;
            } else if ftype == 0 || ftype == 0o100000 {
                let exec = mode.is_some_and(|m| m & 0o100 != 0);
                self.entry(&name, Entry::File { exec, data: &mut f })?;
            } else {
                return Err(self.refuse(&name, "a device, FIFO or socket is not a file"));
            }
        }
        Ok(())
    }

    /// Checks one entry and writes it under the root.
    fn entry(&mut self, name: &str, e: Entry<'_>) -> Result<(), ArchiveError> {
        self.entries += 1;
        if self.entries > MAX_ENTRIES {
            return Err(ArchiveError::TooLarge {
                what: format!("more than {MAX_ENTRIES} entries"),
                archive: self.archive.clone(),
            });
        }
        let rel = entry_path(name).map_err(|why| self.refuse(name, why))?;
        if rel.as_os_str().is_empty() {
            return Ok(()); // `./`: the root itself.
        }
        self.check_parents(name, &rel)?;
        let dest = self.root.join(&rel);
        match e {
            Entry::Dir => match std::fs::symlink_metadata(&dest) {
                Ok(m) if m.is_dir() => Ok(()),
                Ok(_) => Err(self.refuse(name, "a folder where a file or link was unpacked")),
                Err(_) => std::fs::create_dir(&dest).map_err(Self::write_err(&dest)),
            },
            Entry::File { exec, data } => {
                let mut out = self.create(name, &dest, exec)?;
                self.copy(name, data, &mut out, &dest)
            }
            Entry::Symlink(target) => {
                link_target_inside(&rel, &target).map_err(|why| self.refuse(name, why))?;
                self.clear(name, &dest)?;
                std::os::unix::fs::symlink(&target, &dest).map_err(Self::write_err(&dest))
            }
            Entry::HardLink(target) => {
                let trel = entry_path(&target)
                    .map_err(|why| self.refuse(name, format!("hard link target: {why}")))?;
                self.check_parents(name, &trel)?;
                let src = self.root.join(&trel);
                match std::fs::symlink_metadata(&src) {
                    Ok(m) if m.is_file() => {}
                    _ => {
                        return Err(self.refuse(
                            name,
                            format!(
                                "hard link to `{target}`, which is not a file unpacked before it"
                            ),
                        ))
                    }
                }
                let mut input = File::open(&src).map_err(Self::write_err(&src))?;
                let exec = is_exec(&src);
                let mut out = self.create(name, &dest, exec)?;
                self.copy(name, &mut input, &mut out, &dest)
            }
        }
    }

    /// Every folder on the way to `rel` must be a real folder (never a link) or not exist
    /// yet, in which case it is made.
    fn check_parents(&self, name: &str, rel: &Path) -> Result<(), ArchiveError> {
        let mut at = self.root.clone();
        let parts: Vec<_> = rel.components().collect();
        for c in &parts[..parts.len().saturating_sub(1)] {
            at.push(c);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(self.refuse(name, "it would be written through a link"))
                }
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(self.refuse(name, "a folder on its path is a file")),
                Err(_) => std::fs::create_dir(&at).map_err(Self::write_err(&at))?,
            }
        }
        Ok(())
    }

    /// Removes what an earlier entry of the same name left (a file or link, never
    /// following it); a folder there is an error.
    fn clear(&self, name: &str, dest: &Path) -> Result<(), ArchiveError> {
        match std::fs::symlink_metadata(dest) {
            Ok(m) if m.is_dir() => Err(self.refuse(name, "a file where a folder was unpacked")),
            Ok(_) => std::fs::remove_file(dest).map_err(Self::write_err(dest)),
            Err(_) => Ok(()),
        }
    }

    fn create(&self, name: &str, dest: &Path, exec: bool) -> Result<File, ArchiveError> {
        use std::os::unix::fs::OpenOptionsExt;
        self.clear(name, dest)?;
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(if exec { 0o755 } else { 0o644 })
            .custom_flags(libc::O_NOFOLLOW)
            .open(dest)
            .map_err(Self::write_err(dest))
    }

    fn copy(
        &mut self,
        name: &str,
        data: &mut dyn Read,
        out: &mut File,
        dest: &Path,
    ) -> Result<(), ArchiveError> {
        let budget = MAX_BYTES - self.bytes;
        let n = io::copy(&mut data.take(budget + 1), out).map_err(|source| {
            if source.kind() == io::ErrorKind::InvalidData {
                self.refuse(name, format!("corrupt data: {source}"))
            } else {
                ArchiveError::Write {
                    path: dest.to_path_buf(),
                    source,
                }
            }
        })?;
        if n > budget {
            return Err(ArchiveError::TooLarge {
                what: format!("unpacks to more than {} MiB", MAX_BYTES >> 20),
                archive: self.archive.clone(),
            });
        }
        self.bytes += n;
        out.flush().map_err(Self::write_err(dest))
    }
}

fn is_exec(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o100 != 0)
}

/// The relative path an entry name stands for: `./a/b` -> `a/b`; absolute names and `..`
/// are refused.
pub fn entry_path(name: &str) -> Result<PathBuf, String> {
    if name.contains('\0') {
        return Err("its name holds a NUL byte".into());
    }
    if name.contains('\\') {
        return Err("its name holds a backslash (a Windows path?)".into());
    }
    let mut out = PathBuf::new();
    for c in Path::new(name).components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => return Err("its path climbs out with `..`".into()),
            Component::RootDir | Component::Prefix(_) => return Err("its path is absolute".into()),
        }
    }
    Ok(out)
}

/// Whether a symbolic link at `rel` (relative to the root) pointing to `target` stays
/// inside the root: the target must be relative, and may climb with `..` only before its
/// first name (so links through links cannot leave either).
pub fn link_target_inside(rel: &Path, target: &str) -> Result<(), String> {
    if target.is_empty() {
        return Err("a link with an empty target".into());
    }
    let depth = rel.components().count() as i64 - 1;
    let mut up = 0i64;
    let mut named = false;
    for c in Path::new(target).components() {
        match c {
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!("a link to the absolute path `{target}`"))
            }
            Component::ParentDir if named => {
                return Err(format!(
                    "a link to `{target}`, which climbs with `..` after a name"
                ))
            }
            Component::ParentDir => up += 1,
            Component::CurDir => {}
            Component::Normal(_) => named = true,
        }
    }
    if up > depth {
        return Err(format!("a link to `{target}`, which leaves the folder"));
    }
    Ok(())
}

fn special_name(b: u8) -> &'static str {
    match b {
        b'3' => "character device",
        b'4' => "block device",
        b'6' => "FIFO",
        b'S' => "sparse file",
        _ => "special entry",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_paths_stay_relative() {
        assert_eq!(entry_path("./a/b.c").unwrap(), PathBuf::from("a/b.c"));
        assert_eq!(entry_path("./").unwrap(), PathBuf::new());
        assert!(entry_path("../x").unwrap_err().contains(".."));
        assert!(entry_path("a/../../x").unwrap_err().contains(".."));
        assert!(entry_path("/etc/passwd").unwrap_err().contains("absolute"));
    }

    #[test]
    fn link_targets_must_stay_inside() {
        let at = Path::new("pkg/Optimized/x/api.h");
        assert!(link_target_inside(at, "../../Reference/x/api.h").is_ok());
        assert!(link_target_inside(at, "../../../../etc/passwd").is_err());
        assert!(link_target_inside(at, "/etc/passwd").is_err());
        assert!(link_target_inside(at, "a/../../b").is_err());
        assert!(link_target_inside(Path::new("l"), "..").is_err());
        assert!(link_target_inside(Path::new("l"), ".").is_ok());
    }

    fn tar_with(build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        build(&mut b);
        b.into_inner().unwrap()
    }

    fn file_header(size: u64, kind: tar::EntryType) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_size(size);
        h.set_mode(0o644);
        h.set_entry_type(kind);
        h
    }

    /// Writes a raw name into a header (the builder refuses `..` and absolute names).
    fn raw_name(h: &mut tar::Header, name: &str) {
        let gnu = h.as_gnu_mut().unwrap();
        gnu.name = [0; 100];
        gnu.name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_cksum();
    }

    fn unpack(bytes: &[u8]) -> (tempfile::TempDir, Result<(), ArchiveError>) {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("p.tar");
        std::fs::write(&a, bytes).unwrap();
        let r = extract(&a, &d.path().join("out"));
        (d, r)
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn unpacks_files_folders_and_inner_links() {
        let bytes = tar_with(|b| {
            let mut h = file_header(3, tar::EntryType::Regular);
            b.append_data(&mut h, "pkg/a/x.c", &b"abc"[..]).unwrap();
            let mut l = file_header(0, tar::EntryType::Symlink);
            b.append_link(&mut l, "pkg/b/x.c", "../a/x.c").unwrap();
            let mut hl = file_header(0, tar::EntryType::Link);
            b.append_link(&mut hl, "pkg/c.c", "pkg/a/x.c").unwrap();
        });
        let (d, r) = unpack(&bytes);
        r.unwrap();
        let out = d.path().join("out");
        assert_eq!(
            std::fs::read_to_string(out.join("pkg/b/x.c")).unwrap(),
            "abc"
        );
        assert!(std::fs::symlink_metadata(out.join("pkg/b/x.c"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(out.join("pkg/c.c")).unwrap(), "abc");
        assert_eq!(names(d.path()), ["out", "p.tar"]);
    }

    #[test]
    fn refuses_escapes_and_leaves_nothing() {
        let cases: Vec<(&str, Vec<u8>)> = vec![
            (
                "..",
                tar_with(|b| {
                    let mut h = file_header(1, tar::EntryType::Regular);
                    raw_name(&mut h, "../evil");
                    b.append(&h, &b"x"[..]).unwrap();
                }),
            ),
            (
                "absolute",
                tar_with(|b| {
                    let mut h = file_header(1, tar::EntryType::Regular);
                    raw_name(&mut h, "/tmp/evil");
                    b.append(&h, &b"x"[..]).unwrap();
                }),
            ),
            (
                "leaves",
                tar_with(|b| {
                    let mut l = file_header(0, tar::EntryType::Symlink);
                    b.append_link(&mut l, "pkg/out", "../..").unwrap();
                }),
            ),
            (
                "through a link",
                tar_with(|b| {
                    let mut l = file_header(0, tar::EntryType::Symlink);
                    b.append_link(&mut l, "pkg/here", ".").unwrap();
                    let mut h = file_header(1, tar::EntryType::Regular);
                    b.append_data(&mut h, "pkg/here/x", &b"x"[..]).unwrap();
                }),
            ),
            (
                "device",
                tar_with(|b| {
                    let mut h = file_header(0, tar::EntryType::Char);
                    b.append_data(&mut h, "pkg/null", &b""[..]).unwrap();
                }),
            ),
        ];
        for (want, bytes) in cases {
            let (d, r) = unpack(&bytes);
            let err = r.unwrap_err().to_string();
            assert!(err.contains(want), "{want}: {err}");
            assert_eq!(names(d.path()), ["p.tar"], "{want}: left files behind");
        }
    }

    #[test]
    fn zip_entries_are_checked_too() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("p.zip");
        {
            let mut w = zip::ZipWriter::new(File::create(&a).unwrap());
            let o = zip::write::SimpleFileOptions::default();
            w.start_file("pkg/ok.c", o).unwrap();
            w.write_all(b"int x;").unwrap();
            w.add_symlink("pkg/link", "/etc/passwd", o).unwrap();
            w.finish().unwrap();
        }
        let err = extract(&a, &d.path().join("out")).unwrap_err().to_string();
        assert!(err.contains("absolute path `/etc/passwd`"), "{err}");
        assert_eq!(names(d.path()), ["p.zip"]);
    }
}
