//! `roofline plot` (issue 7).

use clap::Args as ClapArgs;

#[derive(Debug, ClapArgs)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<i32> {
    anyhow::bail!(crate::error::Error::unavailable("`roofline plot` is not built yet", "see issue 7"))
}
