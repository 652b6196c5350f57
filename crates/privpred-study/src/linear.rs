//! The runner of the linear-model figures (fig1–fig6) on top of `privpred_linear`, with the
//! exact shortcuts of the study (see `privpred_linear::methods`):
//!
//! - data are loaded, preprocessed (scale 1/255, class subset, subsample, PCA, bias feature,
//!   per-example normalisation into the unit ball) and split (10 % hold-out, docs/study.md) once per
//!   data configuration;
//! - non-private fits θ*(λ) on the 90 % part (for cross-validation) and on the whole training
//!   set are computed once per (data, λ) and shared by every ε, δ, B, calibration mode and
//!   repetition: model sensitivity adds fresh noise to the shared θ*, prediction sensitivity to
//!   its shared test logits;
//! - subsample-and-aggregate's teachers and their test vote matrix are computed once per
//!   (data, T): every (ε, B, mode) and repetition only redraws the exponential mechanism;
//! - loss perturbation and DP-SGD need a fresh fit per noise draw (warm-started from θ* for loss
//!   perturbation; the objective is strictly convex, so the minimiser is the same). Loss
//!   perturbation's fits run L-BFGS with a Kronecker-factored preconditioner from a
//!   preconditioned Newton step off θ* (`privpred_linear::precond`): the data moment is
//!   eigendecomposed once per data configuration and the preconditioner built once per
//!   (data, λ, ρ_eff) and shared by every repetition (same minimiser and stopping rule, ≈ 3.6×
//!   fewer evaluations per fit on MNIST at fig1b's setting).
//!
//! Every method goes through `privpred_linear::methods` (the `PrivateMethod` trait behind
//! `SharedFit`): a group calibrates, selects λ or DP-SGD's clip on the hold-out with draws
//! from shared fits on the 90 % part, takes the release's shared fit from a cache keyed by what
//! it depends on, and its repetitions are draws from that fit (`group`).
//!
//! Every fit whose result is shared runs on one thread (the parallel reduction of the gradient
//! kernel sums in a scheduling-dependent order), so that resumed and sharded runs reproduce the
//! same numbers; parallelism comes from running repetitions, λ values and teachers side by side.

use crate::error::{Result, StudyError};
use crate::figures::{AxisKind, FigureId, LAMBDA_GRID, fmt_num};
use crate::progress::{Event, Observer};
use crate::results::Measurement;
use crate::sweep::{Done, GroupTiming, Runner};
use crate::units::{Group, rng_for, seed_for};
use privpred_core::ParamGuard;
use privpred_core::{Budget, Calibration, CalibrationMode, Method, Neighbours, Privacy};
use privpred_data::{DatasetSpec, LoadOptions, Preprocessing, UnitBallDataset};
use privpred_linear::dpsgd::DpSgdConfig;
use privpred_linear::exact::NonzerosCell;
use privpred_linear::kernel::Design;
use privpred_linear::methods::{Fit, Purpose, Scores, SharedFit};
use privpred_linear::precond::DataMoment;
use privpred_linear::train::{accuracy_of, predict_all};
use privpred_linear::{GradNorm, LbfgsOptions, LinearModel, TrainParams, fit_logistic};
use rayon::prelude::*;
use std::collections::HashMap;
use std::hash::Hash;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// The study's and `compare`'s default bias value ([`privpred_data::preprocess::BIAS_DEFAULT`]:
/// 0, no bias feature, chosen on the training hold-out; docs/study.md). The paper's own code appends 1 outside the unit
/// ball (docs/guarantees.md#errata (erratum 4.4)), so no calibration mode has a bias value of its own: one default for all.
pub use privpred_data::preprocess::BIAS_DEFAULT;

pub use privpred_linear::methods::CV_DRAWS_DEFAULT;

