//! `privpred compare`: every applicable method at one setting, with a recommendation.

use privpred_core::CalibrationMode;
use privpred_study::compare;
use privpred_study::linear::{LinearOptions, LinearRunner};
use std::path::PathBuf;

/// Arguments of `privpred compare`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset: mnist, fashion-mnist, digits, csv:PATH, idx:DIR, ...
    #[arg(long, default_value = "mnist")]
    pub dataset: String,
    /// Directory searched first for datasets.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Privacy loss ε > 0.
    #[arg(long)]
    pub epsilon: f64,
    /// Privacy failure probability δ in [0, 1).
    #[arg(long, default_value_t = 0.0)]
    pub delta: f64,
    /// Inference budget B (answers the guarantee must cover).
    #[arg(long)]
    pub budget: u64,
    /// Calibration mode.
    #[arg(long, value_enum, default_value = "corrected")]
    pub calibration: CalibrationMode,
    /// Subsample-and-aggregate teachers T.
    #[arg(long, default_value_t = 256)]
    pub teachers: usize,
    /// Repetitions (noise draws) per method.
    #[arg(long, default_value_t = 10)]
    pub repetitions: u32,
    /// Subsample the data for a fast first answer (5,000 train / 2,000 test).
    #[arg(long)]
    pub quick: bool,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Runs `privpred compare`.
pub fn run(args: Args) -> anyhow::Result<()> {
    privpred_core::Privacy::new(args.epsilon, args.delta)?;
    privpred_core::Budget::finite(args.budget)?;
    use crate::limits::{MAX_REPETITIONS, MAX_TEACHERS, count};
    count(
        "repetitions",
        args.repetitions.into(),
        1,
        MAX_REPETITIONS,
        "MAX_REPETITIONS",
    )?;
    count(
        "teachers",
        args.teachers as u64,
        1,
        MAX_TEACHERS,
        "MAX_TEACHERS",
    )?;
    if args.teachers == 0 {
        return Err(crate::exit::usage(
            "invalid --teachers `0`: an integer >= 1",
        ));
    }
    let mut opts = LinearOptions::new(args.quick);
    opts.data_dir = args.data_dir;
    opts.dataset = Some(args.dataset.clone());
    let runner = LinearRunner::new(opts);
    let mut setting = compare::setting(args.epsilon, args.delta, args.budget);
    setting.teachers = args.teachers;
    let c = compare::compare(
        &runner,
        setting,
        args.calibration,
        args.repetitions,
        args.seed,
    )
    .map_err(super::reproduce::study_error)?;
    println!(
        "Dataset: {}{}",
        args.dataset,
        if args.quick {
            " (--quick: subsampled)"
        } else {
            ""
        }
    );
    println!("{}", compare::render(&c));
    Ok(())
}
