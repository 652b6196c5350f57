//! Checked options of the study's linear runner, in the style of linfa's
//! `ParamGuard`: [`LinearParams`] starts from the defaults ([`LinearOptions::new`], whose
//! values live in [`privpred_core::defaults`]), is adjusted with setters, and
//! [`ParamGuard::check`] returns validated [`LinearOptions`]. Every refusal names the option
//! and its valid range.

use crate::error::{Result, StudyError};
use crate::linear::LinearOptions;
use privpred_core::Neighbours;
use privpred_core::params::{self as p, ParamGuard};
use std::path::PathBuf;

/// Unchecked options of the linear runner.
#[derive(Debug, Clone, PartialEq)]
pub struct LinearParams(LinearOptions);

impl LinearParams {
    /// The defaults: full data, or the `--quick` caps.
    pub fn new(quick: bool) -> Self {
        LinearParams(LinearOptions::new(quick))
    }
    /// Directory searched first for datasets.
    pub fn data_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.0.data_dir = dir;
        self
    }
    /// Dataset for every figure (None: each figure's own).
    pub fn dataset(mut self, dataset: Option<String>) -> Self {
        self.0.dataset = dataset;
        self
    }
    /// The schema a table is read through.
    pub fn schema(mut self, schema: Option<privpred_data::Schema>) -> Self {
        self.0.schema = schema;
        self
    }
    /// Cap on training examples (≥ 1 when set).
    pub fn max_train(mut self, cap: Option<usize>) -> Self {
        self.0.max_train = cap;
        self
    }
    /// Cap on test examples (≥ 1 when set).
    pub fn max_test(mut self, cap: Option<usize>) -> Self {
        self.0.max_test = cap;
        self
    }
    /// Hold-out fraction in (0, 1).
    pub fn holdout_fraction(mut self, f: f64) -> Self {
        self.0.holdout_fraction = f;
        self
    }
    /// Private draws averaged per cross-validated λ (≥ 1).
    pub fn cv_draws(mut self, draws: usize) -> Self {
        self.0.cv_draws = draws;
        self
    }
    /// The bias feature's value in [0, 1).
    pub fn bias(mut self, bias: f64) -> Self {
        self.0.bias = bias;
        self
    }
    /// DP-SGD's expected batch size (≥ 1).
    pub fn dpsgd_batch_size(mut self, b: usize) -> Self {
        self.0.dpsgd_batch_size = b;
        self
    }
    /// DP-SGD's epochs (> 0).
    pub fn dpsgd_epochs(mut self, epochs: f64) -> Self {
        self.0.dpsgd_epochs = epochs;
        self
    }
    /// The neighbouring relation every method is calibrated for (docs/guarantees.md#neighbouring-relations).
    pub fn neighbours(mut self, neighbours: Neighbours) -> Self {
        self.0.neighbours = neighbours;
        self
    }
    /// Train the sigmoid on two classes where the method trains it, as `train` does
    /// ([`privpred_core::Loss::default_for`]); the softmax everywhere otherwise (the paper's).
    pub fn sigmoid_for_two_classes(mut self, on: bool) -> Self {
        self.0.sigmoid_for_two_classes = on;
        self
    }

    /// How λ and DP-SGD's ν are chosen ([`crate::selection`]).
    pub fn selection(mut self, selection: crate::selection::SelectionOptions) -> Self {
        self.0.selection = selection;
        self
    }
}

/// A range refusal of the core helpers as the study's usage error.
fn usage(e: privpred_core::CoreError) -> StudyError {
    match e {
        privpred_core::CoreError::InvalidArgument {
            name,
            value,
            expected,
        } => StudyError::InvalidArgument {
            name,
            value,
            expected,
        },
        other => StudyError::Core(other),
    }
}

impl ParamGuard for LinearParams {
    type Checked = LinearOptions;
    type Error = StudyError;

