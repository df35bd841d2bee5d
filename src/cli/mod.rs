//! The `roofline` command line: clap definitions and thin glue to the library.
//! One file per subcommand; each defines its own `Args` and `run`.

pub mod common;
pub mod machine;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "roofline", version, about = "How close is a kernel to what the machine can do, and why.", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The machine model: CPU, topology, caches, measured clocks, theoretical peaks.
    Machine(machine::Args),
}

/// Parse arguments, run, and return the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Machine(a)) => machine::run(a),
        None => {
            eprintln!(
                "roofline: no subcommand given (the profile job lands with the reports issue)\n  hint: try `roofline machine` or `roofline --help`"
            );
            Ok(2)
        }
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
