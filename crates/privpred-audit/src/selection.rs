//! Audits of the label-only selection mechanisms of `tight` (docs/guarantees.md#calibrations): permute-and-flip over
//! the teachers' votes (subsample-and-aggregate, δ = 0) and the selection over the logits
//! (prediction sensitivity, δ = 0; permute-and-flip or the exponential mechanism).
//!
//! Each trial draws B answers with the product's sampler ([`privpred_core::Noise::select`])
//! on the scores of D or of D′, and sums the exact per-answer log-likelihood ratio
//! ln P_{D′}(y)/P_D(y), computed once from the mechanism's exact distribution
//! ([`privpred_core::Noise::selection_probabilities`]): every threshold test on the sum is a
//! Neyman–Pearson optimal test of the B answers.

use crate::error::{AuditError, Result};
use crate::mechanisms::Mechanism;
use privpred_core::Noise;
use rand_chacha::ChaCha20Rng;

fn core_err(e: privpred_core::CoreError) -> AuditError {
    AuditError::Calibration(e)
}

/// A selection mechanism on a fixed pair of score vectors, B answers per trial.
#[derive(Debug, Clone)]
pub struct Selection {
    /// The product's calibrated selection (exponential mechanism or permute-and-flip).
    pub noise: Noise,
    /// The scores on D.
    pub scores: Vec<f64>,
    /// The scores on D′.
    pub scores_neighbour: Vec<f64>,
    /// Answers per trial (the budget B).
    pub answers: u64,
    /// ln P_{D′}(y)/P_D(y) per candidate (exact).
    pub log_ratio: Vec<f64>,
}

impl Selection {
    /// The pair (`scores`, `scores_neighbour`) under `noise`; the exact log-likelihood ratios
    /// are computed here (a candidate impossible on one side gets ±700, beyond any bound an
    /// audit can reach).
    pub fn new(
        noise: Noise,
        scores: Vec<f64>,
        scores_neighbour: Vec<f64>,
        answers: u64,
    ) -> Result<Self> {
        if !noise.is_selection() {
            return Err(AuditError::Unsupported(format!(
                "a selection audit needs a selection mechanism, not {noise}"
            )));
        }
        if scores.len() != scores_neighbour.len() || scores.len() < 2 {
            return Err(AuditError::invalid(
                "classes",
                scores.len(),
                "both score vectors must have the same length >= 2",
            ));
        }
        if answers == 0 {
            return Err(AuditError::invalid("budget", answers, "must be >= 1"));
        }
        let p = noise.selection_probabilities(&scores).map_err(core_err)?;
        let q = noise
            .selection_probabilities(&scores_neighbour)
            .map_err(core_err)?;
        let log_ratio = p
            .iter()
            .zip(&q)
            .map(|(&a, &b)| match (a > 0.0, b > 0.0) {
                (true, true) => (b / a).ln(),
                (false, true) => 700.0,
                (true, false) => -700.0,
                (false, false) => 0.0,
            })
            .collect();
        Ok(Selection {
            noise,
            scores,
            scores_neighbour,
            answers,
            log_ratio,
        })
    }

    /// Subsample-and-aggregate's worst case for permute-and-flip: T votes split
    /// (⌊T/2⌋ + 1, ⌈T/2⌉ − 1) between classes 0 and 1 (a gap of 2; 1 for odd T), none on the
    /// rest; D′ moves one teacher's vote from class 0 to class 1 (replace-one changes one
    /// teacher's vote). For even T the rare class's probability goes from ½e^{−2β} to ½ (a
    /// tie): the ratio e^{2β} = e^{ε₀} of the proof, at the most observable probability.
    pub fn votes_pair(noise: Noise, classes: usize, teachers: usize, answers: u64) -> Result<Self> {
        if classes < 2 || teachers < 2 {
            return Err(AuditError::invalid(
                "teachers",
                teachers,
                "needs >= 2 teachers and >= 2 classes",
            ));
        }
        let mut v = vec![0.0; classes];
        v[0] = (teachers / 2 + 1) as f64;
        v[1] = (teachers - teachers / 2 - 1) as f64;
        let mut w = v.clone();
        w[0] -= 1.0;
        w[1] += 1.0;
        Self::new(noise, v, w, answers)
    }

    /// The private split selection's worst case (`privpred_core::tuning`): two candidates
    /// whose hold-out correct counts are (2, 0) on D; D′ replaces one hold-out example that
    /// the first candidate labelled right and the second wrong by one where it is the other
    /// way round: (1, 1). Permute-and-flip at β = ε/2 then moves the second candidate's
    /// probability from e^{−2β}/2 to 1/2: the ratio e^{2β} = e^ε of the proof, at the most
    /// observable probability (a tie on D′).
    pub fn holdout_pair(noise: Noise) -> Result<Self> {
        Self::new(noise, vec![2.0, 0.0], vec![1.0, 1.0], 1)
    }

