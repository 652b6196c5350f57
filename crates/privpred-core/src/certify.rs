//! Certified minimisers (docs/guarantees.md#errata (erratum 4.8)): the guarantee accounts for the solver's residual.
//!
//! Model sensitivity's Δ = 2K/(Nλ), prediction sensitivity's logit bound and loss
//! perturbation's change-of-variables argument all assume the **exact** minimiser θ*. A solver
//! releases an iterate θ̂. For a μ-strongly convex objective J, ‖θ̂ − θ*‖₂ ≤ ‖∇J(θ̂)‖₂/μ
//! (strong convexity: ⟨∇J(θ̂) − ∇J(θ*), θ̂ − θ*⟩ ≥ μ‖θ̂ − θ*‖², and ∇J(θ*) = 0). So if every
//! released fit carries a certificate ‖∇J(θ̂)‖₂ ≤ γ, checked in f64 on the final iterate, the
//! released iterates of two neighbouring datasets are at most Δ + 2γ/μ apart.
//!
//! γ is fixed **before** the fit (from N, λ, ε only — nothing data-dependent), so the noise can
//! be calibrated before any data is touched; a fit that does not reach γ is refused, never
//! released.
//!
//! - Output perturbation (model sensitivity) and prediction sensitivity, `corrected`/`tight`:
//!   the sensitivity becomes Δ + 2γ/λ with γ = [`OUTPUT_RESIDUAL_FRACTION`]·K/N, i.e.
//!   2γ/λ = 1 % of Δ. Every noise parameter of these methods is linear in Δ (a scale σ ∝ Δ
//!   or a rate β ∝ 1/Δ, whatever the composition rule for the B answers), so the calibration
//!   is the exact-minimiser calibration with its noise scaled by (Δ + 2γ/λ)/Δ = 1.01.
//!   Theorem: Chaudhuri, Monteleoni & Sarwate 2011, Lemma 7 (Δ for exact minimisers) plus the
//!   strong-convexity bound above (the triangle inequality through θ*(D) and θ*(D′)).
//! - Loss perturbation, `corrected`/`tight`: approximate minimum perturbation (Iyengar, Near,
//!   Song, Thakkar, Thakurta & Wang, "Towards Practical Differentially Private Convex
//!   Optimization", IEEE S&P 2019, Algorithm 1 "AMP" and its Theorem 1). The objective noise
//!   is calibrated for (ε₁, δ₁) = (1 − s)(ε, δ) with s = [`LP_RESIDUAL_SHARE`]; the fit is
//!   certified to ‖∇J(θ̂)‖₂ ≤ γ = [`LP_GAMMA_FRACTION`]·K/N on the perturbed objective, which is
//!   μ = ρ_eff/N strongly convex; then θ̂ + Z is released with Z an ℓ2-Laplace (δ = 0) or
//!   Gaussian (δ > 0) output noise of L2 sensitivity 2r, r = γ/μ, at (ε₂, δ₂) = s(ε, δ).
//!   Proof (as in AMP's Theorem 1): write θ̂ = θ_min(D, b) + e(D, θ_min) where θ_min is the
//!   exact minimiser, and b ↦ θ_min is a bijection for fixed D (b = −N∇(L_D + μ‖·‖²/2)(θ_min)),
//!   so e is a deterministic function of (D, θ_min) with ‖e‖ ≤ r. Releasing θ_min is
//!   (ε₁, δ₁)-DP (objective perturbation); for every fixed θ_min, θ_min + e(D, θ_min) + Z has
//!   sensitivity ‖e(D, ·) − e(D′, ·)‖ ≤ 2r in D and is (ε₂, δ₂)-DP; adaptive composition makes
//!   (θ_min, θ̂ + Z) (ε, δ)-DP, and θ̂ + Z alone is post-processing.
//! - `paper` keeps the published behaviour (no certificate) and is labelled
//!   `valid_guarantee: false` for these three methods.
//! - DP-SGD and subsample-and-aggregate rest on no minimiser (DP-SGD's guarantee is about its
//!   noisy steps; a teacher is an arbitrary function of its disjoint shard and only its vote is
//!   used), so they need no certificate.
//!
//! The analysis here is for replace-one neighbours with a fixed N. (Under add/remove the
//! residual terms use N + 1 for the larger dataset; they are not applied to that relation here.)

use crate::calibrate::CalibrationRequest;
use crate::error::{CoreError, Result};
use crate::grid::discrete_gaussian_sigma;
use crate::guarantee::Calibration;
pub use crate::guarantee::CertifiedFit;
use crate::mechanism::VectorNoise;
use crate::types::{CalibrationMode, Method};

