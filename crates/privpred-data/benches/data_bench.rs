//! Data benchmarks (prints timings and throughput; run with
//! `cargo bench -p privpred-data --bench data_bench`):
//! MNIST load (parse + SHA-256 verification of the four files), PCA 784 → 50 fitted on the
//! 60,000 training rows (covariance + eigendecomposition) and applied, and MNIST-1M
//! generation throughput (`PRIVPRED_BENCH_MNIST1M_N` digits, default 200,000, to a
//! discarding sink; `PRIVPRED_BENCH_MNIST1M_DISK=1` also writes them through the IDX writer).

use privpred_data::mnist1m::{DeformParams, generate, generate_to_dir};
use privpred_data::preprocess::Preprocessing;
use privpred_data::{DatasetSpec, LoadOptions, load};
use std::time::Instant;

fn best_of<T>(reps: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..reps {
        let t = Instant::now();
        let v = f();
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(v);
    }
    (best, out.expect("reps ≥ 1"))
}

fn main() {
    println!("threads: {}", rayon::current_num_threads());
    let opts = LoadOptions {
        fetch: false,
        ..Default::default()
    };
    let (t, s) = best_of(3, || {
        load(&DatasetSpec::Mnist, &opts).expect("MNIST in the cache (privpred data fetch mnist)")
    });
    println!(
        "mnist load (4 IDX files, parse + sha256 verify): {:.3} s  ({:.0} MB/s of pixels)",
        t,
        70_000.0 * 784.0 / t / 1e6
    );

    for k in [50usize, 784] {
        let p = Preprocessing {
            pca: Some(k),
            ..Default::default()
        };
        let (t_fit, f) = best_of(2, || p.fit(&s.train, 0).unwrap());
        let (t_apply, _) = best_of(2, || f.apply_train(&s.train).unwrap());
        println!(
            "pca 784->{k} on 60,000 rows: fit {t_fit:.3} s (covariance + eigendecomposition), apply {t_apply:.3} s"
        );
    }
    let (t_def, _) = best_of(2, || {
        Preprocessing::default()
            .fit(&s.train, 0)
            .unwrap()
            .apply_train(&s.train)
            .unwrap()
    });
    println!("default preprocessing (scale + normalise) of 60,000 rows: {t_def:.3} s");

    let n: usize = std::env::var("PRIVPRED_BENCH_MNIST1M_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let src: Vec<u8> = s.train.features.iter().map(|&v| v as u8).collect();
    let labels: Vec<u8> = s.train.labels.iter().map(|&y| y as u8).collect();
    let p = DeformParams::default();
    let (t, _) = best_of(1, || {
        generate(&src, &labels, 28, n, 0, &p, |_, _, _| Ok(())).unwrap()
    });
    println!(
        "mnist1m generation: {n} digits in {t:.2} s = {:.0} digits/s  (1,000,000 digits ≈ {:.0} s)",
        n as f64 / t,
        1e6 / (n as f64 / t)
    );
    if std::env::var("PRIVPRED_BENCH_MNIST1M_DISK").is_ok_and(|v| v == "1") {
        let dir =
            std::env::temp_dir().join(format!("privpred-bench-mnist1m-{}", std::process::id()));
        let (t, _) = best_of(1, || generate_to_dir(&s.train, n, 0, &p, &dir).unwrap());
        println!(
            "mnist1m generation to IDX on disk: {n} digits in {t:.2} s = {:.0} digits/s",
            n as f64 / t
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
