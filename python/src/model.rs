//! Training and the fitted model: the same code path as `privpred train` (preprocessing into
//! the unit ball, λ / clip cross-validation on a 10 % hold-out, `train_private`) on arrays
//! handed over from Python, and prediction with an in-memory budget ledger.

use crate::answers::MemoryLedger;
use crate::errors::{self, data, invalid, linear};
use crate::guarantee::{self, calibration_json};
use crate::ledger::{DurableLedger, answer_err};
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2};
use privpred_core::ParamGuard;
use privpred_core::noise::{release_rng, seeded_rng};
use privpred_core::{
    Budget, CalibrationMode, Method, Neighbours, PrivRng, Privacy, SelectionMethod,
};
use privpred_data::split::holdout_unit;
use privpred_data::{Dataset, FittedPreprocessing, Preprocessing, Provenance, UnitBall};
use privpred_linear::artifact::{StoredModel, release_label};
use privpred_linear::dpsgd::CLIP_GRID;
use privpred_linear::methods::{self, PredictorKind, SeedPolicy};
use privpred_linear::model::argmax;
use privpred_linear::train::{LAMBDA_GRID, cv_lambda_nonprivate, logits_all};
use privpred_linear::{LbfgsOptions, LinearModel, TrainParams, fit_logistic, train_private};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use rand::RngExt;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Mutex;

/// The validated arguments of one training run (the CLI's `train` flags).
struct TrainArgs {
    method: Option<Method>,
    privacy: Option<Privacy>,
    budget: Budget,
    lambda: Option<f64>,
    mode: CalibrationMode,
    neighbours: Neighbours,
    /// Under add/remove: the declared public training-set size N̂ (`public_n`).
    public_n: Option<usize>,
    /// The fit is one of several on the same private data made by a search around privpred
    /// (scikit-learn's searches and cross-validation): its selection is recorded as
    /// `external-search`, outside the guarantee.
    external_search: bool,
    bias: f64,
    unit_ball: UnitBall,
    seed: Option<u64>,
    teachers: Option<usize>,
    clip: Option<f64>,
    batch_size: Option<usize>,
    epochs: Option<f64>,
    learning_rate: Option<f64>,
    /// How an unset λ or clip is chosen for a private method: `None` = the public default
    /// (costs nothing), `private` = the private split selection (inside the guarantee), `cv`
    /// = the paper's non-private hold-out selection (the guarantee is marked not valid).
    select: Option<SelectionMethod>,
    loss: privpred_core::Loss,
    /// The schema the rows were mapped through (`crate::schema::encode_table`): saved with
    /// the model, so that `predict`, `serve` and Python map raw queries the same way.
    schema: Option<privpred_data::schema::Schema>,
}

/// A fitted model: what an artifact holds, plus the in-memory budget ledger and the
/// generator that draws the answers of private-prediction methods.
#[pyclass(module = "privpred._native", frozen)]
pub struct NativeModel {
    model: StoredModel,
    prep: FittedPreprocessing,
    extra: serde_json::Value,
    /// The in-memory ledger (private-prediction methods): answers released so far, stored
    /// by row, with the durable ledger's answer rule.
    memory: Mutex<MemoryLedger>,
    /// Read from a file: its budget may already be spent elsewhere, so a private-prediction
    /// model loaded from disk answers only through `privpred serve`'s durable ledger.
    loaded: bool,
    rng: Mutex<PrivRng>,
    /// The durable ledger this model answers through (the answering path `predict` and
    /// `serve` take), once opened: at `load(..., ledger=…)` / `save(..., ledger=…)`, or at the
    /// first answer from `account`; it replaces the in-memory ledger.
    durable: Mutex<Option<DurableLedger>>,
    /// The budget of the model file this model was loaded from or saved to with a ledger
    /// (signed ledger id, B, ledger, spend mark): opened at its first answer.
    account: Mutex<Option<privpred_answer::Account>>,
    /// The model file that holds this model's budget (a private-prediction model read from
    /// it or saved to it): saving it to another file would give the same model a second
    /// default ledger and spend mark, so that is refused.
    budget_file: Mutex<Option<PathBuf>>,
    /// Answer although the model was trained with a seed (`allow_seeded`): its answers are
    /// an experiment's, not a private release, and `info_json` says so.
    allow_seeded: bool,
    /// What the trainer measured on the private data (the fit's certificate, DP-SGD's run
    /// statistics, the hold-out scores of a private model's selection): private to the data
    /// owner, never saved, pickled or reported by `info_json`; null for a loaded model.
    diagnostics: serde_json::Value,
    /// The model's ledger id: the one its file records (read by `load`), or drawn at its
    /// first `save`; every save writes the same one, so one fitted model is one identity
    /// with one budget however often it is saved.
    ledger_id: Mutex<Option<String>>,
}

/// Copies a C- or F-ordered numpy matrix into a row-major vector (one copy: preprocessing
/// then works in place on it, never on the caller's array).
fn rows(x: &PyReadonlyArray2<'_, f32>) -> (Vec<f32>, usize, usize) {
    let a = x.as_array();
    let (n, d) = a.dim();
    let v = match a.as_slice() {
        Some(s) => s.to_vec(),
        None => a.iter().copied().collect(),
    };
    (v, n, d)
}

