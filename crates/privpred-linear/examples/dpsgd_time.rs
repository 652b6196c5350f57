//! Times one linear DP-SGD training on real MNIST at the study's setting (fig1b: N = 60,000,
//! D = 784 + bias, C = 10, b = 256, 20 epochs, ν = 0.1, σ = 1), and prints a checksum of the
//! parameters so that two builds can be compared for identical results.
//!
//! Run: `cargo run --release -p privpred-linear --example dpsgd_time [-- REPEATS]`.

use privpred_data::{DatasetSpec, LoadOptions, Preprocessing, load};
use privpred_linear::dpsgd::{DpSgdConfig, train_dpsgd};
use privpred_linear::kernel::Design;
use privpred_linear::train::accuracy;
use rand::SeedableRng;
use std::time::Instant;

/// This thread's time on a CPU in seconds (Linux `/proc/thread-self/schedstat`; NaN elsewhere):
/// under a shared load it says more than the wall time.
fn cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(f64::NAN, |ns| ns * 1e-9)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let reps: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(3);
    let splits = load(&DatasetSpec::Mnist, &LoadOptions::default())?;
    let pre = Preprocessing {
        bias: true,
        bias_value: 0.05,
        ..Preprocessing::default()
    };
    let fitted = pre.fit(&splits.train, 0)?;
    let train = fitted.apply_train(&splits.train)?;
    let test = fitted.apply(&splits.test)?;
    let design = Design::of(&train);
    let cfg = DpSgdConfig {
        clip: Some(0.1),
        ..DpSgdConfig::default()
    };
    for r in 0..reps {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(r as u64);
        let (t, cpu) = (Instant::now(), cpu_seconds());
        let (m, stats) = train_dpsgd(&design, &cfg, 0.1, 1.0, &mut rng)?;
        let s = t.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu;
        let sum: f64 = m.theta.iter().map(|v| v.to_bits() as f64).sum();
        let bits = m
            .theta
            .iter()
            .fold(0u64, |h, v| h.rotate_left(5) ^ v.to_bits());
        println!(
            "run {r}: {s:.3} s wall, {cpu:.3} s CPU, {} steps, {} examples, clipped {:.4}, test acc {:.2} %, theta hash {bits:016x} ({sum:e})",
            stats.steps,
            stats.examples,
            stats.clipped_fraction,
            100.0 * accuracy(&m, &test)?
        );
    }
    Ok(())
}
