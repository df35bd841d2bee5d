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
