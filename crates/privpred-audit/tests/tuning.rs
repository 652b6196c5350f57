//! Audit of the private split selection of λ or the clip (`privpred_core::tuning`) on its
//! worst-case neighbouring pair: the hold-out correct counts (2, 0) on D and (1, 1) on D′
//! ([`Selection::holdout_pair`]), selected by the product's permute-and-flip at the product's
//! β ([`privpred_core::tuning::holdout_beta`]). The candidates themselves are each the
//! method's own mechanism on a disjoint part (audited with the methods), and the release
//! given the selection is too: the selection step is the one new mechanism.
//!
//! The empirical lower bound on ε (Clopper–Pearson, confidence 1 − 1e-9, so a false alarm has
//! probability ≤ 1e-9) must stay ≤ ε at the product's β, and must exceed ε when the noise is
//! halved (β = ε, the monotone-score calibration that replace-one does not allow).

use privpred_audit::mechanisms::run_trials;
use privpred_audit::selection::Selection;
use privpred_audit::stats::epsilon_lower_bound;
use privpred_core::Noise;
use privpred_core::tuning::holdout_beta;

const TRIALS: usize = 200_000;
const CONFIDENCE: f64 = 1.0 - 1e-9;

fn audited(eps: f64, beta: f64, seed: u64) -> f64 {
    let pair = Selection::holdout_pair(Noise::PermuteAndFlip { beta }).unwrap();
    let (d, dp) = run_trials(&pair, TRIALS, seed).unwrap();
    let b = epsilon_lower_bound(&d, &dp, 0.0, CONFIDENCE).unwrap();
    eprintln!(
        "privpred-audit tuning: eps = {eps}, beta = {beta}: lower bound {:.4} ({} trials per dataset)",
        b.epsilon_lower, TRIALS
    );
    b.epsilon_lower
}

#[test]
fn the_private_selection_stays_within_epsilon_on_its_worst_case_pair() {
    for (eps, seed) in [(0.5, 11), (1.0, 12), (2.0, 13)] {
        let pair = Selection::holdout_pair(Noise::PermuteAndFlip {
            beta: holdout_beta(eps),
        })
        .unwrap();
        // the pair realises the proof's ratio e^ε exactly
        assert!(
            (pair.log_ratio[1] - eps).abs() < 1e-12,
            "{:?}",
            pair.log_ratio
        );
        let lb = audited(eps, holdout_beta(eps), seed);
        assert!(lb <= eps, "eps = {eps}: audited lower bound {lb}");
        // and the audit is tight enough to see most of it
        assert!(lb > 0.8 * eps, "eps = {eps}: audited lower bound {lb}");
    }
}

#[test]
fn the_audit_exposes_a_selection_with_half_the_noise() {
    for (eps, seed) in [(0.5, 21), (1.0, 22)] {
        let lb = audited(eps, 2.0 * holdout_beta(eps), seed);
        assert!(lb > eps, "eps = {eps}: half the noise not exposed ({lb})");
    }
}