    fn check_ref(&self) -> Result<&LinearOptions> {
        let o = &self.0;
        if let Some(cap) = o.max_train {
            p::at_least_one("max-train", cap).map_err(usage)?;
        }
        if let Some(cap) = o.max_test {
            p::at_least_one("max-test", cap).map_err(usage)?;
        }
        p::unit_open("holdout-fraction", o.holdout_fraction).map_err(usage)?;
        p::at_least_one("cv-draws", o.cv_draws).map_err(usage)?;
        p::unit_half_open("bias", o.bias).map_err(usage)?;
        p::at_least_one("dpsgd-batch-size", o.dpsgd_batch_size).map_err(usage)?;
        p::positive("dpsgd-epochs", o.dpsgd_epochs).map_err(usage)?;
        for (name, c) in [("lambda", o.selection.lambda), ("clip", o.selection.clip)] {
            if let crate::selection::Choice::Value(v) = c {
                p::positive(name, v).map_err(usage)?;
            }
        }
        if o.selection.uses_private_split() && o.neighbours != Neighbours::ReplaceOne {
            return Err(StudyError::Unsupported(format!(
                "the private split selection of λ / ν is analysed for replace-one neighbours only (its parts' sizes would depend on N under {}); use --neighbours replace-one or a public value",
                o.neighbours
            )));
        }
        Ok(o)
    }

    fn check(self) -> Result<LinearOptions> {
        self.check_ref()?;
        Ok(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use privpred_core::defaults;

    fn refused(r: Result<LinearOptions>, name: &str, range: &str) {
        let e = r.expect_err("must be refused");
        assert!(e.is_usage(), "{e}");
        let e = e.to_string();
        assert!(e.contains(name) && e.contains(range), "{e}");
    }

    #[test]
    fn defaults_come_from_the_one_place() {
        let full = LinearParams::new(false).check().unwrap();
        assert_eq!(full, LinearOptions::new(false));
        assert_eq!(full.holdout_fraction, defaults::HOLDOUT_FRACTION);
        assert_eq!(full.dpsgd_batch_size, defaults::LINEAR_DPSGD_BATCH_SIZE);
        assert_eq!(full.dpsgd_epochs, defaults::LINEAR_DPSGD_EPOCHS);
        assert_eq!((full.max_train, full.max_test), (None, None));
        let quick = LinearParams::new(true).check().unwrap();
        assert_eq!(quick.max_train, Some(defaults::QUICK_MAX_TRAIN));
        assert_eq!(quick.max_test, Some(defaults::QUICK_MAX_TEST));
        assert_eq!(quick.dpsgd_epochs, defaults::LINEAR_DPSGD_EPOCHS_QUICK);
        assert_eq!(quick.bias, crate::linear::BIAS_DEFAULT);
        assert_eq!(quick.cv_draws, crate::linear::CV_DRAWS_DEFAULT);
    }

    #[test]
    fn each_bad_value_is_refused_with_its_name_and_range() {
        let q = || LinearParams::new(true);
        refused(
            q().holdout_fraction(0.0).check(),
            "holdout-fraction",
            "(0, 1)",
        );
        refused(
            q().holdout_fraction(f64::NAN).check(),
            "holdout-fraction",
            "(0, 1)",
        );
        refused(q().cv_draws(0).check(), "cv-draws", ">= 1");
        refused(q().bias(1.0).check(), "bias", "[0, 1)");
        refused(q().bias(-0.5).check(), "bias", "[0, 1)");
        refused(q().dpsgd_batch_size(0).check(), "dpsgd-batch-size", ">= 1");
        refused(q().dpsgd_epochs(0.0).check(), "dpsgd-epochs", "> 0");
        refused(
            q().dpsgd_epochs(f64::INFINITY).check(),
            "dpsgd-epochs",
            "> 0",
        );
        refused(q().max_train(Some(0)).check(), "max-train", ">= 1");
        refused(q().max_test(Some(0)).check(), "max-test", ">= 1");
        let ok = q()
            .bias(0.0)
            .cv_draws(3)
            .neighbours(Neighbours::AddRemove)
            .check()
            .unwrap();
        assert_eq!((ok.bias, ok.cv_draws), (0.0, 3));
        assert_eq!(ok.neighbours, Neighbours::AddRemove);
    }
}
