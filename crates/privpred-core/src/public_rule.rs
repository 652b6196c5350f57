//! The public rule: λ, subsample-and-aggregate's teacher count T, DP-SGD's batch size and clip from
//! public quantities only — the number of training examples N (public under replace-one
//! neighbours, where N is the same on neighbouring data sets), the model's dimension d, the
//! loss's output columns C, the target ε and the inference budget B. No row of the data is an
//! input ([`PublicInputs`] holds every input there is), so the values are post-processing of
//! nothing and cost no privacy: the guarantee's selection record is
//! [`crate::SelectionMethod::PublicRule`].
//!
//! # The forms (each method's excess-risk trade-off)
//! With the L2 strength λ the regularisation bias of the excess risk grows as λ‖θ*‖²/2 and the
//! noise's part shrinks with λ:
//! - **Loss perturbation** (Chaudhuri et al. 2011, Theorem 26; Kifer et al. 2012): the
//!   perturbation ⟨b, θ⟩/N with ‖b‖ of order dC/ε moves the minimiser by ‖b‖/(Nλ), costing
//!   about ‖b‖²/(N²λ); balancing against λ‖θ*‖² gives λ ∝ dC/(Nε):
//!   **λ = κ_LP · dC/(Nε)**.
//! - **Model sensitivity** (output perturbation, Chaudhuri et al. 2011, Theorem 6): noise of
//!   norm of order dC/(Nλε) on θ costs at most L times that for an L-Lipschitz loss;
//!   balancing against λ‖θ*‖² gives λ ∝ √(dC/(Nε)): **λ = κ_MS · √(dC/(Nε))**.
//! - **Prediction sensitivity**: the same trade-off on the C outputs of each of B answers, each
//!   spending ε/B: **λ = κ_PS · √(C·B/(Nε))**.
//!
//! Every λ is clamped into [[`LAMBDA_MIN`], [`LAMBDA_MAX`]]. The constants κ were fitted on
//! public data sets only (docs/tables.md: breast cancer, wine, iris, fair, anes96 and
//! palmerpenguins, by `python/benchmarks/public_rule_fit.py`), never on a user's table.
//!
//! # Sizes that follow N, and DP-SGD's clip
//! - Teachers: **T = clamp(⌊N/6⌋, 1, 256)**: the vote's noise does not grow with T while the
//!   margin of the teachers' votes does, so many small teachers (about six rows each) beat
//!   few large ones on the public tables; 256 (the study's value) from N = 1,536 on.
//! - DP-SGD's expected batch size: **b = clamp(⌊√N⌋, 1, 256)** — fits every N (b ≤ N) and
//!   reaches the study's 256 at N = 65,536.
//! - DP-SGD's clip: **ν = 1** ([`DPSGD_CLIP`]): rows in the unit ball give per-example
//!   gradients of norm at most 1 for the sigmoid and √2 for the softmax, so ν = 1 keeps
//!   almost every gradient whole, while the noise's scale is σν either way.

use crate::{Budget, Loss, Method};

/// Smallest λ the rule gives.
pub const LAMBDA_MIN: f64 = 1e-6;
/// Largest λ the rule gives.
pub const LAMBDA_MAX: f64 = 1.0;
/// κ of loss perturbation's λ = κ·dC/(Nε).
pub const KAPPA_LOSS_PERTURBATION: f64 = 0.3;
/// κ of model sensitivity's λ = κ·√(dC/(Nε)).
pub const KAPPA_MODEL_SENSITIVITY: f64 = 0.3;
/// κ of prediction sensitivity's λ = κ·√(C·B/(Nε)).
pub const KAPPA_PREDICTION_SENSITIVITY: f64 = 1.0;
/// Most teachers the rule gives (the study's T).
pub const MAX_TEACHERS: usize = 256;
/// Largest DP-SGD expected batch size the rule gives (the study's b).
pub const MAX_DPSGD_BATCH: usize = 256;
/// Rows per teacher the teacher rule aims at.
pub const ROWS_PER_TEACHER: usize = 6;
/// DP-SGD's clip ν by the rule.
pub const DPSGD_CLIP: f64 = 1.0;

/// Every input of the rule: public quantities only.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PublicInputs {
    /// The method.
    pub method: Method,
    /// The loss (its output columns C: 1 for the sigmoid, the classes for the softmax).
    pub loss: Loss,
    /// The number of classes.
    pub classes: usize,
    /// N: training examples the method is fitted on (public under replace-one).
    pub n: usize,
    /// d: the model's input dimension.
    pub dim: usize,
    /// Target ε.
    pub epsilon: f64,
    /// Inference budget B (prediction sensitivity).
    pub budget: Budget,
}

/// A value of the rule with the formula that gave it (recorded with the model).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleValue {
    /// The value.
    pub value: f64,
    /// The formula with its inputs, e.g. `λ = 0.1·d·C/(N·ε) with d = 31, C = 1, N = 455, ε = 1`.
    pub formula: String,
}

