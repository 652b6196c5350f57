//! `privpred train`: train a non-private or private linear model and write it as a privpred
//! model file (a signed envelope whose payload holds the weights, the guarantee and the
//! fitted preprocessing).
//!
//! With `--model resnet20|resnet-tiny` (build with `--features nn`) the same command trains
//! a ResNet on an image dataset instead (see `train_nn`).
//!
//! Release path: without `--seed` every random choice (noise, partition, sampling, hold-out)
//! comes from the OS-seeded cryptographic generator and no seed is recorded. With `--seed`
//! the run is a reproducible experiment and the seed is recorded in the artifact.

mod checks;
mod select;

use super::args::{self, EngineArg, ModelArg, ValueOrCv};
use crate::exit::usage;
use anyhow::Context;
use checks::*;
use privpred_core::{Budget, CalibrationMode, Method, Privacy, SelectionMethod, defaults};
use privpred_core::{ParamGuard, PrivRng};
use privpred_data::split::holdout_unit;
use privpred_data::{
    DatasetSpec, FittedPreprocessing, LoadOptions, Preprocessing, Provenance, UnitBall,
    UnitBallDataset, load,
};
use privpred_linear::artifact::StoredModel;
use privpred_linear::dpsgd::CLIP_GRID;
use privpred_linear::methods::{self, Knob, MethodConfig, SeedPolicy};
use privpred_linear::train::LAMBDA_GRID;
use privpred_linear::{LbfgsOptions, LinearError, TrainParams, train_private};
use rand::RngExt;
use select::*;
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
    /// The private method, `None` for the non-private reference.
    pub fn method(self) -> Option<Method> {
        match self {
            TrainMethod::NonPrivate => None,
            TrainMethod::ModelSensitivity => Some(Method::ModelSensitivity),
            TrainMethod::LossPerturbation => Some(Method::LossPerturbation),
            TrainMethod::DpSgd => Some(Method::DpSgd),
            TrainMethod::PredictionSensitivity => Some(Method::PredictionSensitivity),
            TrainMethod::SubsampleAggregate => Some(Method::SubsampleAggregate),
        }
    }

    /// The name as the CLI spells it.
    #[cfg_attr(not(feature = "nn"), allow(dead_code))]
    pub fn name(self) -> &'static str {
        self.method().map_or("non-private", Method::name)
    }
}

