//! Loss perturbation (objective perturbation, docs/guarantees.md#calibrations): the minimiser of
//! (1/N)Σℓ + (1/N)⟨b, θ⟩ + (ρ_eff/(2N))‖θ‖² with b one draw of the calibrated noise and
//! ρ_eff = max(ρ, Nλ) (Chaudhuri et al. 2011, Theorem 9; Kifer et al. 2012; docs/guarantees.md#calibrations); in
//! `corrected`/`tight` certified to ‖∇J‖₂ ≤ γ and released with AMP's output noise (Iyengar et
//! al. 2019, Theorem 1; erratum 4.8).
//!
//! Shared across repetitions ([`LpShared`]): the warm start θ*(λ) and, with the training set's
//! data moment, a Kronecker-factored preconditioner ([`LossPerturbationPreconditioner`]); each
//! draw is one fit with a fresh b (exact: the objective is strictly convex).

use super::{Draw, Fit, PredictorKind, PrivateMethod, PrivatePredictor, Purpose};
use super::{Reuse, Scores};
use crate::binary;
use crate::error::{LinearError, Result};
use crate::exact::NonzerosCell;
use crate::kernel::Design;
use crate::lbfgs::{LbfgsOptions, LbfgsReport, PrecondScaling, Preconditioned, Preconditioner};
use crate::model::LinearModel;
use crate::precond::{DataMoment, KfacPreconditioner};
use crate::train::{self, Objective, Optimization, check_lambda};
use privpred_core::{Calibration, Method};
use privpred_data::{Dataset, UnitBallDataset};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The method's module (see [`PrivateMethod`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct LossPerturbation;

/// ρ_eff = max(ρ, Nλ) of loss perturbation (docs/guarantees.md#calibrations): the regulariser actually used, with ρ
/// from the calibration (2LC/ε when it records none, C the loss's output columns) and the
/// floor Nλ.
pub fn loss_perturbation_rho_eff(
    calibration: &Calibration,
    lambda: f64,
    n: usize,
    c: usize,
) -> f64 {
    // under add/remove the declared N̂: ρ_eff = max(ρ, N̂λ) is the same on D and D ∪ {z}
    let n = calibration.calibration_n(n);
    let a = &calibration.assumptions;
    let rho = calibration.mechanism.rho().unwrap_or(
        2.0 * calibration.assumptions.l * a.loss.outputs(c) as f64 / calibration.epsilon(),
    );
    rho.max(n as f64 * lambda)
}

/// Loss perturbation: draws b from the calibrated noise and minimises
/// (1/N)Σℓ + (1/N)⟨b, θ⟩ + (ρ_eff/(2N))‖θ‖² with ρ_eff = max(ρ, Nλ) (docs/guarantees.md#calibrations), from `warm`
/// (e.g. the non-private solution: exact, the objective is strictly convex).
pub fn loss_perturbation_fit<R: Rng + ?Sized>(
    train: &UnitBallDataset,
    calibration: &Calibration,
    lambda: f64,
    warm: Option<&LinearModel>,
    opts: &LbfgsOptions,
    rng: &mut R,
) -> Result<LinearModel> {
    Ok(loss_perturbation_solve(train, calibration, lambda, Warm::Plain(warm), opts, rng)?.0)
}

/// Where a preconditioned loss-perturbation fit starts (both exact: the objective is strictly
/// convex, so the start changes only the number of evaluations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LpStart {
    /// θ_w − b/ρ_eff, the start of the plain fit: the minimiser of the perturbation and
    /// regulariser terms, shifted by the warm model.
    Shift,
    /// θ_w − P·∇F(θ_w): one preconditioned Newton step from the warm model, with
    /// ∇F(θ_w) = [∇L(θ_w) + μθ_w] + b/N; the bracket is shared by every noise draw, so the
    /// step costs one application of P and no evaluation per fit.
    Newton,
}

/// The noise-independent part of loss-perturbation fits at one (training set, ρ_eff, warm
/// model): the Kronecker-factored preconditioner P ≈ ∇²F(θ_w)⁻¹ ([`KfacPreconditioner`]) and the
/// Newton start θ_w − P(∇L(θ_w) + μθ_w). Build it once and share it across repetitions: each
/// fit then only draws b and runs L-BFGS with H₀ = P ([`loss_perturbation_fit_preconditioned`]).
///
/// Setup cost: one evaluation of ∇L at θ_w and one forward pass for A, plus the data moment
/// (shared by every ρ_eff and warm model of a training set). The result is a deterministic
/// function of its inputs (see [`crate::precond`]).
///
/// Privacy is unaffected: the released model is the unique minimiser of the same perturbed
/// objective with the same noise b, to the same stopping rule; P only changes the path to it.
#[derive(Debug, Clone)]
pub struct LossPerturbationPreconditioner {
    precond: KfacPreconditioner,
    warm: LinearModel,
    n: usize,
    rho_eff: f64,
    newton: Vec<f64>,
    /// The start rule (default: [`LpStart::Newton`]).
    pub start: LpStart,
    /// The scaling of H₀ = P in L-BFGS (default: none).
    pub scaling: PrecondScaling,
    /// Whether uncertified fits (`paper` mode, selection) run on the f64 pass over the
    /// nonzeros when the data are sparse, like the certified ones (default: true; false: the
    /// dense f32 kernel, the route before, kept for comparison).
    pub sparse_f64: bool,
    /// The training set's nonzeros for the f64 passes (erratum 4.8's certification, the
    /// uncertified fits on sparse data), built on the first fit that needs them and shared by
    /// the others — and by other preconditioners on the same training set given the same cell
    /// ([`Self::sharing_nonzeros`]).
    sparse: Arc<NonzerosCell>,
    /// `sparse`'s rows once the cell has checked them entry by entry against the design of
    /// this preconditioner's first fit that needs them ([`NonzerosCell::get_or_build`]); its
    /// later fits — on the training set it was built for, as its factors are — take them
    /// after a shape check instead of reading the whole design again on every fit.
    checked: std::sync::OnceLock<Arc<train::SparseRows>>,
}

