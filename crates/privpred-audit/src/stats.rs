//! Statistics of an audit: exact Clopper–Pearson bounds on a binomial proportion and the
//! lower bound on ε implied by a distinguishing test.
//!
//! A mechanism M is (ε, δ)-DP only if for every measurable set S and every neighbouring pair
//! (D, D′): P[M(D′) ∈ S] ≤ e^ε P[M(D) ∈ S] + δ, and the same with D and D′ swapped
//! (Dwork & Roth 2014, Def. 2.4). Estimating both probabilities from n trials each with
//! one-sided Clopper–Pearson bounds at level α/2 each gives, with probability ≥ 1 − α,
//!
//! ε ≥ ln((P̂_lower[M(D′) ∈ S] − δ) / P̂_upper[M(D) ∈ S])
//!
//! (Jagielski, Ullman & Oprea 2020, "Auditing differentially private machine learning",
//! Alg. 2; Nasr et al. 2021). The region S = {s ≥ t} (or its complement, read in the other
//! direction) of a scalar test statistic s is chosen on a *separate* half of the trials, so
//! the bound on the other half stays a valid (1 − α) confidence statement.

use crate::error::{AuditError, Result};
use serde::{Deserialize, Serialize};
use statrs::function::beta::beta_reg;
use statrs::function::erf::erfc_inv;

/// The q-quantile of Beta(a, b) by bisection on the regularised incomplete beta function
/// I_x(a, b) (statrs `beta_reg`), returning the end of the final bracket in the requested
/// `round` direction (down: F(x) ≤ q; up: F(x) ≥ q) so that bounds built on it are conservative.
fn beta_quantile(a: f64, b: f64, q: f64, round_up: bool) -> f64 {
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    for _ in 0..2000 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if beta_reg(a, b, mid) < q {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-15 * lo {
            break;
        }
    }
    if round_up { hi } else { lo }
}

/// One-sided Clopper–Pearson lower bound on a binomial proportion p from k successes in n
/// trials: P(p < bound) ≤ α. Equals the α-quantile of Beta(k, n − k + 1) (Clopper & Pearson
/// 1934), 0 when k = 0. Rounded down.
pub fn clopper_pearson_lower(k: u64, n: u64, alpha: f64) -> f64 {
    debug_assert!(k <= n && n > 0 && alpha > 0.0 && alpha < 1.0);
    if k == 0 {
        return 0.0;
    }
    beta_quantile(k as f64, (n - k + 1) as f64, alpha, false)
}

/// One-sided Clopper–Pearson upper bound: P(p > bound) ≤ α. Equals the (1 − α)-quantile of
/// Beta(k + 1, n − k), 1 when k = n. Rounded up.
pub fn clopper_pearson_upper(k: u64, n: u64, alpha: f64) -> f64 {
    debug_assert!(k <= n && n > 0 && alpha > 0.0 && alpha < 1.0);
    if k == n {
        return 1.0;
    }
    beta_quantile((k + 1) as f64, (n - k) as f64, 1.0 - alpha, true)
}

/// The standard-normal quantile z with P(Z > z) = α.
fn z_upper(alpha: f64) -> f64 {
    std::f64::consts::SQRT_2 * erfc_inv(2.0 * alpha)
}

