//! What a calibrated method releases: the [`Mechanism`], with the parameters each variant
//! needs, and the functions that draw its release.
//!
//! Modelled on OpenDP's `Measurement` (a function together with its privacy map): a
//! [`crate::Calibration`] pairs the guarantee (the privacy map's output, [`crate::Guarantee`])
//! with the mechanism that delivers it, and the mechanism itself draws the release —
//! [`Mechanism::perturb`] adds its noise to a vector (θ, the objective's b, or the logits),
//! [`Mechanism::select`] draws a label from scores (votes or logits). Callers never match a
//! [`Noise`] to fish out σ or β: the accessors ([`Mechanism::gaussian_sigma`],
//! [`Mechanism::selection_beta`], [`Mechanism::noise_multiplier`], …) say what each variant
//! has, and a mechanism that does not release what is asked of it is an error, not a panic.

use crate::error::{CoreError, Result};
use crate::types::{Method, Noise};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Additive noise on a vector: ℓ2-Laplace (uniform direction × Gamma(dim, rate β) radius,
/// density ∝ exp(−β‖b‖₂)) or isotropic Gaussian (σ per coordinate).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "distribution", rename_all = "kebab-case")]
pub enum VectorNoise {
    /// Density ∝ exp(−β‖b‖₂).
    L2Laplace {
        /// Rate β.
        beta: f64,
    },
    /// N(0, σ²I).
    Gaussian {
        /// Standard deviation σ per coordinate.
        sigma: f64,
    },
    /// Rounded to a power-of-two grid, plus exact discrete Gaussian noise of scale σ per
    /// coordinate ([`crate::grid`]).
    DiscreteGaussian {
        /// Scale σ per coordinate.
        sigma: f64,
        /// The ℓ2 rounding allowance r (part of the calibrated sensitivity).
        rounding: f64,
    },
    /// Rounded to a power-of-two grid, plus exact ℓ2-Laplace noise on the lattice of rate β
    /// ([`crate::lattice`]).
    DiscreteL2Laplace {
        /// Rate β (value units).
        beta: f64,
        /// The ℓ2 rounding allowance r (part of the calibrated sensitivity).
        rounding: f64,
    },
}

impl From<VectorNoise> for Noise {
    fn from(v: VectorNoise) -> Noise {
        match v {
            VectorNoise::L2Laplace { beta } => Noise::L2Laplace { beta },
            VectorNoise::Gaussian { sigma } => Noise::Gaussian { sigma },
            VectorNoise::DiscreteGaussian { sigma, rounding } => {
                Noise::DiscreteGaussian { sigma, rounding }
            }
            VectorNoise::DiscreteL2Laplace { beta, rounding } => {
                Noise::DiscreteL2Laplace { beta, rounding }
            }
        }
    }
}

impl VectorNoise {
    /// The additive part of `noise` (`None` for a selection).
    pub fn of(noise: Noise) -> Option<Self> {
        match noise {
            Noise::L2Laplace { beta } => Some(VectorNoise::L2Laplace { beta }),
            Noise::Gaussian { sigma } => Some(VectorNoise::Gaussian { sigma }),
            Noise::DiscreteGaussian { sigma, rounding } => {
                Some(VectorNoise::DiscreteGaussian { sigma, rounding })
            }
            Noise::DiscreteL2Laplace { beta, rounding } => {
                Some(VectorNoise::DiscreteL2Laplace { beta, rounding })
            }
            Noise::Exponential { .. } | Noise::PermuteAndFlip { .. } => None,
        }
    }

    /// Adds one draw to `values` in place (the sampler of the equal [`Noise`]).
    pub fn add_to<R: Rng + ?Sized>(self, rng: &mut R, values: &mut [f64]) -> Result<()> {
        Noise::from(self).add_to(rng, values)
    }

    /// [`VectorNoise::add_to`] for `f32` values (noise drawn in f64, added, rounded once).
    pub fn add_to_f32<R: Rng + ?Sized>(self, rng: &mut R, values: &mut [f32]) -> Result<()> {
        Noise::from(self).add_to_f32(rng, values)
    }

    /// The noise for a sensitivity `factor` times larger (σ ∝ Δ, β ∝ 1/Δ).
    pub fn scaled(self, factor: f64) -> Self {
        match self {
            VectorNoise::L2Laplace { beta } => VectorNoise::L2Laplace {
                beta: beta / factor,
            },
            VectorNoise::Gaussian { sigma } => VectorNoise::Gaussian {
                sigma: sigma * factor,
            },
            VectorNoise::DiscreteGaussian { sigma, rounding } => VectorNoise::DiscreteGaussian {
                sigma: sigma * factor,
                rounding: rounding * factor,
            },
            VectorNoise::DiscreteL2Laplace { beta, rounding } => VectorNoise::DiscreteL2Laplace {
                beta: beta / factor,
                rounding: rounding * factor,
            },
        }
    }
}

/// The scores a selection mechanism chooses a label from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scores {
    /// The T teachers' vote counts (subsample-and-aggregate; sensitivity 1 per count).
    Votes,
    /// The model's logits θᵀx (prediction sensitivity, label only).
    Logits,
}

