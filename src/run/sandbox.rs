//! Containment of every process that runs submission-controlled code (the compiler on the
//! submission's sources and flags, kem-runner with the submission's object loaded).
//!
//! With bubblewrap (`bwrap`, as Flatpak uses it) each such process runs in new user, PID,
//! network, IPC, UTS and cgroup namespaces: the whole filesystem read-only, a private
//! `/tmp`, `$HOME`, `/home`, `/root` and `/run` hidden, only the step's own folders
//! writable, a cleared environment, no capabilities, no new privileges, a new session (no
//! terminal injection), and killed with everything it started when the step ends or the
//! engine dies (the PID namespace's init is killed, and the kernel kills the rest). Every
//! process also gets resource limits (address space, file size, open files, processes) and
//! a parent-death signal.
//!
//! Without a working `bwrap` the process still gets the limits, the cleared environment and
//! its own process group, and [`SandboxInfo::missing`] says what is not in force; records
//! and reports show it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kem_native::sys::Limit;

use crate::record::SandboxInfo;

/// Default address-space limit of a contained process (`memory=` on a step changes it).
pub const DEFAULT_MEMORY: u64 = 4 << 30;
/// Largest file a contained process may write.
pub const FILE_SIZE: u64 = 1 << 30;
/// Open file descriptors of a contained process.
pub const OPEN_FILES: u64 = 1024;
/// Processes of the user while a contained process runs (not enforced by Linux for root).
pub const PROCESSES: u64 = 4096;
/// Size of the private `/tmp` (a tmpfs in memory).
const TMP_BYTES: u64 = 1 << 30;

/// Folders hidden from contained processes (replaced by empty ones).
const HIDDEN: [&str; 5] = ["/tmp", "/var/tmp", "/home", "/root", "/run"];

/// What a contained process may see and do.
#[derive(Debug, Clone)]
pub struct Jail {
    /// Paths it must read even where they lie in a hidden folder (sources, objects, the
    /// runner binary).
    pub read: Vec<PathBuf>,
    /// Folders it may write (the step's own output or scratch folders); they must exist.
    pub write: Vec<PathBuf>,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Address-space limit in bytes.
    pub memory: u64,
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
        }
    }
}

/// The containment available on this machine, probed once per run.
#[derive(Debug, Clone)]
pub struct Sandbox {
    bwrap: Option<PathBuf>,
    pub info: SandboxInfo,
    /// A launcher in front of every contained command (`srun --jobid=N ...` with the Slurm
    /// executor); empty: the command runs as a child of the engine.
    launch: Vec<String>,
}

/// The namespace and mount options every contained process gets (before its own binds).
fn bwrap_base(home: Option<&Path>) -> Vec<String> {
    let mut a: Vec<String> = [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    ]
    .map(String::from)
    .to_vec();
    for dir in HIDDEN {
        if Path::new(dir).is_dir() {
            if dir == "/tmp" {
                a.extend(["--size".into(), TMP_BYTES.to_string()]);
            }
            a.extend(["--tmpfs".into(), dir.into()]);
        }
    }
    if let Some(h) = home {
        if h.is_dir() && !HIDDEN.iter().any(|d| h.starts_with(d)) && h != Path::new("/") {
            a.extend(["--tmpfs".into(), h.display().to_string()]);
        }
    }
    a.push("--clearenv".into());
    a
}

/// Protections bubblewrap puts in force, as listed in records.
fn bwrap_protections() -> Vec<String> {
    [
        "PID namespace: every descendant dies with the step; the engine cannot be signalled",
        "network namespace: no network, not even loopback",
        "filesystem read-only except the step's own folders; private /tmp",
        "$HOME, /home, /root and /run hidden",
        "cleared environment",
        "no capabilities, no new privileges, new session",
        "killed when the engine dies",
        "rlimits: address space, file size, open files, processes",
    ]
    .map(String::from)
    .to_vec()
}

/// What is missing without bubblewrap.
fn fallback_missing(why: &str) -> Vec<String> {
    vec![
        format!("bubblewrap unavailable ({why})"),
        "no PID namespace: a process that leaves the step's process group can outlive it and signal the engine".into(),
        "no network isolation".into(),
        "no filesystem isolation: the code can write wherever this user can and read $HOME".into(),
    ]
}

