//! Statistical tests of the noise samplers. Every test uses a fixed seed and a false-positive
//! rate of α = 1e-6, so a correct sampler fails with probability ≤ 1e-6 per test and, with the
//! seeds fixed, never flakes. Reference distributions from `statrs` (an independent crate).

use privpred_core::Noise;
use privpred_core::noise::{
    add_noise, exponential_mechanism, exponential_mechanism_log_probabilities, release_rng,
    sample_gaussian, sample_l2_laplace, seeded_rng,
};
use statrs::distribution::{ChiSquared, ContinuousCDF, Gamma};

const ALPHA: f64 = 1e-6;

/// Kolmogorov–Smirnov statistic of `xs` against `cdf`.
fn ks_statistic(xs: &mut [f64], cdf: impl Fn(f64) -> f64) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = xs.len() as f64;
    let mut d: f64 = 0.0;
    for (i, &x) in xs.iter().enumerate() {
        let f = cdf(x);
        d = d.max((i as f64 + 1.0) / n - f).max(f - i as f64 / n);
    }
    d
}

/// The KS critical value at level α for n samples (asymptotic Kolmogorov distribution,
/// P(√n·D > t) ≤ 2e^{−2t²}).
fn ks_critical(n: usize) -> f64 {
    ((2.0 / ALPHA).ln() / (2.0 * n as f64)).sqrt()
}

#[test]
fn l2_laplace_radius_matches_gamma_ks() {
    let mut rng = seeded_rng(20240601);
    for &(dim, beta) in &[(1usize, 0.5), (2, 3.0), (10, 1.0), (784, 20.0)] {
        let n = if dim > 100 { 4000 } else { 20000 };
        let mut radii: Vec<f64> = (0..n)
            .map(|_| {
                let v = sample_l2_laplace(&mut rng, dim, beta).unwrap();
                v.iter().map(|x| x * x).sum::<f64>().sqrt()
            })
            .collect();
        let g = Gamma::new(dim as f64, beta).unwrap();
        let d = ks_statistic(&mut radii, |x| g.cdf(x));
        assert!(
            d < ks_critical(n),
            "dim {dim} beta {beta}: KS {d} >= {}",
            ks_critical(n)
        );
    }
}

#[test]
fn l2_laplace_radius_quantiles() {
    // The empirical deciles of the radius sit within a binomial band of Gamma's deciles.
    let mut rng = seeded_rng(7);
    let (dim, beta, n) = (5usize, 2.0, 50000usize);
    let g = Gamma::new(dim as f64, beta).unwrap();
    let radii: Vec<f64> = (0..n)
        .map(|_| {
            sample_l2_laplace(&mut rng, dim, beta)
                .unwrap()
                .iter()
                .map(|x| x * x)
                .sum::<f64>()
                .sqrt()
        })
        .collect();
    for k in 1..10 {
        let p = k as f64 / 10.0;
        let qk = g.inverse_cdf(p);
        let frac = radii.iter().filter(|&&r| r <= qk).count() as f64 / n as f64;
        // z = 4.9 is the two-sided normal quantile at 1e-6.
        let band = 4.9 * (p * (1.0 - p) / n as f64).sqrt();
        assert!((frac - p).abs() < band, "decile {p}: {frac}");
    }
}

#[test]
fn l2_laplace_direction_is_isotropic() {
    // Each coordinate of the unit direction has mean 0 and variance 1/dim.
    let mut rng = seeded_rng(11);
    let (dim, n) = (4usize, 40000usize);
    let mut sums = vec![0.0; dim];
    let mut sq = vec![0.0; dim];
    for _ in 0..n {
        let v = sample_l2_laplace(&mut rng, dim, 1.0).unwrap();
        let r = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        for i in 0..dim {
            let u = v[i] / r;
            sums[i] += u;
            sq[i] += u * u;
        }
    }
    for i in 0..dim {
        let mean = sums[i] / n as f64;
        let var = sq[i] / n as f64;
        // sd of a coordinate ≤ 1/√dim; 4.9 sd band.
        assert!(
            mean.abs() < 4.9 / (dim as f64).sqrt() / (n as f64).sqrt(),
            "mean {mean}"
        );
        assert!((var - 1.0 / dim as f64).abs() < 0.01, "var {var}");
    }
}

