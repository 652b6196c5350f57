//! One group of the linear runner through `privpred_linear::methods`: the method's
//! configuration as the study trains it, the cached shared fits and their scores, the
//! hold-out selection of λ or DP-SGD's clip, and the measurement row.

use super::{CalibrationInput, seq_if};
use super::{Key, LinearRunner, Prepared, argmax_first, calibrate, lbfgs, noise_fields, seq};
use crate::error::{Result, StudyError};
use crate::figures::LAMBDA_GRID;
use crate::results::Measurement;
use crate::selection::Choice;
use crate::sweep::Done;
use crate::units::{Group, rng_for};
use privpred_core::ParamGuard;
use privpred_core::{Calibration, Method, SelectionMethod};
use privpred_data::Dataset;
use privpred_linear::dpsgd::CLIP_GRID;
use privpred_linear::dpsgd::DpSgdConfig;
use privpred_linear::exact::NonzerosCell;
use privpred_linear::methods::{
    Fit, Knob, Purpose, Reuse, Scores, SharedFit, loss_perturbation_rho_eff,
};
use privpred_linear::train::accuracy_of;
use privpred_linear::{MethodConfig, TrainParams};
use rand::SeedableRng;
use rayon::prelude::*;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// A group's selected hyper-parameters and how they were chosen.
pub(crate) struct Selected {
    /// λ (model sensitivity, loss perturbation, prediction sensitivity).
    pub lambda: Option<f64>,
    /// DP-SGD's clip ν.
    pub clip: Option<f64>,
    /// How λ was chosen (the row's `lambda_source`).
    pub source: &'static str,
    /// The data-dependent step of the selection, if any.
    pub note: Option<String>,
    /// The selection's record (how it was chosen, what it cost).
    pub record: privpred_core::Selection,
    /// The private split's release data (the final part, under its own key); None: the release
    /// trains on the whole training set.
    pub release: Option<(Key, Arc<Prepared>)>,
}

impl Selected {
    /// A value chosen without the data (`source`: how the row names it).
    fn public(lambda: Option<f64>, clip: Option<f64>, source: &'static str) -> Selected {
        Selected {
            lambda,
            clip,
            source,
            note: None,
            record: crate::selection::public(),
            release: None,
        }
    }
}

impl LinearRunner {
    /// The calibration of `g`'s method at its setting for `n` examples of `p`'s classes.
    pub(crate) fn calibration(
        &self,
        g: &Group,
        p: &Prepared,
        n: usize,
        lambda: Option<f64>,
    ) -> Result<Calibration> {
        let s = g.setting;
        calibrate(&CalibrationInput {
            method: g.method,
            mode: g.calibration,
            epsilon: s.epsilon,
            delta: s.delta,
            budget: s.budget,
            n,
            classes: p.train.classes,
            lambda,
            dpsgd: &self.dpsgd_config(s.epsilon),
            neighbours: self.opts.neighbours,
            loss: self.opts.loss(g.method, p.train.classes),
        })
    }

    /// For a group that uses another mode's draws ([`super::draws_mode`]): an error unless
    /// that mode's calibration at this setting has the same mechanism, certificate and validity
    /// as `cal` (a bug in the sharing rule, never a user error).
    pub(crate) fn check_shared_draws(
        &self,
        g: &Group,
        p: &Prepared,
        cal: &Calibration,
        lambda: Option<f64>,
    ) -> Result<()> {
        let mode = super::draws_mode(g.method, g.calibration, self.opts.neighbours);
        if mode == g.calibration {
            return Ok(());
        }
        let source = Group {
            calibration: mode,
            ..g.clone()
        };
        let other = self.calibration(&source, p, p.train.n, lambda)?;
        if same_release(cal, &other) {
            return Ok(());
        }
        Err(StudyError::Compute {
            context: g.id(),
            message: format!(
                "{} shares the {} draws of {}, but their calibrations differ",
                g.calibration.name(),
                mode.name(),
                g.method.name()
            ),
        })
    }

