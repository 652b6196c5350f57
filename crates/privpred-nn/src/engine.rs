//! Gradient engines: what computes a batch's (clipped) gradient sum and the batched logits.
//!
//! The training loops of [`crate::train`] — batching, Poisson sampling, augmentation seeds,
//! Gaussian noise, the momentum optimiser, the learning-rate schedule — and the accountant are
//! the same for every engine; only the gradient oracle
//! ([`GradientEngine::batch_gradient`]) and the batched forward pass
//! ([`GradientEngine::predict_logits`]) move. Every engine reads the flat parameter vector laid
//! out as `ResNet::tensors` and the inputs prepared on the CPU by the same
//! [`crate::data::prepare_image`] code, so artifacts, initialisation and the optimiser are
//! shared.
//!
//! - [`CpuEngine`]: privpred-nn's own engine (rayon + `gemm`, exact per-example backward).
//! - `TorchEngine` (feature `torch`, module `torch`): libtorch through `tch`, on CUDA when a
//!   GPU is present and on the CPU otherwise.
//!
//! Choose with [`from_choice`]: an explicit name, else `$PRIVPRED_NN_ENGINE`, else `torch` when
//! the feature is compiled in and a CUDA device is present, `cpu` otherwise.

use crate::error::{NnError, Result};

pub use crate::gradient::{CpuEngine, DEVICE_ENV, GradientEngine, GroupJob};

/// Environment variable naming the default engine (`cpu` or `torch`).
pub const ENGINE_ENV: &str = "PRIVPRED_NN_ENGINE";

/// Environment variable that decides whether subsample-and-aggregate's teachers train
/// together, in lock step (`1`), or one after another (`0`); unset or empty: together when
/// the engine computes a group's gradients in one pass ([`GradientEngine::groups_together`]).
/// Either way each teacher takes exactly the same steps (its own shard, shuffles and
/// augmentation); only the engine's arithmetic is grouped.
pub const TEACHERS_TOGETHER_ENV: &str = "PRIVPRED_TEACHERS_TOGETHER";

/// Whether teachers train together on `engine`: `$PRIVPRED_TEACHERS_TOGETHER` when set
/// (`0` or `1`), else [`GradientEngine::groups_together`].
pub fn teachers_together(engine: &dyn GradientEngine) -> Result<bool> {
    match std::env::var(TEACHERS_TOGETHER_ENV) {
        Ok(v) if !v.trim().is_empty() => match v.trim() {
            "1" => Ok(true),
            "0" => Ok(false),
            other => Err(NnError::invalid(
                TEACHERS_TOGETHER_ENV,
                other,
                "must be `1` (teachers in lock step) or `0` (one after another)",
            )),
        },
        _ => Ok(engine.groups_together()),
    }
}

/// How to get a build with the torch engine (for error messages).
pub const TORCH_BUILD_HINT: &str = "this build has no libtorch engine: run `bash scripts/install_torch.sh`, `source scripts/torch_env.sh`, then rebuild with `cargo build --release -p privpred --features torch`";

/// The engines a build can offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// [`CpuEngine`].
    Cpu,
    /// The libtorch engine (feature `torch`).
    Torch,
}

impl EngineKind {
    /// `torch` when this build has the torch engine **and** a CUDA device is visible (or
    /// `$PRIVPRED_DEVICE` names one), `cpu` otherwise: on the CPU privpred-nn's own engine is
    /// the faster one for DP-SGD (exact per-example backward; libtorch materialises the batch ×
    /// parameters gradient matrix — ≈ 2× slower per DP-SGD batch in `nn-bench`).
    pub fn build_default() -> Self {
        #[cfg(feature = "torch")]
        {
            let asks_cuda = std::env::var(DEVICE_ENV)
                .map(|v| v.trim().starts_with("cuda"))
                .unwrap_or(false);
            if asks_cuda || tch::Cuda::is_available() {
                return EngineKind::Torch;
            }
        }
        EngineKind::Cpu
    }

    /// The name as the CLI spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Cpu => "cpu",
            EngineKind::Torch => "torch",
        }
    }
}

impl std::str::FromStr for EngineKind {
    type Err = NnError;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "cpu" => Ok(EngineKind::Cpu),
            "torch" => Ok(EngineKind::Torch),
            other => Err(NnError::invalid(
                "engine",
                other,
                "must be `cpu` (privpred-nn's own) or `torch` (libtorch: CUDA when present, CPU otherwise)",
            )),
        }
    }
}

/// The engine kind for an optional explicit choice: `arg`, else `$PRIVPRED_NN_ENGINE` (when
/// set and non-empty), else [`EngineKind::build_default`].
pub fn resolve_kind(arg: Option<&str>) -> Result<EngineKind> {
    if let Some(a) = arg {
        return a.parse();
    }
    match std::env::var(ENGINE_ENV) {
        Ok(v) if !v.trim().is_empty() => v
            .parse()
            .map_err(|_| NnError::invalid(ENGINE_ENV, v.trim(), "must be `cpu` or `torch`")),
        _ => Ok(EngineKind::build_default()),
    }
}

/// Creates an engine of `kind`; the torch engine picks its device from `$PRIVPRED_DEVICE`
/// (default: CUDA when available, else CPU). Asking for `torch` in a build without the
/// feature is an [`NnError::InvalidArgument`] naming the build command.
pub fn create(kind: EngineKind) -> Result<Box<dyn GradientEngine>> {
    match kind {
        EngineKind::Cpu => Ok(Box::new(CpuEngine)),
        #[cfg(feature = "torch")]
        EngineKind::Torch => Ok(Box::new(crate::torch::TorchEngine::from_env()?)),
        #[cfg(not(feature = "torch"))]
        EngineKind::Torch => Err(NnError::invalid("engine", "torch", TORCH_BUILD_HINT)),
    }
}

/// [`resolve_kind`] then [`create`].
pub fn from_choice(arg: Option<&str>) -> Result<Box<dyn GradientEngine>> {
    create(resolve_kind(arg)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_names_parse_and_unknown_ones_are_refused() {
        assert_eq!("cpu".parse::<EngineKind>().unwrap(), EngineKind::Cpu);
        assert_eq!("torch".parse::<EngineKind>().unwrap(), EngineKind::Torch);
        let e = "cuda".parse::<EngineKind>().unwrap_err().to_string();
        assert!(e.contains("cpu") && e.contains("torch"), "{e}");
        assert_eq!(resolve_kind(Some("cpu")).unwrap(), EngineKind::Cpu);
        assert_eq!(create(EngineKind::Cpu).unwrap().name(), "cpu");
    }

    #[cfg(not(feature = "torch"))]
    #[test]
    fn asking_for_torch_without_the_feature_names_the_build_command() {
        let e = create(EngineKind::Torch).err().expect("no torch engine");
        let msg = e.to_string();
        assert!(msg.contains("--features torch"), "{msg}");
        assert!(matches!(e, NnError::InvalidArgument { .. }));
        assert_eq!(EngineKind::build_default(), EngineKind::Cpu);
    }
}
