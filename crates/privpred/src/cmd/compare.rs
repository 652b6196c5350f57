//! `privpred compare`.

/// Arguments of `privpred compare`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `privpred compare`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    Err(crate::exit::usage("`privpred compare` is not implemented yet"))
}
