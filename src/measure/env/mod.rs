//! The machine a campaign runs on (report section 2), and the conditions that spoil timing.
//!
//! [`capture`] reads the processor model, logical CPUs, max clock, governor, turbo/boost,
//! SMT, isolated cores, memory, OS, kernel, compiler and build-tool versions and the load,
//! and turns conditions that make cycle counts unreliable (governor not `performance`,
//! turbo on, SMT on, bench core not isolated, load, a bench core that does not exist) into
//! [`EnvWarning`]s that each carry the fix. What cannot be read stays `None` ("unknown"),
//! never a guess.
//!
//! Split as everywhere in ngcc-pipe: the `parse_*` functions and [`warnings`] are pure and
//! unit-tested on sample text; the reading side is thin and takes a filesystem root, so it
//! is also tested on a fake `/proc` + `/sys` tree.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sha2::{Digest, Sha256};

mod parse;

use crate::model::System;
use crate::record::{EnvWarning, Environment};

/// 1-minute load average from which the load warning is raised.
pub const LOAD_WARN: f64 = 0.5;
/// Busy fraction of the bench core (sampled over [`BUSY_SAMPLE`]) from which it is warned about.
pub const BUSY_WARN: f64 = 0.10;
/// How long the bench core's activity is sampled in [`capture`].
pub const BUSY_SAMPLE: Duration = Duration::from_millis(200);

/// Capture the environment of this machine for `system` (its bench core and compiler).
pub fn capture(system: &System) -> Environment {
    capture_at(Path::new("/"), system, BUSY_SAMPLE, &first_line_of_command)
}

/// SHA-256 (hex) of what makes cycle counts comparable between runs: CPU model, governor,
/// turbo, SMT, kernel and compiler version. Stable across runs on one machine (no load,
/// no time); unknown values enter as `unknown`.
pub fn fingerprint(env: &Environment) -> String {
    let parts = [
        ("cpu", env.cpu_model.as_deref()),
        ("governor", env.governor.as_deref()),
        ("turbo", env.turbo.as_deref()),
        ("smt", env.smt.as_deref()),
        ("kernel", env.kernel.as_deref()),
        ("cc", env.cc_version.as_deref()),
    ];
    let mut hasher = Sha256::new();
    hasher.update(b"ngcc-pipe environment v1\n");
    for (name, value) in parts {
        hasher.update(name.as_bytes());
        hasher.update(b"=");
        hasher.update(value.unwrap_or("unknown").as_bytes());
        hasher.update(b"\n");
    }
    hex::encode(hasher.finalize())
}

/// CPU feature flags of cpu 0 (`flags` on x86, `Features` on Arm) from `/proc/cpuinfo`;
/// empty when unreadable.
pub fn cpu_flags() -> BTreeSet<String> {
    read_to_string(Path::new("/proc/cpuinfo"))
        .map(|text| parse_cpu_flags(&text))
        .unwrap_or_default()
}

/// Where the turbo/boost reading came from: decides which fix to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurboSource {
    /// `/sys/devices/system/cpu/intel_pstate/no_turbo` (1 = turbo off).
    IntelPstate,
    /// `/sys/devices/system/cpu/cpufreq/boost` (1 = boost on).
    CpufreqBoost,
    /// `/sys/devices/system/cpu/cpufreq/policyN/boost` (1 = boost on).
    PolicyBoost(usize),
}

/// Facts that only the warnings need (not stored in the record).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extra {
    pub turbo_source: Option<TurboSource>,
    /// `/sys/devices/system/cpu/smt/active` (`Some(false)`: no sibling thread online).
    pub smt_active: Option<bool>,
    /// Fraction of the bench core's time spent busy during the sample, 0..=1.
    pub bench_busy: Option<f64>,
}

