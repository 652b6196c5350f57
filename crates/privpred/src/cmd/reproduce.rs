//! `privpred reproduce`: regenerate a figure or table of the study.

use anyhow::Context as _;
use privpred_core::CalibrationMode;
use privpred_core::ParamGuard;
use privpred_study::linear::LinearRunner;
use privpred_study::params::LinearParams;
use privpred_study::selection::SelectionOptions;
use privpred_study::sweep::{self, SweepConfig};
use privpred_study::units::Shard;
use privpred_study::{FigureId, progress, report, results, summary, table1};
use std::path::PathBuf;

/// Arguments of `privpred reproduce`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to reproduce: fig1a, fig1b, fig2a, fig2b, fig3, fig4, fig5a, fig5b, fig6a, fig6b,
    /// fig7a, fig7b (these two need `--features nn`; fig7 is both), table1 (derives the trend
    /// table from the figures it needs), all, or a comma-separated list of figures.
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
    /// Private draws averaged per cross-validated λ or DP-SGD clip ν (1..=1000; default 5,
    /// chosen on the training hold-out, docs/study.md). λ and ν are selected once per setting
    /// and shared by its repetitions.
    #[arg(long, default_value_t = privpred_study::linear::CV_DRAWS_DEFAULT)]
    pub cv_draws: usize,
    /// The bias feature's value v in [0, 1): rows become [x·√(1 − v²), v]; 0 = none (the
    /// default, chosen on the training hold-out, docs/study.md; before: √½). Recorded in every
    /// row.
    #[arg(long, allow_negative_numbers = true)]
    pub bias: Option<String>,
    /// The neighbouring relation every method of the sweep is calibrated for (docs/guarantees.md#neighbouring-relations: one
    /// study compares methods under one relation; DP-SGD included). Recorded in every row.
    #[arg(long, value_enum, default_value_t = privpred_core::Neighbours::ReplaceOne)]
    pub neighbours: privpred_core::Neighbours,
    /// How λ and DP-SGD's clip ν are selected: `paper` (the paper's protocol: on a hold-out of
    /// the training data without privacy, outside the guarantee), `public` (train's public
    /// defaults λ = 0.01, ν = 0.1: cost nothing) or `private` (the private split selection,
    /// inside the guarantee; replace-one only). Recorded in every row's `selection`.
    #[arg(long, value_enum, default_value_t = Protocol::Paper)]
    pub selection: Protocol,
    /// Figure 7 only: stop training cleanly after this many seconds (at the next epoch
    /// boundary), keeping the run's checkpoint under `<out>/nn-cache`, and exit with code 3
    /// ("stopped, resumable"); `--resume` continues it with the same result as an
    /// uninterrupted run.
    #[arg(long, value_name = "SECONDS")]
    pub nn_time_limit_s: Option<f64>,
    /// Also write one self-contained HTML report of the run here (every figure's plots and
    /// table, the guarantees, provenance).
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// `reproduce --selection`: how the study selects λ and ν.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// The paper's non-private hold-out selection (outside the guarantee).
    Paper,
    /// Public values chosen without the data (cost nothing).
    Public,
    /// The private split selection (inside the guarantee; replace-one only).
    Private,
}

impl Protocol {
    /// The runner's selection options.
    pub fn options(self) -> SelectionOptions {
        match self {
            Protocol::Paper => SelectionOptions::PAPER,
            Protocol::Public => SelectionOptions::PUBLIC,
            Protocol::Private => SelectionOptions::PRIVATE,
        }
    }
}

