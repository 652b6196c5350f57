//! `privpred merge`: combine the result directories of `reproduce --shard` runs.

use privpred_study::sweep;
use std::path::PathBuf;

/// Arguments of `privpred merge`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Shard directories (each written by `privpred reproduce --shard K/N --out DIR`).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Output directory for the merged results, summary and plots.
    #[arg(long)]
    pub out: PathBuf,
    /// Also derive table 1 from the merged runs.
    #[arg(long)]
    pub table1: bool,
}

/// Runs `privpred merge`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let r = sweep::merge(&args.dirs, &args.out).map_err(super::shared::study_error)?;
    println!("{}", r.summary_md);
    if args.table1 {
        super::reproduce::print_table1(&args.out)?;
    }
    let shards: Vec<String> = r.shards.iter().map(|s| s.to_string()).collect();
    println!(
        "merged {} rows from shards [{}] into {}",
        r.rows,
        shards.join(", "),
        args.out.display()
    );
    if r.missing_units > 0 {
        eprintln!(
            "warning: {} units of the sweep are missing (a shard is absent or unfinished: rerun it with --resume, then merge again)",
            r.missing_units
        );
    }
    Ok(())
}