impl LossPerturbationPreconditioner {
    /// Builds the preconditioner of the loss-perturbation objective with regulariser `rho_eff`
    /// ([`loss_perturbation_rho_eff`]) on `train` at `warm`, from the training set's
    /// [`DataMoment`].
    pub fn new(
        train: &UnitBallDataset,
        moment: Arc<DataMoment>,
        warm: &LinearModel,
        rho_eff: f64,
    ) -> Result<Self> {
        let (n, d, c) = (train.n, train.d, train.classes);
        if warm.d != d || warm.c != c {
            return Err(LinearError::Dimension(format!(
                "warm model is {} × {}, the training set needs {d} × {c}",
                warm.d, warm.c
            )));
        }
        if !(rho_eff.is_finite() && rho_eff > 0.0) || n == 0 {
            return Err(LinearError::invalid(
                "rho_eff",
                rho_eff,
                "must be a finite number > 0 (and N ≥ 1)",
            ));
        }
        let mu = rho_eff / n as f64;
        let design = Design::of(train);
        let precond = KfacPreconditioner::at(moment, &design, &warm.theta, mu)?;
        let obj = Objective {
            design,
            lambda: mu,
            linear: None,
            parallel: true,
        };
        let mut g = vec![0.0; d * c];
        obj.value_grad(&warm.theta, &mut g);
        let mut pg = vec![0.0; d * c];
        precond.apply(&g, &mut pg);
        let newton: Vec<f64> = warm.theta.iter().zip(&pg).map(|(t, p)| t - p).collect();
        if newton.iter().any(|v| !v.is_finite()) {
            return Err(LinearError::Numerical(
                "loss-perturbation preconditioner: non-finite Newton start".into(),
            ));
        }
        Ok(LossPerturbationPreconditioner {
            precond,
            warm: warm.clone(),
            n,
            rho_eff,
            newton,
            start: LpStart::Newton,
            scaling: PrecondScaling::None,
            sparse_f64: true,
            sparse: Arc::new(NonzerosCell::default()),
            checked: std::sync::OnceLock::new(),
        })
    }

    /// Takes the training set's nonzeros from `cell`, shared with the other preconditioners
    /// on the same training set (`cell` must belong to the training set this one was built
    /// on: a cell holding another shape is refused when used).
    pub fn sharing_nonzeros(mut self, cell: Arc<NonzerosCell>) -> Self {
        self.sparse = cell;
        self.checked = std::sync::OnceLock::new();
        self
    }

    /// The training set's nonzeros for a fit on `design`: from the cell (built, or checked
    /// against `design`) on the first call, then the kept rows after a shape check.
    fn nonzeros(&self, design: &Design<'_>) -> Result<Arc<train::SparseRows>> {
        match self.checked.get() {
            Some(sp) if sp.rows() == design.n && sp.cols() == design.d => Ok(sp.clone()),
            _ => {
                let sp = self.sparse.get_or_build(design)?;
                let _ = self.checked.set(sp.clone());
                Ok(sp)
            }
        }
    }

    /// Whether this preconditioner and `other` share their nonzeros cell.
    pub fn shares_nonzeros_with(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.sparse, &other.sparse)
    }

    /// The ρ_eff it was built for.
    pub fn rho_eff(&self) -> f64 {
        self.rho_eff
    }

    /// The preconditioner P.
    pub fn preconditioner(&self) -> &KfacPreconditioner {
        &self.precond
    }
}

/// [`loss_perturbation_fit`] with a shared [`LossPerturbationPreconditioner`] (built for this
/// training set and this calibration's ρ_eff): the same noise draw from `rng`, the same
/// objective and stopping rule, so the same minimiser to tolerance and the same guarantee;
/// returns the solver report too.
pub fn loss_perturbation_fit_preconditioned<R: Rng + ?Sized>(
    train: &UnitBallDataset,
    calibration: &Calibration,
    lambda: f64,
    pre: &LossPerturbationPreconditioner,
    opts: &LbfgsOptions,
    rng: &mut R,
) -> Result<(LinearModel, LbfgsReport)> {
    loss_perturbation_solve(
        train,
        calibration,
        lambda,
        Warm::Preconditioned(pre),
        opts,
        rng,
    )
}

