//! Checked training parameters of the linear methods, in the style of
//! linfa's `ParamGuard`: [`TrainParams`] starts from the defaults of docs/study.md kept in
//! [`privpred_core::defaults`], is adjusted with setters, and [`ParamGuard::check`] returns the
//! validated [`MethodConfig`] (`check_for` adds the checks that need the training-set size).
//! [`LbfgsParams`] does the same for the solver's options.
//!
//! Every refusal names the parameter and its valid range.

use crate::dpsgd::DpSgdConfig;
use crate::error::{LinearError, Result};
use crate::lbfgs::{GradNorm, LbfgsOptions};
use crate::methods::{MethodConfig, SeedPolicy};
use privpred_core::params::{self as p, ParamGuard};
use privpred_core::{Budget, CalibrationMode, Method, Neighbours, Privacy};

/// Unchecked parameters of one private linear method; [`ParamGuard::check`] validates them
/// into a [`MethodConfig`].
#[derive(Debug, Clone, PartialEq)]
pub struct TrainParams(MethodConfig);

impl TrainParams {
    /// The defaults of docs/study.md for `method` (see [`MethodConfig::new`]): λ, T, the teachers'
    /// λ, the DP-SGD schedule and ν from [`privpred_core::defaults`].
    pub fn new(method: Method, mode: CalibrationMode, privacy: Privacy, budget: Budget) -> Self {
        TrainParams(MethodConfig::new(method, mode, privacy, budget))
    }

    /// L2 strength λ (> 0 for model sensitivity, loss perturbation and prediction
    /// sensitivity, whose calibrations divide by it: docs/guarantees.md#calibrations).
    pub fn lambda(mut self, lambda: f64) -> Self {
        self.0.lambda = lambda;
        self
    }
    /// Subsample-and-aggregate teachers T, in 1..=N.
    pub fn teachers(mut self, teachers: usize) -> Self {
        self.0.teachers = teachers;
        self
    }
    /// The teachers' λ ≥ 0.
    pub fn teacher_lambda(mut self, lambda: f64) -> Self {
        self.0.teacher_lambda = lambda;
        self
    }
    /// DP-SGD's expected batch size b, in 1..=N.
    pub fn batch_size(mut self, b: usize) -> Self {
        self.0.dp_sgd.batch_size = b;
        self
    }
    /// DP-SGD's epochs > 0.
    pub fn epochs(mut self, epochs: f64) -> Self {
        self.0.dp_sgd.epochs = epochs;
        self
    }
    /// DP-SGD's initial learning rate > 0.
    pub fn learning_rate(mut self, lr: f64) -> Self {
        self.0.dp_sgd.learning_rate = lr;
        self
    }
    /// DP-SGD's momentum in [0, 1).
    pub fn momentum(mut self, momentum: f64) -> Self {
        self.0.dp_sgd.momentum = momentum;
        self
    }
    /// DP-SGD's hyper-parameters as a whole (batch size, epochs, learning rate, momentum and
    /// clip, each checked as by its own setter).
    pub fn dp_sgd(mut self, dp_sgd: DpSgdConfig) -> Self {
        self.0.dp_sgd = DpSgdConfig {
            public_n: self.0.public_n,
            ..dp_sgd
        };
        self
    }
    /// DP-SGD's clip ν > 0.
    pub fn clip(mut self, clip: f64) -> Self {
        self.0.dp_sgd.clip = Some(clip);
        self
    }
    /// DP-SGD's clip ν left to be selected ([`crate::methods::cv_clip`] takes the checked
    /// configuration without one; [`TrainParams::check_for`] refuses DP-SGD without a clip).
    pub fn without_clip(mut self) -> Self {
        self.0.dp_sgd.clip = None;
        self
    }
    /// The full-data fits' solver options (checked with [`LbfgsParams`]).
    pub fn lbfgs(mut self, opts: LbfgsOptions) -> Self {
        self.0.lbfgs = opts;
        self
    }
    /// The teachers' solver options (checked with [`LbfgsParams`]).
    pub fn teacher_lbfgs(mut self, opts: LbfgsOptions) -> Self {
        self.0.teacher_lbfgs = opts;
        self
    }
    /// The recorded seed policy.
    pub fn seed_policy(mut self, policy: SeedPolicy) -> Self {
        self.0.seed_policy = policy;
        self
    }
    /// The neighbouring relation of the guarantee (docs/guarantees.md#neighbouring-relations).
    pub fn neighbours(mut self, neighbours: Neighbours) -> Self {
        self.0.neighbours = neighbours;
        self
    }
    /// The model's output layer: [`privpred_core::Loss::Logistic`] trains a two-class problem
    /// as one sigmoid output ([`crate::binary`]).
    pub fn loss(mut self, loss: privpred_core::Loss) -> Self {
        self.0.loss = loss;
        self
    }