/// Options of the linear runner. Everything here that changes results is recorded in the
/// manifest ([`Runner::options`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LinearOptions {
    /// Directory searched first for datasets.
    #[serde(skip)]
    pub data_dir: Option<PathBuf>,
    /// Dataset for every figure (None: each figure's own, mnist / mnist1m).
    pub dataset: Option<String>,
    /// The schema a table is read through (`compare --schema`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<privpred_data::Schema>,
    /// `--quick`: subsampled training and test sets.
    pub quick: bool,
    /// Cap on training examples (quick: 5,000).
    pub max_train: Option<usize>,
    /// Cap on test examples (quick: 2,000).
    pub max_test: Option<usize>,
    /// Hold-out fraction for cross-validation (docs/study.md: 0.1).
    pub holdout_fraction: f64,
    /// Private draws averaged per cross-validated λ (model sensitivity, prediction
    /// sensitivity, loss perturbation) and per DP-SGD clip ν (default [`CV_DRAWS_DEFAULT`]).
    pub cv_draws: usize,
    /// The bias feature's value v ∈ [0, 1) (0 = none): rows [x·√(1 − v²), v] (default
    /// [`BIAS_DEFAULT`]).
    pub bias: f64,
    /// DP-SGD hyper-parameters other than ν.
    pub dpsgd_batch_size: usize,
    /// DP-SGD epochs (unless [`LinearOptions::dpsgd_epochs_rule`]).
    pub dpsgd_epochs: f64,
    /// DP-SGD's epochs follow each ε by [`privpred_core::public_rule::dpsgd_epochs`]
    /// (`compare`'s default), not [`LinearOptions::dpsgd_epochs`] (the study's).
    #[serde(default)]
    pub dpsgd_epochs_rule: bool,
    /// The neighbouring relation every method is calibrated for (docs/guarantees.md#neighbouring-relations; replace-one by
    /// default). Recorded in the manifest's options and in every row.
    #[serde(default)]
    pub neighbours: privpred_core::Neighbours,
    /// How λ and DP-SGD's ν are chosen ([`crate::selection`]; the paper's non-private
    /// hold-out selection by default). Recorded in the manifest's options and, per row, in
    /// its `selection` record.
    pub selection: crate::selection::SelectionOptions,
    /// Each method's loss: `false` (the paper's) the softmax everywhere; `true` (`compare`'s,
    /// as `train`) [`privpred_core::Loss::default_for`], the sigmoid on two classes for the
    /// methods that train it.
    #[serde(default)]
    pub sigmoid_for_two_classes: bool,
}

impl LinearOptions {
    /// The loss `method` trains with on `classes` classes under these options.
    pub fn loss(&self, method: Method, classes: usize) -> privpred_core::Loss {
        if self.sigmoid_for_two_classes {
            privpred_core::Loss::default_for(Some(method), classes)
        } else {
            privpred_core::Loss::Softmax
        }
    }

    /// The defaults: full data, or the `--quick` caps.
    pub fn new(quick: bool) -> Self {
        LinearOptions {
            data_dir: None,
            dataset: None,
            schema: None,
            quick,
            max_train: quick.then_some(privpred_core::defaults::QUICK_MAX_TRAIN),
            max_test: quick.then_some(privpred_core::defaults::QUICK_MAX_TEST),
            holdout_fraction: privpred_core::defaults::HOLDOUT_FRACTION,
            neighbours: privpred_core::Neighbours::ReplaceOne,
            selection: crate::selection::SelectionOptions::PAPER,
            sigmoid_for_two_classes: false,
            cv_draws: CV_DRAWS_DEFAULT,
            bias: BIAS_DEFAULT,
            dpsgd_batch_size: DpSgdConfig::default().batch_size,
            dpsgd_epochs_rule: false,
            dpsgd_epochs: if quick {
                privpred_core::defaults::LINEAR_DPSGD_EPOCHS_QUICK
            } else {
                DpSgdConfig::default().epochs
            },
        }
    }
}

/// A compute-once cache: concurrent callers of the same key wait for one computation.
type Slot<V> = Arc<OnceLock<std::result::Result<Arc<V>, (String, bool)>>>;

struct Cache<K, V> {
    map: Mutex<HashMap<K, Slot<V>>>,
}

