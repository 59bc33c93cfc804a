//! Pure parsers of `/proc` and `/sys` text and of tool output: each takes the text and
//! returns the value, `None` when it is not there (unit-tested on sample text).

use std::collections::BTreeSet;

use procfs::FromRead;

/// `model name` of the first processor in `/proc/cpuinfo` text.
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    let info = procfs::CpuInfo::from_read(cpuinfo.as_bytes()).ok()?;
    info.model_name(0)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
}

/// Number of `processor` entries in `/proc/cpuinfo` text.
pub fn parse_processor_count(cpuinfo: &str) -> Option<usize> {
    let n = cpuinfo
        .lines()
        .filter(|l| l.split(':').next().map(str::trim) == Some("processor"))
        .count();
    (n > 0).then_some(n)
}

/// Feature flags of the first processor: `flags` (x86) or `Features` (Arm).
pub fn parse_cpu_flags(cpuinfo: &str) -> BTreeSet<String> {
    let Ok(info) = procfs::CpuInfo::from_read(cpuinfo.as_bytes()) else {
        return BTreeSet::new();
    };
    info.get_field(0, "flags")
        .or_else(|| info.get_field(0, "Features"))
        .map(|f| f.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

/// A kernel CPU list (`0-3,8,10-11`; empty or blank = no CPU). None when malformed.
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let text = text.trim();
    let mut cpus = Vec::new();
    if text.is_empty() {
        return Some(cpus);
    }
    for part in text.split(',') {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b || b - a > 1 << 16 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// A frequency in kHz (`cpuinfo_max_freq`) as MHz.
pub fn parse_khz_as_mhz(text: &str) -> Option<f64> {
    let khz: u64 = text.trim().parse().ok()?;
    (khz > 0).then(|| khz as f64 / 1000.0)
}

/// The single word of a sysfs/procfs file (`performance\n`); None when empty.
pub fn parse_word(text: &str) -> Option<String> {
    let t = text.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// A sysfs boolean `0`/`1`.
pub fn parse_flag(text: &str) -> Option<bool> {
    match text.trim() {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

pub(super) fn on_off(on: bool) -> String {
    if on { "on" } else { "off" }.to_string()
}

/// `MemTotal` of `/proc/meminfo` text, in MiB.
pub fn parse_mem_total_mib(meminfo: &str) -> Option<u64> {
    if let Ok(m) = procfs::Meminfo::from_read(meminfo.as_bytes()) {
        return Some(m.mem_total / (1024 * 1024));
    }
    // procfs wants the fields every kernel has; accept a lone MemTotal line too.
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => Some(value / 1024),
        None => Some(value / (1024 * 1024)),
        Some(_) => None,
    }
}

/// `PRETTY_NAME` of an os-release file, else `NAME VERSION`, else `NAME`.
pub fn parse_os_release(text: &str) -> Option<String> {
    let get = |key: &str| {
        text.lines()
            .filter_map(|l| l.trim().split_once('='))
            .find(|(k, _)| k.trim() == key)
            .map(|(_, v)| unquote(v.trim()))
            .filter(|v| !v.is_empty())
    };
    get("PRETTY_NAME").or_else(|| match (get("NAME"), get("VERSION")) {
        (Some(n), Some(v)) => Some(format!("{n} {v}")),
        (n, _) => n,
    })
}

fn unquote(v: &str) -> String {
    let inner = if v.len() >= 2
        && ((v.starts_with('"') && v.ends_with('"')) || (v.starts_with('\'') && v.ends_with('\'')))
    {
        &v[1..v.len() - 1]
    } else {
        v
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// 1-minute load average of `/proc/loadavg` text.
pub fn parse_loadavg(text: &str) -> Option<f64> {
    procfs::LoadAverage::from_read(text.as_bytes())
        .ok()
        .map(|l| f64::from(l.one))
}

/// `(busy, total)` ticks of `cpuN` in `/proc/stat` text (idle and iowait count as not busy).
pub fn parse_cpu_ticks(stat: &str, cpu: usize) -> Option<(u64, u64)> {
    let label = format!("cpu{cpu}");
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(label.as_str()))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|w| w.parse().ok())
        .collect::<Option<_>>()?;
    if ticks.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
    let total: u64 = ticks.iter().take(8).sum();
    let idle = ticks[3] + ticks.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// Busy fraction between two `(busy, total)` readings; None when no time passed.
pub fn busy_fraction(before: (u64, u64), after: (u64, u64)) -> Option<f64> {
    let total = after.1.checked_sub(before.1)?;
    let busy = after.0.checked_sub(before.0)?;
    (total > 0).then(|| (busy as f64 / total as f64).clamp(0.0, 1.0))
}

/// First non-empty line of a command's output (`gcc --version`).
pub fn first_line(output: &str) -> Option<String> {
    output
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{CPUINFO_ARM, CPUINFO_X86, MEMINFO};
    use super::*;

    #[test]
    fn cpu_model_and_count_from_cpuinfo() {
        assert_eq!(
            parse_cpu_model(CPUINFO_X86).as_deref(),
            Some("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz")
        );
        assert_eq!(parse_processor_count(CPUINFO_X86), Some(2));
        // Arm cpuinfo has no `model name`: unknown, not guessed.
        assert_eq!(parse_cpu_model(CPUINFO_ARM), None);
        assert_eq!(parse_cpu_model(""), None);
        assert_eq!(parse_processor_count("garbage"), None);
    }

    #[test]
    fn cpu_flags_from_x86_and_arm() {
        let x86 = parse_cpu_flags(CPUINFO_X86);
        assert!(x86.contains("avx2") && x86.contains("bmi2") && x86.contains("popcnt"));
        assert_eq!(x86.len(), 6);
        let arm = parse_cpu_flags(CPUINFO_ARM);
        assert!(arm.contains("asimd") && !arm.contains("avx2"));
        assert!(parse_cpu_flags("").is_empty());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(parse_cpu_list("\n"), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a-b"), None);
        assert_eq!(parse_cpu_list("0-99999999999"), None);
    }

    #[test]
    fn small_sysfs_values() {
        assert_eq!(parse_khz_as_mhz("4600000\n"), Some(4600.0));
        assert_eq!(parse_khz_as_mhz("0"), None);
        assert_eq!(parse_khz_as_mhz("fast"), None);
        assert_eq!(parse_word("performance\n").as_deref(), Some("performance"));
        assert_eq!(parse_word(" \n"), None);
        assert_eq!(parse_flag("1\n"), Some(true));
        assert_eq!(parse_flag("0"), Some(false));
        assert_eq!(parse_flag("maybe"), None);
    }

    #[test]
    fn mem_total() {
        assert_eq!(parse_mem_total_mib(MEMINFO), Some(15921));
        // Only the MemTotal line: procfs refuses it, the fallback still reads it.
        assert_eq!(parse_mem_total_mib("MemTotal: 2097152 kB\n"), Some(2048));
        assert_eq!(parse_mem_total_mib("MemFree: 1 kB\n"), None);
        assert_eq!(parse_mem_total_mib("MemTotal: lots kB\n"), None);
    }

    #[test]
    fn os_release() {
        let debian = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\n";
        assert_eq!(
            parse_os_release(debian).as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        let no_pretty = "NAME=Alpine\nVERSION='3.20 \\\"edge\\\"'\n# comment\n";
        assert_eq!(
            parse_os_release(no_pretty).as_deref(),
            Some("Alpine 3.20 \"edge\"")
        );
        assert_eq!(parse_os_release("NAME=\"Only\"\n").as_deref(), Some("Only"));
        assert_eq!(parse_os_release("PRETTY_NAME=\"\"\n"), None);
        assert_eq!(parse_os_release(""), None);
    }

    #[test]
    fn loadavg_and_busy() {
        assert_eq!(
            parse_loadavg("6.43 4.22 2.26 9/128 4574\n"),
            Some(6.429999828338623)
        );
        assert_eq!(parse_loadavg("nonsense"), None);
        let stat = "cpu  100 0 50 1000 10 0 0 0 0 0\ncpu0 50 0 25 500 5 0 0 0 0 0\ncpu1 10 2 8 600 20 0 0 0 0 0\n";
        // cpu1: total = 10+2+8+600+20 = 640, idle = 600+20 = 620, busy = 20.
        assert_eq!(parse_cpu_ticks(stat, 1), Some((20, 640)));
        assert_eq!(parse_cpu_ticks(stat, 2), None);
        assert_eq!(parse_cpu_ticks("cpu1 1 x 3 4\n", 1), None);
        assert_eq!(busy_fraction((20, 640), (70, 740)), Some(0.5));
        assert_eq!(busy_fraction((20, 640), (20, 640)), None);
        assert_eq!(busy_fraction((20, 640), (10, 600)), None);
    }

    #[test]
    fn first_line_skips_blanks() {
        assert_eq!(
            first_line("\ngcc (Debian 12.2.0-14) 12.2.0\nCopyright\n").as_deref(),
            Some("gcc (Debian 12.2.0-14) 12.2.0")
        );
        assert_eq!(first_line(""), None);
    }
}
