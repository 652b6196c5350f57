//! `privpred reproduce`: regenerate a figure or table of the study.

use anyhow::Context as _;
use privpred_core::CalibrationMode;
use privpred_study::linear::{LinearOptions, LinearRunner};
use privpred_study::sweep::{self, SweepConfig};
use privpred_study::units::Shard;
use privpred_study::{FigureId, StudyError, progress, results, summary, table1};
use std::path::PathBuf;

/// Arguments of `privpred reproduce`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to reproduce: fig1a, fig1b, fig2a, fig2b, fig3, fig4, fig5a, fig5b, fig6a, fig6b,
    /// fig7a, fig7b (these two need `--features nn`), table1 (derives the trend table from
    /// the figures it needs) or all.
    pub target: String,
    /// Dataset for every figure (default: mnist; fig4 uses the mnist1m substitute).
    #[arg(long)]
    pub dataset: Option<String>,
    /// Directory searched first for datasets.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Repetitions per setting (default 100; 3 with --quick).
    #[arg(long)]
    pub repetitions: Option<u32>,
    /// Calibration mode(s), comma-separated: paper, corrected, tight. With both paper and tight
    /// an overlay plot per figure is drawn.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "corrected")]
    pub calibration: Vec<CalibrationMode>,
    /// A first look in about a minute per figure: 3 repetitions, 5,000 training and 2,000 test
    /// examples, fewer DP-SGD epochs. Results are labelled as quick everywhere.
    #[arg(long)]
    pub quick: bool,
    /// Output directory (default: results/<target>[-quick]).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seed of every random draw (each unit's generator derives from it and the unit's id).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Run only shard K of N (0-based, e.g. `--shard $SLURM_ARRAY_TASK_ID/8`); combine the
    /// directories with `privpred merge`.
    #[arg(long)]
    pub shard: Option<String>,
    /// Continue an interrupted run in --out, skipping finished units.
    #[arg(long)]
    pub resume: bool,
    /// Mechanism draws averaged per cross-validated λ (default 1).
    #[arg(long, default_value_t = 1)]
    pub cv_draws: usize,
}

fn targets(t: &str) -> anyhow::Result<(Vec<FigureId>, bool)> {
    Ok(match t {
        "all" => {
            let mut v = FigureId::LINEAR.to_vec();
            if cfg!(feature = "nn") {
                v.extend([FigureId::Fig7a, FigureId::Fig7b]);
            }
            (v, true)
        }
        "table1" => (table1::needed_figures(), true),
        f => (vec![FigureId::parse(f).map_err(crate::exit::usage)?], false),
    })
}

/// Runs `privpred reproduce`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let (figures, with_table) = targets(&args.target)?;
    if let Some(f) = figures.iter().find(|f| f.needs_nn()) {
        return Err(crate::exit::usage(format!(
            "{f} trains ResNet-20 models on CIFAR-10 and needs a build with `--features nn`; the linear figures are fig1a–fig6b"
        )));
    }
    let shard = match &args.shard {
        Some(s) => Shard::parse(s).map_err(crate::exit::usage)?,
        None => Shard::ALL,
    };
    if args.cv_draws == 0 || args.cv_draws > 1000 {
        return Err(crate::exit::usage(format!(
            "invalid --cv-draws `{}`: an integer in 1..=1000",
            args.cv_draws
        )));
    }
    let repetitions = args.repetitions.unwrap_or(if args.quick { 3 } else { 100 });
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!(
            "{}{}",
            args.target,
            if args.quick { "-quick" } else { "" }
        ))
    });
    let mut opts = LinearOptions::new(args.quick);
    opts.data_dir = args.data_dir.clone();
    opts.dataset = args.dataset.clone();
    opts.cv_draws = args.cv_draws;
    let runner = LinearRunner::new(opts);
    let cfg = SweepConfig {
        figures,
        calibrations: args.calibration.clone(),
        repetitions,
        seed: args.seed,
        quick: args.quick,
        dataset: args.dataset.clone(),
        shard,
        resume: args.resume,
        out: out.clone(),
    };
    let observer = progress::for_terminal();
    let report = sweep::run(&cfg, &runner, observer.as_ref()).map_err(study_error)?;
    println!("{}", report.summary_md);
    if with_table {
        print_table1(&out)?;
    }
    println!(
        "{} units computed, {} resumed, in {:.1}s; results in {}",
        report.computed_units,
        report.skipped_units,
        report.seconds,
        out.display()
    );
    for p in &report.plots {
        println!("plot: {}", p.display());
    }
    Ok(())
}

/// Derives table 1 from the runs in `dir`, prints it and writes `table1.md`.
pub fn print_table1(dir: &std::path::Path) -> anyhow::Result<()> {
    let rows = results::read_dir_rows(dir).map_err(study_error)?;
    let points = summary::summarize(&rows);
    let timings = results::read_timings(dir).map_err(study_error)?;
    let text = table1::render(&table1::derive(&points, &rows, &timings));
    let p = dir.join("table1.md");
    results::write_atomic(&p, text.as_bytes())
        .map_err(study_error)
        .with_context(|| "writing table1.md")?;
    println!("{text}");
    Ok(())
}

/// Maps study errors: user errors exit with code 2.
pub fn study_error(e: StudyError) -> anyhow::Error {
    if e.is_usage() {
        crate::exit::usage(e)
    } else {
        anyhow::Error::new(e)
    }
}
