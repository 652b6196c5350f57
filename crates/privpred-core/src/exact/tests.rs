//! Statistical tests of the exact samplers against their exact distributions, each at a
//! fixed false-positive rate of about 1e-9 (z = 6), and power checks: the same tests reject a
//! sampler whose scale is 10 % too small. The selections' distributions are tested in
//! `crate::select` and `crate::noise`, beside their exact probabilities.

use super::*;
use crate::test_stats::{chi2_crit, seeded_rng};

/// Pearson's statistic of `counts` against `probs` (bins with expected count < 5 pooled into
/// one) and its degrees of freedom.
fn chi2(counts: &[u64], probs: &[f64]) -> (f64, f64) {
    let n: u64 = counts.iter().sum();
    let (mut stat, mut bins) = (0.0, 0usize);
    let (mut pool_o, mut pool_e) = (0.0, 0.0);
    for (&o, &p) in counts.iter().zip(probs) {
        let e = p * n as f64;
        if e < 5.0 {
            pool_o += o as f64;
            pool_e += e;
            continue;
        }
        stat += (o as f64 - e).powi(2) / e;
        bins += 1;
    }
    if pool_e > 0.0 {
        stat += (pool_o - pool_e).powi(2) / pool_e.max(1e-300);
        bins += 1;
    }
    (stat, (bins.max(2) - 1) as f64)
}

fn passes(counts: &[u64], probs: &[f64]) -> bool {
    let (stat, df) = chi2(counts, probs);
    stat < chi2_crit(df)
}

#[test]
fn doubles_are_read_as_their_exact_dyadic_values() {
    // golden: Python's fractions.Fraction(0.1) and Fraction(5e-324) (an independent exact
    // conversion of the same doubles)
    let same = |r: &Rational, num: BigUint, den: BigUint| r.numer() * den == num * r.denom();
    let r = Rational::from_f64(0.1).unwrap();
    assert!(same(
        &r,
        BigUint::from(3602879701896397u64),
        BigUint::one() << 55u32
    ));
    assert!(!same(
        &r,
        BigUint::from(3602879701896398u64),
        BigUint::one() << 55u32
    ));
    let sub = Rational::from_f64(f64::from_bits(1)).unwrap();
    assert!(same(&sub, BigUint::one(), BigUint::one() << 1074u32));
    let big = Rational::from_f64(3.0 * 2f64.powi(60)).unwrap();
    assert!(same(&big, BigUint::from(3u32) << 60u32, BigUint::one()));
    assert!(Rational::from_f64(0.0).unwrap().is_zero());
    assert!(Rational::from_f64(-1.0).is_err());
    assert!(Rational::from_f64(f64::NAN).is_err());
}

#[test]
fn selection_gaps_are_exact() {
    // 3·(Fraction(0.3) − Fraction(0.1)) = 3·(5404319552844595/2^54 − 3602879701896397/2^55)
    //                                   = 3·7205759403792793/2^55
    let g = selection_gaps(&[0.1, 0.3], 3.0).unwrap();
    assert!(g[1].is_zero());
    assert_eq!(
        g[0].numer() * (BigUint::one() << 55u32),
        BigUint::from(21617278211378379u64) * g[0].denom()
    );
    assert!(selection_gaps(&[1.0f64], f64::NAN).is_err());
    assert!(selection_gaps::<f64>(&[], 1.0).is_err());
    assert!(selection_gaps(&[1.0, f64::INFINITY], 1.0).is_err());
}

#[test]
fn uniform_below_is_uniform() {
    let mut rng = seeded_rng(1);
    for n in [2u64, 3, 7, 10, 1000] {
        let draws = 20_000 * n.min(50);
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            counts[uniform_below_u64(&mut rng, n) as usize] += 1;
        }
        let p = vec![1.0 / n as f64; n as usize];
        assert!(passes(&counts, &p), "n = {n}: {:?}", chi2(&counts, &p));
    }
    // the big-integer path: n = 3·2^100, binned by v mod 3 and by the top bit pair
    let n = BigUint::from(3u32) << 100u32;
    let mut mod3 = vec![0u64; 3];
    let mut top = vec![0u64; 3];
    for _ in 0..60_000 {
        let v = uniform_below(&mut rng, &n);
        mod3[(&v % 3u32).to_usize().unwrap()] += 1;
        top[(&v >> 100u32).to_usize().unwrap()] += 1;
    }
    assert!(passes(&mod3, &[1.0 / 3.0; 3]));
    assert!(passes(&top, &[1.0 / 3.0; 3]));
}

