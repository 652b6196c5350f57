//! Private selection: the permute-and-flip mechanism (McKenna & Sheldon, "Permute-and-Flip:
//! A new mechanism for differentially private selection", NeurIPS 2020), its exact output
//! distribution, and the expected quality of it and of the exponential mechanism.
//!
//! **The mechanism** (McKenna & Sheldon 2020, Algorithm 1). Given quality scores q_r of the
//! candidates r ∈ R and q* = max_r q_r, visit the candidates in a uniformly random order and
//! return the first r whose coin with probability p_r = exp(β·(q_r − q*)) comes up heads. The
//! paper writes β = ε/(2Δ) with Δ = max_r max_{D∼D′} |q_r(D) − q_r(D′)| (the sensitivity of
//! every single score) and proves (Theorem 1) that permute-and-flip is then ε-DP, and
//! (Theorem 2) that its expected quality E\[q_r\] is never below the exponential mechanism's
//! P(r) ∝ exp(β·q_r) at the same β (the exponential mechanism is also ε-DP at β = ε/(2Δ)).
//! The paper also notes that where the quality function is monotonic (all scores move in the
//! same direction between neighbours) the exponential mechanism may use β = ε/Δ; privpred's
//! releases are never monotonic (replace-one moves one vote up and another down; a replaced
//! example moves logits both ways), so the factor 2 is kept throughout.
//!
//! **Shift invariance.** Both mechanisms depend on the scores only through q − q* (the
//! exponential mechanism through q − any constant), so a neighbouring pair whose score change
//! d = q(D′) − q(D) has range max_r d_r − min_r d_r ≤ 2Δ' is, after subtracting the constant
//! (max d + min d)/2 from q(D′), a pair with per-score change ≤ Δ'. Theorem 1 (a statement
//! about any two score vectors within Δ of each other coordinate-wise) therefore holds with
//! Δ = range/2. Callers use this for the logits of prediction sensitivity
//! (`crate::calibrate::prediction_sensitivity`).
//!
//! **Exact distribution.** Give every candidate s an independent uniform arrival time U_s; the
//! visiting order is the order of arrival. Conditionally on U_r = t each other candidate s has
//! arrived before r with probability t, and then failed its coin with probability 1 − p_s, so
//! P(r) = p_r·∫₀¹ Π_{s≠r} (1 − p_s·t) dt, a polynomial integral evaluated exactly by
//! Gauss–Legendre quadrature ([`permute_and_flip_probabilities`]). The tests check it against a
//! direct enumeration of all |R|! orders.

use crate::error::{CoreError, Result};
use crate::noise::{exponential_mechanism_log_probabilities, sample_exponential_mechanism};
use crate::types::Noise;
use rand::Rng;

fn check_beta(beta: f64) -> Result<()> {
    if !(beta.is_finite() && beta >= 0.0) {
        return Err(CoreError::invalid(
            "beta",
            beta,
            "must be a finite number >= 0",
        ));
    }
    Ok(())
}

/// Validates the scores and returns the gaps x_r = β·(q* − q_r) ≥ 0 (0 at every maximum).
fn gaps<T: Copy + Into<f64>>(scores: &[T], beta: f64) -> Result<Vec<f64>> {
    check_beta(beta)?;
    if scores.is_empty() {
        return Err(CoreError::invalid(
            "scores",
            "[]",
            "must hold at least one class",
        ));
    }
    let q: Vec<f64> = scores.iter().map(|&s| s.into()).collect();
    if q.iter().any(|v| !v.is_finite()) {
        return Err(CoreError::invalid("scores", "non-finite", "must be finite"));
    }
    let top = q.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let x: Vec<f64> = q.iter().map(|&v| beta * (top - v)).collect();
    if x.iter().any(|v| !v.is_finite()) {
        return Err(CoreError::invalid(
            "beta * scores",
            "non-finite",
            "beta times the score range must be finite",
        ));
    }
    Ok(x)
}

/// One draw of permute-and-flip (McKenna & Sheldon 2020, Algorithm 1): the candidates in a
/// uniformly random order, each accepted with probability p_r = exp(β·(q_r − q*)); the first
/// accepted one is returned. ε-DP at β = ε/(2Δ) (Theorem 1 of the paper; Δ the sensitivity of
/// each score, see the module documentation). Drawn exactly
/// ([`crate::exact::permute_and_flip`]: exact uniform indices and exact exp(−γ) coins on the
/// exact rationals the scores and β are), so every candidate keeps exactly its probability.
pub fn sample_permute_and_flip<R: Rng + ?Sized, T: Copy + Into<f64>>(
    rng: &mut R,
    scores: &[T],
    beta: f64,
) -> Result<usize> {
    crate::exact::permute_and_flip(rng, scores, beta)
}