fn queries(prep: &FittedPreprocessing, x: Vec<f32>, n: usize, d: usize) -> PyResult<Dataset> {
    if n == 0 {
        return Err(PyValueError::new_err(
            "empty query batch: predict needs at least one row",
        ));
    }
    if d != prep.input_dim {
        return Err(PyValueError::new_err(format!(
            "dimension mismatch: queries have {d} features, the model expects {} raw features",
            prep.input_dim
        )));
    }
    let provenance = Provenance {
        name: "queries".into(),
        ..Provenance::default()
    };
    let classes = prep.input_classes.max(1);
    Dataset::new(d, classes, x, vec![0; n], provenance).map_err(data)
}

/// Refuses, naming the Python parameter, a knob the method (`non-private` or a private
/// method's name) would ignore: the rule `privpred train` applies to its flags
/// ([`privpred_linear::settings::check_knobs`]). Each flag says whether the caller set it.
#[pyfunction]
#[pyo3(signature = (method, lam, clip, teachers, schedule, budget))]
pub fn check_knobs(
    method: &str,
    lam: bool,
    clip: bool,
    teachers: bool,
    schedule: (bool, bool, bool),
    budget: bool,
) -> PyResult<()> {
    let method = match method {
        "non-private" => None,
        m => Some(guarantee::method(m)?),
    };
    let (batch_size, epochs, learning_rate) = schedule;
    let given = privpred_linear::settings::GivenKnobs {
        lambda: lam,
        clip,
        teachers,
        batch_size,
        epochs,
        learning_rate,
        budget,
    };
    privpred_linear::settings::check_knobs(method, given)
        .map_err(|e| PyValueError::new_err(errors::python_words(&e)))
}

/// Trains a model on raw features `x` (N × D, f32) with labels `y` in `0..classes`, exactly as
/// `privpred train` does on a loaded dataset (preprocessing recipe: scale 1, no class subset,
/// no subsample, no PCA, the `unit_ball` rule, optional bias feature).
#[pyfunction]
#[pyo3(signature = (x, y, classes, method, epsilon=None, delta=0.0, budget=None, lam=None, calibration="corrected", neighbours="replace-one", bias=0.0, unit_ball="normalize", seed=None, teachers=None, clip=None, batch_size=None, epochs=None, learning_rate=None, extra=None, n_jobs=None, select=None, loss="softmax", schema=None, public_n=None, external_search=false, allow_seeded=false))]
#[allow(clippy::too_many_arguments)]
pub fn train(
    py: Python<'_>,
    x: PyReadonlyArray2<'_, f32>,
    y: PyReadonlyArray1<'_, u32>,
    classes: usize,
    method: &str,
    epsilon: Option<f64>,
    delta: f64,
    budget: Option<u64>,
    lam: Option<f64>,
    calibration: &str,
    neighbours: &str,
    bias: f64,
    unit_ball: &str,
    seed: Option<u64>,
    teachers: Option<usize>,
    clip: Option<f64>,
    batch_size: Option<usize>,
    epochs: Option<f64>,
    learning_rate: Option<f64>,
    extra: Option<&str>,
    n_jobs: Option<usize>,
    select: Option<&str>,
    loss: &str,
    schema: Option<&str>,
    public_n: Option<usize>,
    external_search: bool,
    allow_seeded: bool,
) -> PyResult<NativeModel> {
    let schema = schema
        .map(|t| crate::schema::parse(t, "schema"))
        .transpose()?;
    let loss = privpred_core::Loss::parse(loss).ok_or_else(|| {
        invalid(
            "loss",
            loss,
            "must be 'softmax' or 'logistic' (one sigmoid output, two classes)",
        )
    })?;
    let select = match select {
        None => None,
        Some("private") => Some(SelectionMethod::PrivateSplit),
        Some("cv") => Some(SelectionMethod::NonPrivateHoldout),
        Some(other) => {
            return Err(invalid(
                "select",
                other,
                "must be None (a public lambda/clip: the given value or the default, costs nothing), 'private' (private selection inside the guarantee) or 'cv' (non-private hold-out selection, outside the guarantee)",
            ));
        }
    };
    let method = match method {
        "non-private" => None,
        m => Some(guarantee::method(m)?),
    };
    let privacy = match (method, epsilon) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(PyValueError::new_err(
                "invalid epsilon: private methods need epsilon > 0",
            ));
        }
        (Some(_), Some(e)) => Some(Privacy::new(e, delta).map_err(errors::core)?),
    };
    let neighbours = guarantee::neighbours(neighbours)?;
    privpred_data::preprocess::check_bias(bias).map_err(data)?;
    if let Some(m) = method {
        privpred_core::check_relation(m, neighbours).map_err(errors::core)?;
    }
    if let Some(l) = lam
        && !(l.is_finite() && l >= 0.0)
    {
        return Err(invalid("lambda", l, "must be a finite number > 0 or `cv`"));
    }
    let needs_lambda = matches!(
        method,
        Some(Method::ModelSensitivity | Method::LossPerturbation | Method::PredictionSensitivity)
    );
    if needs_lambda && lam == Some(0.0) {
        return Err(PyValueError::new_err(
            "invalid lambda = 0: this method needs λ > 0 (its sensitivity is 2K/(Nλ))",
        ));
    }
    if let Some(c) = clip
        && !(c.is_finite() && c > 0.0)
    {
        return Err(invalid("clip", c, "must be a finite number > 0 or `cv`"));
    }
    let budget = match budget {
        Some(b) => Budget::finite(b).map_err(errors::core)?,
        None => Budget::Unlimited,
    };
    let unit_ball: UnitBall = unit_ball.parse().map_err(data)?;
    if method.is_some() && unit_ball == UnitBall::MaxNorm {
        return Err(PyValueError::new_err(
            "invalid unit_ball = max-norm for a private method: it divides every query by the private training set's largest norm, which the model would release un-noised, outside the guarantee; use the data-independent 'normalize' (the default) or 'clip:R' (the non-private model may use max-norm)",
        ));
    }
    let extra: serde_json::Value = match extra {
        Some(s) => serde_json::from_str(s)
            .map_err(|e| invalid("extra", s, &format!("not a JSON object ({e})")))?,
        None => serde_json::Value::Null,
    };
    let args = TrainArgs {
        method,
        privacy,
        budget,
        lambda: lam,
        mode: guarantee::mode(calibration)?,
        neighbours,
        public_n,
        external_search,
        bias,
        unit_ball,
        seed,
        teachers,
        clip,
        batch_size,
        epochs,
        learning_rate,
        select,
        loss,
        schema,
    };
    let (features, n, d) = rows(&x);
    if let Some(s) = &args.schema
        && s.feature_dim() != d
    {
        return Err(PyValueError::new_err(format!(
            "dimension mismatch: {d} features, the schema encodes {}",
            s.feature_dim()
        )));
    }
    let labels = y.as_slice()?.to_vec();
    if labels.len() != n {
        return Err(PyValueError::new_err(format!(
            "dimension mismatch: {n} rows of features but {} labels",
            labels.len()
        )));
    }
    match n_jobs {
        // the crates' parallel kernels (rayon) on a pool of this many threads
        Some(k) => {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(k.max(1))
                .build()
                .map_err(|e| PyRuntimeError::new_err(format!("cannot start {k} threads: {e}")))?;
            py.detach(|| pool.install(|| train_impl(&args, features, labels, d, classes, extra)))
        }
        None => py.detach(|| train_impl(&args, features, labels, d, classes, extra)),
    }
    .map(|mut m| {
        m.allow_seeded = allow_seeded;
        m
    })
}

