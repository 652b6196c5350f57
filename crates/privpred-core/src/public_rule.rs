//! The public rule: λ, subsample-and-aggregate's teacher count T, DP-SGD's batch size and clip from
//! public quantities only — the public training-set size ([`PublicN`]: the exact N under
//! replace-one neighbours, where N is the same on neighbouring data sets, and the declared N̂
//! under add/remove, where the exact N differs between neighbours), the model's dimension d, the
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
//! - DP-SGD's epochs: **E = min(100, 20·max(1, ε)^0.4)** ([`dpsgd_epochs`]): at ε ≤ 1 more
//!   steps raise the noise multiplier σ more than they help (20, the study's value); at larger
//!   ε the noise per step is small and the learning-rate schedule's length is the limit, so
//!   the rule gives more (about 50 at ε = 10), measured on the public tables.
//! - DP-SGD's clip: **ν = 1** ([`DPSGD_CLIP`]): rows in the unit ball give per-example
//!   gradients of norm at most 1 for the sigmoid and √2 for the softmax, so ν = 1 keeps
//!   almost every gradient whole, while the noise's scale is σν either way.

use crate::{Budget, Loss, Method, Neighbours};

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
/// DP-SGD's epochs by the rule at ε ≤ 1 (the study's 20).
pub const DPSGD_EPOCHS: f64 = 20.0;
/// The exponent of ε in DP-SGD's epochs 20·max(1, ε)^0.4 above ε = 1.
pub const DPSGD_EPOCHS_EXPONENT: f64 = 0.4;
/// Most DP-SGD epochs the rule gives.
pub const MAX_DPSGD_EPOCHS: f64 = 100.0;

/// The training-set size the rule may read: the exact N under replace-one neighbours (public
/// there) or the declared N̂ under add/remove (where the exact N is private: D and D with one
/// row added differ in it). Built only by [`PublicN::new`], so a caller cannot hand the rule
/// the exact N under add/remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublicN {
    n: usize,
    declared: bool,
}

impl PublicN {
    /// The public size for `neighbours`: `n` (the exact training-set size) under replace-one,
    /// `declared` (N̂) under add/remove. `None` under add/remove without N̂ ≥ 1, or under
    /// replace-one with an N̂ (the method's configuration check refuses both, naming the
    /// parameter).
    pub fn new(neighbours: Neighbours, n: usize, declared: Option<usize>) -> Option<PublicN> {
        match (neighbours, declared) {
            (Neighbours::ReplaceOne, None) => Some(PublicN { n, declared: false }),
            (Neighbours::AddRemove, Some(p)) if p >= 1 => Some(PublicN {
                n: p,
                declared: true,
            }),
            _ => None,
        }
    }

    /// The size.
    pub fn get(self) -> usize {
        self.n
    }

    /// Whether it is the declared N̂ (add/remove) rather than the exact N (replace-one).
    pub fn is_declared(self) -> bool {
        self.declared
    }

    /// Its symbol in a formula: `N` or `N̂`.
    fn symbol(self) -> &'static str {
        if self.declared { "N̂" } else { "N" }
    }
}

/// Every input of the rule: public quantities only.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PublicInputs {
    /// The method.
    pub method: Method,
    /// The loss (its output columns C: 1 for the sigmoid, the classes for the softmax).
    pub loss: Loss,
    /// The number of classes.
    pub classes: usize,
    /// The public training-set size: N under replace-one, N̂ under add/remove.
    pub n: PublicN,
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
    let n = p.n.get().max(1) as f64;
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
            "λ = {form} clamped to [{LAMBDA_MIN:e}, {LAMBDA_MAX}], d = {}, C = {}, {} = {}, ε = {eps} (public rule): {value:e}",
            p.dim,
            c,
            p.n.symbol(),
            p.n.get()
        ),
    })
}

/// The rule's teacher count for the public size N (N̂ under add/remove): clamp(⌊N/6⌋, 1, 256).
pub fn teachers(n: PublicN) -> usize {
    (n.get() / ROWS_PER_TEACHER).clamp(1, MAX_TEACHERS)
}

/// The rule's DP-SGD expected batch size for the public size N (N̂ under add/remove):
/// clamp(⌊√N⌋, 1, 256).
pub fn dpsgd_batch_size(n: PublicN) -> usize {
    ((n.get() as f64).sqrt().floor() as usize).clamp(1, MAX_DPSGD_BATCH)
}

