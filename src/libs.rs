//! Finding the system libraries a submission links (`link "crypto"`): the file the
//! compiler would link (`cc -print-file-name=lib<name>.so`, else pkg-config's `libdir`),
//! its version (pkg-config's `--modversion` when pkg-config describes that same folder,
//! else the file name the link resolves to, e.g. `libcrypto.so.3`) and its SHA-256. The
//! build (`run/libs.rs`) and `check --deep` both resolve through here.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::record::LinkedLibrary;

/// The file `cc` would link for `-l<name>`, or why there is none.
pub fn find(cc: &str, name: &str) -> Result<PathBuf, String> {
    let so = format!("lib{name}.so");
    let from_cc = Command::new(cc)
        .arg(format!("-print-file-name={so}"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .filter(|p| p.is_absolute() && p.is_file());
    let file = match from_cc {
        Some(f) => f,
        None => pkg_config_libdir(name)
            .map(|d| d.join(&so))
            .filter(|p| p.is_file())
            .ok_or_else(|| {
                format!(
                    "system library `{name}` not found: neither `{cc} -print-file-name={so}` nor pkg-config knows {so} (install its development package, e.g. libssl-dev for `crypto`)"
                )
            })?,
    };
    Ok(crate::safe_fs::normalize(&file))
}

/// The library `name` as `cc` would link it: its file, version and SHA-256.
pub fn resolve(cc: &str, name: &str) -> Result<LinkedLibrary, String> {
    let file = find(cc, name)?;
    let real = file.canonicalize().unwrap_or_else(|_| file.clone());
    let bytes = std::fs::read(&real).map_err(|e| format!("cannot read {}: {e}", real.display()))?;
    let version = pkg_config_version(name, &real).unwrap_or_else(|| {
        real.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    Ok(LinkedLibrary {
        name: name.to_string(),
        file,
        real,
        version,
        sha256: hex::encode(Sha256::digest(&bytes)),
    })
}

/// pkg-config's module names for a library: `libcrypto` and `crypto`.
fn modules(name: &str) -> [String; 2] {
    [format!("lib{name}"), name.to_string()]
}

fn pkg_config(args: &[&str]) -> Option<String> {
    let o = Command::new("pkg-config").args(args).output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn pkg_config_libdir(name: &str) -> Option<PathBuf> {
    modules(name)
        .iter()
        .find_map(|m| pkg_config(&["--variable=libdir", m]))
        .map(PathBuf::from)
}

/// `<module> <version>` from pkg-config, when its `libdir` holds `real`.
fn pkg_config_version(name: &str, real: &Path) -> Option<String> {
    modules(name).iter().find_map(|m| {
        let dir = PathBuf::from(pkg_config(&["--variable=libdir", m])?);
        let dir = dir.canonicalize().unwrap_or(dir);
        if real.parent() != Some(dir.as_path()) {
            return None;
        }
        pkg_config(&["--modversion", m]).map(|v| format!("{m} {v}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_c_library_resolves_and_a_made_up_one_does_not() {
        // libc.so is a linker script on glibc systems, libm.so a link or a script too:
        // whichever, the compiler names a file and we record it.
        let l = resolve("cc", "m").unwrap();
        assert!(l.file.is_absolute() && l.sha256.len() == 64, "{l:?}");
        assert_eq!(find("cc", "m").unwrap(), l.file);
        let e = resolve("cc", "ngcc_no_such_library_xyz").unwrap_err();
        assert!(e.contains("libngcc_no_such_library_xyz.so"), "{e}");
    }
}
