//! What the kernel lets this process count: `perf_event_paranoid`, the CAP_PERFMON and
//! CAP_SYS_ADMIN capabilities, and the cause and hint of an open the kernel refused.

use std::io;

use super::{CounterSpec, Scope};
use crate::error::{Error, Result};

const PARANOID: &str = "/proc/sys/kernel/perf_event_paranoid";

/// `/proc/sys/kernel/perf_event_paranoid`, when readable.
pub fn paranoid() -> Option<i32> {
    std::fs::read_to_string(PARANOID).ok()?.trim().parse().ok()
}

/// Refuse early when the paranoid level forbids what is asked, for this process (its
/// CAP_PERFMON / CAP_SYS_ADMIN included).
pub fn check_paranoid(level: Option<i32>, need_system_wide: bool) -> Result<()> {
    paranoid_decision(level, has_cap_perfmon(), need_system_wide)
}

/// The decision behind [`check_paranoid`]: at level ≥ 3 (Debian/Ubuntu's patch) the kernel
/// refuses every perf event to processes without CAP_PERFMON (or CAP_SYS_ADMIN, e.g. root);
/// at ≥ 1 it refuses system-wide (uncore) events to them. A capable process passes both.
pub fn paranoid_decision(level: Option<i32>, has_cap: bool, need_system_wide: bool) -> Result<()> {
    let Some(level) = level else { return Ok(()) };
    if has_cap {
        return Ok(());
    }
    if level >= 3 {
        return Err(Error::unavailable(
            format!("perf_event_paranoid is {level}: the kernel refuses all perf events to processes without CAP_PERFMON"),
            "run `sudo sysctl kernel.perf_event_paranoid=2` (or 1), or grant CAP_PERFMON to the roofline binary (`sudo setcap cap_perfmon+ep $(which roofline)`)",
        ));
    }
    if need_system_wide && level >= 1 {
        return Err(Error::unavailable(
            format!("perf_event_paranoid is {level}: system-wide uncore events (memory traffic) need level 0 or lower"),
            "run `sudo sysctl kernel.perf_event_paranoid=0`, grant CAP_PERFMON (`sudo setcap cap_perfmon+ep $(which roofline)`), or pass `--no-uncore`",
        ));
    }
    Ok(())
}

/// Whether this user may count kernel-mode events of its own tasks.
pub fn kernel_counting_allowed() -> bool {
    paranoid().is_some_and(|l| l <= 1) || has_cap_perfmon()
}

/// Whether the effective capability set holds CAP_PERFMON (38) or CAP_SYS_ADMIN (21).
pub fn has_cap_perfmon() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 38 | 1 << 21) != 0)
}

/// Whether the kernel accepts this event for the calling thread (opened and closed at once).
pub fn can_open(spec: &CounterSpec) -> bool {
    spec.builder().observe_self().any_cpu().build().is_ok()
}

/// Map an open/enable error to its cause and hint.
pub fn open_error(spec: &CounterSpec, e: &io::Error) -> Error {
    let level = paranoid();
    let lvl = level.map(|l| l.to_string()).unwrap_or_else(|| "unknown".into());
    use nix::errno::Errno;
    match e.raw_os_error().map(Errno::from_raw) {
        Some(Errno::EACCES) | Some(Errno::EPERM) => Error::unavailable(
            format!(
                "perf_event_open refused {} ({e}); perf_event_paranoid is {lvl}{}",
                spec.name,
                if matches!(spec.scope, Scope::Uncore { .. }) {
                    " and system-wide uncore events need 0 or CAP_PERFMON"
                } else {
                    ""
                }
            ),
            "lower it with `sudo sysctl kernel.perf_event_paranoid=1` (0 for uncore), or grant CAP_PERFMON (`sudo setcap cap_perfmon+ep $(which roofline)`)",
        ),
        Some(errno @ (Errno::ENOENT | Errno::EINVAL | Errno::EOPNOTSUPP)) => Error::unavailable(
            format!(
                "the kernel rejected event {} (pmu {}, type {}, config {:#x}, config1 {:#x}): {errno:?}, {e}",
                spec.name, spec.pmu, spec.type_, spec.config, spec.config1
            ),
            "this CPU or kernel does not support it: check `--platform` matches the CPU, or mark the event optional in the platform file",
        ),
        Some(Errno::EMFILE) => Error::unavailable(
            format!("too many open files while opening {} ({e})", spec.name),
            "raise the limit with `ulimit -n 4096`",
        ),
        _ => Error::unavailable(
            format!("perf_event_open failed for {}: {e}", spec.name),
            "check `perf stat -e` with the same event on this machine",
        ),
    }
}
