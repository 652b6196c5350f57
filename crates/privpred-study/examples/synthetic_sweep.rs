//! Runs the sweep machinery with the synthetic runner (no data) into a directory, to look at
//! the result files and plots: `cargo run -p privpred-study --example synthetic_sweep -- OUT`.

use privpred_core::CalibrationMode;
use privpred_study::FigureId;
use privpred_study::progress;
use privpred_study::sweep::{self, SweepConfig, SyntheticRunner};
use privpred_study::units::Shard;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "synthetic-sweep".into());
    let cfg = SweepConfig {
        figures: vec![FigureId::Fig1a, FigureId::Fig6a],
        calibrations: vec![CalibrationMode::Paper, CalibrationMode::Tight],
        repetitions: 5,
        seed: 1,
        quick: true,
        dataset: None,
        shard: Shard::ALL,
        resume: false,
        out: out.into(),
    };
    let obs = progress::for_terminal();
    let rep = sweep::run(&cfg, &SyntheticRunner::new(), obs.as_ref())?;
    println!("{} units, plots: {:?}", rep.computed_units, rep.plots);
    Ok(())
}
