//! The enum dispatch of a [`Method`] to its module: [`SharedFit`] (a shared fit of any
//! method) and [`calibrate`].

use super::MethodConfig;
use super::{
    DpSgd, Draw, Fit, LossPerturbation, LpShared, ModelFit, ModelSensitivity,
    PredictionSensitivity, PrivateMethod, PrivatePredictor, Reuse, Scores, SubsampleAggregate,
    Teachers,
};
use crate::error::{LinearError, Result};
use privpred_core::{Calibration, Method};
use privpred_data::Dataset;
use rand::Rng;

/// A shared fit of any method: the enum dispatch of a [`Method`] to its module.
#[derive(Debug, Clone)]
pub enum SharedFit {
    /// [`ModelSensitivity`].
    ModelSensitivity(ModelFit),
    /// [`LossPerturbation`].
    LossPerturbation(LpShared),
    /// [`DpSgd`] (nothing to share).
    DpSgd(()),
    /// [`PredictionSensitivity`].
    PredictionSensitivity(ModelFit),
    /// [`SubsampleAggregate`].
    SubsampleAggregate(Teachers),
}

/// Runs `$body` with `$m` bound to the module of `$method` (a unit struct implementing
/// [`PrivateMethod`]) and `$wrap` to its [`SharedFit`] variant.
macro_rules! dispatch {
    ($method:expr, |$m:ident, $wrap:ident| $body:expr) => {
        match $method {
            Method::ModelSensitivity => {
                let ($m, $wrap) = (ModelSensitivity, SharedFit::ModelSensitivity);
                $body
            }
            Method::LossPerturbation => {
                let ($m, $wrap) = (LossPerturbation, SharedFit::LossPerturbation);
                $body
            }
            Method::DpSgd => {
                let ($m, $wrap) = (DpSgd, SharedFit::DpSgd);
                $body
            }
            Method::PredictionSensitivity => {
                let ($m, $wrap) = (PredictionSensitivity, SharedFit::PredictionSensitivity);
                $body
            }
            Method::SubsampleAggregate => {
                let ($m, $wrap) = (SubsampleAggregate, SharedFit::SubsampleAggregate);
                $body
            }
        }
    };
}

/// Runs `$body` with `$m` bound to the module of a [`SharedFit`] and `$s` to its shared part.
macro_rules! on_shared {
    ($shared:expr, |$m:ident, $s:ident| $body:expr) => {
        match $shared {
            SharedFit::ModelSensitivity($s) => {
                let $m = ModelSensitivity;
                $body
            }
            SharedFit::LossPerturbation($s) => {
                let $m = LossPerturbation;
                $body
            }
            SharedFit::DpSgd($s) => {
                let $m = DpSgd;
                $body
            }
            SharedFit::PredictionSensitivity($s) => {
                let $m = PredictionSensitivity;
                $body
            }
            SharedFit::SubsampleAggregate($s) => {
                let $m = SubsampleAggregate;
                $body
            }
        }
    };
}

/// The calibration of `cfg.method` for `n` examples of `classes` classes
/// ([`PrivateMethod::calibrate`] of its module).
pub fn calibrate(cfg: &MethodConfig, n: usize, classes: usize) -> Result<Calibration> {
    dispatch!(cfg.method, |m, _w| m.calibrate(cfg, n, classes))
}

impl SharedFit {
    /// The shared fit of `fit.cfg.method` ([`PrivateMethod::fit_shared`] of its module).
    pub fn fit<R: Rng + ?Sized>(fit: &Fit<'_>, reuse: &Reuse, rng: &mut R) -> Result<Self> {
        if fit.calibration.method() != fit.cfg.method {
            return Err(LinearError::invalid(
                "calibration",
                fit.calibration.method(),
                format!("must be the configuration's method, {}", fit.cfg.method),
            ));
        }
        #[cfg(test)]
        SHARED_FITS.with(|c| c.set(c.get() + 1));
        dispatch!(fit.cfg.method, |m, wrap| Ok(wrap(
            m.fit_shared(fit, reuse, rng)?
        )))
    }

    /// The method whose shared fit this is.
    pub fn method(&self) -> Method {
        on_shared!(self, |m, _s| m.method())
    }

    /// This shared fit as `method`'s, where the two methods share one: model and prediction
    /// sensitivity both share θ*(λ) ([`ModelFit`]), so a study fits it once for both. `None`
    /// for any other pair of different methods.
    pub fn as_method(&self, method: Method) -> Option<SharedFit> {
        match (self, method) {
            (SharedFit::ModelSensitivity(f) | SharedFit::PredictionSensitivity(f), m) => match m {
                Method::ModelSensitivity => Some(SharedFit::ModelSensitivity(f.clone())),
                Method::PredictionSensitivity => Some(SharedFit::PredictionSensitivity(f.clone())),
                _ => None,
            },
            (s, m) if s.method() == m => Some(s.clone()),
            _ => None,
        }
    }

    /// One release ([`PrivateMethod::release`]).
    pub fn release<R: Rng + ?Sized>(&self, fit: &Fit<'_>, rng: &mut R) -> Result<PrivatePredictor> {
        self.check(fit)?;
        on_shared!(self, |m, s| m.release(fit, s, rng))
    }

    /// The shared part of answering `queries` ([`PrivateMethod::score`]).
    pub fn score(&self, queries: &Dataset) -> Result<Scores> {
        on_shared!(self, |m, s| m.score(s, queries))
    }

    /// One repetition's labels on `queries` ([`PrivateMethod::draw`]).
    pub fn draw<R: Rng + ?Sized>(
        &self,
        fit: &Fit<'_>,
        scores: &Scores,
        queries: &Dataset,
        rng: &mut R,
    ) -> Result<Draw> {
        self.check(fit)?;
        on_shared!(self, |m, s| m.draw(fit, s, scores, queries, rng))
    }

    fn check(&self, fit: &Fit<'_>) -> Result<()> {
        if self.method() != fit.cfg.method || fit.calibration.method() != fit.cfg.method {
            return Err(LinearError::invalid(
                "method",
                fit.cfg.method,
                format!(
                    "a shared fit of {} with a {} calibration",
                    self.method(),
                    fit.calibration.method()
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
thread_local! {
    /// Shared fits built on this thread (tests count them).
    static SHARED_FITS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The number of shared fits built on this thread so far.
#[cfg(test)]
pub(crate) fn shared_fits_built() -> usize {
    SHARED_FITS.with(|c| c.get())
}

/// The [`Method`] of a module (the trait's constant, as a method for the dispatch macros).
trait MethodOf {
    fn method(&self) -> Method;
}

impl<T: PrivateMethod> MethodOf for T {
    fn method(&self) -> Method {
        T::METHOD
    }
}
