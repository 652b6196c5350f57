//! Benchmarks: calibrations per second for every method × mode × δ, and the accountants' time
//! for 100,000 DP-SGD steps. Run with `cargo bench -p privpred-core --bench calibration`;
//! criterion prints time per call and throughput (calibrations/second as elem/s).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use privpred_core::calibrate::{CalibrationRequest, calibrate};
use privpred_core::pld::pld_epsilon;
use privpred_core::rdp::rdp_epsilon;
use privpred_core::{Budget, CalibrationMode, DpSgdSchedule, Method, Privacy};
use std::hint::black_box;
use std::time::Duration;

fn request(method: Method, mode: CalibrationMode, delta: f64) -> CalibrationRequest {
    CalibrationRequest {
        method,
        mode,
        privacy: Privacy::new(1.0, delta).expect("valid"),
        budget: if method.is_private_training() {
            Budget::Unlimited
        } else {
            Budget::finite(100).unwrap()
        },
        n: Some(60000),
        lambda: Some(1e-3),
        classes: 10,
        dp_sgd: Some(DpSgdSchedule {
            batch_size: 256,
            epochs: 60.0,
        }),
        // add/remove: the RDP accountant this bench has always timed (replace-one DP-SGD uses
        // the slower PLD accountant, timed by `account`).
        neighbours: privpred_core::Neighbours::AddRemove,
        loss: privpred_core::Loss::Softmax,
    }
}

fn calibrations(c: &mut Criterion) {
    let mut g = c.benchmark_group("calibrate");
    g.throughput(Throughput::Elements(1));
    g.warm_up_time(Duration::from_millis(300));
    g.measurement_time(Duration::from_secs(1));
    for m in Method::ALL {
        for mode in [
            CalibrationMode::Paper,
            CalibrationMode::Corrected,
            CalibrationMode::Tight,
        ] {
            for delta in [0.0, 1e-5] {
                if m == Method::DpSgd && (delta == 0.0 || mode == CalibrationMode::Tight) {
                    continue; // δ = 0 unsupported; tight DP-SGD is an accountant search, below
                }
                let r = request(m, mode, delta);
                g.bench_function(format!("{m}/{mode}/delta={delta}"), |b| {
                    b.iter(|| calibrate(black_box(&r)).expect("ok"))
                });
            }
        }
    }
    g.finish();
    let mut g = c.benchmark_group("calibrate-slow");
    g.sample_size(10);
    g.throughput(Throughput::Elements(1));
    let r = request(Method::DpSgd, CalibrationMode::Tight, 1e-5);
    g.bench_function("dp-sgd/tight/delta=1e-5 (PLD search, 14063 steps)", |b| {
        b.iter(|| calibrate(black_box(&r)).expect("ok"))
    });
    g.finish();
}

fn accountants(c: &mut Criterion) {
    let mut g = c.benchmark_group("accountant-100k-steps");
    g.sample_size(10);
    let (q, sigma, steps, delta) = (256.0 / 60000.0, 1.1, 100_000u64, 1e-5);
    g.bench_function("rdp", |b| {
        b.iter(|| rdp_epsilon(black_box(q), sigma, steps, delta).expect("ok"))
    });
    g.bench_function("pld", |b| {
        b.iter(|| pld_epsilon(black_box(q), sigma, steps, delta).expect("ok"))
    });
    g.finish();
    let r = rdp_epsilon(q, sigma, steps, delta).expect("ok");
    let p = pld_epsilon(q, sigma, steps, delta).expect("ok");
    println!(
        "100,000 steps at q = {q:.6}, sigma = {sigma}: RDP epsilon = {:.4} (classic {:.4}), PLD epsilon = {p:.4}",
        r.epsilon, r.classic
    );
}

criterion_group!(benches, calibrations, accountants);
criterion_main!(benches);