/// Output and prediction methods: 2γ/λ = this fraction of Δ = 2K/(Nλ), i.e. γ = 0.01·K/N
/// (the noise grows by 1 %).
pub const OUTPUT_RESIDUAL_FRACTION: f64 = 0.01;
/// Loss perturbation: the share s of ε (and of δ) spent on AMP's output-noise term.
pub const LP_RESIDUAL_SHARE: f64 = 0.01;
/// Loss perturbation: γ = this·K/N. With s = 1 % the output term's scale is about
/// γN/(Ks) = 10 % of the objective noise's effect on θ, added in quadrature (≈ 0.5 %), plus 1 %
/// from spending (1 − s)ε on the objective.
pub const LP_GAMMA_FRACTION: f64 = 1e-3;

/// γ for `method` at N (K from the assumptions): the bound the solver must certify.
pub fn gradient_norm_bound(method: Method, k: f64, n: usize) -> Option<f64> {
    let n = n as f64;
    match method {
        Method::ModelSensitivity | Method::PredictionSensitivity => {
            Some(OUTPUT_RESIDUAL_FRACTION * k / n)
        }
        Method::LossPerturbation => Some(LP_GAMMA_FRACTION * k / n),
        Method::DpSgd | Method::SubsampleAggregate => None,
    }
}

fn needs_minimiser(m: Method) -> bool {
    matches!(
        m,
        Method::ModelSensitivity | Method::PredictionSensitivity | Method::LossPerturbation
    )
}

/// Calibrates `req` ([`crate::calibrate::calibrate`]) and accounts for the solver's residual
/// (erratum 4.8, see the module documentation): in `corrected` and `tight` the noise of model
/// sensitivity and prediction sensitivity is calibrated with Δ + 2γ/λ, and loss perturbation's
/// objective noise with (1 − s)(ε, δ) (the rest pays for AMP's output noise, drawn at fit time
/// by [`loss_perturbation_residual`]); the certificate is recorded in
/// [`Calibration::certified`]. In `paper` these three methods are labelled invalid
/// ([`crate::Validity::Invalid`]). Other methods are returned as calibrated.
pub fn calibrate_certified(req: &CalibrationRequest) -> Result<Calibration> {
    if !needs_minimiser(req.method) {
        return crate::calibrate::calibrate(req);
    }
    if req.mode == CalibrationMode::Paper {
        let mut c = crate::calibrate::calibrate(req)?;
        c.invalidate(
            "erratum 4.8: paper mode releases the solver's iterate as if it were the exact minimiser (no certified gradient bound): not a valid guarantee",
        );
        return Ok(c);
    }
    let a = req.assumptions();
    let n = match a.n {
        Some(n) if n >= 1 => n,
        _ => {
            return Err(CoreError::invalid(
                "n",
                "missing",
                format!(
                    "{} needs the training-set size N >= 1 to certify its minimiser (erratum 4.8)",
                    req.method
                ),
            ));
        }
    };
    let gamma = gradient_norm_bound(req.method, a.k, n).expect("method needs a minimiser");
    match req.method {
        Method::LossPerturbation => {
            let s = LP_RESIDUAL_SHARE;
            let p = req.privacy;
            let mut r1 = req.clone();
            r1.privacy = p.share(1.0 - s)?;
            let mut c = crate::calibrate::calibrate(&r1)?;
            c.guarantee.privacy = p;
            c.notes.push(format!(
                "erratum 4.8 (approximate minimum perturbation, Iyengar et al. 2019, Thm 1): the objective noise and rho use (1 - s)(eps, delta) with s = {s}; the fit is certified to ||grad J||_2 <= gamma = {gamma:.6e} and released with an output noise of sensitivity 2*gamma*N/rho_eff at s(eps, delta)"
            ));
            c.certified = Some(CertifiedFit {
                gradient_norm_bound: gamma,
                strong_convexity: None,
                exact_sensitivity: None,
                sensitivity: None,
                residual_share: Some(s),
            });
            Ok(c)
        }
        _ => {
            let lambda = match a.lambda {
                Some(l) if l.is_finite() && l > 0.0 => l,
                _ => {
                    return Err(CoreError::invalid(
                        "lambda",
                        a.lambda.map_or("missing".to_string(), |l| l.to_string()),
                        format!("{} needs lambda > 0", req.method),
                    ));
                }
            };
            let mut c = crate::calibrate::calibrate(req)?;
            let delta_exact = 2.0 * a.k / (n as f64 * lambda);
            let sens = delta_exact + 2.0 * gamma / lambda;
            c.mechanism = c.mechanism.scaled(sens / delta_exact);
            c.notes.push(format!(
                "erratum 4.8: certified minimiser ||grad J(theta)||_2 <= gamma = {gamma:.6e} (f64, final iterate); sensitivity Delta + 2*gamma/lambda = {sens:.6e} (Delta = {delta_exact:.6e}); noise scaled by {:.4}",
                sens / delta_exact
            ));
            c.certified = Some(CertifiedFit {
                gradient_norm_bound: gamma,
                strong_convexity: Some(lambda),
                exact_sensitivity: Some(delta_exact),
                sensitivity: Some(sens),
                residual_share: None,
            });
            Ok(c)
        }
    }
}

