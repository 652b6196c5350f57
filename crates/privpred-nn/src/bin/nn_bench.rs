//! Throughput benchmark of the ResNet-20-GN engine (prints, never asserts):
//! forward+backward seconds per batch (default 128) for non-private summed gradients and for
//! DP-SGD per-example gradients with joint clipping, and the examples/second ratio.
//!
//! `cargo run --release -p privpred-nn --bin nn-bench -- [batch] [repeats]`
//!
//! The engine is `$PRIVPRED_NN_ENGINE` (`cpu` or `torch`; default `torch` when built with
//! `--features torch`, else `cpu`); the torch engine's device is `$PRIVPRED_DEVICE`.

use privpred_nn::data::{ImageSet, Normalization};
use privpred_nn::train::{GradMode, Inputs};
use privpred_nn::{ResNet, ResNetConfig, engine};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha20Rng;
use std::time::Instant;

fn main() -> std::process::ExitCode {
    let eng = match engine::from_choice(None) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let args: Vec<String> = std::env::args().collect();
    let batch: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(128);
    let reps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let net = ResNet::new(ResNetConfig::resnet20(10)).expect("valid config");
    let mut rng = ChaCha20Rng::seed_from_u64(0);
    let params = net.init_params(&mut rng);
    let n = batch;
    let data = ImageSet {
        channels: 3,
        height: 32,
        width: 32,
        classes: 10,
        pixels: (0..n * 3072).map(|_| rng.random::<u8>()).collect(),
        labels: (0..n).map(|i| (i % 10) as u32).collect(),
        source: "random pixels (timing only)".into(),
    };
    let norm = Normalization::cifar10();
    let idx: Vec<usize> = (0..n).collect();
    let mut g = vec![0.0f32; net.num_params()];
    println!(
        "ResNet-20-GN, {} parameters, batch {batch}, {} rayon threads, engine {}",
        net.num_params(),
        rayon::current_num_threads(),
        eng.describe()
    );
    let threads = rayon::current_num_threads() as f64;
    let inputs = Inputs {
        data: &data,
        norm: &norm,
        augment_seed: Some(1),
    };
    let mut time = |mode: GradMode| -> Result<(f64, f64), privpred_nn::NnError> {
        eng.batch_gradient(&net, &params, inputs, &idx, mode, &mut g)?;
        let (t, c) = (Instant::now(), cpu_seconds());
        for _ in 0..reps {
            eng.batch_gradient(&net, &params, inputs, &idx, mode, &mut g)?;
        }
        Ok((
            t.elapsed().as_secs_f64() / reps as f64,
            (cpu_seconds() - c) / reps as f64,
        ))
    };
    let timed = (|| {
        Ok::<_, privpred_nn::NnError>((
            time(GradMode::Sum)?,
            time(GradMode::ClipJoint(1.0))?,
            time(GradMode::ClipPerLayer(1.0))?,
        ))
    })();
    let ((t_np, c_np), (t_dp, c_dp), (t_pl, c_pl)) = match timed {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    println!(
        "(wall time depends on other load; CPU s / threads estimates an otherwise idle machine)"
    );
    for (name, t, c) in [
        ("non-private", t_np, c_np),
        ("DP-SGD joint clipping", t_dp, c_dp),
        ("DP-SGD per-layer (paper)", t_pl, c_pl),
    ] {
        println!(
            "{name:<26} wall {t:.3} s/batch ({:.1} ex/s); CPU {c:.3} s/batch, idle estimate {:.3} s/batch ({:.1} ex/s)",
            batch as f64 / t,
            c / threads,
            batch as f64 * threads / c
        );
    }
    println!(
        "DP-SGD / non-private time ratio: wall {:.3}, CPU {:.3}",
        t_dp / t_np,
        c_dp / c_np
    );
    std::process::ExitCode::SUCCESS
}

/// User + system CPU seconds of this process (Linux `/proc/self/stat`; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some(rest) = s.rsplit(')').next() else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // fields 14 and 15 of the whole line are utime and stime; `rest` starts at field 3
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}
