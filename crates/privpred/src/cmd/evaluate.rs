//! `privpred evaluate`.

/// Arguments of `privpred evaluate`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `privpred evaluate`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    Err(crate::exit::usage("`privpred evaluate` is not implemented yet"))
}