/// Checks `--bias` (default [`privpred_data::preprocess::BIAS_DEFAULT`]) and `--cv-draws`:
/// exit 2 with the valid range.
pub(crate) fn bias_and_cv_draws(
    bias: Option<&str>,
    cv_draws: usize,
) -> anyhow::Result<(f64, usize)> {
    let bias = match bias {
        Some(b) => privpred_data::preprocess::parse_bias(b)
            .map_err(|e| crate::exit::usage(format!("--bias: {e}")))?,
        None => privpred_data::preprocess::BIAS_DEFAULT,
    };
    let k = privpred_linear::methods::check_cv_draws(cv_draws)
        .map_err(|e| crate::exit::usage(format!("--cv-draws: {e}")))?;
    Ok((bias, k))
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
        // both panels of figure 7 in one run: they share the trained networks
        "fig7" => (vec![FigureId::Fig7a, FigureId::Fig7b], false),
        list => {
            let mut v = Vec::new();
            for f in list.split(',').map(str::trim) {
                let id = FigureId::parse(f).map_err(crate::exit::usage)?;
                if !v.contains(&id) {
                    v.push(id);
                }
            }
            (v, false)
        }
    })
}

/// Runs `privpred reproduce`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let (figures, with_table) = targets(&args.target)?;
    if let Some(p) = &args.report
        && (p.as_os_str().is_empty() || p.is_dir())
    {
        return Err(crate::exit::usage(format!(
            "invalid --report `{}`: a file path for the HTML report (not a directory)",
            p.display()
        )));
    }
    if let Some(f) = figures
        .iter()
        .find(|f| f.needs_nn() && !cfg!(feature = "nn"))
    {
        return Err(crate::exit::usage(format!(
            "{f} trains ResNet-20 models on CIFAR-10 and needs a build with `--features nn`; the linear figures are fig1a–fig6b"
        )));
    }
    let shard = match &args.shard {
        Some(s) => Shard::parse(s).map_err(crate::exit::usage)?,
        None => Shard::ALL,
    };
    let (bias, cv_draws) = bias_and_cv_draws(args.bias.as_deref(), args.cv_draws)?;
    // One relation for every method: a figure with a method privpred has no analysis for
    // under the chosen relation is refused before any work.
    for f in &figures {
        for m in &f.definition().methods {
            privpred_core::check_relation(*m, args.neighbours).map_err(|e| {
                crate::exit::usage(format!("{f} under --neighbours {}: {e}", args.neighbours))
            })?;
        }
    }
    if args.selection == Protocol::Private {
        if args.neighbours != privpred_core::Neighbours::ReplaceOne {
            return Err(crate::exit::usage(format!(
                "--selection private under --neighbours {}: the private split selection is analysed for replace-one neighbours only (its parts' sizes would depend on N); use --neighbours replace-one or --selection public",
                args.neighbours
            )));
        }
        if let Some(f) = figures.iter().find(|f| f.needs_nn()) {
            return Err(crate::exit::usage(format!(
                "--selection private: {f} trains with the fixed public clip and T (nothing to select); run it with --selection paper or public"
            )));
        }
    }
    let repetitions = args.repetitions.unwrap_or(if args.quick { 3 } else { 100 });
    crate::limits::count(
        "repetitions",
        repetitions.into(),
        1,
        crate::limits::MAX_REPETITIONS,
        "MAX_REPETITIONS",
    )?;
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!(
            "{}{}",
            args.target,
            if args.quick { "-quick" } else { "" }
        ))
    });
    let opts = LinearParams::new(args.quick)
        .data_dir(args.data_dir.clone())
        .dataset(args.dataset.clone())
        .cv_draws(cv_draws)
        .bias(bias)
        .neighbours(args.neighbours)
        .selection(args.selection.options())
        .check()
        .map_err(crate::exit::usage)?;
    let linear = LinearRunner::new(opts);
    #[cfg(feature = "nn")]
    let nn_runner = nn::Fig7Runner::new(&args, &out)?;
    #[cfg(feature = "nn")]
    let dispatch = nn::Dispatch {
        linear: &linear,
        nn: &nn_runner,
    };
    // Linear-only runs keep the linear runner's manifest options, whichever the build.
    #[cfg(feature = "nn")]
    let runner: &dyn sweep::Runner = if figures.iter().any(|f| f.needs_nn()) {
        &dispatch
    } else {
        &linear
    };
    #[cfg(not(feature = "nn"))]
    let runner: &dyn sweep::Runner = &linear;
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
    let report = sweep::run(&cfg, runner, observer.as_ref()).map_err(super::shared::study_error)?;
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
    if let Some(path) = &args.report {
        // the study's schedule is explicit (its epochs do not follow ε): any ε gives it
        write_report(path, &out, &args, linear.dpsgd_config(1.0))?;
        println!("report: {}", path.display());
    }
    Ok(())
}

