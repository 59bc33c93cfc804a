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
            env_fingerprint: env::fingerprint(&env),
        };
        if runs {
            env.sandbox = Some(Box::new(sandbox.info.clone()));
        }
        let plan = Plan::build(&campaign);
        let inputs = keys::all_inputs(&campaign, &plan, &facts);
        let slurm = match &campaign.system.executor {
            Executor::Slurm(o) if runs => Some(Slurm::new(o).map_err(Error::ToolMissing)?),
            _ => None,
        };
        let runner = if runs {
            locate_runner()?
        } else {
            PathBuf::from("kem-runner")
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
            cpu_flags: env::cpu_flags(),
            runner,
            sandbox,
            slurm,
            shared_objects: Default::default(),
            progress: Default::default(),
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