    /// The configuration the study trains `cal`'s method with: λ, the clip, T teachers
    /// (without L2), DP-SGD's schedule and the study's solver ([`lbfgs`]), built through the
    /// checked params ([`TrainParams`]). Every value is in range before it gets here (the
    /// study's options are checked by `LinearParams`, T ≥ 1 by the CLI, λ and ν come from the
    /// grids of docs/study.md), so a refusal is a bug in the study, not a user error: it is
    /// returned as [`StudyError::Compute`] naming the out-of-range value, never a panic.
    pub(crate) fn method_config(
        &self,
        cal: &Calibration,
        lambda: Option<f64>,
        clip: Option<f64>,
        teachers: usize,
    ) -> Result<MethodConfig> {
        let mut params = TrainParams::new(cal.method(), cal.mode(), cal.privacy(), cal.budget())
            .neighbours(cal.neighbours())
            .loss(cal.assumptions.loss)
            // the calibration's N: under add/remove the study's (public) size as N̂
            .public_n(
                (cal.neighbours() == privpred_core::Neighbours::AddRemove)
                    .then_some(cal.assumptions.n)
                    .flatten(),
            )
            .teachers(teachers)
            .dp_sgd(DpSgdConfig {
                clip,
                ..self.dpsgd_config(cal.privacy().epsilon())
            })
            .lbfgs(lbfgs());
        if let Some(l) = lambda {
            params = params.lambda(l);
        }
        params.check().map_err(|e| StudyError::Compute {
            context: "the study's method configuration".into(),
            message: e.to_string(),
        })
    }

    /// The shared fit of `fit` on the whole training set or its 90 % part (`which90`), from
    /// the cache keyed by what it depends on: θ*(λ) and the certificate's γ (model and
    /// prediction sensitivity share it), loss perturbation's (λ, ρ_eff), the number of
    /// teachers (their partition is seeded by the data configuration and T). Fits of model
    /// sensitivity, prediction sensitivity and loss perturbation run with sequential kernels
    /// from the cached non-private θ*(λ) (and the data moment); the teachers in parallel.
    /// Returns the cache name (for [`Self::scores`]) and the fit.
    pub(crate) fn shared_fit(
        &self,
        which90: bool,
        key: &Key,
        p: &Prepared,
        fit: &Fit<'_>,
        seed: u64,
    ) -> Result<(String, Arc<SharedFit>)> {
        let (method, lambda) = (fit.cfg.method(), fit.cfg.lambda());
        let part = if which90 { "90" } else { "full" };
        let gamma = fit
            .calibration
            .certified
            .map(|c| c.gradient_norm_bound.to_bits());
        let name = match method {
            Method::ModelSensitivity | Method::PredictionSensitivity => {
                let gamma = gamma.filter(|_| fit.purpose == Purpose::Release);
                format!("model/{part}/{:x}/{gamma:?}", lambda.to_bits())
            }
            Method::LossPerturbation => {
                let t = fit.train;
                let rho = loss_perturbation_rho_eff(fit.calibration, lambda, t.n, t.classes);
                format!("lp/{part}/{:x}/{:x}", lambda.to_bits(), rho.to_bits())
            }
            Method::SubsampleAggregate => format!("teachers/{part}/{}", fit.cfg.teachers()),
            Method::DpSgd => "dp-sgd".to_string(),
        };
        let shared = self.shared.get(&(key.clone(), name.clone()), || {
            self.shared_built.fetch_add(1, Ordering::Relaxed);
            let reuse = match method {
                Method::SubsampleAggregate | Method::DpSgd => Reuse::default(),
                _ => Reuse {
                    nonprivate: Some(self.fit(which90, key, p, lambda)?),
                    moment: match method {
                        Method::LossPerturbation => Some(self.moment(key, p)?),
                        _ => None,
                    },
                    nonzeros: match method {
                        Method::LossPerturbation => Some(
                            self.nonzeros
                                .get(&(key.clone(), part), || Ok(NonzerosCell::default()))?,
                        ),
                        _ => None,
                    },
                },
            };
            if method == Method::SubsampleAggregate {
                let t = fit.cfg.teachers();
                let mut rng = rng_for(seed, &format!("teachers/{key}/T={t}"));
                return Ok(SharedFit::fit(fit, &reuse, &mut rng)?);
            }
            // these fits draw nothing from their generator
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(0);
            Ok(seq(|| SharedFit::fit(fit, &reuse, &mut rng))?)
        })?;
        if shared.method() == method {
            return Ok((name, shared));
        }
        let as_method = shared
            .as_method(method)
            .ok_or_else(|| StudyError::Compute {
                context: name.clone(),
                message: format!("a shared fit of {} used for {method}", shared.method()),
            })?;
        Ok((name, Arc::new(as_method)))
    }

