//! Throughput benchmark of the ResNet-20-GN engine (prints, never asserts):
//! forward+backward seconds per batch (default 128) for non-private summed gradients and for
//! DP-SGD per-example gradients with joint clipping, and the examples/second ratio.
//!
//! `cargo run --release -p privpred-nn --bin nn-bench -- [batch] [repeats]`

use privpred_nn::data::{ImageSet, Normalization};
use privpred_nn::train::{GradMode, Inputs, batch_gradient};
use privpred_nn::{ResNet, ResNetConfig};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha20Rng;
use std::time::Instant;

fn main() {
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
        "ResNet-20-GN, {} parameters, batch {batch}, {} rayon threads",
        net.num_params(),
        rayon::current_num_threads()
    );
    let mut time = |mode: GradMode| {
        batch_gradient(
            &net,
            &params,
            Inputs {
                data: &data,
                norm: &norm,
                augment_seed: Some(1),
            },
            &idx,
            mode,
            &mut g,
        );
        let t = Instant::now();
        for _ in 0..reps {
            batch_gradient(
                &net,
                &params,
                Inputs {
                    data: &data,
                    norm: &norm,
                    augment_seed: Some(1),
                },
                &idx,
                mode,
                &mut g,
            );
        }
        t.elapsed().as_secs_f64() / reps as f64
    };
    let t_np = time(GradMode::Sum);
    let t_dp = time(GradMode::ClipJoint(1.0));
    let t_pl = time(GradMode::ClipPerLayer(1.0));
    println!(
        "non-private fwd+bwd:            {t_np:.3} s/batch  {:.1} examples/s",
        batch as f64 / t_np
    );
    println!(
        "DP-SGD joint clipping fwd+bwd:  {t_dp:.3} s/batch  {:.1} examples/s",
        batch as f64 / t_dp
    );
    println!(
        "DP-SGD per-layer (paper):       {t_pl:.3} s/batch  {:.1} examples/s",
        batch as f64 / t_pl
    );
    println!("DP-SGD / non-private time ratio: {:.3}", t_dp / t_np);
}
