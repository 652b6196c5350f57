//! End-to-end audits: the whole product pipeline (`privpred_linear::train_private`: calibration,
//! noise, solver) trained on D and on D′ for every trial, on a small problem so that thousands
//! of trainings are fast.
//!
//! The problem: N examples in R⁴, two classes; feature 0–1 a two-blob cloud, feature 2 a
//! constant bias, feature 3 zero for every example except the audited one, which is
//! x* = e₃ (unit norm, orthogonal to everyone else). Every input is inside the unit ball.
//!
//! - Loss perturbation: D has (x*, y = 0), D′ has (x*, y = 1). The minimiser θ determines the
//!   noise that produced it, b_X(θ) = −(Σ_{i∈X} ∇ℓᵢ(θ) + ρ_eff θ) (stationarity of the
//!   objective), and the softmax Hessian does not depend on the label, so the Jacobian terms of
//!   the change of variables cancel: the exact log-likelihood ratio is
//!   β(‖b_D(θ)‖ − ‖b_D′(θ)‖) (ℓ2-Laplace) or (‖b_D(θ)‖² − ‖b_D′(θ)‖²)/(2σ²) (Gaussian).
//! - DP-SGD: D has a null example (x = 0: zero gradient, so replacing it is adding/removing),
//!   D′ replaces it by the canary (x*, y = 0), whose gradient x*(p − e₀)ᵀ stays at the clip norm
//!   along the fixed direction e₃ ⊗ (−1, 1)/√2 that no other example touches. Only the final
//!   model is released; the statistic is its projection (θ₃₀ − θ₃₁)/√2. With the binary
//!   (one sigmoid output) model (`Loss::Logistic` in the configuration) the same pair trains
//!   `train_dpsgd_binary`: the canary's gradient σ(w₃)·e₃ is clipped to ν along e₃ and the
//!   statistic is −w₃.

use crate::error::{AuditError, Result};
use crate::mechanisms::Mechanism;
use privpred_core::{Calibration, Loss, VectorNoise};
use privpred_data::{Dataset, Provenance, UnitBallDataset};
use privpred_linear::dpsgd::{train_dpsgd, train_dpsgd_binary};
use privpred_linear::kernel::Design;
use privpred_linear::{
    LinearModel, MethodConfig, PrivatePredictor, methods::PredictorKind, train_private,
};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};

/// Feature dimension of the audit problem.
pub const DIM: usize = 4;
/// Classes of the audit problem.
pub const CLASSES: usize = 2;

/// The audit problem's N − 1 ordinary examples (deterministic from `seed`) followed by a
/// placeholder row 0 that the pair overwrites: returns (features, labels) with row 0 = x*.
fn base_rows(n: usize, seed: u64) -> (Vec<f32>, Vec<u32>) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed ^ 0xA0D1_7000);
    let mut f = Vec::with_capacity(n * DIM);
    let mut l = Vec::with_capacity(n);
    f.extend_from_slice(&[0.0, 0.0, 0.0, 1.0]);
    l.push(0);
    for i in 1..n {
        let y = (i % 2) as u32;
        let c = if y == 0 { -0.3 } else { 0.3 };
        let g1: f64 = StandardNormal.sample(&mut rng);
        let g2: f64 = StandardNormal.sample(&mut rng);
        let mut x = [c + 0.25 * g1, 0.25 * g2, 0.5, 0.0];
        let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm > 0.999 {
            // strictly inside the ball after f32 rounding
            x.iter_mut().for_each(|v| *v *= 0.999 / norm);
        }
        f.extend(x.iter().map(|&v| v as f32));
        l.push(y);
    }
    (f, l)
}

fn dataset(features: Vec<f32>, labels: Vec<u32>, name: &str) -> Result<UnitBallDataset> {
    let prov = Provenance {
        name: name.into(),
        source: "privpred-audit".into(),
        ..Provenance::default()
    };
    let ds = Dataset::new(DIM, CLASSES, features, labels, prov)
        .map_err(|e| AuditError::Run(e.to_string()))?;
    UnitBallDataset::new(ds).map_err(|e| AuditError::Run(e.to_string()))
}

/// The pair (D, D′) for loss perturbation: x* = e₃ with label 0 in D and 1 in D′.
pub fn loss_perturbation_pair(n: usize, seed: u64) -> Result<(UnitBallDataset, UnitBallDataset)> {
    if n < 4 {
        return Err(AuditError::invalid(
            "n",
            n,
            "must be >= 4 for the end-to-end audit",
        ));
    }
    let (f, l) = base_rows(n, seed);
    let mut l2 = l.clone();
    l2[0] = 1;
    Ok((
        dataset(f.clone(), l, "audit-loss-D")?,
        dataset(f, l2, "audit-loss-D'")?,
    ))
}

/// The pair (D, D′) for DP-SGD: a null example x = 0 in D, the canary (e₃, 0) in D′.
pub fn dpsgd_pair(n: usize, seed: u64) -> Result<(UnitBallDataset, UnitBallDataset)> {
    if n < 4 {
        return Err(AuditError::invalid(
            "n",
            n,
            "must be >= 4 for the end-to-end audit",
        ));
    }
    let (f, l) = base_rows(n, seed);
    let mut f0 = f.clone();
    f0[..DIM].iter_mut().for_each(|v| *v = 0.0);
    Ok((
        dataset(f0, l.clone(), "audit-dpsgd-D")?,
        dataset(f, l, "audit-dpsgd-D'")?,
    ))
}

