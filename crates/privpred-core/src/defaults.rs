//! The defaults of docs/study.md in one place: the CLI, the study, the linear methods and the ResNet
//! engines read them from here, so a default changes in exactly one line.

/// Subsample-and-aggregate teachers T for linear models (docs/study.md).
pub const LINEAR_TEACHERS: usize = 256;
/// Linear DP-SGD: expected batch size b (docs/study.md).
pub const LINEAR_DPSGD_BATCH_SIZE: usize = 256;
/// Linear DP-SGD: epochs (docs/study.md).
pub const LINEAR_DPSGD_EPOCHS: f64 = 20.0;
/// Linear DP-SGD: initial learning rate (docs/study.md).
pub const LINEAR_DPSGD_LEARNING_RATE: f64 = 1.0;
/// Fraction of the training set held out to cross-validate λ or the clip ν (docs/study.md).
pub const HOLDOUT_FRACTION: f64 = 0.1;
/// Inference budget B of `train` when none is given.
pub const BUDGET: u64 = 100;

/// Subsample-and-aggregate teachers T for ResNets (docs/study.md, figure 7).
pub const RESNET_TEACHERS: usize = 16;
/// ResNet training: batch size (docs/study.md).
pub const RESNET_BATCH_SIZE: usize = 600;
/// ResNet training: initial learning rate, divided by 10 three times (docs/study.md).
pub const RESNET_LEARNING_RATE: f64 = 0.1;
/// ResNet DP-SGD: epochs (docs/study.md).
pub const RESNET_DPSGD_EPOCHS: f64 = 100.0;
/// ResNet subsample-and-aggregate: epochs per teacher (docs/study.md).
pub const RESNET_TEACHER_EPOCHS: f64 = 500.0;
/// ResNet DP-SGD: clip ν (docs/study.md).
pub const RESNET_CLIP: f64 = 1.0;

/// L2 strength λ of a linear method before cross-validation (docs/study.md's grid holds it).
pub const LINEAR_LAMBDA: f64 = 1e-4;
/// The public λ a private linear method trains with when none is given: fixed without the
/// data, so its selection costs nothing (docs/selection.md measures it against the private
/// selection and the paper's non-private one at equal total ε).
pub const LINEAR_PUBLIC_LAMBDA: f64 = 1e-2;
/// Subsample-and-aggregate: the teachers' λ (the paper trains them without L2, docs/study.md).
pub const LINEAR_TEACHER_LAMBDA: f64 = 0.0;
/// Linear DP-SGD: heavy-ball momentum.
pub const LINEAR_DPSGD_MOMENTUM: f64 = 0.9;
/// Linear DP-SGD: clip ν of a configuration before cross-validation (docs/study.md's grid holds it).
pub const LINEAR_DPSGD_CLIP: f64 = 0.1;
/// Linear DP-SGD epochs of the study's `--quick` scale.
pub const LINEAR_DPSGD_EPOCHS_QUICK: f64 = 5.0;
/// The study's `--quick` cap on training examples.
pub const QUICK_MAX_TRAIN: usize = 5_000;
/// The study's `--quick` cap on test examples.
pub const QUICK_MAX_TEST: usize = 2_000;
/// Experiment seed of a configuration before one is chosen.
pub const SEED: u64 = 0;

/// ResNet training: times the learning rate is divided by 10, at equal intervals (docs/study.md).
pub const RESNET_LR_DROPS: usize = 3;
/// ResNet training: momentum μ (docs/study.md, no Nesterov).
pub const RESNET_MOMENTUM: f64 = 0.9;
/// ResNet training: L2 weight decay (the teachers train without L2, docs/study.md).
pub const RESNET_WEIGHT_DECAY: f64 = 0.0;