/// A two-sided z-test of a Bernoulli frequency against p at z = 6.
fn frequency_matches(heads: u64, n: u64, p: f64) -> bool {
    let sd = (p * (1.0 - p) / n as f64).sqrt();
    ((heads as f64 / n as f64) - p).abs() <= 6.0 * sd.max(1e-12)
}

#[test]
fn bernoulli_exp_neg_has_probability_exp_minus_gamma() {
    let mut rng = seeded_rng(2);
    let n = 200_000u64;
    for (num, den) in [(0u32, 1u32), (1, 3), (1, 1), (5, 2), (7, 1), (123, 100)] {
        let g = Rational::new(num, den).unwrap();
        let heads = (0..n).filter(|_| bernoulli_exp_neg(&mut rng, &g)).count() as u64;
        let p = (-(num as f64) / den as f64).exp();
        assert!(
            frequency_matches(heads, n, p),
            "γ = {num}/{den}: {heads}/{n} vs {p}"
        );
        // power: a coin of exp(−0.9γ) would be detected at every γ ≥ 1
        if num >= den {
            let wrong = (-0.9 * num as f64 / den as f64).exp();
            assert!(!frequency_matches(heads, n, wrong), "γ = {num}/{den}");
        }
    }
}

#[test]
fn bernoulli_is_exact_at_the_edges() {
    let mut rng = seeded_rng(3);
    assert!((0..1000).all(|_| bernoulli(&mut rng, &Rational::integer(1u32))));
    assert!((0..1000).all(|_| !bernoulli(&mut rng, &Rational::integer(0u32))));
    assert!((0..1000).all(|_| bernoulli_exp_neg(&mut rng, &Rational::integer(0u32))));
    // γ = 10^6: exp(−γ) = 0 to any precision, and the sampler returns at once
    let huge = Rational::integer(1_000_000u32);
    assert!((0..1000).all(|_| !bernoulli_exp_neg(&mut rng, &huge)));
}

/// The discrete Laplace pmf with scale b on −k..=k (and the two tails pooled by `chi2`).
fn laplace_pmf(b: f64, k: i64) -> Vec<f64> {
    let r = (-1.0 / b).exp();
    let c = (1.0 - r) / (1.0 + r);
    (-k..=k)
        .map(|z| c * r.powi(z.unsigned_abs() as i32))
        .collect()
}

/// The discrete Gaussian pmf with variance parameter s2 on −k..=k, normalised over ±40σ.
fn gaussian_pmf(s2: f64, k: i64) -> Vec<f64> {
    let w = |z: i64| (-(z * z) as f64 / (2.0 * s2)).exp();
    let reach = (40.0 * s2.sqrt()).ceil() as i64 + 1;
    let total: f64 = (-reach..=reach).map(w).sum();
    (-k..=k).map(|z| w(z) / total).collect()
}

/// Histogram of draws on −k..=k; values outside go to the nearer end bin of a separate tail
/// count, returned as (bins, tail).
fn histogram(draws: &[i64], k: i64) -> (Vec<u64>, u64) {
    let mut bins = vec![0u64; (2 * k + 1) as usize];
    let mut tail = 0;
    for &z in draws {
        if z.abs() <= k {
            bins[(z + k) as usize] += 1;
        } else {
            tail += 1;
        }
    }
    (bins, tail)
}

fn with_tail(bins: Vec<u64>, tail: u64, probs: Vec<f64>) -> (Vec<u64>, Vec<f64>) {
    let mass: f64 = probs.iter().sum();
    let mut b = bins;
    let mut p = probs;
    b.push(tail);
    p.push((1.0 - mass).max(0.0));
    (b, p)
}

/// Draws of a discrete Laplace of scale `b` match its pmf on −k..=k (tail pooled), and, for
/// b ≥ 1, the same histogram rejects the pmf of a 10 % smaller scale (power).
fn check_discrete_laplace_law(draws: &[i64], b: f64, k: i64, what: &str) {
    let (bins, tail) = histogram(draws, k);
    let (o, p) = with_tail(bins.clone(), tail, laplace_pmf(b, k));
    assert!(passes(&o, &p), "{what}: {:?}", chi2(&o, &p));
    if b >= 1.0 {
        let (o, p) = with_tail(bins, tail, laplace_pmf(0.9 * b, k));
        assert!(
            !passes(&o, &p),
            "{what}: a 10 % smaller scale was not detected"
        );
    }
}