/// The environment read from a filesystem rooted at `root` (`/` on a live machine).
/// `run` runs a command and returns the first line of its output (None when it fails);
/// `sample` is how long the bench core's activity is observed (zero: not sampled).
pub fn capture_at(
    root: &Path,
    system: &System,
    sample: Duration,
    run: &dyn Fn(&str, &[&str]) -> Option<String>,
) -> Environment {
    let cpu = system.bench_cpu;
    let sys_cpu = root.join("sys/devices/system/cpu");
    let read = |p: PathBuf| read_to_string(&p);

    let cpuinfo = read(root.join("proc/cpuinfo"));
    let cpu_model = cpuinfo.as_deref().and_then(parse_cpu_model);
    let logical_cpus = read(sys_cpu.join("online"))
        .and_then(|t| parse_cpu_list(&t))
        .map(|l| l.len())
        .filter(|&n| n > 0)
        .or_else(|| cpuinfo.as_deref().and_then(parse_processor_count));

    let cpufreq = sys_cpu.join(format!("cpu{cpu}/cpufreq"));
    let max_mhz = read(cpufreq.join("cpuinfo_max_freq")).and_then(|t| parse_khz_as_mhz(&t));
    let governor = read(cpufreq.join("scaling_governor")).and_then(|t| parse_word(&t));

    let (turbo, turbo_source) = if let Some(t) = read(sys_cpu.join("intel_pstate/no_turbo")) {
        (
            parse_flag(&t).map(|no| on_off(!no)),
            Some(TurboSource::IntelPstate),
        )
    } else if let Some(t) = read(sys_cpu.join("cpufreq/boost")) {
        (parse_flag(&t).map(on_off), Some(TurboSource::CpufreqBoost))
    } else if let Some(t) = read(sys_cpu.join(format!("cpufreq/policy{cpu}/boost"))) {
        (
            parse_flag(&t).map(on_off),
            Some(TurboSource::PolicyBoost(cpu)),
        )
    } else {
        (None, None)
    };
    let turbo_source = turbo.as_ref().and(turbo_source);

    let smt = read(sys_cpu.join("smt/control")).and_then(|t| parse_word(&t));
    let smt_active = read(sys_cpu.join("smt/active")).and_then(|t| parse_flag(&t));
    let isolated_cpus = read(sys_cpu.join("isolated")).map(|t| t.trim().to_string());

    let mem_total_mib = read(root.join("proc/meminfo")).and_then(|t| parse_mem_total_mib(&t));
    let os = read(root.join("etc/os-release"))
        .or_else(|| read(root.join("usr/lib/os-release")))
        .and_then(|t| parse_os_release(&t));
    let kernel = read(root.join("proc/sys/kernel/osrelease")).and_then(|t| parse_word(&t));
    let cc_version = run(&system.cc, &["--version"]);
    let build_tool = run("make", &["--version"]);
    let loadavg = read(root.join("proc/loadavg")).and_then(|t| parse_loadavg(&t));

    let stat_path = root.join("proc/stat");
    let bench_busy = if sample.is_zero() {
        None
    } else {
        let before = read(stat_path.clone()).and_then(|t| parse_cpu_ticks(&t, cpu));
        std::thread::sleep(sample);
        let after = read(stat_path).and_then(|t| parse_cpu_ticks(&t, cpu));
        before.zip(after).and_then(|(b, a)| busy_fraction(b, a))
    };

    let mut env = Environment {
        cpu_model,
        bench_cpu: cpu,
        logical_cpus,
        max_mhz,
        governor,
        turbo,
        smt,
        isolated_cpus,
        mem_total_mib,
        os,
        kernel,
        cc_version,
        build_tool,
        loadavg,
        warnings: Vec::new(),
        sandbox: None,
    };
    let extra = Extra {
        turbo_source,
        smt_active,
        bench_busy,
    };
    env.warnings = warnings(&env, &extra);
    env
}