fn train_impl(
    args: &TrainArgs,
    features: Vec<f32>,
    labels: Vec<u32>,
    d: usize,
    classes: usize,
    caller_extra: serde_json::Value,
) -> PyResult<NativeModel> {
    let (mut rng, seed_policy) = match args.seed {
        Some(s) => (seeded_rng(s), SeedPolicy::Seeded { seed: s }),
        None => (release_rng().map_err(errors::core)?, SeedPolicy::OsRandom),
    };
    let provenance = Provenance {
        name: "python".into(),
        source: "numpy array".into(),
        schema: args.schema.clone(),
        ..Provenance::default()
    };
    let ds = Dataset::new(d, classes, features, labels, provenance).map_err(data)?;
    let recipe = Preprocessing {
        scale: 1.0,
        unit_ball: args.unit_ball,
        ..Preprocessing::default()
    }
    .with_bias(args.bias);
    let prep_seed: u64 = rng.random();
    let fitted = recipe.fit(&ds, prep_seed).map_err(data)?;
    let train = fitted.apply_train_owned(ds).map_err(data)?;
    let holdout_seed: u64 = rng.random();
    let lbfgs = LbfgsOptions::default();

    // λ: given or the public default (costs nothing), or selected when asked: privately (the
    // private split, inside the guarantee) or as in the paper (outside it, recorded)
    let mut cv_record = serde_json::Value::Null;
    let mut selection = SelectionMethod::Public;
    let mut final_train: Option<privpred_data::UnitBallDataset> = None;
    let lambda = match (args.method, args.lambda, args.select) {
        (Some(Method::SubsampleAggregate), l, None) => l.unwrap_or(0.0),
        (Some(Method::DpSgd), _, _) => 0.0,
        (_, Some(l), _) => l,
        (Some(m), None, None) => match public_rule_lambda(args, m, &train) {
            Some(l) => {
                selection = SelectionMethod::PublicRule;
                l
            }
            None => privpred_core::defaults::LINEAR_PUBLIC_LAMBDA,
        },
        (Some(m), None, Some(SelectionMethod::PrivateSplit)) => {
            let cfg = config(args, m, selection_lambda(m), train.n, seed_policy)?
                .check()
                .map_err(linear)?;
            let s = methods::private_split_select(
                &cfg,
                &train,
                &LAMBDA_GRID,
                methods::Knob::Lambda,
                &mut rng,
            )
            .map_err(linear)?;
            cv_record = json!({"parameter": "lambda", "protocol": "private-split", "holdout_correct": s.private_counts, "chosen": s.chosen});
            selection = SelectionMethod::PrivateSplit;
            final_train = Some(s.final_train);
            s.chosen
        }
        (m, None, _) => {
            let (tr, ho) = holdout_unit(&train, 0.1, holdout_seed);
            let cv = match m {
                None => cv_lambda_nonprivate(&tr, &ho, &LAMBDA_GRID, &lbfgs).map_err(linear)?,
                Some(m) => {
                    let cfg = config(args, m, selection_lambda(m), train.n, seed_policy)?
                        .check()
                        .map_err(linear)?;
                    selection = SelectionMethod::NonPrivateHoldout;
                    methods::cv_lambda_draws(
                        &cfg,
                        &tr,
                        &ho,
                        &LAMBDA_GRID,
                        methods::CV_DRAWS_DEFAULT,
                        &mut rng,
                    )
                    .map_err(linear)?
                }
            };
            let draws = if m.is_some() {
                methods::CV_DRAWS_DEFAULT
            } else {
                1
            };
            cv_record = json!({"parameter": "lambda", "holdout_fraction": 0.1, "draws": draws, "scores": cv.scores, "chosen": cv.best});
            cv.best
        }
    };
    let model = match args.method {
        None => StoredModel::NonPrivate(
            fit_logistic(&train, lambda, None, &lbfgs)
                .map_err(linear)?
                .model,
        ),
        Some(m) => {
            let n = final_train.as_ref().unwrap_or(&train).n;
            let mut params = config(args, m, lambda, n, seed_policy)?;
            if m == Method::DpSgd && args.clip.is_none() {
                let sel_cfg = params
                    .clone()
                    .clip(privpred_linear::settings::SELECTION_CLIP)
                    .check()
                    .map_err(linear)?;
                let clip = match args.select {
                    None => privpred_linear::settings::default_clip(),
                    Some(SelectionMethod::PrivateSplit) => {
                        let s = methods::private_split_select(
                            &sel_cfg,
                            &train,
                            &CLIP_GRID,
                            methods::Knob::Clip,
                            &mut rng,
                        )
                        .map_err(linear)?;
                        cv_record = json!({"parameter": "clip", "protocol": "private-split", "holdout_correct": s.private_counts, "chosen": s.chosen});
                        final_train = Some(s.final_train);
                        s.chosen
                    }
                    Some(_) => {
                        let (tr, ho) = holdout_unit(&train, 0.1, holdout_seed);
                        let k = methods::CV_DRAWS_DEFAULT;
                        let cv =
                            methods::cv_clip_draws(&sel_cfg, &tr, &ho, &CLIP_GRID, k, &mut rng)
                                .map_err(linear)?;
                        cv_record = json!({"parameter": "clip", "holdout_fraction": 0.1, "draws": k, "scores": cv.scores, "chosen": cv.best});
                        cv.best
                    }
                };
                selection = args.select.unwrap_or(SelectionMethod::Public);
                params = params.clip(clip);
            }
            let train = final_train.as_ref().unwrap_or(&train);
            if args.external_search {
                // a search around this fit chose among several fits on the same data
                selection = SelectionMethod::ExternalSearch;
            }
            let cfg = params
                .selection(selection)
                .check_for(train.n)
                .map_err(linear)?;
            StoredModel::Private(Box::new(
                train_private(&cfg, train, &mut rng).map_err(linear)?,
            ))
        }
    };
    // a private model keeps only data-independent facts (the artifact module's rule): its
    // preprocessing without the subsample's seed, its hold-out scores in the diagnostics
    let private = args.method.is_some();
    let prep = if private {
        fitted.for_release()
    } else {
        fitted
    };
    let mut extra = json!({
        "dataset": "python",
        "dataset_provenance": {"name": "python", "checksum": null, "verified": false, "labels": []},
        "preprocessing_steps": prep.steps(),
        "seed": args.seed,
        "trained_with": format!("privpred-python {}", env!("CARGO_PKG_VERSION")),
        "python": caller_extra,
    });
    if !private {
        extra["cross_validation"] = cv_record.clone();
    }
    let diagnostics = private_diagnostics(&model, &cv_record);
    Ok(NativeModel {
        model,
        prep,
        extra,
        memory: Mutex::new(MemoryLedger::default()),
        loaded: false,
        rng: Mutex::new(rng),
        durable: Mutex::new(None),
        account: Mutex::new(None),
        budget_file: Mutex::new(None),
        allow_seeded: false,
        diagnostics,
        ledger_id: Mutex::new(None),
    })
}

