//! Throughput benchmark (prints numbers; not a test): on real full MNIST (60,000 × 784, C = 10,
//! default preprocessing: pixels/255, per-example unit norm)
//! 1. one objective+gradient evaluation: the fused register-tiled kernel vs the fused
//!    one-row-at-a-time kernel vs a GEMM formulation (`gemm` crate:
//!    logits = X·W, softmax, G = Xᵀ·R), both f32 products, 2 threads;
//! 2. one full L-BFGS fit to max|∇| ≤ 1e-4 (wall time, evaluations, time per evaluation,
//!    test accuracy) — the reference PyTorch implementation takes ~46 s, 147 evaluations,
//!    ~0.31 s each on this machine;
//! 3. DP-SGD examples per second.
//!
//! Run: `cargo bench -p privpred-linear --bench linear_bench [-- LAMBDA]`.

use privpred_data::{Dataset, DatasetSpec, LoadOptions, Preprocessing, UnitBallDataset, load};
use privpred_linear::dpsgd::{DpSgdConfig, train_dpsgd};
use privpred_linear::kernel::Design;
use privpred_linear::train::{Objective, accuracy};
use privpred_linear::{GradNorm, LbfgsOptions, fit_logistic};
use rand::SeedableRng;
use std::time::Instant;

/// The regularised softmax objective and its gradient on `data` through two GEMM calls of
/// the `gemm` crate (logits = X·W, softmax, G = Xᵀ·R), f32 products.
fn gemm_value_grad(data: &Dataset, theta: &[f64], lambda: f64, grad: &mut [f64]) -> f64 {
    let (x, y) = (&data.features, &data.labels);
    let (n, d, c) = (data.n, data.d, data.classes);
    let w: Vec<f32> = theta.iter().map(|v| *v as f32).collect(); // d × c row-major
    let mut logits = vec![0f32; n * c];
    let par = gemm::Parallelism::Rayon(0);
    // SAFETY: dimensions and strides describe the buffers above (row-major: cs = 1, rs = cols).
    unsafe {
        gemm::gemm(
            n,
            c,
            d,
            logits.as_mut_ptr(),
            1,
            c as isize,
            false,
            x.as_ptr(),
            1,
            d as isize,
            w.as_ptr(),
            1,
            c as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            par,
        );
    }
    let mut loss = 0.0f64;
    for (i, row) in logits.chunks_exact_mut(c).enumerate() {
        let m = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
        let s: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
        let yi = y[i] as usize;
        loss += s.ln() + m - row[yi] as f64;
        for (k, v) in row.iter_mut().enumerate() {
            *v = (((*v as f64 - m).exp() / s) - if k == yi { 1.0 } else { 0.0 }) as f32;
        }
    }
    let mut g = vec![0f32; d * c];
    // G (d × c) = Xᵀ (d × n) · R (n × c): Xᵀ has column stride d, row stride 1.
    unsafe {
        gemm::gemm(
            d,
            c,
            n,
            g.as_mut_ptr(),
            1,
            c as isize,
            false,
            x.as_ptr(),
            d as isize,
            1,
            logits.as_ptr(),
            1,
            c as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            par,
        );
    }
    let mut sq = 0.0;
    for i in 0..d * c {
        grad[i] = g[i] as f64 / n as f64 + lambda * theta[i];
        sq += theta[i] * theta[i];
    }
    loss / n as f64 + 0.5 * lambda * sq
}

/// Process CPU seconds (user + system) from /proc/self/stat (Linux; 0 elsewhere): with 2
/// threads on an idle 2-core machine, wall ≈ CPU / 2; on a busy machine CPU time is the
/// contention-robust measure.
fn cpu_seconds() -> f64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some(rest) = s.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

type BenchResult = Result<(), Box<dyn std::error::Error>>;

/// Loads and preprocesses MNIST, then runs the four parts in turn.
fn main() -> BenchResult {
    let lambda: f64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1e-4);
    let splits = load(&DatasetSpec::Mnist, &LoadOptions::default())?;
    let fitted = Preprocessing::default().fit(&splits.train, 0)?;
    let train = fitted.apply_train(&splits.train)?;
    let test = fitted.apply(&splits.test)?;
    let (n, d, c) = (train.n, train.d, train.classes);
    println!(
        "MNIST: N = {n}, D = {d}, C = {c}, threads = {}",
        rayon::current_num_threads()
    );
    evaluation(&train, lambda);
    lbfgs_fits(&train, &test, lambda)?;
    dpsgd_throughput(&train, &test)?;
    sklearn_baseline(lambda)
}