/// What a calibrated method releases, with the parameters each mechanism needs. The method is
/// a function of the mechanism ([`Mechanism::method`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mechanism", rename_all = "kebab-case")]
pub enum Mechanism {
    /// Model sensitivity: θ + noise, once (output perturbation).
    OutputPerturbation {
        /// The noise added to θ.
        noise: VectorNoise,
    },
    /// Loss perturbation: the minimiser of the objective with the linear term bᵀθ/N, b drawn
    /// from `noise`, and the quadratic term ρ_eff/(2N)‖θ‖² with ρ_eff = max(ρ, Nλ).
    ObjectivePerturbation {
        /// The distribution of b.
        noise: VectorNoise,
        /// ρ = 2LC/ε (before the Nλ floor); `None` only in records written before it was
        /// stored (then [`Mechanism::rho_or`] recomputes it).
        rho: Option<f64>,
    },
    /// DP-SGD: Poisson-sampled steps, per-example gradients clipped to ν, N(0, (σν)²) noise.
    DpSgd {
        /// The noise multiplier σ (gradient-noise std = σ·clip norm).
        noise_multiplier: f64,
        /// The Poisson sampling rate q = b/N (`None` in records written before it was stored).
        sampling_rate: Option<f64>,
        /// The number of noisy steps (`None` in records written before it was stored).
        steps: Option<u64>,
        /// The ε the accountant spends at σ (≤ the target).
        epsilon_spent: Option<f64>,
    },
    /// Prediction sensitivity: each answer's logits + noise.
    NoisyLogits {
        /// The noise added to each logit vector.
        noise: VectorNoise,
    },
    /// The exponential mechanism, P(y) ∝ exp(β·score_y) (McSherry & Talwar 2007).
    Exponential {
        /// Inverse temperature β.
        beta: f64,
        /// Over the votes (subsample-and-aggregate) or the logits (prediction sensitivity).
        over: Scores,
    },
    /// Permute-and-flip (McKenna & Sheldon 2020): candidates in a random order, each returned
    /// with probability exp(β·(score_y − max score)).
    PermuteAndFlip {
        /// β of the coins.
        beta: f64,
        /// Over the votes (subsample-and-aggregate) or the logits (prediction sensitivity).
        over: Scores,
    },
}

impl Mechanism {
    /// The method that releases through this mechanism.
    pub fn method(&self) -> Method {
        match self {
            Mechanism::OutputPerturbation { .. } => Method::ModelSensitivity,
            Mechanism::ObjectivePerturbation { .. } => Method::LossPerturbation,
            Mechanism::DpSgd { .. } => Method::DpSgd,
            Mechanism::NoisyLogits { .. } => Method::PredictionSensitivity,
            Mechanism::Exponential { over, .. } | Mechanism::PermuteAndFlip { over, .. } => {
                match over {
                    Scores::Votes => Method::SubsampleAggregate,
                    Scores::Logits => Method::PredictionSensitivity,
                }
            }
        }
    }