/// The trainer's measurements of the private data, marked private to the data owner.
fn private_diagnostics(model: &StoredModel, cv_record: &serde_json::Value) -> serde_json::Value {
    let p = model.private();
    json!({
        "notice": "private to the data owner: measured on the private training data without noise; not part of the release (saved files and pickles do not hold it), do not publish",
        "optimization": p.and_then(|p| p.optimization()),
        "dp_sgd": p.and_then(|p| p.dp_sgd()),
        "cross_validation": cv_record,
    })
}

/// The method parameters of the CLI's `train` for these arguments (checked by the caller
/// with `TrainParams::check_for`; `clip` `None` is left to cross-validation).
/// The public rule's λ ([`privpred_core::public_rule`]: from N, d, C, ε and B only), N being
/// the public size (N̂ = `public_n` under add-remove); `None` for the methods without λ.
fn public_rule_lambda(
    args: &TrainArgs,
    m: Method,
    train: &privpred_data::UnitBallDataset,
) -> Option<f64> {
    let inputs = privpred_core::public_rule::PublicInputs {
        method: m,
        loss: args.loss,
        classes: train.classes,
        n: privpred_core::public_rule::PublicN::new(args.neighbours, train.n, args.public_n)?,
        dim: train.d,
        epsilon: args.privacy?.epsilon(),
        budget: args.budget,
    };
    privpred_core::public_rule::lambda(&inputs).map(|r| r.value)
}

