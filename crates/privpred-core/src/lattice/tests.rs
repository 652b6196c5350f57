use super::*;
use crate::test_stats::{binomial_ok, chi2, chi2_crit, seeded_rng};

fn big(v: u64) -> BigUint {
    BigUint::from(v)
}

/// The coin exp(−(√X − c)/D) against exp(−γ): γ = 0 (a perfect square), an integer γ, a
/// fraction, an irrational γ below 1 and above 1; 200,000 flips each, α ≈ 1e-9; a coin of
/// exp(−1.05γ) is told apart from the irrational ones (power).
#[test]
fn sqrt_coin_matches_exp_neg_gamma() {
    let mut rng = seeded_rng(31);
    let cases = [
        (big(49), big(7), big(3)),                   // γ = 0
        (big(100), big(4), big(3)),                  // γ = 2
        (big(64), big(5), big(4)),                   // γ = 3/4
        (big(2), big(0), big(2)),                    // γ = √2/2
        (big(1_000_003), big(998), big(1)),          // γ = √1000003 − 998 ≈ 2.0015
        (big(7) << 128u32, big(0), big(1) << 64u32), // γ = √7
    ];
    let n = 200_000u64;
    for (x, c, d) in cases {
        let coin = ExpSqrtCoin::new(x.clone(), c.clone(), d.clone()).unwrap();
        let g = coin.gamma_f64();
        let heads = (0..n).filter(|_| coin.flip(&mut rng)).count() as u64;
        let p = (-g).exp();
        assert!(
            binomial_ok(heads, n, p),
            "γ = {g}: {heads}/{n}, want p = {p}"
        );
        if g > 0.5 {
            assert!(
                !binomial_ok(heads, n, (-1.05 * g).exp()),
                "γ = {g}: a 5 % larger exponent was not told apart"
            );
        }
    }
    assert!(ExpSqrtCoin::new(big(3), big(2), big(1)).is_err());
    assert!(ExpSqrtCoin::new(big(4), big(2), big(0)).is_err());
}

/// The exact pmf P(z) ∝ exp(−b‖z‖₂) on a box of half-width `box_r` (cells in row-major order,
/// the rest pooled in a last cell), summed over |z_i| ≤ `sum_r`: the mass left out is below
/// Σ_{m > sum_r} (2m + 1)^d·exp(−b·m), negligible for the values used.
fn lattice_pmf(dim: usize, b: f64, l1: bool, box_r: i64, sum_r: i64) -> Vec<f64> {
    let side = (2 * box_r + 1) as usize;
    let cells = side.pow(dim as u32);
    let mut p = vec![0.0; cells + 1];
    let mut total = 0.0;
    let mut z = vec![-sum_r; dim];
    loop {
        let w = if l1 {
            (-b * z.iter().map(|v| v.abs() as f64).sum::<f64>()).exp()
        } else {
            (-b * z.iter().map(|v| (v * v) as f64).sum::<f64>().sqrt()).exp()
        };
        total += w;
        p[cell(&z, box_r).unwrap_or(cells)] += w;
        let mut i = 0;
        loop {
            if i == dim {
                return p.into_iter().map(|w| w / total).collect();
            }
            z[i] += 1;
            if z[i] <= sum_r {
                break;
            }
            z[i] = -sum_r;
            i += 1;
        }
    }
}

fn cell(z: &[i64], box_r: i64) -> Option<usize> {
    let side = 2 * box_r + 1;
    let mut idx = 0i64;
    for &v in z.iter().rev() {
        if v.abs() > box_r {
            return None;
        }
        idx = idx * side + v + box_r;
    }
    Some(idx as usize)
}

fn draw_counts(dim: usize, beta: f64, box_r: i64, n: u64, seed: u64) -> Vec<u64> {
    let rates = LatticeRates::new(beta, 0, dim).unwrap();
    let side = (2 * box_r + 1) as usize;
    let cells = side.pow(dim as u32);
    let mut counts = vec![0u64; cells + 1];
    let mut rng = seeded_rng(seed);
    for _ in 0..n {
        let (z, _) = sample_lattice_noise(&mut rng, &rates).unwrap();
        let z: Vec<i64> = z.iter().map(|v| v.to_i64().unwrap()).collect();
        counts[cell(&z, box_r).unwrap_or(cells)] += 1;
    }
    counts
}