/// Arguments of `privpred train`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Method to train.
    #[arg(value_enum)]
    pub method: TrainMethod,
    /// Dataset: mnist, fashion-mnist, cifar10, mnist1m, digits, breast-cancer, wine, fair,
    /// csv:PATH, parquet:PATH, csv-pixels:PATH, idx:DIR, images:PATH.
    #[arg(long)]
    pub dataset: String,
    /// A table's schema (JSON): the label column and its classes, each numeric column's
    /// public bounds, each categorical column's public categories (docs/tables.md). Needed
    /// for csv: and parquet: tables; recorded in the model so queries are mapped the same way.
    #[arg(long, value_name = "FILE")]
    pub schema: Option<PathBuf>,
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
    #[arg(long, default_value_t = defaults::BUDGET)]
    pub budget: u64,
    /// L2 strength λ: a public value > 0 (chosen without the data: costs nothing), `private`
    /// (the private split selection over the grid {1e-5, …, 0.5}: inside the guarantee; the
    /// release is trained on the 80 % of the training set the selection does not use) or `cv`
    /// (the paper's selection on a 10 % hold-out, without privacy: the guarantee is then
    /// marked not valid). Default: for private methods the public rule from N, d, C, ε and B
    /// (docs/tables.md; costs nothing; N̂ = --public-n in place of N under add-remove
    /// neighbours), `cv` for the non-private reference. Subsample-and-aggregate: the teachers' λ (default 0.01).
    #[arg(long, allow_negative_numbers = true, value_parser = args::positive_or_cv)]
    pub lambda: Option<ValueOrCv>,
    /// Which analysis calibrates the noise.
    #[arg(long, value_enum, default_value_t = CalibrationMode::Corrected)]
    pub calibration: CalibrationMode,
    /// The neighbouring relation of the guarantee (docs/guarantees.md#neighbouring-relations): one example replaced (default)
    /// or added/removed. Recorded in the artifact.
    #[arg(long, value_enum, default_value_t = privpred_core::Neighbours::ReplaceOne)]
    pub neighbours: privpred_core::Neighbours,
    /// Under --neighbours add-remove (linear loss perturbation and DP-SGD): the public
    /// training-set size N̂ the calibration uses in place of the exact N, which that relation
    /// makes private (DP-SGD's sampling rate q = b/N̂ and its steps, loss perturbation's floor
    /// N̂·λ on its regulariser); the guarantee records N̂ and nothing released depends on the
    /// exact N. Required under add-remove, refused under replace-one.
    #[arg(long, value_name = "N")]
    pub public_n: Option<usize>,
    /// Linear models: the output layer. `softmax` (one output per class) or, for two-class
    /// data, `logistic` (one sigmoid output: less noise for the same guarantee; model
    /// sensitivity, prediction sensitivity, loss perturbation and DP-SGD). Default: logistic
    /// for two-class data with those methods, softmax otherwise. Recorded in the artifact.
    #[arg(long, value_enum)]
    pub loss: Option<privpred_core::Loss>,
    /// Experiment seed (reproducible, recorded). Without it: OS-seeded release generator.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Subsample-and-aggregate: number of teachers T (default for linear models the public
    /// rule clamp(⌊N/6⌋, 1, 256) of the N training rows; 16 for ResNets).
    #[arg(long)]
    pub teachers: Option<usize>,
    /// DP-SGD: clip ν: a public value > 0 (costs nothing), `private` (private split selection
    /// over {5e-4, …, 0.5}, inside the guarantee) or `cv` (non-private hold-out selection,
    /// outside the guarantee); the last two for linear models only. Default: the public rule's
    /// 1 for linear models, 1 for ResNets.
    #[arg(long, allow_negative_numbers = true, value_parser = args::positive_or_cv)]
    pub clip: Option<ValueOrCv>,
    /// DP-SGD (and ResNet training): expected batch size b (default for linear models the
    /// public rule clamp(⌊√N⌋, 1, 256) of the N training rows, N̂ = --public-n in place of N
    /// under add-remove; 600 ResNet).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// DP-SGD (and ResNet training): epochs (default linear: the public rule's for ε,
    /// 20·max(1, ε)^0.4 up to 100, docs/tables.md; ResNet: 100, teachers 500).
    #[arg(long, allow_negative_numbers = true)]
    pub epochs: Option<f64>,
    /// DP-SGD (and ResNet training): initial learning rate (default 1 linear, 0.1 ResNet).
    #[arg(long, allow_negative_numbers = true)]
    pub learning_rate: Option<f64>,
    /// Model: `linear` (logistic regression), or with `--features nn` a ResNet on image data:
    /// `resnet20` (the paper's ResNet-20 with GroupNorm) or `resnet-tiny` (widths 4/8/8, one
    /// block per stage: for tests and quick checks).
    #[arg(long, value_enum, default_value_t = ModelArg::Linear)]
    pub model: ModelArg,
    /// Preprocessing: project onto the top-D principal components (fitted on the training set).
    #[arg(long)]
    pub pca: Option<usize>,
    /// The class set, a public parameter: a count C (labels 0..C-1; a label outside is an
    /// error) or, for an image folder, its class names NAME,NAME,... in label order. Needed by
    /// private methods on data without published classes (csv-pixels:, idx:, images:);
    /// named data sets and schema tables have theirs. Fewer than a source's published
    /// classes keeps the rows of the first C (a filter that makes N depend on the data:
    /// private methods need --neighbours add-remove for it).
    #[arg(long, value_parser = args::classes)]
    pub classes: Option<args::ClassesArg>,
    /// Preprocessing: keep a random subset of N training examples.
    #[arg(long)]
    pub subsample: Option<usize>,
    /// Preprocessing: the bias feature's value v in [0, 1): rows become [x·√(1 − v²), v];
    /// 0 = no bias feature (the default); `--bias` alone means √½, the value before it was a
    /// parameter.
    #[arg(long, num_args = 0..=1, default_missing_value = "0.7071067811865476", allow_negative_numbers = true)]
    pub bias: Option<String>,
    /// Private draws averaged per cross-validated λ or DP-SGD clip ν (1..=1000; default 5,
    /// chosen on the training hold-out, docs/study.md): each value is scored by the mean
    /// hold-out accuracy of this many private runs.
    #[arg(long, default_value_t = methods::CV_DRAWS_DEFAULT)]
    pub cv_draws: usize,
    /// Preprocessing: unit-ball rule (normalize, clip:R, max-norm). Default: `normalize` for
    /// images, `clip:1` for a table read through its schema (its rows are already inside).
    #[arg(long, value_parser = args::unit_ball)]
    pub unit_ball: Option<UnitBall>,
    /// ResNet training engine: `cpu` (privpred-nn's own) or `torch` (libtorch, build with
    /// `--features torch`: CUDA when present, CPU otherwise). Default: $PRIVPRED_NN_ENGINE,
    /// else `torch` when built in and a CUDA device is present, else `cpu`.
    #[arg(long, value_enum)]
    pub engine: Option<EngineArg>,
    /// Output file: a signed model file (sealed when the model holds non-private parameters).
    #[arg(long)]
    pub out: PathBuf,
    /// The key the model file is signed with.
    #[command(flatten)]
    pub signing: super::keys::SignArgs,
    /// The data owner's privacy odometer (an SQLite path or a postgres:// URL, set up with
    /// `privpred odometer limit`): the fit's whole guarantee is charged against the dataset's
    /// limit before training, and the fit is refused if it would pass it.
    #[arg(long, value_name = "URL")]
    pub odometer: Option<String>,
    /// The dataset's key in the odometer (default: a privately drafted `--schema`'s
    /// `drafted.odometer_key`, otherwise the SHA-256 identity of its training rows).
    #[arg(long, value_name = "KEY", requires = "odometer")]
    pub odometer_key: Option<String>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

