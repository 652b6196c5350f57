//! A trained private predictor ([`PrivatePredictor`]): the guarantee, the method's record
//! ([`MethodParams`]) and the weights ([`PredictorKind`]), answering validated queries.

use super::config::SeedPolicy;
use super::prediction_sensitivity::{self, prediction_sensitivity_labels};
use super::subsample_aggregate;
use super::teachers::Teachers;
use crate::dpsgd::DpSgdStats;
use crate::error::{LinearError, Result};
use crate::model::{LinearModel, argmax};
use crate::train::{self, Optimization};
use privpred_core::{Answer, Calibration, Method};
use privpred_data::Dataset;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// What a private predictor holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum PredictorKind {
    /// A privately trained model (model sensitivity, loss perturbation, DP-SGD): public,
    /// answers are deterministic.
    Released {
        /// The private model.
        model: LinearModel,
    },
    /// Prediction sensitivity: the non-private θ*, kept secret; every answer adds noise.
    NoisyLogits {
        /// The non-private model.
        model: LinearModel,
    },
    /// Subsample-and-aggregate: T teachers, kept secret; every answer is an exponential-
    /// mechanism draw over their votes.
    Teachers {
        /// The teachers.
        teachers: Teachers,
    },
}

/// What a predictor records of its method's hyper-parameters and training run (the
/// per-method part of the guarantee's provenance).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MethodParams {
    /// Model sensitivity, loss perturbation, prediction sensitivity.
    Regularised {
        /// λ used for training.
        lambda: f64,
        /// The certificate of the released fit (SPEC erratum 4.8): ‖∇J(θ̂)‖₂ and the bound γ
        /// the guarantee assumed, in `corrected`/`tight`; `None` in `paper`.
        optimization: Option<Optimization>,
    },
    /// DP-SGD.
    DpSgd {
        /// The clip ν.
        clip: f64,
        /// The run's statistics.
        stats: DpSgdStats,
    },
    /// Subsample-and-aggregate.
    Teachers {
        /// Number of teachers T.
        teachers: usize,
        /// The teachers' λ.
        lambda: f64,
    },
}

/// A trained private predictor: its guarantee, its method's parameters and the weights it
/// answers with. Serialised in the artifact format of before the per-method record was an
/// enum (flat optional `lambda`, `teachers`, `clip`, `dp_sgd`, `optimization`; see
/// [`wire::Predictor`]), so artifacts written by earlier builds load unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "wire::Predictor", try_from = "wire::Predictor")]
pub struct PrivatePredictor {
    /// The guarantee (method, mode, ε, δ, B, N, λ, noise).
    pub calibration: Calibration,
    /// How the randomness was seeded.
    pub seed_policy: SeedPolicy,
    /// The method's parameters (λ and certificate, clip and run statistics, or T).
    pub params: MethodParams,
    /// The weights.
    pub kind: PredictorKind,
}

pub mod wire {
    //! The serialised form of a [`PrivatePredictor`](super::PrivatePredictor): the artifact
    //! header's `predictor` object, field for field as written since format version 1.

    use super::{MethodParams, PredictorKind, PrivatePredictor, SeedPolicy};
    use crate::dpsgd::DpSgdStats;
    use crate::train::Optimization;
    use privpred_core::{Calibration, Method};
    use serde::{Deserialize, Serialize};

    /// The flat record (every per-method field optional).
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct Predictor {
        /// The guarantee.
        pub calibration: Calibration,
        /// λ (model/loss/prediction sensitivity), or the teachers' λ.
        pub lambda: Option<f64>,
        /// Number of teachers T (subsample-and-aggregate).
        pub teachers: Option<usize>,
        /// DP-SGD clip ν.
        pub clip: Option<f64>,
        /// DP-SGD run statistics.
        pub dp_sgd: Option<DpSgdStats>,
        /// How the randomness was seeded.
        pub seed_policy: SeedPolicy,
        /// The certificate of the released fit (erratum 4.8).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub optimization: Option<Optimization>,
        /// The weights.
        pub kind: PredictorKind,
    }

    impl From<PrivatePredictor> for Predictor {
        fn from(p: PrivatePredictor) -> Self {
            let mut w = Predictor {
                calibration: p.calibration,
                lambda: p.params.lambda(),
                teachers: None,
                clip: None,
                dp_sgd: None,
                seed_policy: p.seed_policy,
                optimization: None,
                kind: p.kind,
            };
            match p.params {
                MethodParams::Regularised { optimization, .. } => w.optimization = optimization,
                MethodParams::DpSgd { clip, stats } => {
                    w.clip = Some(clip);
                    w.dp_sgd = Some(stats);
                }
                MethodParams::Teachers { teachers, .. } => w.teachers = Some(teachers),
            }
            w
        }
    }

