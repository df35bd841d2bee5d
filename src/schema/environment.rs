//! Where and how a report was produced: [`collect`] fills the report's `environment`
//! (host, kernel, governor/turbo/SMT, hypervisor, tool version and git SHA, rank, time), and
//! [`StealClock`] measures the steal-time fraction over a run (a start/finish pair).
//!
//! Everything is best effort: a field the system does not expose stays `null`.

use std::path::Path;

use crate::schema::report::Environment;

/// The environment of this process now. `command_line` is recorded as given.
/// `compiler` is left `null`: the measured program's compiler is unknown in general; use
/// [`own_compiler`] when the measured code is the suite's own kernels.
pub fn collect(command_line: &[String]) -> Environment {
    collect_from(Path::new("/"), command_line, &|name| std::env::var(name).ok())
}

/// [`collect`] against another root (tests) and environment-variable source.
pub fn collect_from(root: &Path, command_line: &[String], var: &dyn Fn(&str) -> Option<String>) -> Environment {
    let read = |p: &str| {
        std::fs::read_to_string(root.join(p.trim_start_matches('/')))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let kernel = match (read("/proc/sys/kernel/ostype"), read("/proc/sys/kernel/osrelease")) {
        (Some(t), Some(r)) => Some(format!("{t} {r}")),
        (None, Some(r)) => Some(r),
        _ => None,
    };
    Environment {
        host: read("/proc/sys/kernel/hostname"),
        kernel,
        governor: read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        turbo: turbo(&read),
        smt: read("/sys/devices/system/cpu/smt/active").map(|s| s == "1"),
        hypervisor: hypervisor(&read),
        steal_fraction: None,
        measured_ghz: None,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        git_sha: option_env!("ROOFLINE_GIT_SHA").map(str::to_string),
        compiler: None,
        command_line: command_line.to_vec(),
        rank: rank(var),
        job: None,
        cpu_choice: None,
        timestamp: Some(utc_now()),
    }
}

/// The compiler of the suite's kernels (recorded by build.rs), with how they are built.
pub fn own_compiler() -> String {
    let rustc = option_env!("ROOFLINE_RUSTC_VERSION").unwrap_or("rustc (version unknown)");
    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    format!("{rustc}; {profile} profile; SIMD variants via #[target_feature] + std::arch intrinsics")
}

/// Turbo/boost enabled: intel_pstate's `no_turbo` (inverted) or cpufreq's `boost`.
fn turbo(read: &dyn Fn(&str) -> Option<String>) -> Option<bool> {
    if let Some(v) = read("/sys/devices/system/cpu/intel_pstate/no_turbo") {
        return Some(v == "0");
    }
    if let Some(v) = read("/sys/devices/system/cpu/cpufreq/boost") {
        return Some(v == "1");
    }
    None
}

/// The hypervisor: CPUID's hypervisor bit and leaf 0x4000_0000 vendor, else /sys/hypervisor.
fn hypervisor(read: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    #[cfg(target_arch = "x86_64")]
    {
        let cpuid = raw_cpuid::CpuId::new();
        if cpuid.get_feature_info().is_some_and(|f| f.has_hypervisor()) {
            let name = cpuid
                .get_hypervisor_info()
                .map(|h| match h.identify() {
                    raw_cpuid::Hypervisor::Unknown(b, c, d) => vendor_string(b, c, d),
                    known => format!("{known:?}"),
                })
                .unwrap_or_else(|| "unknown".to_string());
            return Some(name);
        }
    }
    read("/sys/hypervisor/type")
}

/// The 12-byte vendor signature of leaf 0x4000_0000 (EBX, ECX, EDX), printable part.
fn vendor_string(b: u32, c: u32, d: u32) -> String {
    let bytes: Vec<u8> = [b, c, d].iter().flat_map(|r| r.to_le_bytes()).collect();
    let s: String = bytes.iter().filter(|c| c.is_ascii_graphic()).map(|&c| c as char).collect();
    if s.is_empty() { "unknown".to_string() } else { s }
}

/// MPI/Slurm rank from the first of their variables that is set and numeric.
fn rank(var: &dyn Fn(&str) -> Option<String>) -> Option<u32> {
    ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"]
        .iter()
        .find_map(|name| var(name).and_then(|v| v.trim().parse().ok()))
}

/// Now, as RFC 3339 UTC (`2026-11-22T04:25:08Z`).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

/// Seconds since the epoch as RFC 3339 UTC (Howard Hinnant's civil-from-days).
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Aggregate CPU time counters of /proc/stat's `cpu` line (USER_HZ ticks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    pub total: u64,
    pub steal: u64,
}

