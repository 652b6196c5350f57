//! `privpred merge`.

/// Arguments of `privpred merge`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `privpred merge`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    Err(crate::exit::usage("`privpred merge` is not implemented yet"))
}