/// The ℓ2 law on Z² and Z³ against its exact pmf (chi-square over a box, tails pooled,
/// α ≈ 1e-9, seeded); the law at a 10 % larger rate (less noise) and the proposal's ℓ1 law
/// are rejected by the same test.
#[test]
fn lattice_l2_law_matches_its_exact_pmf() {
    for &(dim, b, box_r, n, seed) in &[
        (2usize, 0.8, 5i64, 200_000u64, 41u64),
        (3, 1.0, 2, 200_000, 43),
    ] {
        let counts = draw_counts(dim, b, box_r, n, seed);
        let df = (counts.len() - 1) as f64;
        let x = chi2(&counts, &lattice_pmf(dim, b, false, box_r, 60), n);
        assert!(x < chi2_crit(df), "d = {dim}: χ² = {x} ≥ {}", chi2_crit(df));
        let xs = chi2(&counts, &lattice_pmf(dim, 1.1 * b, false, box_r, 60), n);
        assert!(
            xs > chi2_crit(df),
            "d = {dim}: a 10 % larger rate not rejected: {xs}"
        );
        let a = b / (dim as f64).sqrt();
        let xl = chi2(&counts, &lattice_pmf(dim, a, true, box_r, 120), n);
        assert!(
            xl > chi2_crit(df),
            "d = {dim}: the proposal's law not rejected: {xl}"
        );
    }
}

/// E‖Z‖₂ at a small rate in d = 2 (exact, by summation over |z_i| ≤ 1500) and in d = 10
/// (the continuous value d/b, to within 0.5 %); the sample mean is within 6 standard errors
/// and the value at a 10 % larger rate (too little noise) is not.
#[test]
fn lattice_noise_norm_has_the_exact_scale() {
    let mean_norm = |dim: usize, b: f64, n: u64, seed: u64| -> (f64, f64) {
        let rates = LatticeRates::new(b, 0, dim).unwrap();
        let mut rng = seeded_rng(seed);
        let v: Vec<f64> = (0..n)
            .map(|_| {
                let (z, _) = sample_lattice_noise(&mut rng, &rates).unwrap();
                z.iter()
                    .map(|x| x.to_f64().unwrap().powi(2))
                    .sum::<f64>()
                    .sqrt()
            })
            .collect();
        let m = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64;
        (m, (var / n as f64).sqrt())
    };
    // d = 2: exact E‖Z‖ by summation
    let exact2 = |b: f64| -> f64 {
        let r = 1500i64;
        let (mut num, mut den) = (0.0, 0.0);
        for i in -r..=r {
            for j in -r..=r {
                let n = ((i * i + j * j) as f64).sqrt();
                let w = (-b * n).exp();
                num += n * w;
                den += w;
            }
        }
        num / den
    };
    let b = 0.05;
    let (m, se) = mean_norm(2, b, 40_000, 51);
    let (want, less) = (exact2(b), exact2(1.1 * b));
    assert!(
        (m - want).abs() < 6.0 * se,
        "d = 2: mean {m}, exact {want}, se {se}"
    );
    assert!(
        (m - less).abs() > 6.0 * se,
        "d = 2: 10 % less noise not told apart"
    );
    let (b, dim) = (0.02, 10usize);
    let (m, se) = mean_norm(dim, b, 4_000, 53);
    let want = dim as f64 / b;
    assert!(
        (m - want).abs() < 6.0 * se + 0.005 * want,
        "d = 10: mean {m}, want {want}, se {se}"
    );
    assert!((m - dim as f64 / (1.1 * b)).abs() > 6.0 * se + 0.005 * want);
}