    /// The scores of a shared fit on `queries` (`which`: "test" or "hold"), cached with it.
    pub(crate) fn scores(
        &self,
        key: &Key,
        name: &str,
        which: &str,
        shared: &SharedFit,
        queries: &Dataset,
    ) -> Result<Arc<Scores>> {
        self.scores
            .get(&(key.clone(), format!("{name}/{which}")), || {
                Ok(shared.score(queries)?)
            })
    }

    /// One private draw of `method` (model sensitivity, prediction sensitivity or loss
    /// perturbation) trained on the 90 % part at λ with calibration `cal`, scored on the
    /// hold-out: what cross-validation averages over [`super::LinearOptions::cv_draws`]
    /// draws. The shared fit (θ*(λ), its hold-out logits, loss perturbation's preconditioner)
    /// is cached; only the mechanism's noise is drawn from `rng`.
    pub(crate) fn holdout_draw(
        &self,
        method: Method,
        key: &Key,
        p: &Prepared,
        cal: &Calibration,
        lambda: f64,
        rng: &mut rand_chacha::ChaCha20Rng,
    ) -> Result<f64> {
        if !matches!(
            method,
            Method::ModelSensitivity | Method::PredictionSensitivity | Method::LossPerturbation
        ) || cal.method() != method
        {
            return Err(StudyError::Compute {
                context: "cross-validation".into(),
                message: format!("{method} has no λ to cross-validate"),
            });
        }
        let cfg = self.method_config(cal, Some(lambda), None, 0)?;
        let fit = Fit {
            cfg: &cfg,
            train: &p.train90,
            calibration: cal,
            purpose: Purpose::Selection,
        };
        let (name, shared) = self.shared_fit(true, key, p, &fit, 0)?;
        let scores = self.scores(key, &name, "hold", &shared, &p.hold)?;
        let in_seq = method == Method::LossPerturbation;
        let draw = seq_if(in_seq, || shared.draw(&fit, &scores, &p.hold, rng))?;
        Ok(accuracy_of(&draw.labels, &p.hold.labels))
    }

    /// The group's λ or clip: fixed by the figure, or chosen as the runner's
    /// [`crate::selection::SelectionOptions`] say (a public value, the private split, or the
    /// paper's selection on the hold-out).
    pub(crate) fn select(
        &self,
        g: &Group,
        key: &Key,
        p: &Prepared,
        seed: u64,
        rid: &str,
    ) -> Result<Selected> {
        match g.method {
            Method::ModelSensitivity | Method::PredictionSensitivity | Method::LossPerturbation => {
                self.select_lambda(g, key, p, seed, rid)
            }
            Method::SubsampleAggregate => {
                let n = p.train.n;
                if g.setting.teachers > n {
                    return Err(StudyError::invalid(
                        "T",
                        g.setting.teachers,
                        format!("at most N = {n} teachers (each needs one example)"),
                    ));
                }
                Ok(Selected::public(
                    None,
                    None,
                    "none (teachers without L2, as in the paper)",
                ))
            }
            Method::DpSgd => self.select_clip(g, key, p, seed, rid),
        }
    }

