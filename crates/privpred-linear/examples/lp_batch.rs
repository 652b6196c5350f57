//! Batched vs single loss-perturbation work on MNIST (or MNIST-shaped synthetic data when the
//! cache is empty): the f64 pass of k problems at once against k single passes, as a ratio of
//! the minimum of interleaved runs (so that contention on a shared machine mostly cancels).
//!
//! `cargo run --release -p privpred-linear --example lp_batch [-- K...]`

use privpred_linear::kernel::{self, Design};
use privpred_linear::train::{Objective, SparseRows};
use std::time::Instant;

fn main() {
    let ks: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let ks = if ks.is_empty() { vec![1, 4, 8, 16] } else { ks };
    let ds = mnist();
    let design = Design::new(&ds.features, &ds.labels, ds.d, ds.classes);
    let (d, c) = (ds.d, ds.classes);
    let sp = SparseRows::new(&design);
    let mut obj = Objective {
        design,
        lambda: 1e-4,
        linear: None,
        parallel: false,
    };
    println!("N = {}, nonzeros = {}", ds.n, sp.nonzeros());
    for &k in &ks {
        let thetas: Vec<Vec<f64>> = (0..k)
            .map(|q| {
                (0..d * c)
                    .map(|i| ((i * 7919 + q * 31) % 13) as f64 * 0.1 - 0.6)
                    .collect()
            })
            .collect();
        let bs: Vec<Vec<f64>> = (0..k)
            .map(|q| (0..d * c).map(|i| ((i + q) % 5) as f64 - 2.0).collect())
            .collect();
        let (mut single, mut batch) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..5 {
            let t = Instant::now();
            let mut g = vec![0.0; d * c];
            for (th, b) in thetas.iter().zip(&bs) {
                obj.linear = Some(b.clone());
                std::hint::black_box(kernel::sequential(|| {
                    obj.value_grad_sparse(&sp, th, &mut g)
                }));
            }
            single = single.min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            let problems: Vec<(&[f64], Option<&[f64]>)> = thetas
                .iter()
                .zip(&bs)
                .map(|(t, b)| (t.as_slice(), Some(b.as_slice())))
                .collect();
            let mut grads = vec![vec![0.0; d * c]; k];
            obj.linear = None;
            std::hint::black_box(kernel::sequential(|| {
                obj.value_grad_sparse_batch(&sp, &problems, &mut grads)
            }));
            batch = batch.min(t.elapsed().as_secs_f64());
        }
        println!(
            "k = {k:2}: single {:.1} ms/eval, batched {:.1} ms/eval, ratio {:.2}x",
            single * 1e3 / k as f64,
            batch * 1e3 / k as f64,
            single / batch
        );
    }
}

fn mnist() -> privpred_data::UnitBallDataset {
    use privpred_data::{load::LoadOptions, preprocess::Preprocessing, spec::DatasetSpec};
    let raw = privpred_data::load::load(
        &DatasetSpec::parse("mnist").unwrap(),
        &LoadOptions::default(),
    )
    .expect("MNIST in the cache (privpred data fetch mnist)");
    let p = Preprocessing {
        bias: true,
        ..Preprocessing::default()
    };
    p.fit(&raw.train, 0)
        .unwrap()
        .apply_train(&raw.train)
        .unwrap()
}