/// Above [`LATTICE_L2_MAX_DIM`] the coordinates are independent discrete Laplace draws of
/// rate a = b/q with q ≥ √d exactly (so the ℓ1 bound is within the ℓ2 budget): one proposal
/// per draw, every coordinate's law checked by chi-square (pooled, α ≈ 1e-9), a 10 % larger
/// rate rejected.
#[test]
fn l1_fallback_is_the_product_law_within_the_budget() {
    let dim = LATTICE_L2_MAX_DIM + 1;
    assert_eq!(lattice_sampler(dim), LatticeSampler::L1);
    assert_eq!(lattice_sampler(LATTICE_L2_MAX_DIM), LatticeSampler::L2);
    let b = 2.0;
    let rates = LatticeRates::new(b, 0, dim).unwrap();
    // a·√d ≤ b exactly: (1/a)²·b² ≥ d, i.e. t²·b² ≥ d·s² for scale t/s
    let (t, s) = (rates.scale().numer(), rates.scale().denom());
    let bq = Rational::from_f64(b).unwrap();
    assert!(
        t * t * bq.numer() * bq.numer()
            >= BigUint::from(dim as u64) * s * s * bq.denom() * bq.denom()
    );
    let a = 1.0 / rates.scale().to_f64();
    assert!(a <= b / (dim as f64).sqrt() && a > 0.999_999 * b / (dim as f64).sqrt());
    let lim = 6i64;
    let mut counts = vec![0u64; (2 * lim + 2) as usize];
    let mut rng = seeded_rng(61);
    let draws = 20_000u64;
    for _ in 0..draws {
        let (z, proposals) = sample_lattice_noise(&mut rng, &rates).unwrap();
        assert_eq!(proposals, 1);
        for v in z {
            let v = v.to_i64().unwrap();
            let bin = if v.abs() > lim {
                counts.len() - 1
            } else {
                (v + lim) as usize
            };
            counts[bin] += 1;
        }
    }
    let probs = |a: f64| -> Vec<f64> {
        let w = |k: i64| (-a * k.abs() as f64).exp();
        let z: f64 = (-400..=400).map(w).sum();
        let mut p: Vec<f64> = (-lim..=lim).map(|k| w(k) / z).collect();
        p.push(1.0 - p.iter().sum::<f64>());
        p
    };
    let n = draws * dim as u64;
    let df = (counts.len() - 1) as f64;
    let x = chi2(&counts, &probs(a), n);
    assert!(x < chi2_crit(df), "χ² = {x}: {counts:?}");
    assert!(chi2(&counts, &probs(1.1 * a), n) > chi2_crit(df));
}

/// The calibrated rate meets ε over B releases and 1 % more rate (less noise) does not; the
/// rounding allowance is in the sensitivity.
#[test]
fn beta_is_enough_and_not_more_than_needed() {
    for &(eps, b, sens) in &[(1.0, 1u64, 0.02), (0.1, 100, 3.0), (10.0, 7, 1.0)] {
        let (beta, r) = lattice_laplace_beta(eps, b, sens).unwrap();
        assert_eq!(r, sens / 1024.0);
        assert!(lattice_laplace_epsilon(beta, r, sens, b) <= eps);
        assert!(lattice_laplace_epsilon(1.01 * beta, r, sens, b) > eps);
        assert!(
            lattice_laplace_epsilon(beta, 0.0, sens, b) < lattice_laplace_epsilon(beta, r, sens, b)
        );
    }
    assert!(lattice_laplace_beta(1.0, 0, 1.0).is_err());
    assert!(lattice_laplace_beta(1.0, 1, 0.0).is_err());
    assert!(lattice_laplace_beta(f64::NAN, 1, 1.0).is_err());
}