/// Loss perturbation with its certificate (docs/guarantees.md#errata (erratum 4.8)): like
/// [`loss_perturbation_fit_preconditioned`] (with `pre`) or [`loss_perturbation_fit_report`]
/// (without), also returning the [`Optimization`] certificate of the released fit (`None` in
/// `paper` mode, whose calibration assumes the exact minimiser).
pub fn loss_perturbation_fit_certified<R: Rng + ?Sized>(
    train: &UnitBallDataset,
    calibration: &Calibration,
    lambda: f64,
    pre: Option<&LossPerturbationPreconditioner>,
    opts: &LbfgsOptions,
    rng: &mut R,
) -> Result<(LinearModel, LbfgsReport, Option<Optimization>)> {
    let warm = match pre {
        Some(p) => Warm::Preconditioned(p),
        None => Warm::Plain(None),
    };
    loss_perturbation_solve_certified(train, calibration, lambda, warm, opts, rng, true)
}

/// Loss perturbation for hyper-parameter selection only (never a release): the released
/// mechanism's noise (objective noise and, in `corrected`/`tight`, AMP's output term) without
/// the f64 certification pass, whose effect on the model (‖θ̂ − θ_min‖ ≤ ‖∇J(θ̂)‖₂/μ, far
/// below the noise) does not change which λ scores best. Used by the cross-validation of λ.
pub fn loss_perturbation_fit_selection<R: Rng + ?Sized>(
    train: &UnitBallDataset,
    calibration: &Calibration,
    lambda: f64,
    pre: Option<&LossPerturbationPreconditioner>,
    warm: Option<&LinearModel>,
    opts: &LbfgsOptions,
    rng: &mut R,
) -> Result<LinearModel> {
    let w = match pre {
        Some(p) => Warm::Preconditioned(p),
        None => Warm::Plain(warm),
    };
    Ok(loss_perturbation_solve_certified(train, calibration, lambda, w, opts, rng, false)?.0)
}

/// [`loss_perturbation_fit`] that also returns the solver report.
pub fn loss_perturbation_fit_report<R: Rng + ?Sized>(
    train: &UnitBallDataset,
    calibration: &Calibration,
    lambda: f64,
    warm: Option<&LinearModel>,
    opts: &LbfgsOptions,
    rng: &mut R,
) -> Result<(LinearModel, LbfgsReport)> {
    loss_perturbation_solve(train, calibration, lambda, Warm::Plain(warm), opts, rng)
}

enum Warm<'a> {
    Plain(Option<&'a LinearModel>),
    Preconditioned(&'a LossPerturbationPreconditioner),
}

impl<'a> Warm<'a> {
    /// The warm model, either way.
    fn model(&self) -> Option<&'a LinearModel> {
        match self {
            Warm::Plain(w) => *w,
            Warm::Preconditioned(pre) => Some(&pre.warm),
        }
    }
}

fn loss_perturbation_solve<R: Rng + ?Sized>(
    train: &UnitBallDataset,
    calibration: &Calibration,
    lambda: f64,
    warm: Warm<'_>,
    opts: &LbfgsOptions,
    rng: &mut R,
) -> Result<(LinearModel, LbfgsReport)> {
    let (m, r, _) =
        loss_perturbation_solve_certified(train, calibration, lambda, warm, opts, rng, true)?;
    Ok((m, r))
}

/// Loss perturbation with the solver's residual accounted for (docs/guarantees.md#errata (erratum 4.8)): when the
/// calibration carries a certificate (`corrected`/`tight`, from
/// `privpred_core::certify::calibrate_certified`), the fit is certified to ‖∇J(θ̂)‖₂ ≤ γ in f64
/// on the perturbed objective ([`Objective::certify`], refused otherwise) and released as
/// θ̂ + Z with AMP's output noise Z (Iyengar et al. 2019, Algorithm 1 and Theorem 1; see
/// `privpred_core::certify::loss_perturbation_residual`). `paper` releases θ̂ as published.
///
/// With `certify = false` (hyper-parameter selection only, never a release) the f64
/// certification pass is skipped but the output noise is still drawn, so hold-out scores see
/// the released mechanism's noise at each λ.
fn loss_perturbation_solve_certified<R: Rng + ?Sized>(
    train: &UnitBallDataset,
    calibration: &Calibration,
    lambda: f64,
    warm: Warm<'_>,
    opts: &LbfgsOptions,
    rng: &mut R,
    certify: bool,
) -> Result<(LinearModel, LbfgsReport, Option<Optimization>)> {
    check_lambda(lambda, true)?;
    let rho_eff = loss_perturbation_rho_eff(calibration, lambda, train.n, train.classes);
    if calibration.assumptions.loss == privpred_core::Loss::Logistic {
        // the one-output model (crate::binary): ρ from the calibration (1/(2ε)), b ∈ R^D
        let w = warm.model();
        return binary::loss_perturbation_binary(
            train,
            calibration,
            rho_eff,
            w,
            opts,
            rng,
            certify,
        );
    }
    softmax_solve_certified(train, calibration, rho_eff, warm, opts, rng, certify)
}

