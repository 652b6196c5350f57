//! Benchmark: the exact selections (exponential mechanism and permute-and-flip, drawn with
//! integer arithmetic only) against a floating-point baseline run in the same process (Gumbel-max
//! with 53-bit uniforms, and permute-and-flip with f64 coins), on the answers the service gives:
//! 10 noisy logits (prediction sensitivity) and 10 vote counts of 256 teachers; and the noisy
//! logits' Gaussian release on the grid with exact discrete Gaussian noise (`privpred_core::grid`)
//! against the f64 Gaussian sampler. Run with `cargo bench -p privpred-core --bench selection`;
//! it prints draws per second and the ratio exact / baseline.

use privpred_core::noise::sample_exponential_mechanism;
use privpred_core::noise::seeded_rng;
use privpred_core::select::sample_permute_and_flip;
use privpred_core::{Noise, grid};
use rand::{Rng, RngExt};
use std::hint::black_box;
use std::time::Instant;

fn gumbel_max<R: Rng>(rng: &mut R, scores: &[f64], beta: f64) -> usize {
    let mut best = (0, f64::NEG_INFINITY);
    for (i, &s) in scores.iter().enumerate() {
        let u: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
        let v = beta * s - (-u.ln()).ln();
        if v > best.1 {
            best = (i, v);
        }
    }
    best.0
}

fn float_pf<R: Rng>(rng: &mut R, scores: &[f64], beta: f64) -> usize {
    let top = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let mut order: Vec<usize> = (0..scores.len()).collect();
    for i in 0..order.len() {
        let j = rng.random_range(i..order.len());
        order.swap(i, j);
        let r = order[i];
        if rng.random::<f64>() < (beta * (scores[r] - top)).exp() {
            return r;
        }
    }
    0
}

fn rate(draws: usize, mut f: impl FnMut() -> usize) -> f64 {
    let t = Instant::now();
    let mut acc = 0usize;
    for _ in 0..draws {
        acc = acc.wrapping_add(f());
    }
    black_box(acc);
    draws as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    let mut rng = seeded_rng(1);
    let logits: Vec<f64> = (0..10).map(|_| rng.random::<f64>() * 8.0 - 4.0).collect();
    let votes: Vec<f64> = vec![181.0, 40.0, 12.0, 9.0, 5.0, 3.0, 3.0, 2.0, 1.0, 0.0];
    let draws = 200_000;
    println!("| workload | mechanism | baseline draws/s | exact draws/s | exact / baseline |");
    println!("|---|---|---|---|---|");
    for (name, scores, beta) in [
        ("10 logits", &logits, 0.37),
        ("256 teachers' votes", &votes, 0.025),
        ("256 teachers' votes", &votes, 0.5),
    ] {
        let base = rate(draws, || gumbel_max(&mut rng, scores, beta));
        let exact = rate(draws, || {
            sample_exponential_mechanism(&mut rng, scores, beta).unwrap()
        });
        println!(
            "| {name}, β = {beta} | exponential | {base:.0} | {exact:.0} | {:.2} |",
            exact / base
        );
        let base = rate(draws, || float_pf(&mut rng, scores, beta));
        let exact = rate(draws, || {
            sample_permute_and_flip(&mut rng, scores, beta).unwrap()
        });
        println!(
            "| {name}, β = {beta} | permute-and-flip | {base:.0} | {exact:.0} | {:.2} |",
            exact / base
        );
    }
    // the noisy logits' Gaussian release: σ of B = 100 answers at ε = 1, δ = 1e-5 for the
    // sensitivity of MNIST's prediction sensitivity (N = 60,000, λ = 1e-3, K = √2)
    let sens = 2.0 * std::f64::consts::SQRT_2 / (60_000.0 * 1e-3);
    let (sigma, rounding) = grid::discrete_gaussian_sigma(1.0, 1e-5, 100, sens).unwrap();
    let continuous = Noise::Gaussian { sigma };
    let discrete = Noise::DiscreteGaussian { sigma, rounding };
    let releases = 50_000;
    let release = |noise: Noise, rng: &mut privpred_core::PrivRng| {
        let mut v = logits.clone();
        noise.add_to(rng, &mut v).unwrap();
        (v[0].to_bits() & 1) as usize
    };
    let base = rate(releases, || release(continuous, &mut rng));
    let exact = rate(releases, || release(discrete, &mut rng));
    println!(
        "| 10 logits, σ = {sigma:.4} | Gaussian release (f64 vs grid + discrete Gaussian) | {base:.0} | {exact:.0} | {:.2} |",
        exact / base
    );
}