/// Writes the HTML report of the results in `dir` to `path`.
fn write_report(
    path: &std::path::Path,
    dir: &std::path::Path,
    args: &Args,
    dpsgd: privpred_linear::dpsgd::DpSgdConfig,
) -> anyhow::Result<()> {
    let rows = results::canonical(results::read_dir_rows(dir).map_err(super::shared::study_error)?);
    let manifest = results::Manifest::read(dir).map_err(super::shared::study_error)?;
    let prov = report::Provenance {
        command: super::shared::command_line(),
        dataset: args.dataset.clone().unwrap_or_else(|| {
            let mut v: Vec<String> = rows.iter().map(|r| r.dataset.clone()).collect();
            v.sort();
            v.dedup();
            v.join(", ")
        }),
        version: env!("CARGO_PKG_VERSION").to_string(),
        seed: args.seed,
        quick: args.quick,
        bias: rows.first().map(|r| r.m.bias),
        cv_draws: (args.selection == Protocol::Paper).then_some(args.cv_draws),
        selection: Some(args.selection.options().describe()),
        ..report::Provenance::default()
    };
    let html =
        report::study_html(&rows, &manifest, &prov, &dpsgd).map_err(super::shared::study_error)?;
    report::write_report(path, &html).map_err(super::shared::study_error)
}

/// Derives table 1 from the runs in `dir`, prints it and writes `table1.md`.
pub fn print_table1(dir: &std::path::Path) -> anyhow::Result<()> {
    let rows = results::read_dir_rows(dir).map_err(super::shared::study_error)?;
    let points = summary::summarize(&rows);
    let timings = results::read_timings(dir).map_err(super::shared::study_error)?;
    let text = table1::render(&table1::derive(&points, &rows, &timings));
    let p = dir.join("table1.md");
    results::write_atomic(&p, text.as_bytes())
        .map_err(super::shared::study_error)
        .with_context(|| "writing table1.md")?;
    println!("{text}");
    Ok(())
}

/// Figure 7 (ResNet-20 on CIFAR-10) through the study's sweep machinery.
#[cfg(feature = "nn")]
mod nn {
    use super::Args;
    use privpred_nn::engine::{self, GradientEngine};
    use privpred_study::fig7::{self, Fig7Config, Fig7Context};
    use privpred_study::progress::{Event, Observer};
    use privpred_study::results::Measurement;
    use privpred_study::sweep::{Done, GroupTiming, Runner};
    use privpred_study::units::Group;
    use privpred_study::{FigureId, Result, StudyError};
    use std::path::Path;
    use std::sync::Mutex;
    use std::time::Instant;

