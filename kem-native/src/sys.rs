//! Safe wrappers over the few OS calls the engine needs (process groups, CPU affinity).
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
    fn names_common_signals() {
        assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV (segmentation fault)");
        assert_eq!(signal_name(999), "signal 999");
    }
}