#[test]
fn gaussian_moments() {
    let mut rng = seeded_rng(3);
    let (sigma, n) = (2.5, 200_000usize);
    let xs = sample_gaussian(&mut rng, n, sigma).unwrap();
    let mean = xs.iter().sum::<f64>() / n as f64;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n as f64 - 1.0);
    let z = 4.9;
    assert!(mean.abs() < z * sigma / (n as f64).sqrt(), "mean {mean}");
    // Var of the sample variance of a normal: 2σ⁴/(n−1).
    assert!(
        (var - sigma * sigma).abs() < z * sigma * sigma * (2.0 / (n as f64 - 1.0)).sqrt(),
        "var {var}"
    );
    // Fourth moment: E[x⁴] = 3σ⁴ (loose band, sd of the estimate ≈ √96 σ⁴/√n).
    let m4 = xs.iter().map(|x| x.powi(4)).sum::<f64>() / n as f64;
    assert!(
        (m4 / sigma.powi(4) - 3.0).abs() < z * 96f64.sqrt() / (n as f64).sqrt(),
        "m4 {m4}"
    );
    // And a KS test against N(0, σ²).
    let mut v = xs;
    let normal = statrs::distribution::Normal::new(0.0, sigma).unwrap();
    let d = ks_statistic(&mut v, |x| normal.cdf(x));
    assert!(d < ks_critical(n));
}

fn chi_square_check(counts: &[f64], beta: f64, n: usize, seed: u64) {
    let mut rng = seeded_rng(seed);
    let lp = exponential_mechanism_log_probabilities(counts, beta).unwrap();
    let mut obs = vec![0usize; counts.len()];
    for _ in 0..n {
        obs[exponential_mechanism(&mut rng, counts, beta).unwrap()] += 1;
    }
    // Pool cells with expected count < 5 into one.
    let mut stat = 0.0;
    let mut cells = 0;
    let (mut pooled_e, mut pooled_o) = (0.0, 0.0);
    for (i, &l) in lp.iter().enumerate() {
        let e = l.exp() * n as f64;
        if e < 5.0 {
            pooled_e += e;
            pooled_o += obs[i] as f64;
        } else {
            stat += (obs[i] as f64 - e).powi(2) / e;
            cells += 1;
        }
    }
    if pooled_e > 0.0 {
        if pooled_e >= 5.0 {
            stat += (pooled_o - pooled_e).powi(2) / pooled_e;
            cells += 1;
        } else {
            // Too rare to test by χ²: the pooled count must be small.
            assert!(
                pooled_o <= 30.0,
                "rare classes drawn {pooled_o} times, expected {pooled_e}"
            );
        }
    }
    if cells >= 2 {
        let crit = ChiSquared::new((cells - 1) as f64)
            .unwrap()
            .inverse_cdf(1.0 - ALPHA);
        assert!(
            stat < crit,
            "chi2 {stat} >= {crit} (counts {counts:?}, beta {beta}, obs {obs:?})"
        );
    }
}

#[test]
fn exponential_mechanism_frequencies_chi_square() {
    chi_square_check(&[0.0, 3.0, 5.0, 10.0, 2.0], 0.3, 100_000, 1);
    chi_square_check(&[10.0, 10.0, 9.0, 0.0], 1.0, 100_000, 2);
    // Large β·counts: no overflow, still the right distribution.
    chi_square_check(&[1e6, 1e6 + 1.0, 1e6 - 2.0, 0.0], 1.0, 100_000, 3);
    chi_square_check(&[256.0, 255.0, 1.0], 50.0, 50_000, 4);
    // β = 0 is uniform.
    chi_square_check(&[5.0, 0.0, 1.0], 0.0, 60_000, 5);
}

#[test]
fn exponential_mechanism_integer_votes() {
    let mut rng = seeded_rng(9);
    let votes: [u32; 3] = [200, 50, 6];
    let y = exponential_mechanism(&mut rng, &votes, 10.0).unwrap();
    assert_eq!(y, 0);
    assert!(exponential_mechanism(&mut rng, &[] as &[u32], 1.0).is_err());
    assert!(exponential_mechanism(&mut rng, &votes, f64::NAN).is_err());
}

#[test]
fn seeded_is_deterministic_and_release_rng_works() {
    let a = sample_gaussian(&mut seeded_rng(42), 8, 1.0).unwrap();
    let b = sample_gaussian(&mut seeded_rng(42), 8, 1.0).unwrap();
    assert_eq!(a, b);
    let mut r = release_rng().unwrap();
    let c = sample_gaussian(&mut r, 8, 1.0).unwrap();
    assert!(c.iter().all(|x| x.is_finite()));
    let mut v = vec![0.0; 4];
    add_noise(&Noise::Gaussian { sigma: 1.0 }, &mut r, &mut v).unwrap();
    assert!(v.iter().any(|&x| x != 0.0));
    assert!(add_noise(&Noise::Exponential { beta: 1.0 }, &mut r, &mut v).is_err());
    assert!(add_noise(&Noise::L2Laplace { beta: 0.0 }, &mut r, &mut v).is_err());
}
