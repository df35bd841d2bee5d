//! The `perf stat` command line that collects a platform's counters on another machine, for
//! `roofline import` to read back.

use super::plan::first_fit_groups;
use crate::counters::events::{gp_counters, is_core_pmu, perf_event_syntax, selected};
use crate::machine::{EventSpec, Platform};

/// A `perf stat` invocation collecting a platform's counters.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PerfStatPlan {
    /// Each `-e` argument, in order (groups in `{}`).
    pub event_args: Vec<String>,
    /// Whether `-a` is needed (uncore events cannot be counted per task).
    pub system_wide: bool,
    pub gp_counters: u32,
    pub notes: Vec<String>,
}

impl PerfStatPlan {
    pub fn new(p: &Platform, smt: bool, optional: bool, uncore: bool) -> PerfStatPlan {
        let events = selected(p, optional, uncore);
        // AMD has no fixed counters: the NMI watchdog (on by default) holds one of the
        // general-purpose ones, so groups leave it free.
        let amd = p.identify.vendor == "AuthenticAMD";
        let n = gp_counters(p, smt) - u32::from(amd);
        let mut args = vec!["duration_time,task-clock".to_string()];
        let named: Vec<String> = events
            .iter()
            .filter(|e| e.perf_name.is_some() && is_core_pmu(&e.pmu))
            .map(|e| perf_event_syntax(e))
            .collect();
        if !named.is_empty() {
            args.push(named.join(","));
        }
        let core: Vec<&EventSpec> = events
            .iter()
            .copied()
            .filter(|e| e.perf_name.is_none() && is_core_pmu(&e.pmu))
            .collect();
        let groups = first_fit_groups(&core, n);
        for g in &groups {
            let inner: Vec<String> = g.iter().map(|e| perf_event_syntax(e)).collect();
            args.push(format!("{{{}}}", inner.join(",")));
        }
        let unc: Vec<String> = events
            .iter()
            .filter(|e| !is_core_pmu(&e.pmu))
            .map(|e| perf_event_syntax(e))
            .collect();
        if !unc.is_empty() {
            args.push(unc.join(","));
        }
        let mut notes = Vec::new();
        if groups.len() > 1 {
            notes.push(format!(
                "{} core events need {} groups with {n} general-purpose counters per thread{}: perf multiplexes them and scales the counts (the import flags it)",
                core.len(),
                groups.len(),
                if smt { " (SMT on)" } else { "" }
            ));
        }
        if !unc.is_empty() {
            notes.push("uncore events are socket-wide: -a counts every CPU, so core counts are system-wide too; run on an otherwise idle machine, or pass --no-uncore for a per-command line".into());
        }
        notes.push(format!(
            "groups use {n} counters per thread{}; if a whole group reads <not counted>, the NMI watchdog or another perf user holds a counter (sysctl kernel.nmi_watchdog=0)",
            if amd { " (one left to the NMI watchdog)" } else { "" }
        ));
        if p.events.iter().any(|e| e.paired) {
            notes.push("event 0x03 (FpRetSseAvxOps) is merged over an even/odd counter pair by the kernel (Large Increment per Cycle events): each takes two counters".into());
        }
        PerfStatPlan {
            event_args: args,
            system_wide: !unc.is_empty(),
            gp_counters: n,
            notes,
        }
    }

    /// The shell command line (groups quoted for the shell).
    pub fn command_line(&self, command: &[String]) -> String {
        let mut s = String::from("perf stat -x,");
        if self.system_wide {
            s.push_str(" -a");
        }
        for a in &self.event_args {
            if a.contains('{') {
                s.push_str(&format!(" -e '{a}'"));
            } else {
                s.push_str(&format!(" -e {a}"));
            }
        }
        s.push_str(" -o perf-stat.csv --");
        if command.is_empty() {
            s.push_str(" CMD ARGS...");
        } else {
            for c in command {
                if c.chars().all(|ch| ch.is_ascii_alphanumeric() || "-_./=:,+@%".contains(ch)) && !c.is_empty() {
                    s.push(' ');
                    s.push_str(c);
                } else {
                    s.push_str(&format!(" '{}'", c.replace('\'', "'\\''")));
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "analysis")]
    #[test]
    fn perf_syntax_of_core_uncore_and_named_events() {
        let skx = Platform::load("skx").unwrap();
        let plan = PerfStatPlan::new(&skx, true, false, true);
        let line = plan.command_line(&["./triad".into(), "1 2".into()]);
        assert!(
            line.starts_with("perf stat -x, -a -e duration_time,task-clock -e instructions,cycles,ref-cycles"),
            "{line}"
        );
        assert!(
            line.contains(
                "-e '{cpu/event=0xc7,umask=0x01/,cpu/event=0xc7,umask=0x04/,cpu/event=0xc7,umask=0x10/,cpu/event=0xc7,umask=0x40/}'"
            ),
            "{line}"
        );
        assert!(
            line.contains("uncore_imc/event=0x04,umask=0x03/,uncore_imc/event=0x04,umask=0x0c/"),
            "{line}"
        );
        assert!(line.ends_with("-- ./triad '1 2'"), "{line}");
        let zen4 = Platform::load("zen4").unwrap();
        let plan = PerfStatPlan::new(&zen4, true, false, false);
        let line = plan.command_line(&[]);
        assert!(!line.contains(" -a"), "{line}");
        assert!(line.contains("'{cpu/event=0x03,umask=0x1f/}'"), "{line}");
        let umc = zen4.events.iter().find(|e| e.name == "umc_cas_cmd.wr").unwrap();
        assert_eq!(perf_event_syntax(umc), "amd_umc/event=0x0a,rdwrmask=0x2/");
    }

    #[test]
    fn skx_groups_respect_counters_0_to_3() {
        let skx = Platform::load("skx").unwrap();
        let core: Vec<&EventSpec> = selected(&skx, false, false).into_iter().filter(|e| e.perf_name.is_none()).collect();
        let groups = first_fit_groups(&core, gp_counters(&skx, true));
        // 4 FP_ARITH double + L1D.REPLACEMENT + 2 L2 events, all on counters 0-3.
        assert_eq!(core.len(), 7);
        assert_eq!(groups.len(), 2, "{groups:?}");
        assert!(groups.iter().all(|g| g.len() <= 4));
        assert!(groups[0].iter().all(|e| e.quantity == "flops"));
        // With SMT off perf has 8 counters, but these events still need 0-3.
        assert_eq!(first_fit_groups(&core, gp_counters(&skx, false)).len(), 2);
        // Ice Lake-SP: FP_ARITH may use 0-7, so with 8 counters one group holds all.
        let icx = Platform::load("icx").unwrap();
        let core: Vec<&EventSpec> = selected(&icx, false, false).into_iter().filter(|e| e.perf_name.is_none()).collect();
        assert_eq!(first_fit_groups(&core, gp_counters(&icx, true)).len(), 1);
    }

    #[test]
    fn paired_events_take_two_counters_in_the_line_too() {
        let zen4 = Platform::load("zen4").unwrap();
        let mut a = zen4.events.iter().find(|e| e.paired).expect("a paired event").clone();
        a.counters = None;
        assert_eq!(first_fit_groups(&[&a, &a, &a], 6).len(), 1);
        assert_eq!(first_fit_groups(&[&a, &a, &a, &a], 6).len(), 2);
    }
}
