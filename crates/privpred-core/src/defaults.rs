//! The defaults of SPEC §6 in one place: the CLI, the study, the linear methods and the ResNet
//! engines read them from here (issue #17), so a default changes in exactly one line.

/// Subsample-and-aggregate teachers T for linear models (SPEC §6).
pub const LINEAR_TEACHERS: usize = 256;
/// Linear DP-SGD: expected batch size b (SPEC §6).
pub const LINEAR_DPSGD_BATCH_SIZE: usize = 256;
/// Linear DP-SGD: epochs (SPEC §6).
pub const LINEAR_DPSGD_EPOCHS: f64 = 20.0;
/// Linear DP-SGD: initial learning rate (SPEC §6).
pub const LINEAR_DPSGD_LEARNING_RATE: f64 = 1.0;
/// Fraction of the training set held out to cross-validate λ or the clip ν (SPEC §6).
pub const HOLDOUT_FRACTION: f64 = 0.1;
/// Inference budget B of `train` when none is given.
pub const BUDGET: u64 = 100;

/// Subsample-and-aggregate teachers T for ResNets (SPEC §6, figure 7).
pub const RESNET_TEACHERS: usize = 16;
/// ResNet training: batch size (SPEC §6).
pub const RESNET_BATCH_SIZE: usize = 600;
/// ResNet training: initial learning rate, divided by 10 three times (SPEC §6).
pub const RESNET_LEARNING_RATE: f64 = 0.1;
/// ResNet DP-SGD: epochs (SPEC §6).
pub const RESNET_DPSGD_EPOCHS: f64 = 100.0;
/// ResNet subsample-and-aggregate: epochs per teacher (SPEC §6).
pub const RESNET_TEACHER_EPOCHS: f64 = 500.0;
/// ResNet DP-SGD: clip ν (SPEC §6).
pub const RESNET_CLIP: f64 = 1.0;
