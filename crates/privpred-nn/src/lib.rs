//! # privpred-nn
//!
//! Deep models for private prediction (docs/study.md–7, figure 7): ResNet-20 with GroupNorm on
//! CIFAR-10, trained with DP-SGD (Poisson sampling, joint per-example clipping) or as T = 16
//! subsample-and-aggregate teachers. The default engine is a small purpose-built CPU engine on
//! the `gemm` crate with hand-written backward passes, which makes exact per-example gradients
//! free (see the crate README for the measurements behind the choice); with the feature
//! `torch` a libtorch engine (`torch::TorchEngine`) runs the same training code on CUDA when
//! present and on the CPU otherwise (see [`engine`]).

pub mod artifact;
pub mod calib;
pub mod data;
pub mod engine;
pub mod error;
pub mod gradient;
pub mod ops;
pub mod params;
pub mod resnet;
pub mod resume;
pub mod teachers;
#[cfg(feature = "torch")]
pub mod torch;
pub mod train;

pub use engine::{CpuEngine, EngineKind, GradientEngine};
pub use error::{NnError, Result};
pub use resnet::{InitScheme, ResNet, ResNetConfig, Tape, TensorInfo};
