//! `privpred train`: train a non-private or private linear model and write it as safetensors
//! (weights + guarantee + fitted preprocessing in the header).
//!
//! With `--model resnet20|resnet-tiny` (build with `--features nn`) the same command trains
//! a ResNet on an image dataset instead (see `train_nn`).
//!
//! Release path: without `--seed` every random choice (noise, partition, sampling, hold-out)
//! comes from the OS-seeded cryptographic generator and no seed is recorded. With `--seed`
//! the run is a reproducible experiment and the seed is recorded in the artifact.

use crate::exit::usage;
use anyhow::Context;
use privpred_core::{Budget, CalibrationMode, Method, Privacy};
use privpred_data::split::holdout_unit;
use privpred_data::{DatasetSpec, LoadOptions, Preprocessing, load};
use privpred_linear::artifact::{StoredModel, save_model};
use privpred_linear::dpsgd::CLIP_GRID;
use privpred_linear::methods::{self, SeedPolicy};
use privpred_linear::train::{LAMBDA_GRID, cv_lambda_nonprivate};
use privpred_linear::{LbfgsOptions, LinearError, MethodConfig, fit_logistic, train_private};
use rand::RngExt;
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

/// What to train: the non-private baseline or one of the five private methods.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrainMethod {
    /// The non-private reference model (no guarantee).
    NonPrivate,
    /// Output perturbation: noise on θ after training.
    ModelSensitivity,
    /// Objective perturbation: noise in the training objective.
    LossPerturbation,
    /// DP-SGD with Poisson sampling and joint per-example clipping (needs δ > 0).
    DpSgd,
    /// Noise on each answer's logits (spends the inference budget).
    PredictionSensitivity,
    /// Exponential mechanism over T teachers' votes (spends the inference budget).
    #[value(alias = "subsample-and-aggregate")]
    SubsampleAggregate,
}

impl TrainMethod {
    fn method(self) -> Option<Method> {
        match self {
            TrainMethod::NonPrivate => None,
            TrainMethod::ModelSensitivity => Some(Method::ModelSensitivity),
            TrainMethod::LossPerturbation => Some(Method::LossPerturbation),
            TrainMethod::DpSgd => Some(Method::DpSgd),
            TrainMethod::PredictionSensitivity => Some(Method::PredictionSensitivity),
            TrainMethod::SubsampleAggregate => Some(Method::SubsampleAggregate),
        }
    }
}