#[test]
fn discrete_laplace_matches_its_pmf_and_rejects_a_smaller_scale() {
    let mut rng = seeded_rng(4);
    for (t, s) in [(1u32, 1u32), (3, 1), (7, 2), (1, 3), (25, 1)] {
        let b = t as f64 / s as f64;
        let scale = Rational::new(t, s).unwrap();
        let draws: Vec<i64> = (0..100_000)
            .map(|_| {
                discrete_laplace(&mut rng, &scale)
                    .unwrap()
                    .to_i64()
                    .unwrap()
            })
            .collect();
        let k = (8.0 * b).ceil() as i64;
        check_discrete_laplace_law(&draws, b, k, &format!("scale {t}/{s}"));
    }
    assert!(discrete_laplace(&mut rng, &Rational::integer(0u32)).is_err());
}

#[test]
fn discrete_gaussian_matches_its_pmf_and_rejects_a_smaller_sigma() {
    let mut rng = seeded_rng(5);
    for (a, b) in [(1u32, 2u32), (1, 1), (4, 1), (10, 3), (100, 1), (2500, 1)] {
        let s2 = a as f64 / b as f64;
        let sigma2 = Rational::new(a, b).unwrap();
        let draws: Vec<i64> = (0..100_000)
            .map(|_| {
                discrete_gaussian(&mut rng, &sigma2)
                    .unwrap()
                    .to_i64()
                    .unwrap()
            })
            .collect();
        let k = (6.0 * s2.sqrt()).ceil() as i64;
        let (bins, tail) = histogram(&draws, k);
        let (o, p) = with_tail(bins.clone(), tail, gaussian_pmf(s2, k));
        assert!(passes(&o, &p), "σ² = {a}/{b}: {:?}", chi2(&o, &p));
        if s2 >= 1.0 {
            // σ 10 % smaller: σ² · 0.81
            let (o, p) = with_tail(bins, tail, gaussian_pmf(0.81 * s2, k));
            assert!(
                !passes(&o, &p),
                "σ² = {a}/{b}: a 10 % smaller σ was not detected"
            );
        }
        // the variance itself, against Σ z² pmf(z), by a z-test at z = 6
        let pmf = gaussian_pmf(s2, (40.0 * s2.sqrt()).ceil() as i64);
        let k40 = (pmf.len() as i64 - 1) / 2;
        let m2: f64 = pmf
            .iter()
            .enumerate()
            .map(|(i, p)| p * ((i as i64 - k40) as f64).powi(2))
            .sum();
        let m4: f64 = pmf
            .iter()
            .enumerate()
            .map(|(i, p)| p * ((i as i64 - k40) as f64).powi(4))
            .sum();
        let mean_sq = draws.iter().map(|&z| (z * z) as f64).sum::<f64>() / draws.len() as f64;
        let sd = ((m4 - m2 * m2) / draws.len() as f64).sqrt();
        assert!(
            (mean_sq - m2).abs() <= 6.0 * sd,
            "σ² = {a}/{b}: E[Z²] {mean_sq} vs {m2}"
        );
    }
    assert!(discrete_gaussian(&mut rng, &Rational::integer(0u32)).is_err());
}

fn counts_of(draws: impl Iterator<Item = usize>, n: usize) -> Vec<u64> {
    let mut c = vec![0u64; n];
    draws.for_each(|r| c[r] += 1);
    c
}

#[test]
fn selections_handle_integer_votes_and_extreme_gaps() {
    let mut rng = seeded_rng(8);
    let votes: [u32; 4] = [250, 3, 3, 0];
    // β·gap = 0.5·247 ≈ 124: the losers' probabilities are below 1e-53, so the winner is
    // always returned
    for _ in 0..1000 {
        assert_eq!(exponential_mechanism(&mut rng, &votes, 0.5).unwrap(), 0);
        assert_eq!(permute_and_flip(&mut rng, &votes, 0.5).unwrap(), 0);
    }
    // β = 0: uniform over the candidates
    let c = counts_of(
        (0..40_000).map(|_| exponential_mechanism(&mut rng, &votes, 0.0).unwrap()),
        4,
    );
    assert!(passes(&c, &[0.25; 4]));
    // tiny and huge doubles keep their exact values
    let s = [1e-300, 0.0, -1e300];
    for _ in 0..100 {
        assert_ne!(permute_and_flip(&mut rng, &s, 1.0).unwrap(), 2);
    }
}

