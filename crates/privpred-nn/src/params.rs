//! Checked ResNet training parameters, in the style of linfa's
//! `ParamGuard`: [`SgdParams`] starts from the paper's schedule (docs/study.md, the values in
//! [`privpred_core::defaults`]), is adjusted with setters, and [`ParamGuard::check`] returns a
//! validated [`SgdConfig`]; [`DpSgdParams`] adds the clip ν, the noise multiplier σ and the
//! teacher count and validates against the training-set size. Every refusal names the
//! parameter and its valid range.

use crate::error::{NnError, Result};
use crate::train::{DpSgdConfig, SgdConfig};
use privpred_core::params::{self as p, ParamGuard};

/// Unchecked SGD schedule; [`ParamGuard::check`] validates it into an [`SgdConfig`].
#[derive(Debug, Clone, PartialEq)]
pub struct SgdParams(SgdConfig);

impl Default for SgdParams {
    /// The teachers' schedule of docs/study.md ([`SgdConfig::paper_teacher`]).
    fn default() -> Self {
        SgdParams(SgdConfig::paper_teacher())
    }
}

impl From<SgdConfig> for SgdParams {
    /// A schedule built elsewhere, to be checked.
    fn from(cfg: SgdConfig) -> Self {
        SgdParams(cfg)
    }
}

impl SgdParams {
    /// The paper's DP-SGD schedule ([`SgdConfig::paper_dpsgd`]).
    pub fn dpsgd() -> Self {
        SgdParams(SgdConfig::paper_dpsgd())
    }
    /// Epochs > 0.
    pub fn epochs(mut self, epochs: f64) -> Self {
        self.0.epochs = epochs;
        self
    }
    /// Batch size ≥ 1.
    pub fn batch_size(mut self, b: usize) -> Self {
        self.0.batch_size = b;
        self
    }
    /// Initial learning rate > 0.
    pub fn lr(mut self, lr: f64) -> Self {
        self.0.lr = lr;
        self
    }
    /// Momentum in [0, 1).
    pub fn momentum(mut self, momentum: f64) -> Self {
        self.0.momentum = momentum;
        self
    }
    /// Weight decay ≥ 0.
    pub fn weight_decay(mut self, wd: f64) -> Self {
        self.0.weight_decay = wd;
        self
    }
    /// Data augmentation on or off.
    pub fn augment(mut self, augment: bool) -> Self {
        self.0.augment = augment;
        self
    }
}

impl ParamGuard for SgdParams {
    type Checked = SgdConfig;
    type Error = NnError;

    fn check_ref(&self) -> Result<&SgdConfig> {
        let c = &self.0;
        p::positive("epochs", c.epochs)?;
        p::at_least_one("batch-size", c.batch_size)?;
        p::positive("lr", c.lr)?;
        p::unit_half_open("momentum", c.momentum)?;
        p::non_negative("weight-decay", c.weight_decay)?;
        Ok(c)
    }

    fn check(self) -> Result<SgdConfig> {
        self.check_ref()?;
        Ok(self.0)
    }
}

/// Unchecked DP-SGD (or subsample-and-aggregate) parameters of a ResNet: a schedule, ν, σ and
/// T; [`DpSgdParams::check_for`] validates them against the training-set size.
#[derive(Debug, Clone, PartialEq)]
pub struct DpSgdParams {
    sgd: SgdParams,
    clip: f64,
    noise_multiplier: f64,
    teachers: usize,
}

impl Default for DpSgdParams {
    /// The paper's DP-SGD schedule, ν and T of docs/study.md, σ = 0 until calibrated.
    fn default() -> Self {
        DpSgdParams {
            sgd: SgdParams::dpsgd(),
            clip: privpred_core::defaults::RESNET_CLIP,
            noise_multiplier: 0.0,
            teachers: privpred_core::defaults::RESNET_TEACHERS,
        }
    }
}

