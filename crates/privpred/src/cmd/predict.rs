//! `privpred predict`.

/// Arguments of `privpred predict`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `privpred predict`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    Err(crate::exit::usage("`privpred predict` is not implemented yet"))
}
