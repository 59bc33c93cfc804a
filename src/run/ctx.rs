//! Building a [`Ctx`]: the plan, the facts behind the cache keys (the compiler's version,
//! the environment's fingerprint), the environment capture, and — when something will run
//! — the sandbox and the kem-runner binary. `run`, `run --dry-run`, `explain` and
//! `bench fidelity` all start here; `compare --measure`, which has no campaign, uses
//! [`locate_runner`] and [`Sandbox::detect`] the same way.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::exec::slurm::Slurm;
use super::sandbox::Sandbox;
use super::{keys, Ctx};
use crate::error::Error;
use crate::graph::Plan;
use crate::measure::env;
use crate::model::{Campaign, Executor};

/// What the context is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// Deciding only (dry run, explain): the sandbox is not probed, kem-runner not looked for.
    Plan,
    /// Running steps: the sandbox is probed and recorded in the environment, and kem-runner
    /// must be found.
    Run,
}

impl Ctx {
    /// Everything a run, dry run or explain needs for `campaign`.
    pub fn new(campaign: Campaign, purpose: Purpose) -> Result<Ctx, Error> {
        let runs = purpose == Purpose::Run;
        let mut env = env::capture(&campaign.system);
        let sandbox = if runs {
            Sandbox::detect()
        } else {
            Sandbox::unavailable("not probed: nothing runs")
        };
        let facts = keys::Facts {
            cc_version: cc_version(&campaign.system.cc),
            compilers: campaign
                .system
                .compilers()
                .into_iter()
                .map(|c| (c.to_string(), compiler_id(c)))
                .collect(),
            env_fingerprint: env::fingerprint(&env),
            libraries: super::libs::resolve_all(&campaign),
        };
        if runs {
            if campaign.system.sandbox == crate::model::SandboxPolicy::Required
                && !sandbox.contained()
            {
                return Err(Error::ToolMissing(format!(
                    "refusing to run submission code uncontained (`sandbox \"required\"` in system \
                     `{}`): {}",
                    campaign.system.name,
                    sandbox.info.missing.join("; ")
                )));
            }
            env.sandbox = Some(Box::new(sandbox.info.clone()));
        }
        let plan = Plan::build(&campaign);
        let inputs = keys::all_inputs(&campaign, &plan, &facts, &super::steps::kind_inputs);
        let system = &campaign.system;
        let slurm = match &campaign.system.executor {
            Executor::Slurm(o) if runs => Some(Slurm::new(o).map_err(Error::ToolMissing)?),
            _ => None,
        };
        if runs && system.foreign() && system.emulator().is_none() {
            return Err(Error::Input(format!(
                "system `{}` is {} and this machine is {}: name an `emulator` in its system block (e.g. `emulator \"qemu-aarch64\" \"-L\" \"/usr/aarch64-linux-gnu\"`), or run it on a {} machine",
                system.name,
                system.arch,
                crate::model::host_arch(),
                system.arch
            )));
        }
        let runner = match (runs, system.foreign()) {
            (true, true) => locate_target_runner(system)?,
            (true, false) => locate_runner()?,
            (false, _) => PathBuf::from("kem-runner"),
        };
        let emulator = match system.emulator() {
            Some(e) if runs => Some(resolve_emulator(e)?),
            Some(e) => Some(e.to_vec()),
            None => None,
        };
        // `requires-cpu` is judged against the target: the declared features of an
        // emulated one, this machine's /proc/cpuinfo when native.
        let cpu_flags = match (emulator.is_some(), &system.target.cpu_features) {
            (true, Some(f)) => f.iter().cloned().collect(),
            (true, None) => Default::default(),
            (false, _) => env::cpu_flags(),
        };
        // Absolute, so that commands run in the sandbox's own working folder find them.
        let runner = std::path::absolute(&runner).unwrap_or(runner);
        Ok(Ctx {
            out: std::path::absolute(&campaign.outputs)
                .unwrap_or_else(|_| campaign.outputs.clone()),
            campaign,
            plan,
            facts,
            env,
            inputs,
            cpu_flags,
            runner,
            emulator,
            sandbox,
            slurm,
            shared_objects: Default::default(),
            progress: Default::default(),
            campaign_header: Default::default(),
        })
    }
}

/// First line of `cc --version`.
pub fn cc_version(cc: &str) -> String {
    match Command::new(cc).arg("--version").output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string(),
        Ok(o) => format!("unknown (`{cc} --version`: {})", o.status),
        Err(e) => format!("unknown (`{cc}`: {e})"),
    }
}

/// A compiler's identity on this machine ([`keys::CompilerId`]).
pub fn compiler_id(cc: &str) -> keys::CompilerId {
    let target = match Command::new(cc).arg("-dumpmachine").output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => "unknown target".to_string(),
    };
    keys::CompilerId {
        path: crate::dsl::find_program(cc).map(|p| std::fs::canonicalize(&p).unwrap_or(p)),
        version: cc_version(cc),
        target,
    }
}

