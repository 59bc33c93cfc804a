//! The seccomp filters every contained process gets (through `bwrap --add-seccomp-fd`):
//! system calls a KEM, a compiler or valgrind never needs are refused with `EPERM` —
//! io_uring, userfaultfd, keys, BPF, ptrace and reading other processes' memory, mounts
//! and new namespaces (`unshare`, `setns`, `clone` with a namespace flag), kernel modules,
//! kexec, reboot, swap, accounting, quotas, the kernel log, file handles — and the ways to
//! trap the time-stamp counter, so that a KEM cannot emulate the clock it is timed with:
//! `prctl(PR_SET_TSC, …)` and, on x86-64, `arch_prctl(ARCH_SET_CPUID, …)` (`rdtsc`/`cpuid`
//! made to fault into the KEM's own handler). `clone3` gets `ENOSYS` (its flags are in
//! memory a filter cannot read), so the C library falls back to `clone`, whose flags it
//! can. `perf_event_open` stays allowed: kem-runner reads the core cycle counter with it
//! (a counter opened by the KEM counts only itself). A timing command also gets
//! [`keep_core`]: `sched_setaffinity` refused, after the engine pinned it to the bench core
//! before it started. The programs are generated with `seccompiler`.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Refused outright (`EPERM`), by name for the record.
const REFUSED: &[(&str, i64)] = &[
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("bpf", libc::SYS_bpf),
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("kcmp", libc::SYS_kcmp),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("open_tree", libc::SYS_open_tree),
    ("move_mount", libc::SYS_move_mount),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("acct", libc::SYS_acct),
    ("quotactl", libc::SYS_quotactl),
    ("syslog", libc::SYS_syslog),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("fanotify_init", libc::SYS_fanotify_init),
    ("vhangup", libc::SYS_vhangup),
];

/// `prctl` options refused (`EPERM`): `PR_SET_TSC` (make `rdtsc` fault).
const PRCTL_REFUSED: &[(&str, u64)] = &[("PR_SET_TSC", libc::PR_SET_TSC as u64)];

/// `arch_prctl` codes refused on x86-64: `ARCH_SET_CPUID` (make `cpuid` fault).
#[cfg(target_arch = "x86_64")]
const ARCH_PRCTL_REFUSED: &[(&str, u64)] = &[("ARCH_SET_CPUID", 0x1012)];

/// `clone` flags that make a namespace (refused on `clone`).
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    0x80, // CLONE_NEWTIME
];

/// On x86-64, the x32 ABI reaches the same calls with this bit set.
#[cfg(target_arch = "x86_64")]
const X32_BIT: i64 = 0x4000_0000;

fn arch() -> Result<TargetArch, String> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("no seccomp filter for {}: {e}", std::env::consts::ARCH))
}

fn to_bytes(p: BpfProgram) -> Vec<u8> {
    let mut out = Vec::with_capacity(p.len() * 8);
    for i in p {
        out.extend_from_slice(&i.code.to_ne_bytes());
        out.push(i.jt);
        out.push(i.jf);
        out.extend_from_slice(&i.k.to_ne_bytes());
    }
    out
}

/// The filters as BPF programs (`struct sock_filter` arrays, as `bwrap --add-seccomp-fd`
/// reads them): the refusals, then `clone3`.
pub fn programs() -> Result<Vec<Vec<u8>>, String> {
    let arch = arch()?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &(_, nr) in REFUSED {
        rules.insert(nr, Vec::new());
        #[cfg(target_arch = "x86_64")]
        rules.insert(nr | X32_BIT, Vec::new());
    }
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|&flag| {
            SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )
            .and_then(|c| SeccompRule::new(vec![c]))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    rules.insert(libc::SYS_clone, clone_rules.clone());
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_clone | X32_BIT, clone_rules);
    let prctl = first_arg_rules(PRCTL_REFUSED)?;
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_prctl | X32_BIT, prctl.clone());
    rules.insert(libc::SYS_prctl, prctl);
    #[cfg(target_arch = "x86_64")]
    {
        let arch_prctl = first_arg_rules(ARCH_PRCTL_REFUSED)?;
        rules.insert(libc::SYS_arch_prctl | X32_BIT, arch_prctl.clone());
        rules.insert(libc::SYS_arch_prctl, arch_prctl);
    }
    let refuse = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let clone3 = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    [refuse, clone3]
        .into_iter()
        .map(|f| {
            BpfProgram::try_from(f)
                .map(to_bytes)
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// Rules matching a call whose first argument is one of `values`.
fn first_arg_rules(values: &[(&str, u64)]) -> Result<Vec<SeccompRule>, String> {
    values
        .iter()
        .map(|&(_, v)| {
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, v)
                .and_then(|c| SeccompRule::new(vec![c]))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())
}

/// The extra filter of a command kept on one core (a timing job): `sched_setaffinity`
/// refused with `EPERM`. The engine sets the command's affinity before it starts (and, as
/// root, puts it in a cpuset cgroup of that core), and kem-runner's own pinning makes no
/// call when it is already there, so the call is needed by nothing but a KEM that wants to
/// leave.
pub fn keep_core() -> Result<Vec<u8>, String> {
    let arch = arch()?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_sched_setaffinity, Vec::new());
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_sched_setaffinity | X32_BIT, Vec::new());
    let f = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    BpfProgram::try_from(f)
        .map(to_bytes)
        .map_err(|e| e.to_string())
}

/// What the filters refuse, for records.
pub fn described() -> String {
    let names: Vec<&str> = REFUSED.iter().map(|(n, _)| *n).collect();
    let mut calls: Vec<String> = PRCTL_REFUSED
        .iter()
        .map(|(n, _)| format!("prctl({n})"))
        .collect();
    #[cfg(target_arch = "x86_64")]
    calls.extend(
        ARCH_PRCTL_REFUSED
            .iter()
            .map(|(n, _)| format!("arch_prctl({n})")),
    );
    format!(
        "seccomp: refuses {} (EPERM), {} (EPERM: the time-stamp counter cannot be trapped) and \
         clone with a namespace flag; clone3 gets ENOSYS (the C library falls back to clone); \
         perf_event_open allowed (kem-runner reads the cycle counter)",
        names.join(", "),
        calls.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_both_programs() {
        let p = programs().unwrap();
        assert_eq!(p.len(), 2);
        assert!(p.iter().all(|b| !b.is_empty() && b.len() % 8 == 0));
        assert!(described().contains("io_uring_setup"));
        assert!(described().contains("prctl(PR_SET_TSC)"));
        let k = keep_core().unwrap();
        assert!(!k.is_empty() && k.len().is_multiple_of(8));
    }
}