/// Wilson score bounds (fast, approximate): used only to *choose* a region on the selection
/// half, never for the reported bound.
fn wilson(k: u64, n: u64, z: f64) -> (f64, f64) {
    let n = n as f64;
    let p = k as f64 / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// ln((p_alt − δ) / p_null), with ln(≤ 0) read as "no evidence" (0) and the result floored at 0.
fn eps_from(p_alt_lower: f64, p_null_upper: f64, delta: f64) -> f64 {
    let num = p_alt_lower - delta;
    if num <= 0.0 {
        return 0.0;
    }
    if p_null_upper <= 0.0 {
        return f64::INFINITY;
    }
    (num / p_null_upper).ln().max(0.0)
}

/// Lower bound on ε at confidence 1 − α from the counts of one region S:
/// `k_alt` of `n_alt` trials on the neighbour that are likelier under the region, `k_null` of
/// `n_null` on the other dataset. Each Clopper–Pearson bound is one-sided at α/2 (union bound).
pub fn epsilon_lower_from_counts(
    k_alt: u64,
    n_alt: u64,
    k_null: u64,
    n_null: u64,
    delta: f64,
    alpha: f64,
) -> f64 {
    let lo = clopper_pearson_lower(k_alt, n_alt, alpha / 2.0);
    let hi = clopper_pearson_upper(k_null, n_null, alpha / 2.0);
    eps_from(lo, hi, delta)
}

/// Which side of the threshold the rejection region S is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    /// S = {s ≥ t}.
    AtLeast,
    /// S = {s < t}.
    Below,
}

/// The region in words: `score ≥ t` or `score < t`.
impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::AtLeast => "score ≥ t",
            Side::Below => "score < t",
        })
    }
}

/// Which dataset the region S is likelier under: the bound is
/// ln((P[M(likelier) ∈ S] − δ) / P[M(other) ∈ S]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Likelier {
    /// S is likelier under D′ (the neighbour).
    Neighbour,
    /// S is likelier under D.
    Original,
}

/// `D′` (the neighbour) or `D` (the original).
impl std::fmt::Display for Likelier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Likelier::Neighbour => "D′",
            Likelier::Original => "D",
        })
    }
}

/// The result of a distinguishing test: a lower bound on ε with its confidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpsilonLowerBound {
    /// ε_lb: with probability ≥ `confidence` the mechanism's ε (at the given δ) is ≥ this value.
    pub epsilon_lower: f64,
    /// The plug-in estimate ln((p̂_alt − δ)/p̂_null) on the evaluation half (no confidence).
    pub epsilon_point: f64,
    /// 1 − α.
    pub confidence: f64,
    /// The δ subtracted.
    pub delta: f64,
    /// The threshold t of the region, chosen on the selection half.
    pub threshold: f64,
    /// The side of the region.
    pub side: Side,
    /// Which dataset the region is likelier under.
    pub likelier: Likelier,
    /// Trials per dataset used to choose the region.
    pub selection_trials: usize,
    /// Trials per dataset used for the bound.
    pub evaluation_trials: usize,
    /// Evaluation-half trials on D that fell in the region S.
    pub hits_d: u64,
    /// Evaluation-half trials on D′ that fell in the region.
    pub hits_d_prime: u64,
}

/// Counts of `sorted` at or above `t`.
fn count_at_least(sorted: &[f64], t: f64) -> u64 {
    (sorted.len() - sorted.partition_point(|&x| x < t)) as u64
}

/// Validates a confidence level in (0, 1).
pub fn check_confidence(confidence: f64) -> Result<()> {
    if !(confidence.is_finite() && confidence > 0.0 && confidence < 1.0) {
        return Err(AuditError::invalid(
            "confidence",
            confidence,
            "must be in (0, 1), e.g. 0.95",
        ));
    }
    Ok(())
}

