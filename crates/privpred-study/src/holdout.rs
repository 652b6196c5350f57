//! Hold-out accuracy of the private mechanisms on the study's validation split — the 10 %
//! hold-out of the training set that cross-validation uses (docs/study.md), never the test set —
//! for choosing preprocessing and selection defaults by measurement (the bias value
//! and the number of private draws per cross-validated λ). `cargo run --release -p
//! privpred-study --example holdout` regenerates the tables of docs/study.md.
//!
//! Every draw is one run of the mechanism the study releases, trained on the 90 % part and
//! scored on the hold-out: model sensitivity and prediction sensitivity draw fresh noise around
//! the shared non-private fit θ*(λ) (exact, see `privpred_linear::methods`), loss perturbation
//! refits per draw (λ values with the same ρ_eff = max(ρ, Nλ) and the same noise define the
//! same mechanism and share their draws), subsample-and-aggregate draws the exponential
//! mechanism over the votes of T teachers trained on disjoint slices of the 90 % part.

use crate::error::{Result, StudyError};
use crate::figures::{FigureId, Setting};
use crate::linear::{CalibrationInput, LinearRunner, calibrate, mechanism_id};
use crate::units::{Group, rng_for};
use privpred_core::{CalibrationMode, Mechanism, Method};
use privpred_linear::methods::{VoteMatrix, teacher_lbfgs_options, train_teachers};
use privpred_linear::train::accuracy_of;
use rayon::prelude::*;
use std::collections::HashMap;

/// The hold-out accuracies of one mechanism at one hyper-parameter value.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HoldoutPoint {
    /// λ (None: the method has none, subsample-and-aggregate).
    pub lambda: Option<f64>,
    /// One hold-out accuracy per private draw.
    pub accuracies: Vec<f64>,
}

/// The group a hold-out measurement stands for: `method` at (ε, δ, B) with T teachers, in
/// `corrected` calibration, on the runner's dataset (fig1a's data configuration: the whole
/// training set, raw pixels, all classes).
pub fn group(method: Method, epsilon: f64, delta: f64, budget: u64, teachers: usize) -> Group {
    let setting = Setting {
        epsilon,
        delta,
        budget,
        n: None,
        dim: None,
        classes: None,
        lambda: None,
        teachers,
    };
    Group {
        figure: FigureId::Fig1a,
        calibration: CalibrationMode::Corrected,
        method,
        setting_index: 0,
        setting,
        x: epsilon,
        series: format!("holdout/{}", method.name()),
    }
}

/// `draws` hold-out accuracies of `g.method` (model sensitivity, prediction sensitivity or loss
/// perturbation) at each λ of `lambdas`, trained on the 90 % part. Seeded from `seed` and the
/// group and λ, so a rerun reproduces them. λ values run in parallel.
pub fn lambda_draws(
    runner: &LinearRunner,
    g: &Group,
    lambdas: &[f64],
    draws: usize,
    seed: u64,
) -> Result<Vec<HoldoutPoint>> {
    let (key, p) = runner.prepared(g, seed)?;
    let s = g.setting;
    let (n90, c) = (p.train90.n, p.train90.classes);
    let dpsgd = runner.dpsgd_config(s.epsilon);
    let neighbours = runner.options_ref().neighbours;
    let cal_at = |l: f64| {
        calibrate(&CalibrationInput {
            method: g.method,
            mode: g.calibration,
            epsilon: s.epsilon,
            delta: s.delta,
            budget: s.budget,
            n: n90,
            classes: c,
            lambda: Some(l),
            dpsgd: &dpsgd,
            neighbours,
            loss: runner.options_ref().loss(g.method, c),
        })
    };
    // loss perturbation: λ values defining the same mechanism (same ρ_eff, noise, certificate
    // and constants: `mechanism_id`, as cross-validation ties them) share draws
    let mut mechanism = Vec::with_capacity(lambdas.len());
    for &l in lambdas {
        let cal = cal_at(l)?;
        let id = mechanism_id(g.method, &cal, l, n90, c);
        mechanism.push((l, cal, id));
    }
    let mut first: HashMap<&str, f64> = HashMap::new();
    let distinct: Vec<_> = mechanism
        .iter()
        .filter(|(l, _, id)| *first.entry(id.as_str()).or_insert(*l) == *l)
        .collect();
    let computed: Vec<(String, Vec<f64>)> = distinct
        .par_iter()
        .map(|(l, cal, id)| {
            let mut rng = rng_for(seed, &format!("holdout/{}/lambda={l}", g.id()));
            let acc = (0..draws)
                .map(|_| runner.holdout_draw(g.method, &key, &p, cal, *l, &mut rng))
                .collect::<Result<Vec<f64>>>()?;
            Ok((id.clone(), acc))
        })
        .collect::<Result<_>>()?;
    let by_id: HashMap<String, Vec<f64>> = computed.into_iter().collect();
    Ok(mechanism
        .iter()
        .map(|(l, _, id)| HoldoutPoint {
            lambda: Some(*l),
            accuracies: by_id.get(id).cloned().unwrap_or_default(),
        })
        .collect())
}