    /// λ fixed by the figure (fig6a) or cross-validated on the hold-out by the mean accuracy of
    /// `cv_draws` private draws per value.
    fn select_lambda(
        &self,
        g: &Group,
        key: &Key,
        p: &Prepared,
        seed: u64,
        rid: &str,
    ) -> Result<Selected> {
        if let Some(l) = g.setting.lambda {
            return Ok(Selected::public(Some(l), None, "fixed"));
        }
        match self.opts.selection.lambda {
            Choice::Value(l) => return Ok(Selected::public(Some(l), None, "public")),
            Choice::Rule => {
                // the study's size is public under either relation (its N̂ under add/remove)
                let nb = self.opts.neighbours;
                let add_remove = nb == privpred_core::Neighbours::AddRemove;
                let n = privpred_core::public_rule::PublicN::new(
                    nb,
                    p.train.n,
                    add_remove.then_some(p.train.n),
                )
                .ok_or_else(|| StudyError::invalid("n", p.train.n, "at least 1"))?;
                let inputs = privpred_core::public_rule::PublicInputs {
                    method: g.method,
                    loss: self.opts.loss(g.method, p.train.classes),
                    classes: p.train.classes,
                    n,
                    dim: p.train.d,
                    epsilon: g.setting.epsilon,
                    budget: privpred_core::Budget::finite(g.setting.budget.max(1))?,
                };
                let r = privpred_core::public_rule::lambda(&inputs)
                    .ok_or_else(|| StudyError::invalid("method", g.method, "a method with λ"))?;
                // the formula reads public quantities only: no data-dependent step to note
                return Ok(Selected {
                    lambda: Some(r.value),
                    clip: None,
                    source: "public rule",
                    note: None,
                    record: crate::selection::public_rule(),
                    release: None,
                });
            }
            Choice::Private => return self.select_private(g, key, p, seed, rid, Knob::Lambda),
            Choice::Cv => {}
        }
        let k = self.opts.cv_draws.max(1);
        let cals = LAMBDA_GRID
            .iter()
            .map(|&l| self.calibration(g, p, p.train90.n, Some(l)))
            .collect::<Result<Vec<_>>>()?;
        let ids = mechanism_ids(g.method, &cals, p.train90.n, p.train90.classes);
        // λ values defining the same mechanism share the draws of the first of them (as in
        // `crate::holdout`): computed once, with that λ's generator
        let distinct: Vec<usize> = (0..LAMBDA_GRID.len())
            .filter(|&i| ids[..i].iter().all(|id| *id != ids[i]))
            .collect();
        let computed: Vec<f64> = distinct
            .par_iter()
            .map(|&i| {
                let l = LAMBDA_GRID[i];
                let mut rng = rng_for(seed, &format!("{rid}/cv/lambda={l}"));
                let mut acc = 0.0;
                for _ in 0..k {
                    acc += self.holdout_draw(g.method, key, p, &cals[i], l, &mut rng)?;
                }
                Ok(acc / k as f64)
            })
            .collect::<Result<_>>()?;
        let scores: Vec<f64> = ids
            .iter()
            .map(|id| {
                let at = distinct.iter().position(|&i| ids[i] == *id).unwrap_or(0);
                computed[at]
            })
            .collect();
        Ok(Selected {
            lambda: Some(LAMBDA_GRID[argmax_first(&scores)]),
            clip: None,
            source: "cross-validated",
            note: Some(format!(
                "λ cross-validated on a {:.0}% hold-out of the training set by the mean accuracy of {k} private draws per value, once per setting (privacy cost not accounted, as in the paper)",
                100.0 * self.opts.holdout_fraction,
            )),
            record: non_private_holdout(),
            release: None,
        })
    }

