//! Containment of every process that runs submission-controlled code (the compiler on the
//! submission's sources and flags, kem-runner with the submission's object loaded).
//!
//! With bubblewrap (`bwrap`, as Flatpak uses it) each such process runs in new user, PID,
//! network, IPC, UTS and cgroup namespaces and sees a file system made of the system
//! folders it needs ([`SYSTEM`], read-only), its jail's own paths ([`Jail`]: what it reads
//! read-only, its step's folders writable) and nothing else: no `/etc/shadow`, no `$HOME`,
//! no other submission's sources or outputs. `/tmp` and `/dev/shm` are private tmpfs of a
//! fixed size ([`TMP_BYTES`], [`SHM_BYTES`]). It runs as an unprivileged user — with a root
//! engine a dedicated unused uid ([`user`]), through a first `bwrap` that builds the view
//! as root and a second one that `setpriv` starts as that user in a user namespace mapping
//! it to itself — with a cleared environment, no capabilities, no new privileges, no
//! further user namespaces, a new session (no terminal injection), a seccomp filter
//! ([`seccomp`]), and is killed with everything it started when the step ends or the engine
//! dies. Every process also gets resource limits (address space, file size, open files,
//! processes), with a root engine control groups per command ([`cgroup`]: processes,
//! memory including its tmpfs), and the folders it writes are bounded ([`disk`]).
//!
//! Without a working `bwrap` the process still gets the limits, the cleared environment and
//! its own process group, and [`SandboxInfo::missing`] says what is not in force; records
//! and reports show it. What is in force is in [`SandboxInfo::protections`].

pub mod cgroup;
pub mod disk;
pub mod pinning;
pub mod seccomp;
pub mod user;
mod view;

use std::ffi::OsString;
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kem_native::sys::{ChildSetup, Limit};

use crate::record::SandboxInfo;
use user::JailUser;

/// Default address-space limit of a contained process (`memory=` on a step changes it).
pub const DEFAULT_MEMORY: u64 = 4 << 30;
/// Largest file a contained process may write.
pub const FILE_SIZE: u64 = 1 << 30;
/// Open file descriptors of a contained process.
pub const OPEN_FILES: u64 = 1024;
/// Processes a contained command may add to those its user already has (`RLIMIT_NPROC`
/// counts all of a user's processes; with the cgroups of a root engine, `pids.max` bounds
/// each command on its own).
pub const PROCESSES: u64 = cgroup::PIDS;
/// `RLIMIT_NPROC` of the dedicated jail user, shared by every contained command.
const JAIL_PROCESSES: u64 = 4096;
/// Size of the private `/tmp` (a tmpfs in memory).
pub const TMP_BYTES: u64 = 512 << 20;
/// Size of the private `/dev/shm`.
pub const SHM_BYTES: u64 = 64 << 20;

/// System folders and files a contained process sees (read-only) when they exist: the
/// programs, libraries and the dynamic loader's configuration. Nothing else of the host.
pub const SYSTEM: [&str; 11] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
];

/// What a contained process may see and do.
#[derive(Debug, Clone)]
pub struct Jail {
    /// Paths it reads (sources, objects, the runner binary), read-only.
    pub read: Vec<PathBuf>,
    /// Folders it may write (the step's own output or scratch folders); they must exist.
    pub write: Vec<PathBuf>,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Address-space limit in bytes.
    pub memory: u64,
    /// The core a timing command is kept on ([`pinning`]), if any.
    pub cpu: Option<usize>,
    /// Processes started with it that run as long (a timing session's other runners and
    /// their references): where contained processes run as the engine's user,
    /// `RLIMIT_NPROC` counts them too, so the command's headroom ([`PROCESSES`]) is counted
    /// beyond them, not from the moment it starts (the first runner of a session of 408
    /// otherwise could not start a thread once the rest had started).
    pub alongside: u64,
}

impl Jail {
    /// The jail of a kem-runner process: it reads the runner, the object it loads and the
    /// `api.h` it parses (made absolute: the runner works in `scratch`), and writes and works
    /// only in its own `scratch` folder.
    pub fn runner(runner: &Path, object: &Path, api_h: &Path, scratch: &Path, memory: u64) -> Jail {
        let api_h = std::path::absolute(api_h).unwrap_or_else(|_| api_h.to_path_buf());
        Jail {
            read: vec![runner.to_path_buf(), object.to_path_buf(), api_h],
            write: vec![scratch.to_path_buf()],
            cwd: scratch.to_path_buf(),
            memory,
            cpu: None,
            alongside: 0,
        }
    }
}