/// The conditions that spoil timing on `env`, each with its fix.
pub fn warnings(env: &Environment, extra: &Extra) -> Vec<EnvWarning> {
    let cpu = env.bench_cpu;
    let mut out = Vec::new();
    let mut warn = |what: String, fix: String| out.push(EnvWarning { what, fix });

    if let Some(n) = env.logical_cpus {
        if cpu >= n {
            warn(
                format!("bench core {cpu} does not exist: this machine has {n} logical CPUs (0..={})", n.saturating_sub(1)),
                format!("set `bench-cpu` in the pipeline's `system` block to a core in 0..={}, ideally an isolated one", n.saturating_sub(1)),
            );
        }
    }

    match env.governor.as_deref() {
        Some("performance") => {}
        Some(g) => warn(
            format!("CPU frequency governor of core {cpu} is `{g}`, not `performance`: the clock changes with load"),
            format!("sudo cpupower -c {cpu} frequency-set -g performance"),
        ),
        None => warn(
            format!("CPU frequency governor of core {cpu} is unknown (no /sys/devices/system/cpu/cpu{cpu}/cpufreq; a VM or a kernel without cpufreq)"),
            "measure on a machine where cpufreq is visible and run `sudo cpupower frequency-set -g performance`; in a VM, ask for a fixed host clock and compare cycle counts only".to_string(),
        ),
    }

    if env.turbo.as_deref() == Some("on") {
        let fix = match extra.turbo_source {
            Some(TurboSource::IntelPstate) => {
                "echo 1 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo".to_string()
            }
            Some(TurboSource::CpufreqBoost) => {
                "echo 0 | sudo tee /sys/devices/system/cpu/cpufreq/boost".to_string()
            }
            Some(TurboSource::PolicyBoost(n)) => {
                format!("echo 0 | sudo tee /sys/devices/system/cpu/cpufreq/policy{n}/boost")
            }
            None => "disable turbo/boost in the firmware settings".to_string(),
        };
        warn(
            "turbo boost is on: the clock depends on temperature and on the other cores' load"
                .to_string(),
            fix,
        );
    }

    if env.smt.as_deref() == Some("on") && extra.smt_active != Some(false) {
        warn(
            format!(
                "SMT (hyper-threading) is on: a sibling thread shares core {cpu}'s execution units"
            ),
            "echo off | sudo tee /sys/devices/system/cpu/smt/control (or boot with `nosmt`)"
                .to_string(),
        );
    }

    let isolation_fix = format!(
        "boot with the kernel parameters `isolcpus={cpu} nohz_full={cpu} rcu_nocbs={cpu}` so that only pinned work runs on core {cpu}"
    );
    match env.isolated_cpus.as_deref().map(parse_cpu_list) {
        Some(Some(list)) if list.contains(&cpu) => {}
        Some(Some(list)) => {
            let isolated = if list.is_empty() {
                "none".to_string()
            } else {
                env.isolated_cpus.clone().unwrap_or_default()
            };
            warn(
                format!("bench core {cpu} is not isolated (isolated cores: {isolated}): the scheduler may run other work on it"),
                isolation_fix,
            );
        }
        _ => warn(
            format!("whether bench core {cpu} is isolated is unknown (/sys/devices/system/cpu/isolated unreadable)"),
            isolation_fix,
        ),
    }

    if let Some(load) = env.loadavg {
        if load >= LOAD_WARN {
            warn(
                format!("the machine is loaded: 1-minute load average {load:.2} at capture time"),
                "stop other work on the machine (see `top`) before measuring, or isolate the bench core".to_string(),
            );
        }
    }
    if let Some(busy) = extra.bench_busy {
        if busy >= BUSY_WARN {
            warn(
                format!("bench core {cpu} was {:.0}% busy while sampled", busy * 100.0),
                format!("find what runs on core {cpu} (`top`, press 1) and stop it, or isolate the core"),
            );
        }
    }
    out
}

use parse::on_off;
pub use parse::{
    busy_fraction, first_line, parse_cpu_flags, parse_cpu_list, parse_cpu_model, parse_cpu_ticks,
    parse_flag, parse_khz_as_mhz, parse_loadavg, parse_mem_total_mib, parse_os_release,
    parse_processor_count, parse_word,
};

// ---------------------------------------------------------------------------------------
// Thin readers.