/// The rule's λ for `p.method`; `None` for the methods without λ (subsample-and-aggregate's
/// teachers and DP-SGD train without L2).
pub fn lambda(p: &PublicInputs) -> Option<RuleValue> {
    let n = p.n.max(1) as f64;
    let d = p.dim.max(1) as f64;
    let c = p.loss.outputs(p.classes.max(2)) as f64;
    let eps = p.epsilon;
    let (raw, form) = match p.method {
        Method::LossPerturbation => (
            KAPPA_LOSS_PERTURBATION * d * c / (n * eps),
            format!("{KAPPA_LOSS_PERTURBATION}·d·C/(N·ε)"),
        ),
        Method::ModelSensitivity => (
            KAPPA_MODEL_SENSITIVITY * (d * c / (n * eps)).sqrt(),
            format!("{KAPPA_MODEL_SENSITIVITY}·√(d·C/(N·ε))"),
        ),
        Method::PredictionSensitivity => {
            let b = match p.budget {
                Budget::Finite(b) => b.get() as f64,
                Budget::Unlimited => 1.0,
            };
            (
                KAPPA_PREDICTION_SENSITIVITY * (c * b / (n * eps)).sqrt(),
                format!("{KAPPA_PREDICTION_SENSITIVITY}·√(C·B/(N·ε)) with B = {b}"),
            )
        }
        Method::SubsampleAggregate | Method::DpSgd => return None,
    };
    let value = raw.clamp(LAMBDA_MIN, LAMBDA_MAX);
    Some(RuleValue {
        value,
        formula: format!(
            "λ = {form} clamped to [{LAMBDA_MIN:e}, {LAMBDA_MAX}], d = {}, C = {}, N = {}, ε = {eps} (public rule): {value:e}",
            p.dim, c, p.n
        ),
    })
}

/// The rule's teacher count for N training examples: clamp(⌊N/6⌋, 1, 256).
pub fn teachers(n: usize) -> usize {
    (n / ROWS_PER_TEACHER).clamp(1, MAX_TEACHERS)
}

/// The rule's DP-SGD expected batch size for N training examples: clamp(⌊√N⌋, 1, 256).
pub fn dpsgd_batch_size(n: usize) -> usize {
    ((n as f64).sqrt().floor() as usize).clamp(1, MAX_DPSGD_BATCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(method: Method) -> PublicInputs {
        PublicInputs {
            method,
            loss: Loss::Logistic,
            classes: 2,
            n: 455,
            dim: 31,
            epsilon: 1.0,
            budget: Budget::finite(100).unwrap(),
        }
    }

    #[test]
    fn lambda_follows_each_methods_trade_off() {
        let lp = lambda(&inputs(Method::LossPerturbation)).unwrap();
        assert!((lp.value - KAPPA_LOSS_PERTURBATION * 31.0 / 455.0).abs() < 1e-15);
        assert!(lp.formula.contains("N = 455") && lp.formula.contains("public rule"));
        // ten times the data or ten times the ε: a tenth of λ (inside the clamp)
        let mut p = inputs(Method::LossPerturbation);
        p.n *= 10;
        assert!((lambda(&p).unwrap().value * 10.0 - lp.value).abs() < 1e-15);
        let ms = lambda(&inputs(Method::ModelSensitivity)).unwrap();
        let mut p = inputs(Method::ModelSensitivity);
        p.epsilon = 100.0;
        assert!((lambda(&p).unwrap().value * 10.0 - ms.value).abs() < 1e-12);
        assert!(lambda(&inputs(Method::DpSgd)).is_none());
        assert!(lambda(&inputs(Method::SubsampleAggregate)).is_none());
        // the clamp
        let mut p = inputs(Method::LossPerturbation);
        p.epsilon = 1e-9;
        assert_eq!(lambda(&p).unwrap().value, LAMBDA_MAX);
        p.epsilon = 1e12;
        assert_eq!(lambda(&p).unwrap().value, LAMBDA_MIN);
    }

    #[test]
    fn the_rule_costs_nothing_and_needs_replace_one() {
        use crate::{Neighbours, Privacy, Selection, SelectionMethod};
        let p = Privacy::new(1.0, 0.0).unwrap();
        let s = Selection::derive(SelectionMethod::PublicRule, p, Neighbours::ReplaceOne).unwrap();
        assert_eq!((s.epsilon, s.delta), (Some(0.0), Some(0.0)));
        assert!(s.is_inside());
        assert_eq!(s.method.name(), "public-rule");
        assert!(Selection::derive(SelectionMethod::PublicRule, p, Neighbours::AddRemove).is_err());
    }

    #[test]
    fn sizes_follow_n_and_fit_small_tables() {
        for n in 1..5000 {
            assert!((1..=n).contains(&teachers(n)), "{n}");
            assert!((1..=n).contains(&dpsgd_batch_size(n)), "{n}");
        }
        assert_eq!(teachers(455), 75);
        assert_eq!(teachers(5), 1);
        assert_eq!(dpsgd_batch_size(142), 11);
        assert_eq!(teachers(60_000), MAX_TEACHERS);
        assert_eq!(dpsgd_batch_size(60_000), 244);
        assert_eq!(teachers(10_000_000), MAX_TEACHERS);
        assert_eq!(dpsgd_batch_size(10_000_000), MAX_DPSGD_BATCH);
    }
}