impl<K: Eq + Hash + Clone, V> Cache<K, V> {
    fn new() -> Self {
        Cache {
            map: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, key: &K, f: impl FnOnce() -> Result<V>) -> Result<Arc<V>> {
        let cell = {
            let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
            m.entry(key.clone())
                .or_insert_with(|| Arc::new(OnceLock::new()))
                .clone()
        };
        // the error is kept rendered (every unit waiting on the cell gets it), with whether it
        // was the user's input (exit 2 at the CLI) or a failure
        cell.get_or_init(|| f().map(Arc::new).map_err(|e| (e.to_string(), e.is_usage())))
            .clone()
            .map_err(|(message, usage)| {
                if usage {
                    StudyError::BadInput(message)
                } else {
                    StudyError::Compute {
                        context: "shared computation".into(),
                        message,
                    }
                }
            })
    }

    fn clear(&self) {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// Runs `f` with the linear kernels sequential on this thread (deterministic summation order);
/// the repetitions and λ values around it run in parallel.
pub(crate) fn seq<T>(f: impl FnOnce() -> T) -> T {
    privpred_linear::kernel::sequential(f)
}

/// One data configuration, preprocessed and split.
pub struct Prepared {
    /// The whole (preprocessed) training set.
    pub train: UnitBallDataset,
    /// Its 90 % part (cross-validation training).
    pub train90: UnitBallDataset,
    /// Its 10 % hold-out.
    pub hold: UnitBallDataset,
    /// The preprocessed test set.
    pub test: UnitBallDataset,
    /// Preprocessing steps.
    pub steps: String,
    /// Data-dependent preprocessing steps.
    pub data_dependent: Vec<String>,
    /// Raw-data checksum.
    pub checksum: String,
    /// Dataset labels (substitute etc.).
    pub labels: String,
}

pub(crate) type Key = String;

mod group;
mod private_select;
pub(crate) use group::mechanism_id;

/// The runner of fig1–fig6 (linear models).
pub struct LinearRunner {
    opts: LinearOptions,
    raw: Cache<String, privpred_data::Splits>,
    prepared: Cache<Key, Prepared>,
    fit90: Cache<(Key, u64), LinearModel>,
    fitfull: Cache<(Key, u64), LinearModel>,
    nonprivate: Cache<Key, f64>,
    /// Σ = XᵀX/N of the whole training set eigendecomposed, per data configuration (the
    /// 90 % part's fits use it too: any symmetric positive definite preconditioner gives the
    /// same minimiser, and Σ of the 90 % part is nearly the same matrix).
    moment: Cache<Key, DataMoment>,
    /// The nonzeros of each training set (whole or 90 % part) per data configuration, shared
    /// by every loss-perturbation preconditioner on it (one per λ and ρ_eff): one
    /// [`privpred_linear::exact::SparseRows`] is ≈ 1.2 GB at N = 10⁶.
    nonzeros: Cache<(Key, &'static str), NonzerosCell>,
    /// The methods' shared fits, per (data, what the fit depends on: see
    /// [`LinearRunner::shared_fit`]): θ*(λ) certified to γ (model and prediction sensitivity),
    /// loss perturbation's preconditioner per (part, λ, ρ_eff), the teachers per T.
    shared: Cache<(Key, String), SharedFit>,
    /// The shared fits' scores on the test set or the hold-out (logits, votes).
    scores: Cache<(Key, String), Scores>,
    /// Shared fits computed so far (each is computed once per key and reused by every
    /// repetition and group that needs it).
    shared_built: AtomicUsize,
    /// Measurements that other groups replay, by (draws id [`rng_id`], repetition): every B
    /// of fig2a/fig2b reuses the budget-independent groups' (exact: the released model's
    /// guarantee covers any number of answers, and its noise is seeded without B), and the
    /// `tight` groups of [`draws_mode`] reuse the `corrected` ones.
    replays: Mutex<HashMap<(String, u32), Measurement>>,
}

/// The calibration mode whose draws a group's repetitions use: `corrected` for `tight` model
/// sensitivity and loss perturbation, whose `tight` calibration is the `corrected` one (the
/// core's notes "tight = corrected for a single release" and "tight = corrected for loss
/// perturbation": docs/guarantees.md#calibrations has no tighter analysis of one output or objective perturbation),
/// and for `tight` DP-SGD under replace-one neighbours, where both modes use the PLD
/// accountant of the replace-one dominating pair (`privpred_core::calibrate::dp_sgd`; under
/// add-remove `tight` takes the better of RDP and PLD and keeps its own draws); otherwise the
/// group's own mode. The same mechanism, certificate and validity at every setting of the
/// study (test `tight_shares_the_corrected_mechanism_where_it_shares_draws`, and checked again
/// when such a group computes), so the two modes' rows of these methods are the same draws,
/// computed once.
pub fn draws_mode(
    method: Method,
    mode: CalibrationMode,
    neighbours: Neighbours,
) -> CalibrationMode {
    match (method, mode) {
        (Method::ModelSensitivity | Method::LossPerturbation, CalibrationMode::Tight) => {
            CalibrationMode::Corrected
        }
        (Method::DpSgd, CalibrationMode::Tight) if neighbours == Neighbours::ReplaceOne => {
            CalibrationMode::Corrected
        }
        _ => mode,
    }
}

/// The label that seeds a group's random draws under the sweep's neighbouring relation. For a
/// private-training method (model sensitivity, loss perturbation, DP-SGD) on a budget axis the
/// released model does not depend on B, so its draws are seeded from an id without B and every
/// B reuses them; otherwise the group id — both with the mode of [`draws_mode`], so that the
/// `tight` groups it maps to `corrected` reuse the `corrected` draws.
pub fn rng_id(g: &Group, neighbours: Neighbours) -> String {
    let mode = draws_mode(g.method, g.calibration, neighbours);
    if g.method.is_private_training() && g.figure.definition().axis.kind == AxisKind::Budget {
        format!(
            "{}/{}/{}/any-budget:epsilon={},delta={}",
            g.figure.name(),
            mode.name(),
            g.method.name(),
            fmt_num(g.setting.epsilon),
            fmt_num(g.setting.delta)
        )
    } else {
        Group {
            calibration: mode,
            ..g.clone()
        }
        .id()
    }
}

/// Whether a group's measurements are kept for other groups to replay: those whose draws are
/// seeded by another group's id ([`rng_id`]: every B of a budget axis, `tight` groups that
/// use the `corrected` draws) and the groups whose draws another mode reuses.
fn memoised(g: &Group, neighbours: Neighbours) -> bool {
    rng_id(g, neighbours) != g.id()
        || [
            CalibrationMode::Paper,
            CalibrationMode::Corrected,
            CalibrationMode::Tight,
        ]
        .into_iter()
        .any(|m| m != g.calibration && draws_mode(g.method, m, neighbours) == g.calibration)
}

/// The study's solver: L-BFGS to max|∇ᵢ| ≤ 1e-4 — the reference's stopping rule (PyTorch's
/// `tolerance_grad` is a max-abs test), which docs/study.md names; `privpred train` keeps the
/// stricter ‖∇‖₂ ≤ 1e-4 by default.
pub(crate) fn lbfgs() -> LbfgsOptions {
    LbfgsOptions {
        norm: GradNorm::Max,
        ..LbfgsOptions::default()
    }
}

fn noise_fields(c: &Calibration) -> (String, f64) {
    (c.mechanism.distribution_name().into(), c.mechanism.scale())
}

/// What a calibration of the study depends on: the method at a setting, for `n` training
/// examples of `classes` classes.
#[derive(Debug, Clone, Copy)]
pub struct CalibrationInput<'a> {
    /// The method.
    pub method: Method,
    /// The calibration analysis.
    pub mode: CalibrationMode,
    /// ε.
    pub epsilon: f64,
    /// δ.
    pub delta: f64,
    /// The inference budget B.
    pub budget: u64,
    /// Training examples N.
    pub n: usize,
    /// Classes C.
    pub classes: usize,
    /// λ (model sensitivity, loss perturbation, prediction sensitivity).
    pub lambda: Option<f64>,
    /// DP-SGD's schedule (batch size, epochs).
    pub dpsgd: &'a DpSgdConfig,
    /// The neighbouring relation.
    pub neighbours: privpred_core::Neighbours,
    /// The loss (softmax, or the sigmoid on two classes).
    pub loss: privpred_core::Loss,
}

/// Calibrates a method at a setting ([`privpred_linear::methods::calibrate`]: the core's
/// calibration with the solver's residual accounted for, erratum 4.8).
pub fn calibrate(c: &CalibrationInput<'_>) -> Result<Calibration> {
    let privacy = Privacy::new(c.epsilon, c.delta)?;
    let mut params = TrainParams::new(c.method, c.mode, privacy, Budget::finite(c.budget)?)
        .neighbours(c.neighbours)
        .loss(c.loss)
        // the study's data sets are public: under add/remove their size is the declared N̂
        .public_n((c.neighbours == privpred_core::Neighbours::AddRemove).then_some(c.n))
        .dp_sgd(*c.dpsgd);
    if let Some(l) = c.lambda {
        params = params.lambda(l);
    }
    let cfg = params.check()?;
    // with the solver's residual accounted for (erratum 4.8): the noise the product releases
    Ok(privpred_linear::methods::calibrate(&cfg, c.n, c.classes)?)
}

impl LinearRunner {
    /// A runner with the given options.
    pub fn new(opts: LinearOptions) -> Self {
        LinearRunner {
            opts,
            raw: Cache::new(),
            prepared: Cache::new(),
            fit90: Cache::new(),
            fitfull: Cache::new(),
            nonprivate: Cache::new(),
            moment: Cache::new(),
            nonzeros: Cache::new(),
            shared: Cache::new(),
            scores: Cache::new(),
            shared_built: AtomicUsize::new(0),
            replays: Mutex::new(HashMap::new()),
        }
    }

    /// The options.
    pub fn options_ref(&self) -> &LinearOptions {
        &self.opts
    }

    /// N: the training examples of `name` a run uses (after `--quick`'s cap), a public
    /// quantity under replace-one neighbours (the sizes the public rule reads,
    /// [`privpred_core::public_rule`]).
    pub fn train_size(&self, name: &str) -> Result<usize> {
        let n = self.raw(name)?.train.n;
        Ok(self.opts.max_train.map_or(n, |cap| n.min(cap)))
    }

    /// The runner with DP-SGD's expected batch size set (its caches kept).
    pub fn with_dpsgd_batch_size(mut self, batch: usize) -> Self {
        self.opts.dpsgd_batch_size = batch;
        self
    }

    /// The runner with DP-SGD's epochs: `Some(e)` for every ε, `None` for the public rule's
    /// at each setting's ε (its caches kept).
    pub fn with_dpsgd_epochs(mut self, epochs: Option<f64>) -> Self {
        self.opts.dpsgd_epochs_rule = epochs.is_none();
        self.opts.dpsgd_epochs = epochs.unwrap_or(self.opts.dpsgd_epochs);
        self
    }

    /// The dataset of a figure. With `--quick`, fig4 falls back to MNIST when the MNIST-1M
    /// substitute has not been generated (the quick run caps N at 5,000 anyway).
    fn dataset_for(&self, figure: FigureId) -> String {
        let name = self
            .opts
            .dataset
            .clone()
            .unwrap_or_else(|| figure.definition().dataset.to_string());
        if name == "mnist1m" && self.opts.quick && self.raw(&name).is_err() {
            return "mnist".into();
        }
        name
    }

    /// DP-SGD's schedule as this runner trains it at target `epsilon` (batch size, epochs),
    /// for recalibrating a result's guarantee.
    pub fn dpsgd_config(&self, epsilon: f64) -> DpSgdConfig {
        DpSgdConfig {
            batch_size: self.opts.dpsgd_batch_size,
            epochs: match self.opts.dpsgd_epochs_rule {
                true => privpred_core::public_rule::dpsgd_epochs(epsilon),
                false => self.opts.dpsgd_epochs,
            },
            ..DpSgdConfig::default()
        }
    }

    fn raw(&self, name: &str) -> Result<Arc<privpred_data::Splits>> {
        self.raw.get(&name.to_string(), || {
            let spec = DatasetSpec::parse(name)?;
            let opts = LoadOptions {
                data_dir: self.opts.data_dir.clone(),
                schema: self.opts.schema.clone(),
                ..LoadOptions::default()
            };
            Ok(privpred_data::load(&spec, &opts)?)
        })
    }

    /// The data configuration of a group: dataset and (N, D, C). It names the cache entry and
    /// labels the seeds drawn for the data (preprocessing, hold-out, teachers' partition).
    fn key(&self, g: &Group) -> Key {
        format!(
            "{}|n={:?}|d={:?}|c={:?}",
            self.data_identity(&self.dataset_for(g.figure)),
            g.setting.n,
            g.setting.dim,
            g.setting.classes
        )
    }

    /// A named data set by its name; a file or folder (`csv:PATH`, `parquet:PATH`, `idx:DIR`,
    /// …) by the SHA-256 of what was read, so that the same data gives the same draws for a
    /// seed wherever it lies. A spec that does not load keeps its text (its loading error is
    /// reported where the data is used), and so does one read without a checksum.
    fn data_identity(&self, name: &str) -> String {
        let named = privpred_data::spec::NAMED.contains(&name);
        if named {
            return name.to_string();
        }
        match self.raw(name) {
            Ok(raw) => match (
                &raw.train.provenance.checksum,
                &raw.test.provenance.checksum,
            ) {
                (Some(train), Some(test)) => format!("sha256:{train}+{test}"),
                _ => name.to_string(),
            },
            Err(_) => name.to_string(),
        }
    }

    pub(crate) fn prepared(&self, g: &Group, seed: u64) -> Result<(Key, Arc<Prepared>)> {
        let key = self.key(g);
        let name = self.dataset_for(g.figure);
        let s = g.setting;
        let p = self.prepared.get(&key, || {
            let raw = self.raw(&name)?;
            let available = match s.classes {
                Some(c) => raw.train.labels.iter().filter(|&&y| (y as usize) < c).count(),
                None => raw.train.n,
            };
            let mut n = s.n.unwrap_or(available);
            if let Some(cap) = self.opts.max_train {
                n = n.min(cap);
            }
            if s.n.is_some() && n > available {
                return Err(StudyError::invalid(
                    "N",
                    n,
                    format!("at most the {available} training examples of {name} (generate a larger mnist1m with `privpred data generate mnist1m --n 1000000`)"),
                ));
            }
            let recipe = Preprocessing {
                classes: s.classes,
                subsample: (n < available).then_some(n),
                pca: s.dim,
                ..Preprocessing::for_data(&raw.train)?
            }
            .with_bias(self.opts.bias);
            let fitted = recipe.fit(&raw.train, seed_for(seed, &format!("preprocess/{key}")))?;
            let train = fitted.apply_train(&raw.train)?;
            // the fitted recipe applies the class subset to the test split too (no copy)
            let mut test = fitted.apply(&raw.test)?;
            if let Some(cap) = self.opts.max_test
                && test.n > cap
            {
                let perm = privpred_data::split::permutation(test.n, seed_for(seed, "test-subsample"));
                test = test.subset(&perm[..cap]);
            }
            let (train90, hold) = privpred_data::split::holdout_unit(
                &train,
                self.opts.holdout_fraction,
                seed_for(seed, &format!("holdout/{key}")),
            );
            let prov = &raw.train.provenance;
            Ok(Prepared {
                steps: fitted.steps().join("; "),
                data_dependent: fitted.data_dependent(),
                checksum: prov.checksum.clone().unwrap_or_default(),
                labels: prov.labels.join("; "),
                train,
                train90,
                hold,
                test,
            })
        })?;
        Ok((key, p))
    }

    pub(crate) fn fit(
        &self,
        which90: bool,
        key: &Key,
        p: &Prepared,
        lambda: f64,
    ) -> Result<Arc<LinearModel>> {
        let cache = if which90 { &self.fit90 } else { &self.fitfull };
        cache.get(&(key.clone(), lambda.to_bits()), || {
            let ds = if which90 { &p.train90 } else { &p.train };
            Ok(seq(|| fit_logistic(ds, lambda, None, &lbfgs()))?.model)
        })
    }

    /// Non-private accuracy with λ cross-validated on the hold-out (the reference line).
    fn nonprivate(&self, key: &Key, p: &Prepared) -> Result<f64> {
        Ok(*self.nonprivate.get(key, || {
            let scores: Vec<f64> = LAMBDA_GRID
                .par_iter()
                .map(|&l| {
                    let m = self.fit(true, key, p, l)?;
                    Ok(accuracy_of(&predict_all(&m, &p.hold)?, &p.hold.labels))
                })
                .collect::<Result<_>>()?;
            let best = argmax_first(&scores);
            let m = self.fit(false, key, p, LAMBDA_GRID[best])?;
            Ok(accuracy_of(&predict_all(&m, &p.test)?, &p.test.labels))
        })?)
    }

    /// The data moment of the whole training set (built with sequential kernels).
    pub(crate) fn moment(&self, key: &Key, p: &Prepared) -> Result<Arc<DataMoment>> {
        self.moment.get(key, || {
            let t = &p.train;
            let design = Design::new(&t.features, &t.labels, t.d, t.classes);
            Ok(seq(|| DataMoment::new(&design))?)
        })
    }

    /// The number of shared fits computed so far by this runner.
    pub fn shared_fits_built(&self) -> usize {
        self.shared_built.load(Ordering::Relaxed)
    }

    /// Releases shared computations of other data configurations (memory).
    pub fn clear_caches(&self) {
        self.prepared.clear();
        self.fit90.clear();
        self.fitfull.clear();
        self.moment.clear();
        self.nonzeros.clear();
        self.shared.clear();
        self.scores.clear();
    }
}

fn argmax_first(v: &[f64]) -> usize {
    let mut b = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[b] {
            b = i;
        }
    }
    b
}

struct Clock(AtomicU64);

impl Clock {
    fn new() -> Self {
        Clock(AtomicU64::new(0))
    }
    fn time<T>(&self, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let r = f();
        self.0
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        r
    }
    fn add(&self, seconds: f64) {
        self.0.fetch_add((seconds * 1e9) as u64, Ordering::Relaxed);
    }
    fn secs(&self) -> f64 {
        self.0.load(Ordering::Relaxed) as f64 * 1e-9
    }
}

impl Runner for LinearRunner {
    fn options(&self) -> serde_json::Value {
        serde_json::to_value(&self.opts).unwrap_or_default()
    }

    fn neighbours(&self) -> privpred_core::Neighbours {
        self.opts.neighbours
    }

    fn dataset_name(&self, figure: FigureId) -> String {
        self.dataset_for(figure)
    }

    fn prepare(&self, figure: FigureId, observer: &dyn Observer) -> Result<()> {
        if figure.needs_nn() {
            return Err(StudyError::Unsupported(format!(
                "{figure} trains ResNet-20 models on CIFAR-10: build with `--features nn` (cargo build --release --features nn); this build runs the linear figures fig1a–fig6b"
            )));
        }
        // Keep memory bounded: the shared computations of the previous figure are done.
        self.clear_caches();
        observer.on_event(&Event::Message(&format!(
            "{figure}: dataset {}{}",
            self.dataset_for(figure),
            if self.opts.quick {
                " (--quick: subsampled)"
            } else {
                ""
            }
        )));
        Ok(())
    }

    /// The small-table rule: subsample-and-aggregate needs at least one training row per
    /// teacher (T ≤ N), and DP-SGD an expected batch size no larger than the rows its clip is
    /// selected on (the 90 % part; batch ≤ N keeps the sampling rate q = batch / N ≤ 1).
    /// Neither is capped silently — a capped T or batch is a different method setting with a
    /// different guarantee — the method is listed as not applicable, with the flag that fits.
    fn not_applicable(&self, g: &Group, seed: u64) -> Result<Option<String>> {
        let (_, p) = self.prepared(g, seed)?;
        // a private split selection trains each candidate on a part of the training set and
        // the release on another: the smaller of the two is what the method must fit in
        let split = |grid: usize| -> std::result::Result<usize, String> {
            use privpred_core::tuning::{SELECTION_FRACTION, SplitPlan};
            SplitPlan::new(p.train.n, grid, SELECTION_FRACTION)
                .map(|s| s.part_n.min(s.final_n))
                .map_err(|e| e.to_string())
        };
        use crate::selection::Choice;
        let sel = self.opts.selection;
        if g.method == Method::DpSgd && sel.clip == Choice::Private {
            let grid = privpred_linear::dpsgd::CLIP_GRID.len();
            return Ok(match split(grid) {
                Err(e) => Some(e),
                Ok(n) if self.opts.dpsgd_batch_size > n => Some(format!(
                    "its expected batch size {} is more than the N = {n} rows of each part of the private selection of its clip (the N = {} training rows cut into {} parts and a final part): pass --dpsgd-batch-size {n} or fewer, or a public --clip VALUE",
                    self.opts.dpsgd_batch_size,
                    p.train.n,
                    grid + 1
                )),
                Ok(_) => None,
            });
        }
        if g.method == Method::SubsampleAggregate && sel.lambda == Choice::Private {
            return Ok(match split(LAMBDA_GRID.len()) {
                Err(e) => Some(e),
                Ok(n) if g.setting.teachers > n => Some(format!(
                    "T = {} teachers need at least one row each of the N = {n} rows of each part of the private selection of λ: pass --teachers {n} or fewer, or a public --lambda VALUE",
                    g.setting.teachers
                )),
                Ok(_) => None,
            });
        }
        Ok(match g.method {
            Method::SubsampleAggregate if g.setting.teachers > p.train.n => Some(format!(
                "T = {} teachers need at least one training row each, and the training set has N = {} rows: pass --teachers {} or fewer",
                g.setting.teachers, p.train.n, p.train.n
            )),
            Method::DpSgd if self.opts.dpsgd_batch_size > p.train90.n => Some(format!(
                "its expected batch size {} is more than the N = {} rows its clip is selected on (the 90 % part of the training set): pass --dpsgd-batch-size {} or fewer",
                self.opts.dpsgd_batch_size, p.train90.n, p.train90.n
            )),
            _ => None,
        })
    }

    /// Keeps a resumed run's finished measurement of a memoised group for the groups that
    /// replay it ([`rng_id`], `memoised`).
    fn resumed(&self, g: &Group, repetition: u32, m: &Measurement) {
        if memoised(g, self.opts.neighbours) {
            self.replays
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert((rng_id(g, self.opts.neighbours), repetition), m.clone());
        }
    }

    /// The group's λ or clip is chosen (fixed, public, the private split, or selected on the
    /// hold-out: [`crate::selection`]), its release's shared
    /// fit taken from the cache, and each repetition is one draw from it
    /// ([`SharedFit::draw`]), seeded by the repetition.
    fn run_group(
        &self,
        g: &Group,
        reps: &[u32],
        seed: u64,
        done: &Done<'_>,
    ) -> Result<GroupTiming> {
        let rid = rng_id(g, self.opts.neighbours);
        let memo = memoised(g, self.opts.neighbours);
        let todo = self.replay(&rid, memo, reps, done)?;
        if todo.is_empty() {
            return Ok(GroupTiming::default());
        }
        let (train_clock, predict_clock) = (Clock::new(), Clock::new());
        let (key, p) = train_clock.time(|| self.prepared(g, seed))?;
        let nonpriv = train_clock.time(|| self.nonprivate(&key, &p))?;
        let sel = train_clock.time(|| self.select(g, &key, &p, seed, &rid))?;
        // the private split trains the release on its final part (a data configuration of its own)
        let (key, p) = sel.release.clone().unwrap_or((key, p));
        let cal = self.calibration(g, &p, p.train.n, sel.lambda)?;
        self.check_shared_draws(g, &p, &cal, sel.lambda)?;
        let cfg = self.method_config(&cal, sel.lambda, sel.clip, g.setting.teachers)?;
        let fit = Fit {
            cfg: &cfg,
            train: &p.train,
            calibration: &cal,
            purpose: Purpose::Release,
        };
        let (name, shared) = train_clock.time(|| self.shared_fit(false, &key, &p, &fit, seed))?;
        let scores = train_clock.time(|| self.scores(&key, &name, "test", &shared, &p.test))?;
        let row = self.row(g, &p, &cal, &sel, nonpriv);
        let in_seq = matches!(g.method, Method::LossPerturbation | Method::DpSgd);
        todo.par_iter().try_for_each(|&r| {
            let mut rng = rng_for(seed, &format!("{rid}/r{r:03}"));
            let draw = seq_if(in_seq, || shared.draw(&fit, &scores, &p.test, &mut rng))?;
            train_clock.add(draw.release_seconds);
            predict_clock.add(draw.answer_seconds);
            let mut m = row.clone();
            m.accuracy = accuracy_of(&draw.labels, &p.test.labels);
            if memo {
                self.replays
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert((rid.clone(), r), m.clone());
            }
            done(r, m)
        })?;
        Ok(GroupTiming {
            train_s: train_clock.secs(),
            predict_s: predict_clock.secs(),
            answers: (p.test.n * todo.len()) as u64,
        })
    }
}

/// Runs `f` with sequential kernels when `on` (see [`seq`]).
fn seq_if<T>(on: bool, f: impl FnOnce() -> T) -> T {
    if on { seq(f) } else { f() }
}
