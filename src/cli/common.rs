//! Arguments every subcommand shares, so the conventions hold everywhere:
//! `--json` prints the JSON document on stdout, `-o FILE` writes a file whose format
//! follows its extension, `--threads LIST`, `--platform NAME|FILE`.

use clap::Args;
use std::path::PathBuf;

use crate::error::Result;
use crate::util::OutputFile;

#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Print the command's JSON document on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write a file; its format follows the extension.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

impl OutputArgs {
    /// Check `-o` before any measuring: directory exists and is writable, extension known.
    pub fn check(&self, allowed: &[&str]) -> Result<Option<(OutputFile, String)>> {
        self.output.as_deref().map(|p| OutputFile::check(p, allowed)).transpose()
    }
}

#[derive(Debug, Clone, Args)]
pub struct PlatformArg {
    /// Microarchitecture: a name from platforms/ (e.g. gnr, zen4) or a TOML file.
    #[arg(long, value_name = "NAME|FILE")]
    pub platform: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ThreadsArg {
    /// Thread counts: 1, 1,2, 1-4 or all.
    #[arg(long, value_name = "LIST", default_value = "1")]
    pub threads: String,
}

impl ThreadsArg {
    pub fn parse(&self) -> Result<Vec<usize>> {
        crate::util::parse_threads(&self.threads, crate::util::available_cpus())
    }
}

/// While alive, this process's stdout (fd 1, inherited by every child it starts) is its
/// stderr: a measured command's output must not land in a document or verdict printed on
/// stdout. Dropping it restores stdout.
pub struct StdoutToStderr {
    saved: std::os::fd::OwnedFd,
}

impl StdoutToStderr {
    pub fn new() -> anyhow::Result<StdoutToStderr> {
        use anyhow::Context;
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let saved = nix::unistd::dup(std::io::stdout()).context("dup(stdout)")?;
        nix::unistd::dup2_stdout(std::io::stderr()).context("dup2(stderr, stdout)")?;
        Ok(StdoutToStderr { saved })
    }
}

impl Drop for StdoutToStderr {
    fn drop(&mut self) {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let _ = nix::unistd::dup2_stdout(&self.saved);
    }
}

/// Where `--energy` looks for perf's `power` PMU: `ROOFLINE_SYSFS_PMUS` (a recorded tree, in
/// tests) or the kernel's.
pub fn energy_pmus() -> PathBuf {
    std::env::var_os("ROOFLINE_SYSFS_PMUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(crate::counters::perf::SYSFS_PMUS))
}

#[derive(Debug, Clone, Args, Default)]
pub struct EnergyArg {
    /// Also read the RAPL energy counters (perf's `power` PMU: package, cores, DRAM, platform,
    /// whichever this machine has): joules per run and domain beside the time, with the idle
    /// power measured first. Needs system-wide perf events (root, CAP_PERFMON or
    /// perf_event_paranoid ≤ 0).
    #[arg(long)]
    pub energy: bool,
    /// With --energy: take the idle power × each run's time off its joules (said in the report).
    #[arg(long, requires = "energy")]
    pub subtract_idle: bool,
    /// With --energy: seconds of idle measured before the runs.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, requires = "energy")]
    pub idle_seconds: f64,
}

impl EnergyArg {
    /// The meter, open and its idle power measured, when `--energy` was given; one line and
    /// exit 2 where this machine has no RAPL or the kernel refuses it.
    pub fn start(&self) -> Result<Option<crate::counters::energy::Energy>> {
        if !self.energy {
            return Ok(None);
        }
        if !(self.idle_seconds.is_finite() && self.idle_seconds > 0.0 && self.idle_seconds <= 600.0) {
            return Err(crate::error::Error::input(
                format!("--idle-seconds {}: not a duration", self.idle_seconds),
                "give seconds, e.g. 1",
            ));
        }
        let options = crate::counters::energy::EnergyOptions {
            subtract_idle: self.subtract_idle,
            idle_seconds: self.idle_seconds,
        };
        crate::counters::energy::Energy::start(&energy_pmus(), options).map(Some)
    }
}