/// 1. One evaluation, fused vs GEMM, at a non-trivial θ.
fn evaluation(train: &Dataset, lambda: f64) {
    let (n, d, c) = (train.n, train.d, train.classes);
    let theta: Vec<f64> = (0..d * c)
        .map(|i| ((i * 7919) % 101) as f64 * 1e-3 - 0.05)
        .collect();
    let obj = Objective::new(Design::new(&train.features, &train.labels, d, c), lambda);
    let mut g1 = vec![0.0; d * c];
    let mut g2 = vec![0.0; d * c];
    let reps = 30;
    let v1 = obj.value_grad(&theta, &mut g1);
    let t = Instant::now();
    for _ in 0..reps {
        obj.value_grad(&theta, &mut g1);
    }
    let fused = t.elapsed().as_secs_f64() / reps as f64;
    let v2 = gemm_value_grad(train, &theta, lambda, &mut g2);
    let t = Instant::now();
    for _ in 0..reps {
        gemm_value_grad(train, &theta, lambda, &mut g2);
    }
    let gemm_t = t.elapsed().as_secs_f64() / reps as f64;
    let kp = privpred_linear::kernel::KernelParams::from_theta(&theta, d, c);
    let design = Design::new(&train.features, &train.labels, d, c);
    let t = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(privpred_linear::kernel::loss_grad_sums_portable(
            &design, &kp, true,
        ));
    }
    let portable = t.elapsed().as_secs_f64() / reps as f64;
    let gdiff = g1
        .iter()
        .zip(&g2)
        .fold(0.0f64, |a, (x, y)| a.max((x - y).abs()));
    let flops = 4.0 * n as f64 * d as f64 * c as f64;
    println!(
        "evaluation: fused tiled {:.2} ms ({:.1} GFLOP/s) | fused one-row ({:.2} ms, {:.2}x) | gemm crate {:.2} ms ({:.1} GFLOP/s) | |Δvalue| {:.1e}, max|Δgrad| {:.1e}",
        fused * 1e3,
        flops / fused / 1e9,
        portable * 1e3,
        portable / fused,
        gemm_t * 1e3,
        flops / gemm_t / 1e9,
        (v1 - v2).abs(),
        gdiff
    );
}

/// 2. One full L-BFGS fit from zero, with the reference's stopping rule (max|g| ≤ 1e-4, as
///    PyTorch's tolerance_grad and sklearn's tol) and with privpred's default (‖g‖₂ ≤ 1e-4).
fn lbfgs_fits(train: &UnitBallDataset, test: &Dataset, lambda: f64) -> BenchResult {
    for norm in [GradNorm::Max, GradNorm::L2] {
        let t = Instant::now();
        let c0 = cpu_seconds();
        let fit = fit_logistic(
            train,
            lambda,
            None,
            &LbfgsOptions {
                norm,
                ..LbfgsOptions::default()
            },
        )?;
        let wall = t.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - c0;
        let r = fit.lbfgs;
        println!(
            "L-BFGS fit (lambda = {lambda:e}, {norm:?} gradient norm <= 1e-4): {wall:.3} s, {} iterations, {} evaluations, {:.2} ms/evaluation, final norm {:.2e} ({:?}), objective {:.6}, test accuracy {:.2} %",
            r.iterations,
            r.evaluations,
            wall / r.evaluations as f64 * 1e3,
            r.grad_norm,
            r.termination,
            r.value,
            100.0 * accuracy(&fit.model, test)?
        );
        println!(
            "  vs reference PyTorch (46 s, 147 evaluations, 0.31 s/evaluation): {:.1}x per fit, {:.1}x per evaluation; CPU time {:.2} s ({:.1} ms CPU/evaluation; /2 cores = {:.1} ms)",
            46.0 / wall,
            0.31 / (wall / r.evaluations as f64),
            cpu,
            cpu / r.evaluations as f64 * 1e3,
            cpu / r.evaluations as f64 * 1e3 / 2.0
        );
    }
    Ok(())
}

/// 3. DP-SGD throughput (b = 256, 2 epochs).
fn dpsgd_throughput(train: &Dataset, test: &Dataset) -> BenchResult {
    let (d, c) = (train.d, train.classes);
    let design = Design::new(&train.features, &train.labels, d, c);
    let cfg = DpSgdConfig {
        batch_size: 256,
        epochs: 2.0,
        ..DpSgdConfig::default()
    };
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    let t = Instant::now();
    let (m, stats) = train_dpsgd(&design, &cfg, 0.1, 1.0, &mut rng)?;
    let s = t.elapsed().as_secs_f64();
    println!(
        "DP-SGD (b = 256, 2 epochs, {} steps, noise on all {} coordinates each step): {:.0} examples/s ({:.2} s), test accuracy {:.2} %",
        stats.steps,
        d * c,
        stats.examples as f64 / s,
        s,
        100.0 * accuracy(&m, test)?
    );
    Ok(())
}

/// 4. scikit-learn on the same data, λ and tolerance, in the same run (set
///    PRIVPRED_SKLEARN_PYTHON to a python with scikit-learn; see benches/sklearn_baseline.py).
fn sklearn_baseline(lambda: f64) -> BenchResult {
    if let Ok(py) = std::env::var("PRIVPRED_SKLEARN_PYTHON") {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../benches/sklearn_baseline.py"
        );
        let st = std::process::Command::new(py)
            .arg(script)
            .arg(lambda.to_string())
            .status()?;
        if !st.success() {
            println!("sklearn baseline failed: {st}");
        }
    } else {
        println!(
            "(set PRIVPRED_SKLEARN_PYTHON=/path/to/python with scikit-learn to run the sklearn baseline in the same run)"
        );
    }
    Ok(())
}