/// Every released value is a grid point and the noise is centred on the rounded input; bad
/// values and rates are refused.
#[test]
fn releases_are_grid_points() {
    let mut rng = seeded_rng(71);
    let base = [0.0, 1e-3, -2.5, std::f64::consts::PI, 1e-300, -7.0e4];
    let (beta, r) = (3.0, 1e-3);
    let k = grid_log2(r, base.len()).unwrap();
    let g = pow2(k);
    for _ in 0..200 {
        let mut v = base;
        release_lattice_laplace(&mut rng, &mut v, beta, r).unwrap();
        for x in v {
            assert_eq!((x / g).fract(), 0.0, "{x} is not a multiple of 2^{k}");
        }
    }
    // 20 coordinates: the ℓ1 law, also on the grid
    let mut w = [0.3; 20];
    release_lattice_laplace(&mut rng, &mut w, beta, r).unwrap();
    let k20 = grid_log2(r, 20).unwrap();
    assert!(w.iter().all(|x| (x / pow2(k20)).fract() == 0.0));
    let mut bad = [f64::NAN];
    assert!(release_lattice_laplace(&mut rng, &mut bad, beta, r).is_err());
    let mut huge = [1e300];
    assert!(release_lattice_laplace(&mut rng, &mut huge, beta, r).is_err());
    let mut ok = [1.0];
    assert!(release_lattice_laplace(&mut rng, &mut ok, 0.0, r).is_err());
    assert!(release_lattice_laplace(&mut rng, &mut ok, beta, 0.0).is_err());
    let mut empty: [f64; 0] = [];
    assert!(release_lattice_laplace(&mut rng, &mut empty, beta, r).is_ok());
}

