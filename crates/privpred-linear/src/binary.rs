//! Two-class problems as one sigmoid (logistic) output: w ∈ R^D, score s = wᵀx, class 1 when
//! s > 0, loss ℓ = ln(1 + e^{−y s}) (y = ±1), objective J_b(w) = (1/N) Σ ℓ + (λ/2)‖w‖².
//! Its constants ([`privpred_core::Loss::Logistic`]: K = 1, L = 1/4, one output column) make
//! the noise of every method smaller than a two-class softmax's (K = √2, two columns).
//!
//! A binary model is stored as a `d × 2` [`LinearModel`] whose column 0 is zero and whose
//! column 1 is w: its logits are (0, s), so every arg-max, artifact and server path reads it
//! unchanged, and the noise of a release is drawn in R^D (column 1) or, per answer, in R^1
//! (the score).
//!
//! # The minimiser, by an exact reduction to the two-class softmax
//! For θ = [θ₀, θ₁] ∈ R^{D×2} the softmax cross-entropy depends on u = θ₁ − θ₀ only, and
//! equals the logistic loss of u. With m = (θ₀ + θ₁)/2, ‖θ‖²_F = 2‖m‖² + ‖u‖²/2, so the
//! two-class softmax objective at strength 2λ is
//! J_s(θ) = (1/N)Σ ℓ(uᵀx) + (λ/2)‖u‖² + 2λ‖m‖² = J_b(u) + 2λ‖m‖²:
//! its minimiser has m = 0 and u = w*(λ), the binary minimiser. For the certificate:
//! ∇_θ₀ J_s = −a + 2λθ₀ and ∇_θ₁ J_s = a + 2λθ₁ with a = ∇_u[(1/N)Σℓ] (the same for both
//! columns), so (∇_θ₁ J_s − ∇_θ₀ J_s)/2 = a + λu = ∇J_b(u) whatever m is, and
//! ‖∇J_b(u)‖ ≤ (‖∇_θ₀J_s‖ + ‖∇_θ₁J_s‖)/2 ≤ ‖∇J_s(θ)‖_F/√2. A softmax fit at 2λ certified to
//! ‖∇J_s‖ ≤ √2·γ therefore certifies u = θ₁ − θ₀ to ‖∇J_b(u)‖ ≤ γ, the bound the binary
//! calibration assumes (docs/guarantees.md#errata (erratum 4.8)). The solver, its f64 certification and its
//! preconditioner are the softmax ones, unchanged.

use crate::error::{LinearError, Result};
use crate::kernel::Design;
use crate::lbfgs::LbfgsOptions;
use crate::model::LinearModel;
use crate::train::{self, FitReport, Objective, Optimization};
use privpred_core::Calibration;
use privpred_data::UnitBallDataset;
use rand::Rng;

fn check_two_classes(classes: usize) -> Result<()> {
    if classes != 2 {
        return Err(LinearError::invalid(
            "classes",
            classes,
            "must be 2 for the binary (sigmoid) model; use the softmax model for more classes",
        ));
    }
    Ok(())
}

/// The binary model [0, θ₁ − θ₀] of a two-class softmax θ (row-major `d × 2`).
pub fn from_softmax(m: &LinearModel) -> Result<LinearModel> {
    check_two_classes(m.c)?;
    let mut theta = vec![0.0; m.d * 2];
    for (o, r) in theta.chunks_exact_mut(2).zip(m.theta.chunks_exact(2)) {
        o[1] = r[1] - r[0];
    }
    LinearModel::new(m.d, 2, theta)
}

/// w of a binary model (its column 1).
pub fn weights(m: &LinearModel) -> Vec<f64> {
    m.theta.chunks_exact(m.c).map(|r| r[m.c - 1]).collect()
}

/// Whether `m` has the binary layout (two columns, column 0 zero).
pub fn is_binary_layout(m: &LinearModel) -> bool {
    m.c == 2 && m.theta.chunks_exact(2).all(|r| r[0] == 0.0)
}

/// The non-private binary minimiser w*(λ) (see the module documentation): the two-class
/// softmax at 2λ, mapped to [0, θ₁ − θ₀].
pub fn fit_binary(ds: &UnitBallDataset, lambda: f64, opts: &LbfgsOptions) -> Result<FitReport> {
    check_two_classes(ds.classes)?;
    train::check_lambda(lambda, false)?;
    let mut r = train::fit_logistic(ds, 2.0 * lambda, None, opts)?;
    r.model = from_softmax(&r.model)?;
    r.lambda = lambda;
    Ok(r)
}