/// The votes of `teachers` teachers trained on disjoint slices of the 90 % part (without L2,
/// as the study's), on the hold-out. Shared by every ε of a data configuration.
pub fn holdout_votes(
    runner: &LinearRunner,
    g: &Group,
    teachers: usize,
    seed: u64,
) -> Result<VoteMatrix> {
    let (key, p) = runner.prepared(g, seed)?;
    let mut rng = rng_for(seed, &format!("holdout/teachers/{key}/T={teachers}"));
    let t = train_teachers(
        &p.train90,
        teachers,
        0.0,
        &teacher_lbfgs_options(),
        &mut rng,
    )?;
    Ok(t.vote_matrix(&p.hold)?)
}

/// `draws` hold-out accuracies of subsample-and-aggregate at `g`'s (ε, δ, B) on the hold-out
/// votes of [`holdout_votes`] (teachers on the 90 % part; the calibration for its N).
pub fn votes_draws(
    runner: &LinearRunner,
    g: &Group,
    votes: &VoteMatrix,
    draws: usize,
    seed: u64,
) -> Result<HoldoutPoint> {
    let (_, p) = runner.prepared(g, seed)?;
    let s = g.setting;
    let cal = calibrate(&CalibrationInput {
        method: Method::SubsampleAggregate,
        mode: g.calibration,
        epsilon: s.epsilon,
        delta: s.delta,
        budget: s.budget,
        n: p.train90.n,
        classes: p.train90.classes,
        lambda: None,
        dpsgd: &runner.dpsgd_config(s.epsilon),
        neighbours: runner.options_ref().neighbours,
        loss: privpred_core::Loss::Softmax,
    })?;
    // the hold-out study measures the exponential mechanism over the votes; the draws are
    // made by the calibration's own mechanism
    if !matches!(cal.mechanism, Mechanism::Exponential { .. }) {
        let other = cal.noise();
        return Err(StudyError::Compute {
            context: g.id(),
            message: format!("subsample-and-aggregate calibrated with {other} noise"),
        });
    }
    let mut rng = rng_for(seed, &format!("holdout/{}", g.id()));
    let accuracies = (0..draws)
        .map(|_| {
            Ok(accuracy_of(
                &votes.private_labels_with(&cal.mechanism, &mut rng)?,
                &p.hold.labels,
            ))
        })
        .collect::<Result<Vec<f64>>>()?;
    Ok(HoldoutPoint {
        lambda: None,
        accuracies,
    })
}

/// How often each index is picked when each of `selections` selections draws `k` of the pooled
/// draws of every candidate (without replacement within a selection) and picks the candidate
/// with the highest mean (ties → first, as cross-validation does). With pools much larger than
/// k the selections are close to independent runs of cross-validation with k draws.
pub fn pick_counts(pools: &[Vec<f64>], k: usize, selections: usize, seed: u64) -> Vec<usize> {
    use rand::seq::SliceRandom;
    let mut counts = vec![0; pools.len()];
    let mut rng = rng_for(seed, &format!("pick-counts/k={k}"));
    for _ in 0..selections {
        let means: Vec<f64> = pools
            .iter()
            .map(|pool| {
                let mut idx: Vec<usize> = (0..pool.len()).collect();
                let (chosen, _) = idx.partial_shuffle(&mut rng, k.min(pool.len()));
                chosen.iter().map(|&i| pool[i]).sum::<f64>() / chosen.len().max(1) as f64
            })
            .collect();
        let mut best = 0;
        for (i, m) in means.iter().enumerate() {
            if *m > means[best] {
                best = i;
            }
        }
        counts[best] += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A candidate whose single draws often look best but whose mean is worse loses once
    /// enough draws are averaged.
    #[test]
    fn pick_counts_favour_the_best_mean_as_k_grows() {
        // candidate 0: mean 0.5 with a rare 0.95 draw; candidate 1: always 0.6
        let mut noisy = vec![0.45; 90];
        noisy.extend(vec![0.95; 10]);
        let pools = vec![noisy, vec![0.6; 100]];
        let one = pick_counts(&pools, 1, 1000, 1);
        let many = pick_counts(&pools, 50, 1000, 1);
        assert!(one[0] > 50 && one[0] < 200, "{one:?}");
        assert_eq!(many, vec![0, 1000]);
    }
}
