//! What `auto` means, decided in one place for every caller: `roofline measure`, `gate`,
//! `cargo roofline`, `run` and `profile`, the region API's `Session` and the C marker API.
//!
//! The answer depends on what is measured ([`Target`]) and on this machine: whether a core PMU
//! is exposed (`/sys/bus/event_source/devices/cpu/type`), whether `perf_event_paranoid`
//! allows counting, whether a tracer is attached to this process, whether the process is one
//! of `roofline measure`'s native runs. The simulated PMU is a test instrument: never chosen.

use std::path::Path;

use crate::counters::{BackendKind, perf, region_times};
use crate::error::{Error, Result};

/// What is to be measured; `auto` resolves differently for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A command from outside (`roofline measure -- CMD`, `gate -- CMD`): perf where the
    /// platform's events can be counted, else trace. `software_only`: only software events
    /// are asked for, which need no hardware PMU.
    Command {
        /// Only software events are asked for.
        software_only: bool,
    },
    /// A suite kernel run in this process (`roofline run`, `profile`): perf where a core PMU
    /// exists, else the kernel's own formulas (tracing a kernel is asked for, never assumed).
    Kernel,
    /// Regions of this process marked with the region API: perf where a core PMU exists; else
    /// trace when a tracer is attached (it counts at the markers); else time only when the
    /// process is a native run of `roofline measure`; else an error naming the ways out.
    Region,
}

/// The backend `auto` resolves to for `target`, and why in a few words (the command path
/// says it on stderr). Any backend other than `Auto` is returned as asked.
pub fn choose(asked: BackendKind, target: Target, pmus: &Path) -> Result<(BackendKind, String)> {
    if asked != BackendKind::Auto {
        return Ok((asked, "asked for".into()));
    }
    let first_line = |e: Error| e.to_string().lines().next().unwrap_or_default().to_string();
    match target {
        Target::Command { software_only: true } => Ok((BackendKind::Perf, "software events need no hardware PMU".into())),
        Target::Command { software_only: false } => {
            let paranoid = perf::paranoid();
            match perf::core_pmu(pmus).and_then(|pmu| perf::check_paranoid(paranoid, false).map(|_| pmu)) {
                Ok(pmu) => {
                    let lvl = paranoid.map(|l| l.to_string()).unwrap_or_else(|| "unknown".into());
                    Ok((BackendKind::Perf, format!("core PMU `{pmu}` present, perf_event_paranoid {lvl}")))
                }
                Err(e) => Ok((BackendKind::Trace, first_line(e))),
            }
        }
        Target::Kernel => Ok(match perf::core_pmu(pmus) {
            Ok(pmu) => (BackendKind::Perf, format!("core PMU `{pmu}` present")),
            Err(e) => (BackendKind::Analytic, first_line(e)),
        }),
        Target::Region => match perf::core_pmu(pmus) {
            Ok(pmu) => Ok((BackendKind::Perf, format!("core PMU `{pmu}` present"))),
            Err(_) if traced() => Ok((BackendKind::Trace, "a tracer is attached: it counts at the markers".into())),
            // A native run of `roofline measure`: time only, written back at drop.
            Err(_) if region_times::under_measure() => Ok((BackendKind::Analytic, "a native run of `roofline measure`: time only".into())),
            // The perf error explains the missing PMU and names the way out.
            Err(e) => Err(Error::unavailable(
                first_line(e),
                "run the program under `roofline measure --backend trace -- …` (the markers are traced), or use Backend::Analytic for time only",
            )),
        },
    }
}

/// Whether a tracer (the trace backend) is attached to this process.
pub fn traced() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("TracerPid:").map(|v| v.trim().to_string())))
        .is_some_and(|pid| pid != "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sysfs PMU directory with a core PMU, or without one.
    fn pmus(core: bool) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        if core {
            std::fs::create_dir(dir.path().join("cpu")).unwrap();
            std::fs::write(dir.path().join("cpu/type"), "4\n").unwrap();
        }
        dir
    }

    #[test]
    fn a_backend_asked_for_is_kept_for_every_target() {
        let dir = pmus(false);
        for asked in [BackendKind::Perf, BackendKind::Trace, BackendKind::Analytic, BackendKind::Simulated] {
            for target in [Target::Command { software_only: false }, Target::Kernel, Target::Region] {
                assert_eq!(choose(asked, target, dir.path()).unwrap().0, asked);
            }
        }
    }

    #[test]
    fn without_a_core_pmu_auto_is_trace_for_commands_and_analytic_for_kernels() {
        let dir = pmus(false);
        let (b, why) = choose(BackendKind::Auto, Target::Command { software_only: false }, dir.path()).unwrap();
        assert_eq!(b, BackendKind::Trace);
        assert!(!why.is_empty());
        assert_eq!(
            choose(BackendKind::Auto, Target::Kernel, dir.path()).unwrap().0,
            BackendKind::Analytic
        );
        assert_eq!(
            choose(BackendKind::Auto, Target::Command { software_only: true }, dir.path())
                .unwrap()
                .0,
            BackendKind::Perf
        );
    }

    #[test]
    fn with_a_core_pmu_auto_is_perf_for_kernels_and_regions() {
        let dir = pmus(true);
        assert_eq!(choose(BackendKind::Auto, Target::Kernel, dir.path()).unwrap().0, BackendKind::Perf);
        assert_eq!(choose(BackendKind::Auto, Target::Region, dir.path()).unwrap().0, BackendKind::Perf);
        // Commands also need perf_event_paranoid to allow counting: perf or trace, never more.
        let b = choose(BackendKind::Auto, Target::Command { software_only: false }, dir.path())
            .unwrap()
            .0;
        assert!(matches!(b, BackendKind::Perf | BackendKind::Trace), "{b:?}");
    }

    #[test]
    fn auto_never_chooses_the_simulated_pmu() {
        for core in [false, true] {
            let dir = pmus(core);
            for target in [
                Target::Command { software_only: false },
                Target::Command { software_only: true },
                Target::Kernel,
                Target::Region,
            ] {
                if let Ok((b, _)) = choose(BackendKind::Auto, target, dir.path()) {
                    assert_ne!(b, BackendKind::Simulated);
                    assert_ne!(b, BackendKind::Auto);
                }
            }
        }
    }
}
