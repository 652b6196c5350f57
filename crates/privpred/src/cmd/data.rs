//! `privpred data`.

/// Arguments of `privpred data`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `privpred data`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    Err(crate::exit::usage("`privpred data` is not implemented yet"))
}
