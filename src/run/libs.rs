//! System libraries a submission links (`link "crypto"`), resolved once per run: the file
//! the compiler would link (`cc -print-file-name=lib<name>.so`, else pkg-config's
//! `libdir`), its version (pkg-config's `--modversion` when pkg-config describes that same
//! folder, else the file name the link resolves to, e.g. `libcrypto.so.3`) and its SHA-256.
//! The build links the file by path, records all three, and they are part of the build's
//! cache key: another OpenSSL is another build.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::model::Campaign;
use crate::record::LinkedLibrary;

/// Every library any instance of `c` links, resolved with `c`'s compiler; a library that
/// cannot be found maps to the reason.
pub fn resolve_all(c: &Campaign) -> BTreeMap<String, Result<LinkedLibrary, String>> {
    let mut out = BTreeMap::new();
    for sub in &c.submissions {
        for inst in &sub.instances {
            for l in &inst.libraries {
                if !out.contains_key(l) {
                    out.insert(l.clone(), resolve(&c.system.cc, l));
                }
            }
        }
    }
    out
}

/// The library `name` as `cc` would link it.
pub fn resolve(cc: &str, name: &str) -> Result<LinkedLibrary, String> {
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
    let file = crate::dsl::normalize(&file);
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
        sha256: crate::run::keys::sha256_hex(&bytes),
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

/// The key input of a resolved (or missing) library.
pub fn key_text(l: &Result<LinkedLibrary, String>) -> String {
    match l {
        Ok(l) => format!("{} ({}) sha256 {}", l.real.display(), l.version, l.sha256),
        Err(e) => format!("missing: {e}"),
    }
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
        let e = resolve("cc", "ngcc_no_such_library_xyz").unwrap_err();
        assert!(e.contains("libngcc_no_such_library_xyz.so"), "{e}");
    }
}