/// Where kem-runner is: `NGCC_KEM_RUNNER`, else beside this executable. When this
/// executable was built by cargo and the runner is missing, build it the same way.
pub fn locate_runner() -> Result<PathBuf, Error> {
    if let Some(p) = std::env::var_os("NGCC_KEM_RUNNER") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(Error::io("this executable's path"))?;
    let dir = exe
        .parent()
        .ok_or_else(|| Error::ToolMissing("executable has no folder".into()))?;
    let runner = dir.join("kem-runner");
    if runner.is_file() {
        return Ok(runner);
    }
    let profile = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    if matches!(profile, "debug" | "release") && manifest.is_file() {
        eprintln!(
            "kem-runner is not built yet; building it (cargo build -p kem-native --bin kem-runner)"
        );
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.args([
            "build",
            "-p",
            "kem-native",
            "--bin",
            "kem-runner",
            "--manifest-path",
        ])
        .arg(&manifest);
        if profile == "release" {
            cmd.arg("--release");
        }
        let target = dir
            .parent()
            .ok_or_else(|| Error::ToolMissing("no target folder".into()))?;
        cmd.env("CARGO_TARGET_DIR", target);
        let ok = cmd.status().map(|s| s.success()).unwrap_or(false);
        if ok && runner.is_file() {
            return Ok(runner);
        }
    }
    Err(Error::ToolMissing(format!(
        "kem-runner not found at {}; build it with `cargo build --release --workspace` or set NGCC_KEM_RUNNER",
        runner.display()
    )))
}

/// The emulator command with its program resolved on `PATH` (absolute, so the sandbox
/// can bind it); a clear error when it is not installed.
fn resolve_emulator(emulator: &[String]) -> Result<Vec<String>, Error> {
    let program = Path::new(&emulator[0]);
    let found = if program.components().count() > 1 {
        program.is_file().then(|| program.to_path_buf())
    } else {
        std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(program))
                .find(|f| f.is_file())
        })
    };
    let Some(found) = found else {
        return Err(Error::ToolMissing(format!(
            "emulator `{}` not found on PATH (for qemu-aarch64: Debian package `qemu-user`)",
            emulator[0]
        )));
    };
    let mut out = vec![found.display().to_string()];
    out.extend(emulator[1..].iter().cloned());
    Ok(out)
}

/// kem-runner built for a foreign system's target (`cargo build --release --target
/// <triple>` into this executable's target folder, linked by the system's `cc`), or
/// `NGCC_KEM_RUNNER_TARGET` when set. Cargo is run every time (a no-op when up to date) so
/// the target's runner never lags behind the host's.
pub fn locate_target_runner(system: &crate::model::System) -> Result<PathBuf, Error> {
    if let Some(p) = std::env::var_os("NGCC_KEM_RUNNER_TARGET") {
        return Ok(PathBuf::from(p));
    }
    let Some(triple) = system.rust_target() else {
        return Err(Error::Input(format!(
            "no Rust target is known for arch `{}` (known: x86-64, aarch64, riscv64)",
            system.arch
        )));
    };
    let exe = std::env::current_exe().map_err(Error::io("this executable's path"))?;
    let target = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| Error::ToolMissing("executable has no target folder".into()))?;
    let runner = target.join(triple).join("release").join("kem-runner");
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    if !manifest.is_file() {
        return if runner.is_file() {
            Ok(runner)
        } else {
            Err(Error::ToolMissing(format!(
                "kem-runner for {triple} not found at {}; set NGCC_KEM_RUNNER_TARGET",
                runner.display()
            )))
        };
    }
    let linker_var = format!(
        "CARGO_TARGET_{}_LINKER",
        triple.to_uppercase().replace('-', "_")
    );
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args([
        "build",
        "--quiet",
        "--release",
        "-p",
        "kem-native",
        "--bin",
        "kem-runner",
        "--target",
        triple,
        "--manifest-path",
    ])
    .arg(&manifest)
    .env("CARGO_TARGET_DIR", target);
    if std::env::var_os(&linker_var).is_none() {
        cmd.env(&linker_var, &system.cc);
    }
    let status = cmd
        .status()
        .map_err(|e| Error::ToolMissing(format!("cannot run cargo: {e}")))?;
    if status.success() && runner.is_file() {
        return Ok(runner);
    }
    Err(Error::ToolMissing(format!(
        "could not build kem-runner for {triple} ({status}): install the target with `rustup target add {triple}` and its C toolchain (for aarch64: Debian packages `gcc-aarch64-linux-gnu` and `libc6-dev-arm64-cross`)"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_compiler_version() {
        let v = cc_version("cc");
        assert!(
            !v.starts_with("unknown") && v.chars().any(|c| c.is_ascii_digit()),
            "{v}"
        );
        assert!(cc_version("/nonexistent/cc").starts_with("unknown"));
    }
}
