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

/// Which of a linear training run's knobs the caller set (rather than left to the library's
/// defaults), for [`check_knobs`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GivenKnobs {
    /// λ (a value, or a selection).
    pub lambda: bool,
    /// DP-SGD's clip (a value, or a selection).
    pub clip: bool,
    /// Subsample-and-aggregate's teacher count.
    pub teachers: bool,
    /// DP-SGD's batch size.
    pub batch_size: bool,
    /// DP-SGD's epochs.
    pub epochs: bool,
    /// DP-SGD's learning rate.
    pub learning_rate: bool,
    /// The inference budget B (the command line's `--budget` has a default value, so it
    /// never reports it given).
    pub budget: bool,
}

/// Refuses, by name, a knob the linear method (`None`: the non-private reference) would
/// ignore: λ with DP-SGD (it trains without L2 regularisation), the clip and DP-SGD's
/// schedule with any other method, the teacher count with any method but
/// subsample-and-aggregate, the inference budget with a method whose answers spend none.
/// The message names the command-line flag (`--clip`), which the Python bindings word as
/// their parameter; the caller adds the exit code or exception.
pub fn check_knobs(method: Option<Method>, given: GivenKnobs) -> Result<(), String> {
    let name = method.map_or("non-private", |m| m.name());
    if method == Some(Method::DpSgd) && given.lambda {
        return Err("--lambda does not apply to dp-sgd: linear DP-SGD trains without L2 regularisation (lambda = 0), so a value, `private` or `cv` would be ignored; drop --lambda (its knob is --clip)".into());
    }
    if method != Some(Method::DpSgd) && given.clip {
        return Err(format!(
            "--clip does not apply to {name}: the per-example clip norm is DP-SGD's (method dp-sgd only); {name} bounds each example by the unit ball instead; drop --clip"
        ));
    }
    if method != Some(Method::SubsampleAggregate) && given.teachers {
        return Err(format!(
            "--teachers does not apply to {name}: the number of teachers is subsample-and-aggregate's (method subsample-aggregate only); drop --teachers"
        ));
    }
    if !matches!(
        method,
        Some(Method::PredictionSensitivity | Method::SubsampleAggregate)
    ) && given.budget
    {
        return Err(format!(
            "--budget does not apply to {name}: the inference budget B is spent by the answers of prediction-sensitivity and subsample-aggregate only; {name}'s answers spend nothing; drop --budget"
        ));
    }
    let schedule = [
        (given.batch_size, "--batch-size"),
        (given.epochs, "--epochs"),
        (given.learning_rate, "--learning-rate"),
    ];
    if method != Some(Method::DpSgd)
        && let Some((_, flag)) = schedule.iter().find(|(g, _)| *g)
    {
        return Err(format!(
            "{flag} does not apply to {name}: the batch size, epochs and learning rate are DP-SGD's schedule (method dp-sgd only); {name} is trained to its optimum on the whole training set; drop {flag}"
        ));
    }
    Ok(())
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
    fn a_knob_the_method_ignores_is_refused_by_name() {
        let none = GivenKnobs::default();
        for m in [None, Some(Method::ModelSensitivity), Some(Method::DpSgd)] {
            assert_eq!(check_knobs(m, none), Ok(()));
        }
        let clip = GivenKnobs { clip: true, ..none };
        assert_eq!(check_knobs(Some(Method::DpSgd), clip), Ok(()));
        for m in [
            None,
            Some(Method::ModelSensitivity),
            Some(Method::LossPerturbation),
            Some(Method::PredictionSensitivity),
            Some(Method::SubsampleAggregate),
        ] {
            let e = check_knobs(m, clip).unwrap_err();
            assert!(
                e.starts_with("--clip does not apply to") && e.contains("dp-sgd only"),
                "{e}"
            );
        }
        let lambda = GivenKnobs {
            lambda: true,
            ..none
        };
        assert!(check_knobs(Some(Method::DpSgd), lambda).is_err());
        assert_eq!(
            check_knobs(Some(Method::SubsampleAggregate), lambda),
            Ok(())
        );
        let budget = GivenKnobs {
            budget: true,
            ..none
        };
        assert_eq!(
            check_knobs(Some(Method::PredictionSensitivity), budget),
            Ok(())
        );
        assert_eq!(
            check_knobs(Some(Method::SubsampleAggregate), budget),
            Ok(())
        );
        let e = check_knobs(Some(Method::ModelSensitivity), budget).unwrap_err();
        assert!(
            e.starts_with("--budget does not apply to model-sensitivity"),
            "{e}"
        );
        let teachers = GivenKnobs {
            teachers: true,
            ..none
        };
        assert_eq!(
            check_knobs(Some(Method::SubsampleAggregate), teachers),
            Ok(())
        );
        let e = check_knobs(Some(Method::DpSgd), teachers).unwrap_err();
        assert!(e.starts_with("--teachers does not apply to dp-sgd"), "{e}");
        for (given, flag) in [
            (
                GivenKnobs {
                    batch_size: true,
                    ..none
                },
                "--batch-size",
            ),
            (
                GivenKnobs {
                    epochs: true,
                    ..none
                },
                "--epochs",
            ),
            (
                GivenKnobs {
                    learning_rate: true,
                    ..none
                },
                "--learning-rate",
            ),
        ] {
            assert_eq!(check_knobs(Some(Method::DpSgd), given), Ok(()));
            let e = check_knobs(Some(Method::LossPerturbation), given).unwrap_err();
            assert!(
                e.starts_with(&format!("{flag} does not apply to loss-perturbation")),
                "{e}"
            );
        }
    }

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
