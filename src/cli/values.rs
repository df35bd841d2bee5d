//! The library's enums as command-line values: the CLI maps its arguments onto them here, so
//! no library type carries clap. Each value's help is the line `--help` shows beside it.

use clap::ValueEnum;
use clap::builder::PossibleValue;

use crate::counters::BackendKind;
use crate::counters::team::EventSet;
use crate::counters::trace::TraceMode;
use crate::gate::format::Format;
use crate::report::PlotKind;

/// `impl ValueEnum for $type`: each variant with its command-line name and help line.
macro_rules! command_line_values {
    ($type:ty { $($variant:path => $name:literal : $help:literal),+ $(,)? }) => {
        impl ValueEnum for $type {
            fn value_variants<'a>() -> &'a [Self] {
                &[$($variant),+]
            }

            fn to_possible_value(&self) -> Option<PossibleValue> {
                Some(match self {
                    $($variant => PossibleValue::new($name).help($help)),+
                })
            }
        }
    };
}

command_line_values!(BackendKind {
    BackendKind::Auto => "auto": "perf where a usable core PMU exists, else trace (commands) or analytic (suite kernels)",
    BackendKind::Perf => "perf": "perf_event counters: the platform's FP, cache and memory events",
    BackendKind::Trace => "trace": "ptrace and decoding: exact W and core Q, Q per level with the cache simulator",
    BackendKind::Analytic => "analytic": "the kernel suite's own formulas (suite kernels only)",
    BackendKind::Simulated => "simulated": "the simulated PMU: the perf path with counts from a trace and injected faults (tests)",
});

command_line_values!(EventSet {
    EventSet::Platform => "platform": "the identified platform's FP, cache and memory events (needs a hardware PMU)",
    EventSet::Software => "software": "kernel software events only: T without W or Q, on any machine",
});

command_line_values!(TraceMode {
    TraceMode::Flops => "flops": "W and core-side Q only: block breakpoints, loops run natively (fast)",
    TraceMode::Memory => "memory": "also every effective address, for the cache simulator (Q per level)",
    TraceMode::Reference => "reference": "single-step every instruction, no shortcut: the ground truth (slow)",
});

command_line_values!(PlotKind {
    PlotKind::Carm => "carm": "cache-aware: core-side AI against every level's roof",
    PlotKind::Dram => "dram": "classic: DRAM AI against the DRAM roof",
    PlotKind::Hierarchical => "hierarchical": "one marker per level (each level's own AI), joined by a line",
    PlotKind::All => "all": "the three panels side by side",
});

command_line_values!(Format {
    Format::Text => "text": "plain text",
    Format::Json => "json": "JSON",
    Format::Junit => "junit": "JUnit XML (CI test reports)",
    Format::Github => "github": "GitHub Actions annotations",
    Format::Markdown => "markdown": "Markdown (a job summary)",
});

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant has a distinct name that parses back to it.
    fn round_trips<T: ValueEnum + PartialEq + std::fmt::Debug>() {
        let names: Vec<String> = T::value_variants()
            .iter()
            .map(|v| v.to_possible_value().unwrap().get_name().to_string())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "{names:?}");
        for (v, n) in T::value_variants().iter().zip(&names) {
            assert_eq!(&T::from_str(n, false).unwrap(), v);
        }
    }

    #[test]
    fn every_value_round_trips() {
        round_trips::<BackendKind>();
        round_trips::<EventSet>();
        round_trips::<TraceMode>();
        round_trips::<PlotKind>();
        round_trips::<Format>();
    }

    #[test]
    fn backend_names_are_the_library_names() {
        for b in BackendKind::ALL {
            assert_eq!(b.to_possible_value().unwrap().get_name(), b.name());
        }
        assert_eq!(BackendKind::value_variants().len(), BackendKind::ALL.len());
    }
}
