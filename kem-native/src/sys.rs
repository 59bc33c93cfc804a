//! Safe wrappers over the few OS calls the engine needs (process groups, CPU affinity,
//! resource limits of children, the runner's record channel).
//!
//! The engine crate is free of `unsafe`; what it needs from libc lives here.

use std::io;

/// Send `SIGKILL` to every process in process group `pgid`.
pub fn kill_process_group(pgid: u32) -> io::Result<()> {
    let pgid = libc::pid_t::try_from(pgid).map_err(io::Error::other)?;
    // SAFETY: kill(2) takes plain integers; a negative pid addresses the group.
    let rc = unsafe { libc::kill(-pgid, libc::SIGKILL) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A resource limit a child process gets before it executes (soft = hard = the value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `RLIMIT_AS`: bytes of address space.
    AddressSpace(u64),
    /// `RLIMIT_FSIZE`: bytes a file may grow to.
    FileSize(u64),
    /// `RLIMIT_NOFILE`: open file descriptors.
    OpenFiles(u64),
    /// `RLIMIT_NPROC`: processes of the user (the kernel does not enforce it for root).
    Processes(u64),
}

impl Limit {
    fn resource(self) -> (libc::__rlimit_resource_t, u64) {
        match self {
            Limit::AddressSpace(v) => (libc::RLIMIT_AS, v),
            Limit::FileSize(v) => (libc::RLIMIT_FSIZE, v),
            Limit::OpenFiles(v) => (libc::RLIMIT_NOFILE, v),
            Limit::Processes(v) => (libc::RLIMIT_NPROC, v),
        }
    }
}

/// Make `cmd`'s child apply `limits` to itself and receive `SIGKILL` when the thread that
/// spawned it dies (so an engine killed with SIGKILL leaves no child behind), just before
/// it executes the program.
pub fn limit_child(cmd: &mut std::process::Command, limits: &[Limit]) {
    setup_child(
        cmd,
        ChildSetup {
            limits: limits.to_vec(),
            ..ChildSetup::default()
        },
    );
}

/// What a child process does to itself between fork and exec ([`setup_child`]), in this
/// order: keep to its CPUs, join control groups, apply resource limits, keep file
/// descriptors open across exec, become another user, and ask for `SIGKILL` when its parent
/// thread dies.
#[derive(Debug, Default)]
pub struct ChildSetup {
    /// Resource limits (soft = hard).
    pub limits: Vec<Limit>,
    /// `cgroup.procs` files the child writes `0` to (joining those groups, its descendants
    /// with it). Writing needs the engine's privileges: done before the user changes.
    pub cgroups: Vec<std::path::PathBuf>,
    /// Descriptors (opened close-on-exec by the caller) that the program inherits under
    /// the same numbers (`bwrap --seccomp N`, `--ro-bind-fd N`); closed in the parent when
    /// the command is dropped.
    pub keep_fds: Vec<std::os::fd::OwnedFd>,
    /// The (uid, gid) the child runs as, with no supplementary groups (needs root).
    pub user: Option<(u32, u32)>,
    /// CPUs the child (and all it starts) runs on (`sched_setaffinity`); empty: unchanged.
    /// Best effort: a CPU this process may not use leaves the affinity as it was (the
    /// program's own pinning then says so).
    pub affinity: Vec<usize>,
}

/// Make `cmd`'s child apply `setup` to itself just before it executes the program.
pub fn setup_child(cmd: &mut std::process::Command, setup: ChildSetup) {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    let limits: Vec<(libc::__rlimit_resource_t, u64)> =
        setup.limits.iter().map(|l| l.resource()).collect();
    let cgroups: Vec<std::ffi::CString> = setup
        .cgroups
        .iter()
        .filter_map(|p| std::ffi::CString::new(p.as_os_str().as_bytes()).ok())
        .collect();
    let keep = setup.keep_fds;
    let user = setup.user;
    // SAFETY: cpu_set_t is a plain bit array; zeroed is its empty value.
    let mut cpus: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let mut pin = false;
    for &c in setup
        .affinity
        .iter()
        .filter(|&&c| c < libc::CPU_SETSIZE as usize)
    {
        // SAFETY: `c` is below CPU_SETSIZE, filtered above.
        unsafe { libc::CPU_SET(c, &mut cpus) };
        pin = true;
    }
    // SAFETY: the closure runs in the forked child before exec and only calls
    // async-signal-safe functions (sched_setaffinity, open, write, close, setrlimit, fcntl,
    // setgroups, setgid, setuid, prctl) on values prepared before the fork; it allocates
    // nothing.
    unsafe {
        cmd.pre_exec(move || {
            if pin {
                // Best effort (see `affinity`): the result is not checked.
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &cpus);
            }
            for path in &cgroups {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                let written = libc::write(fd, b"0".as_ptr().cast(), 1);
                libc::close(fd);
                if written != 1 {
                    return Err(io::Error::last_os_error());
                }
            }
            for &(resource, value) in &limits {
                let lim = libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                };
                if libc::setrlimit(resource, &lim) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            for fd in &keep {
                if libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            if let Some((uid, gid)) = user {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(io::Error::last_os_error());
                }
            }
            // After the user change, which clears it.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The effective user id of this process.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid(2) cannot fail and takes no arguments.
    unsafe { libc::geteuid() }
}

/// Bytes and inodes available to an unprivileged user on the file system holding `path`
/// (`statvfs`).
pub fn free_space(path: &std::path::Path) -> io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: statvfs(3) writes into the zeroed struct we pass; `c` is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.f_bavail as u64 * st.f_frsize as u64, st.f_favail as u64))
}

/// Take the process's stdout for the caller and point file descriptor 1 at stderr, so
/// whatever else writes to stdout (a KEM's `printf`) lands on stderr. The returned file
/// is the original stdout, close-on-exec.
pub fn take_stdout() -> io::Result<std::fs::File> {
    use std::os::fd::AsFd;
    let original = io::stdout().as_fd().try_clone_to_owned()?;
    // SAFETY: dup2(2) on two descriptors this process owns (0-2 are always open here or
    // the call fails with EBADF, which is reported).
    let rc = unsafe { libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(std::fs::File::from(original))
}

/// Restrict the calling thread to `cpus`.
pub fn set_thread_affinity(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is a plain bit array; zeroed is its empty value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::other(format!("cpu {cpu} is out of range")));
        }
        // SAFETY: `cpu` is below CPU_SETSIZE, checked above.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// This process's soft and hard limits on open files (`RLIMIT_NOFILE`).
pub fn open_files_limit() -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((lim.rlim_cur, lim.rlim_max))
}