    /// DP-SGD's clip ν cross-validated on the hold-out by the mean accuracy of `cv_draws`
    /// private runs per value (the rule of [`Self::select_lambda`]): the runs of one
    /// value come one after the other from that value's own seeded generator, so its first run
    /// is the one the single-run selection made before.
    fn select_clip(
        &self,
        g: &Group,
        key: &Key,
        p: &Prepared,
        seed: u64,
        rid: &str,
    ) -> Result<Selected> {
        match self.opts.selection.clip {
            Choice::Value(nu) => {
                return Ok(Selected::public(None, Some(nu), "none (DP-SGD without L2)"));
            }
            Choice::Rule => {
                return Ok(Selected::public(
                    None,
                    Some(privpred_core::public_rule::DPSGD_CLIP),
                    "none (DP-SGD without L2)",
                ));
            }
            Choice::Private => return self.select_private(g, key, p, seed, rid, Knob::Clip),
            Choice::Cv => {}
        }
        let cal90 = self.calibration(g, p, p.train90.n, None)?;
        let k = self.opts.cv_draws.max(1);
        let scores: Vec<f64> = CLIP_GRID
            .par_iter()
            .map(|&nu| {
                let cfg = self.method_config(&cal90, None, Some(nu), g.setting.teachers)?;
                let fit = Fit {
                    cfg: &cfg,
                    train: &p.train90,
                    calibration: &cal90,
                    purpose: Purpose::Selection,
                };
                let (_, shared) = self.shared_fit(true, key, p, &fit, seed)?;
                let mut rng = rng_for(seed, &format!("{rid}/cv/clip={nu}"));
                let mut acc = 0.0;
                for _ in 0..k {
                    let draw = seq(|| shared.draw(&fit, &Scores::None, &p.hold, &mut rng))?;
                    acc += accuracy_of(&draw.labels, &p.hold.labels);
                }
                Ok(acc / k as f64)
            })
            .collect::<Result<_>>()?;
        Ok(Selected {
            lambda: None,
            clip: Some(CLIP_GRID[argmax_first(&scores)]),
            source: "none (DP-SGD without L2)",
            note: Some(format!(
                "clip ν cross-validated on a {:.0}% hold-out of the training set by the mean accuracy of {k} private run(s) per value, once per setting (privacy cost not accounted, as in the paper)",
                100.0 * self.opts.holdout_fraction
            )),
            record: non_private_holdout(),
            release: None,
        })
    }

    /// The group's measurement row, accuracy still to be filled in.
    pub(crate) fn row(
        &self,
        g: &Group,
        p: &Prepared,
        cal: &Calibration,
        sel: &Selected,
        nonprivate_accuracy: f64,
    ) -> Measurement {
        let (noise, noise_param) = noise_fields(cal);
        let mut dd = p.data_dependent.clone();
        dd.extend(sel.note.clone());
        Measurement {
            accuracy: 0.0,
            nonprivate_accuracy,
            n_train: p.train.n,
            dim: p.train.d,
            classes: p.train.classes,
            test_size: p.test.n,
            teachers: (g.method == Method::SubsampleAggregate).then_some(g.setting.teachers),
            lambda: sel.lambda,
            lambda_source: sel.source.to_string(),
            clip: sel.clip,
            noise,
            noise_param,
            noise_multiplier: cal.mechanism.noise_multiplier(),
            rho: cal.mechanism.rho(),
            valid_guarantee: cal.is_valid(),
            bias: self.opts.bias,
            cv_draws: (sel.record.method == SelectionMethod::NonPrivateHoldout)
                .then_some(self.opts.cv_draws.max(1)),
            dataset_checksum: p.checksum.clone(),
            dataset_labels: p.labels.clone(),
            preprocessing: p.steps.clone(),
            data_dependent_steps: dd.join("; "),
            neighbours: cal.neighbours(),
            selection: Some(sel.record),
            selection_label: crate::selection::label(&sel.record),
            loss: cal.assumptions.loss,
        }
    }

    /// Replays the repetitions of a memoised group (`memo`: see `memoised`) that another group
    /// with the same draws id `rid` already computed (another B of a budget axis, the other
    /// mode of [`super::draws_mode`]), and returns the repetitions still to do.
    pub(crate) fn replay(
        &self,
        rid: &str,
        memo: bool,
        reps: &[u32],
        done: &Done<'_>,
    ) -> Result<Vec<u32>> {
        let mut todo = Vec::with_capacity(reps.len());
        let mut hits = Vec::new();
        {
            let m = self.replays.lock().unwrap_or_else(|e| e.into_inner());
            for &r in reps {
                match m.get(&(rid.to_string(), r)).filter(|_| memo) {
                    Some(v) => hits.push((r, v.clone())),
                    None => todo.push(r),
                }
            }
        }
        for (r, m) in hits {
            done(r, m)?;
        }
        Ok(todo)
    }
}

/// The record of the paper's selection on the training hold-out: outside the guarantee.
fn non_private_holdout() -> privpred_core::Selection {
    privpred_core::Selection {
        method: SelectionMethod::NonPrivateHoldout,
        epsilon: None,
        delta: None,
        composition: privpred_core::tuning::Composition::Outside,
    }
}

