//! `privpred account`.

/// Arguments of `privpred account`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `privpred account`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    Err(crate::exit::usage("`privpred account` is not implemented yet"))
}
