//! `privpred reproduce`.

/// Arguments of `privpred reproduce`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `privpred reproduce`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    Err(crate::exit::usage("`privpred reproduce` is not implemented yet"))
}