/// [`loss_perturbation_solve_certified`] for the softmax model, with its checked λ's
/// regulariser `rho_eff` ([`loss_perturbation_rho_eff`]).
fn softmax_solve_certified<R: Rng + ?Sized>(
    train: &UnitBallDataset,
    calibration: &Calibration,
    rho_eff: f64,
    warm: Warm<'_>,
    opts: &LbfgsOptions,
    rng: &mut R,
    certify: bool,
) -> Result<(LinearModel, LbfgsReport, Option<Optimization>)> {
    let (n, d, c) = (train.n, train.d, train.classes);
    if let Warm::Preconditioned(pre) = &warm
        && (pre.n != n || pre.warm.d != d || pre.warm.c != c || pre.rho_eff != rho_eff)
    {
        return Err(LinearError::invalid(
            "preconditioner",
            format!("N = {}, ρ_eff = {}", pre.n, pre.rho_eff),
            format!("must be built for this fit (N = {n}, ρ_eff = {rho_eff})"),
        ));
    }
    let mut b = vec![0.0; d * c];
    // b: one draw of the objective perturbation's noise (AMP's output noise, below, comes
    // from `privpred_core::certify::loss_perturbation_residual`)
    calibration.mechanism.perturb(rng, &mut b)?;
    let obj = Objective {
        design: Design::of(train),
        lambda: rho_eff / n as f64,
        linear: Some(b),
        parallel: true,
    };
    let b = obj.linear.as_deref().unwrap_or(&[]);
    // θ_warm − b/ρ_eff: the minimiser of the perturbation and regulariser terms shifted by the
    // warm model (≈ 1.5× fewer evaluations than θ_warm on MNIST in a probe); the objective is
    // strictly convex, so the start changes only the iteration count.
    let shift = |m: &LinearModel| -> Vec<f64> {
        m.theta
            .iter()
            .zip(b)
            .map(|(t, bi)| t - bi / rho_eff)
            .collect()
    };
    // under add/remove the certificate bounds the gradient of the objective normalised by the
    // public N̂ (the N-normalised one's times N/N̂), so the residual 2γN̂/ρ_eff is public
    let np = calibration.calibration_n(n);
    let scale = np as f64 / n as f64;
    let residual = privpred_core::certify::loss_perturbation_residual(calibration, np, rho_eff)?;
    let gamma = calibration.certified.map(|c| c.gradient_norm_bound);
    let (start, pc) = match &warm {
        Warm::Plain(w) => (w.map(shift).unwrap_or_else(|| vec![0.0; d * c]), None),
        Warm::Preconditioned(pre) => {
            let start = match pre.start {
                LpStart::Shift => shift(&pre.warm),
                LpStart::Newton => {
                    // θ_w − P(∇L(θ_w) + μθ_w) − P b / N
                    let mut pb = vec![0.0; d * c];
                    pre.precond.apply(b, &mut pb);
                    let nf = n as f64;
                    pre.newton
                        .iter()
                        .zip(&pb)
                        .map(|(t, p)| t - p / nf)
                        .collect()
                }
            };
            let pc = Preconditioned {
                p: &pre.precond,
                scaling: pre.scaling,
            };
            (start, Some(pc))
        }
    };
    let (Some((_, output_noise)), Some(gamma)) = (residual, gamma) else {
        // paper mode: the fast fit's iterate, as published
        let (model, report) = uncertified_fit(&obj, &warm, start, opts, pc)?;
        return Ok((model, report, None));
    };
    if !certify {
        // selection only: the fast fit and the released mechanism's output noise
        let (mut model, report) = uncertified_fit(&obj, &warm, start, opts, pc)?;
        output_noise.add_to(rng, &mut model.theta)?;
        return Ok((model, report, None));
    }
    let sparse = match &warm {
        Warm::Preconditioned(pre) => pre.nonzeros(&obj.design)?,
        Warm::Plain(_) => Arc::new(train::SparseRows::new(&obj.design)),
    };
    // With the shared preconditioner on sparse data (MNIST: 19 % nonzeros; the f64 pass over
    // the nonzeros costs no more than the dense f32 one), the whole fit runs in f64 from its
    // start, preconditioned by K-FAC with its class factor taken at that start (one forward
    // pass; the noise moves the minimiser far from the non-private model the shared factor was
    // built at). Otherwise: the fast f32 fit first, then the f64 refinement from its iterate.
    // Either way the released iterate is certified on the same objective (the start and the
    // preconditioner change only the path: the objective is strictly convex).
    let local;
    let (start, pc) = match (&warm, pc) {
        (Warm::Preconditioned(pre), Some(_)) if 2 * sparse.nonzeros() <= n * d => {
            local = pre.precond.rebuilt_at(&obj.design, &start)?;
            let pc = Preconditioned {
                p: &local,
                scaling: pre.scaling,
            };
            (start, Some(pc))
        }
        (_, pc) => (obj.minimize_with(Some(&start), opts, pc)?.0.theta, pc),
    };
    let (theta, mut cert, report) =
        obj.certify_report(start, gamma * scale, opts, pc, Some(&sparse))?;
    cert.gradient_norm /= scale;
    cert.rounding_bound /= scale;
    cert.gradient_norm_bound = gamma;
    let mut model = LinearModel { d, c, theta };
    output_noise.add_to(rng, &mut model.theta)?;
    Ok((model, report, Some(cert)))
}