/// Gauss–Legendre nodes and weights on [0, 1] with `m` points (Newton on the Legendre
/// polynomial P_m from Chebyshev starting points; exact for polynomials of degree ≤ 2m − 1).
fn gauss_legendre01(m: usize) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(m);
    for i in 0..m {
        let mut z = (std::f64::consts::PI * (i as f64 + 0.75) / (m as f64 + 0.5)).cos();
        let mut dp = 1.0;
        for _ in 0..100 {
            let (mut p0, mut p1) = (1.0, z);
            for k in 2..=m {
                let p2 = ((2 * k - 1) as f64 * z * p1 - (k - 1) as f64 * p0) / k as f64;
                p0 = p1;
                p1 = p2;
            }
            if m == 1 {
                p0 = 1.0;
                p1 = z;
            }
            dp = m as f64 * (z * p1 - p0) / (z * z - 1.0);
            let dz = p1 / dp;
            z -= dz;
            if dz.abs() < 1e-16 {
                break;
            }
        }
        let w = 2.0 / ((1.0 - z * z) * dp * dp);
        out.push((0.5 * (1.0 - z), 0.5 * w));
    }
    out
}

/// The exact output distribution of permute-and-flip at β:
/// P(r) = p_r·∫₀¹ Π_{s≠r}(1 − p_s·t) dt with p_r = exp(β·(q_r − q*)) (see the module
/// documentation), by Gauss–Legendre quadrature with ⌈|R|/2⌉ + 1 nodes, exact for the degree
/// |R| − 1 integrand (positive weights: no cancellation). At most 4096 candidates.
pub fn permute_and_flip_probabilities<T: Copy + Into<f64>>(
    scores: &[T],
    beta: f64,
) -> Result<Vec<f64>> {
    let x = gaps(scores, beta)?;
    let n = x.len();
    if n > 4096 {
        return Err(CoreError::invalid(
            "scores",
            n,
            "exact permute-and-flip probabilities need at most 4096 candidates",
        ));
    }
    let p: Vec<f64> = x.iter().map(|v| (-v).exp()).collect();
    let nodes = gauss_legendre01(n / 2 + 1);
    let mut out = vec![0.0; n];
    for &(t, w) in &nodes {
        // Π_{s≠r}(1 − p_s t) = Π_s(1 − p_s t)/(1 − p_r t), in logs; a factor 1 − p_r·t = 0
        // only at t = 1, which is not a Gauss–Legendre node
        let logs: Vec<f64> = p.iter().map(|&ps| (-ps * t).ln_1p()).collect();
        let total: f64 = logs.iter().sum();
        for r in 0..n {
            out[r] += w * (total - logs[r]).exp();
        }
    }
    for r in 0..n {
        out[r] *= p[r];
    }
    Ok(out)
}

/// The expected quality Σ_r P(r)·q_r of a selection distribution `probs` over `scores`.
pub fn expected_quality<T: Copy + Into<f64>>(scores: &[T], probs: &[f64]) -> f64 {
    scores.iter().zip(probs).map(|(&s, &p)| s.into() * p).sum()
}

/// The selection side of [`Noise`] (here rather than in `crate::noise`, which this module
/// builds on).
impl Noise {
    /// Whether this is a selection mechanism (exponential mechanism or permute-and-flip): it
    /// releases a label only, never a score vector.
    pub fn is_selection(&self) -> bool {
        matches!(
            self,
            Noise::Exponential { .. } | Noise::PermuteAndFlip { .. }
        )
    }

    /// One draw of this selection mechanism over `scores` (the index of the selected
    /// candidate), drawn exactly: [`sample_exponential_mechanism`] for the exponential
    /// mechanism, [`sample_permute_and_flip`] for permute-and-flip. Additive noise is not a
    /// selection: it errors.
    pub fn select<R: Rng + ?Sized, T: Copy + Into<f64>>(
        &self,
        rng: &mut R,
        scores: &[T],
    ) -> Result<usize> {
        match *self {
            Noise::Exponential { beta } => sample_exponential_mechanism(rng, scores, beta),
            Noise::PermuteAndFlip { beta } => sample_permute_and_flip(rng, scores, beta),
            other => Err(CoreError::Unsupported(format!(
                "{} noise is additive, not a selection",
                other.distribution_name()
            ))),
        }
    }

