//! The bound selection's scores, sensitivity and law, and the key selection's threshold and
//! keep rates, each statistical test at z = 6 (a false-positive rate of about 2e-9).

use super::*;
use crate::noise::seeded_rng;
use rand::RngExt;

/// Exact selection probabilities P(i) ∝ exp(β·u_i), by log-sum-exp.
fn law(scores: &[f64], beta: f64) -> Vec<f64> {
    let top = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = scores.iter().map(|u| (beta * (u - top)).exp()).collect();
    let z: f64 = w.iter().sum();
    w.iter().map(|v| v / z).collect()
}

fn within(count: usize, n: usize, p: f64) -> bool {
    let f = count as f64 / n as f64;
    (f - p).abs() <= 6.0 * (p * (1.0 - p) / n as f64).sqrt() + 1e-12
}

#[test]
fn the_grid_is_public_round_and_wide() {
    let g = bound_grid();
    assert_eq!(g.len(), 521);
    assert!(g.windows(2).all(|w| w[0] < w[1]));
    for v in [0.0, 1.0, -1.0, 1.2e-10, 8e15, -8e15, 2.5, 1e-10, 0.3] {
        assert!(g.contains(&v), "{v}");
    }
    // every candidate prints as a short round number
    assert!(g.iter().all(|v| format!("{v:e}").len() <= 8), "{g:?}");
}

#[test]
fn the_selector_picks_the_quantile_on_easy_data() {
    let grid = bound_grid();
    let x: Vec<f64> = (1..=1000).map(f64::from).collect();
    let t = quantile_target(x.len(), 0.01);
    assert_eq!(t, 10);
    let mut rng = seeded_rng(1);
    for _ in 0..20 {
        let lo = private_bound(&mut rng, &x, &grid, t, Side::Lower, 40.0).unwrap();
        let hi = private_bound(&mut rng, &x, &grid, t, Side::Upper, 40.0).unwrap();
        assert_eq!((grid[lo], grid[hi]), (10.0, 1000.0));
    }
    // a column many rows share at 0 and 1: the bounds settle on the data, not in the runs
    // of equal counts beyond it
    let x: Vec<f64> = (0..1000).map(|i| f64::from(u8::from(i % 3 == 0))).collect();
    let mut sorted = x.clone();
    sorted.sort_by(f64::total_cmp);
    for _ in 0..20 {
        let lo = private_bound(&mut rng, &sorted, &grid, t, Side::Lower, 40.0).unwrap();
        let hi = private_bound(&mut rng, &sorted, &grid, t, Side::Upper, 40.0).unwrap();
        assert_eq!((grid[lo], grid[hi]), (0.0, 1.0));
    }
    // negative data, and values beyond the grid settle on its ends
    let x: Vec<f64> = (1..=1000).map(|i| -f64::from(i) * 1e3).collect();
    let mut sorted = x.clone();
    sorted.sort_by(f64::total_cmp);
    let lo = private_bound(&mut rng, &sorted, &grid, t, Side::Lower, 40.0).unwrap();
    let hi = private_bound(&mut rng, &sorted, &grid, t, Side::Upper, 40.0).unwrap();
    assert_eq!((grid[lo], grid[hi]), (-1e6, -1e4));
    let huge = vec![1e300; 100];
    let hi = private_bound(&mut rng, &huge, &grid, 1, Side::Upper, 40.0).unwrap();
    assert_eq!(grid[hi], 8e15);
}

#[test]
fn one_replaced_row_moves_every_score_by_at_most_one_and_the_law_by_at_most_e_epsilon() {
    let grid = bound_grid();
    let mut rng = seeded_rng(2);
    let eps = 0.7;
    let beta = eps / 2.0;
    let mut worst: f64 = 0.0;
    for trial in 0..300 {
        let n = 1 + rng.random_range(0..60usize);
        let mut x: Vec<f64> = (0..n)
            .map(|_| match rng.random_range(0..4) {
                0 => 0.0,
                1 => grid[rng.random_range(0..grid.len())],
                2 => rng.random_range(-50.0..50.0),
                _ => rng.random_range(-1e17..1e17),
            })
            .collect();
        // the neighbour: one row replaced by another value, or by a cell that is not a
        // number (the column then has one numeric value fewer), or a non-number replaced
        let mut y = x.clone();
        let i = rng.random_range(0..n);
        match trial % 3 {
            0 => y[i] = grid[rng.random_range(0..grid.len())],
            1 => {
                y.remove(i);
            }
            _ => y[i] = rng.random_range(-1e3..1e3),
        }
        x.sort_by(f64::total_cmp);
        y.sort_by(f64::total_cmp);
        let t = 1 + rng.random_range(0..(n as u64));
        for side in [Side::Lower, Side::Upper] {
            let (a, b) = (
                bound_scores(&x, &grid, t, side),
                bound_scores(&y, &grid, t, side),
            );
            assert!(a.iter().zip(&b).all(|(u, v)| (u - v).abs() <= 1.0));
            let (p, q) = (law(&a, beta), law(&b, beta));
            for (pi, qi) in p.iter().zip(&q) {
                let r = (pi / qi).ln().abs();
                assert!(r <= eps * (1.0 + 1e-9), "{r} > {eps}");
                worst = worst.max(r);
            }
        }
    }
    // the pairs reach close to the bound: a law with half the noise would fail above
    assert!(worst > 0.9 * eps, "{worst}");
}