/// The ε lower bound of the optimal threshold test on scalar statistics (larger ⇒ more
/// D′-like): `on_d[i]` from trials on D, `on_d_prime[i]` from trials on D′ (i.i.d.).
///
/// The first half of each sample chooses the region (threshold and side) that maximises a fast
/// Wilson-score version of the bound over every distinct observed threshold; the second half
/// evaluates that one region with exact Clopper–Pearson bounds. The result is a valid
/// (1 − α)-confidence lower bound whatever the selection did, since the halves are independent.
pub fn epsilon_lower_bound(
    on_d: &[f64],
    on_d_prime: &[f64],
    delta: f64,
    confidence: f64,
) -> Result<EpsilonLowerBound> {
    check_confidence(confidence)?;
    if !(delta.is_finite() && (0.0..1.0).contains(&delta)) {
        return Err(AuditError::invalid("delta", delta, "must be in [0, 1)"));
    }
    if on_d.len() < 4 || on_d_prime.len() < 4 {
        return Err(AuditError::invalid(
            "trials",
            on_d.len().min(on_d_prime.len()),
            "must be >= 4 per dataset",
        ));
    }
    if on_d.iter().chain(on_d_prime).any(|x| x.is_nan()) {
        return Err(AuditError::Run("a test statistic is NaN".into()));
    }
    let alpha = 1.0 - confidence;
    let (sel_d, eval_d) = on_d.split_at(on_d.len() / 2);
    let (sel_p, eval_p) = on_d_prime.split_at(on_d_prime.len() / 2);
    let sort = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v
    };
    let (sd, sp) = (sort(sel_d), sort(sel_p));
    let (nd, np) = (sd.len() as u64, sp.len() as u64);
    let z = z_upper(alpha / 2.0);
    let mut cands: Vec<f64> = sd.iter().chain(&sp).copied().collect();
    cands.sort_by(f64::total_cmp);
    cands.dedup();
    let mut best = (
        f64::NEG_INFINITY,
        cands[0],
        Side::AtLeast,
        Likelier::Neighbour,
    );
    let score = |k_alt: u64, n_alt: u64, k_null: u64, n_null: u64| -> f64 {
        let (lo, _) = wilson(k_alt, n_alt, z);
        let (_, hi) = wilson(k_null, n_null, z);
        if lo - delta <= 0.0 {
            // No evidence: rank by the plug-in ratio so that ties still prefer promising regions.
            return -1.0 / (1.0 + k_alt as f64);
        }
        ((lo - delta) / hi.max(1e-300)).ln()
    };
    for &t in &cands {
        let kd = count_at_least(&sd, t);
        let kp = count_at_least(&sp, t);
        for (side, hd, hp) in [(Side::AtLeast, kd, kp), (Side::Below, nd - kd, np - kp)] {
            for (lk, v) in [
                (Likelier::Neighbour, score(hp, np, hd, nd)),
                (Likelier::Original, score(hd, nd, hp, np)),
            ] {
                if v > best.0 {
                    best = (v, t, side, lk);
                }
            }
        }
    }
    let (_, t, side, likelier) = best;
    let (ed, ep) = (sort(eval_d), sort(eval_p));
    let (ned, nep) = (ed.len() as u64, ep.len() as u64);
    let (mut hits_d, mut hits_d_prime) = (count_at_least(&ed, t), count_at_least(&ep, t));
    if side == Side::Below {
        hits_d = ned - hits_d;
        hits_d_prime = nep - hits_d_prime;
    }
    let (lb, point) = match likelier {
        Likelier::Neighbour => (
            epsilon_lower_from_counts(hits_d_prime, nep, hits_d, ned, delta, alpha),
            eps_from(
                hits_d_prime as f64 / nep as f64,
                hits_d as f64 / ned as f64,
                delta,
            ),
        ),
        Likelier::Original => (
            epsilon_lower_from_counts(hits_d, ned, hits_d_prime, nep, delta, alpha),
            eps_from(
                hits_d as f64 / ned as f64,
                hits_d_prime as f64 / nep as f64,
                delta,
            ),
        ),
    };
    Ok(EpsilonLowerBound {
        epsilon_lower: lb,
        epsilon_point: point,
        confidence,
        delta,
        threshold: t,
        side,
        likelier,
        selection_trials: sd.len().min(sp.len()),
        evaluation_trials: ed.len().min(ep.len()),
        hits_d,
        hits_d_prime,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden values from SciPy 1.17.1, `scipy.stats.beta.ppf`:
    /// lower = beta.ppf(a, k, n-k+1) (0 if k == 0), upper = beta.ppf(1-a, k+1, n-k) (1 if k == n).
    const GOLDEN: &[(u64, u64, f64, f64, f64)] = &[
        (0, 10, 0.05, 0.0, 0.2588655508930522),
        (3, 10, 0.05, 0.08726443391415033, 0.6066242161054123),
        (10, 10, 0.05, 0.7411344491069477, 1.0),
        (50, 100, 0.05, 0.41362171463091174, 0.5863782853690882),
        (
            1,
            100000,
            0.05,
            5.129328123254254e-07,
            4.743775717386053e-05,
        ),
        (
            33,
            100000,
            0.05,
            0.00024153636742860004,
            0.0004412262763574194,
        ),
        (99990, 100000, 0.05, 0.9998303837123736, 0.9999457449733105),
        (7, 1000, 1e-6, 0.0005011984330338776, 0.028840877467286107),
        (500, 1000, 1e-6, 0.4247905072546365, 0.5752094927452731),
    ];

    #[test]
    fn clopper_pearson_matches_scipy() {
        for &(k, n, a, lo, hi) in GOLDEN {
            let l = clopper_pearson_lower(k, n, a);
            let h = clopper_pearson_upper(k, n, a);
            let tol = |x: f64| 1e-9 * x.abs().max(1e-300);
            assert!((l - lo).abs() <= tol(lo), "lower k={k} n={n}: {l} vs {lo}");
            assert!((h - hi).abs() <= tol(hi), "upper k={k} n={n}: {h} vs {hi}");
            // conservative rounding: F(lower) ≤ α and F(upper) ≥ 1 − α for our own beta_reg
            if k > 0 {
                assert!(beta_reg(k as f64, (n - k + 1) as f64, l) <= a);
            }
            if k < n {
                assert!(beta_reg((k + 1) as f64, (n - k) as f64, h) >= 1.0 - a);
            }
        }
    }

    #[test]
    fn bound_from_counts() {
        // equal counts: no evidence
        assert_eq!(
            epsilon_lower_from_counts(500, 1000, 500, 1000, 0.0, 0.05),
            0.0
        );
        // 900 vs 100 of 1000: plug-in ln 9 = 2.197, bound below it
        let e = epsilon_lower_from_counts(900, 1000, 100, 1000, 0.0, 0.05);
        assert!(e > 1.8 && e < 9f64.ln(), "{e}");
        // δ eats the numerator
        assert_eq!(epsilon_lower_from_counts(10, 1000, 0, 1000, 0.5, 0.05), 0.0);
    }

    #[test]
    fn identical_samples_give_no_evidence() {
        let a: Vec<f64> = (0..2000).map(|i| ((i * 7919) % 1000) as f64).collect();
        let r = epsilon_lower_bound(&a, &a, 0.0, 0.95).unwrap();
        assert_eq!(r.epsilon_lower, 0.0);
    }

    #[test]
    fn separated_samples_give_large_bound() {
        let d: Vec<f64> = (0..2000).map(|i| i as f64 / 2000.0).collect();
        let p: Vec<f64> = d.iter().map(|x| x + 10.0).collect();
        let r = epsilon_lower_bound(&d, &p, 0.0, 0.95).unwrap();
        // all 1000 of D′ in, none of D: ln(CP_lo(1000,1000)/CP_hi(0,1000)) ≈ ln(0.99747/0.00368)
        assert!(r.epsilon_lower > 5.0, "{r:?}");
        // mirrored: region below
        let r = epsilon_lower_bound(&p, &d, 0.0, 0.95).unwrap();
        assert_eq!(r.likelier, Likelier::Original);
        assert!(r.epsilon_lower > 5.0, "{r:?}");
    }

    #[test]
    fn rejects_bad_input() {
        assert!(epsilon_lower_bound(&[0.0; 10], &[0.0; 10], 0.0, 1.0).is_err());
        assert!(epsilon_lower_bound(&[0.0; 10], &[0.0; 10], 1.5, 0.9).is_err());
        assert!(epsilon_lower_bound(&[0.0; 2], &[0.0; 10], 0.0, 0.9).is_err());
        assert!(epsilon_lower_bound(&[f64::NAN; 10], &[0.0; 10], 0.0, 0.9).is_err());
    }
}
