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
use crate::lbfgs::LbfgsOptions;
use crate::model::LinearModel;
use crate::train::{self, FitReport};
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

    /// Model and prediction sensitivity train the binary model end to end: the calibration
    /// records the logistic loss (K = 1), the released model keeps the binary layout (the
    /// noise is drawn over w only), answers are (0, s) with noise on s, the artifact round
    /// trip re-derives the binary calibration, and a logistic guarantee on a model that is not
    /// in the binary layout is refused.
    #[test]
    fn binary_methods_end_to_end() {
        use crate::artifact::{load, save};
        use crate::methods::{MethodConfig, PredictorKind, train_private};
        use privpred_core::{Budget, CalibrationMode, Loss, Method, Privacy};
        use privpred_data::preprocess::Preprocessing;
        use rand::SeedableRng;
        let ds = toy(400, 6, 2, 3);
        let fitted = Preprocessing {
            scale: 1.0,
            ..Preprocessing::default()
        }
        .fit(&ds, 0)
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
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
                let p = train_private(&cfg, &ds, &mut rng).unwrap();
                assert_eq!(p.calibration.assumptions.loss, Loss::Logistic);
                assert_eq!(p.calibration.assumptions.k, 1.0);
                let model = match &p.kind {
                    PredictorKind::Released { model } | PredictorKind::NoisyLogits { model } => {
                        model.clone()
                    }
                    k => panic!("{k:?}"),
                };
                assert!(is_binary_layout(&model), "{m}");
                let rows: Vec<&[f32]> = (0..5).map(|i| ds.row(i)).collect();
                for a in p.try_predict(&rows, &mut rng).unwrap() {
                    let s = a.scores.unwrap();
                    assert_eq!(s[0], 0.0);
                    assert_eq!(a.label, u32::from(s[1] > 0.0));
                }
                let path = dir.path().join(format!("{m}-{delta}.safetensors"));
                save(&path, &p, &fitted, serde_json::Value::Null).unwrap();
                assert_eq!(load(&path).unwrap().private(), Some(&p), "{m}");
                // a logistic guarantee on a softmax-layout model is refused
                let mut bad = p.clone();
                match &mut bad.kind {
                    PredictorKind::Released { model } | PredictorKind::NoisyLogits { model } => {
                        model.theta[0] = 0.5
                    }
                    _ => unreachable!(),
                }
                let e = crate::rederive::check_rederived(&bad, false).unwrap_err();
                assert!(e.contains("binary"), "{e}");
            }
        }
        // loss perturbation and DP-SGD are refused with the binary model
        for m in [
            Method::LossPerturbation,
            Method::DpSgd,
            Method::SubsampleAggregate,
        ] {
            let mut cfg = MethodConfig::new(
                m,
                CalibrationMode::Corrected,
                Privacy::new(1.0, 1e-5).unwrap(),
                Budget::finite(10).unwrap(),
            );
            cfg.loss = Loss::Logistic;
            let e = train_private(&cfg, &ds, &mut rng).unwrap_err().to_string();
            assert!(e.contains("binary"), "{m}: {e}");
        }
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

    #[test]
    fn refuses_more_than_two_classes() {
        let ds = toy(100, 4, 3, 1);
        let e = fit_binary(&ds, 0.01, &LbfgsOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("classes") && e.contains("2"), "{e}");
    }
}
