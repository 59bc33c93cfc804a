//! Records: the evidence schema (the `ngcc-record` crate, re-exported here whole so that
//! `crate::record::X` names every record type) and the engine's reading and writing of
//! record files. The schema depends on serde alone; the file handling (atomic writes, reads
//! that refuse links and oversized files) is the engine's and stays here.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use ngcc_record::*;

/// Write `bytes` to `path` atomically: a temp file beside it, fsync, rename. The temp
/// file is removed on every error path (a full disk, a failed rename): `tempfile` deletes
/// it when it is dropped without being persisted.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Readable like any file the engine writes (tempfile's default is 0600).
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map(drop).map_err(|e| e.error)
}

/// Serialize `value` as pretty JSON and write it atomically.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// Read a JSON record; `Ok(None)` when the file does not exist.
pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> std::io::Result<Option<T>> {
    // Read like a file submission code could have replaced: no link followed, no FIFO or
    // device read, at most `RECORD_CAP` bytes.
    match crate::safe_fs::read(path, crate::safe_fs::RECORD_CAP) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        Err(e) if e.is_missing() => Ok(None),
        Err(e) => Err(e.into_io()),
    }
}

#[cfg(test)]
mod atomic_tests {
    use super::*;

    /// Issue #10: after a failed write, no `*.tmp` file stays beside the target.
    #[test]
    fn failed_atomic_write_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        // The target is a non-empty folder: the final rename fails.
        let target = dir.path().join("rec.json");
        std::fs::create_dir_all(target.join("x")).unwrap();
        assert!(write_atomic(&target, b"{}").is_err());
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["rec.json"], "left behind: {names:?}");
        // And a good write leaves only the file, readable by others.
        let ok = dir.path().join("ok.json");
        write_atomic(&ok, b"{}").unwrap();
        assert_eq!(std::fs::read(&ok).unwrap(), b"{}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&ok).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