    /// The mechanism's name as printed in `calibrate --json`, result rows and `GET /v1/model`:
    /// `output-perturbation`, `objective-perturbation`, `noisy-sgd`, `noisy-logits`,
    /// `exponential-over-logits|votes`, `permute-and-flip-over-logits|votes`.
    pub fn name(&self) -> &'static str {
        match self {
            Mechanism::OutputPerturbation { .. } => "output-perturbation",
            Mechanism::ObjectivePerturbation { .. } => "objective-perturbation",
            Mechanism::DpSgd { .. } => "noisy-sgd",
            Mechanism::NoisyLogits { .. } => "noisy-logits",
            Mechanism::Exponential { over, .. } => match over {
                Scores::Votes => "exponential-over-votes",
                Scores::Logits => "exponential-over-logits",
            },
            Mechanism::PermuteAndFlip { over, .. } => match over {
                Scores::Votes => "permute-and-flip-over-votes",
                Scores::Logits => "permute-and-flip-over-logits",
            },
        }
    }

    /// The noise distribution as recorded (`"noise"` in every serialised calibration; DP-SGD's
    /// is the Gaussian with σ = the noise multiplier, i.e. for clip norm 1).
    pub fn noise(&self) -> Noise {
        match *self {
            Mechanism::OutputPerturbation { noise }
            | Mechanism::ObjectivePerturbation { noise, .. }
            | Mechanism::NoisyLogits { noise } => noise.into(),
            Mechanism::DpSgd {
                noise_multiplier, ..
            } => Noise::Gaussian {
                sigma: noise_multiplier,
            },
            Mechanism::Exponential { beta, .. } => Noise::Exponential { beta },
            Mechanism::PermuteAndFlip { beta, .. } => Noise::PermuteAndFlip { beta },
        }
    }

    /// The noise distribution's name (`l2-laplace`, `gaussian`, `exponential`,
    /// `permute-and-flip`).
    pub fn distribution_name(&self) -> &'static str {
        self.noise().distribution_name()
    }

    /// The mechanism's one noise parameter: σ for Gaussian noise (DP-SGD: the multiplier), β
    /// for ℓ2-Laplace noise and the selections.
    pub fn scale(&self) -> f64 {
        match self.noise() {
            Noise::L2Laplace { beta }
            | Noise::DiscreteL2Laplace { beta, .. }
            | Noise::Exponential { beta }
            | Noise::PermuteAndFlip { beta } => beta,
            Noise::Gaussian { sigma } | Noise::DiscreteGaussian { sigma, .. } => sigma,
        }
    }

    /// σ where the released noise is Gaussian or discrete Gaussian on a grid (for DP-SGD the
    /// noise multiplier), else `None`.
    pub fn gaussian_sigma(&self) -> Option<f64> {
        match self.noise() {
            Noise::Gaussian { sigma } | Noise::DiscreteGaussian { sigma, .. } => Some(sigma),
            _ => None,
        }
    }

    /// β of a selection mechanism (exponential or permute-and-flip), else `None`.
    pub fn selection_beta(&self) -> Option<f64> {
        match *self {
            Mechanism::Exponential { beta, .. } | Mechanism::PermuteAndFlip { beta, .. } => {
                Some(beta)
            }
            _ => None,
        }
    }

    /// β of a selection mechanism, or an error naming what this mechanism releases instead.
    pub fn require_selection_beta(&self) -> Result<f64> {
        self.selection_beta().ok_or_else(|| {
            CoreError::Unsupported(format!(
                "{} releases {} noise, not a selection with a beta",
                self.name(),
                self.distribution_name()
            ))
        })
    }

    /// DP-SGD's noise multiplier σ, else `None`.
    pub fn noise_multiplier(&self) -> Option<f64> {
        match *self {
            Mechanism::DpSgd {
                noise_multiplier, ..
            } => Some(noise_multiplier),
            _ => None,
        }
    }

    /// DP-SGD's noise multiplier σ, or an error naming the mechanism.
    pub fn require_noise_multiplier(&self) -> Result<f64> {
        self.noise_multiplier().ok_or_else(|| {
            CoreError::Unsupported(format!("{} has no DP-SGD noise multiplier", self.name()))
        })
    }

    /// DP-SGD's gradient-noise standard deviation σ·`clip` (σ the noise multiplier).
    pub fn gradient_noise_std(&self, clip: f64) -> Result<f64> {
        Ok(self.require_noise_multiplier()? * clip)
    }

    /// DP-SGD's sampling rate q, where recorded.
    pub fn sampling_rate(&self) -> Option<f64> {
        match *self {
            Mechanism::DpSgd { sampling_rate, .. } => sampling_rate,
            _ => None,
        }
    }

    /// DP-SGD's number of noisy steps, where recorded.
    pub fn steps(&self) -> Option<u64> {
        match *self {
            Mechanism::DpSgd { steps, .. } => steps,
            _ => None,
        }
    }

    /// DP-SGD's ε spent by the accountant, where recorded.
    pub fn epsilon_spent(&self) -> Option<f64> {
        match *self {
            Mechanism::DpSgd { epsilon_spent, .. } => epsilon_spent,
            _ => None,
        }
    }

    /// Loss perturbation's ρ = 2LC/ε, where recorded.
    pub fn rho(&self) -> Option<f64> {
        match *self {
            Mechanism::ObjectivePerturbation { rho, .. } => rho,
            _ => None,
        }
    }

    /// Loss perturbation's ρ, or `fallback` (2LC/ε recomputed) for a record without one.
    pub fn rho_or(&self, fallback: impl FnOnce() -> f64) -> f64 {
        self.rho().unwrap_or_else(fallback)
    }

    /// The additive noise of an output, objective or logit perturbation (`None` for DP-SGD,
    /// whose noise depends on the clip norm, and for the selections).
    pub fn vector_noise(&self) -> Option<VectorNoise> {
        match *self {
            Mechanism::OutputPerturbation { noise }
            | Mechanism::ObjectivePerturbation { noise, .. }
            | Mechanism::NoisyLogits { noise } => Some(noise),
            _ => None,
        }
    }

    /// Whether the release is a label drawn by a selection (exponential mechanism or
    /// permute-and-flip), never a score vector.
    pub fn is_selection(&self) -> bool {
        self.selection_beta().is_some()
    }

    fn require_vector_noise(&self) -> Result<VectorNoise> {
        self.vector_noise().ok_or_else(|| {
            CoreError::Unsupported(format!(
                "{} is not an additive perturbation of a vector",
                self.name()
            ))
        })
    }

    /// Draws this perturbation's noise and adds it to `values` in place: θ (output
    /// perturbation), b (objective perturbation) or the logits (noisy logits). An error for
    /// DP-SGD ([`Mechanism::gradient_noise_std`]) and the selections ([`Mechanism::select`]).
    pub fn perturb<R: Rng + ?Sized>(&self, rng: &mut R, values: &mut [f64]) -> Result<()> {
        self.require_vector_noise()?.add_to(rng, values)
    }

    /// [`Mechanism::perturb`] for `f32` values (noise drawn in f64, added, rounded once).
    pub fn perturb_f32<R: Rng + ?Sized>(&self, rng: &mut R, values: &mut [f32]) -> Result<()> {
        self.require_vector_noise()?.add_to_f32(rng, values)
    }

    /// One draw of this selection over `scores` (the index of the selected label). An error
    /// for the additive mechanisms.
    pub fn select<R: Rng + ?Sized, T: Copy + Into<f64>>(
        &self,
        rng: &mut R,
        scores: &[T],
    ) -> Result<usize> {
        self.require_selection_beta()?;
        self.noise().select(rng, scores)
    }

    /// The exact output distribution of this selection over `scores`.
    pub fn selection_probabilities<T: Copy + Into<f64>>(&self, scores: &[T]) -> Result<Vec<f64>> {
        self.require_selection_beta()?;
        self.noise().selection_probabilities(scores)
    }

    /// The same mechanism for a sensitivity `factor` times larger (σ ∝ Δ, β ∝ 1/Δ). DP-SGD,
    /// whose σ is set by an accountant, is returned unchanged.
    pub fn scaled(self, factor: f64) -> Self {
        match self {
            Mechanism::OutputPerturbation { noise } => Mechanism::OutputPerturbation {
                noise: noise.scaled(factor),
            },
            Mechanism::ObjectivePerturbation { noise, rho } => Mechanism::ObjectivePerturbation {
                noise: noise.scaled(factor),
                rho,
            },
            Mechanism::NoisyLogits { noise } => Mechanism::NoisyLogits {
                noise: noise.scaled(factor),
            },
            Mechanism::Exponential { beta, over } => Mechanism::Exponential {
                beta: beta / factor,
                over,
            },
            Mechanism::PermuteAndFlip { beta, over } => Mechanism::PermuteAndFlip {
                beta: beta / factor,
                over,
            },
            d @ Mechanism::DpSgd { .. } => d,
        }
    }

    /// The selection over `over` that `noise` names (`noise` must be a selection).
    pub fn selection(noise: Noise, over: Scores) -> Result<Self> {
        match noise {
            Noise::Exponential { beta } => Ok(Mechanism::Exponential { beta, over }),
            Noise::PermuteAndFlip { beta } => Ok(Mechanism::PermuteAndFlip { beta, over }),
            other => Err(CoreError::Unsupported(format!(
                "{} noise is additive, not a selection",
                other.distribution_name()
            ))),
        }
    }

    /// The mechanism of a serialised calibration: `method`'s release under `noise`, with the
    /// per-method statistics of the record (loss perturbation's ρ, DP-SGD's multiplier,
    /// sampling rate, steps and ε spent). An error for a noise the method does not release.
    pub fn from_record(method: Method, noise: Noise, extra: RecordExtras) -> Result<Self> {
        let additive = VectorNoise::of(noise);
        let mismatch = || {
            CoreError::invalid(
                "noise",
                noise.to_string(),
                format!("not the noise {method}'s calibration uses"),
            )
        };
        Ok(match method {
            Method::ModelSensitivity => Mechanism::OutputPerturbation {
                noise: additive.ok_or_else(mismatch)?,
            },
            Method::LossPerturbation => Mechanism::ObjectivePerturbation {
                noise: additive.ok_or_else(mismatch)?,
                rho: extra.rho,
            },
            Method::DpSgd => match noise {
                Noise::Gaussian { sigma } => Mechanism::DpSgd {
                    noise_multiplier: extra.noise_multiplier.unwrap_or(sigma),
                    sampling_rate: extra.sampling_rate,
                    steps: extra.steps,
                    epsilon_spent: extra.epsilon_spent,
                },
                _ => return Err(mismatch()),
            },
            Method::PredictionSensitivity => match additive {
                Some(noise) => Mechanism::NoisyLogits { noise },
                None => Mechanism::selection(noise, Scores::Logits)?,
            },
            Method::SubsampleAggregate => {
                Mechanism::selection(noise, Scores::Votes).map_err(|_| mismatch())?
            }
        })
    }

    /// The per-method statistics a serialised calibration records beside its noise.
    pub fn record_extras(&self) -> RecordExtras {
        RecordExtras {
            rho: self.rho(),
            noise_multiplier: self.noise_multiplier(),
            epsilon_spent: self.epsilon_spent(),
            sampling_rate: self.sampling_rate(),
            steps: self.steps(),
        }
    }
}

