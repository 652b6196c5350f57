//! The runner of the linear-model figures (fig1–fig6) on top of `privpred_linear`, with the
//! exact shortcuts of the study (see `privpred_linear::methods`):
//!
//! - data are loaded, preprocessed (scale 1/255, class subset, subsample, PCA, bias feature,
//!   per-example normalisation into the unit ball) and split (10 % hold-out, SPEC §6) once per
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
//! Every fit whose result is shared runs on one thread (the parallel reduction of the gradient
//! kernel sums in a scheduling-dependent order), so that resumed and sharded runs reproduce the
//! same numbers; parallelism comes from running repetitions, λ values and teachers side by side.

use crate::error::{Result, StudyError};
use crate::figures::{AxisKind, FigureId, LAMBDA_GRID, fmt_num};
use crate::progress::{Event, Observer};
use crate::results::Measurement;
use crate::sweep::{Done, GroupTiming, Runner};
use crate::units::{Group, rng_for, seed_for};
use privpred_core::{Budget, Calibration, CalibrationMode, Method, Privacy};
use privpred_data::{DatasetSpec, LoadOptions, Preprocessing, UnitBallDataset};
use privpred_linear::dpsgd::{CLIP_GRID, DpSgdConfig, train_dpsgd};
use privpred_linear::kernel::Design;
use privpred_linear::methods::{
    LossPerturbationPreconditioner, VoteMatrix, loss_perturbation_fit_preconditioned,
    loss_perturbation_fit_selection, loss_perturbation_rho_eff, perturb_model,
    prediction_sensitivity_labels, teacher_lbfgs_options, train_teachers,
};
use privpred_linear::precond::DataMoment;
use privpred_linear::train::{accuracy_of, logits_all, predict_all};
use privpred_linear::{GradNorm, LbfgsOptions, LinearModel, MethodConfig, fit_logistic};
use rayon::prelude::*;
use std::collections::HashMap;
use std::hash::Hash;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// The study's and `compare`'s default bias value ([`privpred_data::preprocess::BIAS_DEFAULT`]:
/// 0, no bias feature, chosen on the training hold-out; docs/study.md). The paper's own code appends 1 outside the unit
/// ball (SPEC §4.4), so no calibration mode has a bias value of its own: one default for all.
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
    /// `--quick`: subsampled training and test sets.
    pub quick: bool,
    /// Cap on training examples (quick: 5,000).
    pub max_train: Option<usize>,
    /// Cap on test examples (quick: 2,000).
    pub max_test: Option<usize>,
    /// Hold-out fraction for cross-validation (SPEC §6: 0.1).
    pub holdout_fraction: f64,
    /// Private draws averaged per cross-validated λ (model sensitivity, prediction
    /// sensitivity, loss perturbation; default [`CV_DRAWS_DEFAULT`]). DP-SGD's ν is selected
    /// with one run per value.
    pub cv_draws: usize,
    /// The bias feature's value v ∈ [0, 1) (0 = none): rows [x·√(1 − v²), v] (default
    /// [`BIAS_DEFAULT`]).
    pub bias: f64,
    /// DP-SGD hyper-parameters other than ν.
    pub dpsgd_batch_size: usize,
    /// DP-SGD epochs.
    pub dpsgd_epochs: f64,
    /// The neighbouring relation every method is calibrated for (SPEC §1; replace-one by
    /// default). Recorded in the manifest's options and in every row.
    #[serde(default)]
    pub neighbours: privpred_core::Neighbours,
}

impl LinearOptions {
    /// The defaults: full data, or the `--quick` caps.
    pub fn new(quick: bool) -> Self {
        LinearOptions {
            data_dir: None,
            dataset: None,
            quick,
            max_train: quick.then_some(privpred_core::defaults::QUICK_MAX_TRAIN),
            max_test: quick.then_some(privpred_core::defaults::QUICK_MAX_TEST),
            holdout_fraction: privpred_core::defaults::HOLDOUT_FRACTION,
            neighbours: privpred_core::Neighbours::ReplaceOne,
            cv_draws: CV_DRAWS_DEFAULT,
            bias: BIAS_DEFAULT,
            dpsgd_batch_size: DpSgdConfig::default().batch_size,
            dpsgd_epochs: if quick {
                privpred_core::defaults::LINEAR_DPSGD_EPOCHS_QUICK
            } else {
                DpSgdConfig::default().epochs
            },
        }
    }
}