/// Set this process's soft limit on open files, keeping the hard limit.
pub fn set_open_files_soft_limit(soft: u64) -> io::Result<()> {
    let (_, hard) = open_files_limit()?;
    let lim = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: setrlimit only reads the struct passed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The CPUs the calling thread may run on.
pub fn thread_affinity() -> io::Result<Vec<usize>> {
    // SAFETY: as above, zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Name of a signal number ("SIGSEGV"), or `signal N`.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGSEGV => "SIGSEGV (segmentation fault)",
        libc::SIGABRT => "SIGABRT (abort)",
        libc::SIGBUS => "SIGBUS (bus error)",
        libc::SIGFPE => "SIGFPE (arithmetic exception)",
        libc::SIGILL => "SIGILL (illegal instruction)",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGTRAP => "SIGTRAP",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinity_round_trips() {
        let before = thread_affinity().unwrap();
        assert!(!before.is_empty());
        set_thread_affinity(&before[..1]).unwrap();
        assert_eq!(thread_affinity().unwrap(), vec![before[0]]);
        set_thread_affinity(&before).unwrap();
        assert_eq!(thread_affinity().unwrap(), before);
    }

    #[test]
    fn reports_free_space() {
        let (bytes, _) = free_space(std::path::Path::new("/")).unwrap();
        assert!(bytes > 0);
        assert!(free_space(std::path::Path::new("/nonexistent/x")).is_err());
    }

    #[test]
    fn names_common_signals() {
        assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV (segmentation fault)");
        assert_eq!(signal_name(999), "signal 999");
    }
}
