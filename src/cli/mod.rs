//! The `roofline` command line: clap definitions and thin glue to the library.
//! One file per subcommand; each defines its own `Args` and `run`.

pub mod cargo_roofline;
pub mod ceilings;
pub mod common;
pub mod compare;
pub mod doctor;
pub mod events;
pub mod examples;
pub mod gate;
pub mod gpu;
pub mod import;
pub mod kernels_cmd;
pub mod machine;
mod machine_check;
pub mod measure;
pub mod measure_rank;
pub mod plot;
pub mod profile;
pub mod report_cmd;
pub mod run;
pub mod sweep;
pub mod validate;
mod values;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "roofline", version = version(), about = "How close is a kernel to what the machine can do, and why.", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The machine model: CPU, topology, caches, measured clocks, theoretical peaks.
    #[command(after_help = examples::MACHINE)]
    Machine(machine::Args),
    /// List the kernel suite, the variants this CPU can run, and their W/Q formulas.
    #[command(name = "kernels")]
    #[command(after_help = examples::KERNELS)]
    Kernels(kernels_cmd::Args),
    /// Run a suite kernel: W and Q from a backend, T measured natively.
    #[command(after_help = examples::RUN)]
    Run(run::Args),
    /// A suite kernel against working-set size, cache levels marked, bound per size.
    #[command(after_help = examples::SWEEP)]
    Sweep(sweep::Args),
    /// Empirical roofs: peak GFLOP/s per ISA and bandwidth per memory level.
    #[command(after_help = examples::CEILINGS)]
    Ceilings(ceilings::Args),
    /// W, Q and T of a command (perf counters or trace). With --json the document is all that
    /// stdout carries: the command's own stdout goes to stderr.
    #[command(after_help = examples::MEASURE)]
    Measure(measure::Args),
    /// The perf stat line that collects the same counters on a target machine.
    #[command(after_help = examples::EVENTS)]
    Events(events::Args),
    /// Import counts measured elsewhere (perf stat -x, output).
    #[command(after_help = examples::IMPORT)]
    Import(import::Args),
    /// The kernel suite under each backend against analytic W and Q.
    #[command(after_help = examples::VALIDATE)]
    Validate(validate::Args),
    /// What this machine can measure (perf events, rdpmc, ptrace, GPU), why not more, and the fix.
    #[command(after_help = examples::DOCTOR)]
    Doctor(doctor::Args),
    /// Roofline plots (SVG, PNG, HTML) of one or more reports.
    #[command(after_help = examples::PLOT)]
    Plot(plot::Args),
    /// Show, merge or export reports.
    #[command(name = "report")]
    #[command(after_help = examples::REPORT)]
    Report(report_cmd::Args),
    /// A quick full profile of this machine, written to roofline-report/.
    #[command(after_help = examples::PROFILE)]
    Profile(profile::Args),
    /// A CI performance gate: compare a report against a baseline.
    #[command(after_help = examples::GATE)]
    Gate(gate::Args),
    /// NVIDIA GPUs: machine, ceilings, measure (ncu), import, run.
    #[command(after_help = examples::GPU)]
    Gpu(gpu::Args),
    /// CPU and GPU reports on one roofline.
    #[command(after_help = examples::COMPARE)]
    Compare(compare::Args),
}

/// `roofline --version`: the crate version, the git commit it was built from (`unknown` when
/// built outside a git checkout, e.g. from a crate tarball) and the embedded platform tables.
pub fn version() -> &'static str {
    static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "{} (git {}; platform tables: {})",
            env!("CARGO_PKG_VERSION"),
            option_env!("ROOFLINE_GIT_SHA").unwrap_or("unknown"),
            crate::machine::platform::Platform::embedded_version()
        )
    });
    &VERSION
}

/// Parse arguments, run, and return the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Machine(a)) => machine::run(a),
        Some(Command::Kernels(a)) => kernels_cmd::run(a),
        Some(Command::Run(a)) => run::run(a),
        Some(Command::Sweep(a)) => sweep::run(a),
        Some(Command::Ceilings(a)) => ceilings::run(a),
        Some(Command::Measure(a)) => measure::run(a),
        Some(Command::Events(a)) => events::run(a),
        Some(Command::Import(a)) => import::run(a),
        Some(Command::Validate(a)) => validate::run(a),
        Some(Command::Doctor(a)) => doctor::run(a),
        Some(Command::Plot(a)) => plot::run(a),
        Some(Command::Report(a)) => report_cmd::run(a),
        Some(Command::Profile(a)) => profile::run(a),
        Some(Command::Gate(a)) => gate::run(a),
        Some(Command::Gpu(a)) => gpu::run(a),
        Some(Command::Compare(a)) => compare::run(a),
        None => profile::run(profile::Args::default()),
    };
    match result {
        Ok(code) => code,
        Err(e) => report_error(&e),
    }
}

/// Print an error as one line of cause (and a hint) and map it to an exit code.
pub fn report_error(e: &anyhow::Error) -> i32 {
    if let Some(err) = e.downcast_ref::<crate::error::Error>() {
        eprintln!("roofline: {err}");
        return err.exit_code();
    }
    eprintln!("roofline: {e:#}");
    2
}