impl CpuTimes {
    /// Parse the first (`cpu `) line of /proc/stat text.
    pub fn parse(stat: &str) -> Option<CpuTimes> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line.split_whitespace().skip(1).map(|x| x.parse().ok()).collect::<Option<_>>()?;
        if v.len() < 8 {
            return None;
        }
        // user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is
        // already inside user/nice, so the total stops at steal.
        Some(CpuTimes {
            total: v[..8].iter().sum(),
            steal: v[7],
        })
    }

    pub fn read() -> Option<CpuTimes> {
        CpuTimes::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }
}

/// Steal time over a run: `let s = StealClock::start(); …; env.steal_fraction = s.finish();`
#[derive(Debug, Clone, Copy)]
pub struct StealClock(Option<CpuTimes>);

impl StealClock {
    pub fn start() -> StealClock {
        StealClock(CpuTimes::read())
    }

    /// Fraction of all CPU time since `start` that the hypervisor stole; `None` when
    /// /proc/stat is unreadable or too little time passed to tell (no tick elapsed).
    pub fn finish(&self) -> Option<f64> {
        steal_fraction(self.0?, CpuTimes::read()?)
    }
}

/// Steal fraction between two samples.
pub fn steal_fraction(a: CpuTimes, b: CpuTimes) -> Option<f64> {
    let dt = b.total.checked_sub(a.total)?;
    let ds = b.steal.checked_sub(a.steal)?;
    if dt == 0 { None } else { Some(ds as f64 / dt as f64) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_steal_fraction() {
        let a = CpuTimes::parse("cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n").unwrap();
        assert_eq!(a, CpuTimes { total: 1000, steal: 35 });
        let b = CpuTimes::parse("cpu  150 0 60 1000 10 0 5 75 20 0\n").unwrap();
        assert_eq!(steal_fraction(a, b), Some(40.0 / 300.0));
        assert_eq!(steal_fraction(a, a), None);
        assert!(CpuTimes::parse("cpu  1 2 3\n").is_none());
        assert!(CpuTimes::parse("intr 5\n").is_none());
    }

    #[test]
    fn fields_from_a_fake_root() {
        let dir = tempfile::tempdir().unwrap();
        let put = |p: &str, s: &str| {
            let f = dir.path().join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, s).unwrap();
        };
        put("proc/sys/kernel/hostname", "node17\n");
        put("proc/sys/kernel/ostype", "Linux\n");
        put("proc/sys/kernel/osrelease", "6.1.0-test\n");
        put("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "performance\n");
        put("sys/devices/system/cpu/cpufreq/boost", "0\n");
        put("sys/devices/system/cpu/smt/active", "1\n");
        let vars = |name: &str| match name {
            "SLURM_PROCID" => Some("12".to_string()),
            "PMI_RANK" => Some("x".to_string()),
            _ => None,
        };
        let env = collect_from(dir.path(), &["roofline".into(), "run".into()], &vars);
        assert_eq!(env.host.as_deref(), Some("node17"));
        assert_eq!(env.kernel.as_deref(), Some("Linux 6.1.0-test"));
        assert_eq!(env.governor.as_deref(), Some("performance"));
        assert_eq!(env.turbo, Some(false));
        assert_eq!(env.smt, Some(true));
        assert_eq!(env.rank, Some(12));
        assert_eq!(env.command_line, vec!["roofline", "run"]);
        assert_eq!(env.tool_version, env!("CARGO_PKG_VERSION"));
        let none = collect_from(&dir.path().join("missing"), &[], &|_| None);
        assert_eq!(none.host, None);
        assert_eq!(none.governor, None);
        assert_eq!(none.rank, None);
    }

    #[test]
    fn rank_variables_in_order() {
        let v = |name: &str| match name {
            "OMPI_COMM_WORLD_RANK" => Some("3".to_string()),
            "SLURM_PROCID" => Some("9".to_string()),
            _ => None,
        };
        assert_eq!(rank(&v), Some(3));
        assert_eq!(rank(&|_| None), None);
    }

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(vendor_string(0x4b4d564b, 0x564b4d56, 0x4d), "KVMKVMKVM");
    }
}
