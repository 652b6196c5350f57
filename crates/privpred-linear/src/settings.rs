//! The one training entry of the linear methods: what a caller (the CLI's `train`, the
//! Python estimator) states of a run, with the library's defaults for what it leaves out —
//! the public rule's λ, teacher count and DP-SGD batch for the public size (N, or the declared
//! N̂ under add-remove neighbours, where N is not public), DP-SGD's epochs, learning rate and clip,
//! the teachers' and the student's λ — turned into one [`TrainParams`].

use crate::methods::SeedPolicy;
use crate::params::TrainParams;
use privpred_core::public_rule::PublicN;
use privpred_core::{Budget, CalibrationMode, Loss, Method, Neighbours, Privacy, defaults};

/// The teacher count T: the public rule's for the public size
/// ([`privpred_core::public_rule::teachers`]; N, or N̂ under add-remove).
pub fn default_teachers(neighbours: Neighbours, n: usize, public_n: Option<usize>) -> usize {
    PublicN::new(neighbours, n, public_n).map_or(
        defaults::LINEAR_TEACHERS,
        privpred_core::public_rule::teachers,
    )
}

/// The DP-SGD batch size: the public rule's for the public size
/// ([`privpred_core::public_rule::dpsgd_batch_size`]; N, or N̂ under add-remove).
pub fn default_batch_size(neighbours: Neighbours, n: usize, public_n: Option<usize>) -> usize {
    PublicN::new(neighbours, n, public_n).map_or(
        defaults::LINEAR_DPSGD_BATCH_SIZE,
        privpred_core::public_rule::dpsgd_batch_size,
    )
}

/// DP-SGD's epochs when none are given: the public rule's for the target ε
/// ([`privpred_core::public_rule::dpsgd_epochs`]; it reads no size, so under either relation).
pub fn default_epochs(privacy: Privacy) -> f64 {
    privpred_core::public_rule::dpsgd_epochs(privacy.epsilon())
}

/// DP-SGD's clip when none is given or selected: the public rule's
/// ([`privpred_core::public_rule::DPSGD_CLIP`]; it reads no size, so under either relation).
pub fn default_clip() -> f64 {
    privpred_core::public_rule::DPSGD_CLIP
}

/// The clip a DP-SGD selection starts from (the candidates are then tried on a hold-out).
pub const SELECTION_CLIP: f64 = defaults::LINEAR_DPSGD_CLIP;

/// How DP-SGD's clip is set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClipChoice {
    /// The caller's value.
    Given(f64),
    /// [`default_clip`].
    Default,
    /// Left unset: a selection chooses it later.
    Selected,
}

/// What a caller states of one linear private training run; `None` is the library's default.
#[derive(Debug, Clone)]
pub struct MethodSettings {
    /// The method.
    pub method: Method,
    /// The calibration mode.
    pub mode: CalibrationMode,
    /// (ε, δ).
    pub privacy: Privacy,
    /// The inference budget B (private-prediction methods).
    pub budget: Budget,
    /// The neighbouring relation.
    pub neighbours: Neighbours,
    /// The declared public training-set size under add-remove.
    pub public_n: Option<usize>,
    /// The loss.
    pub loss: Loss,
    /// How the run's noise is seeded.
    pub seed_policy: SeedPolicy,
    /// Subsample-and-aggregate: T (default [`default_teachers`]).
    pub teachers: Option<usize>,
    /// DP-SGD: the batch size (default [`default_batch_size`]).
    pub batch_size: Option<usize>,
    /// DP-SGD: epochs (default [`default_epochs`]).
    pub epochs: Option<f64>,
    /// DP-SGD: the learning rate (default [`defaults::LINEAR_DPSGD_LEARNING_RATE`]).
    pub learning_rate: Option<f64>,
    /// DP-SGD: the clip.
    pub clip: ClipChoice,
}