/// Loss perturbation's output-noise term (AMP, see the module documentation) for a fit on N
/// examples with regulariser ρ_eff (strong convexity μ = ρ_eff/N): the residual
/// r = γ/μ = γN/ρ_eff, sensitivity 2r; ℓ2-Laplace with β = ε₂/(2r) when δ = 0 (density ratio
/// ≤ e^{β·2r}), otherwise θ on the grid with exact discrete Gaussian noise of the σ that makes
/// one release of sensitivity 2r (ε₂, δ₂)-DP ([`crate::grid::discrete_gaussian_sigma`]),
/// (ε₂, δ₂) = s(ε, δ). `None` when the calibration carries no certificate (paper mode).
pub fn loss_perturbation_residual(
    cal: &Calibration,
    n: usize,
    rho_eff: f64,
) -> Result<Option<(f64, VectorNoise)>> {
    let Some(cert) = cal.certified else {
        return Ok(None);
    };
    let Some(s) = cert.residual_share else {
        return Err(CoreError::invalid(
            "calibration",
            "certified without a residual share",
            "loss perturbation needs the AMP share s (calibrate with calibrate_certified)",
        ));
    };
    if !(rho_eff.is_finite() && rho_eff > 0.0) || n == 0 {
        return Err(CoreError::invalid(
            "rho_eff",
            rho_eff,
            "must be a finite number > 0 (and N >= 1)",
        ));
    }
    let r = cert.gradient_norm_bound * n as f64 / rho_eff;
    let p = cal.privacy();
    let (e2, d2) = (s * p.epsilon(), s * p.delta());
    let noise = if p.is_pure() {
        VectorNoise::L2Laplace {
            beta: e2 / (2.0 * r),
        }
    } else {
        // a release of weights: on the grid with exact discrete Gaussian noise (crate::grid)
        let (sigma, rounding) = discrete_gaussian_sigma(e2, d2, 1, 2.0 * r)?;
        VectorNoise::DiscreteGaussian { sigma, rounding }
    };
    Ok(Some((rho_eff / n as f64, noise)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::{Budget, Privacy};
    use crate::types::Noise;

    fn req(m: Method, mode: CalibrationMode, e: f64, d: f64) -> CalibrationRequest {
        let mut r = CalibrationRequest::new(m, mode, Privacy::new(e, d).unwrap());
        r.n = Some(60_000);
        r.lambda = Some(0.1);
        if !m.is_private_training() {
            r.budget = Budget::finite(100).unwrap();
        }
        r
    }

    /// The certified noise is the exact-minimiser noise for Δ + 2γ/λ: 1.01× the scale
    /// (σ) or 1/1.01× the rate (β), for every variant of the output and prediction methods.
    #[test]
    fn output_methods_pay_for_the_residual() {
        for m in [Method::ModelSensitivity, Method::PredictionSensitivity] {
            for mode in [CalibrationMode::Corrected, CalibrationMode::Tight] {
                for d in [0.0, 1e-5] {
                    let r = req(m, mode, 1.0, d);
                    let exact = crate::calibrate::calibrate(&r).unwrap();
                    let cert = calibrate_certified(&r).unwrap();
                    let f = cert.certified.unwrap();
                    let (n, lambda, k) = (60_000.0, 0.1, std::f64::consts::SQRT_2);
                    assert!((f.gradient_norm_bound - 0.01 * k / n).abs() < 1e-20);
                    let want = (2.0 * k / (n * lambda) + 2.0 * f.gradient_norm_bound / lambda)
                        / (2.0 * k / (n * lambda));
                    let ratio = match (exact.noise(), cert.noise()) {
                        (Noise::Gaussian { sigma: a }, Noise::Gaussian { sigma: b })
                        | (
                            Noise::DiscreteGaussian { sigma: a, .. },
                            Noise::DiscreteGaussian { sigma: b, .. },
                        ) => b / a,
                        (Noise::L2Laplace { beta: a }, Noise::L2Laplace { beta: b })
                        | (
                            Noise::DiscreteL2Laplace { beta: a, .. },
                            Noise::DiscreteL2Laplace { beta: b, .. },
                        ) => a / b,
                        // tight δ = 0 prediction sensitivity: a selection over the logits
                        (Noise::PermuteAndFlip { beta: a }, Noise::PermuteAndFlip { beta: b })
                        | (Noise::Exponential { beta: a }, Noise::Exponential { beta: b }) => a / b,
                        other => panic!("{other:?}"),
                    };
                    assert!(
                        (ratio - want).abs() < 1e-12 && want > 1.0099,
                        "{m} {mode:?} {d}"
                    );
                    assert!(cert.is_valid());
                }
            }
        }
    }

    #[test]
    fn paper_mode_is_labelled_invalid() {
        for m in [
            Method::ModelSensitivity,
            Method::PredictionSensitivity,
            Method::LossPerturbation,
        ] {
            let c = calibrate_certified(&req(m, CalibrationMode::Paper, 1.0, 0.0)).unwrap();
            assert!(!c.is_valid() && c.certified.is_none(), "{m}");
            assert!(
                c.guarantee
                    .validity
                    .reasons()
                    .iter()
                    .any(|n| n.contains("4.8"))
            );
            assert!(c.notes.iter().any(|n| n.contains("4.8")));
        }
    }

    /// AMP: the objective noise uses (1 − s)ε (β = (1 − s)ε/(2K) for the add/remove proof,
    /// whatever the core's rule is it is applied to (1 − s)ε), and the output term is
    /// calibrated at sε for sensitivity 2γN/ρ_eff. The composed ε is exactly ε.
    #[test]
    fn loss_perturbation_splits_epsilon() {
        let r = req(
            Method::LossPerturbation,
            CalibrationMode::Corrected,
            1.0,
            0.0,
        );
        let c = calibrate_certified(&r).unwrap();
        let mut r1 = r.clone();
        r1.privacy = Privacy::new(0.99, 0.0).unwrap();
        let c1 = crate::calibrate::calibrate(&r1).unwrap();
        assert_eq!(c.noise(), c1.noise());
        assert_eq!(c.mechanism.rho(), c1.mechanism.rho());
        assert_eq!(c.epsilon(), 1.0);
        let rho_eff = c.mechanism.rho().unwrap().max(60_000.0 * 0.1);
        let (mu, noise) = loss_perturbation_residual(&c, 60_000, rho_eff)
            .unwrap()
            .unwrap();
        assert!((mu - rho_eff / 60_000.0).abs() < 1e-15);
        let gamma = 1e-3 * std::f64::consts::SQRT_2 / 60_000.0;
        let r2 = gamma * 60_000.0 / rho_eff;
        match noise {
            VectorNoise::L2Laplace { beta } => {
                assert!((beta - 0.01 / (2.0 * r2)).abs() < 1e-9 * beta)
            }
            n => panic!("{n:?}"),
        }
        // δ > 0: discrete Gaussian on the grid at (0.01ε, 0.01δ)
        let r = req(Method::LossPerturbation, CalibrationMode::Tight, 1.0, 1e-5);
        let c = calibrate_certified(&r).unwrap();
        let (_, noise) = loss_perturbation_residual(&c, 60_000, rho_eff)
            .unwrap()
            .unwrap();
        match noise {
            VectorNoise::DiscreteGaussian { sigma, rounding } => {
                let (want, r_want) =
                    crate::grid::discrete_gaussian_sigma(0.01, 1e-7, 1, 2.0 * r2).unwrap();
                assert!((sigma - want).abs() < 1e-9 * want);
                assert_eq!(rounding, r_want);
            }
            n => panic!("{n:?}"),
        }
        // no certificate (paper): no output term
        let p = calibrate_certified(&req(
            Method::LossPerturbation,
            CalibrationMode::Paper,
            1.0,
            0.0,
        ))
        .unwrap();
        assert!(
            loss_perturbation_residual(&p, 60_000, rho_eff)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn other_methods_are_unchanged() {
        let mut r = req(
            Method::SubsampleAggregate,
            CalibrationMode::Corrected,
            1.0,
            0.0,
        );
        r.n = None;
        assert_eq!(
            calibrate_certified(&r).unwrap(),
            crate::calibrate::calibrate(&r).unwrap()
        );
    }
}