/// Whether two calibrations release the same thing: the same mechanism (with its
/// parameters), certificate, assumptions and validity (their notes and modes may differ).
pub(crate) fn same_release(a: &Calibration, b: &Calibration) -> bool {
    let key = |c: &Calibration| {
        serde_json::to_string(&(&c.mechanism, &c.certified, &c.assumptions, c.is_valid()))
    };
    matches!((key(a), key(b)), (Ok(x), Ok(y)) if x == y)
}

/// The mechanism each λ of a cross-validation grid defines (`cals[i]` calibrated at the grid's
/// i-th λ, on `n` examples of `c` classes): for loss perturbation, the regulariser
/// ρ_eff = max(ρ, Nλ) that the objective uses together with the calibration's mechanism,
/// certificate and constants (the calibration's noise b, γ and AMP's output noise), so that
/// equal ids are the same objective with the same noise — the calibration may raise the
/// regulariser to a floor that does not depend on λ; for every other method λ itself (each
/// value its own mechanism).
fn mechanism_ids(method: Method, cals: &[Calibration], n: usize, c: usize) -> Vec<String> {
    cals.iter()
        .zip(LAMBDA_GRID)
        .map(|(cal, l)| mechanism_id(method, cal, l, n, c))
        .collect()
}

/// The id of the mechanism that `method` at λ = `lambda` with `cal` on `n` examples and `c`
/// classes releases (see [`mechanism_ids`]): equal ids are the same objective with the same
/// noise, so their draws may be shared (cross-validation here, the hold-out table in
/// `holdout.rs`).
pub(crate) fn mechanism_id(
    method: Method,
    cal: &Calibration,
    lambda: f64,
    n: usize,
    c: usize,
) -> String {
    match method {
        Method::LossPerturbation => {
            let rho = loss_perturbation_rho_eff(cal, lambda, n, c);
            // the constants without λ, which the objective sees only through ρ_eff
            let mut constants = cal.assumptions;
            constants.lambda = None;
            let what = serde_json::to_string(&(&cal.mechanism, &cal.certified, &constants))
                .unwrap_or_else(|_| format!("lambda={lambda}"));
            format!("rho={:x}/{what}", rho.to_bits())
        }
        _ => format!("lambda={lambda}"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::LinearOptions;
    use super::*;
    use crate::sweep::Runner;
    use std::sync::Mutex;

    /// Loss perturbation's λ values share a mechanism id exactly when they share ρ_eff (the
    /// floor ρ = 2LC/ε above Nλ; e.g. at ε = 0.01 on 54,000 examples in `paper`, ρ =
    /// 2·(1/2)·10/0.01 = 1,000 > Nλ = 540 for λ ≤ 1e-2, < 2,700 for λ = 5e-2, by hand) and the calibration's noise; every other method's
    /// λ values stay distinct.
    #[test]
    fn mechanism_ids_tie_exactly_the_floored_lambdas() {
        use privpred_core::{CalibrationMode, CalibrationRequest, Privacy};
        let (n, c) = (54_000, 10);
        for mode in [
            CalibrationMode::Paper,
            CalibrationMode::Corrected,
            CalibrationMode::Tight,
        ] {
            for (method, eps) in [
                (Method::LossPerturbation, 0.01),
                (Method::LossPerturbation, 10.0),
                (Method::ModelSensitivity, 0.01),
            ] {
                let cals: Vec<Calibration> = LAMBDA_GRID
                    .iter()
                    .map(|&l| {
                        let mut r =
                            CalibrationRequest::new(method, mode, Privacy::new(eps, 0.0).unwrap());
                        (r.n, r.lambda, r.classes) = (Some(n), Some(l), c);
                        privpred_core::certify::calibrate_certified(&r).unwrap()
                    })
                    .collect();
                let ids = mechanism_ids(method, &cals, n, c);
                for i in 0..ids.len() {
                    for j in 0..ids.len() {
                        let same_rho = method == Method::LossPerturbation
                            && loss_perturbation_rho_eff(&cals[i], LAMBDA_GRID[i], n, c)
                                == loss_perturbation_rho_eff(&cals[j], LAMBDA_GRID[j], n, c)
                            && cals[i].noise() == cals[j].noise();
                        assert_eq!(
                            ids[i] == ids[j],
                            i == j || same_rho,
                            "{mode:?} {method} {eps}: {i} {j}"
                        );
                    }
                }
                let distinct = (0..ids.len())
                    .filter(|&i| ids[..i].iter().all(|id| *id != ids[i]))
                    .count();
                eprintln!(
                    "{mode:?} {method} ε = {eps}: {distinct} distinct of {}",
                    ids.len()
                );
                if method == Method::LossPerturbation
                    && eps == 0.01
                    && mode == CalibrationMode::Paper
                {
                    // λ ≤ 1e-2 (7 values) share ρ = 1,000; 5e-2, 1e-1, 5e-1 have their own
                    assert_eq!(distinct, 4);
                }
            }
        }
    }

    /// Runs `reps` repetitions of `method`'s fig1a group (ε = 1) on digits with a fresh runner;
    /// returns the shared fits it built and the accuracies.
    fn run(method: Method, reps: &[u32]) -> (usize, Vec<(u32, f64)>) {
        let mut opts = LinearOptions::new(true);
        opts.dataset = Some("digits".into());
        let runner = LinearRunner::new(opts);
        let g = crate::holdout::group(method, 1.0, 0.0, 10, 8);
        let got = Mutex::new(Vec::new());
        let done = |r: u32, m: Measurement| {
            got.lock().unwrap().push((r, m.accuracy));
            Ok(())
        };
        runner.run_group(&g, reps, 7, &done).unwrap();
        let mut got = got.into_inner().unwrap();
        got.sort_by_key(|x| x.0);
        (runner.shared_fits_built(), got)
    }

    /// A group's repetitions reuse its shared fits: the number of shared fits a group builds
    /// (one per cross-validated λ on the 90 % part, plus the release's; the teachers once)
    /// does not grow with the number of repetitions, and a repetition's result does not
    /// depend on how many others ran with it.
    #[test]
    fn shared_fits_are_built_once_per_group_not_per_repetition() {
        for (method, fits) in [
            (Method::ModelSensitivity, LAMBDA_GRID.len() + 1),
            (Method::PredictionSensitivity, LAMBDA_GRID.len() + 1),
            (Method::SubsampleAggregate, 1),
        ] {
            let (few, a) = run(method, &[0, 1]);
            let (many, b) = run(method, &[0, 1, 2, 3, 4, 5]);
            assert_eq!((few, many), (fits, fits), "{method}");
            assert_eq!(a[..], b[..2], "{method}");
            assert!(b.windows(2).any(|w| w[0].1 != w[1].1), "{method}: {b:?}");
        }
    }

    /// The sharing rule of `draws_mode` holds at every setting of the study: wherever a mode
    /// uses another mode's draws, the two calibrations release the same mechanism with the same
    /// certificate, assumptions and validity — for every group of the ten linear figures, at the
    /// training sizes its runs calibrate for (the setting's N or MNIST's 60,000, the 90 % part
    /// the selection runs on, and N = 10³ … 10⁶ besides), every λ of the grid, the setting's
    /// fixed λ and none (DP-SGD: its N and 90 % part, no λ), under both neighbouring
    /// relations (each with the sharing rule of that relation). It fails if the core's `tight`
    /// calibration of model sensitivity, loss perturbation or replace-one DP-SGD ever stops
    /// being the `corrected` one (e.g. a tighter analysis added to `tight`) while the study
    /// still shares their draws.
    #[test]
    fn tight_shares_the_corrected_mechanism_where_it_shares_draws() {
        use crate::figures::FigureId;
        use crate::units::groups;
        use privpred_core::{CalibrationMode, Neighbours};
        let modes = [
            CalibrationMode::Paper,
            CalibrationMode::Corrected,
            CalibrationMode::Tight,
        ];
        let dpsgd = privpred_linear::dpsgd::DpSgdConfig::default();
        let mut compared = std::collections::HashMap::new();
        for neighbours in [Neighbours::ReplaceOne, Neighbours::AddRemove] {
            let mut dpsgd_seen = std::collections::HashSet::new();
            for g in groups(&FigureId::LINEAR, &modes) {
                let mode = super::super::draws_mode(g.method, g.calibration, neighbours);
                if mode == g.calibration {
                    continue;
                }
                let s = g.setting;
                let full = s.n.unwrap_or(60_000);
                let (sizes, lambdas): (Vec<usize>, Vec<Option<f64>>) = if g.method == Method::DpSgd
                {
                    // DP-SGD runs at the setting's N and on the 90 % part only (no fig4); its
                    // calibration depends on (ε, δ, N) alone, each computed once.
                    if !dpsgd_seen.insert((s.epsilon.to_bits(), s.delta.to_bits())) {
                        continue;
                    }
                    (vec![full, full - full / 10], vec![None])
                } else {
                    (
                        vec![full, full - full / 10, 1_000, 10_000, 100_000, 1_000_000],
                        LAMBDA_GRID
                            .iter()
                            .map(|&l| Some(l))
                            .chain([s.lambda, None])
                            .collect(),
                    )
                };
                for lambda in lambdas {
                    for &n in &sizes {
                        let cal = |m| {
                            calibrate(&CalibrationInput {
                                method: g.method,
                                mode: m,
                                epsilon: s.epsilon,
                                delta: s.delta,
                                budget: s.budget,
                                n,
                                classes: s.classes.unwrap_or(10),
                                lambda,
                                dpsgd: &dpsgd,
                                neighbours,
                                loss: privpred_core::Loss::Softmax,
                            })
                        };
                        match (cal(g.calibration), cal(mode)) {
                            (Ok(a), Ok(b)) => assert!(
                                same_release(&a, &b),
                                "{}: n = {n}, λ = {lambda:?}, {neighbours:?}",
                                g.id()
                            ),
                            (Err(_), Err(_)) => {}
                            (a, b) => panic!("{}: one mode refused: {a:?} / {b:?}", g.id()),
                        }
                        *compared.entry((g.method, neighbours)).or_insert(0) += 1;
                    }
                }
            }
        }
        // fig1a–fig6b's tight model-sensitivity and loss-perturbation groups, each at 72 points
        // per relation; the 19 distinct (ε, δ) of the 38 tight DP-SGD groups of fig1b, fig2b
        // and fig3 at 2 sizes, under replace-one only (add-remove DP-SGD keeps its own draws).
        for neighbours in [Neighbours::ReplaceOne, Neighbours::AddRemove] {
            for m in [Method::ModelSensitivity, Method::LossPerturbation] {
                assert!(
                    compared[&(m, neighbours)] > 2_500,
                    "{m} {neighbours:?}: {compared:?}"
                );
            }
        }
        assert_eq!(compared[&(Method::DpSgd, Neighbours::ReplaceOne)], 19 * 2);
        assert!(!compared.contains_key(&(Method::DpSgd, Neighbours::AddRemove)));
    }

    /// `same_release` tells different noise apart (the comparison above is not vacuous).
    #[test]
    fn same_release_separates_different_noise() {
        use privpred_core::{CalibrationMode, Neighbours};
        let dpsgd = privpred_linear::dpsgd::DpSgdConfig::default();
        let cal = |mode, epsilon| {
            calibrate(&CalibrationInput {
                method: Method::LossPerturbation,
                mode,
                epsilon,
                delta: 0.0,
                budget: 100,
                n: 54_000,
                classes: 10,
                lambda: Some(1e-3),
                dpsgd: &dpsgd,
                neighbours: Neighbours::ReplaceOne,
                loss: privpred_core::Loss::Softmax,
            })
            .unwrap()
        };
        let c = cal(CalibrationMode::Corrected, 1.0);
        assert!(same_release(&c, &cal(CalibrationMode::Tight, 1.0)));
        assert!(!same_release(&c, &cal(CalibrationMode::Corrected, 2.0)));
        assert!(!same_release(&c, &cal(CalibrationMode::Paper, 1.0)));
    }
}