/// The rule's DP-SGD epochs for target ε: 20·max(1, ε)^0.4, at most 100 (20 up to ε = 1,
/// about 50 at ε = 10). It reads no size: the steps ⌈epochs·N/b⌉ follow the public N
/// through the batch size.
pub fn dpsgd_epochs(epsilon: f64) -> f64 {
    let e = if epsilon.is_finite() { epsilon } else { 1.0 };
    (DPSGD_EPOCHS * e.max(1.0).powf(DPSGD_EPOCHS_EXPONENT)).min(MAX_DPSGD_EPOCHS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rn(n: usize) -> PublicN {
        PublicN::new(Neighbours::ReplaceOne, n, None).unwrap()
    }

    fn inputs(method: Method) -> PublicInputs {
        PublicInputs {
            method,
            loss: Loss::Logistic,
            classes: 2,
            n: rn(455),
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
        p.n = rn(4550);
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
    fn the_rule_costs_nothing_under_either_relation() {
        use crate::{Privacy, Selection, SelectionMethod};
        let p = Privacy::new(1.0, 0.0).unwrap();
        for nb in [Neighbours::ReplaceOne, Neighbours::AddRemove] {
            let s = Selection::derive(SelectionMethod::PublicRule, p, nb).unwrap();
            assert_eq!((s.epsilon, s.delta), (Some(0.0), Some(0.0)));
            assert!(s.is_inside());
            assert_eq!(s.method.name(), "public-rule");
        }
    }

    #[test]
    fn under_add_remove_the_rule_reads_the_declared_size_only() {
        // the exact N is private under add/remove: the public size is N̂, whatever N is
        let a = PublicN::new(Neighbours::AddRemove, 300, Some(1000)).unwrap();
        let b = PublicN::new(Neighbours::AddRemove, 301, Some(1000)).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.get(), 1000);
        assert!(a.is_declared());
        for m in [
            Method::LossPerturbation,
            Method::ModelSensitivity,
            Method::PredictionSensitivity,
        ] {
            let mut p = inputs(m);
            p.n = a;
            let la = lambda(&p).unwrap();
            p.n = b;
            assert_eq!(lambda(&p).unwrap(), la, "{m}");
            p.n = rn(1000);
            assert_eq!(lambda(&p).unwrap().value, la.value, "{m}: N̂ stands for N");
            assert!(la.formula.contains("N̂ = 1000"), "{}", la.formula);
        }
        assert_eq!(teachers(a), teachers(rn(1000)));
        assert_eq!(dpsgd_batch_size(a), 31);
        // no N̂ under add/remove, or an N̂ under replace-one: no public size
        assert!(PublicN::new(Neighbours::AddRemove, 300, None).is_none());
        assert!(PublicN::new(Neighbours::AddRemove, 300, Some(0)).is_none());
        assert!(PublicN::new(Neighbours::ReplaceOne, 300, Some(300)).is_none());
        assert!(!rn(300).is_declared());
    }

    #[test]
    fn dpsgd_epochs_follow_epsilon_only() {
        assert_eq!(dpsgd_epochs(0.1), DPSGD_EPOCHS);
        assert_eq!(dpsgd_epochs(1.0), DPSGD_EPOCHS);
        assert!((dpsgd_epochs(10.0) - 20.0 * 10f64.powf(0.4)).abs() < 1e-12);
        assert!((50.0..51.0).contains(&dpsgd_epochs(10.0)));
        assert_eq!(dpsgd_epochs(1e6), MAX_DPSGD_EPOCHS);
        assert_eq!(dpsgd_epochs(f64::INFINITY), DPSGD_EPOCHS);
        let mut last = 0.0;
        for k in 0..200 {
            let e = dpsgd_epochs(0.05 * f64::from(k) + 0.01);
            assert!(e >= last && e > 0.0 && e.is_finite(), "{k}");
            last = e;
        }
    }

    #[test]
    fn sizes_follow_n_and_fit_small_tables() {
        for n in 1..5000 {
            assert!((1..=n).contains(&teachers(rn(n))), "{n}");
            assert!((1..=n).contains(&dpsgd_batch_size(rn(n))), "{n}");
        }
        assert_eq!(teachers(rn(455)), 75);
        assert_eq!(teachers(rn(5)), 1);
        assert_eq!(dpsgd_batch_size(rn(142)), 11);
        assert_eq!(teachers(rn(60_000)), MAX_TEACHERS);
        assert_eq!(dpsgd_batch_size(rn(60_000)), 244);
        assert_eq!(teachers(rn(10_000_000)), MAX_TEACHERS);
        assert_eq!(dpsgd_batch_size(rn(10_000_000)), MAX_DPSGD_BATCH);
    }
}