impl Sandbox {
    /// Find `bwrap` on `PATH` and check that it can create its namespaces here (user
    /// namespaces may be disabled, e.g. in some containers).
    pub fn detect() -> Sandbox {
        let Some(bwrap) = find_on_path("bwrap") else {
            return Sandbox::unavailable("`bwrap` not found on PATH; install bubblewrap");
        };
        let version = Command::new(&bwrap)
            .arg("--version")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "bubblewrap".to_string());
        let probe = Command::new(&bwrap)
            .args(bwrap_base(home().as_deref()))
            .args(["--", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|child| wait_bounded(child, Duration::from_secs(10)));
        match probe {
            Ok((true, _)) => Sandbox {
                launch: Vec::new(),
                bwrap: Some(bwrap),
                info: SandboxInfo {
                    tool: version,
                    protections: bwrap_protections(),
                    missing: Vec::new(),
                },
            },
            Ok((false, err)) => Sandbox::unavailable(&format!(
                "{version} cannot create its namespaces here: {}",
                err.lines().next().unwrap_or("no message")
            )),
            Err(e) => Sandbox::unavailable(&format!("cannot run {}: {e}", bwrap.display())),
        }
    }

    /// No bubblewrap: limits, cleared environment and process groups only.
    pub fn unavailable(why: &str) -> Sandbox {
        Sandbox {
            bwrap: None,
            launch: Vec::new(),
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
    /// elsewhere with the limits it was started with.
    pub fn via(&self, launch: Vec<String>) -> Sandbox {
        Sandbox {
            launch,
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
        let cmd = match &self.bwrap {
            Some(bwrap) => {
                let mut cmd = Command::new(bwrap);
                cmd.args(bwrap_base(home().as_deref()));
                for p in jail.read.iter().filter_map(|p| std::path::absolute(p).ok()) {
                    if p.exists() {
                        cmd.arg("--ro-bind").arg(&p).arg(&p);
                    }
                }
                for p in jail
                    .write
                    .iter()
                    .filter_map(|p| std::path::absolute(p).ok())
                {
                    cmd.arg("--bind").arg(&p).arg(&p);
                }
                for (k, v) in &env {
                    cmd.args(["--setenv", k, v]);
                }
                cmd.arg("--chdir").arg(&jail.cwd);
                let program = if program.components().count() > 1 {
                    std::path::absolute(program).unwrap_or_else(|_| program.to_path_buf())
                } else {
                    program.to_path_buf()
                };
                cmd.arg("--").arg(program).args(args);
                cmd
            }
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
        kem_native::sys::limit_child(
            &mut cmd,
            &[
                Limit::AddressSpace(jail.memory),
                Limit::FileSize(FILE_SIZE),
                Limit::OpenFiles(OPEN_FILES),
                Limit::Processes(PROCESSES),
            ],
        );
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

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
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
mod tests {
    use super::*;

    fn jail(dir: &Path) -> Jail {
        Jail {
            read: vec![dir.to_path_buf()],
            write: vec![dir.join("rw")],
            cwd: dir.join("rw"),
            memory: DEFAULT_MEMORY,
        }
    }

    fn sh(sb: &Sandbox, j: &Jail, script: &str) -> std::process::Output {
        sb.command(Path::new("/bin/sh"), &["-c".into(), script.into()], j)
            .output()
            .unwrap()
    }

    #[test]
    fn bwrap_hides_home_and_keeps_writes_in_the_jail() {
        let sb = Sandbox::detect();
        let missing = (!sb.contained()).then(|| sb.info.missing.join("; "));
        if !crate::require::require("bubblewrap", missing) {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("rw")).unwrap();
        std::fs::write(d.path().join("input"), "in").unwrap();
        let j = jail(d.path());
        let out = sh(
            &sb,
            &j,
            "cat ../input && echo ok > out && touch ../outside; ls /root | wc -l; env | sort",
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.starts_with("in0\n"),
            "input unreadable or /root not empty: {text}"
        );
        assert!(!text.contains("CARGO"), "environment leaked: {text}");
        assert_eq!(
            std::fs::read_to_string(d.path().join("rw/out")).unwrap(),
            "ok\n"
        );
        assert!(!d.path().join("outside").exists());
    }

    #[test]
    fn limits_apply_with_and_without_bwrap() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("rw")).unwrap();
        let mut j = jail(d.path());
        j.memory = 1 << 30;
        for sb in [Sandbox::detect(), Sandbox::unavailable("test")] {
            let out = sh(&sb, &j, "ulimit -v; ulimit -n");
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(
                text,
                format!("{}\n{OPEN_FILES}\n", (1u64 << 30) / 1024),
                "{:?}",
                sb.info
            );
        }
        assert!(!Sandbox::unavailable("x").info.missing.is_empty());
    }
}