#[test]
fn the_sampler_draws_from_the_stated_law() {
    let grid = bound_grid();
    let x: Vec<f64> = (1..=200).map(f64::from).collect();
    let (eps, t) = (0.8, 4);
    let p = law(&bound_scores(&x, &grid, t, Side::Lower), eps / 2.0);
    let mut rng = seeded_rng(3);
    let n = 20_000;
    let mut counts = vec![0usize; grid.len()];
    for _ in 0..n {
        counts[private_bound(&mut rng, &x, &grid, t, Side::Lower, eps).unwrap()] += 1;
    }
    // each likely candidate alone, the others together
    let mut tested = 0;
    let (mut rest_p, mut rest_n) = (0.0, 0);
    for (i, &pi) in p.iter().enumerate() {
        if pi > 0.002 {
            assert!(
                within(counts[i], n, pi),
                "{}: {} vs {pi}",
                grid[i],
                counts[i]
            );
            tested += 1;
        } else {
            rest_p += pi;
            rest_n += counts[i];
        }
    }
    assert!(within(rest_n, n, rest_p), "{rest_n} vs {rest_p}");
    assert!(tested >= 3, "{tested}");
    // the power: the law of a sampler with twice the β (half the noise) is rejected
    let sharp = law(&bound_scores(&x, &grid, t, Side::Lower), eps);
    assert!(
        sharp
            .iter()
            .enumerate()
            .any(|(i, &q)| q > 0.002 && !within(counts[i], n, q))
    );
}

#[test]
fn the_threshold_bounds_a_single_rows_release_by_half_delta() {
    for (eps, delta) in [
        (1.0, 1e-6),
        (0.1, 1e-9),
        (5.0, 0.2),
        (0.01, 1e-12),
        (30.0, 1e-5),
    ] {
        let t = key_threshold(eps, delta).unwrap();
        let once = keep_probability(1, eps, t);
        assert!(2.0 * once <= delta, "{eps} {delta}: {once}");
        // and not far above what is needed: one less would pass δ/2 by e^{ε/2} at most
        let s = 2.0 / eps;
        assert!(((t - 2) as f64) < s * (2.0 / delta).ln() + 1.0);
    }
    assert!(
        key_threshold(1.0, 0.0)
            .unwrap_err()
            .to_string()
            .contains("--delta")
    );
    assert!(key_threshold(1.0, 1.0).is_err());
    assert!(
        key_threshold(0.0, 1e-6)
            .unwrap_err()
            .to_string()
            .contains("--epsilon")
    );
    assert!(key_threshold(1e-300, 1e-6).is_err());
}

#[test]
fn a_single_rows_value_is_kept_at_the_claimed_rate_and_a_frequent_one_always() {
    let (eps, delta) = (1.0, 0.2);
    let t = key_threshold(eps, delta).unwrap();
    assert_eq!(t, 6);
    let n = 200_000;
    let mut rng = seeded_rng(4);
    for count in [1u64, t - 1, t + 2] {
        let kept = keep_keys(&mut rng, &vec![count; n], eps, delta)
            .unwrap()
            .iter()
            .filter(|&&k| k)
            .count();
        let p = keep_probability(count, eps, t);
        assert!(within(kept, n, p), "count {count}: {kept}/{n} vs {p}");
        // with half the noise (scale 1/ε) the rate at these counts differs detectably
        let half = keep_probability(count, 2.0 * eps, t);
        assert!(!within(kept, n, half), "count {count}: {half}");
    }
    let kept = keep_keys(&mut rng, &vec![200u64; 1000], eps, delta).unwrap();
    assert!(kept.iter().all(|&k| k));
    // at a small δ a single row's value is never seen in practice
    let kept = keep_keys(&mut rng, &vec![1u64; 10_000], 1.0, 1e-6).unwrap();
    assert!(kept.iter().all(|&k| !k));
}
