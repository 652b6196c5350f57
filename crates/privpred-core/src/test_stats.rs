//! The statistical checks the samplers' tests share: each fails a correct sampler with
//! probability about 1e-9, so a failure means a wrong law (or too little noise), not bad luck.

use rand::SeedableRng;

/// A seeded ChaCha20 generator for the samplers' tests (a leaf twin of
/// `crate::noise::seeded_rng`, so that modules below `noise` can use it).
pub(crate) fn seeded_rng(seed: u64) -> rand_chacha::ChaCha20Rng {
    rand_chacha::ChaCha20Rng::seed_from_u64(seed)
}

/// Chi-square critical value at α ≈ 1e-9 (z = 6.0, Wilson–Hilferty).
pub(crate) fn chi2_crit(df: f64) -> f64 {
    let z = 6.0;
    let a = 2.0 / (9.0 * df);
    df * (1.0 - a + z * a.sqrt()).powi(3)
}

/// Pearson's statistic of `counts` (out of `n` draws) against the probabilities `probs`.
pub(crate) fn chi2(counts: &[u64], probs: &[f64], n: u64) -> f64 {
    counts
        .iter()
        .zip(probs)
        .map(|(&c, &p)| {
            let e = p * n as f64;
            (c as f64 - e).powi(2) / e
        })
        .sum()
}

/// Two-sided binomial check at α ≈ 1e-9 (|z| ≤ 6.1): `heads` of `n` flips of a p-coin.
pub(crate) fn binomial_ok(heads: u64, n: u64, p: f64) -> bool {
    let e = n as f64 * p;
    let sd = (n as f64 * p * (1.0 - p)).sqrt();
    (heads as f64 - e).abs() <= 6.1 * sd.max(1e-12)
}