/// The method parameters for λ = `lambda` (subsample-and-aggregate: the teachers' λ) and
/// N = `n` rows, through the library's one training entry
/// ([`privpred_linear::settings::MethodSettings`], the one `privpred train` calls): what the
/// caller left unset takes the library's defaults; an unset clip is left to the caller's
/// selection.
fn config(
    args: &TrainArgs,
    m: Method,
    lambda: f64,
    n: usize,
    seed_policy: SeedPolicy,
) -> PyResult<TrainParams> {
    use privpred_linear::settings::{ClipChoice, MethodSettings};
    let privacy = args.privacy.ok_or_else(|| {
        PyValueError::new_err("invalid epsilon: private methods need epsilon > 0")
    })?;
    let settings = MethodSettings {
        method: m,
        mode: args.mode,
        privacy,
        budget: args.budget,
        neighbours: args.neighbours,
        public_n: args.public_n,
        loss: args.loss,
        seed_policy,
        teachers: args.teachers,
        batch_size: args.batch_size,
        epochs: args.epochs,
        learning_rate: args.learning_rate,
        clip: args.clip.map_or(ClipChoice::Selected, ClipChoice::Given),
    };
    Ok(settings.params(lambda, n))
}

/// The base λ of a selection's configuration (the candidates replace it).
fn selection_lambda(m: Method) -> f64 {
    match m {
        Method::SubsampleAggregate => privpred_core::defaults::LINEAR_TEACHER_LAMBDA,
        _ => privpred_core::defaults::LINEAR_LAMBDA,
    }
}

/// Loads a model artifact written by `privpred train` or `NativeModel.save`, through the
/// answering path `privpred predict` and `serve` take (`privpred_answer::Answering::open`):
/// a seeded model is refused unless `allow_seeded`; a private-prediction model spends its
/// budget from `ledger` (a path, `sqlite:PATH` or a PostgreSQL string; default: the CLI's
/// default ledger beside the file), keyed by the signed ledger id, with the file's spend
/// mark; `init_ledger` creates the model's record (refused if it exists).
#[pyfunction]
#[pyo3(signature = (path, ledger=None, init_ledger=false, allow_invalid_guarantee=false, trust=None, sealing_key=None, allow_unsigned=false, allow_seeded=false))]
#[allow(clippy::too_many_arguments)]
pub fn load(
    py: Python<'_>,
    path: PathBuf,
    ledger: Option<&str>,
    init_ledger: bool,
    allow_invalid_guarantee: bool,
    trust: Option<PathBuf>,
    sealing_key: Option<PathBuf>,
    allow_unsigned: bool,
    allow_seeded: bool,
) -> PyResult<NativeModel> {
    // opened as `privpred predict` and `serve` open it: signature, trust, seal, payload,
    // the release gate; the ledger's model id is the signed ledger id
    let released = py
        .detach(|| {
            let t = privpred_release::Trust::from_files(
                trust.as_deref(),
                sealing_key.as_deref(),
                allow_unsigned,
            )?;
            privpred_release::open_file(&path, &t)
        })
        .map_err(errors::release)?;
    let arg = ledger.map(crate::ledger::ledger_arg).transpose()?;
    let answering = privpred_answer::Answering::open(&path, released, arg.as_deref(), allow_seeded)
        .map_err(answer_err)?;
    let m = answering.model.into_linear().ok_or_else(|| {
        PyValueError::new_err(format!(
            "invalid model {}: a ResNet model; the Python bindings load linear models",
            path.display()
        ))
    })?;
    // as `privpred predict` and `serve`: a guarantee that does not hold is refused unless asked
    if let Some(p) = m.model.private()
        && !p.calibration.is_valid()
        && !allow_invalid_guarantee
    {
        return Err(PyValueError::new_err(format!(
            "invalid model {}: valid_guarantee: false ({}); pass allow_invalid_guarantee=True to load it anyway (its answers do not have the stated guarantee)",
            path.display(),
            p.calibration.guarantee.validity.reasons().join("; ")
        )));
    }
    if answering.account.is_none() && (ledger.is_some() || init_ledger) {
        return Err(PyValueError::new_err(format!(
            "invalid ledger = {ledger:?}: a ledger applies to the private-prediction methods (prediction sensitivity, subsample-and-aggregate), whose answers spend a finite budget B; this model's answers cost nothing"
        )));
    }
    let native = NativeModel {
        model: m.model,
        prep: m.preprocessing,
        extra: m.extra,
        memory: Mutex::new(MemoryLedger::default()),
        loaded: true,
        rng: Mutex::new(release_rng().map_err(errors::core)?),
        durable: Mutex::new(None),
        budget_file: Mutex::new(answering.account.as_ref().map(|_| path.clone())),
        account: Mutex::new(answering.account),
        allow_seeded,
        diagnostics: serde_json::Value::Null,
        ledger_id: Mutex::new(m.ledger_id),
    };
    if ledger.is_some() || init_ledger {
        // opened now, so that a refused ledger (missing, below the spend mark) says so at load
        native.open_durable(py, init_ledger)?;
    }
    Ok(native)
}

fn poisoned<T>(_: T) -> PyErr {
    PyRuntimeError::new_err("budget ledger poisoned")
}