    /// Under add/remove neighbours: the public training-set size N̂ the calibration uses in
    /// place of the exact N (see [`MethodConfig::public_n`]).
    pub fn public_n(mut self, n: Option<usize>) -> Self {
        self.0.public_n = n;
        self.0.dp_sgd.public_n = n;
        self
    }

    /// How λ (or DP-SGD's clip) was chosen: recorded in the guarantee with its cost
    /// (`privpred_core::tuning`; a non-private selection marks the guarantee not valid).
    pub fn selection(mut self, selection: privpred_core::SelectionMethod) -> Self {
        self.0.selection = selection;
        self
    }

    /// Validates against the training-set size `n` (teachers and batch size in 1..=n, a
    /// finite budget for the prediction-time methods, DP-SGD's clip set) and then as
    /// [`ParamGuard::check`]. The size-dependent checks come first, so a refused count names
    /// its range 1..=n.
    pub fn check_for(self, n: usize) -> Result<MethodConfig> {
        self.0.check(n)?;
        self.check()
    }
}

/// The parameters of an existing configuration, to be changed with the setters and checked
/// again.
impl From<MethodConfig> for TrainParams {
    fn from(cfg: MethodConfig) -> Self {
        TrainParams(cfg)
    }
}

/// The range checks of a linear DP-SGD configuration that need no training-set size.
fn check_dp_sgd(c: &DpSgdConfig) -> Result<()> {
    p::at_least_one("batch-size", c.batch_size)?;
    p::positive("epochs", c.epochs)?;
    p::positive("learning-rate", c.learning_rate)?;
    p::unit_half_open("momentum", c.momentum)?;
    if let Some(clip) = c.clip {
        p::positive("clip", clip)?;
    }
    Ok(())
}

impl ParamGuard for TrainParams {
    type Checked = MethodConfig;
    type Error = LinearError;

    /// Checks the values the method uses: λ (> 0 where the calibration divides by it, else
    /// ≥ 0), the teachers and their λ and solver (subsample-and-aggregate), DP-SGD's
    /// schedule and clip (DP-SGD), and the full-data solver. Values a method ignores (the
    /// teachers of a model-sensitivity configuration, say) are not refused, as before.
    fn check_ref(&self) -> Result<&MethodConfig> {
        let c = &self.0;
        match c.method {
            Method::ModelSensitivity | Method::PredictionSensitivity | Method::LossPerturbation => {
                p::lambda(c.lambda)?;
            }
            _ => {
                p::non_negative("lambda", c.lambda)?;
            }
        }
        match c.method {
            Method::SubsampleAggregate => {
                p::at_least_one("teachers", c.teachers)?;
                p::non_negative("teacher-lambda", c.teacher_lambda)?;
                LbfgsParams(c.teacher_lbfgs).check_ref()?;
            }
            Method::DpSgd => check_dp_sgd(&c.dp_sgd)?,
            _ => {}
        }
        LbfgsParams(c.lbfgs).check_ref()?;
        Ok(c)
    }

    fn check(self) -> Result<MethodConfig> {
        self.check_ref()?;
        Ok(self.0)
    }
}

/// Unchecked L-BFGS options; [`ParamGuard::check`] validates them into [`LbfgsOptions`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LbfgsParams(pub LbfgsOptions);