/// How `bwrap` is run.
#[derive(Debug, Clone)]
struct Bwrap {
    path: PathBuf,
    /// A root engine: the view is built as root and the process runs as this user, started
    /// by `setpriv` (its path) in a second `bwrap`.
    drop_to: Option<(JailUser, PathBuf)>,
    /// Whether `--disable-userns` works here.
    disable_userns: bool,
}

/// The containment available on this machine, probed once per run.
#[derive(Debug, Clone)]
pub struct Sandbox {
    bwrap: Option<Bwrap>,
    pub info: SandboxInfo,
    /// A launcher in front of every contained command (`srun --jobid=N ...` with the Slurm
    /// executor); empty: the command runs as a child of the engine.
    launch: Vec<String>,
    /// The seccomp programs, when they could be built.
    seccomp: Option<Arc<Vec<Vec<u8>>>>,
    /// The root engine's control groups.
    cgroups: Option<Arc<cgroup::Cgroups>>,
}

/// What is missing without bubblewrap.
fn fallback_missing(why: &str) -> Vec<String> {
    vec![
        format!("bubblewrap unavailable ({why}); install it (Debian/Ubuntu: `apt-get install bubblewrap`)"),
        "no PID namespace: a process that leaves the step's process group can outlive it and signal the engine".into(),
        "no network isolation".into(),
        "no filesystem isolation: the code can read and write wherever this user can".into(),
        "no seccomp filter, no private /tmp or /dev/shm".into(),
    ]
}

/// Give the jail user the folders it may write (and what earlier runs left in them).
fn hand_over(dirs: &[PathBuf], u: JailUser) {
    use crate::safe_fs::tree::{walk_with, Bounds};
    let bounds = Bounds {
        depth: disk::DISK.depth,
        entries: disk::DISK.entries,
    };
    for d in dirs {
        let _ = std::os::unix::fs::lchown(d, Some(u.uid), Some(u.gid));
        let _ = walk_with(d, bounds, |e| {
            let _ = std::os::unix::fs::lchown(d.join(&e.rel), Some(u.uid), Some(u.gid));
        });
    }
}

impl Sandbox {
    /// Find `bwrap` on `PATH` and check that it can create its namespaces here (user
    /// namespaces may be disabled, e.g. in some containers); with a root engine, find the
    /// jail user and `setpriv`, the control groups and the seccomp filter.
    pub fn detect() -> Sandbox {
        Sandbox::detect_in(&std::env::temp_dir())
    }

