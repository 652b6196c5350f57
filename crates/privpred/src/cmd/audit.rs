//! `privpred audit`.

/// Arguments of `privpred audit`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `privpred audit`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    Err(crate::exit::usage("`privpred audit` is not implemented yet"))
}