/// [`fit_binary`] certified to ‖∇J_b(w)‖₂ ≤ `gamma`: the softmax fit at 2λ is certified to
/// √2·γ (module documentation), and the recorded certificate is the binary one (the measured
/// norm divided by √2, an upper bound on ‖∇J_b‖; the bound γ).
pub fn fit_binary_certified(
    ds: &UnitBallDataset,
    lambda: f64,
    opts: &LbfgsOptions,
    gamma: f64,
) -> Result<FitReport> {
    check_two_classes(ds.classes)?;
    train::check_lambda(lambda, true)?;
    let s2 = std::f64::consts::SQRT_2;
    let mut r = train::fit_logistic_certified(ds, 2.0 * lambda, None, opts, s2 * gamma)?;
    r.model = from_softmax(&r.model)?;
    r.lambda = lambda;
    if let Some(o) = r.optimization.as_mut() {
        o.gradient_norm /= s2;
        o.rounding_bound /= s2;
        o.gradient_norm_bound = gamma;
    }
    Ok(r)
}

/// Model sensitivity for a binary model: one draw of the calibration's output noise over the
/// D weights w (column 1) only; column 0 stays zero.
pub fn perturb_binary<R: Rng + ?Sized>(
    base: &LinearModel,
    calibration: &Calibration,
    rng: &mut R,
) -> Result<LinearModel> {
    check_two_classes(base.c)?;
    let mut w = weights(base);
    calibration.mechanism.perturb(rng, &mut w)?;
    let mut m = base.clone();
    for (r, wi) in m.theta.chunks_exact_mut(2).zip(w) {
        r[0] = 0.0;
        r[1] = wi;
    }
    Ok(m)
}

/// Prediction sensitivity for a binary model: the logits (0, s) with one draw of the
/// calibration's noise added to the score s (noise in R^1).
pub fn perturb_score<R: Rng + ?Sized>(
    logits: &mut [f64],
    calibration: &Calibration,
    rng: &mut R,
) -> Result<()> {
    check_two_classes(logits.len())?;
    let mut s = [logits[1] - logits[0]];
    calibration.mechanism.perturb(rng, &mut s)?;
    logits[0] = 0.0;
    logits[1] = s[0];
    Ok(())
}

