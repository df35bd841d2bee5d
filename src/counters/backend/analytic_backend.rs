//! `--backend analytic`: the kernel suite's own formulas count W and Q; T is timed natively by
//! the team runner. It counts suite kernels only: a command has no formulas.

use super::*;
use crate::counters::analytic::{self, KernelRun};
use crate::counters::{BackendKind, Measurement};
use crate::error::{Error, Result};

/// The suite's formulas as a backend.
pub struct AnalyticBackend;

impl Backend for AnalyticBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Analytic
    }

    fn measure_command(&self, _program: &Path, _argv: &[String], _opts: &CommandOptions) -> Result<CommandOutcome> {
        Err(Error::input(
            "`--backend analytic` counts suite kernels, not commands",
            "use `roofline run KERNEL --backend analytic`, or `--backend perf|trace` here",
        ))
    }

    fn count_kernel(&self, spec: &KernelRun, on_sample: &OnSample<'_>) -> Result<Measurement> {
        analytic::run(spec, on_sample)
    }
}
