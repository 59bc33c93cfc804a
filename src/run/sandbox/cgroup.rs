//! Control groups (cgroup v1 `pids` and `memory`, as the engine runs as root) around each
//! contained command: a fresh group per command under the engine's own group, with a
//! process limit and a memory limit that counts the private `/tmp` and `/dev/shm` too
//! (tmpfs pages are charged to the group that wrote them). A timing command kept on the
//! bench core also gets a `cpuset` group of that core alone (when the `cpuset` controller
//! is mounted): the kernel then refuses to schedule it, or anything it starts, anywhere
//! else, whatever it asks (`sched_setaffinity` to another core fails with `EINVAL`). The
//! command's first process joins the groups before it executes (see
//! `kem_native::sys::ChildSetup`), so everything it starts is counted. Groups whose
//! processes are gone are removed as new ones are made, and all of them when the run ends.
//!
//! Not available to an unprivileged user without delegation, nor with cgroup v2 only
//! (not used yet): the sandbox then says so in its record.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Age after which an empty group is removed.
const KEEP: Duration = Duration::from_secs(60);

/// Processes one contained command may have at once (`pids.max`).
pub const PIDS: u64 = 256;

const CONTROLLERS: [&str; 2] = ["pids", "memory"];

/// The engine's groups, one folder per controller.
#[derive(Debug)]
pub struct Cgroups {
    /// `(controller, <mount>/<engine's group>/ngcc-pipe-<pid>)`.
    bases: Vec<(&'static str, PathBuf)>,
    /// The `cpuset` folder of the same kind, when that controller is mounted, and the
    /// memory nodes its groups use (`cpuset.mems` must be set before a task joins).
    cpuset: Option<(PathBuf, String)>,
    /// Groups made, with when: one is removed once empty and old enough that the command it
    /// was made for has started (an empty new group may be about to be joined).
    made: Mutex<Vec<(PathBuf, Instant)>>,
    next: AtomicU64,
}

/// Where the engine's own group of `controller` is (`/proc/self/cgroup`, v1).
fn own_group(controller: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        ctrls
            .split(',')
            .any(|c| c == controller)
            .then(|| path.trim_start_matches('/').to_string())
    })?;
    let dir = Path::new("/sys/fs/cgroup").join(controller).join(rel);
    dir.join("cgroup.procs").is_file().then_some(dir)
}

impl Cgroups {
    /// The engine's groups for this run, or why there are none.
    pub fn detect() -> Result<Cgroups, String> {
        if kem_native::sys::effective_uid() != 0 {
            return Err("cgroups not used: the engine does not run as root".into());
        }
        let mut bases = Vec::new();
        for c in CONTROLLERS {
            let own = own_group(c).ok_or_else(|| {
                format!("cgroups not used: no cgroup v1 `{c}` controller mounted")
            })?;
            sweep_stale(&own);
            let base = own.join(format!("ngcc-pipe-{}", std::process::id()));
            std::fs::create_dir_all(&base)
                .map_err(|e| format!("cgroups not used: cannot create {}: {e}", base.display()))?;
            bases.push((c, base));
        }
        let cpuset = own_group("cpuset").and_then(|own| {
            sweep_stale(&own);
            let base = own.join(format!("ngcc-pipe-{}", std::process::id()));
            let copy = |file: &str| -> Option<String> {
                let v = std::fs::read_to_string(own.join(file)).ok()?;
                std::fs::write(base.join(file), v.trim()).ok()?;
                Some(v.trim().to_string())
            };
            std::fs::create_dir_all(&base).ok()?;
            let made = copy("cpuset.cpus").and(copy("cpuset.mems"));
            if made.is_none() {
                let _ = std::fs::remove_dir(&base);
            }
            made.map(|mems| (base, mems))
        });
        Ok(Cgroups {
            bases,
            cpuset,
            made: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
        })
    }