/// The rates are rounded down, never up: for doubles β over 24 orders of magnitude, grid
/// exponents and dimensions on both sides of [`LATTICE_L2_MAX_DIM`], exactly (in integers)
/// b′ ≤ β·g and a·√d ≤ b′ (ℓ2 law), a·√d ≤ β·g (ℓ1 law), each within one part in 2²¹ of
/// the calibrated rate; fails if the rounding ever gives less noise than calibrated.
#[test]
fn rounded_rates_never_exceed_the_calibrated_rate() {
    let mut rng = seeded_rng(81);
    let mut betas = vec![1.0, 0.8, 2.0, 0.05, 0.02, 212.0, 21.2, 2120.0];
    for _ in 0..60 {
        let e = (rng.next_u64() % 80) as i32 - 40;
        betas.push(2f64.powi(e) * (1.0 + (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64));
    }
    let mut small = 0;
    for &beta in &betas {
        for &k in &[-30i32, -20, 0, 3] {
            for &dim in &[1usize, 2, 3, 10, 16, 17, 100, 7850] {
                let rates = LatticeRates::new(beta, k, dim).unwrap();
                small += rates.small.is_some() as u32;
                // b = β·2ᵏ = bn/bd
                let bq = Rational::from_f64(beta).unwrap();
                let (bn, bd) = if k >= 0 {
                    (bq.numer() << k as u64, bq.denom().clone())
                } else {
                    (bq.numer().clone(), bq.denom() << (-k) as u64)
                };
                // a = an/ad
                let (ad, an) = (rates.scale().numer(), rates.scale().denom());
                let d = BigUint::from(dim as u64);
                let tol = BigUint::from((1u64 << 21) - 1);
                let two21 = BigUint::from(1u64 << 21);
                match lattice_sampler(dim) {
                    LatticeSampler::L2 => {
                        let r = rates.rate().unwrap();
                        let (rn, rd) = (r.numer(), r.denom());
                        assert!(
                            rn * &bd <= &bn * rd,
                            "b' > b at beta {beta}, k {k}, d {dim}"
                        );
                        assert!(rn * &bd * &two21 >= &bn * rd * &tol, "b' far below b");
                        // a²·d ≤ b′²
                        assert!(
                            an * an * &d * rd * rd <= rn * rn * ad * ad,
                            "a > b'/sqrt(d)"
                        );
                    }
                    LatticeSampler::L1 => {
                        assert!(rates.rate().is_none());
                        // a²·d ≤ b², and ≥ b²(1 − 2⁻²¹)²
                        let lhs = an * an * &d * &bd * &bd;
                        let rhs = &bn * &bn * ad * ad;
                        assert!(lhs <= rhs, "a > b/sqrt(d) at beta {beta}, k {k}, d {dim}");
                        assert!(lhs * &two21 * &two21 >= rhs * &tol * &tol, "a far below");
                    }
                }
            }
        }
    }
    // the machine-integer path is the common one
    assert!(small > 1000, "{small}");
}

/// The arbitrary-precision path (rates outside the machine range) draws the same law as the
/// machine-integer path: the ℓ2 law on Z² against its exact pmf (α ≈ 1e-9), the law at a 10 %
/// larger rate rejected; and rates at a tiny β take that path.
#[test]
fn arbitrary_precision_path_has_the_same_law() {
    let (dim, b, box_r, n) = (2usize, 0.8, 5i64, 100_000u64);
    let rates = LatticeRates::new(b, 0, dim).unwrap();
    assert!(rates.small.is_some());
    let side = (2 * box_r + 1) as usize;
    let cells = side.pow(dim as u32);
    let mut counts = vec![0u64; cells + 1];
    let mut rng = seeded_rng(91);
    for _ in 0..n {
        let (z, _) = sample_big(&mut rng, &rates).unwrap();
        let z: Vec<i64> = z.iter().map(|v| v.to_i64().unwrap()).collect();
        counts[cell(&z, box_r).unwrap_or(cells)] += 1;
    }
    let df = (counts.len() - 1) as f64;
    let x = chi2(&counts, &lattice_pmf(dim, b, false, box_r, 60), n);
    assert!(x < chi2_crit(df), "χ² = {x} ≥ {}", chi2_crit(df));
    let xs = chi2(&counts, &lattice_pmf(dim, 1.1 * b, false, box_r, 60), n);
    assert!(xs > chi2_crit(df), "a 10 % larger rate not rejected: {xs}");
    // β·g below 2⁻⁴¹: the scale 2ᵏ/s needs k > 63
    let tiny = LatticeRates::new(1e-13, 0, 10).unwrap();
    assert!(tiny.small.is_none());
    let (z, _) = sample_lattice_noise(&mut rng, &tiny).unwrap();
    assert_eq!(z.len(), 10);
}

/// The machine-integer coin exp(−a·Y), a = s/2ᵏ, Y = (√X − c)/2¹⁶, against exp(−aY)
/// (200,000 flips each, |z| ≤ 6.1) for Y integral, irrational below and above 1/a.
#[test]
fn scaled_coin_matches_exp_neg_a_y() {
    let mut rng = seeded_rng(93);
    let mut bits = BitSource::new(&mut rng);
    let n = 200_000u64;
    let cases: [(u128, u128, u64, u32); 5] = [
        (49 << 32, 7 << 16, 5 << 20, 23),                        // Y = 0
        (100 << 32, 4 << 16, 3 << 21, 23),                       // Y = 6
        (2 << 32, 0, 1 << 22, 23),                               // Y = √2, a = 1/2
        (1_000_003 << 32, 998 << 16, 4_321_987, 24),             // Y ≈ 2.0015
        ((7u128 << 32) * 1_000_000, 2_643 << 16, 6_000_000, 23), // Y ≈ 2.75
    ];
    for (x, c, s, k) in cases {
        let a = s as f64 / 2f64.powi(k as i32);
        let y = ((x as f64).sqrt() - c as f64) / 65536.0;
        let p = (-a * y).exp();
        let heads = (0..n)
            .filter(|_| flip_scaled_coin(&mut bits, x, c, s, k))
            .count() as u64;
        assert!(
            binomial_ok(heads, n, p),
            "aY = {}: {heads}/{n}, want {p}",
            a * y
        );
    }
}

/// [`ExpSqrtCoin`]'s machine-integer flip gives the same outcomes as its arbitrary-precision
/// flip from the same random bits (γ = 0, integral, rational, irrational below and above 1,
/// and a D near 2⁶⁴).
#[test]
fn sqrt_coin_machine_path_matches_the_arbitrary_precision_one() {
    let cases: [(u128, u128, u64); 6] = [
        (49, 7, 3),
        (100, 4, 3),
        (64, 5, 4),
        (2, 0, 2),
        (1_000_003, 998, 1),
        (7 << 100, 1 << 40, u64::MAX - 58),
    ];
    for (i, (x, c, d)) in cases.into_iter().enumerate() {
        let coin = ExpSqrtCoin::new(BigUint::from(x), BigUint::from(c), BigUint::from(d)).unwrap();
        let (mut a, mut b) = (seeded_rng(900 + i as u64), seeded_rng(900 + i as u64));
        for _ in 0..5_000 {
            assert_eq!(
                flip_sqrt_coin_small(&mut a, x, c, d),
                coin.flip_big(&mut b),
                "case {i}"
            );
        }
    }
}