    impl TryFrom<Predictor> for PrivatePredictor {
        type Error = String;

        /// The method's record from the fields its method needs; a field the method does not
        /// have, or a missing one it needs, is refused (never written by any build).
        fn try_from(w: Predictor) -> Result<Self, String> {
            let method = w.calibration.method();
            let need = |v: Option<f64>, name: &str| {
                v.ok_or_else(|| format!("a {method} predictor without its {name}"))
            };
            let extra: &[(&str, bool)] = match method {
                Method::DpSgd => &[
                    ("lambda", w.lambda.is_some()),
                    ("teachers", w.teachers.is_some()),
                    ("optimization", w.optimization.is_some()),
                ],
                Method::SubsampleAggregate => &[
                    ("clip", w.clip.is_some()),
                    ("dp_sgd", w.dp_sgd.is_some()),
                    ("optimization", w.optimization.is_some()),
                ],
                _ => &[
                    ("teachers", w.teachers.is_some()),
                    ("clip", w.clip.is_some()),
                    ("dp_sgd", w.dp_sgd.is_some()),
                ],
            };
            if let Some((name, _)) = extra.iter().find(|(_, present)| *present) {
                return Err(format!("a {method} predictor cannot record {name}"));
            }
            let params = match method {
                Method::DpSgd => MethodParams::DpSgd {
                    clip: need(w.clip, "clip")?,
                    stats: w
                        .dp_sgd
                        .ok_or_else(|| format!("a {method} predictor without its dp_sgd stats"))?,
                },
                Method::SubsampleAggregate => MethodParams::Teachers {
                    teachers: w
                        .teachers
                        .ok_or_else(|| format!("a {method} predictor without its teachers"))?,
                    lambda: need(w.lambda, "lambda")?,
                },
                _ => MethodParams::Regularised {
                    lambda: need(w.lambda, "lambda")?,
                    optimization: w.optimization,
                },
            };
            Ok(PrivatePredictor {
                calibration: w.calibration,
                seed_policy: w.seed_policy,
                params,
                kind: w.kind,
            })
        }
    }
}

impl MethodParams {
    /// λ used for training (model/loss/prediction sensitivity), or the teachers' λ.
    pub fn lambda(&self) -> Option<f64> {
        match *self {
            MethodParams::Regularised { lambda, .. } | MethodParams::Teachers { lambda, .. } => {
                Some(lambda)
            }
            MethodParams::DpSgd { .. } => None,
        }
    }
}

/// Validates one query: dimension, finiteness and the unit ball ‖x‖₂ ≤ 1 (+1e-6 for f32
/// rounding of the preprocessing).
pub fn check_query(x: &[f32], d: usize) -> Result<()> {
    if x.len() != d {
        return Err(LinearError::Dimension(format!(
            "query has {} features, the model expects {d}",
            x.len()
        )));
    }
    if let Some(j) = x.iter().position(|v| !v.is_finite()) {
        return Err(LinearError::NonFinite(format!(
            "query feature {j} is {}",
            x[j]
        )));
    }
    let norm = x
        .iter()
        .map(|&v| (v as f64) * (v as f64))
        .sum::<f64>()
        .sqrt();
    if norm > 1.0 + 1e-6 {
        return Err(LinearError::UnitBall(format!(
            "query has norm {norm:.6} > 1; the guarantee assumes every query in the unit ball (preprocess it with the model's recipe)"
        )));
    }
    Ok(())
}

impl PrivatePredictor {
    /// The predictor of a method that releases (a noisy version of) an L2-regularised fit —
    /// model sensitivity, prediction sensitivity, loss perturbation: `fit`'s calibration and
    /// seed policy, its λ and the fit's certificate `optimization` (erratum 4.8), answering
    /// with `kind`.
    pub(crate) fn regularised(
        fit: &super::Fit<'_>,
        optimization: Option<Optimization>,
        kind: PredictorKind,
    ) -> Self {
        PrivatePredictor {
            calibration: fit.calibration.clone(),
            seed_policy: fit.cfg.seed_policy,
            params: MethodParams::Regularised {
                lambda: fit.cfg.lambda,
                optimization,
            },
            kind,
        }
    }

    /// Input dimension D.
    pub fn input_dim(&self) -> usize {
        match &self.kind {
            PredictorKind::Released { model } | PredictorKind::NoisyLogits { model } => model.d,
            PredictorKind::Teachers { teachers } => teachers.d,
        }
    }