fn lin(e: LinearError) -> anyhow::Error {
    if e.is_user_error() {
        usage(e)
    } else {
        anyhow::Error::new(e)
    }
}

/// Runs `privpred train`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    // ---- validate the arguments before any work
    let method = args.method.method();
    let privacy = match (method, args.epsilon) {
        (None, Some(e)) => {
            return Err(usage(format!(
                "invalid epsilon = {e} for non-private: the non-private reference model has no privacy guarantee; drop --epsilon or choose a private method"
            )));
        }
        (None, None) if args.delta != 0.0 => {
            return Err(usage(format!(
                "invalid delta = {} for non-private: the non-private reference model has no privacy guarantee; drop --delta or choose a private method",
                args.delta
            )));
        }
        (None, None) => None,
        (Some(_), None) => {
            return Err(usage("invalid epsilon: private methods need --epsilon > 0"));
        }
        (Some(_), Some(e)) => Some(Privacy::new(e, args.delta)?),
    };
    if let Some(m) = method {
        // A method without an analysis under the chosen relation is refused before any work.
        privpred_core::check_relation(m, args.neighbours).map_err(usage)?;
    }
    // the keys before any work: a model that cannot be signed (and sealed) is not trained
    let keys = args.signing.keys()?;
    if privpred_release::must_seal(method) && keys.sealing.is_none() {
        return Err(usage(format!(
            "a {} model holds non-private parameters and is sealed: no `{}` next to the signing key (write a key set with `privpred key new --out DIR`)",
            args.method.name(),
            privpred_release::keys::SEALING_FILE
        )));
    }
    if method == Some(Method::DpSgd) && privacy.is_some_and(|p| p.is_pure()) {
        // before any work (and any odometer reservation): DP-SGD's accountants need δ > 0
        return Err(usage(
            "invalid delta = 0 for dp-sgd: DP-SGD needs delta in (0, 1) (its accountants bound (epsilon, delta) with delta > 0)",
        ));
    }
    match args.model {
        ModelArg::Linear if args.engine.is_some() => Err(usage(
            "--engine applies to ResNet models only (--model resnet20|resnet-tiny); linear models train on the CPU",
        )),
        ModelArg::Linear => train_linear(&args, privacy, started, &keys),
        ModelArg::Resnet20 | ModelArg::ResnetTiny if args.odometer.is_some() => Err(usage(
            "--odometer applies to linear models; ResNet training does not charge the odometer yet",
        )),
        ModelArg::Resnet20 | ModelArg::ResnetTiny => train_resnet(&args, privacy, started, &keys),
    }
}

