//! The two-class logistic (sigmoid) model's calibrations, each against an independent value:
//! the loss's constants by finite differences of ln(1 + e^{−ys}), the published formulas of
//! Chaudhuri, Monteleoni & Sarwate (2011, "Differentially private empirical risk
//! minimization", JMLR 12), and a worst-case pair of neighbouring datasets whose exact
//! minimisers (an independent Newton solve) realise almost the whole claimed ε.

use privpred_core::calibrate::{CalibrationRequest, calibrate};
use privpred_core::certify::calibrate_certified;
use privpred_core::{
    Budget, CalibrationMode, Loss, Mechanism, Method, Neighbours, Noise, Privacy, VectorNoise,
};

fn req(
    method: Method,
    eps: f64,
    delta: f64,
    n: usize,
    lambda: f64,
    loss: Loss,
) -> CalibrationRequest {
    let mut r = CalibrationRequest::new(
        method,
        CalibrationMode::Corrected,
        Privacy::new(eps, delta).unwrap(),
    );
    r.n = Some(n);
    r.lambda = Some(lambda);
    r.classes = 2;
    r.neighbours = Neighbours::ReplaceOne;
    r.loss = loss;
    if !method.is_private_training() {
        r.budget = Budget::finite(1).unwrap();
    }
    r
}

fn logistic(y: f64, s: f64) -> f64 {
    // ln(1 + e^{−ys}), stable
    let t = -y * s;
    if t > 0.0 {
        t + (-t).exp().ln_1p()
    } else {
        t.exp().ln_1p()
    }
}

/// K and L of the logistic loss from central differences over a grid of scores: the
/// supremum of |∂ℓ/∂s| is 1 (approached as ys → −∞) and of ∂²ℓ/∂s² is 1/4 (at s = 0); with
/// ‖x‖ ≤ 1 these bound ‖∇_w ℓ‖ and the Hessian's eigenvalue. The softmax's K = √2 is the
/// supremum of ‖p − e_y‖ over two logits (0, t), computed the same way.
#[test]
fn logistic_constants_from_finite_differences() {
    let h = 1e-4;
    let (mut k, mut l, mut k_soft) = (0.0f64, 0.0f64, 0.0f64);
    for i in -4000..=4000 {
        let s = i as f64 * 0.01;
        for y in [-1.0, 1.0] {
            let d1 = (logistic(y, s + h) - logistic(y, s - h)) / (2.0 * h);
            let d2 = (logistic(y, s + h) - 2.0 * logistic(y, s) + logistic(y, s - h)) / (h * h);
            k = k.max(d1.abs());
            l = l.max(d2);
        }
        // softmax over the logits (0, s), label 0: the gradient in the logits is
        // p − e₀ = (p₀ − 1, p₁)
        let p1 = 1.0 / (1.0 + (-s).exp());
        let p0 = 1.0 - p1;
        k_soft = k_soft.max((p0 - 1.0).hypot(p1));
    }
    assert!(
        k <= Loss::Logistic.k() + 1e-6 && k >= Loss::Logistic.k() - 1e-6,
        "K {k}"
    );
    assert!(
        l <= Loss::Logistic.l() + 1e-6 && l >= Loss::Logistic.l() - 1e-6,
        "L {l}"
    );
    assert!(
        (k_soft - Loss::Softmax.k()).abs() < 1e-6,
        "softmax K {k_soft}"
    );
    assert_eq!(Loss::Logistic.outputs(2), 1);
    assert_eq!(Loss::Softmax.outputs(2), 2);
}

/// Output perturbation for regularised logistic regression: Chaudhuri et al. (2011),
/// Algorithm 1 with Corollary 8, draws b with density ∝ exp(−(nΛε/2)‖b‖).
#[test]
fn model_sensitivity_is_chaudhuri_corollary_8() {
    for (n, lambda, eps) in [(569, 1e-2, 1.0), (60_000, 1e-4, 0.1), (1000, 0.5, 10.0)] {
        let c = calibrate(&req(
            Method::ModelSensitivity,
            eps,
            0.0,
            n,
            lambda,
            Loss::Logistic,
        ))
        .unwrap();
        let Noise::L2Laplace { beta } = c.noise() else {
            panic!("{:?}", c.noise())
        };
        let want = n as f64 * lambda * eps / 2.0;
        assert!((beta - want).abs() <= 1e-12 * want, "{beta} vs {want}");
        assert_eq!(c.assumptions.loss, Loss::Logistic);
        assert_eq!((c.assumptions.k, c.assumptions.l), (1.0, 0.25));
        // the softmax's β is √2 smaller (K = √2)
        let s = calibrate(&req(
            Method::ModelSensitivity,
            eps,
            0.0,
            n,
            lambda,
            Loss::Softmax,
        ))
        .unwrap();
        let Noise::L2Laplace { beta: bs } = s.noise() else {
            panic!()
        };
        assert!((beta / bs - std::f64::consts::SQRT_2).abs() < 1e-12);
    }
}

