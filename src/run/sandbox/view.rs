//! The file system a jailed process sees: the system folders read-only, its jail's paths,
//! private `/tmp` and `/dev/shm`, and the modes of the folders bwrap makes above them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{find_on_path, Jail, SHM_BYTES, SYSTEM, TMP_BYTES};

/// `--ro-bind`, `--chmod 0755` of the folders bwrap makes above the bound paths (it copies
/// the modes of their host folders, e.g. `/root`'s 0700), `/proc` and `/dev`.
pub(super) fn view(a: &mut Vec<OsString>, jail: &Jail, program: &Path) {
    let push = |a: &mut Vec<OsString>, items: &[&str]| a.extend(items.iter().map(OsString::from));
    for sys in SYSTEM {
        let p = Path::new(sys);
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(p) {
                    a.push("--symlink".into());
                    a.push(target.into_os_string());
                    a.push(sys.into());
                }
            }
            Ok(_) => push(a, &["--ro-bind", sys, sys]),
            Err(_) => {}
        }
    }
    // The private /tmp before the binds (a jail's folders may lie below /tmp).
    let (tmp, shm) = (TMP_BYTES.to_string(), SHM_BYTES.to_string());
    push(a, &["--perms", "01777", "--size", &tmp, "--tmpfs", "/tmp"]);
    push(a, &["--proc", "/proc", "--dev", "/dev"]);
    push(
        a,
        &["--perms", "01777", "--size", &shm, "--tmpfs", "/dev/shm"],
    );
    let in_system = |p: &Path| SYSTEM.iter().any(|s| p.starts_with(s));
    let mut bound: Vec<PathBuf> = Vec::new();
    let reads = jail
        .read
        .iter()
        .cloned()
        .chain(program_prefix(program))
        .filter_map(|p| std::path::absolute(p).ok())
        .filter(|p| p.exists() && !in_system(p));
    for p in reads {
        a.push("--ro-bind".into());
        a.push(p.clone().into_os_string());
        a.push(p.clone().into_os_string());
        bound.push(p);
    }
    for p in jail
        .write
        .iter()
        .filter_map(|p| std::path::absolute(p).ok())
    {
        a.push("--bind".into());
        a.push(p.clone().into_os_string());
        a.push(p.clone().into_os_string());
        bound.push(p);
    }
    // Not the mounts made here (the private /tmp is 01777).
    let own_mounts = ["/", "/tmp", "/proc", "/dev"].map(Path::new);
    let mut made: Vec<&Path> = bound
        .iter()
        .flat_map(|p| p.ancestors().skip(1))
        .chain(Some(Path::new("/etc")).filter(|_| SYSTEM.iter().any(|s| s.starts_with("/etc/"))))
        .filter(|d| !own_mounts.contains(d) && !bound.iter().any(|b| d.starts_with(b)))
        .collect();
    made.sort();
    made.dedup();
    for d in made {
        a.push("--chmod".into());
        a.push("0755".into());
        a.push(d.as_os_str().to_owned());
    }
}

/// The install prefix of `program` (`/opt/gcc-13` for `/opt/gcc-13/bin/gcc`) when it lies
/// outside [`SYSTEM`]: the compiler needs its own libraries.
fn program_prefix(program: &Path) -> Option<PathBuf> {
    let found = if program.components().count() > 1 {
        program.to_path_buf()
    } else {
        find_on_path(&program.to_string_lossy())?
    };
    let real = std::fs::canonicalize(found).ok()?;
    if SYSTEM.iter().any(|s| real.starts_with(s)) {
        return None;
    }
    real.parent()?.parent().map(Path::to_path_buf)
}