/// `--model resnet20|resnet-tiny`: refuses what does not apply to a ResNet, then trains one
/// (`train_nn`).
#[cfg(feature = "nn")]
fn train_resnet(
    args: &Args,
    privacy: Option<Privacy>,
    started: Instant,
    keys: &privpred_release::WriteKeys,
) -> anyhow::Result<()> {
    let method = match args.method {
        TrainMethod::NonPrivate | TrainMethod::DpSgd | TrainMethod::SubsampleAggregate => {
            args.method.method()
        }
        other => {
            return Err(usage(format!(
                "invalid method = {} for --model {}: ResNets train as non-private, dp-sgd or subsample-aggregate (the other methods need a convex linear model)",
                other.name(),
                args.model.as_str()
            )));
        }
    };
    if method.is_some() {
        // the rule lives with the ResNet calibrations
        privpred_nn::calib::check_neighbours(args.neighbours).map_err(|why| {
            usage(format!(
                "--neighbours {} is refused for --model {}: {why}; train it under replace-one (the default), or a linear model with --public-n",
                args.neighbours,
                args.model.as_str()
            ))
        })?;
    }
    for (given, name) in [
        (args.pca.is_some(), "--pca"),
        (args.loss.is_some(), "--loss"),
        (args.bias.is_some(), "--bias"),
        (args.lambda.is_some(), "--lambda"),
        (args.unit_ball.is_some(), "--unit-ball"),
        (args.schema.is_some(), "--schema"),
        (args.public_n.is_some(), "--public-n"),
    ] {
        if given {
            return Err(usage(format!(
                "{name} applies to linear models only; a ResNet trains on raw pixels with fixed normalisation and no L2 (as in the paper)"
            )));
        }
    }
    super::train_nn::run(
        &super::train_nn::Request {
            method,
            method_name: args.method.name(),
            model: args.model,
            privacy,
            dataset: &args.dataset,
            data_dir: args.data_dir.as_deref(),
            budget: args.budget,
            calibration: args.calibration,
            neighbours: args.neighbours,
            seed: args.seed,
            teachers: args.teachers,
            clip: args.clip,
            batch_size: args.batch_size,
            epochs: args.epochs,
            learning_rate: args.learning_rate,
            subsample: args.subsample,
            classes: args.classes.as_ref(),
            engine: args.engine,
            out: &args.out,
            keys,
            json: args.json,
        },
        started,
    )
}

#[cfg(not(feature = "nn"))]
fn train_resnet(
    args: &Args,
    _: Option<Privacy>,
    _: Instant,
    _: &privpred_release::WriteKeys,
) -> anyhow::Result<()> {
    Err(usage(format!(
        "--model {} trains a ResNet and needs a build with `cargo build --release -p privpred --features nn`",
        args.model.as_str()
    )))
}

/// The training set after the fitted preprocessing, with what the artifact records of it.
struct LinearData {
    train: UnitBallDataset,
    fitted: FittedPreprocessing,
    provenance: Provenance,
    /// Seed of the cross-validation hold-out (drawn after the preprocessing's).
    holdout_seed: u64,
    /// The dataset's odometer key (with `--odometer`).
    odometer_key: Option<String>,
}