/// Objective perturbation for logistic regression (Chaudhuri et al. 2011, Theorem 9 with
/// c = 1/4): the Jacobian term of a rank-1 Hessian is ln(1 + c/ρ), at most ε/2 at ρ = 1/(2ε);
/// the noise b ∈ R^D has replace-one sensitivity 2 and spends what the Jacobian term leaves,
/// as their Algorithm 2 does (density exp(−ε′‖b‖/2), ε′ = ε − the Jacobian bound):
/// β = (ε − ln(1 + c/ρ))/2 ≥ ε/4.
#[test]
fn loss_perturbation_uses_the_logistic_constants() {
    for eps in [0.1, 1.0, 10.0] {
        let c = calibrate(&req(
            Method::LossPerturbation,
            eps,
            0.0,
            569,
            1e-6,
            Loss::Logistic,
        ))
        .unwrap();
        let Mechanism::ObjectivePerturbation {
            noise: VectorNoise::L2Laplace { beta },
            rho: Some(rho),
        } = c.mechanism
        else {
            panic!("{:?}", c.mechanism)
        };
        assert!(
            (1.0 + 0.25 / rho).ln() <= eps / 2.0 + 1e-15,
            "Jacobian term"
        );
        assert!((rho - 1.0 / (2.0 * eps)).abs() <= 1e-12 * rho, "rho {rho}");
        let want = (eps - (1.0 + 0.25 / rho).ln()) / 2.0;
        assert!((beta - want).abs() <= 1e-9 * beta, "beta {beta} vs {want}");
        assert!(beta >= eps / 4.0 && (1.0 + 0.25 / rho).ln() + 2.0 * beta <= eps * (1.0 + 1e-12));
        // softmax with two classes: ρ = 2LC/ε = 2/ε, β = ε/(4√2)
        let s = calibrate(&req(
            Method::LossPerturbation,
            eps,
            0.0,
            569,
            1e-6,
            Loss::Softmax,
        ))
        .unwrap();
        let Mechanism::ObjectivePerturbation { rho: Some(rs), .. } = s.mechanism else {
            panic!()
        };
        assert!((rs / rho - 4.0).abs() < 1e-12);
    }
}

/// Prediction sensitivity: one score s = wᵀx moves by at most ‖w − w′‖ ≤ 2/(Nλ)
/// (Corollary 8's sensitivity, ‖x‖ ≤ 1), so B answers with ℓ2-Laplace in R^1 (a Laplace
/// variable) need β = Nλε/(2B); the label-only selection over (0, s) has β = ε/(BΔ).
#[test]
fn prediction_sensitivity_on_one_score() {
    let (n, lambda, eps) = (569, 1e-2, 1.0);
    let mut r = req(
        Method::PredictionSensitivity,
        eps,
        0.0,
        n,
        lambda,
        Loss::Logistic,
    );
    r.budget = Budget::finite(10).unwrap();
    let c = calibrate(&r).unwrap();
    // corrected: on the grid (exact lattice sampler), the rounding r = Δ/1024 in Δ
    let Noise::DiscreteL2Laplace { beta, rounding } = c.noise() else {
        panic!("{:?}", c.noise())
    };
    let want = n as f64 * lambda * eps / (2.0 * 10.0) / (1.0 + 1.0 / 1024.0);
    assert!((beta - want).abs() <= 1e-11 * want);
    assert_eq!(rounding, 2.0 / (n as f64 * lambda) / 1024.0);
    // paper: the published f64 ℓ2-Laplace (a Laplace variable in R^1)
    r.mode = CalibrationMode::Paper;
    let Noise::L2Laplace { beta } = calibrate(&r).unwrap().noise() else {
        panic!()
    };
    let want = n as f64 * lambda * eps / (2.0 * 10.0);
    assert!((beta - want).abs() <= 1e-12 * want);
    r.mode = CalibrationMode::Tight;
    let t = calibrate(&r).unwrap();
    let Noise::PermuteAndFlip { beta } = t.noise() else {
        panic!("{:?}", t.noise())
    };
    let delta = 2.0 / (n as f64 * lambda);
    assert!((beta - eps / (10.0 * delta)).abs() <= 1e-12 * beta);
}

