//! Who contained processes run as. An engine running as root runs them as a dedicated,
//! unused user: `ngcc-jail` when the machine has such a user, else the first id of
//! [`CANDIDATES`] that no user, group, subordinate-id range or running process uses. An
//! unprivileged engine runs them as itself (in a user namespace either way).

use std::path::Path;

/// The user a root engine runs contained processes as, when it exists.
pub const JAIL_USER: &str = "ngcc-jail";
/// Ids tried when there is no [`JAIL_USER`]: far above the ranges distributions hand out.
const CANDIDATES: std::ops::Range<u32> = 2_147_480_000..2_147_480_064;

/// A user id and group id for contained processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JailUser {
    pub uid: u32,
    pub gid: u32,
    /// Whether it is the machine's `ngcc-jail` user (else an id no one uses).
    pub named: bool,
}

/// Ids a `name:x:uid:gid:...` (passwd, group) or `name:first:count` (subuid) file uses.
fn used_ids(path: &Path, ranges: bool) -> Vec<(u64, u64)> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            if ranges {
                let first: u64 = f.get(1)?.parse().ok()?;
                let count: u64 = f.get(2)?.parse().ok()?;
                Some((first, first + count))
            } else {
                let id: u64 = f.get(2)?.parse().ok()?;
                Some((id, id + 1))
            }
        })
        .collect()
}

/// The `ngcc-jail` user's ids from `/etc/passwd`.
fn named() -> Option<JailUser> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.first() == Some(&JAIL_USER)).then(|| {
            Some(JailUser {
                uid: f.get(2)?.parse().ok()?,
                gid: f.get(3)?.parse().ok()?,
                named: true,
            })
        })?
    })
}

/// The jail user of a root engine.
pub fn pick() -> Option<JailUser> {
    if let Some(u) = named() {
        return Some(u);
    }
    let mut used = Vec::new();
    for (file, ranges) in [
        ("/etc/passwd", false),
        ("/etc/group", false),
        ("/etc/subuid", true),
        ("/etc/subgid", true),
    ] {
        used.extend(used_ids(Path::new(file), ranges));
    }
    let running = running_uids();
    CANDIDATES
        .into_iter()
        .find(|&id| {
            let id64 = u64::from(id);
            !used.iter().any(|&(a, b)| (a..b).contains(&id64)) && !running.contains(&id)
        })
        .map(|id| JailUser {
            uid: id,
            gid: id,
            named: false,
        })
}

/// (real uid, threads) of every process.
fn processes() -> Vec<(u32, u64)> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| {
            let status = std::fs::read_to_string(e.path().join("status")).ok()?;
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|v| v.split_whitespace().next())
                    .and_then(|v| v.parse::<u64>().ok())
            };
            Some((u32::try_from(field("Uid:")?).ok()?, field("Threads:")?))
        })
        .collect()
}

fn running_uids() -> Vec<u32> {
    processes().into_iter().map(|(u, _)| u).collect()
}

/// Tasks (threads) of `uid` running now: what `RLIMIT_NPROC` counts.
pub fn tasks_of(uid: u32) -> u64 {
    processes()
        .into_iter()
        .filter(|&(u, _)| u == uid)
        .map(|(_, t)| t)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_this_users_tasks() {
        let me = kem_native::sys::effective_uid();
        assert!(tasks_of(me) >= 1);
    }

    #[test]
    fn the_picked_id_is_unused() {
        if let Some(u) = pick().filter(|u| !u.named) {
            assert!(CANDIDATES.contains(&u.uid));
            assert!(!running_uids().contains(&u.uid));
        }
    }
}