/// Arguments of `privpred train`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Method to train.
    #[arg(value_enum)]
    pub method: TrainMethod,
    /// Dataset: mnist, fashion-mnist, cifar10, mnist1m, digits, csv:PATH, idx:DIR, images:PATH.
    #[arg(long)]
    pub dataset: String,
    /// Directory searched first for the dataset files.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Privacy loss ε > 0 (required for private methods).
    #[arg(long, allow_negative_numbers = true)]
    pub epsilon: Option<f64>,
    /// Failure probability δ ∈ [0, 1) (0 = pure ε-DP; DP-SGD needs δ > 0).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub delta: f64,
    /// Inference budget B ≥ 1 for prediction sensitivity and subsample-and-aggregate.
    #[arg(long, default_value_t = 100)]
    pub budget: u64,
    /// L2 strength λ > 0, or `cv` to cross-validate over the SPEC §6 grid on a 10 % hold-out.
    /// Subsample-and-aggregate: the teachers' λ (default 0, as in the paper).
    #[arg(long, default_value = "cv", allow_negative_numbers = true)]
    pub lambda: String,
    /// Which analysis calibrates the noise.
    #[arg(long, value_enum, default_value_t = CalibrationMode::Corrected)]
    pub calibration: CalibrationMode,
    /// The neighbouring relation of the guarantee (SPEC §1): one example replaced (default)
    /// or added/removed. Recorded in the artifact.
    #[arg(long, value_enum, default_value_t = privpred_core::Neighbours::ReplaceOne)]
    pub neighbours: privpred_core::Neighbours,
    /// Experiment seed (reproducible, recorded). Without it: OS-seeded release generator.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Subsample-and-aggregate: number of teachers T (default 256 for linear models, 16 for
    /// ResNets).
    #[arg(long)]
    pub teachers: Option<usize>,
    /// DP-SGD: clip ν > 0, or `cv` (SPEC §6 grid; linear models only). Default: `cv` for
    /// linear models, 1 for ResNets.
    #[arg(long, allow_negative_numbers = true)]
    pub clip: Option<String>,
    /// DP-SGD (and ResNet training): expected batch size b (default 256 linear, 600 ResNet).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// DP-SGD (and ResNet training): epochs (default 20 linear; ResNet: 100, teachers 500).
    #[arg(long, allow_negative_numbers = true)]
    pub epochs: Option<f64>,
    /// DP-SGD (and ResNet training): initial learning rate (default 1 linear, 0.1 ResNet).
    #[arg(long, allow_negative_numbers = true)]
    pub learning_rate: Option<f64>,
    /// Model: `linear` (logistic regression), or with `--features nn` a ResNet on image data:
    /// `resnet20` (the paper's ResNet-20 with GroupNorm) or `resnet-tiny` (widths 4/8/8, one
    /// block per stage: for tests and quick checks).
    #[arg(long, default_value = "linear")]
    pub model: String,
    /// Preprocessing: project onto the top-D principal components (fitted on the training set).
    #[arg(long)]
    pub pca: Option<usize>,
    /// Preprocessing: keep only the first C′ classes.
    #[arg(long)]
    pub classes: Option<usize>,
    /// Preprocessing: keep a random subset of N training examples.
    #[arg(long)]
    pub subsample: Option<usize>,
    /// Preprocessing: the bias feature's value v in [0, 1): rows become [x·√(1 − v²), v];
    /// 0 = no bias feature (the default); `--bias` alone means √½, the value before it was a
    /// parameter.
    #[arg(long, num_args = 0..=1, default_missing_value = "0.7071067811865476", allow_negative_numbers = true)]
    pub bias: Option<String>,
    /// Private draws averaged per cross-validated λ (≥ 1; default 1). DP-SGD's clip ν is
    /// selected with one run per value.
    #[arg(long, default_value_t = methods::CV_DRAWS_DEFAULT)]
    pub cv_draws: usize,
    /// Preprocessing: unit-ball rule (normalize, clip:R, max-norm).
    #[arg(long, default_value = "normalize")]
    pub unit_ball: String,
    /// ResNet training engine: `cpu` (privpred-nn's own) or `torch` (libtorch, build with
    /// `--features torch`: CUDA when present, CPU otherwise). Default: $PRIVPRED_NN_ENGINE,
    /// else `torch` when built in and a CUDA device is present, else `cpu`.
    #[arg(long)]
    pub engine: Option<String>,
    /// Output file (safetensors).
    #[arg(long)]
    pub out: PathBuf,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Refuses an `--out` whose directory does not exist (exit 2, before any training).
pub(crate) fn check_out_dir(out: &std::path::Path) -> anyhow::Result<()> {
    if let Some(parent) = out.parent()
        && !parent.as_os_str().is_empty()
        && !parent.is_dir()
    {
        return Err(usage(format!(
            "invalid out = {}: directory {} does not exist",
            out.display(),
            parent.display()
        )));
    }
    Ok(())
}

/// Prints a trained model's guarantee (or that it has none) for `train`'s summary.
pub(crate) fn print_guarantee(c: Option<&privpred_core::Calibration>) {
    match c {
        Some(c) => {
            println!(
                "guarantee: ({}, {})-DP for {} neighbours, budget {}, calibration {}{}",
                c.privacy.epsilon,
                c.privacy.delta,
                c.neighbours,
                c.budget
                    .get()
                    .map_or("unlimited".to_string(), |b| format!("{b} answers")),
                c.calibration.name(),
                if c.valid_guarantee {
                    ""
                } else {
                    " (NOT a valid guarantee: reproduction only)"
                }
            );
            println!("noise: {:?}", c.noise);
        }
        None => println!("no privacy guarantee (non-private reference model)"),
    }
}

fn lin(e: LinearError) -> anyhow::Error {
    if e.is_user_error() {
        usage(e)
    } else {
        anyhow::Error::new(e)
    }
}

pub(crate) fn parse_value_or_cv(name: &str, s: &str) -> anyhow::Result<Option<f64>> {
    if s == "cv" {
        return Ok(None);
    }
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
        _ => Err(usage(format!(
            "invalid {name} = {s}: must be a finite number > 0 or `cv`"
        ))),
    }
}