/// A logistic model needs exactly two classes.
#[test]
fn logistic_needs_two_classes() {
    let mut r = req(Method::ModelSensitivity, 1.0, 0.0, 100, 0.1, Loss::Logistic);
    r.classes = 3;
    let e = calibrate(&r).unwrap_err().to_string();
    assert!(e.contains("classes") && e.contains("2"), "{e}");
}

/// The exact minimiser of (1/N)[(N−1)·ℓ(w₁) + ℓ(zᵀw)] + (λ/2)‖w‖² in R², N huge (the N − 1
/// examples at e₁ with label +1 are one weighted term), by Newton's method in f64.
fn minimiser(n: f64, lambda: f64, z: [f64; 2]) -> [f64; 2] {
    let sig = |t: f64| 1.0 / (1.0 + (-t).exp());
    let mu = n * lambda; // work with N·J
    let mut w = [10.0, 0.0];
    for _ in 0..200 {
        let (a, b) = (sig(-w[0]), sig(-(z[0] * w[0] + z[1] * w[1])));
        // gradient of N·J: −(N−1)σ(−w₁)e₁ − σ(−zᵀw)z + μw
        let g = [-(n - 1.0) * a - b * z[0] + mu * w[0], -b * z[1] + mu * w[1]];
        let (ca, cb) = ((n - 1.0) * a * (1.0 - a), b * (1.0 - b));
        let h = [
            [ca + cb * z[0] * z[0] + mu, cb * z[0] * z[1]],
            [cb * z[0] * z[1], cb * z[1] * z[1] + mu],
        ];
        let det = h[0][0] * h[1][1] - h[0][1] * h[1][0];
        let step = [
            (h[1][1] * g[0] - h[0][1] * g[1]) / det,
            (h[0][0] * g[1] - h[1][0] * g[0]) / det,
        ];
        w = [w[0] - step[0], w[1] - step[1]];
    }
    w
}

/// Audit of the binary sensitivity on a worst-case pair. D: N − 1 examples at e₁ (label +1)
/// and z = (−0.2, √0.96) (label +1); D′ replaces z by z′ = (−0.2, −√0.96). The N − 1
/// examples push w₁ far out (≈ 22), so z is misclassified with |ℓ′| ≈ 1 and no other example
/// curves the objective along e₂: the exact minimisers are ≈ 0.967·2/(Nλ) apart, close to
/// Chaudhuri et al.'s bound 2/(Nλ). The product's model-sensitivity calibration (certified, as
/// released) must cover that move: with ℓ2-Laplace noise the privacy loss of this pair is
/// exactly β·‖w − w′‖ (the log-density ratio, maximised along w − w′), so it must be ≤ ε —
/// and it is above ε/√2, so a calibration with the softmax's relative constants mistaken
/// (K = 1/√2, or noise √2 too small) fails this test.
#[test]
fn binary_sensitivity_worst_case_pair() {
    let (n, lambda, eps) = (1e12_f64, 1e-11, 1.0);
    let c = 0.2_f64;
    let s = (1.0 - c * c).sqrt();
    let w = minimiser(n, lambda, [-c, s]);
    let w2 = minimiser(n, lambda, [-c, -s]);
    let moved = (w[0] - w2[0]).hypot(w[1] - w2[1]);
    let bound = 2.0 / (n * lambda);
    assert!(moved <= bound, "moved {moved} > bound {bound}");
    assert!(
        moved > 0.95 * bound,
        "pair not near worst case: {moved} vs {bound}"
    );
    let cal = calibrate_certified(&req(
        Method::ModelSensitivity,
        eps,
        0.0,
        n as usize,
        lambda,
        Loss::Logistic,
    ))
    .unwrap();
    let Noise::L2Laplace { beta } = cal.noise() else {
        panic!()
    };
    let loss = beta * moved;
    assert!(
        loss <= eps,
        "privacy loss {loss} of the pair exceeds eps {eps}"
    );
    assert!(
        loss > eps / std::f64::consts::SQRT_2,
        "loss {loss}: audit too weak"
    );
}