impl NativeModel {
    /// The durable ledger, opened on first use from the model file's account (the CLI's
    /// default ledger beside the file, or the one given); `None` for a model without one.
    fn durable_ledger(&self) -> PyResult<std::sync::MutexGuard<'_, Option<DurableLedger>>> {
        let mut durable = self.durable.lock().map_err(poisoned)?;
        if durable.is_none()
            && let Some(account) = self.account.lock().map_err(poisoned)?.as_ref()
        {
            *durable = Some(DurableLedger::open(account, false)?);
        }
        Ok(durable)
    }

    /// Opens the ledger of this model's account (`init`: create the record).
    fn open_durable(&self, py: Python<'_>, init: bool) -> PyResult<()> {
        let account = self.account.lock().map_err(poisoned)?.clone();
        let account = account.ok_or_else(|| {
            PyValueError::new_err(
                "invalid ledger: a ledger applies to the private-prediction methods (prediction sensitivity, subsample-and-aggregate), whose answers spend a finite budget B; this model's answers cost nothing",
            )
        })?;
        let opened = py.detach(|| DurableLedger::open(&account, init))?;
        *self.durable.lock().map_err(poisoned)? = Some(opened);
        Ok(())
    }

    /// Answers through the durable ledger: preprocess each row as the server does, draw the
    /// answers, record them (one transaction, all or nothing), release what was recorded.
    fn durable_answers(
        &self,
        p: &methods::PrivatePredictor,
        ledger: &DurableLedger,
        ds: &Dataset,
    ) -> PyResult<Vec<u32>> {
        let rows: Vec<Vec<f32>> = ds
            .features
            .chunks_exact(ds.d.max(1))
            .enumerate()
            .map(|(i, raw)| {
                self.prep
                    .apply_row(raw)
                    .map_err(|e| PyValueError::new_err(format!("row {i}: {e}")))
            })
            .collect::<PyResult<_>>()?;
        let refs: Vec<&[f32]> = rows.iter().map(|r| r.as_slice()).collect();
        let fresh = {
            let mut rng = self
                .rng
                .lock()
                .map_err(|_| PyRuntimeError::new_err("generator poisoned"))?;
            p.try_predict(&refs, &mut *rng).map_err(linear)?
        };
        Ok(ledger
            .spend(&rows, fresh)?
            .into_iter()
            .map(|a| a.label)
            .collect())
    }

    /// The public model whose logits are deterministic (non-private, or privately trained).
    fn public_model(&self) -> Option<&LinearModel> {
        match &self.model {
            StoredModel::NonPrivate(m) => Some(m),
            StoredModel::Private(p) => match &p.kind {
                PredictorKind::Released { model } => Some(model),
                _ => None,
            },
        }
    }

    fn logits(&self, ds: Dataset) -> PyResult<(Vec<f64>, usize)> {
        let model = self.public_model().ok_or_else(|| {
            PyValueError::new_err(
                "this method releases labels only (each answer spends the inference budget); scores and probabilities are not released",
            )
        })?;
        let q = self.prep.apply_owned(ds).map_err(data)?;
        Ok((logits_all(model, &q).map_err(linear)?, model.c))
    }

    /// Answers of a private-prediction method, charged to the in-memory ledger first (a row
    /// asked before gets its stored answer, free, as from the durable ledger).
    fn private_answers(&self, ds: Dataset) -> PyResult<Vec<u32>> {
        let p = match &self.model {
            StoredModel::Private(p) => p,
            StoredModel::NonPrivate(_) => unreachable!("public models have logits"),
        };
        // the release gate of the answering path: a seeded model's answers are not a release
        if let SeedPolicy::Seeded { seed } = p.seed_policy {
            privpred_answer::account::seed_gate(Some(seed), self.allow_seeded)
                .map_err(answer_err)?;
        }
        {
            let durable = self.durable_ledger()?;
            if let Some(l) = durable.as_ref() {
                return self.durable_answers(p, l, &ds);
            }
        }
        if self.loaded {
            return Err(PyRuntimeError::new_err(format!(
                "a {} model loaded from a file may already have spent its budget elsewhere: answer through its durable ledger",
                p.method()
            )));
        }
        let total = p.calibration.budget().get().unwrap_or(u64::MAX);
        let q = self.prep.apply_owned(ds).map_err(data)?;
        let mut memory = self
            .memory
            .lock()
            .map_err(|_| PyRuntimeError::new_err("budget ledger poisoned"))?;
        let plan = memory.plan(q.features.chunks_exact(q.d.max(1)), total)?;
        let fresh = if plan.fresh_rows.is_empty() {
            Vec::new()
        } else {
            let features: Vec<f32> = plan
                .fresh_rows
                .iter()
                .flat_map(|&i| q.row(i).iter().copied())
                .collect();
            let labels = vec![0; plan.fresh_rows.len()];
            let new = Dataset::new(q.d, q.classes, features, labels, q.provenance.clone())
                .map_err(data)?;
            let mut rng = self
                .rng
                .lock()
                .map_err(|_| PyRuntimeError::new_err("generator poisoned"))?;
            p.predict_dataset(&new, &mut *rng).map_err(linear)?
        };
        // charged only once the answers exist (nothing is released on an error)
        Ok(memory.commit(plan, &fresh))
    }
}