impl MethodSettings {
    /// The method's parameters for λ = `lambda` (subsample-and-aggregate: the teachers' λ,
    /// the student's the library's) and N = `n` training rows, unchecked:
    /// [`TrainParams::check_for`] validates them.
    pub fn params(&self, lambda: f64, n: usize) -> TrainParams {
        let (own, teacher) = if self.method == Method::SubsampleAggregate {
            (defaults::LINEAR_LAMBDA, lambda)
        } else {
            (lambda, defaults::LINEAR_TEACHER_LAMBDA)
        };
        let p = TrainParams::new(self.method, self.mode, self.privacy, self.budget)
            .neighbours(self.neighbours)
            .public_n(self.public_n)
            .loss(self.loss)
            .lambda(own)
            .teacher_lambda(teacher)
            .teachers(
                self.teachers
                    .unwrap_or_else(|| default_teachers(self.neighbours, n, self.public_n)),
            )
            .seed_policy(self.seed_policy)
            .batch_size(
                self.batch_size
                    .unwrap_or_else(|| default_batch_size(self.neighbours, n, self.public_n)),
            )
            .epochs(self.epochs.unwrap_or_else(|| default_epochs(self.privacy)))
            .learning_rate(
                self.learning_rate
                    .unwrap_or(defaults::LINEAR_DPSGD_LEARNING_RATE),
            );
        match self.clip {
            ClipChoice::Given(c) => p.clip(c),
            ClipChoice::Default => p.clip(default_clip()),
            ClipChoice::Selected => p.without_clip(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_values_are_the_librarys_defaults() {
        let s = MethodSettings {
            method: Method::SubsampleAggregate,
            mode: CalibrationMode::Corrected,
            privacy: Privacy::new(1.0, 0.0).unwrap(),
            budget: Budget::finite(10).unwrap(),
            neighbours: Neighbours::ReplaceOne,
            public_n: None,
            loss: Loss::default(),
            seed_policy: SeedPolicy::OsRandom,
            teachers: None,
            batch_size: None,
            epochs: None,
            learning_rate: None,
            clip: ClipChoice::Default,
        };
        use privpred_core::ParamGuard;
        let cfg = s.params(0.5, 1000).check().unwrap();
        let public = |n| PublicN::new(Neighbours::ReplaceOne, n, None).unwrap();
        assert_eq!(
            cfg.teachers(),
            privpred_core::public_rule::teachers(public(1000))
        );
        let given = MethodSettings {
            teachers: Some(7),
            ..s.clone()
        };
        assert_eq!(given.params(0.5, 1000).check().unwrap().teachers(), 7);
        // under add-remove the rule reads the declared N̂, never the exact N
        assert_eq!(
            default_teachers(Neighbours::AddRemove, 1000, Some(5000)),
            default_teachers(Neighbours::AddRemove, 300, Some(5000))
        );
        assert_eq!(
            default_batch_size(Neighbours::AddRemove, 1000, Some(5000)),
            privpred_core::public_rule::dpsgd_batch_size(public(5000))
        );
        assert_eq!(
            default_teachers(Neighbours::AddRemove, 1000, None),
            defaults::LINEAR_TEACHERS
        );
        assert_eq!(default_clip(), privpred_core::public_rule::DPSGD_CLIP);
        // DP-SGD's epochs follow ε by the rule unless given
        let dp = |eps: f64, epochs| MethodSettings {
            method: Method::DpSgd,
            privacy: Privacy::new(eps, 1e-5).unwrap(),
            epochs,
            ..s.clone()
        };
        let epochs = |m: MethodSettings| m.params(0.5, 1000).check().unwrap().dp_sgd().epochs;
        assert_eq!(
            epochs(dp(1.0, None)),
            privpred_core::public_rule::dpsgd_epochs(1.0)
        );
        assert_eq!(
            epochs(dp(10.0, None)),
            privpred_core::public_rule::dpsgd_epochs(10.0)
        );
        assert_eq!(epochs(dp(10.0, Some(3.0))), 3.0);
    }
}
