//! The private split selection of λ (model sensitivity, loss perturbation, prediction
//! sensitivity, the teachers' λ of subsample-and-aggregate) or DP-SGD's clip ν: the
//! algorithm and its proof are in [`privpred_core::tuning`]; this module runs it on a
//! unit-ball training set.
//!
//! What one candidate run is, per method: every method is run as itself on its candidate part,
//! calibrated for the target (ε, δ) on that part's size. A private-training method (model
//! sensitivity, loss perturbation, DP-SGD) releases one certified model and labels the
//! hold-out with it (post-processing); a private-prediction method (prediction sensitivity,
//! subsample-and-aggregate) is calibrated for a budget of |H| answers and answers the |H|
//! hold-out queries, one fresh mechanism draw each. So each candidate is (ε, δ)-DP in its part
//! by the method's own theorem, which is what the proof needs.

use super::{MethodConfig, train_private};
use crate::error::{LinearError, Result};
use privpred_core::tuning::{SELECTION_FRACTION, SplitPlan, select_candidate};
use privpred_core::{Budget, Method, SelectionMethod};
use privpred_data::UnitBallDataset;
use privpred_data::split::permutation;
use rand::{Rng, RngExt};

/// Which hyper-parameter the selection chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob {
    /// λ (the teachers' λ for subsample-and-aggregate).
    Lambda,
    /// DP-SGD's clip ν.
    Clip,
}

/// The outcome of a private split selection.
#[derive(Debug, Clone)]
pub struct SplitSelection {
    /// The selected value.
    pub chosen: f64,
    /// The part the release is trained on (|F| examples).
    pub final_train: UnitBallDataset,
    /// The sizes of the parts.
    pub plan: SplitPlan,
    /// Each candidate's (value, hold-out correct count): un-noised statistics of the private
    /// data, for the data owner only (never released).
    pub private_counts: Vec<(f64, u64)>,
}

fn candidate_config(
    cfg: &MethodConfig,
    knob: Knob,
    value: f64,
    holdout_n: usize,
) -> Result<MethodConfig> {
    let mut c = cfg.clone();
    c.selection = SelectionMethod::Public;
    match (knob, c.method) {
        (Knob::Clip, Method::DpSgd) => c.dp_sgd.clip = Some(value),
        (Knob::Lambda, Method::SubsampleAggregate) => c.teacher_lambda = value,
        (
            Knob::Lambda,
            Method::ModelSensitivity | Method::LossPerturbation | Method::PredictionSensitivity,
        ) => c.lambda = value,
        (k, m) => {
            return Err(LinearError::invalid(
                "method",
                m,
                format!(
                    "no private selection of {} for this method (λ: model sensitivity, loss perturbation, prediction sensitivity, subsample-and-aggregate; clip: DP-SGD)",
                    match k {
                        Knob::Lambda => "λ",
                        Knob::Clip => "the clip ν",
                    }
                ),
            ));
        }
    }
    if !c.method.is_private_training() {
        // the candidate answers the |H| hold-out queries: its guarantee covers |H| answers
        c.budget = Budget::finite(holdout_n as u64)?;
    }
    Ok(c)
}

/// Refuses, before any work, a setting that does not fit the parts the selection trains on:
/// DP-SGD's expected batch size or subsample-and-aggregate's teacher count above the rows of
/// a candidate part or of the final part (named as such: the training set is `n` rows).
fn check_fits_parts(cfg: &MethodConfig, plan: &SplitPlan, n: usize) -> Result<()> {
    let rows = plan.part_n.min(plan.final_n);
    let (name, value) = match cfg.method {
        Method::DpSgd => ("batch-size", cfg.dp_sgd.batch_size),
        Method::SubsampleAggregate => ("teachers", cfg.teachers),
        _ => return Ok(()),
    };
    if value > rows {
        return Err(LinearError::invalid(
            name,
            value,
            format!(
                "must be in 1..={rows} for the private selection, whose candidates and release each train on a part of the training set: its N = {n} rows are cut into {} candidate parts of {} rows, a hold-out of {} and a final part of {} rows; give a public value instead (--lambda VALUE / --clip VALUE) or a smaller {name}",
                plan.candidates, plan.part_n, plan.holdout_n, plan.final_n
            ),
        ));
    }
    Ok(())
}

/// Checks, before any work, that the private split selection of a grid of `candidates` values
/// can run for `cfg` on `n` training rows: the guarantee's record covers it (not under
/// add-remove), the rows cut into the parts, and DP-SGD's batch or the teacher count fits each
/// part. Returns the parts' sizes (the release trains on `final_n` rows).
pub fn check_private_split(cfg: &MethodConfig, n: usize, candidates: usize) -> Result<SplitPlan> {
    // the guarantee's record refuses what the proof does not cover (add-remove)
    privpred_core::Selection::derive(SelectionMethod::PrivateSplit, cfg.privacy, cfg.neighbours)?;
    let plan = SplitPlan::new(n, candidates, SELECTION_FRACTION)?;
    check_fits_parts(cfg, &plan, n)?;
    Ok(plan)
}

/// Runs the private split selection of `knob` over `grid` for `cfg` on `train`
/// ([`privpred_core::tuning`]): returns the chosen value and the final part, on which the
/// caller trains the release with `cfg` (and [`SelectionMethod::PrivateSplit`]). The
/// permutation, every candidate's noise and the selection are drawn from `rng`.
pub fn private_split_select<R: Rng + ?Sized>(
    cfg: &MethodConfig,
    train: &UnitBallDataset,
    grid: &[f64],
    knob: Knob,
    rng: &mut R,
) -> Result<SplitSelection> {
    let plan = check_private_split(cfg, train.n, grid.len())?;
    let perm = permutation(train.n, rng.random());
    let holdout = train.subset(&perm[plan.holdout_range()]);
    let mut private_counts = Vec::with_capacity(grid.len());
    for (i, &v) in grid.iter().enumerate() {
        let c = candidate_config(cfg, knob, v, plan.holdout_n)?;
        let part = train.subset(&perm[plan.part_range(i)]);
        let p = train_private(&c, &part, rng)?;
        let labels = p.predict_dataset(&holdout, rng)?;
        let correct = labels
            .iter()
            .zip(&holdout.labels)
            .filter(|(a, b)| a == b)
            .count() as u64;
        private_counts.push((v, correct));
    }
    let counts: Vec<u64> = private_counts.iter().map(|&(_, c)| c).collect();
    let i = select_candidate(rng, &counts, cfg.privacy.epsilon())?;
    Ok(SplitSelection {
        chosen: grid[i],
        final_train: train.subset(&perm[plan.final_range()]),
        plan,
        private_counts,
    })
}