/// scikit-learn's `coef_` (C × D) and `intercept_` (C) of a public model.
type Layout<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<f64>>);

/// Labels and, for public models, their logits.
type Answers<'py> = (Bound<'py, PyArray1<u32>>, Option<Bound<'py, PyArray2<f64>>>);

#[pymethods]
impl NativeModel {
    /// Labels for raw query rows (N × D, f32), and the logits (N × C) where the model is
    /// public. Private-prediction methods spend one budget unit per row (all or nothing).
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<'py, f32>,
    ) -> PyResult<Answers<'py>> {
        let (v, n, d) = rows(&x);
        let ds = queries(&self.prep, v, n, d)?;
        if self.public_model().is_some() {
            let (l, c) = py.detach(|| self.logits(ds))?;
            let labels: Vec<u32> = l.chunks(c).map(|r| argmax(r) as u32).collect();
            let scores = PyArray1::from_vec(py, l).reshape([n, c])?;
            Ok((PyArray1::from_vec(py, labels), Some(scores)))
        } else {
            let labels = py.detach(|| self.private_answers(ds))?;
            Ok((PyArray1::from_vec(py, labels), None))
        }
    }

    /// The logits θᵀx (N × C) of a public model; an error for private-prediction methods.
    fn logits_of<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<'py, f32>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let (v, n, d) = rows(&x);
        let ds = queries(&self.prep, v, n, d)?;
        let (l, c) = py.detach(|| self.logits(ds))?;
        PyArray1::from_vec(py, l).reshape([n, c])
    }

    /// θ (D′ × C, after preprocessing) of a public model, else None (secret parameters).
    fn coef<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyArray2<f64>>>> {
        match self.public_model() {
            Some(m) => Ok(Some(
                PyArray1::from_vec(py, m.theta.clone()).reshape([m.d, m.c])?,
            )),
            None => Ok(None),
        }
    }

    /// A public model in scikit-learn's layout over the unit-ball-mapped rows u (x/‖x‖ for
    /// `normalize`, x/max(R, ‖x‖) for `clip:R`): `(coef, intercept)` with logits
    /// `coef · u + intercept` (C × D and C), the bias feature's weight folded into the
    /// intercept. The factors are read off the preprocessing itself (one mapped basis row), so
    /// the layout follows whatever the preprocessing does. None for private-prediction methods.
    fn layout<'py>(&self, py: Python<'py>) -> PyResult<Option<Layout<'py>>> {
        let Some(m) = self.public_model() else {
            return Ok(None);
        };
        let d = self.prep.input_dim;
        // a raw row that the unit-ball rule maps to the first basis vector e₀
        let radius = match self.prep.recipe.unit_ball {
            UnitBall::Normalize => 1.0,
            UnitBall::Clip { radius } => radius,
            UnitBall::MaxNorm => self.prep.max_norm.unwrap_or(1.0),
        };
        let mut e0 = vec![0f32; d];
        e0[0] = radius as f32;
        let z = self.prep.apply_row(&e0).map_err(data)?;
        let (scale, bias) = (f64::from(z[0]), z.get(d).map_or(0.0, |&b| f64::from(b)));
        let mut coef = Vec::with_capacity(m.c * d);
        for c in 0..m.c {
            coef.extend((0..d).map(|j| scale * m.theta[j * m.c + c]));
        }
        let intercept: Vec<f64> = (0..m.c)
            .map(|c| {
                if m.d > d {
                    bias * m.theta[d * m.c + c]
                } else {
                    0.0
                }
            })
            .collect();
        Ok(Some((
            PyArray1::from_vec(py, coef).reshape([m.c, d])?,
            PyArray1::from_vec(py, intercept),
        )))
    }

    /// The guarantee as the JSON text of `privpred calibrate --json` (None: non-private).
    fn guarantee_json(&self) -> Option<String> {
        self.model
            .private()
            .map(|p| calibration_json(&p.calibration).to_string())
    }

    /// (B or None for unlimited, answers spent from the in-memory ledger).
    fn budget_state(&self) -> PyResult<(Option<u64>, u64)> {
        if let Some(l) = self.durable_ledger()?.as_ref() {
            let st = l.state()?;
            return Ok((Some(st.total), st.spent));
        }
        let spent = self
            .memory
            .lock()
            .map_err(|_| PyRuntimeError::new_err("budget ledger poisoned"))?
            .spent;
        let total = self
            .model
            .private()
            .filter(|p| p.spends_budget())
            .and_then(|p| p.calibration.budget().get());
        Ok((total, spent))
    }

    /// The trainer's measurements of the private data (measured certificate, DP-SGD's run
    /// statistics, hold-out scores), as JSON text marked private to the data owner; `null`
    /// for a loaded model. Never part of what `save` writes or a pickle holds.
    /// The schema the model maps raw table rows through (JSON text), if it was trained on one.
    fn schema_json(&self) -> Option<String> {
        self.prep
            .schema
            .as_ref()
            .and_then(|s| serde_json::to_string(s).ok())
    }

    fn private_diagnostics_json(&self) -> String {
        self.diagnostics.to_string()
    }

    /// Everything but the weights, as JSON text: method, release label, λ, T, ν, seed,
    /// the certificate's bound, DP-SGD's steps, shapes, preprocessing, the artifact's extra
    /// metadata — data-independent facts only (see `private_diagnostics_json`).
    fn info_json(&self) -> String {
        let p = self.model.private();
        json!({
            "method": p.map_or("non-private", |p| p.method().name()),
            "release": release_label(&self.model),
            "spends_budget": p.is_some_and(|p| p.spends_budget()),
            "lambda": p.and_then(|p| p.lambda()),
            "teachers": p.and_then(|p| p.teachers()),
            "clip": p.and_then(|p| p.clip()),
            "seed_policy": p.map(|p| p.seed_policy),
            "optimization": p.and_then(|p| p.certificate()).map(|c| json!({
                "gradient_norm_bound": c.gradient_norm_bound,
                "certified": true,
            })),
            "dp_sgd": p.and_then(|p| p.dp_sgd_steps()).map(|s| json!({"steps": s})),
            "input_dim": self.prep.input_dim,
            "unit_ball": self.prep.recipe.unit_ball.to_string(),
            "features": self.model.input_dim(),
            "classes": self.model.classes(),
            "preprocessing_steps": self.prep.steps(),
            "data_dependent_preprocessing": self.prep.data_dependent(),
            "loaded": self.loaded,
            "ledger": self.durable.lock().ok().and_then(|d| d.as_ref().map(|l| l.description.clone())),
            "experiment_seed": p.and_then(|p| match p.seed_policy { SeedPolicy::Seeded { seed } if self.allow_seeded => Some(seed), _ => None }),
            "extra": self.extra,
        })
        .to_string()
    }

    /// Writes the model as a safetensors artifact (`privpred serve`/`predict`/`evaluate`
    /// read it). A private-prediction model that already answered queries from the in-memory
    /// ledger is refused: the server would start a fresh ledger with the whole budget B. With
    /// `ledger`, the saved file's record is created in that durable ledger (refused if it
    /// exists) and this model answers through it from now on, like `privpred serve` would.
    #[pyo3(signature = (path, ledger=None, signing_key=None))]
    fn save(
        &self,
        py: Python<'_>,
        path: PathBuf,
        ledger: Option<&str>,
        signing_key: Option<PathBuf>,
    ) -> PyResult<()> {
        if let Some(l) = ledger {
            crate::ledger::ledger_arg(l)?; // a ledger the Python package cannot write: refused first
        }
        let spends = self.model.private().is_some_and(|p| p.spends_budget());
        if spends && let Some(f) = self.budget_file.lock().map_err(poisoned)?.as_ref() {
            let same = |a: &std::path::Path| a.canonicalize().ok();
            if same(f) != same(&path) || same(f).is_none() {
                return Err(PyRuntimeError::new_err(format!(
                    "this private-prediction model's budget is kept with {}: writing it to {} as well would give the same model a second ledger and spend mark (a second budget). Copy that file together with its ledger instead",
                    f.display(),
                    path.display()
                )));
            }
        }
        // a model with a durable ledger (open, or its file's account) spends nothing in memory
        let durable = self.durable.lock().map_err(poisoned)?.is_some()
            || self.account.lock().map_err(poisoned)?.is_some();
        let (total, spent) = match durable {
            true => (None, 0),
            false => self.budget_state()?,
        };
        if total.is_some() && spent > 0 && !durable {
            return Err(PyRuntimeError::new_err(format!(
                "this model already released {spent} of its {} answers from the in-memory ledger; saving it for `privpred serve` would start a fresh ledger with the whole budget and overspend the guarantee",
                total.unwrap_or(0)
            )));
        }
        if durable && ledger.is_some() {
            return Err(PyValueError::new_err(
                "invalid ledger: this model already answers through a durable ledger; a second record would double its budget",
            ));
        }
        let id = {
            let mut g = self
                .ledger_id
                .lock()
                .map_err(|_| PyRuntimeError::new_err("ledger id poisoned"))?;
            if g.is_none() {
                *g = Some(
                    privpred_data::artifact::new_ledger_id().map_err(PyRuntimeError::new_err)?,
                );
            }
            g.clone().unwrap_or_default()
        };
        py.detach(|| {
            let (keys, created) = privpred_release::WriteKeys::from_files(signing_key.as_deref())?;
            if let Some(dir) = created {
                eprintln!(
                    "privpred: created your signing key in {} (first use; verify.pub there is what hosts trust, keep signing.key and sealing.key secret)",
                    dir.display()
                );
            }
            privpred_release::save_linear(
                &path,
                &self.model,
                &self.prep,
                self.extra.clone(),
                Some(&id),
                &keys,
            )
        })
        .map_err(errors::release)?;
        if spends {
            *self.budget_file.lock().map_err(poisoned)? = Some(path.clone());
        }
        if let Some(l) = ledger {
            // the ledger id just written is the record's key, the saved file's spend mark
            // its mark (as for `privpred predict` and `serve` on that file)
            let total = self
                .model
                .private()
                .filter(|p| p.spends_budget())
                .and_then(|p| p.calibration.budget().get())
                .ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "invalid ledger = {l:?}: a ledger applies to the private-prediction methods (prediction sensitivity, subsample-and-aggregate), whose answers spend a finite budget B; this model's answers cost nothing"
                    ))
                })?;
            let account = crate::ledger::account(&path, Some(&id), total, Some(l))?;
            *self.account.lock().map_err(poisoned)? = Some(account);
            self.open_durable(py, true)?;
        }
        Ok(())
    }
}