/// The machine-integer paths draw the same values as the arbitrary-precision ones from the
/// same random bits: discrete Laplace at scales t/s that fit in 64 bits (including powers of
/// two, where the Bernoulli comparison is lazy), Bernoulli(n/d) and exp(−n/d).
#[test]
fn machine_integer_paths_match_the_arbitrary_precision_ones() {
    let scales: [(u64, u64); 7] = [
        (1, 1),
        (3, 2),
        (1 << 20, 3),
        (15_000_001, 1024),
        (4_194_305, 1 << 21),
        (u64::MAX, 7),
        (1 << 63, 1),
    ];
    for (i, &(t, s)) in scales.iter().enumerate() {
        let scale = Rational::new(t, s).unwrap();
        let (mut a, mut b) = (seeded_rng(500 + i as u64), seeded_rng(500 + i as u64));
        for _ in 0..3_000 {
            let fast = discrete_laplace_u64(&mut a, t, s).unwrap();
            let slow = discrete_laplace_big(&mut b, &scale).unwrap();
            assert_eq!(BigInt::from(fast), slow, "scale {t}/{s}");
        }
    }
    let fractions: [(u64, u64); 6] = [(0, 5), (5, 5), (1, 2), (3, 1 << 40), (7, 9), (99, 100)];
    for (i, &(n, d)) in fractions.iter().enumerate() {
        let p = Rational::new(n, d).unwrap();
        let (mut a, mut b) = (seeded_rng(600 + i as u64), seeded_rng(600 + i as u64));
        for _ in 0..3_000 {
            assert_eq!(bernoulli_u64(&mut a, n, d), {
                // the BigUint comparison, bypassing the dispatch
                if p.num.is_zero() {
                    false
                } else if p.num >= p.den {
                    true
                } else if p.den.count_ones() == 1 {
                    below_power_of_two(&mut b, &p.num, p.den.bits() - 1)
                } else {
                    uniform_below(&mut b, &p.den) < p.num
                }
            });
            // Algorithm 1 on the BigUint coin Bernoulli(n/d)
            let mut k: u64 = 1;
            while uniform_below_u64(&mut b, k) == 0 && bernoulli(&mut b, &p) {
                k += 1;
            }
            assert_eq!(bernoulli_exp_neg_unit_u64(&mut a, n, d), k % 2 == 1);
        }
    }
    let one = Rational::integer(1u32);
    let (mut a, mut b) = (seeded_rng(700), seeded_rng(700));
    for _ in 0..3_000 {
        assert_eq!(
            bernoulli_exp_neg_one(&mut a),
            bernoulli_exp_neg(&mut b, &one)
        );
    }
}

/// The bit-buffered draws: the discrete Laplace law at dyadic scales 2ᵏ/s against its pmf
/// (α ≈ 1e-9; a 10 % smaller scale rejected where the scale is ≥ 1), Bernoulli(n/2ᵏ) and
/// exp(−n/2ᵏ) against their probabilities (binomial, |z| ≤ 6.1).
#[test]
fn bit_source_draws_have_their_exact_laws() {
    let mut rng = seeded_rng(800);
    let mut bits = BitSource::new(&mut rng);
    for (k, s) in [
        (1u32, 1u64),
        (3, 5),
        (24, 5_000_001),
        (30, (1 << 22) + 12_345),
        (26, 3 * (1 << 22) + 1),
    ] {
        let b = 2f64.powi(k as i32) / s as f64;
        let draws: Vec<i64> = (0..100_000)
            .map(|_| bits.discrete_laplace_dyadic(k, s).unwrap())
            .collect();
        let kk = (8.0 * b).ceil().min(400.0) as i64;
        check_discrete_laplace_law(&draws, b, kk, &format!("scale 2^{k}/{s}"));
    }
    assert!(bits.discrete_laplace_dyadic(0, 1).is_err());
    assert!(bits.discrete_laplace_dyadic(64, 1).is_err());
    assert!(bits.discrete_laplace_dyadic(3, 0).is_err());
    let n = 200_000u64;
    for (num, k) in [
        (1u128, 1u32),
        (3, 2),
        (5_000_001, 23),
        (1 << 40, 41),
        (7, 70),
    ] {
        let p = num as f64 / 2f64.powi(k as i32);
        let heads = (0..n).filter(|_| bits.below_dyadic(num, k)).count() as u64;
        assert!(frequency_matches(heads, n, p), "{num}/2^{k}: {heads}");
        let heads = (0..n).filter(|_| bits.exp_neg_dyadic(num, k)).count() as u64;
        assert!(
            frequency_matches(heads, n, (-p).exp()),
            "exp(-{num}/2^{k}): {heads}"
        );
    }
    let heads = (0..n).filter(|_| bits.exp_neg_one()).count() as u64;
    assert!(frequency_matches(heads, n, (-1f64).exp()));
    let counts = (0..n).fold([0u64; 7], |mut c, _| {
        c[bits.below(7) as usize] += 1;
        c
    });
    assert!(passes(&counts, &[1.0 / 7.0; 7]), "{counts:?}");
}