/// The fit of `obj` from `start` to the stopping rule `opts` without a certificate (`paper`
/// mode's release, as published, and hyper-parameter selection). With the shared
/// preconditioner on sparse data (2·nonzeros ≤ N·D, MNIST: 19 %) it runs like the certified
/// fit: on the f64 pass over the nonzeros ([`Objective::minimize_sparse_with`], cheaper there
/// than the dense f32 kernel), preconditioned by K-FAC with its class factor rebuilt at the
/// start; otherwise the f32 kernel with the shared preconditioner. The same objective and
/// stopping rule either way, so the same minimiser to the solver's tolerance (strictly convex).
fn uncertified_fit(
    obj: &Objective<'_>,
    warm: &Warm<'_>,
    start: Vec<f64>,
    opts: &LbfgsOptions,
    pc: Option<Preconditioned<'_>>,
) -> Result<(LinearModel, LbfgsReport)> {
    if let (Warm::Preconditioned(pre), Some(_)) = (warm, pc)
        && pre.sparse_f64
    {
        let sparse = pre.nonzeros(&obj.design)?;
        if 2 * sparse.nonzeros() <= obj.design.n * obj.design.d {
            let local = pre.precond.rebuilt_at(&obj.design, &start)?;
            let pc = Preconditioned {
                p: &local,
                scaling: pre.scaling,
            };
            return obj.minimize_sparse_with(&sparse, start, opts, Some(pc));
        }
    }
    obj.minimize_with(Some(&start), opts, pc)
}

/// What loss perturbation's fits share across noise draws.
#[derive(Debug, Clone)]
pub enum LpShared {
    /// Plain L-BFGS from θ_w − b/ρ_eff with the warm model θ_w (zero when absent).
    Plain(Option<Arc<LinearModel>>),
    /// L-BFGS with a shared preconditioner, from its Newton start.
    Preconditioned(Arc<LossPerturbationPreconditioner>),
}

impl LpShared {
    fn warm(&self) -> Warm<'_> {
        match self {
            LpShared::Plain(w) => Warm::Plain(w.as_deref()),
            LpShared::Preconditioned(p) => Warm::Preconditioned(p),
        }
    }
}

impl PrivateMethod for LossPerturbation {
    type Shared = LpShared;
    const METHOD: Method = Method::LossPerturbation;

    /// With both the non-private θ*(λ) and the data moment: the preconditioner at θ*(λ) for
    /// this calibration's ρ_eff; otherwise a plain warm start from θ*(λ) (or zero).
    fn fit_shared<R: Rng + ?Sized>(
        &self,
        fit: &Fit<'_>,
        reuse: &Reuse,
        _: &mut R,
    ) -> Result<LpShared> {
        let binary = fit.cfg.loss == privpred_core::Loss::Logistic;
        Ok(match (&reuse.moment, &reuse.nonprivate) {
            (Some(moment), Some(warm)) if !binary => {
                let t = fit.train;
                let rho_eff =
                    loss_perturbation_rho_eff(fit.calibration, fit.cfg.lambda, t.n, t.classes);
                let pre = LossPerturbationPreconditioner::new(t, moment.clone(), warm, rho_eff)?;
                LpShared::Preconditioned(Arc::new(match &reuse.nonzeros {
                    Some(cell) => pre.sharing_nonzeros(cell.clone()),
                    None => pre,
                }))
            }
            (_, warm) => LpShared::Plain(warm.clone()),
        })
    }

    fn release<R: Rng + ?Sized>(
        &self,
        fit: &Fit<'_>,
        shared: &LpShared,
        rng: &mut R,
    ) -> Result<PrivatePredictor> {
        let (model, _, cert) = loss_perturbation_solve_certified(
            fit.train,
            fit.calibration,
            fit.cfg.lambda,
            shared.warm(),
            &fit.cfg.lbfgs,
            rng,
            true,
        )?;
        Ok(PrivatePredictor::regularised(
            fit,
            cert,
            PredictorKind::Released { model },
        ))
    }