    /// Group `n` under `base`, made and remembered (to be swept).
    fn fresh(&self, base: &std::path::Path, n: u64) -> Result<PathBuf, String> {
        let dir = base.join(n.to_string());
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        self.made
            .lock()
            .expect("cgroups lock")
            .push((dir.clone(), Instant::now()));
        Ok(dir)
    }

    /// A fresh group per controller with the limits for a command whose memory (address
    /// space, private `/tmp`, `/dev/shm`) may reach `memory` bytes, and kept on core `cpu`
    /// when one is given (and `cpuset` is there); the `cgroup.procs` files its first process
    /// writes itself into.
    pub fn make(&self, memory: u64, cpu: Option<usize>) -> Result<Vec<PathBuf>, String> {
        self.sweep(false);
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut procs = Vec::new();
        for (c, base) in &self.bases {
            let dir = self.fresh(base, n)?;
            let set = |file: &str, value: u64| {
                std::fs::write(dir.join(file), value.to_string())
                    .map_err(|e| format!("{}/{file}: {e}", dir.display()))
            };
            match *c {
                "pids" => set("pids.max", PIDS)?,
                _ => {
                    set("memory.limit_in_bytes", memory)?;
                    if dir.join("memory.memsw.limit_in_bytes").exists() {
                        set("memory.memsw.limit_in_bytes", memory)?;
                    }
                }
            }
            procs.push(dir.join("cgroup.procs"));
        }
        if let (Some((base, mems)), Some(cpu)) = (&self.cpuset, cpu) {
            let dir = self.fresh(base, n)?;
            for (file, value) in [
                ("cpuset.cpus", cpu.to_string()),
                ("cpuset.mems", mems.clone()),
            ] {
                std::fs::write(dir.join(file), value)
                    .map_err(|e| format!("{}/{file}: {e}", dir.display()))?;
            }
            procs.push(dir.join("cgroup.procs"));
        }
        Ok(procs)
    }

    /// Whether timing commands get a `cpuset` group of their core.
    pub fn has_cpuset(&self) -> bool {
        self.cpuset.is_some()
    }

    /// Remove the groups whose processes are gone (all of them at the end of the run).
    fn sweep(&self, all: bool) {
        let mut made = self.made.lock().expect("cgroups lock");
        made.retain(|(d, at)| {
            (!all && at.elapsed() < KEEP) || (std::fs::remove_dir(d).is_err() && d.exists())
        });
    }

    /// What is in force, for records: the same wherever the engine runs (no path: the
    /// groups' names carry the engine's pid, and under Slurm they sit in the job's group).
    pub fn described(&self) -> String {
        let controllers: Vec<&str> = self.bases.iter().map(|(c, _)| *c).collect();
        let cpuset = if self.cpuset.is_some() {
            "; cpuset (timing commands): cpuset.cpus = the bench core"
        } else {
            ""
        };
        format!(
            "cgroup v1 per command ({}): pids.max {PIDS}; memory.limit_in_bytes = the \
             address-space limit plus the private /tmp and /dev/shm sizes{cpuset}",
            controllers.join(", ")
        )
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        self.sweep(true);
        for (_, b) in &self.bases {
            let _ = std::fs::remove_dir(b);
        }
        if let Some((b, _)) = &self.cpuset {
            let _ = std::fs::remove_dir(b);
        }
    }
}

/// Remove `ngcc-pipe-<pid>` groups of engines that are gone (killed before they could).
fn sweep_stale(own: &Path) {
    let Ok(rd) = std::fs::read_dir(own) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("ngcc-pipe-") else {
            continue;
        };
        if Path::new("/proc").join(pid).exists() {
            continue;
        }
        if let Ok(subs) = std::fs::read_dir(e.path()) {
            for s in subs.flatten().filter(|s| s.path().is_dir()) {
                let _ = std::fs::remove_dir(s.path());
            }
        }
        let _ = std::fs::remove_dir(e.path());
    }
}