impl DpSgdParams {
    /// The schedule.
    pub fn sgd(mut self, sgd: SgdParams) -> Self {
        self.sgd = sgd;
        self
    }
    /// Clip ν > 0.
    pub fn clip(mut self, clip: f64) -> Self {
        self.clip = clip;
        self
    }
    /// Noise multiplier σ ≥ 0 (from the accountant, docs/guarantees.md#calibrations).
    pub fn noise_multiplier(mut self, sigma: f64) -> Self {
        self.noise_multiplier = sigma;
        self
    }
    /// Subsample-and-aggregate teachers T in 1..=N.
    pub fn teachers(mut self, t: usize) -> Self {
        self.teachers = t;
        self
    }
    /// The teacher count T, unchecked.
    pub fn teacher_count(&self) -> usize {
        self.teachers
    }

    /// Validates everything for a training set of `n` examples: the schedule, ν > 0, σ ≥ 0,
    /// batch size and T in 1..=n. Returns the joint-clipping, Poisson-sampling configuration
    /// the accountant covers ([`DpSgdConfig::corrected`]) and T.
    pub fn check_for(self, n: usize) -> Result<(DpSgdConfig, usize)> {
        let sgd = self.sgd.check()?;
        p::positive("clip", self.clip)?;
        p::non_negative("noise-multiplier", self.noise_multiplier)?;
        p::count_up_to("batch-size", sgd.batch_size, n, "the training-set size")?;
        let t = p::count_up_to(
            "teachers",
            self.teachers,
            n,
            "each teacher needs >= 1 example",
        )?;
        let cfg = DpSgdConfig::corrected(sgd, self.clip, self.noise_multiplier);
        cfg.validate(n)?;
        Ok((cfg, t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use privpred_core::defaults;

    fn refused<T: std::fmt::Debug>(r: Result<T>, name: &str, range: &str) {
        let e = r.expect_err("must be refused").to_string();
        assert!(e.contains(name) && e.contains(range), "{e}");
    }

    #[test]
    fn defaults_come_from_the_one_place() {
        let t = SgdParams::default().check().unwrap();
        assert_eq!(t.epochs, defaults::RESNET_TEACHER_EPOCHS);
        assert_eq!(t.batch_size, defaults::RESNET_BATCH_SIZE);
        assert_eq!(t.lr, defaults::RESNET_LEARNING_RATE);
        assert_eq!(t.lr_drops, defaults::RESNET_LR_DROPS);
        assert_eq!(t.momentum, defaults::RESNET_MOMENTUM);
        assert_eq!(t.weight_decay, defaults::RESNET_WEIGHT_DECAY);
        let d = SgdParams::dpsgd().check().unwrap();
        assert_eq!(d.epochs, defaults::RESNET_DPSGD_EPOCHS);
        let (cfg, t) = DpSgdParams::default().check_for(50_000).unwrap();
        assert_eq!(cfg.clip, defaults::RESNET_CLIP);
        assert_eq!(t, defaults::RESNET_TEACHERS);
        assert!(cfg.valid_guarantee());
    }

    #[test]
    fn each_bad_value_is_refused_with_its_name_and_range() {
        refused(SgdParams::default().epochs(0.0).check(), "epochs", "> 0");
        refused(
            SgdParams::default().epochs(f64::NAN).check(),
            "epochs",
            "> 0",
        );
        refused(SgdParams::default().lr(0.0).check(), "lr", "> 0");
        refused(SgdParams::default().lr(-0.1).check(), "lr", "> 0");
        refused(
            SgdParams::default().batch_size(0).check(),
            "batch-size",
            ">= 1",
        );
        refused(
            SgdParams::default().momentum(1.0).check(),
            "momentum",
            "[0, 1)",
        );
        refused(
            SgdParams::default().weight_decay(f64::NAN).check(),
            "weight-decay",
            ">= 0",
        );
        refused(
            DpSgdParams::default().clip(0.0).check_for(1000),
            "clip",
            "> 0",
        );
        refused(
            DpSgdParams::default().clip(f64::NAN).check_for(1000),
            "clip",
            "> 0",
        );
        refused(
            DpSgdParams::default()
                .noise_multiplier(-1.0)
                .check_for(1000),
            "noise-multiplier",
            ">= 0",
        );
        refused(
            DpSgdParams::default().teachers(0).check_for(1000),
            "teachers",
            "1..=1000",
        );
        refused(
            DpSgdParams::default().teachers(1001).check_for(1000),
            "teachers",
            "1..=1000",
        );
        refused(
            DpSgdParams::default().check_for(100),
            "batch-size",
            "1..=100",
        );
    }
}