/// Loads the dataset and fits the preprocessing on its training split (two draws of `rng`:
/// the preprocessing's seed, then the hold-out's).
fn load_linear_data(
    args: &Args,
    plan: &LinearPlan,
    rng: &mut PrivRng,
) -> anyhow::Result<LinearData> {
    let spec = DatasetSpec::parse(&args.dataset)?;
    let opts = LoadOptions {
        data_dir: args.data_dir.clone(),
        schema: super::shared::read_schema(args.schema.as_deref())?,
        classes: args.classes.as_ref().and_then(args::ClassesArg::as_count),
        class_names: args.classes.as_ref().and_then(args::ClassesArg::names),
        ..LoadOptions::default()
    };
    let splits = load(&spec, &opts).with_context(|| format!("loading dataset {}", args.dataset))?;
    super::shared::check_two_classes(&splits.train)?;
    check_public_classes(args, &splits.train)?;
    check_add_remove_input(args, &splits.train)?;
    let base = Preprocessing::for_data(&splits.train).map_err(usage)?;
    let identity = || {
        let (d, f, y) = splits.training_input();
        privpred_answer::odometer::dataset_identity(d, &f, &y)
    };
    let drafted = opts.schema.as_ref();
    let odometer_key = (args.odometer.as_ref())
        .map(|_| {
            privpred_answer::odometer::fit_key(args.odometer_key.as_deref(), drafted, identity)
        })
        .transpose()
        .map_err(super::odometer::odo_err)?;
    let recipe = Preprocessing {
        classes: args.classes.as_ref().map(args::ClassesArg::count),
        subsample: args.subsample,
        pca: args.pca,
        unit_ball: args.unit_ball.unwrap_or(base.unit_ball),
        ..base
    }
    .with_bias(plan.bias);
    let prep_seed: u64 = rng.random();
    let fitted = recipe.fit(&splits.train, prep_seed)?;
    // owned: preprocessing works in place on the loaded split (one copy of the features)
    let provenance = splits.train.provenance.clone();
    let train = fitted.apply_train_owned(splits.train)?;
    let holdout_seed: u64 = rng.random();
    Ok(LinearData {
        train,
        fitted,
        provenance,
        holdout_seed,
        odometer_key,
    })
}

/// The method's parameters from the arguments (λ, teachers, DP-SGD's schedule and clip —
/// `None` for `--clip cv`), unchecked: [`TrainParams::check_for`] validates them, with the
/// library's defaults ([`privpred_linear::settings`], the entry Python trains through too)
/// for what is not given.
fn train_params(
    args: &Args,
    m: Method,
    privacy: Privacy,
    budget: Budget,
    (lambda, n): (f64, usize),
    seed_policy: SeedPolicy,
) -> TrainParams {
    use privpred_linear::settings::{ClipChoice, MethodSettings};
    let settings = MethodSettings {
        method: m,
        mode: args.calibration,
        privacy,
        budget,
        neighbours: args.neighbours,
        public_n: args.public_n,
        loss: args.loss.unwrap_or_default(),
        seed_policy,
        teachers: args.teachers,
        batch_size: args.batch_size,
        epochs: args.epochs,
        learning_rate: args.learning_rate,
        clip: match args.clip {
            None => ClipChoice::Default,
            Some(c) => c.value().map_or(ClipChoice::Selected, ClipChoice::Given),
        },
    };
    settings.params(lambda, n)
}

/// What the linear path trains with, after validation.
struct LinearPlan {
    method: Option<Method>,
    privacy: Option<Privacy>,
    budget: Budget,
    seed_policy: SeedPolicy,
    /// The bias feature's value (0 = none).
    bias: f64,
    /// Private draws averaged per cross-validated λ or clip ν.
    cv_draws: usize,
}