    /// Sends fig7a/fig7b to [`Fig7Runner`], every other figure to the linear runner.
    pub struct Dispatch<'a> {
        pub linear: &'a dyn Runner,
        pub nn: &'a Fig7Runner,
    }

    impl Dispatch<'_> {
        fn pick(&self, figure: FigureId) -> &dyn Runner {
            if figure.needs_nn() {
                self.nn
            } else {
                self.linear
            }
        }
    }

    impl Runner for Dispatch<'_> {
        fn options(&self) -> serde_json::Value {
            serde_json::json!({ "linear": self.linear.options(), "nn": self.nn.options() })
        }
        fn dataset_name(&self, figure: FigureId) -> String {
            self.pick(figure).dataset_name(figure)
        }
        fn run_group(
            &self,
            group: &Group,
            reps: &[u32],
            seed: u64,
            done: &Done<'_>,
        ) -> Result<GroupTiming> {
            self.pick(group.figure).run_group(group, reps, seed, done)
        }
        fn prepare(&self, figure: FigureId, observer: &dyn Observer) -> Result<()> {
            self.pick(figure).prepare(figure, observer)
        }
    }

    /// Runs the groups of figure 7 with [`fig7::run_unit`]; the CIFAR-10 data and the trained
    /// networks (cached under `<out>/nn-cache`) are loaded on the first group. The networks
    /// train on the engine named by `$PRIVPRED_NN_ENGINE` (`cpu` or `torch`; default `torch`
    /// when built with `--features torch` and a CUDA device is present, else `cpu`).
    pub struct Fig7Runner {
        cfg: Fig7Config,
        ctx: Mutex<Option<Fig7Context>>,
        /// The engine until the context takes it on the first group.
        engine: Mutex<Option<Box<dyn GradientEngine>>>,
        engine_name: &'static str,
        /// When training stops (`--nn-time-limit-s` after the start).
        deadline: Option<Instant>,
    }

    impl Fig7Runner {
        /// The configuration of `privpred reproduce` args: `--quick` picks the small CPU run,
        /// `--seed` seeds every draw, CIFAR-10 is found as `load` finds it (`--data-dir`,
        /// `$PRIVPRED_DATA_DIR`, the cache, `shared/data`: the JPEG copy or the binary
        /// batches). An unknown
        /// `$PRIVPRED_NN_ENGINE`, or `torch` in a build without it, is a usage error (exit 2).
        pub fn new(args: &Args, out: &Path) -> anyhow::Result<Self> {
            // only a run with figure 7 needs (and checks) the engine
            let needs_nn = super::targets(&args.target)
                .map(|(f, _)| f.iter().any(|f| f.needs_nn()))
                .unwrap_or(false);
            let engine: Box<dyn GradientEngine> = if needs_nn {
                engine::from_choice(None).map_err(crate::cmd::nn_artifact::nn_err)?
            } else {
                Box::new(engine::CpuEngine)
            };
            let cache = out.join("nn-cache");
            let mut cfg = if args.quick {
                Fig7Config::quick(cache)
            } else {
                Fig7Config::full(cache)
            };
            cfg.seed = args.seed;
            if let Some(mode) = args.calibration.first() {
                cfg.mode = *mode;
            }
            // CIFAR-10 through the resolution order of docs/data.md: --data-dir,
            // $PRIVPRED_DATA_DIR, the cache (`privpred data fetch cifar10`), shared/data
            if let Some(p) = privpred_data::load::find_cifar10(args.data_dir.as_deref()) {
                cfg.data_path = p;
            }
            let deadline = match args.nn_time_limit_s {
                Some(t) if t.is_finite() && t > 0.0 => {
                    Some(Instant::now() + std::time::Duration::from_secs_f64(t))
                }
                Some(t) => {
                    return Err(crate::exit::usage(format!(
                        "invalid --nn-time-limit-s = {t}: must be a positive number of seconds"
                    )));
                }
                None => None,
            };
            Ok(Fig7Runner {
                deadline,
                cfg,
                ctx: Mutex::new(None),
                engine_name: engine.name(),
                engine: Mutex::new(Some(engine)),
            })
        }

        fn compute(context: &str, e: impl std::fmt::Display) -> StudyError {
            StudyError::Compute {
                context: context.to_string(),
                message: e.to_string(),
            }
        }
    }

    impl Runner for Fig7Runner {
        fn options(&self) -> serde_json::Value {
            let mut v = serde_json::to_value(&self.cfg).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                // where the cache lives and which mode is first do not change results
                o.remove("cache_dir");
                o.remove("mode");
                // the data is identified by the checksum in every row, not by its path
                o.remove("data_path");
                // engines other than the CPU one are named (shards must use the same engine;
                // CPU runs keep the options they always had)
                if self.engine_name != "cpu" {
                    o.insert("engine".into(), serde_json::json!(self.engine_name));
                }
            }
            v
        }

        fn dataset_name(&self, figure: FigureId) -> String {
            figure.definition().dataset.to_string()
        }

        fn prepare(&self, figure: FigureId, observer: &dyn Observer) -> Result<()> {
            let mut guard = self.ctx.lock().map_err(|e| Self::compute("fig7", e))?;
            if guard.is_none() {
                observer.on_event(&Event::Message(&format!(
                    "{figure}: loading CIFAR-10 from {}{}",
                    self.cfg.data_path.display(),
                    if self.cfg.quick {
                        " (--quick: 200 + 50 images per class)"
                    } else {
                        ""
                    }
                )));
                let mut ctx = fig7::prepare(self.cfg.clone()).map_err(|e| {
                    Self::compute(&format!("{figure}: {}", self.cfg.data_path.display()), e)
                })?;
                let mut eng = self.engine.lock().map_err(|e| Self::compute("fig7", e))?;
                if let Some(e) = eng.take() {
                    observer.on_event(&Event::Message(&format!(
                        "{figure}: training on engine {}",
                        e.describe()
                    )));
                    ctx.set_engine(e);
                }
                ctx.set_deadline(self.deadline);
                *guard = Some(ctx);
            }
            Ok(())
        }

        fn run_group(
            &self,
            g: &Group,
            reps: &[u32],
            _seed: u64,
            done: &Done<'_>,
        ) -> Result<GroupTiming> {
            let start = Instant::now();
            let Some(&last) = reps.iter().max() else {
                return Ok(GroupTiming::default());
            };
            let label = format!("{} {} {}", g.figure, g.calibration, g.method);
            let mut guard = self.ctx.lock().map_err(|e| Self::compute(&label, e))?;
            let ctx = guard
                .as_mut()
                .ok_or_else(|| Self::compute(&label, "figure 7 data not prepared"))?;
            ctx.cfg.mode = g.calibration;
            let s = g.setting;
            let mut shown = Instant::now();
            // Repetition r of run_unit depends on (seed, r) only, so computing 0..=last and
            // keeping `reps` gives the same rows in any shard or resumed run.
            let rows = fig7::run_unit(
                ctx,
                g.method,
                s.epsilon,
                s.delta,
                s.budget,
                last + 1,
                &mut |tag, p| {
                    if p.step == p.steps || shown.elapsed().as_secs() >= 30 {
                        shown = Instant::now();
                        eprintln!("  {label}: {tag} step {}/{}", p.step, p.steps);
                    }
                },
            )
            .map_err(|e| match e {
                // the time limit: its checkpoint is kept, and `--resume` continues it
                privpred_nn::NnError::Stopped(message) => StudyError::Stopped {
                    context: label.clone(),
                    message,
                },
                e => Self::compute(&label, e),
            })?;
            let dim = ctx.train.image_len();
            let classes = ctx.cfg.net.classes;
            let mut answers = 0u64;
            for m in rows.into_iter().filter(|m| reps.contains(&m.repetition)) {
                answers += m.test_size as u64;
                done(
                    m.repetition,
                    Measurement {
                        accuracy: m.accuracy,
                        nonprivate_accuracy: m.nonprivate_accuracy,
                        n_train: m.n_train,
                        dim,
                        classes,
                        test_size: m.test_size,
                        teachers: m.teachers,
                        lambda: None,
                        lambda_source: "none".into(),
                        clip: m.clip,
                        noise: m.noise,
                        noise_param: m.noise_param,
                        noise_multiplier: m.noise_multiplier,
                        rho: None,
                        valid_guarantee: m.valid_guarantee,
                        bias: 0.0,
                        loss: privpred_core::Loss::Softmax,
                        cv_draws: None,
                        dataset_checksum: m.dataset_checksum.clone(),
                        dataset_labels: m.labels.join(";"),
                        preprocessing: "per-channel normalisation".into(),
                        data_dependent_steps: String::new(),
                        // fig7's calibrations (privpred_nn::calib::dpsgd and
                        // subsample_aggregate) are replace-one; add-remove is refused above.
                        neighbours: privpred_core::Neighbours::ReplaceOne,
                        // ν is the fixed public RESNET_CLIP; T is fixed: nothing is selected
                        selection: Some(privpred_study::selection::public()),
                        selection_label: privpred_study::selection::label(
                            &privpred_study::selection::public(),
                        ),
                    },
                )?;
            }
            Ok(GroupTiming {
                train_s: start.elapsed().as_secs_f64(),
                predict_s: 0.0,
                answers,
            })
        }
    }
}
