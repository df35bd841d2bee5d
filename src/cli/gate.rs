//! `roofline gate` (issue 8).

use clap::Args as ClapArgs;

#[derive(Debug, ClapArgs)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<i32> {
    anyhow::bail!(crate::error::Error::unavailable("`roofline gate` is not built yet", "see issue 8"))
}