fn released(p: &PrivatePredictor) -> Result<&LinearModel> {
    match &p.kind {
        PredictorKind::Released { model } => Ok(model),
        _ => Err(AuditError::Run("expected a released private model".into())),
    }
}

/// Σᵢ ∇ℓᵢ(θ) + ρ θ over `ds` (row-major D × C), in f64.
fn grad_sum(ds: &Dataset, theta: &[f64], rho: f64) -> Vec<f64> {
    let (d, c) = (ds.d, ds.classes);
    let mut g: Vec<f64> = theta.iter().map(|t| rho * t).collect();
    let mut z = vec![0.0; c];
    for i in 0..ds.n {
        let x = ds.row(i);
        for (k, zk) in z.iter_mut().enumerate() {
            *zk = (0..d).map(|j| x[j] as f64 * theta[j * c + k]).sum();
        }
        let m = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = z.iter().map(|v| (v - m).exp()).sum();
        for k in 0..c {
            let p = (z[k] - m).exp() / s - if ds.labels[i] as usize == k { 1.0 } else { 0.0 };
            for j in 0..d {
                g[j * c + k] += x[j] as f64 * p;
            }
        }
    }
    g
}

/// The end-to-end audit of a private-training method on a fixed pair.
pub struct EndToEnd {
    /// The product's training configuration.
    pub config: MethodConfig,
    /// D.
    pub d: UnitBallDataset,
    /// D′.
    pub d_prime: UnitBallDataset,
    /// The calibration the product used (from a first training on D).
    pub calibration: Calibration,
    /// DP-SGD: the noise multiplier σ every trial trains with, the calibration's (`None` for
    /// loss perturbation). A test may lower it to check that the audit refutes a noise
    /// smaller than the claim needs.
    pub noise_multiplier: Option<f64>,
}

impl EndToEnd {
    /// Builds the pair for `config.method` and records the product's calibration.
    pub fn new(config: MethodConfig, n: usize, seed: u64) -> Result<Self> {
        let (d, d_prime) = match config.method() {
            privpred_core::Method::LossPerturbation => loss_perturbation_pair(n, seed)?,
            privpred_core::Method::DpSgd => dpsgd_pair(n, seed)?,
            m => {
                return Err(AuditError::Unsupported(format!(
                    "no end-to-end audit for {m}"
                )));
            }
        };
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let p = train_private(&config, &d, &mut rng).map_err(|e| AuditError::Run(e.to_string()))?;
        Ok(EndToEnd {
            noise_multiplier: p.calibration.mechanism.noise_multiplier(),
            calibration: p.calibration,
            config,
            d,
            d_prime,
        })
    }
}

impl Mechanism for EndToEnd {
    fn trial(&self, on_neighbour: bool, rng: &mut ChaCha20Rng) -> Result<f64> {
        let ds = if on_neighbour { &self.d_prime } else { &self.d };
        let c = CLASSES;
        match self.config.method() {
            privpred_core::Method::LossPerturbation => {
                let p = train_private(&self.config, ds, rng)
                    .map_err(|e| AuditError::Run(e.to_string()))?;
                let theta = &released(&p)?.theta;
                let cal = &p.calibration;
                let rho = cal
                    .mechanism
                    .rho()
                    .unwrap_or(2.0 * cal.assumptions.l * c as f64 / cal.epsilon());
                let rho_eff = rho.max(self.d.n as f64 * self.config.lambda());
                let b_d: f64 = grad_sum(&self.d, theta, rho_eff)
                    .iter()
                    .map(|v| v * v)
                    .sum();
                let b_dp: f64 = grad_sum(&self.d_prime, theta, rho_eff)
                    .iter()
                    .map(|v| v * v)
                    .sum();
                Ok(match cal.mechanism.vector_noise() {
                    Some(VectorNoise::L2Laplace { beta }) => beta * (b_d.sqrt() - b_dp.sqrt()),
                    Some(VectorNoise::Gaussian { sigma }) => (b_d - b_dp) / (2.0 * sigma * sigma),
                    // the objective's noise is continuous; a grid release here is not the
                    // mechanism this audit models
                    Some(
                        VectorNoise::DiscreteGaussian { .. }
                        | VectorNoise::DiscreteL2Laplace { .. },
                    )
                    | None => {
                        return Err(AuditError::Run("unexpected noise".into()));
                    }
                })
            }
            _ => {
                // The product's DP-SGD trainer with the product's calibration (computed once in
                // `new` by train_private: it is a deterministic function of (ε, δ, N, b, epochs),
                // identical for D and D′, so reusing it is exact and saves the accountant's
                // noise search per trial).
                let sigma = self.noise_multiplier.ok_or_else(|| {
                    AuditError::Run("dp-sgd calibration has no noise multiplier".into())
                })?;
                let clip = self.config.dp_sgd().clip.unwrap_or(0.1);
                let r = (DIM - 1) * c;
                if self.config.loss() == Loss::Logistic {
                    // binary layout [0, w]: w₃ is θ[r + 1]; the canary (label 0) pushes it down
                    let (model, _) = train_dpsgd_binary(ds, self.config.dp_sgd(), clip, sigma, rng)
                        .map_err(|e| AuditError::Run(e.to_string()))?;
                    return Ok(-model.theta[r + 1]);
                }
                let design = Design::new(&ds.features, &ds.labels, ds.d, ds.classes);
                let (model, _) = train_dpsgd(&design, self.config.dp_sgd(), clip, sigma, rng)
                    .map_err(|e| AuditError::Run(e.to_string()))?;
                let theta = &model.theta;
                Ok((theta[r] - theta[r + 1]) / std::f64::consts::SQRT_2)
            }
        }
    }
}