fn read_to_string(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Run `program args` and return the first line of stdout (or stderr, where some tools print
/// their version); None when it cannot run or fails.
fn first_line_of_command(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    first_line(&String::from_utf8_lossy(&out.stdout))
        .or_else(|| first_line(&String::from_utf8_lossy(&out.stderr)))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) const CPUINFO_X86: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz\nflags\t\t: fpu sse2 avx2 bmi2 popcnt aes\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz\nflags\t\t: fpu sse2 avx2 bmi2 popcnt aes\n\n";
    pub(super) const CPUINFO_ARM: &str = "processor\t: 0\nBogoMIPS\t: 48.00\nFeatures\t: fp asimd evtstrm aes sha2 crc32\nCPU implementer\t: 0x41\n\n";
    pub(super) const MEMINFO: &str = "MemTotal:       16303652 kB\nMemFree:         1234567 kB\nMemAvailable:    9876543 kB\nBuffers:          123456 kB\nCached:          2345678 kB\nSwapCached:            0 kB\nActive:          3456789 kB\nInactive:        4567890 kB\nSwapTotal:             0 kB\nSwapFree:              0 kB\nDirty:               100 kB\nWriteback:             0 kB\nAnonPages:       1000000 kB\nMapped:           200000 kB\nShmem:             30000 kB\nSlab:             400000 kB\nSReclaimable:     300000 kB\nSUnreclaim:       100000 kB\nKernelStack:       20000 kB\nPageTables:        30000 kB\nNFS_Unstable:          0 kB\nBounce:                0 kB\nWritebackTmp:          0 kB\nCommitLimit:     8000000 kB\nCommitted_AS:    9000000 kB\nVmallocTotal:   34359738367 kB\nVmallocUsed:       50000 kB\nVmallocChunk:          0 kB\n";

    fn system(bench_cpu: usize) -> System {
        System {
            name: "t".into(),
            arch: "x86-64".into(),
            bench_cpu,
            cc: "gcc".into(),
            compilers: vec![],
            isolation: crate::model::Isolation::Core,
            sandbox: crate::model::SandboxPolicy::Preferred,
            role: Default::default(),
            target: Default::default(),
            executor: Default::default(),
        }
    }

    fn quiet_env(bench_cpu: usize) -> Environment {
        Environment {
            bench_cpu,
            logical_cpus: Some(4),
            governor: Some("performance".into()),
            turbo: Some("off".into()),
            smt: Some("off".into()),
            isolated_cpus: Some("1".into()),
            loadavg: Some(0.02),
            ..Environment::default()
        }
    }

    #[test]
    fn a_quiet_machine_has_no_warnings() {
        assert_eq!(warnings(&quiet_env(1), &Extra::default()), vec![]);
    }

    #[test]
    fn each_spoiling_condition_warns_with_its_fix() {
        let mut env = quiet_env(1);
        env.governor = Some("powersave".into());
        env.turbo = Some("on".into());
        env.smt = Some("on".into());
        env.isolated_cpus = Some(String::new());
        env.loadavg = Some(3.5);
        let extra = Extra {
            turbo_source: Some(TurboSource::IntelPstate),
            smt_active: Some(true),
            bench_busy: Some(0.4),
        };
        let w = warnings(&env, &extra);
        let whats: Vec<&str> = w.iter().map(|w| w.what.as_str()).collect();
        assert_eq!(w.len(), 6, "{whats:#?}");
        assert!(w[0].what.contains("`powersave`"));
        assert_eq!(w[0].fix, "sudo cpupower -c 1 frequency-set -g performance");
        assert!(w[1].what.starts_with("turbo boost is on"));
        assert_eq!(
            w[1].fix,
            "echo 1 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo"
        );
        assert!(w[2].what.starts_with("SMT"));
        assert!(w[3]
            .what
            .contains("bench core 1 is not isolated (isolated cores: none)"));
        assert!(w[3].fix.contains("isolcpus=1"));
        assert!(w[4].what.contains("load average 3.50"));
        assert!(w[5].what.contains("40% busy"));
    }

    #[test]
    fn unknowns_and_impossible_bench_core() {
        let env = Environment {
            bench_cpu: 2,
            logical_cpus: Some(2),
            ..Environment::default()
        };
        let w = warnings(&env, &Extra::default());
        assert_eq!(w.len(), 3, "{w:#?}");
        assert!(w[0].what.contains("bench core 2 does not exist"));
        assert!(w[0].fix.contains("0..=1"));
        assert!(w[1].what.contains("governor of core 2 is unknown"));
        assert!(w[2].what.contains("isolated is unknown"));
    }

    #[test]
    fn boost_source_picks_the_fix_and_inactive_smt_is_fine() {
        let mut env = quiet_env(1);
        env.turbo = Some("on".into());
        env.smt = Some("on".into());
        let extra = Extra {
            turbo_source: Some(TurboSource::PolicyBoost(1)),
            smt_active: Some(false),
            bench_busy: Some(0.01),
        };
        let w = warnings(&env, &extra);
        assert_eq!(w.len(), 1, "{w:#?}");
        assert_eq!(
            w[0].fix,
            "echo 0 | sudo tee /sys/devices/system/cpu/cpufreq/policy1/boost"
        );
    }

    #[test]
    fn fingerprint_ignores_load_and_tracks_the_machine() {
        let a = quiet_env(1);
        let mut b = a.clone();
        b.loadavg = Some(9.0);
        b.mem_total_mib = Some(1);
        b.warnings.push(EnvWarning {
            what: "x".into(),
            fix: "y".into(),
        });
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_eq!(fingerprint(&a).len(), 64);
        let mut c = a.clone();
        c.governor = Some("powersave".into());
        assert_ne!(fingerprint(&a), fingerprint(&c));
        let mut d = a.clone();
        d.cc_version = Some("gcc 13".into());
        assert_ne!(fingerprint(&a), fingerprint(&d));
    }

    /// A fake `/` with the files a real machine has.
    fn fake_root(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    fn fake_run(program: &str, _args: &[&str]) -> Option<String> {
        match program {
            "gcc" => Some("gcc (Debian 12.2.0-14+deb12u1) 12.2.0".into()),
            _ => None,
        }
    }

    #[test]
    fn capture_reads_a_full_tree() {
        let root = fake_root(&[
            ("proc/cpuinfo", CPUINFO_X86),
            ("proc/meminfo", MEMINFO),
            ("proc/loadavg", "0.10 0.20 0.30 1/100 42\n"),
            ("proc/sys/kernel/osrelease", "6.1.0-18-amd64\n"),
            (
                "etc/os-release",
                "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
            ),
            ("sys/devices/system/cpu/online", "0-11\n"),
            ("sys/devices/system/cpu/isolated", "1\n"),
            ("sys/devices/system/cpu/smt/control", "on\n"),
            ("sys/devices/system/cpu/smt/active", "1\n"),
            ("sys/devices/system/cpu/intel_pstate/no_turbo", "0\n"),
            (
                "sys/devices/system/cpu/cpu1/cpufreq/cpuinfo_max_freq",
                "4600000\n",
            ),
            (
                "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
                "performance\n",
            ),
        ]);
        let env = capture_at(root.path(), &system(1), Duration::ZERO, &fake_run);
        assert_eq!(
            env.cpu_model.as_deref(),
            Some("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz")
        );
        assert_eq!(env.logical_cpus, Some(12));
        assert_eq!(env.max_mhz, Some(4600.0));
        assert_eq!(env.governor.as_deref(), Some("performance"));
        assert_eq!(env.turbo.as_deref(), Some("on"));
        assert_eq!(env.smt.as_deref(), Some("on"));
        assert_eq!(env.isolated_cpus.as_deref(), Some("1"));
        assert_eq!(env.mem_total_mib, Some(15921));
        assert_eq!(env.os.as_deref(), Some("Debian GNU/Linux 12 (bookworm)"));
        assert_eq!(env.kernel.as_deref(), Some("6.1.0-18-amd64"));
        assert_eq!(
            env.cc_version.as_deref(),
            Some("gcc (Debian 12.2.0-14+deb12u1) 12.2.0")
        );
        assert_eq!(env.build_tool, None);
        assert_eq!(env.loadavg, Some(0.10000000149011612));
        let whats: Vec<&str> = env.warnings.iter().map(|w| w.what.as_str()).collect();
        assert_eq!(whats.len(), 2, "{whats:#?}");
        assert!(whats[0].starts_with("turbo boost is on"));
        assert!(whats[1].starts_with("SMT"));
    }

    #[test]
    fn capture_of_an_empty_tree_is_all_unknown() {
        let root = fake_root(&[]);
        let env = capture_at(root.path(), &system(0), Duration::ZERO, &|_, _| None);
        assert_eq!(
            env,
            Environment {
                bench_cpu: 0,
                warnings: env.warnings.clone(),
                ..Environment::default()
            }
        );
        // governor unknown + isolation unknown; nothing invented.
        assert_eq!(env.warnings.len(), 2, "{:#?}", env.warnings);
    }

    #[test]
    fn capture_on_this_machine_does_not_panic() {
        let env = capture(&system(0));
        // `cargo test measure::env -- --nocapture` shows what this machine looks like.
        eprintln!("{}", serde_json::to_string_pretty(&env).unwrap_or_default());
        assert_eq!(env.bench_cpu, 0);
        if std::path::Path::new("/proc/cpuinfo").exists() {
            assert!(env.logical_cpus.unwrap_or(0) >= 1);
            assert!(!cpu_flags().is_empty() || env.cpu_model.is_none());
        }
    }
}