/// Trains a private linear model (selecting DP-SGD's clip when asked); returns the model and
/// the summary.
fn fit_private(
    args: &Args,
    plan: &LinearPlan,
    m: Method,
    data: &LinearData,
    mut chosen: Chosen,
    rng: &mut PrivRng,
) -> anyhow::Result<(StoredModel, serde_json::Value, serde_json::Value)> {
    let privacy = plan.privacy.expect("checked");
    let train_n = chosen.final_train.as_ref().unwrap_or(&data.train).n;
    let mut params = train_params(
        args,
        m,
        privacy,
        plan.budget,
        (chosen.value, train_n),
        plan.seed_policy,
    );
    let clip = clip_arg(args);
    if m == Method::DpSgd && clip.value().is_none() {
        // the clip is selected with the otherwise checked params
        let sel_cfg = params
            .clone()
            .clip(privpred_linear::settings::SELECTION_CLIP)
            .check()
            .map_err(lin)?;
        chosen = if clip == ValueOrCv::Private {
            private_split(&sel_cfg, data, &CLIP_GRID, Knob::Clip, rng)?
        } else {
            let (tr, ho) = holdout_unit(&data.train, defaults::HOLDOUT_FRACTION, data.holdout_seed);
            let cv = methods::cv_clip_draws(&sel_cfg, &tr, &ho, &CLIP_GRID, plan.cv_draws, rng)
                .map_err(lin)?;
            Chosen {
                value: cv.best,
                selection: SelectionMethod::NonPrivateHoldout,
                record: cv_json("clip", plan.cv_draws, &cv.scores, cv.best),
                final_train: None,
                formula: None,
            }
        };
        params = params.clip(chosen.value);
    }
    let train = chosen.final_train.as_ref().unwrap_or(&data.train);
    let cfg = params
        .selection(chosen.selection)
        .check_for(train.n)
        .map_err(lin)?;
    let p = train_private(&cfg, train, rng).map_err(lin)?;
    let s = json!({
        "method": m.name(),
        "calibration": p.calibration.mode().name(),
        "neighbours": p.calibration.neighbours().name(),
        "loss": p.calibration.assumptions.loss.name(),
        "epsilon": p.calibration.epsilon(),
        "delta": p.calibration.delta(),
        "budget": p.calibration.budget().get(),
        "n": train.n,
        "lambda": p.lambda(),
        "teachers": p.teachers(),
        "clip": p.clip(),
        "noise": p.calibration.noise(),
        "mechanism": p.calibration.mechanism.name(),
        "valid_guarantee": p.calibration.is_valid(),
        "selection": p.calibration.selection,
        "notes": p.calibration.notes,
        "optimization": p.certificate().map(|c| json!({
            "gradient_norm_bound": c.gradient_norm_bound,
            "certified": true,
        })),
        "steps": p.dp_sgd_steps(),
    });
    Ok((StoredModel::Private(Box::new(p)), s, chosen.record))
}

/// What `train` tells the data owner and never writes into the artifact: the fit's measured
/// certificate, DP-SGD's run statistics and the cross-validation's hold-out scores, all
/// computed from the private data without noise.
const PRIVATE_NOTICE: &str = "private to the data owner: measured on the private training data without noise; not part of the release (the artifact does not hold it), do not publish";

/// The `private_diagnostics` object of `train --json` (see [`PRIVATE_NOTICE`]).
fn private_diagnostics(model: &StoredModel, cv_record: &serde_json::Value) -> serde_json::Value {
    let p = model.private();
    json!({
        "notice": PRIVATE_NOTICE,
        "optimization": p.and_then(|p| p.optimization()).map(|o| json!({
            "gradient_norm": o.gradient_norm,
            "gradient_norm_bound": o.gradient_norm_bound,
            "rounding_bound": o.rounding_bound,
            "refinement_evaluations": o.refinement_evaluations,
        })),
        "dp_sgd": p.and_then(|p| p.dp_sgd()),
        "cross_validation": cv_record,
    })
}

/// The odometer's reservation for this fit (none without `--odometer` or a dataset key): the
/// fits it cannot add up are refused first; the charge is confirmed or kept once the model is
/// saved or the fit fails.
fn reserve_fit(
    args: &Args,
    method: Option<Method>,
    privacy: Option<Privacy>,
    key: Option<&String>,
) -> anyhow::Result<Option<super::odometer::FitCharge>> {
    if args.odometer.is_some() {
        check_odometer_fit(args)?;
    }
    Ok(match (&args.odometer, key) {
        (Some(url), Some(key)) => Some(super::odometer::FitCharge::reserve(
            super::odometer::FitRequest {
                url,
                key: key.clone(),
                method,
                privacy,
                budget: args.budget,
                neighbours: args.neighbours,
                calibration: args.calibration,
            },
        )?),
        _ => None,
    })
}