impl LbfgsParams {
    /// Gradient tolerance > 0 and the norm it applies to.
    pub fn grad_tol(mut self, tol: f64, norm: GradNorm) -> Self {
        self.0.grad_tol = tol;
        self.0.norm = norm;
        self
    }
    /// History size m ≥ 1.
    pub fn memory(mut self, m: usize) -> Self {
        self.0.memory = m;
        self
    }
    /// Iteration cap ≥ 1.
    pub fn max_iter(mut self, it: usize) -> Self {
        self.0.max_iter = it;
        self
    }
}

impl ParamGuard for LbfgsParams {
    type Checked = LbfgsOptions;
    type Error = LinearError;

    fn check_ref(&self) -> Result<&LbfgsOptions> {
        let o = &self.0;
        p::at_least_one("memory", o.memory)?;
        p::positive("grad-tol", o.grad_tol)?;
        p::at_least_one("max-iter", o.max_iter)?;
        p::at_least_one("max-evals", o.max_evals)?;
        p::non_negative("f-tol", o.f_tol)?;
        // Strong Wolfe conditions: 0 < c₁ < c₂ < 1 (Nocedal & Wright, Numerical Optimization,
        // §3.1).
        if !(o.c1 > 0.0 && o.c1 < 1.0) {
            return Err(LinearError::invalid("c1", o.c1, "must be in (0, 1)"));
        }
        if !(o.c2 > o.c1 && o.c2 < 1.0) {
            return Err(LinearError::invalid(
                "c2",
                o.c2,
                format!("must be in (c1 = {}, 1)", o.c1),
            ));
        }
        Ok(o)
    }

