//! `privpred calibrate`.

/// Arguments of `privpred calibrate`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `privpred calibrate`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    Err(crate::exit::usage("`privpred calibrate` is not implemented yet"))
}