/// The linear path of `privpred train`: load, preprocess, cross-validate, train, save, report.
fn train_linear(
    args: &Args,
    privacy: Option<Privacy>,
    started: Instant,
    keys: &privpred_release::WriteKeys,
) -> anyhow::Result<()> {
    let method = args.method.method();
    let budget = Budget::finite(args.budget)?;
    let bias = match &args.bias {
        Some(b) => privpred_data::preprocess::parse_bias(b).map_err(usage)?,
        None => 0.0,
    };
    let cv_draws = methods::check_cv_draws(args.cv_draws).map_err(usage)?;
    check_loss(args.loss.unwrap_or_default(), method)?;
    check_method_flags(args)?;
    check_public_preprocessing(args)?;
    super::shared::check_out_dir(&args.out)?;

    // ---- randomness: experiment seed or release generator
    let (mut rng, seed_policy) = match args.seed {
        Some(s) => (
            privpred_core::noise::seeded_rng(s),
            SeedPolicy::Seeded { seed: s },
        ),
        None => (privpred_core::noise::release_rng()?, SeedPolicy::OsRandom),
    };
    let plan = LinearPlan {
        method,
        privacy,
        budget,
        seed_policy,
        bias,
        cv_draws,
    };
    let data = load_linear_data(args, &plan, &mut rng)?;
    let resolved = with_loss(args, method, data.train.classes)?;
    let args = &resolved;
    if args.odometer.is_some() {
        check_fit_parameters(args, &plan, &data)?;
    }
    let charge = reserve_fit(args, method, privacy, data.odometer_key.as_ref())?;
    let lbfgs = LbfgsOptions::default();
    let chosen = choose_lambda(args, &plan, &data, &lbfgs, &mut rng)?;
    let chosen_formula = chosen.formula.clone();

    let (model, summary, cv_record) = match method {
        None => {
            let lambda = chosen.value;
            let fit = methods::non_private::fit(&data.train, lambda, &lbfgs).map_err(lin)?;
            let s = json!({
                "method": "non-private", "lambda": lambda, "n": data.train.n,
                "lbfgs": fit.lbfgs,
            });
            (StoredModel::NonPrivate(fit.model), s, chosen.record)
        }
        Some(m) => fit_private(args, &plan, m, &data, chosen, &mut rng)?,
    };
    let prov = &data.provenance;
    // only data-independent facts: the hold-out scores stay with the data owner
    // (`private_diagnostics`), and a private model's preprocessing is recorded without the
    // subsample's seed
    let released_prep = match method {
        Some(_) => data.fitted.for_release(),
        None => data.fitted.clone(),
    };
    // a file's hash identifies its content: a private model records it only for a dataset
    // verified against a published checksum (public data), never for the caller's own file
    let checksum = match method {
        Some(_) if !prov.verified => None,
        _ => prov.checksum.clone(),
    };
    let mut extra = json!({
        "dataset": args.dataset,
        "dataset_provenance": {"name": prov.name, "checksum": checksum, "verified": prov.verified, "labels": prov.labels},
        "preprocessing_steps": released_prep.steps(),
        "bias": data.fitted.recipe.bias(),
        "seed": args.seed,
        "trained_with": format!("privpred {}", env!("CARGO_PKG_VERSION")),
    });
    if let Some(f) = &chosen_formula {
        extra["lambda_rule"] = json!(f);
    }
    if method.is_none() {
        // the non-private reference releases nothing under a guarantee: it keeps its record
        extra["cross_validation"] = cv_record.clone();
    }
    let saved = privpred_release::save_linear(&args.out, &model, &data.fitted, extra, None, keys);
    if let Some(c) = charge {
        match &saved {
            Ok(_) => c.confirm(&args.out)?,
            // the file may have been written before the error: the charge stays
            Err(_) => c.keep(),
        }
    }
    saved.map_err(super::keys::release_err)?;
    let mut summary = summary;
    // erratum 4.9: a seeded private model is an experiment (predict and serve refuse it)
    summary["release"] = json!(privpred_linear::artifact::release_label(&model));
    summary["out"] = json!(args.out.display().to_string());
    summary["seconds"] = json!(started.elapsed().as_secs_f64());
    summary["private_diagnostics"] = private_diagnostics(&model, &cv_record);
    summary["bias"] = json!(data.fitted.recipe.bias());
    if let Some(f) = &chosen_formula {
        summary["lambda_rule"] = json!(f);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_linear_summary(args, &model, &data.train, &summary, started);
    }
    Ok(())
}