    /// One fit (certified for a release, the fast fit for a selection), then its predictions.
    fn draw<R: Rng + ?Sized>(
        &self,
        fit: &Fit<'_>,
        shared: &LpShared,
        _: &Scores,
        queries: &Dataset,
        rng: &mut R,
    ) -> Result<Draw> {
        let certify = fit.purpose == Purpose::Release;
        Draw::timed(
            || {
                let (model, _, _) = loss_perturbation_solve_certified(
                    fit.train,
                    fit.calibration,
                    fit.cfg.lambda,
                    shared.warm(),
                    &fit.cfg.lbfgs,
                    rng,
                    certify,
                )?;
                Ok(model)
            },
            |m| train::predict_all(&m, queries),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::cfg;
    use super::*;
    use crate::shim;
    use crate::train::tests::toy;
    use privpred_core::Noise;
    use privpred_data::Dataset;
    use rand::SeedableRng;

    /// The noise at δ = 0 is calibrated for the Jacobian bound at the recorded floor ρ; a fit
    /// at any λ, smaller than the calibration's included, minimises with a regulariser at
    /// least that floor, so the bound (and the noise's share of ε) holds for the fit.
    #[test]
    fn every_fit_keeps_the_calibrated_floor() {
        let ds = toy(400, 6, 3, 4);
        let mut c = cfg(Method::LossPerturbation, 1.0, 0.0, 1);
        c.lambda = 0.1;
        let calib = shim::calibrate(&c.request(ds.n, ds.classes)).unwrap();
        let floor = calib.mechanism.rho().unwrap();
        assert!(
            floor >= ds.n as f64 * 0.1,
            "the floor covers the calibration's Nλ"
        );
        for lambda in [0.0, 1e-6, 1e-3, 0.1, 1.0] {
            let rho_eff = loss_perturbation_rho_eff(&calib, lambda, ds.n, ds.classes);
            assert!(rho_eff >= floor, "λ = {lambda}: {rho_eff} < {floor}");
        }
    }

    /// Warm-starting loss perturbation from the non-private solution gives the same minimiser
    /// as a cold start with the same noise draw (the documented exactness of the shortcut).
    #[test]
    fn loss_perturbation_warm_start_is_exact() {
        let ds = toy(400, 6, 3, 4);
        let c = cfg(Method::LossPerturbation, 1.0, 0.0, 1);
        let calib = shim::calibrate(&c.request(ds.n, ds.classes)).unwrap();
        let tol = 1e-6;
        let tight = LbfgsOptions {
            grad_tol: tol,
            ..LbfgsOptions::default()
        };
        let np = train::fit_logistic(&ds, 1e-2, None, &tight).unwrap().model;
        let cold = loss_perturbation_fit(
            &ds,
            &calib,
            1e-2,
            None,
            &tight,
            &mut rand_chacha::ChaCha20Rng::seed_from_u64(5),
        )
        .unwrap();
        let warm = loss_perturbation_fit(
            &ds,
            &calib,
            1e-2,
            Some(&np),
            &tight,
            &mut rand_chacha::ChaCha20Rng::seed_from_u64(5),
        )
        .unwrap();
        // both points have ‖∇J‖ ≤ tol and J is (ρ_eff/N)-strongly convex (ρ_eff = max(2LC/ε, Nλ)
        // = 4 here), so ‖θ_cold − θ_warm‖ ≤ 2·tol·N/ρ_eff
        let diff = cold
            .theta
            .iter()
            .zip(&warm.theta)
            .map(|(x, y)| (x - y).powi(2))
            .sum::<f64>()
            .sqrt();
        assert!(diff <= 2.0 * tol * 400.0 / 4.0, "‖Δθ‖ = {diff}");
        assert!(
            cold.theta
                .iter()
                .zip(&np.theta)
                .any(|(a, b)| (a - b).abs() > 1e-3),
            "noise had no effect"
        );
    }

    /// A shared preconditioner changes only the path: every start rule and scaling reaches the
    /// plain fit's minimiser (same noise draw) within 2·tol/μ, and a preconditioner built for
    /// another ρ_eff is refused.
    #[test]
    fn preconditioned_loss_perturbation_is_exact() {
        let ds = toy(600, 12, 4, 8);
        let c = cfg(Method::LossPerturbation, 1.0, 1e-5, 1);
        let calib = shim::calibrate(&c.request(ds.n, ds.classes)).unwrap();
        let lambda = 1e-2;
        // the f32 kernel's gradient has a noise floor near 1e-5 on this problem: stop well above
        let tol = 1e-4;
        let tight = LbfgsOptions {
            grad_tol: tol,
            ..LbfgsOptions::default()
        };
        let np = train::fit_logistic(&ds, lambda, None, &LbfgsOptions::default())
            .unwrap()
            .model;
        let rho_eff = loss_perturbation_rho_eff(&calib, lambda, ds.n, ds.classes);
        let mu = rho_eff / ds.n as f64;
        let (plain, rp) = loss_perturbation_fit_report(
            &ds,
            &calib,
            lambda,
            Some(&np),
            &tight,
            &mut rand_chacha::ChaCha20Rng::seed_from_u64(5),
        )
        .unwrap();
        let design = Design::new(&ds.features, &ds.labels, ds.d, ds.classes);
        let moment = Arc::new(DataMoment::new(&design).unwrap());
        let mut pre =
            LossPerturbationPreconditioner::new(&ds, moment.clone(), &np, rho_eff).unwrap();
        for start in [LpStart::Newton, LpStart::Shift] {
            for scaling in [PrecondScaling::None, PrecondScaling::Scaled] {
                pre.start = start;
                pre.scaling = scaling;
                let (fast, rf) = loss_perturbation_fit_preconditioned(
                    &ds,
                    &calib,
                    lambda,
                    &pre,
                    &tight,
                    &mut rand_chacha::ChaCha20Rng::seed_from_u64(5),
                )
                .unwrap();
                assert!(rf.grad_norm <= tol && rp.grad_norm <= tol, "{rf:?} {rp:?}");
                let diff = fast
                    .theta
                    .iter()
                    .zip(&plain.theta)
                    .map(|(x, y)| (x - y).powi(2))
                    .sum::<f64>()
                    .sqrt();
                assert!(
                    diff <= 2.0 * tol / mu,
                    "{start:?} {scaling:?}: ‖Δθ‖ = {diff}"
                );
                assert_eq!(rf.termination, crate::lbfgs::Termination::Converged);
            }
        }
        // the noise moves the minimiser far beyond the tolerance: the comparison is not vacuous
        let moved = plain
            .theta
            .iter()
            .zip(&np.theta)
            .map(|(x, y)| (x - y).powi(2))
            .sum::<f64>()
            .sqrt();
        assert!(moved > 20.0 * tol / mu, "‖θ_LP − θ*‖ = {moved}");
        let other = LossPerturbationPreconditioner::new(&ds, moment, &np, 2.0 * rho_eff).unwrap();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        assert!(
            loss_perturbation_fit_preconditioned(&ds, &calib, lambda, &other, &tight, &mut rng)
                .is_err()
        );
    }

    /// A sparse toy set like MNIST's case (4 of 5 features zero): 900 rows, D = 20, C = 4.
    fn sparse_toy() -> UnitBallDataset {
        let dense = toy(900, 20, 4, 12);
        let f: Vec<f32> = dense
            .features
            .iter()
            .enumerate()
            .map(|(i, &v)| if i % 5 == 0 { v } else { 0.0 })
            .collect();
        UnitBallDataset::new(
            Dataset::new(20, 4, f, dense.labels.clone(), Default::default()).unwrap(),
        )
        .unwrap()
    }

    /// A certified loss-perturbation fit with the shared preconditioner `pre`, its noise drawn
    /// from seed 3 (the sparse-data tests below compare fits on the same draw).
    fn certified_seed3(
        ds: &UnitBallDataset,
        calib: &Calibration,
        lambda: f64,
        pre: &LossPerturbationPreconditioner,
        opts: &LbfgsOptions,
    ) -> (LinearModel, LbfgsReport, Option<Optimization>) {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        loss_perturbation_fit_certified(ds, calib, lambda, Some(pre), opts, &mut rng).unwrap()
    }

    /// Uncertified fits on sparse data (`paper` mode's release; a `corrected` selection fit,
    /// whose output noise is drawn after the fit) run on the f64 pass over the nonzeros: the
    /// same objective and stopping rule as the dense f32 route (`sparse_f64 = false`, the
    /// route before) with the same noise draws, so the same minimiser within 2·tol/μ (both stop
    /// at ‖∇J‖₂ ≤ tol and J is μ-strongly convex); the noise moves it far beyond that.
    #[test]
    fn uncertified_fits_on_sparse_data_match_the_f32_route() {
        use privpred_core::{Budget, CalibrationMode, Privacy};
        let ds = sparse_toy();
        let lambda = 1e-2;
        // the f32 kernel's gradient has a noise floor near 1e-5: stop well above it
        let tol = 1e-4;
        let opts = LbfgsOptions {
            grad_tol: tol,
            ..LbfgsOptions::default()
        };
        let np = train::fit_logistic(&ds, lambda, None, &opts).unwrap().model;
        let design = Design::new(&ds.features, &ds.labels, ds.d, ds.classes);
        let moment = Arc::new(DataMoment::new(&design).unwrap());
        for mode in [CalibrationMode::Paper, CalibrationMode::Corrected] {
            let privacy = Privacy::new(1.0, 0.0).unwrap();
            let c = crate::MethodConfig::new(
                Method::LossPerturbation,
                mode,
                privacy,
                Budget::finite(1).unwrap(),
            );
            let calib = shim::calibrate(&c.request(ds.n, ds.classes)).unwrap();
            let rho_eff = loss_perturbation_rho_eff(&calib, lambda, ds.n, ds.classes);
            let mu = rho_eff / ds.n as f64;
            let new =
                LossPerturbationPreconditioner::new(&ds, moment.clone(), &np, rho_eff).unwrap();
            assert!(new.sparse_f64);
            let mut old = new.clone();
            old.sparse_f64 = false;
            let fit = |pre: &LossPerturbationPreconditioner| {
                let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(11);
                loss_perturbation_fit_selection(
                    &ds,
                    &calib,
                    lambda,
                    Some(pre),
                    None,
                    &opts,
                    &mut rng,
                )
                .unwrap()
            };
            let (a, b) = (fit(&new), fit(&old));
            let dist = |x: &[f64], y: &[f64]| {
                x.iter()
                    .zip(y)
                    .map(|(p, q)| (p - q).powi(2))
                    .sum::<f64>()
                    .sqrt()
            };
            let diff = dist(&a.theta, &b.theta);
            assert!(diff <= 2.0 * tol / mu, "{mode:?}: ‖Δθ‖ = {diff}");
            let moved = dist(&a.theta, &np.theta);
            assert!(moved > 20.0 * tol / mu, "{mode:?}: ‖θ_LP − θ*‖ = {moved}");
        }
    }

    /// Preconditioners on one training set given the same nonzeros cell share one
    /// `SparseRows` (built by the first fit that needs it), and their certified fits are bit
    /// for bit those of preconditioners with cells of their own; a cell holding the nonzeros
    /// of a training set of another shape is refused.
    #[test]
    fn preconditioners_share_the_training_sets_nonzeros() {
        let ds = sparse_toy();
        let c = cfg(Method::LossPerturbation, 1.0, 0.0, 1);
        let calib = shim::calibrate(&c.request(ds.n, ds.classes)).unwrap();
        let opts = LbfgsOptions::default();
        let design = Design::new(&ds.features, &ds.labels, ds.d, ds.classes);
        let moment = Arc::new(DataMoment::new(&design).unwrap());
        let cell = Arc::new(NonzerosCell::default());
        let run = |shared: bool| {
            let mut pres = Vec::new();
            let mut thetas = Vec::new();
            for lambda in [1e-2, 1e-1] {
                let np = train::fit_logistic(&ds, lambda, None, &opts).unwrap().model;
                let rho_eff = loss_perturbation_rho_eff(&calib, lambda, ds.n, ds.classes);
                let mut pre =
                    LossPerturbationPreconditioner::new(&ds, moment.clone(), &np, rho_eff).unwrap();
                if shared {
                    pre = pre.sharing_nonzeros(cell.clone());
                }
                let (model, _, cert) = certified_seed3(&ds, &calib, lambda, &pre, &opts);
                assert!(cert.is_some());
                pres.push(pre);
                thetas.push(model.theta);
            }
            (pres, thetas)
        };
        let (own, own_thetas) = run(false);
        let (shared, shared_thetas) = run(true);
        assert!(!own[0].shares_nonzeros_with(&own[1]));
        assert!(shared[0].shares_nonzeros_with(&shared[1]));
        assert_eq!(own_thetas, shared_thetas);
        // the preconditioners keep the checked rows for their later fits: let them go first
        drop((own, shared));
        let sp = cell.get_or_build(&design).unwrap();
        assert_eq!(sp.rows(), ds.n);
        // one SparseRows, held by the cell and this handle (the fits kept no copy)
        assert_eq!(Arc::strong_count(&sp), 2);
        let other = toy(50, 20, 4, 1);
        let other_design = Design::new(&other.features, &other.labels, other.d, other.classes);
        assert!(cell.get_or_build(&other_design).is_err());
    }

    /// Erratum 4.8 on sparse data (the study's MNIST case): a certified loss-perturbation fit
    /// with the shared preconditioner runs in f64 from its start (every evaluation of its
    /// report is an f64 one), meets its certificate, and is the minimiser of the same perturbed
    /// objective as an independent tight fit with the same noise draw, to within γ/μ plus the
    /// output noise (whose norm is Gamma(DC, 1/β₂): 10× its mean is never reached).
    #[test]
    fn certified_loss_perturbation_on_sparse_data_runs_in_f64() {
        let ds = sparse_toy();
        let c = cfg(Method::LossPerturbation, 1.0, 0.0, 1);
        let calib = shim::calibrate(&c.request(ds.n, ds.classes)).unwrap();
        let gamma = calib.certified.unwrap().gradient_norm_bound;
        let lambda = 1e-2;
        let rho_eff = loss_perturbation_rho_eff(&calib, lambda, ds.n, ds.classes);
        let opts = LbfgsOptions::default();
        let np = train::fit_logistic(&ds, lambda, None, &opts).unwrap().model;
        let design = Design::new(&ds.features, &ds.labels, ds.d, ds.classes);
        // sparse enough for the f64-from-the-start path
        assert!(2 * train::SparseRows::new(&design).nonzeros() <= ds.n * ds.d);
        let moment = Arc::new(DataMoment::new(&design).unwrap());
        let pre = LossPerturbationPreconditioner::new(&ds, moment, &np, rho_eff).unwrap();
        let (model, rep, cert) = certified_seed3(&ds, &calib, lambda, &pre, &opts);
        let cert = cert.expect("corrected mode certifies");
        assert!(
            cert.gradient_norm + cert.rounding_bound <= gamma,
            "{cert:?}"
        );
        assert_eq!(rep.evaluations, cert.refinement_evaluations + 1, "{rep:?}");
        // independent reference: the same b, minimised to γ/100 from zero without preconditioner
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        let mut b = vec![0.0; 80];
        calib.noise().add_to(&mut rng, &mut b).unwrap();
        let mu = rho_eff / ds.n as f64;
        let obj = Objective {
            design,
            lambda: mu,
            linear: Some(b),
            parallel: false,
        };
        let (reference, _, _) = obj
            .certify_report(vec![0.0; 80], gamma / 100.0, &opts, None, None)
            .unwrap();
        let (_, out) = privpred_core::certify::loss_perturbation_residual(&calib, ds.n, rho_eff)
            .unwrap()
            .unwrap();
        let out_mean = match Noise::from(out) {
            Noise::L2Laplace { beta } => 80.0 / beta,
            other => panic!("{other:?}"),
        };
        let dist = model
            .theta
            .iter()
            .zip(&reference)
            .map(|(x, y)| (x - y).powi(2))
            .sum::<f64>()
            .sqrt();
        assert!(
            dist <= 1.01 * gamma / mu + 10.0 * out_mean,
            "‖θ − θ_ref‖ = {dist}, γ/μ = {}, E‖Z‖ = {out_mean}",
            gamma / mu
        );
    }
}
