//! A timing command (kem-runner's `time`, `serve` and `profile` jobs, whose [`Jail`] names
//! a core) keeps to the bench core whatever the KEM it loads does. Three things hold it
//! there, each recorded ([`Sandbox::info_on_core`]):
//!
//! 1. the engine sets the command's affinity to that core before it executes
//!    (`kem_native::sys::ChildSetup::affinity`), so kem-runner starts there and its own
//!    pinning makes no call (`kem_native::timer::pin_to_cpu`);
//! 2. with a root engine and the cgroup v1 `cpuset` controller, the command joins a
//!    `cpuset` group of that core alone ([`super::cgroup`]): the kernel refuses any other
//!    core for it and for everything it starts;
//! 3. the seccomp filter refuses `sched_setaffinity` (`EPERM`) for the whole command
//!    ([`super::seccomp::keep_core`]), installed by bubblewrap just before kem-runner
//!    executes, after the engine's pinning and before any KEM code is loaded.

use super::{Jail, Sandbox};
use crate::record::SandboxInfo;

impl Sandbox {
    /// The sandbox record of a step whose commands were kept on core `cpu`: what kept them
    /// there is added to the protections, what did not to `missing`.
    pub fn info_on_core(&self, cpu: usize) -> SandboxInfo {
        let mut info = self.info.clone();
        let mut held = vec![format!("affinity set to core {cpu} before it starts")];
        match &self.cgroups {
            Some(c) if c.has_cpuset() => held.push(format!(
                "cgroup v1 cpuset of core {cpu} alone (cpuset.cpus {cpu}): the kernel refuses any other core"
            )),
            Some(_) => info.missing.push(format!(
                "no cpuset cgroup for core {cpu}: the cgroup v1 `cpuset` controller is not mounted"
            )),
            None => info.missing.push(format!(
                "no cpuset cgroup for core {cpu}: cgroups are not used here"
            )),
        }
        match (&self.bwrap, &self.seccomp) {
            (Some(_), Some(_)) => held.push(
                "seccomp refuses sched_setaffinity (EPERM) from before the KEM is loaded".into(),
            ),
            _ => info.missing.push(
                "sched_setaffinity is not refused (no seccomp filter here): a KEM may move itself to another core"
                    .into(),
            ),
        }
        info.protections
            .push(format!("kept on core {cpu}: {}", held.join("; ")));
        info
    }
}

impl Jail {
    /// This jail, its command kept on core `cpu`.
    pub fn on_core(mut self, cpu: usize) -> Jail {
        self.cpu = Some(cpu);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// A KEM-like process in a timing jail: its affinity is the core it was given, and
    /// asking for the other core fails (seccomp's EPERM; the cpuset's EINVAL as well when
    /// there is no seccomp), recorded in the step's sandbox record.
    #[test]
    fn a_timing_command_cannot_leave_its_core() {
        let sb = Sandbox::detect();
        let missing = (!sb.contained()).then(|| sb.info.missing.join("; "));
        if !crate::require::require("bubblewrap", missing) {
            return;
        }
        let cpus = kem_native::sys::thread_affinity().unwrap();
        if cpus.len() < 2 {
            return;
        }
        let (cpu, other) = (cpus[cpus.len() - 1], cpus[0]);
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(
            d.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let j = Jail {
            read: Vec::new(),
            write: vec![d.path().to_path_buf()],
            cwd: d.path().to_path_buf(),
            memory: super::super::DEFAULT_MEMORY,
            cpu: None,
            alongside: 0,
        }
        .on_core(cpu);
        // `taskset` asks for the other core, then prints the affinity it is left with.
        let script = format!(
            "taskset -p -c {other} $$ >/dev/null 2>&1; echo rc=$?; taskset -p $$ | sed 's/.*: //'"
        );
        let out = sb
            .command(Path::new("/bin/sh"), &["-c".into(), script], &j)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("rc=1"),
            "moving to core {other} succeeded: {text}"
        );
        let mask = format!("{:x}\n", 1u64 << cpu);
        assert!(text.ends_with(&mask), "not on core {cpu} alone: {text}");
        let info = sb.info_on_core(cpu);
        assert!(
            info.protections
                .iter()
                .any(|p| p.starts_with(&format!("kept on core {cpu}"))
                    && p.contains("sched_setaffinity")),
            "{info:?}"
        );
    }
}