/// The trainer's measurements of the private data, on stderr under [`PRIVATE_NOTICE`] (none
/// for a non-private model without cross-validation).
fn print_private_diagnostics(model: &StoredModel, cv: &serde_json::Value) {
    let p = model.private();
    let mut lines = Vec::new();
    if let Some(o) = p.and_then(|p| p.optimization()) {
        lines.push(format!(
            "measured ||grad J||_2 = {:.3e} (rounding bound {:.1e}, {} refinement evaluations)",
            o.gradient_norm, o.rounding_bound, o.refinement_evaluations
        ));
    }
    if let Some(s) = p.and_then(|p| p.dp_sgd()) {
        lines.push(format!(
            "DP-SGD: {} examples sampled over {} steps, {:.2e} of per-example gradients clipped",
            s.examples, s.steps, s.clipped_fraction
        ));
    }
    if let (Some(param), Some(scores)) = (cv["parameter"].as_str(), cv.get("scores")) {
        lines.push(format!("cross-validated {param}: hold-out scores {scores}"));
    }
    if let (Some(param), Some(counts)) = (cv["parameter"].as_str(), cv.get("holdout_correct")) {
        lines.push(format!(
            "private selection of {param}: candidates' hold-out correct counts {counts}"
        ));
    }
    if lines.is_empty() {
        return;
    }
    eprintln!("{PRIVATE_NOTICE}:");
    for l in lines {
        eprintln!("  {l}");
    }
}

/// The human-readable summary of a trained linear model.
fn print_linear_summary(
    args: &Args,
    model: &StoredModel,
    train: &UnitBallDataset,
    summary: &serde_json::Value,
    started: Instant,
) {
    println!(
        "trained {} on {} (N = {}, D = {}, C = {})",
        summary["method"].as_str().unwrap_or("?"),
        args.dataset,
        train.n,
        train.d,
        train.classes
    );
    super::shared::print_guarantee(model.private().map(|p| &p.calibration));
    let cv_note = |p: &str| {
        let cv = &summary["private_diagnostics"]["cross_validation"];
        match (cv["parameter"] == p, cv["protocol"].as_str()) {
            (false, _) => " (public value: costs nothing)",
            (true, Some("private-split")) => " (private selection, inside the guarantee)",
            (true, _) => " (selected on the private data without privacy: outside any guarantee)",
        }
    };
    if let Some(l) = summary["lambda"].as_f64() {
        match summary["lambda_rule"].as_str() {
            Some(rule) => println!("lambda: {l:e} ({rule}; costs nothing)"),
            None => println!("lambda: {l:e}{}", cv_note("lambda")),
        }
    }
    if let Some(c) = summary["clip"].as_f64() {
        println!("clip: {c:e}{}", cv_note("clip"));
    }
    println!(
        "seed: {}",
        args.seed.map_or("OS random (release)".to_string(), |s| format!(
            "{s} (experiment: its noise can be regenerated from the seed; predict and serve refuse it)"
        ))
    );
    if let Some(c) = model.private().and_then(|p| p.certificate()) {
        println!(
            "certified fit: ||grad J||_2 <= gamma = {:.3e} (erratum 4.8)",
            c.gradient_norm_bound
        );
    }
    print_private_diagnostics(model, &summary["private_diagnostics"]["cross_validation"]);
    println!(
        "wrote {} in {:.1} s",
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
}
