//! The seccomp filters every contained process gets (through `bwrap --add-seccomp-fd`):
//! system calls a KEM, a compiler or valgrind never needs are refused with `EPERM` —
//! io_uring, userfaultfd, keys, BPF, ptrace and reading other processes' memory, mounts
//! and new namespaces (`unshare`, `setns`, `clone` with a namespace flag), kernel modules,
//! kexec, reboot, swap, accounting, quotas, the kernel log, file handles. `clone3` gets
//! `ENOSYS` (its flags are in memory a filter cannot read), so the C library falls back to
//! `clone`, whose flags it can. `perf_event_open` stays allowed: kem-runner reads the core
//! cycle counter with it. The programs are generated with `seccompiler`.

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

/// What the filters refuse, for records.
pub fn described() -> String {
    let names: Vec<&str> = REFUSED.iter().map(|(n, _)| *n).collect();
    format!(
        "seccomp: refuses {} (EPERM) and clone with a namespace flag; clone3 gets ENOSYS \
         (the C library falls back to clone)",
        names.join(", ")
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
    }
}
