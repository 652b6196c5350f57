//! A trained private predictor ([`PrivatePredictor`]): the guarantee, the method's record
//! ([`MethodParams`]) and the weights ([`PredictorKind`]), answering validated queries.

use super::config::SeedPolicy;
use super::prediction_sensitivity::{self, prediction_sensitivity_labels};
use super::subsample_aggregate;
use super::teachers::Teachers;
use crate::dpsgd::DpSgdStats;
use crate::error::{LinearError, Result};
use crate::model::{LinearModel, argmax};
use crate::train::{self, Certificate, Optimization};
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
        /// The public certificate of the released fit (docs/guarantees.md#errata (erratum 4.8)): the bound γ the
        /// released fit met, in `corrected`/`tight`; `None` in `paper`.
        certificate: Option<Certificate>,
    },
    /// DP-SGD.
    DpSgd {
        /// The clip ν.
        clip: f64,
        /// Steps taken, ⌈epochs·N/b⌉ (a function of the public schedule and N).
        steps: u64,
    },
    /// Subsample-and-aggregate.
    Teachers {
        /// Number of teachers T.
        teachers: usize,
        /// The teachers' λ.
        lambda: f64,
    },
}

/// What the trainer measured on the private data while fitting a predictor, without noise:
/// the certificate's measured gradient norm, rounding bound and refinement count, DP-SGD's
/// run statistics (clipped fraction, examples sampled). These are for the data owner only
/// (`train` prints them and `train --json` reports them, marked private): they are never
/// serialised, so no artifact, model endpoint or pickled estimator carries them, and a
/// loaded predictor has none.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Diagnostics {
    /// The measured certificate of the released fit (regularised methods, certified modes).
    pub optimization: Option<Optimization>,
    /// DP-SGD's run statistics.
    pub dp_sgd: Option<DpSgdStats>,
}

/// A trained private predictor: its guarantee, its method's parameters and the weights it
/// answers with. Serialised as a flat record (optional `lambda`, `teachers`, `clip`,
/// `dp_sgd`, `optimization`; see [`wire::Predictor`]) holding only data-independent facts.
///
/// Equality compares what is released (guarantee, parameters, weights), not the trainer's
/// private [`Diagnostics`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(into = "wire::Predictor", try_from = "wire::Predictor")]
pub struct PrivatePredictor {
    /// The guarantee (method, mode, ε, δ, B, N, λ, noise).
    pub calibration: Calibration,
    /// How the randomness was seeded.
    pub seed_policy: SeedPolicy,
    /// The method's parameters (λ and certificate bound, clip and steps, or T).
    pub params: MethodParams,
    /// The weights.
    pub kind: PredictorKind,
    /// What the trainer measured on the private data (never serialised; see [`Diagnostics`]).
    pub diagnostics: Diagnostics,
}

impl PartialEq for PrivatePredictor {
    fn eq(&self, other: &Self) -> bool {
        self.calibration == other.calibration
            && self.seed_policy == other.seed_policy
            && self.params == other.params
            && self.kind == other.kind
    }
}

pub mod wire {
    //! The serialised form of a [`PrivatePredictor`]: the artifact header's `predictor`
    //! object, whose `optimization` and `dp_sgd` hold only data-independent facts (a record
    //! with any other field, e.g. a measurement of the private data, is refused).

    use super::{Diagnostics, MethodParams, PredictorKind, PrivatePredictor, SeedPolicy};
    use crate::train::Certificate;
    use privpred_core::{Calibration, Method};
    use serde::{Deserialize, Serialize};

    /// The public certificate: the bound γ the released fit met.
    #[derive(Debug, Clone, Copy, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct CertificateRecord {
        /// γ: the bound on ‖∇J(θ̂)‖₂ the calibration assumed.
        pub gradient_norm_bound: f64,
        /// Always true: a fit that misses γ is never released.
        pub certified: bool,
    }

    /// DP-SGD's public run record.
    #[derive(Debug, Clone, Copy, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct DpSgdRecord {
        /// Steps taken, ⌈epochs·N/b⌉.
        pub steps: u64,
    }

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
        /// DP-SGD's public run record (steps).
        pub dp_sgd: Option<DpSgdRecord>,
        /// How the randomness was seeded.
        pub seed_policy: SeedPolicy,
        /// The public certificate of the released fit (erratum 4.8).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub optimization: Option<CertificateRecord>,
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
                MethodParams::Regularised { certificate, .. } => {
                    w.optimization = certificate.map(|c| CertificateRecord {
                        gradient_norm_bound: c.gradient_norm_bound,
                        certified: true,
                    });
                }
                MethodParams::DpSgd { clip, steps } => {
                    w.clip = Some(clip);
                    w.dp_sgd = Some(DpSgdRecord { steps });
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
                    steps: w
                        .dp_sgd
                        .ok_or_else(|| format!("a {method} predictor without its dp_sgd record"))?
                        .steps,
                },
                Method::SubsampleAggregate => MethodParams::Teachers {
                    teachers: w
                        .teachers
                        .ok_or_else(|| format!("a {method} predictor without its teachers"))?,
                    lambda: need(w.lambda, "lambda")?,
                },
                _ => MethodParams::Regularised {
                    lambda: need(w.lambda, "lambda")?,
                    certificate: match w.optimization {
                        Some(c) if !c.certified => {
                            return Err(format!(
                                "a {method} predictor whose fit is recorded as not certified"
                            ));
                        }
                        c => c.map(|c| Certificate {
                            gradient_norm_bound: c.gradient_norm_bound,
                        }),
                    },
                },
            };
            Ok(PrivatePredictor {
                calibration: w.calibration,
                seed_policy: w.seed_policy,
                params,
                kind: w.kind,
                diagnostics: Diagnostics::default(),
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
    /// seed policy, its λ and the fit's certificate `optimization` (erratum 4.8: its bound is
    /// recorded, its measured values kept as private [`Diagnostics`]), answering with `kind`.
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
                certificate: optimization.map(|o| o.certificate()),
            },
            kind,
            diagnostics: Diagnostics {
                optimization,
                dp_sgd: None,
            },
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

    /// DP-SGD's steps ⌈epochs·N/b⌉.
    pub fn dp_sgd_steps(&self) -> Option<u64> {
        match self.params {
            MethodParams::DpSgd { steps, .. } => Some(steps),
            _ => None,
        }
    }

    /// DP-SGD's measured run statistics (private to the data owner: see [`Diagnostics`];
    /// `None` for a loaded predictor).
    pub fn dp_sgd(&self) -> Option<DpSgdStats> {
        self.diagnostics.dp_sgd
    }

    /// The public certificate of the released fit (docs/guarantees.md#errata (erratum 4.8)): the bound γ it met, for
    /// model sensitivity, loss perturbation and prediction sensitivity in `corrected`/`tight`;
    /// `None` otherwise.
    pub fn certificate(&self) -> Option<Certificate> {
        match self.params {
            MethodParams::Regularised { certificate, .. } => certificate,
            _ => None,
        }
    }

    /// The certificate as measured by the trainer (private to the data owner: see
    /// [`Diagnostics`]; `None` for a loaded predictor and outside certified modes).
    pub fn optimization(&self) -> Option<Optimization> {
        self.diagnostics.optimization
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