    fn check(self) -> Result<LbfgsOptions> {
        self.check_ref()?;
        Ok(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use privpred_core::defaults;

    fn params(m: Method) -> TrainParams {
        TrainParams::new(
            m,
            CalibrationMode::Corrected,
            Privacy::new(1.0, 0.0).unwrap(),
            Budget::finite(100).unwrap(),
        )
    }

    fn refusal(r: Result<MethodConfig>) -> String {
        r.expect_err("must be refused").to_string()
    }

    #[test]
    fn defaults_come_from_the_one_place() {
        let c = params(Method::SubsampleAggregate).check().unwrap();
        assert_eq!(c.lambda, defaults::LINEAR_LAMBDA);
        assert_eq!(c.teachers, defaults::LINEAR_TEACHERS);
        assert_eq!(c.teacher_lambda, defaults::LINEAR_TEACHER_LAMBDA);
        assert_eq!(c.dp_sgd.batch_size, defaults::LINEAR_DPSGD_BATCH_SIZE);
        assert_eq!(c.dp_sgd.epochs, defaults::LINEAR_DPSGD_EPOCHS);
        assert_eq!(c.dp_sgd.learning_rate, defaults::LINEAR_DPSGD_LEARNING_RATE);
        assert_eq!(c.dp_sgd.momentum, defaults::LINEAR_DPSGD_MOMENTUM);
        assert_eq!(c.dp_sgd.clip, Some(defaults::LINEAR_DPSGD_CLIP));
        assert_eq!(
            c.seed_policy,
            SeedPolicy::Seeded {
                seed: defaults::SEED
            }
        );
        // The builder's defaults are MethodConfig::new's, unchanged.
        assert_eq!(
            c,
            MethodConfig::new(
                Method::SubsampleAggregate,
                CalibrationMode::Corrected,
                Privacy::new(1.0, 0.0).unwrap(),
                Budget::finite(100).unwrap(),
            )
        );
    }

    #[test]
    fn lambda_must_be_positive_where_the_calibration_divides_by_it() {
        for m in [
            Method::ModelSensitivity,
            Method::LossPerturbation,
            Method::PredictionSensitivity,
        ] {
            for bad in [0.0, -1e-4, f64::NAN, f64::INFINITY] {
                let e = refusal(params(m).lambda(bad).check());
                assert!(
                    e.contains("lambda") && e.contains("in (0, 1e6]"),
                    "{m}: {e}"
                );
            }
        }
        // DP-SGD ignores λ (docs/study.md): 0 is fine, NaN is not.
        assert!(params(Method::DpSgd).lambda(0.0).check().is_ok());
        assert!(params(Method::DpSgd).lambda(f64::NAN).check().is_err());
    }

    #[test]
    fn dp_sgd_ranges_are_refused_with_their_names() {
        let m = Method::DpSgd;
        let cases = [
            (refusal(params(m).clip(0.0).check()), "clip", "> 0"),
            (refusal(params(m).clip(f64::NAN).check()), "clip", "> 0"),
            (refusal(params(m).epochs(0.0).check()), "epochs", "> 0"),
            (
                refusal(params(m).learning_rate(0.0).check()),
                "learning-rate",
                "> 0",
            ),
            (
                refusal(params(m).learning_rate(-1.0).check()),
                "learning-rate",
                "> 0",
            ),
            (
                refusal(params(m).momentum(1.0).check()),
                "momentum",
                "[0, 1)",
            ),
            (
                refusal(params(m).batch_size(0).check()),
                "batch-size",
                ">= 1",
            ),
        ];
        for (e, name, range) in cases {
            assert!(e.contains(name) && e.contains(range), "{e}");
        }
        let e = refusal(params(m).batch_size(101).check_for(100));
        assert!(e.contains("batch-size") && e.contains("1..=100"), "{e}");
    }

    #[test]
    fn teachers_must_be_in_one_to_n() {
        let m = Method::SubsampleAggregate;
        let e = refusal(params(m).teachers(0).check());
        assert!(e.contains("teachers") && e.contains(">= 1"), "{e}");
        let e = refusal(params(m).teachers(101).check_for(100));
        assert!(e.contains("teachers") && e.contains("1..=100"), "{e}");
        assert_eq!(
            params(m).teachers(100).check_for(100).unwrap().teachers,
            100
        );
        let e = refusal(params(m).teacher_lambda(-1.0).check());
        assert!(e.contains("teacher-lambda"), "{e}");
    }

    #[test]
    fn values_a_method_ignores_are_not_refused() {
        // as before the checked params: the CLI passes its defaults for the other methods
        let c = params(Method::ModelSensitivity)
            .teachers(0)
            .epochs(0.0)
            .check_for(100)
            .unwrap();
        assert_eq!(c.teachers(), 0);
        assert!(
            params(Method::SubsampleAggregate)
                .epochs(0.0)
                .check()
                .is_ok()
        );
        assert!(params(Method::DpSgd).teachers(0).check().is_ok());
        // DP-SGD's clip may be left to cross-validation, but not when training
        let m = Method::DpSgd;
        assert!(params(m).without_clip().check().is_ok());
        let e = refusal(params(m).without_clip().batch_size(10).check_for(100));
        assert!(e.contains("clip"), "{e}");
    }

    #[test]
    fn a_configuration_round_trips_through_its_params() {
        let c = params(Method::DpSgd)
            .clip(0.5)
            .batch_size(10)
            .check()
            .unwrap();
        let back = TrainParams::from(c.clone()).check().unwrap();
        assert_eq!(back, c);
        assert_eq!(back.dp_sgd().clip, Some(0.5));
        let e = refusal(TrainParams::from(c).epochs(-1.0).check());
        assert!(e.contains("epochs"), "{e}");
    }

    #[test]
    fn solver_options_are_checked() {
        assert_eq!(
            LbfgsParams::default().check().unwrap(),
            LbfgsOptions::default()
        );
        let e = LbfgsParams::default()
            .grad_tol(0.0, GradNorm::L2)
            .check()
            .unwrap_err()
            .to_string();
        assert!(e.contains("grad-tol") && e.contains("> 0"), "{e}");
        assert!(LbfgsParams::default().memory(0).check().is_err());
        assert!(LbfgsParams::default().max_iter(0).check().is_err());
        let bad = LbfgsOptions {
            c2: 1e-5,
            ..LbfgsOptions::default()
        };
        let e = LbfgsParams(bad).check().unwrap_err().to_string();
        assert!(e.contains("c2"), "{e}");
        let e = refusal(
            params(Method::ModelSensitivity)
                .lbfgs(LbfgsOptions {
                    grad_tol: f64::NAN,
                    ..LbfgsOptions::default()
                })
                .check(),
        );
        assert!(e.contains("grad-tol"), "{e}");
    }
}