    /// The exact output distribution of this selection mechanism over `scores`.
    pub fn selection_probabilities<T: Copy + Into<f64>>(&self, scores: &[T]) -> Result<Vec<f64>> {
        match *self {
            Noise::Exponential { beta } => {
                Ok(exponential_mechanism_log_probabilities(scores, beta)?
                    .into_iter()
                    .map(f64::exp)
                    .collect())
            }
            Noise::PermuteAndFlip { beta } => permute_and_flip_probabilities(scores, beta),
            other => Err(CoreError::Unsupported(format!(
                "{} noise is additive, not a selection",
                other.distribution_name()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::{exponential_mechanism_log_probabilities, seeded_rng};
    use crate::test_stats::chi2_crit;
    use rand::RngExt;

    /// P(r) by enumerating all n! visiting orders (Heap's algorithm): in each order the
    /// probability that r is returned is p_r·Π_{s before r}(1 − p_s). The independent golden
    /// for the quadrature and the sampler (McKenna & Sheldon 2020, Algorithm 1 read literally).
    fn pf_by_enumeration(scores: &[f64], beta: f64) -> Vec<f64> {
        let n = scores.len();
        let top = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let p: Vec<f64> = scores.iter().map(|&q| (beta * (q - top)).exp()).collect();
        let mut perm: Vec<usize> = (0..n).collect();
        let mut out = vec![0.0; n];
        let mut count = 0u64;
        let mut visit = |perm: &[usize]| {
            let mut fail = 1.0;
            for &r in perm {
                out[r] += fail * p[r];
                fail *= 1.0 - p[r];
            }
            count += 1;
        };
        // Heap's algorithm, iterative
        let mut c = vec![0usize; n];
        visit(&perm);
        let mut i = 0;
        while i < n {
            if c[i] < i {
                if i % 2 == 0 {
                    perm.swap(0, i);
                } else {
                    perm.swap(c[i], i);
                }
                visit(&perm);
                c[i] += 1;
                i = 0;
            } else {
                c[i] = 0;
                i += 1;
            }
        }
        out.iter().map(|v| v / count as f64).collect()
    }

    const CASES: &[(&[f64], f64)] = &[
        (&[3.0, 1.0], 0.5),
        (&[10.0, 9.0, 7.0, 0.0], 0.75),
        (&[2.0, 2.0, 1.0, 0.0, -1.0], 1.3),
        (&[0.3, -0.2, 0.05, 0.3, 0.1, -1.0], 4.0),
        (&[5.0, 4.0, 4.0, 1.0, 0.0, 0.0], 0.1),
    ];

    #[test]
    fn quadrature_matches_enumeration_of_all_orders() {
        for &(s, beta) in CASES {
            let q = permute_and_flip_probabilities(s, beta).unwrap();
            let e = pf_by_enumeration(s, beta);
            let total: f64 = q.iter().sum();
            assert!((total - 1.0).abs() < 1e-12, "{s:?}: sums to {total}");
            for (a, b) in q.iter().zip(&e) {
                assert!(
                    (a - b).abs() < 1e-12 * b.max(1e-3),
                    "{s:?} β {beta}: {q:?} vs {e:?}"
                );
            }
        }
        // the two-candidate closed form: P(runner-up) = ½·e^{−β·gap}
        let q = permute_and_flip_probabilities(&[3.0, 1.0], 0.5).unwrap();
        assert!((q[1] - 0.5 * (-1.0f64).exp()).abs() < 1e-15);
        // a single candidate, and β = 0 (uniform)
        assert_eq!(
            permute_and_flip_probabilities(&[1.0], 2.0).unwrap(),
            vec![1.0]
        );
        let u = permute_and_flip_probabilities(&[1.0, 5.0, -3.0], 0.0).unwrap();
        assert!(u.iter().all(|p| (p - 1.0 / 3.0).abs() < 1e-15), "{u:?}");
    }

    /// χ² of the sampler's frequencies against the enumerated distribution, α ≈ 1e-9, seeded.
    #[test]
    fn sampler_frequencies_match_enumeration() {
        let mut rng = seeded_rng(16);
        for &(s, beta) in CASES {
            let p = pf_by_enumeration(s, beta);
            let n = 200_000u64;
            let mut c = vec![0u64; s.len()];
            for _ in 0..n {
                c[sample_permute_and_flip(&mut rng, s, beta).unwrap()] += 1;
            }
            // pool classes with fewer than 50 expected draws into one cell
            let (mut obs, mut exp) = (Vec::new(), Vec::new());
            let (mut po, mut pe) = (0.0, 0.0);
            for (&ci, &pi) in c.iter().zip(&p) {
                if pi * (n as f64) < 50.0 {
                    po += ci as f64;
                    pe += pi * n as f64;
                } else {
                    obs.push(ci as f64);
                    exp.push(pi * n as f64);
                }
            }
            if pe > 0.0 {
                obs.push(po);
                exp.push(pe);
            }
            let x: f64 = obs.iter().zip(&exp).map(|(o, e)| (o - e).powi(2) / e).sum();
            let df = (obs.len() - 1).max(1) as f64;
            assert!(
                x < chi2_crit(df),
                "{s:?} β {beta}: χ² = {x}, {c:?} vs {p:?}"
            );
            // power: the distribution at 1.25·β (noise 20 % too small) is rejected
            let wrong = pf_by_enumeration(s, 1.25 * beta);
            let xw: f64 = c
                .iter()
                .zip(&wrong)
                .map(|(&o, &pw)| (o as f64 - pw * n as f64).powi(2) / (pw * n as f64))
                .sum();
            assert!(
                xw > chi2_crit((s.len() - 1) as f64),
                "{s:?} β {beta}: a 1.25× larger β was not detected (χ² = {xw})"
            );
        }
    }

    /// McKenna & Sheldon 2020, Theorem 2: at the same β permute-and-flip's expected quality is
    /// never below the exponential mechanism's (with equality only in degenerate cases).
    #[test]
    fn expected_quality_at_least_the_exponential_mechanisms() {
        let mut rng = seeded_rng(17);
        for case in 0..300 {
            let n = 2 + case % 9;
            let s: Vec<f64> = (0..n)
                .map(|_| (rng.random_range(0..2000) as f64) / 100.0)
                .collect();
            let beta = [0.01, 0.1, 0.5, 1.0, 3.0][case % 5];
            let pf = permute_and_flip_probabilities(&s, beta).unwrap();
            let em: Vec<f64> = exponential_mechanism_log_probabilities(&s, beta)
                .unwrap()
                .into_iter()
                .map(f64::exp)
                .collect();
            let (qp, qe) = (expected_quality(&s, &pf), expected_quality(&s, &em));
            assert!(qp >= qe - 1e-12, "{s:?} β {beta}: PF {qp} < EM {qe}");
        }
    }

    /// Serde: the new variant is `"distribution": "permute-and-flip"`, and a calibration noise
    /// written before it existed still reads as before.
    #[test]
    fn noise_serde_stays_compatible() {
        use crate::Noise;
        let v = serde_json::to_value(Noise::PermuteAndFlip { beta: 0.5 }).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"distribution": "permute-and-flip", "beta": 0.5})
        );
        let old: Noise =
            serde_json::from_str(r#"{"distribution":"exponential","beta":0.25}"#).unwrap();
        assert_eq!(old, Noise::Exponential { beta: 0.25 });
        let back: Noise = serde_json::from_value(v).unwrap();
        assert_eq!(back, Noise::PermuteAndFlip { beta: 0.5 });
    }

    #[test]
    fn bad_input_is_an_error() {
        let mut rng = seeded_rng(1);
        assert!(sample_permute_and_flip::<_, f64>(&mut rng, &[], 1.0).is_err());
        assert!(sample_permute_and_flip(&mut rng, &[1.0, f64::NAN], 1.0).is_err());
        assert!(sample_permute_and_flip(&mut rng, &[1.0, 2.0], -1.0).is_err());
        assert!(sample_permute_and_flip(&mut rng, &[1.0, 2.0], f64::INFINITY).is_err());
        // β·gap beyond the doubles is no error: the exact coins see the exact gap
        assert_eq!(
            sample_permute_and_flip(&mut rng, &[1e308, -1e308], 10.0).unwrap(),
            0
        );
        assert!(permute_and_flip_probabilities(&[0.0; 5000], 1.0).is_err());
        // integer vote counts work as scores
        let k = sample_permute_and_flip(&mut rng, &[3u32, 250, 3], 2.0).unwrap();
        assert!(k < 3);
    }
}
