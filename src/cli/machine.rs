//! `roofline machine`.

use clap::Args as ClapArgs;

use super::common::{OutputArgs, PlatformArg};

#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub platform: PlatformArg,
    /// Use this clock (GHz) for the theoretical peaks instead of the measured one.
    #[arg(long, value_name = "GHZ")]
    pub frequency: Option<f64>,
}

pub fn run(_args: Args) -> anyhow::Result<i32> {
    anyhow::bail!(crate::error::Error::unavailable(
        "`roofline machine` is not built yet",
        "see issue 2"
    ))
}