/// The optional per-method statistics of a serialised calibration (its `rho`,
/// `noise_multiplier`, `epsilon_spent`, `sampling_rate` and `steps` keys).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RecordExtras {
    /// Loss perturbation's ρ.
    pub rho: Option<f64>,
    /// DP-SGD's noise multiplier.
    pub noise_multiplier: Option<f64>,
    /// DP-SGD's ε spent.
    pub epsilon_spent: Option<f64>,
    /// DP-SGD's sampling rate.
    pub sampling_rate: Option<f64>,
    /// DP-SGD's number of steps.
    pub steps: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::seeded_rng;

    #[test]
    fn accessors_say_what_each_variant_has() {
        let g = Mechanism::NoisyLogits {
            noise: VectorNoise::Gaussian { sigma: 2.0 },
        };
        assert_eq!(g.gaussian_sigma(), Some(2.0));
        assert_eq!(g.selection_beta(), None);
        assert!(g.require_selection_beta().is_err() && g.require_noise_multiplier().is_err());
        assert_eq!(g.method(), Method::PredictionSensitivity);
        let s = Mechanism::PermuteAndFlip {
            beta: 0.5,
            over: Scores::Votes,
        };
        assert_eq!(s.selection_beta(), Some(0.5));
        assert_eq!(s.method(), Method::SubsampleAggregate);
        assert_eq!(s.name(), "permute-and-flip-over-votes");
        assert!(s.is_selection() && s.perturb(&mut seeded_rng(1), &mut [0.0; 3]).is_err());
        let d = Mechanism::DpSgd {
            noise_multiplier: 1.5,
            sampling_rate: Some(0.01),
            steps: Some(100),
            epsilon_spent: Some(0.9),
        };
        assert_eq!(d.gradient_noise_std(2.0).unwrap(), 3.0);
        assert_eq!(d.gaussian_sigma(), Some(1.5));
        assert!(d.perturb(&mut seeded_rng(1), &mut [0.0; 3]).is_err());
        assert!(g.select(&mut seeded_rng(1), &[1.0, 2.0]).is_err());
    }

    #[test]
    fn sampling_goes_through_the_noise_samplers() {
        // the same seeded draw as the `Noise` samplers: a behaviour-preserving wrapper
        let m = Mechanism::OutputPerturbation {
            noise: VectorNoise::L2Laplace { beta: 3.0 },
        };
        let mut a = vec![0.5; 7];
        let mut b = a.clone();
        m.perturb(&mut seeded_rng(9), &mut a).unwrap();
        Noise::L2Laplace { beta: 3.0 }
            .add_to(&mut seeded_rng(9), &mut b)
            .unwrap();
        assert_eq!(a, b);
        let sel = Mechanism::Exponential {
            beta: 1.0,
            over: Scores::Logits,
        };
        let scores = [0.1, 2.0, -1.0];
        assert_eq!(
            sel.select(&mut seeded_rng(4), &scores).unwrap(),
            Noise::Exponential { beta: 1.0 }
                .select(&mut seeded_rng(4), &scores)
                .unwrap()
        );
    }

    #[test]
    fn a_record_with_another_method_s_noise_is_refused() {
        let e = Mechanism::from_record(
            Method::ModelSensitivity,
            Noise::Exponential { beta: 1.0 },
            RecordExtras::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("not the noise"), "{e}");
        assert!(
            Mechanism::from_record(
                Method::SubsampleAggregate,
                Noise::Gaussian { sigma: 1.0 },
                RecordExtras::default()
            )
            .is_err()
        );
        assert!(
            Mechanism::from_record(
                Method::DpSgd,
                Noise::L2Laplace { beta: 1.0 },
                RecordExtras::default()
            )
            .is_err()
        );
    }
}