/// Loss perturbation with the binary model (Chaudhuri, Monteleoni & Sarwate 2011, Algorithm 2
/// with c = 1/4; ρ and β from `privpred_core::calibrate::loss_perturbation` with
/// [`privpred_core::Loss::Logistic`]): b ∈ R^D is one draw of the calibrated noise and the
/// released w minimises (1/N)Σℓ + (1/N)⟨b, w⟩ + (ρ_eff/(2N))‖w‖² with ρ_eff = max(ρ, Nλ).
///
/// Solved by the reduction of the module documentation, extended to the linear term: the
/// two-class softmax objective with strength 2ρ_eff/N and linear term B = [−b, b] equals the
/// binary objective in u = θ₁ − θ₀ plus (2ρ_eff/N)‖m‖² (⟨B, θ⟩ = ⟨b, u⟩), and
/// (∇_θ₁ − ∇_θ₀)/2 is the binary gradient at u, so a softmax certificate √2·γ certifies u to
/// γ. With a certificate the release is u + Z, Z AMP's output noise
/// (`privpred_core::certify::loss_perturbation_residual`, which depends on γ and ρ_eff/N only)
/// drawn over the D weights. Returns the binary-layout model and its binary certificate
/// (`None` for `paper` mode or when `certify` is false, selection only: the fast fit and the
/// output noise).
pub fn loss_perturbation_binary<R: Rng + ?Sized>(
    ds: &UnitBallDataset,
    calibration: &Calibration,
    rho_eff: f64,
    warm: Option<&LinearModel>,
    opts: &LbfgsOptions,
    rng: &mut R,
    certify: bool,
) -> Result<(LinearModel, crate::lbfgs::LbfgsReport, Option<Optimization>)> {
    check_two_classes(ds.classes)?;
    let (n, d) = (ds.n, ds.d);
    let mut b = vec![0.0; d];
    calibration.mechanism.perturb(rng, &mut b)?;
    let big_b: Vec<f64> = b.iter().flat_map(|&v| [-v, v]).collect();
    let mu_s = 2.0 * rho_eff / n as f64;
    let obj = Objective {
        design: Design::of(ds),
        lambda: mu_s,
        linear: Some(big_b),
        parallel: true,
    };
    // start: [−u/2, u/2] of the warm model's u, shifted by the minimiser −B/(2ρ_eff) of the
    // perturbation and regulariser terms (strictly convex: the start changes only the path)
    let start: Vec<f64> = (0..d)
        .flat_map(|j| {
            let u = warm.map_or(0.0, |m| m.theta[j * m.c + m.c - 1] - m.theta[j * m.c]);
            let s = b[j] / (2.0 * rho_eff);
            [-u / 2.0 + s, u / 2.0 - s]
        })
        .collect();
    // add/remove: certified on the objective normalised by the public N̂
    // (Calibration::calibration_n), so the residual is public
    let np = calibration.calibration_n(n);
    let scale = np as f64 / n as f64;
    let residual = privpred_core::certify::loss_perturbation_residual(calibration, np, rho_eff)?;
    let gamma = calibration.certified.map(|c| c.gradient_norm_bound);
    let finish = |theta: &[f64]| -> Result<LinearModel> {
        from_softmax(&LinearModel {
            d,
            c: 2,
            theta: theta.to_vec(),
        })
    };
    let add_output_noise = |m: &mut LinearModel, noise: privpred_core::VectorNoise, rng: &mut R| {
        let mut w = weights(m);
        noise.add_to(rng, &mut w)?;
        m.theta
            .chunks_exact_mut(2)
            .zip(w)
            .for_each(|(r, wi)| r[1] = wi);
        Ok::<_, LinearError>(())
    };
    let (Some((_, output_noise)), Some(gamma)) = (residual, gamma) else {
        let (m, report) = obj.minimize_with(Some(&start), opts, None)?;
        return Ok((finish(&m.theta)?, report, None));
    };
    if !certify {
        let (m, report) = obj.minimize_with(Some(&start), opts, None)?;
        let mut model = finish(&m.theta)?;
        add_output_noise(&mut model, output_noise, rng)?;
        return Ok((model, report, None));
    }
    let s2 = std::f64::consts::SQRT_2 * scale;
    let fast = obj.minimize_with(Some(&start), opts, None)?.0.theta;
    let (theta, mut cert, report) = obj.certify_report(fast, s2 * gamma, opts, None, None)?;
    cert.gradient_norm /= s2;
    cert.rounding_bound /= s2;
    cert.gradient_norm_bound = gamma;
    let mut model = finish(&theta)?;
    add_output_noise(&mut model, output_noise, rng)?;
    Ok((model, report, Some(cert)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::tests::toy;

    /// The reduction: the mapped softmax fit at 2λ is the binary minimiser, checked against
    /// an independent Newton solve of the binary objective in f64.
    #[test]
    fn mapped_softmax_fit_is_the_binary_minimiser() {
        let ds = toy(400, 6, 2, 11);
        let lambda = 0.01;
        let r = fit_binary_certified(&ds, lambda, &LbfgsOptions::default(), 1e-9).unwrap();
        let w = weights(&r.model);
        assert!(is_binary_layout(&r.model));
        // Independent: Newton's method on J_b(w) = mean ln(1+exp(-y wᵀx)) + λ/2 ‖w‖².
        let (d, n) = (ds.d, ds.n);
        let mut v = vec![0.0; d];
        for _ in 0..50 {
            let mut g: Vec<f64> = v.iter().map(|t| lambda * t).collect();
            let mut h = vec![0.0; d * d];
            for i in 0..d {
                h[i * d + i] = lambda;
            }
            for k in 0..n {
                let x: Vec<f64> = ds.row(k).iter().map(|&a| a as f64).collect();
                let y = if ds.labels[k] == 1 { 1.0 } else { -1.0 };
                let s: f64 = x.iter().zip(&v).map(|(a, b)| a * b).sum();
                let p = 1.0 / (1.0 + (y * s).exp()); // σ(−ys)
                let c = p * (1.0 - p);
                for i in 0..d {
                    g[i] -= y * p * x[i] / n as f64;
                    for j in 0..d {
                        h[i * d + j] += c * x[i] * x[j] / n as f64;
                    }
                }
            }
            let step = solve(&mut h, &mut g, d);
            v.iter_mut().zip(&step).for_each(|(a, b)| *a -= b);
        }
        let err: f64 = w
            .iter()
            .zip(&v)
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f64>()
            .sqrt();
        let norm: f64 = v.iter().map(|a| a * a).sum::<f64>().sqrt();
        assert!(err <= 1e-6 * norm.max(1.0), "err {err:e}, |w| {norm}");
        // ‖∇J_b‖ ≤ γ/λ-close: the certificate is recorded as the binary one.
        let o = r.optimization.unwrap();
        assert_eq!(o.gradient_norm_bound, 1e-9);
        assert!(o.gradient_norm <= 1e-9);
    }

    /// Gaussian elimination with partial pivoting (test helper): solves h·x = g.
    fn solve(h: &mut [f64], g: &mut [f64], d: usize) -> Vec<f64> {
        for col in 0..d {
            let piv = (col..d)
                .max_by(|&a, &b| h[a * d + col].abs().total_cmp(&h[b * d + col].abs()))
                .unwrap();
            for k in 0..d {
                h.swap(col * d + k, piv * d + k);
            }
            g.swap(col, piv);
            for r in col + 1..d {
                let f = h[r * d + col] / h[col * d + col];
                for k in col..d {
                    h[r * d + k] -= f * h[col * d + k];
                }
                g[r] -= f * g[col];
            }
        }
        let mut x = vec![0.0; d];
        for r in (0..d).rev() {
            let s: f64 = (r + 1..d).map(|k| h[r * d + k] * x[k]).sum();
            x[r] = (g[r] - s) / h[r * d + r];
        }
        x
    }

    /// The end-to-end tests' setup: the toy two-class set (400 × 6, seed 3), its fitted
    /// (identity-scale) preprocessing for artifacts, a temporary directory and a seeded rng.
    struct EndToEnd {
        ds: UnitBallDataset,
        fitted: privpred_data::FittedPreprocessing,
        dir: tempfile::TempDir,
        rng: rand_chacha::ChaCha20Rng,
    }

    impl EndToEnd {
        fn new(seed: u64) -> Self {
            use rand::SeedableRng;
            let ds = toy(400, 6, 2, 3);
            let fitted = privpred_data::Preprocessing {
                scale: 1.0,
                ..privpred_data::Preprocessing::default()
            }
            .fit(&ds, 0)
            .unwrap();
            EndToEnd {
                ds,
                fitted,
                dir: tempfile::tempdir().unwrap(),
                rng: rand_chacha::ChaCha20Rng::seed_from_u64(seed),
            }
        }

        /// Saves `p` as the artifact `name`, loads it back and checks that the loaded
        /// predictor (its guarantee re-derived) is `p`.
        fn round_trip(
            &self,
            p: &crate::methods::PrivatePredictor,
            name: &str,
        ) -> crate::artifact::LoadedModel {
            let path = self.dir.path().join(format!("{name}.safetensors"));
            crate::artifact::save(&path, p, &self.fitted, serde_json::Value::Null).unwrap();
            let loaded = crate::artifact::load(&path).unwrap();
            assert_eq!(loaded.private(), Some(p), "{name}");
            loaded
        }
    }

    /// Model and prediction sensitivity train the binary model end to end: the calibration
    /// records the logistic loss (K = 1), the released model keeps the binary layout (the
    /// noise is drawn over w only), answers are (0, s) with noise on s, the artifact round
    /// trip re-derives the binary calibration, and a logistic guarantee on a model that is not
    /// in the binary layout is refused.
    #[test]
    fn binary_methods_end_to_end() {
        use crate::methods::{MethodConfig, PredictorKind, train_private};
        use privpred_core::{Budget, CalibrationMode, Loss, Method, Privacy};
        let mut e = EndToEnd::new(5);
        for m in [Method::ModelSensitivity, Method::PredictionSensitivity] {
            for delta in [0.0, 1e-5] {
                let mut cfg = MethodConfig::new(
                    m,
                    CalibrationMode::Corrected,
                    Privacy::new(1.0, delta).unwrap(),
                    Budget::finite(10).unwrap(),
                );
                cfg.lambda = 1e-2;
                cfg.loss = Loss::Logistic;
                let p = train_private(&cfg, &e.ds, &mut e.rng).unwrap();
                assert_eq!(p.calibration.assumptions.loss, Loss::Logistic);
                assert_eq!(p.calibration.assumptions.k, 1.0);
                let model = match &p.kind {
                    PredictorKind::Released { model } | PredictorKind::NoisyLogits { model } => {
                        model.clone()
                    }
                    k => panic!("{k:?}"),
                };
                assert!(is_binary_layout(&model), "{m}");
                let rows: Vec<&[f32]> = (0..5).map(|i| e.ds.row(i)).collect();
                for a in p.try_predict(&rows, &mut e.rng).unwrap() {
                    let s = a.scores.unwrap();
                    assert_eq!(s[0], 0.0);
                    assert_eq!(a.label, u32::from(s[1] > 0.0));
                }
                e.round_trip(&p, &format!("{m}-{delta}"));
                // a logistic guarantee on a softmax-layout model is refused
                let mut bad = p.clone();
                match &mut bad.kind {
                    PredictorKind::Released { model } | PredictorKind::NoisyLogits { model } => {
                        model.theta[0] = 0.5
                    }
                    _ => unreachable!(),
                }
                let e = crate::rederive::check_rederived(&bad).unwrap_err();
                assert!(e.contains("binary"), "{e}");
            }
        }
        // subsample-and-aggregate is refused with the binary model
        let mut cfg = MethodConfig::new(
            Method::SubsampleAggregate,
            CalibrationMode::Corrected,
            Privacy::new(1.0, 1e-5).unwrap(),
            Budget::finite(10).unwrap(),
        );
        cfg.loss = Loss::Logistic;
        let err = train_private(&cfg, &e.ds, &mut e.rng)
            .unwrap_err()
            .to_string();
        assert!(err.contains("binary"), "{err}");
    }

    /// The binary release's noise: with ℓ2-Laplace output noise the distance of the released
    /// w from w* is Gamma(D, β) distributed (mean D/β, β = Nλε/2 up to the certificate's 1 %);
    /// a draw over D·2 coordinates (the softmax layout) would have mean 2D/β. 400 draws.
    #[test]
    fn model_sensitivity_noise_lives_in_r_d() {
        use crate::methods::{MethodConfig, PredictorKind, train_private};
        use privpred_core::{Budget, CalibrationMode, Loss, Method, Noise, Privacy};
        use rand::SeedableRng;
        let ds = toy(300, 8, 2, 4);
        let mut cfg = MethodConfig::new(
            Method::ModelSensitivity,
            CalibrationMode::Corrected,
            Privacy::new(1.0, 0.0).unwrap(),
            Budget::Unlimited,
        );
        cfg.lambda = 0.05;
        cfg.loss = Loss::Logistic;
        let base = fit_binary(&ds, 0.05, &LbfgsOptions::default())
            .unwrap()
            .model;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(8);
        let p = train_private(&cfg, &ds, &mut rng).unwrap();
        let Noise::L2Laplace { beta } = p.calibration.noise() else {
            panic!()
        };
        let want = 300.0 * 0.05 * 1.0 / 2.0 / 1.01;
        assert!((beta - want).abs() < 1e-9 * want, "{beta} vs {want}");
        let mut total = 0.0;
        let draws = 400;
        for _ in 0..draws {
            let m = perturb_binary(&base, &p.calibration, &mut rng).unwrap();
            assert!(is_binary_layout(&m));
            let w0 = weights(&base);
            let w1 = weights(&m);
            total += w0
                .iter()
                .zip(&w1)
                .map(|(a, b)| (a - b).powi(2))
                .sum::<f64>()
                .sqrt();
        }
        let mean = total / draws as f64;
        // Gamma(8, β): mean 8/β, sd √8/β; the mean of 400 draws has sd √8/(20β)
        let (mu, sd) = (8.0 / beta, 8f64.sqrt() / (20.0 * beta));
        assert!((mean - mu).abs() < 6.0 * sd, "mean {mean} vs {mu} ± {sd}");
        let _ = PredictorKind::Released { model: base };
    }

    /// Σ_k ∇ℓ(w; x_k, y_k) of the binary loss in f64, computed here independently of the
    /// solver: ∇ ln(1 + e^{−y wᵀx}) = −y σ(−y wᵀx) x.
    fn loss_gradient_sum(ds: &UnitBallDataset, w: &[f64]) -> Vec<f64> {
        let mut g = vec![0.0; ds.d];
        for k in 0..ds.n {
            let x = ds.row(k);
            let y = if ds.labels[k] == 1 { 1.0 } else { -1.0 };
            let s: f64 = x.iter().zip(w).map(|(&a, b)| a as f64 * b).sum();
            let p = 1.0 / (1.0 + (y * s).exp());
            g.iter_mut()
                .zip(x)
                .for_each(|(gi, &xi)| *gi -= y * p * xi as f64);
        }
        g
    }

    /// Loss perturbation with the binary model against Chaudhuri, Monteleoni & Sarwate (2011),
    /// Algorithm 2 and Section 3.4 (logistic loss: |ℓ′| ≤ 1, c = 1/4): the regulariser is
    /// ρ = 2c/ε′ and b has density ∝ e^{−β‖b‖} with β = ε′/4 (sensitivity 2 under
    /// replace-one, half of ε′ on the noise), ε′ = 0.99ε (the certificate's residual share
    /// 0.01). The noise b of each released w is recovered from the first-order condition
    /// Σ∇ℓ(w) + b + ρ w = 0 (the loss gradient computed independently, above): its norm
    /// must be Gamma(D, 1/β). The softmax's constants (ρ = 2·(1/2)·2/ε′, β = ε′/(4√2)) give
    /// a different recovered b (mean norm ≥ √2 times larger): 300 fits, a 6-sd band.
    #[test]
    fn loss_perturbation_noise_matches_chaudhuri_et_al() {
        use crate::methods::MethodConfig;
        use crate::methods::PrivateMethod;
        use crate::methods::loss_perturbation::LossPerturbation;
        use privpred_core::{Budget, CalibrationMode, Loss, Method, Noise, Privacy};
        use rand::SeedableRng;
        let (n, d, eps) = (400, 6, 1.0);
        let ds = toy(n, d, 2, 21);
        let mut cfg = MethodConfig::new(
            Method::LossPerturbation,
            CalibrationMode::Corrected,
            Privacy::new(eps, 0.0).unwrap(),
            Budget::Unlimited,
        );
        cfg.lambda = 1e-5;
        cfg.loss = Loss::Logistic;
        let mut cal = LossPerturbation.calibrate(&cfg, n, 2).unwrap();
        let e1 = 0.99 * eps;
        // ρ = 2L/ε₁ (Nλ = 0.004 is below it); β spends what the Jacobian term ln(1 + L/ρ) leaves
        let rho = 2.0 * 0.25 / e1;
        let beta = (e1 - (1.0 + 0.25 / rho).ln()) / 2.0;
        assert!(
            (cal.mechanism.rho().unwrap() - rho).abs() < 1e-12,
            "{cal:?}"
        );
        let Noise::L2Laplace { beta: b } = cal.noise() else {
            panic!("{cal:?}")
        };
        assert!((b - beta).abs() < 1e-12, "{b} vs {beta}");
        // the objective's noise alone (no certificate: no output noise), tight solves
        cal.certified = None;
        let opts = LbfgsOptions {
            grad_tol: 1e-8,
            ..LbfgsOptions::default()
        };
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(9);
        let draws = 300;
        let mut total = 0.0;
        for _ in 0..draws {
            let (m, _, cert) =
                loss_perturbation_binary(&ds, &cal, rho, None, &opts, &mut rng, true).unwrap();
            assert!(cert.is_none() && is_binary_layout(&m));
            let w = weights(&m);
            let g = loss_gradient_sum(&ds, &w);
            let b_norm = g
                .iter()
                .zip(&w)
                .map(|(gi, wi)| (gi + rho * wi).powi(2))
                .sum::<f64>()
                .sqrt();
            total += b_norm;
        }
        let mean = total / draws as f64;
        let (mu, sd) = (
            d as f64 / beta,
            (d as f64).sqrt() / beta / (draws as f64).sqrt(),
        );
        assert!(
            (mean - mu).abs() < 6.0 * sd,
            "mean ‖b‖ {mean} vs {mu} ± {sd}"
        );
    }

    /// Loss perturbation trains the binary model end to end: a certified release in the
    /// binary layout whose certificate is the binary one, the calibration records the logistic
    /// loss with ρ = max(1/(2·0.99ε), Nλ) (the softmax's floor would be 2/(0.99ε)), and the artifact round
    /// trip re-derives it.
    #[test]
    fn loss_perturbation_binary_end_to_end() {
        use crate::methods::{MethodConfig, PredictorKind, train_private};
        use privpred_core::{Budget, CalibrationMode, Loss, Method, Privacy};
        let mut e = EndToEnd::new(6);
        for delta in [0.0, 1e-5] {
            let mut cfg = MethodConfig::new(
                Method::LossPerturbation,
                CalibrationMode::Corrected,
                Privacy::new(2.0, delta).unwrap(),
                Budget::Unlimited,
            );
            cfg.lambda = 1e-3;
            cfg.loss = Loss::Logistic;
            let p = train_private(&cfg, &e.ds, &mut e.rng).unwrap();
            assert_eq!(p.calibration.assumptions.loss, Loss::Logistic);
            let rho = p.calibration.mechanism.rho().unwrap();
            // the recorded floor max(1/(2·0.99ε), Nλ) = max(0.2525, 0.4)
            let want = (1.0f64 / (2.0 * 0.99 * 2.0)).max(e.ds.n as f64 * 1e-3);
            assert!((rho - want).abs() < 1e-12, "ρ {rho} vs {want}");
            let PredictorKind::Released { model } = &p.kind else {
                panic!("{:?}", p.kind)
            };
            assert!(is_binary_layout(model));
            let o = p.diagnostics.optimization.unwrap();
            assert!(o.gradient_norm <= o.gradient_norm_bound, "{o:?}");
            assert_eq!(
                Some(o.gradient_norm_bound),
                p.calibration.certified.map(|c| c.gradient_norm_bound)
            );
            e.round_trip(&p, &format!("lp-{delta}"));
        }
    }

    /// DP-SGD trains the binary model: the released model has the binary layout, the
    /// calibration and the artifact's guarantee record `loss: logistic`, the round trip
    /// re-derives it, and without noise (σ = 0, a clip no gradient reaches) it is plain SGD
    /// on the logistic loss and separates the toy classes.
    #[test]
    fn dp_sgd_binary_end_to_end() {
        use crate::dpsgd::{DpSgdConfig, train_dpsgd_binary};
        use crate::methods::{MethodConfig, PredictorKind, train_private};
        use privpred_core::{Budget, CalibrationMode, Loss, Method, Privacy};
        let mut e = EndToEnd::new(2);
        let mut cfg = MethodConfig::new(
            Method::DpSgd,
            CalibrationMode::Corrected,
            Privacy::new(1.0, 1e-5).unwrap(),
            Budget::Unlimited,
        );
        cfg.loss = Loss::Logistic;
        cfg.dp_sgd.clip = Some(0.1);
        let p = train_private(&cfg, &e.ds, &mut e.rng).unwrap();
        assert_eq!(p.calibration.assumptions.loss, Loss::Logistic);
        let PredictorKind::Released { model } = &p.kind else {
            panic!("{:?}", p.kind)
        };
        assert!(is_binary_layout(model));
        let loaded = e.round_trip(&p, "dpsgd");
        let json = serde_json::to_value(&loaded.private().unwrap().calibration).unwrap();
        assert_eq!(json["assumptions"]["loss"], "logistic", "{json}");
        let sgd = DpSgdConfig {
            batch_size: 40,
            epochs: 20.0,
            learning_rate: 1.0,
            momentum: 0.9,
            clip: None,
            public_n: None,
        };
        let ds = &e.ds;
        let (m, stats) = train_dpsgd_binary(ds, &sgd, 1e6, 0.0, &mut e.rng).unwrap();
        assert_eq!(stats.clipped_fraction, 0.0);
        let w = weights(&m);
        let correct = (0..ds.n)
            .filter(|&k| {
                let s: f64 = ds.row(k).iter().zip(&w).map(|(&a, b)| a as f64 * b).sum();
                (s > 0.0) == (ds.labels[k] == 1)
            })
            .count();
        let fit = fit_binary(ds, 1e-4, &LbfgsOptions::default())
            .unwrap()
            .model;
        let wf = weights(&fit);
        let best = (0..ds.n)
            .filter(|&k| {
                let s: f64 = ds.row(k).iter().zip(&wf).map(|(&a, b)| a as f64 * b).sum();
                (s > 0.0) == (ds.labels[k] == 1)
            })
            .count();
        assert!(
            correct + 20 >= best,
            "SGD {correct} vs L-BFGS {best} of {}",
            ds.n
        );
    }

    #[test]
    fn refuses_more_than_two_classes() {
        let ds = toy(100, 4, 3, 1);
        let e = fit_binary(&ds, 0.01, &LbfgsOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("classes") && e.contains("2"), "{e}");
    }
}
