//! Subsample-and-aggregate (docs/guarantees.md#calibrations; Dwork & Feldman 2018): T teachers trained on disjoint
//! shards of a random partition are kept secret; every answer is one draw of the calibrated
//! selection mechanism over their votes — the exponential mechanism (McSherry & Talwar 2007;
//! vote sensitivity 1 under replace-one, docs/guarantees.md#calibrations) or, in `tight` with δ = 0, permute-and-flip
//! (McKenna & Sheldon 2020). Each answer spends the inference budget B.
//!
//! Shared across repetitions: the teachers (their partition drawn once) and their votes on
//! the queries; each draw is one selection per answer.

use super::teachers::{Teachers, train_teachers};
use super::{Diagnostics, Draw, Fit, MethodParams, PredictorKind, PrivateMethod, PrivatePredictor};
use super::{Reuse, Scores};
use crate::error::{LinearError, Result};
use privpred_core::{Answer, Calibration, Mechanism, Method};
use privpred_data::Dataset;
use rand::Rng;

/// The method's module (see [`PrivateMethod`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SubsampleAggregate;

/// The selection mechanism over the votes (the one read of its calibration's mechanism): the
/// exponential mechanism or permute-and-flip; anything else is refused.
pub(crate) fn mechanism_of(calibration: &Calibration) -> Result<&Mechanism> {
    let mechanism = &calibration.mechanism;
    if mechanism.is_selection() {
        Ok(mechanism)
    } else {
        Err(LinearError::Numerical(format!(
            "subsample-and-aggregate with {} noise (it needs a selection over the votes)",
            calibration.noise()
        )))
    }
}

/// One answer to a validated query: a selection over the teachers' votes (label only).
pub(crate) fn answer<R: Rng + ?Sized>(
    teachers: &Teachers,
    calibration: &Calibration,
    x: &[f32],
    rng: &mut R,
) -> Result<Answer> {
    let mechanism = mechanism_of(calibration)?;
    let v = teachers.votes(x);
    Ok(Answer {
        label: mechanism.select(rng, &v)? as u32,
        scores: None,
    })
}

impl PrivateMethod for SubsampleAggregate {
    type Shared = Teachers;
    const METHOD: Method = Method::SubsampleAggregate;

    /// The teachers: a random partition drawn from `rng`, one fit per shard.
    fn fit_shared<R: Rng + ?Sized>(
        &self,
        fit: &Fit<'_>,
        _: &Reuse,
        rng: &mut R,
    ) -> Result<Teachers> {
        let cfg = fit.cfg;
        train_teachers(
            fit.train,
            cfg.teachers,
            cfg.teacher_lambda,
            &cfg.teacher_lbfgs,
            rng,
        )
    }

    fn release<R: Rng + ?Sized>(
        &self,
        fit: &Fit<'_>,
        shared: &Teachers,
        _: &mut R,
    ) -> Result<PrivatePredictor> {
        Ok(PrivatePredictor {
            calibration: fit.calibration.clone(),
            seed_policy: fit.cfg.seed_policy,
            params: MethodParams::Teachers {
                teachers: fit.cfg.teachers,
                lambda: fit.cfg.teacher_lambda,
            },
            kind: PredictorKind::Teachers {
                teachers: shared.clone(),
            },
            diagnostics: Diagnostics::default(),
        })
    }

    fn score(&self, shared: &Teachers, queries: &Dataset) -> Result<Scores> {
        Ok(Scores::Votes(shared.vote_matrix(queries)?))
    }

    fn draw<R: Rng + ?Sized>(
        &self,
        fit: &Fit<'_>,
        shared: &Teachers,
        scores: &Scores,
        queries: &Dataset,
        rng: &mut R,
    ) -> Result<Draw> {
        let mechanism = mechanism_of(fit.calibration)?;
        Draw::timed(
            || Ok(()),
            |()| match scores {
                Scores::Votes(v) if v.n == queries.n => v.private_labels_with(mechanism, rng),
                _ => shared
                    .vote_matrix(queries)?
                    .private_labels_with(mechanism, rng),
            },
        )
    }
}
