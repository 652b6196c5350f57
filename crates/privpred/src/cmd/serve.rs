//! `privpred serve`.

/// Arguments of `privpred serve`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `privpred serve`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    Err(crate::exit::usage("`privpred serve` is not implemented yet"))
}