/// A compute-once cache: concurrent callers of the same key wait for one computation.
type Slot<V> = Arc<OnceLock<std::result::Result<Arc<V>, String>>>;

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
        cell.get_or_init(|| f().map(Arc::new).map_err(|e| e.to_string()))
            .clone()
            .map_err(|message| StudyError::Compute {
                context: "shared computation".into(),
                message,
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

/// The runner of fig1–fig6 (linear models).
pub struct LinearRunner {
    opts: LinearOptions,
    raw: Cache<String, privpred_data::Splits>,
    prepared: Cache<Key, Prepared>,
    fit90: Cache<(Key, u64), LinearModel>,
    fitfull: Cache<(Key, u64), LinearModel>,
    /// The full-data fits certified to ‖∇J‖₂ ≤ γ (erratum 4.8), per (data, λ, γ): what model
    /// and prediction sensitivity release in `corrected`/`tight`.
    fitcert: Cache<(Key, u64, u64), LinearModel>,
    logits_test: Cache<(Key, u64), Vec<f64>>,
    logits_hold: Cache<(Key, u64), Vec<f64>>,
    nonprivate: Cache<Key, f64>,
    votes: Cache<(Key, usize), VoteMatrix>,
    /// Σ = XᵀX/N of the whole training set eigendecomposed, per data configuration (the
    /// 90 % part's fits use it too: any symmetric positive definite preconditioner gives the
    /// same minimiser, and Σ of the 90 % part is nearly the same matrix).
    moment: Cache<Key, DataMoment>,
    /// Loss perturbation's preconditioner per (data, 90 % part?, λ, ρ_eff).
    lp_pre: Cache<(Key, bool, u64, u64), LossPerturbationPreconditioner>,
    /// Measurements of budget-independent groups (private-training methods on a B axis), by
    /// (budget-free id, repetition): every B of fig2a/fig2b reuses them (exact: the released
    /// model's guarantee covers any number of answers, and its noise is seeded without B).
    budget_free: Mutex<HashMap<(String, u32), Measurement>>,
}

/// The label that seeds a group's random draws. For a private-training method (model
/// sensitivity, loss perturbation, DP-SGD) on a budget axis the released model does not
/// depend on B, so its draws are seeded from an id without B and every B reuses them;
/// otherwise the group id.
pub fn rng_id(g: &Group) -> String {
    if g.method.is_private_training() && g.figure.definition().axis.kind == AxisKind::Budget {
        format!(
            "{}/{}/{}/any-budget:epsilon={},delta={}",
            g.figure.name(),
            g.calibration.name(),
            g.method.name(),
            fmt_num(g.setting.epsilon),
            fmt_num(g.setting.delta)
        )
    } else {
        g.id()
    }
}

/// The study's solver: L-BFGS to max|∇ᵢ| ≤ 1e-4 — the reference's stopping rule (PyTorch's
/// `tolerance_grad` is a max-abs test), which SPEC §6 names; `privpred train` keeps the
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

/// Calibrates `method` at a setting for `n` training examples.
#[allow(clippy::too_many_arguments)]
pub fn calibrate(
    method: Method,
    mode: CalibrationMode,
    epsilon: f64,
    delta: f64,
    budget: u64,
    n: usize,
    classes: usize,
    lambda: Option<f64>,
    dpsgd: &DpSgdConfig,
    neighbours: privpred_core::Neighbours,
) -> Result<Calibration> {
    let privacy = Privacy::new(epsilon, delta)?;
    let mut cfg = MethodConfig::new(method, mode, privacy, Budget::finite(budget)?);
    cfg.neighbours = neighbours;
    if let Some(l) = lambda {
        cfg.lambda = l;
    }
    cfg.dp_sgd = *dpsgd;
    // with the solver's residual accounted for (erratum 4.8): the noise the product releases
    Ok(privpred_core::certify::calibrate_certified(
        &cfg.request(n, classes),
    )?)
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
            fitcert: Cache::new(),
            logits_test: Cache::new(),
            logits_hold: Cache::new(),
            nonprivate: Cache::new(),
            votes: Cache::new(),
            moment: Cache::new(),
            lp_pre: Cache::new(),
            budget_free: Mutex::new(HashMap::new()),
        }
    }

    /// The options.
    pub fn options_ref(&self) -> &LinearOptions {
        &self.opts
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

    /// DP-SGD's schedule as this runner trains it (batch size, epochs), for recalibrating a
    /// result's guarantee.
    pub fn dpsgd_config(&self) -> DpSgdConfig {
        self.dpsgd()
    }

    fn dpsgd(&self) -> DpSgdConfig {
        DpSgdConfig {
            batch_size: self.opts.dpsgd_batch_size,
            epochs: self.opts.dpsgd_epochs,
            ..DpSgdConfig::default()
        }
    }

    fn raw(&self, name: &str) -> Result<Arc<privpred_data::Splits>> {
        self.raw.get(&name.to_string(), || {
            let spec = DatasetSpec::parse(name)?;
            let opts = LoadOptions {
                data_dir: self.opts.data_dir.clone(),
                ..LoadOptions::default()
            };
            Ok(privpred_data::load(&spec, &opts)?)
        })
    }

    /// The data configuration of a group: dataset and (N, D, C).
    fn key(&self, g: &Group) -> Key {
        format!(
            "{}|n={:?}|d={:?}|c={:?}",
            self.dataset_for(g.figure),
            g.setting.n,
            g.setting.dim,
            g.setting.classes
        )
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
                ..Preprocessing::default()
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

    /// The full-data fit at λ certified to ‖∇J(θ̂)‖₂ ≤ γ in f64 (erratum 4.8), refined from
    /// the cached fast fit.
    fn fit_certified(
        &self,
        key: &Key,
        p: &Prepared,
        lambda: f64,
        gamma: f64,
    ) -> Result<Arc<LinearModel>> {
        self.fitcert
            .get(&(key.clone(), lambda.to_bits(), gamma.to_bits()), || {
                let warm = self.fit(false, key, p, lambda)?;
                Ok(seq(|| {
                    privpred_linear::train::fit_logistic_certified(
                        &p.train,
                        lambda,
                        Some(&warm),
                        &lbfgs(),
                        gamma,
                    )
                })?
                .model)
            })
    }

    pub(crate) fn hold_logits(
        &self,
        key: &Key,
        p: &Prepared,
        lambda: f64,
    ) -> Result<Arc<Vec<f64>>> {
        self.logits_hold.get(&(key.clone(), lambda.to_bits()), || {
            let m = self.fit(true, key, p, lambda)?;
            Ok(logits_all(&m, &p.hold)?)
        })
    }

    fn test_logits(&self, key: &Key, p: &Prepared, lambda: f64) -> Result<Arc<Vec<f64>>> {
        self.logits_test.get(&(key.clone(), lambda.to_bits()), || {
            let m = self.fit(false, key, p, lambda)?;
            Ok(logits_all(&m, &p.test)?)
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

    /// The preconditioner of loss perturbation's fits on the 90 % part (`which90`) or the whole
    /// training set at λ and the calibration's ρ_eff, around the shared non-private θ*(λ).
    /// Built once and shared by every repetition (and every group with the same ρ_eff); a
    /// deterministic function of the data, λ and ρ_eff (built with sequential kernels), so
    /// resumed and sharded runs reproduce the same fits.
    pub(crate) fn lp_pre(
        &self,
        which90: bool,
        key: &Key,
        p: &Prepared,
        lambda: f64,
        cal: &Calibration,
    ) -> Result<Arc<LossPerturbationPreconditioner>> {
        let ds = if which90 { &p.train90 } else { &p.train };
        let rho_eff = loss_perturbation_rho_eff(cal, lambda, ds.n, ds.classes);
        let k = (key.clone(), which90, lambda.to_bits(), rho_eff.to_bits());
        self.lp_pre.get(&k, || {
            let warm = self.fit(which90, key, p, lambda)?;
            let moment = self.moment.get(key, || {
                let t = &p.train;
                let design = Design::new(&t.features, &t.labels, t.d, t.classes);
                Ok(seq(|| DataMoment::new(&design))?)
            })?;
            Ok(seq(|| {
                LossPerturbationPreconditioner::new(ds, moment, &warm, rho_eff)
            })?)
        })
    }

    /// One private draw of `method` (model sensitivity, prediction sensitivity or loss
    /// perturbation) trained on the 90 % part at λ with calibration `cal`, scored on the
    /// hold-out: what cross-validation averages over [`LinearOptions::cv_draws`] draws. The
    /// non-private fit (and its hold-out logits, loss perturbation's preconditioner) are
    /// shared; only the mechanism's noise is drawn from `rng`.
    pub(crate) fn holdout_draw(
        &self,
        method: Method,
        key: &Key,
        p: &Prepared,
        cal: &Calibration,
        lambda: f64,
        rng: &mut rand_chacha::ChaCha20Rng,
    ) -> Result<f64> {
        let labels = match method {
            Method::ModelSensitivity => {
                let m90 = self.fit(true, key, p, lambda)?;
                predict_all(&perturb_model(&m90, cal, rng)?, &p.hold)?
            }
            Method::PredictionSensitivity => prediction_sensitivity_labels(
                &self.hold_logits(key, p, lambda)?,
                p.hold.classes,
                cal,
                rng,
            )?,
            Method::LossPerturbation => {
                let pre = self.lp_pre(true, key, p, lambda, cal)?;
                // selection only: the released mechanism's noise, no f64 certification
                let m = seq(|| {
                    loss_perturbation_fit_selection(
                        &p.train90,
                        cal,
                        lambda,
                        Some(&pre),
                        None,
                        &lbfgs(),
                        rng,
                    )
                })?;
                predict_all(&m, &p.hold)?
            }
            other => {
                return Err(StudyError::Compute {
                    context: "cross-validation".into(),
                    message: format!("{other} has no λ to cross-validate"),
                });
            }
        };
        Ok(accuracy_of(&labels, &p.hold.labels))
    }

    fn votes(&self, key: &Key, p: &Prepared, t: usize, seed: u64) -> Result<Arc<VoteMatrix>> {
        self.votes.get(&(key.clone(), t), || {
            let mut rng = rng_for(seed, &format!("teachers/{key}/T={t}"));
            let teachers = train_teachers(&p.train, t, 0.0, &teacher_lbfgs_options(), &mut rng)?;
            Ok(teachers.vote_matrix(&p.test)?)
        })
    }

    /// Releases shared computations of other data configurations (memory).
    pub fn clear_caches(&self) {
        self.prepared.clear();
        self.fit90.clear();
        self.fitfull.clear();
        self.logits_test.clear();
        self.logits_hold.clear();
        self.votes.clear();
        self.moment.clear();
        self.lp_pre.clear();
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

    fn run_group(
        &self,
        g: &Group,
        reps: &[u32],
        seed: u64,
        done: &Done<'_>,
    ) -> Result<GroupTiming> {
        let rid = rng_id(g);
        let shared = rid != g.id();
        // budget-independent repetitions another B already computed are replayed, not redone
        let mut todo = Vec::with_capacity(reps.len());
        let mut hits = Vec::new();
        {
            let m = self.budget_free.lock().unwrap_or_else(|e| e.into_inner());
            for &r in reps {
                match m.get(&(rid.clone(), r)).filter(|_| shared) {
                    Some(v) => hits.push((r, v.clone())),
                    None => todo.push(r),
                }
            }
        }
        for (r, m) in hits {
            done(r, m)?;
        }
        if todo.is_empty() {
            return Ok(GroupTiming {
                train_s: 0.0,
                predict_s: 0.0,
                answers: 0,
            });
        }
        let reps = &todo[..];
        let remember = |r: u32, m: Measurement| -> Result<()> {
            if shared {
                self.budget_free
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert((rid.clone(), r), m.clone());
            }
            done(r, m)
        };
        let done = &remember;
        let train_clock = Clock::new();
        let predict_clock = Clock::new();
        let (key, p) = train_clock.time(|| self.prepared(g, seed))?;
        let nonpriv = train_clock.time(|| self.nonprivate(&key, &p))?;
        let s = g.setting;
        let (n, n90, c) = (p.train.n, p.train90.n, p.train.classes);
        let dpsgd = self.dpsgd();
        let mut dd = p.data_dependent.clone();
        let base = |cal: &Calibration,
                    lambda: Option<f64>,
                    lambda_source: &str,
                    clip: Option<f64>,
                    acc: f64| {
            let (noise, noise_param) = noise_fields(cal);
            Measurement {
                accuracy: acc,
                nonprivate_accuracy: nonpriv,
                n_train: n,
                dim: p.train.d,
                classes: c,
                test_size: p.test.n,
                teachers: (g.method == Method::SubsampleAggregate).then_some(s.teachers),
                lambda,
                lambda_source: lambda_source.to_string(),
                clip,
                noise,
                noise_param,
                noise_multiplier: cal.mechanism.noise_multiplier(),
                rho: cal.mechanism.rho(),
                valid_guarantee: cal.is_valid(),
                bias: self.opts.bias,
                cv_draws: match (g.method, lambda_source) {
                    (Method::DpSgd, _) => Some(1),
                    (_, "cross-validated") => Some(self.opts.cv_draws.max(1)),
                    _ => None,
                },
                dataset_checksum: p.checksum.clone(),
                dataset_labels: p.labels.clone(),
                preprocessing: p.steps.clone(),
                data_dependent_steps: String::new(),
                neighbours: cal.neighbours(),
            }
        };
        let cal_at = |n: usize, lambda: Option<f64>| {
            calibrate(
                g.method,
                g.calibration,
                s.epsilon,
                s.delta,
                s.budget,
                n,
                c,
                lambda,
                &dpsgd,
                self.opts.neighbours,
            )
        };
        let test_labels = &p.test.labels;
        match g.method {
            Method::ModelSensitivity | Method::PredictionSensitivity | Method::LossPerturbation => {
                // λ: fixed by the figure (fig6a) or cross-validated on the hold-out.
                let (lambda, source) = match s.lambda {
                    Some(l) => (l, "fixed"),
                    None => {
                        let scores: Vec<f64> = train_clock.time(|| {
                            LAMBDA_GRID
                                .par_iter()
                                .map(|&l| {
                                    let cal = cal_at(n90, Some(l))?;
                                    let mut rng = rng_for(seed, &format!("{rid}/cv/lambda={l}"));
                                    let k = self.opts.cv_draws.max(1);
                                    let mut acc = 0.0;
                                    for _ in 0..k {
                                        acc += self
                                            .holdout_draw(g.method, &key, &p, &cal, l, &mut rng)?;
                                    }
                                    Ok(acc / k as f64)
                                })
                                .collect::<Result<_>>()
                        })?;
                        dd.push(format!(
                            "λ cross-validated on a {:.0}% hold-out of the training set by the mean accuracy of {} private draws per value, once per setting (privacy cost not accounted, as in the paper)",
                            100.0 * self.opts.holdout_fraction,
                            self.opts.cv_draws.max(1)
                        ));
                        (LAMBDA_GRID[argmax_first(&scores)], "cross-validated")
                    }
                };
                let cal = cal_at(n, Some(lambda))?;
                // the released fit: certified when the calibration assumed γ (erratum 4.8)
                let gamma = cal.certified.map(|c| c.gradient_norm_bound);
                let m = train_clock.time(|| match (g.method, gamma) {
                    (Method::ModelSensitivity | Method::PredictionSensitivity, Some(gm)) => {
                        self.fit_certified(&key, &p, lambda, gm)
                    }
                    _ => self.fit(false, &key, &p, lambda),
                })?;
                let logits = match (g.method, gamma) {
                    (Method::PredictionSensitivity, Some(_)) => {
                        Some(train_clock.time(|| logits_all(&m, &p.test).map(Arc::new))?)
                    }
                    (Method::PredictionSensitivity, None) => {
                        Some(train_clock.time(|| self.test_logits(&key, &p, lambda))?)
                    }
                    _ => None,
                };
                let lp_pre = match g.method {
                    Method::LossPerturbation => {
                        Some(train_clock.time(|| self.lp_pre(false, &key, &p, lambda, &cal))?)
                    }
                    _ => None,
                };
                let dds = dd.join("; ");
                reps.par_iter().try_for_each(|&r| {
                    let mut rng = rng_for(seed, &format!("{rid}/r{r:03}"));
                    let labels = match g.method {
                        Method::ModelSensitivity => {
                            let noisy = train_clock.time(|| perturb_model(&m, &cal, &mut rng))?;
                            predict_clock.time(|| predict_all(&noisy, &p.test))?
                        }
                        Method::PredictionSensitivity => predict_clock.time(|| {
                            prediction_sensitivity_labels(
                                logits.as_deref().map_or(&[][..], |v| v),
                                c,
                                &cal,
                                &mut rng,
                            )
                        })?,
                        _ => {
                            let pre = lp_pre.as_deref().ok_or_else(|| StudyError::Compute {
                                context: g.id(),
                                message: "loss perturbation without its preconditioner".into(),
                            })?;
                            let (fit, _) = train_clock.time(|| {
                                seq(|| {
                                    loss_perturbation_fit_preconditioned(
                                        &p.train,
                                        &cal,
                                        lambda,
                                        pre,
                                        &lbfgs(),
                                        &mut rng,
                                    )
                                })
                            })?;
                            predict_clock.time(|| predict_all(&fit, &p.test))?
                        }
                    };
                    let mut meas = base(
                        &cal,
                        Some(lambda),
                        source,
                        None,
                        accuracy_of(&labels, test_labels),
                    );
                    meas.data_dependent_steps = dds.clone();
                    done(r, meas)
                })?;
            }
            Method::SubsampleAggregate => {
                if s.teachers > n {
                    return Err(StudyError::invalid(
                        "T",
                        s.teachers,
                        format!("at most N = {n} teachers (each needs one example)"),
                    ));
                }
                let votes = train_clock.time(|| self.votes(&key, &p, s.teachers, seed))?;
                let cal = cal_at(n, None)?;
                // the exponential mechanism, or permute-and-flip in tight with δ = 0
                let noise = match cal.noise() {
                    n if cal.mechanism.is_selection() => n,
                    other => {
                        return Err(StudyError::Compute {
                            context: g.id(),
                            message: format!("subsample-and-aggregate calibrated with {other:?}"),
                        });
                    }
                };
                let dds = dd.join("; ");
                reps.par_iter().try_for_each(|&r| {
                    let mut rng = rng_for(seed, &format!("{rid}/r{r:03}"));
                    let labels =
                        predict_clock.time(|| votes.private_labels_with(&noise, &mut rng))?;
                    let mut meas = base(
                        &cal,
                        None,
                        "none (teachers without L2, as in the paper)",
                        None,
                        accuracy_of(&labels, test_labels),
                    );
                    meas.data_dependent_steps = dds.clone();
                    done(r, meas)
                })?;
            }
            Method::DpSgd => {
                let cal90 = cal_at(n90, None)?;
                let sigma90 = dp_sigma(&cal90)?;
                let d90 = Design::new(&p.train90.features, &p.train90.labels, p.train90.d, c);
                let scores: Vec<f64> = train_clock.time(|| {
                    CLIP_GRID
                        .par_iter()
                        .map(|&nu| {
                            let mut rng = rng_for(seed, &format!("{rid}/cv/clip={nu}"));
                            let (m, _) = seq(|| train_dpsgd(&d90, &dpsgd, nu, sigma90, &mut rng))?;
                            Ok(accuracy_of(&predict_all(&m, &p.hold)?, &p.hold.labels))
                        })
                        .collect::<Result<_>>()
                })?;
                let nu = CLIP_GRID[argmax_first(&scores)];
                dd.push(format!(
                    "clip ν cross-validated on a {:.0}% hold-out of the training set (privacy cost not accounted, as in the paper)",
                    100.0 * self.opts.holdout_fraction
                ));
                let cal = cal_at(n, None)?;
                let sigma = dp_sigma(&cal)?;
                let design = Design::new(&p.train.features, &p.train.labels, p.train.d, c);
                let dds = dd.join("; ");
                reps.par_iter().try_for_each(|&r| {
                    let mut rng = rng_for(seed, &format!("{rid}/r{r:03}"));
                    let (m, _) = train_clock
                        .time(|| seq(|| train_dpsgd(&design, &dpsgd, nu, sigma, &mut rng)))?;
                    let labels = predict_clock.time(|| predict_all(&m, &p.test))?;
                    let mut meas = base(
                        &cal,
                        None,
                        "none (DP-SGD without L2)",
                        Some(nu),
                        accuracy_of(&labels, test_labels),
                    );
                    meas.data_dependent_steps = dds.clone();
                    done(r, meas)
                })?;
            }
        }
        Ok(GroupTiming {
            train_s: train_clock.secs(),
            predict_s: predict_clock.secs(),
            answers: (p.test.n * reps.len()) as u64,
        })
    }
}

fn dp_sigma(cal: &Calibration) -> Result<f64> {
    cal.mechanism
        .gaussian_sigma()
        .ok_or_else(|| StudyError::Compute {
            context: "dp-sgd".into(),
            message: "calibration without a noise multiplier".into(),
        })
}