/// Runs `privpred train`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    // ---- validate the arguments before any work
    let method = args.method.method();
    let privacy = match (method, args.epsilon) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(usage("invalid epsilon: private methods need --epsilon > 0"));
        }
        (Some(_), Some(e)) => Some(Privacy::new(e, args.delta)?),
    };
    if let Some(m) = method {
        // A method without an analysis under the chosen relation is refused before any work.
        privpred_core::check_relation(m, args.neighbours).map_err(usage)?;
    }
    match args.model.as_str() {
        "linear" if args.engine.is_some() => {
            return Err(usage(
                "--engine applies to ResNet models only (--model resnet20|resnet-tiny); linear models train on the CPU",
            ));
        }
        "linear" => {}
        "resnet20" | "resnet-tiny" => {
            #[cfg(feature = "nn")]
            return super::train_nn::run(&args, started);
            #[cfg(not(feature = "nn"))]
            return Err(usage(format!(
                "--model {} trains a ResNet and needs a build with `cargo build --release -p privpred --features nn`",
                args.model
            )));
        }
        other => {
            return Err(usage(format!(
                "invalid model = {other}: expected linear, resnet20 or resnet-tiny"
            )));
        }
    }
    let lambda_arg = parse_value_or_cv("lambda", &args.lambda)?;
    let clip_arg = parse_value_or_cv("clip", args.clip.as_deref().unwrap_or("cv"))?;
    let needs_lambda = matches!(
        method,
        None | Some(
            Method::ModelSensitivity | Method::LossPerturbation | Method::PredictionSensitivity
        )
    );
    if needs_lambda && lambda_arg == Some(0.0) && method.is_some() {
        return Err(usage(
            "invalid lambda = 0: this method needs λ > 0 (its sensitivity is 2K/(Nλ))",
        ));
    }
    if clip_arg == Some(0.0) {
        return Err(usage("invalid clip = 0: must be > 0"));
    }
    let budget = Budget::finite(args.budget)?;
    let unit_ball = args.unit_ball.parse().map_err(usage)?;
    let bias = match &args.bias {
        Some(b) => privpred_data::preprocess::parse_bias(b).map_err(usage)?,
        None => 0.0,
    };
    let cv_draws = methods::check_cv_draws(args.cv_draws).map_err(usage)?;
    check_out_dir(&args.out)?;

    // ---- randomness: experiment seed or release generator
    let (mut rng, seed_policy) = match args.seed {
        Some(s) => (
            privpred_core::noise::seeded_rng(s),
            SeedPolicy::Seeded { seed: s },
        ),
        None => (privpred_core::noise::release_rng()?, SeedPolicy::OsRandom),
    };

    // ---- data
    let spec = DatasetSpec::parse(&args.dataset)?;
    let opts = LoadOptions {
        data_dir: args.data_dir.clone(),
        ..LoadOptions::default()
    };
    let splits = load(&spec, &opts).with_context(|| format!("loading dataset {}", args.dataset))?;
    let recipe = Preprocessing {
        classes: args.classes,
        subsample: args.subsample,
        pca: args.pca,
        unit_ball,
        ..Preprocessing::default()
    }
    .with_bias(bias);
    let prep_seed: u64 = rng.random();
    let fitted = recipe.fit(&splits.train, prep_seed)?;
    // owned: preprocessing works in place on the loaded split (one copy of the features)
    let provenance = splits.train.provenance.clone();
    let train = fitted.apply_train_owned(splits.train)?;
    let holdout_seed: u64 = rng.random();
    let lbfgs = LbfgsOptions::default();

    // ---- cross-validation (privacy cost ignored, as in the paper; recorded in the artifact)
    let mut cv_record = serde_json::Value::Null;
    let lambda = match (method, lambda_arg) {
        (Some(Method::SubsampleAggregate), l) => l.unwrap_or(0.0),
        (Some(Method::DpSgd), _) => 0.0,
        (_, Some(l)) => l,
        (m, None) => {
            let (tr, ho) = holdout_unit(&train, 0.1, holdout_seed);
            let cv = match m {
                None => cv_lambda_nonprivate(&tr, &ho, &LAMBDA_GRID, &lbfgs).map_err(lin)?,
                Some(m) => {
                    let mut cfg =
                        MethodConfig::new(m, args.calibration, privacy.expect("checked"), budget);
                    cfg.neighbours = args.neighbours;
                    methods::cv_lambda_draws(&cfg, &tr, &ho, &LAMBDA_GRID, cv_draws, &mut rng)
                        .map_err(lin)?
                }
            };
            // the non-private model has no mechanism to draw: its score is one evaluation
            let draws = if m.is_some() { cv_draws } else { 1 };
            cv_record = json!({"parameter": "lambda", "holdout_fraction": 0.1, "draws": draws, "scores": cv.scores, "chosen": cv.best});
            cv.best
        }
    };

    let (model, summary) = match method {
        None => {
            let fit = fit_logistic(&train, lambda, None, &lbfgs).map_err(lin)?;
            let s = json!({
                "method": "non-private", "lambda": lambda, "n": train.n,
                "lbfgs": fit.lbfgs,
            });
            (StoredModel::NonPrivate(fit.model), s)
        }
        Some(m) => {
            let mut cfg = MethodConfig::new(m, args.calibration, privacy.expect("checked"), budget);
            cfg.neighbours = args.neighbours;
            cfg.lambda = if m == Method::SubsampleAggregate {
                1e-4
            } else {
                lambda
            };
            cfg.teacher_lambda = if m == Method::SubsampleAggregate {
                lambda
            } else {
                0.0
            };
            cfg.teachers = args.teachers.unwrap_or(256);
            cfg.seed_policy = seed_policy;
            cfg.dp_sgd.batch_size = args.batch_size.unwrap_or(256);
            cfg.dp_sgd.epochs = args.epochs.unwrap_or(20.0);
            cfg.dp_sgd.learning_rate = args.learning_rate.unwrap_or(1.0);
            cfg.dp_sgd.clip = clip_arg;
            if m == Method::DpSgd && clip_arg.is_none() {
                let (tr, ho) = holdout_unit(&train, 0.1, holdout_seed);
                let cv = methods::cv_clip(&cfg, &tr, &ho, &CLIP_GRID, &mut rng).map_err(lin)?;
                cv_record = json!({"parameter": "clip", "holdout_fraction": 0.1, "draws": 1, "scores": cv.scores, "chosen": cv.best});
                cfg.dp_sgd.clip = Some(cv.best);
            }
            let p = train_private(&cfg, &train, &mut rng).map_err(lin)?;
            let s = json!({
                "method": m.name(),
                "calibration": p.calibration.calibration.name(),
                "neighbours": p.calibration.neighbours.name(),
                "epsilon": p.calibration.privacy.epsilon,
                "delta": p.calibration.privacy.delta,
                "budget": p.calibration.budget.get(),
                "n": train.n,
                "lambda": p.lambda,
                "teachers": p.teachers,
                "clip": p.clip,
                "noise": p.calibration.noise,
                "valid_guarantee": p.calibration.valid_guarantee,
                "notes": p.calibration.notes,
                "optimization": p.optimization.map(|o| json!({
                    "gradient_norm": o.gradient_norm,
                    "gradient_norm_bound": o.gradient_norm_bound,
                    "rounding_bound": o.rounding_bound,
                    "refinement_evaluations": o.refinement_evaluations,
                })),
            });
            (StoredModel::Private(Box::new(p)), s)
        }
    };
    let extra = json!({
        "dataset": args.dataset,
        "dataset_provenance": {"name": provenance.name, "checksum": provenance.checksum, "verified": provenance.verified, "labels": provenance.labels},
        "preprocessing_steps": fitted.steps(),
        "bias": fitted.recipe.bias(),
        "cross_validation": cv_record,
        "seed": args.seed,
        "trained_with": format!("privpred {}", env!("CARGO_PKG_VERSION")),
    });
    save_model(&args.out, &model, &fitted, extra).map_err(lin)?;
    let mut summary = summary;
    // erratum 4.9: a seeded private model is an experiment (predict and serve refuse it)
    summary["release"] = json!(privpred_linear::artifact::release_label(&model));
    summary["out"] = json!(args.out.display().to_string());
    summary["seconds"] = json!(started.elapsed().as_secs_f64());
    summary["cross_validation"] = cv_record;
    summary["bias"] = json!(fitted.recipe.bias());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!(
            "trained {} on {} (N = {}, D = {}, C = {})",
            summary["method"].as_str().unwrap_or("?"),
            args.dataset,
            train.n,
            train.d,
            train.classes
        );
        print_guarantee(model.private().map(|p| &p.calibration));
        if let Some(l) = summary["lambda"].as_f64() {
            println!(
                "lambda: {l:e}{}",
                if summary["cross_validation"]["parameter"] == "lambda" {
                    " (cross-validated)"
                } else {
                    ""
                }
            );
        }
        if let Some(c) = summary["clip"].as_f64() {
            println!(
                "clip: {c:e}{}",
                if summary["cross_validation"]["parameter"] == "clip" {
                    " (cross-validated)"
                } else {
                    ""
                }
            );
        }
        println!(
            "seed: {}",
            args.seed.map_or("OS random (release)".to_string(), |s| format!(
                "{s} (experiment: its noise can be regenerated from the seed; predict and serve refuse it)"
            ))
        );
        if let Some(o) = model.private().and_then(|p| p.optimization) {
            println!(
                "certified fit: ||grad J||_2 = {:.3e} <= gamma = {:.3e} (erratum 4.8)",
                o.gradient_norm, o.gradient_norm_bound
            );
        }
        println!(
            "wrote {} in {:.1} s",
            args.out.display(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