    /// [`detect`](Self::detect), its trial run's scratch folder made in `scratch` (a
    /// folder its caller removes however it ends).
    pub fn detect_in(scratch: &Path) -> Sandbox {
        let Some(path) = find_on_path("bwrap") else {
            return Sandbox::unavailable("`bwrap` not found on PATH");
        };
        let version = Command::new(&path)
            .arg("--version")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "bubblewrap".to_string());
        let mut missing = Vec::new();
        let root = kem_native::sys::effective_uid() == 0;
        let drop_to = if root {
            match (user::pick(), find_on_path("setpriv")) {
                (Some(u), Some(setpriv)) => Some((u, setpriv)),
                (None, _) => {
                    missing.push("contained processes run as root: no unused uid found".into());
                    None
                }
                (_, None) => {
                    missing.push(
                        "contained processes run as root: `setpriv` (util-linux) not found".into(),
                    );
                    None
                }
            }
        } else {
            None
        };
        let seccomp = match seccomp::programs() {
            Ok(p) => Some(Arc::new(p)),
            Err(e) => {
                missing.push(format!("no seccomp filter: {e}"));
                None
            }
        };
        let cgroups = match cgroup::Cgroups::detect() {
            Ok(c) => Some(Arc::new(c)),
            Err(e) => {
                missing.push(e);
                None
            }
        };
        let mut last_err = String::new();
        // The full construction on a trivial command, with `--disable-userns` if it works.
        for disable_userns in [true, false] {
            let sb = Sandbox {
                bwrap: Some(Bwrap {
                    path: path.clone(),
                    drop_to: drop_to.clone(),
                    disable_userns,
                }),
                info: SandboxInfo {
                    tool: version.clone(),
                    protections: Vec::new(),
                    missing: Vec::new(),
                },
                launch: Vec::new(),
                seccomp: seccomp.clone(),
                cgroups: cgroups.clone(),
            };
            match sb.probe(scratch) {
                Ok(()) => {
                    let mut missing = missing.clone();
                    if !disable_userns {
                        missing.push(
                            "new user namespaces inside are refused by seccomp only (`bwrap \
                             --disable-userns` does not work here)"
                                .into(),
                        );
                    }
                    if !root {
                        missing.push(format!(
                            "contained processes run as this user (uid {}), so `RLIMIT_NPROC` \
                             counts this user's other processes too (set to their number plus \
                             {PROCESSES}, plus a timing session's other processes, at each start)",
                            kem_native::sys::effective_uid()
                        ));
                    }
                    let protections = sb.protections();
                    return Sandbox {
                        info: SandboxInfo {
                            tool: version,
                            protections,
                            missing,
                        },
                        ..sb
                    };
                }
                Err(e) => last_err = e,
            }
        }
        Sandbox::unavailable(&format!(
            "{version} cannot create its sandbox here: {last_err}"
        ))
    }

    /// Run `true` in a jail with a scratch folder made in `scratch`.
    fn probe(&self, scratch: &Path) -> Result<(), String> {
        let d = tempfile::tempdir_in(scratch).map_err(|e| e.to_string())?;
        let j = Jail {
            read: Vec::new(),
            write: vec![d.path().to_path_buf()],
            cwd: d.path().to_path_buf(),
            memory: DEFAULT_MEMORY,
            cpu: None,
            alongside: 0,
        };
        let child = self
            .command(Path::new("true"), &[], &j)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        match wait_bounded(child, Duration::from_secs(10)) {
            Ok((true, _)) => Ok(()),
            Ok((false, err)) => Err(crate::text::excerpt(
                err.lines().next().unwrap_or("no message"),
                200,
            )),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Protections in force, as listed in records.
    fn protections(&self) -> Vec<String> {
        let Some(b) = &self.bwrap else {
            return Vec::new();
        };
        let mut p = vec![
            "PID, network (no network, not even loopback), IPC, UTS and cgroup namespaces: every descendant dies with the step; the engine cannot be signalled".to_string(),
            format!(
                "sees only the system folders ({}) read-only, the paths its step reads read-only and its step's own folders writable; nothing else of the host (no /etc/shadow, $HOME, other submissions' sources or outputs)",
                SYSTEM.join(", ")
            ),
            format!(
                "private /tmp ({} MiB) and /dev/shm ({} MiB) tmpfs",
                TMP_BYTES >> 20,
                SHM_BYTES >> 20
            ),
            "cleared environment; no capabilities, no new privileges; new session".into(),
            "killed when the engine dies".into(),
            format!(
                "rlimits: address space (the step's memory), file size {} MiB, open files {OPEN_FILES}, processes",
                FILE_SIZE >> 20
            ),
            format!(
                "disk: the folders a command may write hold at most {} MiB, {} files and {} nested folders; {} MiB and {} inodes of the outputs' file system are kept for the engine",
                disk::DISK.bytes >> 20,
                disk::DISK.entries,
                disk::DISK.depth,
                disk::RESERVE_BYTES >> 20,
                disk::RESERVE_INODES
            ),
        ];
        match &b.drop_to {
            Some((u, _)) => p.push(format!(
                "runs as uid {} gid {} ({}), in a user namespace that maps it to itself; `RLIMIT_NPROC` {JAIL_PROCESSES} for that uid",
                u.uid,
                u.gid,
                if u.named {
                    format!("the `{}` user", user::JAIL_USER)
                } else {
                    "an id no user, group or process uses".into()
                }
            )),
            None => p.push(format!(
                "runs as this user (uid {}) in a user namespace",
                kem_native::sys::effective_uid()
            )),
        }
        if b.disable_userns {
            p.push("no further user namespaces (`bwrap --disable-userns`)".into());
        }
        if self.seccomp.is_some() {
            p.push(seccomp::described());
        }
        if let Some(c) = &self.cgroups {
            p.push(c.described());
        }
        p
    }

    /// No bubblewrap: limits, cleared environment and process groups only.
    pub fn unavailable(why: &str) -> Sandbox {
        Sandbox {
            bwrap: None,
            launch: Vec::new(),
            seccomp: None,
            cgroups: None,
            info: SandboxInfo {
                tool: "none".into(),
                protections: vec![
                    "rlimits: address space, file size, open files, processes".into(),
                    "cleared environment".into(),
                    "own process group, killed at step end; parent-death signal".into(),
                ],
                missing: fallback_missing(why),
            },
        }
    }

    /// The same containment, each command started through `launch` (a program and its
    /// arguments, e.g. `srun --jobid=N --overlap`), which runs the contained command
    /// elsewhere with the limits it was started with. Descriptors do not reach the other
    /// side: no seccomp filter there (the record says so).
    pub fn via(&self, launch: Vec<String>) -> Sandbox {
        let mut info = self.info.clone();
        if self.seccomp.is_some() {
            info.protections.retain(|p| !p.starts_with("seccomp:"));
            info.missing
                .push("no seccomp filter: the Slurm launcher does not pass it on".into());
        }
        Sandbox {
            launch,
            seccomp: None,
            info,
            ..self.clone()
        }
    }

    /// Whether processes run inside bubblewrap.
    pub fn contained(&self) -> bool {
        self.bwrap.is_some()
    }

    /// A command that runs `program` with `args` inside the jail.
    pub fn command(&self, program: &Path, args: &[String], jail: &Jail) -> Command {
        let path_var =
            std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
        let env = [
            ("PATH", path_var.as_str()),
            ("LC_ALL", "C"),
            ("HOME", &jail.cwd.display().to_string()),
            ("TMPDIR", "/tmp"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let mut setup = ChildSetup::default();
        let cmd = match &self.bwrap {
            Some(b) => self.bwrap_command(b, program, args, jail, &env, &mut setup),
            None if !self.launch.is_empty() => {
                // The launcher needs its own environment; the program gets the cleared one.
                let mut cmd = Command::new("env");
                cmd.arg("-i")
                    .args(env.iter().map(|(k, v)| format!("{k}={v}")))
                    .arg(program)
                    .args(args)
                    .current_dir(&jail.cwd);
                cmd
            }
            None => {
                let mut cmd = Command::new(program);
                cmd.args(args).env_clear().envs(env).current_dir(&jail.cwd);
                cmd
            }
        };
        let mut cmd = match self.launch.split_first() {
            Some((launcher, pre)) => {
                let mut outer = Command::new(launcher);
                outer.args(pre).arg(cmd.get_program()).args(cmd.get_args());
                if let Some(dir) = cmd.get_current_dir() {
                    outer.current_dir(dir);
                }
                outer
            }
            None => cmd,
        };
        let processes = match self.bwrap.as_ref().and_then(|b| b.drop_to.as_ref()) {
            Some(_) => JAIL_PROCESSES,
            None => user::tasks_of(kem_native::sys::effective_uid()) + PROCESSES + jail.alongside,
        };
        setup.limits = vec![
            Limit::AddressSpace(jail.memory),
            Limit::FileSize(FILE_SIZE),
            Limit::OpenFiles(OPEN_FILES),
            Limit::Processes(processes),
        ];
        if let Some(c) = &self.cgroups {
            // A group that cannot be made leaves the command to its rlimits.
            if let Ok(procs) = c.make(jail.memory + TMP_BYTES + SHM_BYTES, jail.cpu) {
                setup.cgroups = procs;
            }
        }
        // Kept on its core from the start; seccomp keeps it there ([`pinning`]).
        setup.affinity = jail.cpu.into_iter().collect();
        kem_native::sys::setup_child(&mut cmd, setup);
        cmd
    }

    fn bwrap_command(
        &self,
        b: &Bwrap,
        program: &Path,
        args: &[String],
        jail: &Jail,
        env: &[(String, String)],
        setup: &mut ChildSetup,
    ) -> Command {
        let mut a: Vec<OsString> = Vec::new();
        let push =
            |a: &mut Vec<OsString>, items: &[&str]| a.extend(items.iter().map(OsString::from));
        match &b.drop_to {
            Some((u, _)) => {
                hand_over(&jail.write, *u);
                push(
                    &mut a,
                    &[
                        "--unshare-pid",
                        "--unshare-net",
                        "--unshare-ipc",
                        "--unshare-uts",
                        "--unshare-cgroup-try",
                        "--die-with-parent",
                        "--new-session",
                        "--cap-drop",
                        "ALL",
                        "--cap-add",
                        "CAP_SETUID",
                        "--cap-add",
                        "CAP_SETGID",
                    ],
                );
            }
            None => {
                push(
                    &mut a,
                    &[
                        "--unshare-all",
                        "--die-with-parent",
                        "--new-session",
                        "--cap-drop",
                        "ALL",
                    ],
                );
                if b.disable_userns {
                    push(&mut a, &["--disable-userns"]);
                }
            }
        }
        view::view(&mut a, jail, program);
        push(&mut a, &["--remount-ro", "/"]);
        if let Some((u, setpriv)) = &b.drop_to {
            // The second bwrap, started as the jail user, uses the first one's view whole.
            push(&mut a, &["--"]);
            a.push(setpriv.clone().into_os_string());
            a.push(format!("--reuid={}", u.uid).into());
            a.push(format!("--regid={}", u.gid).into());
            push(
                &mut a,
                &[
                    "--clear-groups",
                    "--inh-caps=-all",
                    "--bounding-set=-all",
                    "--no-new-privs",
                    "--",
                ],
            );
            a.push(b.path.clone().into_os_string());
            // Its own PID namespace too: the program cannot signal this bwrap (its init is
            // out of reach); /proc stays the first one's (a second proc mount is refused).
            push(
                &mut a,
                &["--unshare-user", "--unshare-pid", "--die-with-parent"],
            );
            if b.disable_userns {
                push(&mut a, &["--disable-userns"]);
            }
            // `--dev-bind`: a plain `--bind` remounts nodev, and the first bwrap's `/dev`
            // (null, zero, random, ...; nothing else) could not be opened.
            push(&mut a, &["--dev-bind", "/", "/"]);
        }
        if let Some(programs) = &self.seccomp {
            let keep_core = jail.cpu.and_then(|_| seccomp::keep_core().ok());
            for bytes in programs.iter().chain(keep_core.as_ref()) {
                // Each command reads its own copy (the offset is shared with the reader).
                let file = tempfile::tempfile().and_then(|mut f| {
                    f.write_all(bytes)?;
                    f.rewind()?;
                    Ok(f)
                });
                if let Ok(f) = file {
                    use std::os::fd::AsRawFd;
                    a.push("--add-seccomp-fd".into());
                    a.push(f.as_raw_fd().to_string().into());
                    setup.keep_fds.push(f.into());
                }
            }
        }
        a.push("--clearenv".into());
        for (k, v) in env {
            push(&mut a, &["--setenv", k, v]);
        }
        a.push("--chdir".into());
        a.push(jail.cwd.clone().into_os_string());
        let program = if program.components().count() > 1 {
            std::path::absolute(program).unwrap_or_else(|_| program.to_path_buf())
        } else {
            program.to_path_buf()
        };
        a.push("--".into());
        a.push(program.into_os_string());
        a.extend(args.iter().map(OsString::from));
        let mut cmd = Command::new(&b.path);
        cmd.args(a);
        cmd
    }
}

/// The limits of a contained process with address-space limit `memory`, for the reason of
/// a crash (a failed allocation often ends in SIGSEGV or SIGABRT).
pub fn limits_note(memory: u64) -> String {
    format!(
        "limits: address space {} MiB, files {} MiB",
        memory >> 20,
        FILE_SIZE >> 20
    )
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Wait for a probe with a deadline; (success, stderr).
fn wait_bounded(
    mut child: std::process::Child,
    limit: Duration,
) -> std::io::Result<(bool, String)> {
    use std::io::Read as _;
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return Ok((status.success(), err));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Ok((false, "timed out".into()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests;
