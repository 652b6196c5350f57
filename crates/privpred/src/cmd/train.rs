//! `privpred train`.

/// Arguments of `privpred train`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `privpred train`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    Err(crate::exit::usage("`privpred train` is not implemented yet"))
}