    /// Prediction sensitivity's worst case for a selection over the logits: the replaced
    /// example moves the logits of a unit-norm query by d = (Δ/√2, −Δ/√2, 0, …) (‖d‖₂ = Δ,
    /// the largest range √2Δ the sensitivity allows). On D class 1 leads class 0 by a margin
    /// m and the other classes sit 40/β below (out of play); the margin is chosen from
    /// {k·√2Δ/8 : k = 0..32} to maximise the single-answer bound an audit with `trials`
    /// trials per dataset would reach from the exact probabilities (no trial data is used).
    pub fn logits_pair(
        noise: Noise,
        classes: usize,
        sensitivity: f64,
        answers: u64,
        trials: usize,
        delta: f64,
        confidence: f64,
    ) -> Result<Self> {
        let beta = match noise {
            Noise::Exponential { beta } | Noise::PermuteAndFlip { beta } => beta,
            other => {
                return Err(AuditError::Unsupported(format!(
                    "a selection audit needs a selection mechanism, not {other}"
                )));
            }
        };
        if classes < 2 {
            return Err(AuditError::invalid("classes", classes, "must be >= 2"));
        }
        if !(sensitivity.is_finite() && sensitivity > 0.0 && beta > 0.0) {
            return Err(AuditError::invalid(
                "sensitivity",
                sensitivity,
                "must be a finite number > 0 (and beta > 0)",
            ));
        }
        let h = sensitivity / std::f64::consts::SQRT_2;
        let pair = |m: f64| {
            let mut d = vec![-40.0 / beta; classes];
            d[0] = 0.0;
            d[1] = m;
            let mut dp = d.clone();
            dp[0] += h;
            dp[1] -= h;
            (d, dp)
        };
        let n = (trials / 2).max(1) as u64;
        let alpha = 1.0 - confidence;
        let count = |p: f64| ((p * n as f64).round() as u64).min(n);
        let mut best: Option<(f64, f64)> = None;
        for k in 0..=32 {
            let m = k as f64 * 2.0 * h / 8.0;
            let (d, dp) = pair(m);
            let p = noise.selection_probabilities(&d).map_err(core_err)?;
            let q = noise.selection_probabilities(&dp).map_err(core_err)?;
            let up = crate::stats::epsilon_lower_from_counts(
                count(q[0]),
                n,
                count(p[0]),
                n,
                delta,
                alpha,
            );
            let dn = crate::stats::epsilon_lower_from_counts(
                count(1.0 - p[0]),
                n,
                count(1.0 - q[0]),
                n,
                delta,
                alpha,
            );
            let score = up.max(dn);
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, m));
            }
        }
        let (_, m) = best.expect("at least one margin");
        let (d, dp) = pair(m);
        Self::new(noise, d, dp, answers)
    }
}

impl Mechanism for Selection {
    fn trial(&self, on_neighbour: bool, rng: &mut ChaCha20Rng) -> Result<f64> {
        let s = if on_neighbour {
            &self.scores_neighbour
        } else {
            &self.scores
        };
        let mut total = 0.0;
        for _ in 0..self.answers {
            let y = crate::product::select(&self.noise, rng, s).map_err(core_err)?;
            total += self.log_ratio[y];
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vote pair realises the proof's ratio exactly: e^{2β} on the rare class.
    #[test]
    fn votes_pair_reaches_the_bound() {
        let beta = 0.7;
        let s = Selection::votes_pair(Noise::PermuteAndFlip { beta }, 10, 256, 1).unwrap();
        assert_eq!(s.scores[0] - s.scores[1], 2.0);
        assert!(
            (s.log_ratio[1] - 2.0 * beta).abs() < 1e-12,
            "{:?}",
            s.log_ratio
        );
        assert!(s.log_ratio.iter().all(|&l| l <= 2.0 * beta + 1e-12));
    }

    /// Over the logits no ratio exceeds e^{β·√2·Δ} (the proof's ε₀), for both mechanisms.
    #[test]
    fn logits_pair_stays_within_the_bound() {
        let (beta, delta_s) = (2.0, 0.5);
        for noise in [Noise::PermuteAndFlip { beta }, Noise::Exponential { beta }] {
            let s = Selection::logits_pair(noise, 10, delta_s, 1, 100_000, 0.0, 0.95).unwrap();
            let bound = beta * std::f64::consts::SQRT_2 * delta_s;
            assert!(
                s.log_ratio.iter().all(|&l| l.abs() <= bound + 1e-9),
                "{noise:?}: {:?}",
                s.log_ratio
            );
            // the chosen pair reaches the bound in one of the two directions
            let top = s.log_ratio[..2].iter().fold(0.0f64, |a, l| a.max(l.abs()));
            assert!(top > 0.9 * bound, "{noise:?}: {:?}", s.log_ratio);
        }
        assert!(
            Selection::logits_pair(Noise::Gaussian { sigma: 1.0 }, 10, 1.0, 1, 10, 0.0, 0.95)
                .is_err()
        );
    }
}