    /// Number of classes C.
    pub fn classes(&self) -> usize {
        match &self.kind {
            PredictorKind::Released { model } | PredictorKind::NoisyLogits { model } => model.c,
            PredictorKind::Teachers { teachers } => teachers.c,
        }
    }

    /// The method.
    pub fn method(&self) -> Method {
        self.calibration.method()
    }

    /// λ used for training (model/loss/prediction sensitivity), or the teachers' λ.
    pub fn lambda(&self) -> Option<f64> {
        self.params.lambda()
    }

    /// Number of teachers T (subsample-and-aggregate).
    pub fn teachers(&self) -> Option<usize> {
        match self.params {
            MethodParams::Teachers { teachers, .. } => Some(teachers),
            _ => None,
        }
    }

    /// DP-SGD's clip ν.
    pub fn clip(&self) -> Option<f64> {
        match self.params {
            MethodParams::DpSgd { clip, .. } => Some(clip),
            _ => None,
        }
    }

    /// DP-SGD's run statistics.
    pub fn dp_sgd(&self) -> Option<DpSgdStats> {
        match self.params {
            MethodParams::DpSgd { stats, .. } => Some(stats),
            _ => None,
        }
    }

    /// The certificate of the released fit (SPEC erratum 4.8): model sensitivity, loss
    /// perturbation and prediction sensitivity in `corrected`/`tight`; `None` otherwise.
    pub fn optimization(&self) -> Option<Optimization> {
        match self.params {
            MethodParams::Regularised { optimization, .. } => optimization,
            _ => None,
        }
    }

    /// Whether each answer consumes the inference budget (prediction sensitivity,
    /// subsample-and-aggregate) or the model itself is private (unlimited answers).
    pub fn spends_budget(&self) -> bool {
        !matches!(self.kind, PredictorKind::Released { .. })
    }

    /// Answers already-validated queries (see [`check_query`]; rows must have length D).
    /// Each answer of a private-prediction method is one fresh draw of its mechanism.
    pub fn predict<R: Rng + ?Sized>(&self, rows: &[&[f32]], rng: &mut R) -> Vec<Answer> {
        match self.try_predict(rows, rng) {
            Ok(a) => a,
            Err(e) => panic!("predict on invalid queries (use try_predict): {e}"),
        }
    }

    /// Validates every query, then answers them.
    pub fn try_predict<R: Rng + ?Sized>(
        &self,
        rows: &[&[f32]],
        rng: &mut R,
    ) -> Result<Vec<Answer>> {
        let d = self.input_dim();
        for (i, r) in rows.iter().enumerate() {
            check_query(r, d).map_err(|e| match e {
                LinearError::Dimension(m) => LinearError::Dimension(format!("row {}: {m}", i + 1)),
                LinearError::NonFinite(m) => LinearError::NonFinite(format!("row {}: {m}", i + 1)),
                LinearError::UnitBall(m) => LinearError::UnitBall(format!("row {}: {m}", i + 1)),
                other => other,
            })?;
        }
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            out.push(match &self.kind {
                PredictorKind::Released { model } => {
                    let l = model.logits(r);
                    Answer {
                        label: argmax(&l) as u32,
                        scores: Some(l),
                    }
                }
                PredictorKind::NoisyLogits { model } => {
                    prediction_sensitivity::answer(model, &self.calibration, r, rng)?
                }
                PredictorKind::Teachers { teachers } => {
                    subsample_aggregate::answer(teachers, &self.calibration, r, rng)?
                }
            });
        }
        Ok(out)
    }

    /// Labels for every row of a (preprocessed) test set: one mechanism draw per row (fast
    /// kernels; the vote matrix / logits are computed once).
    pub fn predict_dataset<R: Rng + ?Sized>(&self, ds: &Dataset, rng: &mut R) -> Result<Vec<u32>> {
        match &self.kind {
            PredictorKind::Released { model } => train::predict_all(model, ds),
            PredictorKind::NoisyLogits { model } => {
                let l = train::logits_all(model, ds)?;
                prediction_sensitivity_labels(&l, model.c, &self.calibration, rng)
            }
            PredictorKind::Teachers { teachers } => {
                let mechanism = subsample_aggregate::mechanism_of(&self.calibration)?;
                teachers
                    .vote_matrix(ds)?
                    .private_labels_with(mechanism, rng)
            }
        }
    }

    /// Test accuracy of one draw.
    pub fn accuracy<R: Rng + ?Sized>(&self, ds: &Dataset, rng: &mut R) -> Result<f64> {
        Ok(train::accuracy_of(
            &self.predict_dataset(ds, rng)?,
            &ds.labels,
        ))
    }
}
