//! Trials per second of each audit (both datasets counted: one trial = one run on D or D′),
//! including the region selection and the Clopper–Pearson bound. Prints a table.
//! Run: `cargo bench -p privpred-audit --bench audit_throughput`.

use privpred_audit::{AuditRequest, AuditSetting, audit};
use privpred_core::{CalibrationMode, Method, Privacy};
use std::time::Instant;

/// (name, method, ε, δ, B, trials, setting, end to end)
type Case = (
    &'static str,
    Method,
    f64,
    f64,
    u64,
    usize,
    AuditSetting,
    bool,
);

/// Prints the table header, then one row per case of [`cases`].
fn main() {
    let threads = rayon::current_num_threads();
    println!("audit throughput ({threads} threads; trials on D and D′ both counted)");
    println!(
        "{:<46} {:>10} {:>10} {:>14}",
        "method", "trials", "seconds", "trials/s"
    );
    for case in cases() {
        run_case(case);
    }
}

/// The audits measured: each selection and additive mechanism, the DP-SGD simulation, and the
/// two end-to-end audits (loss perturbation, DP-SGD).
fn cases() -> Vec<Case> {
    vec![
        (
            "subsample-aggregate, C = 10, B = 1",
            Method::SubsampleAggregate,
            4.0,
            0.0,
            1,
            200_000,
            AuditSetting::default(),
            false,
        ),
        (
            "subsample-aggregate, C = 10, B = 10",
            Method::SubsampleAggregate,
            1.0,
            1e-5,
            10,
            50_000,
            AuditSetting::default(),
            false,
        ),
        (
            "prediction sensitivity, l2-Laplace, C = 10",
            Method::PredictionSensitivity,
            1.0,
            0.0,
            1,
            200_000,
            AuditSetting::default(),
            false,
        ),
        (
            "prediction sensitivity, Gaussian, B = 10",
            Method::PredictionSensitivity,
            1.0,
            1e-5,
            10,
            50_000,
            AuditSetting::default(),
            false,
        ),
        (
            "model sensitivity, l2-Laplace, D·C = 7840",
            Method::ModelSensitivity,
            1.0,
            0.0,
            1,
            10_000,
            AuditSetting::default(),
            false,
        ),
        (
            "model sensitivity, Gaussian, D·C = 7840",
            Method::ModelSensitivity,
            1.0,
            1e-5,
            1,
            10_000,
            AuditSetting::default(),
            false,
        ),
        (
            "DP-SGD simulation, 20 steps (Poisson)",
            Method::DpSgd,
            1.0,
            1e-5,
            1,
            100_000,
            AuditSetting::default(),
            false,
        ),
        (
            "loss perturbation, end to end, N = 100",
            Method::LossPerturbation,
            4.0,
            0.0,
            1,
            4_000,
            AuditSetting::default(),
            false,
        ),
        (
            "DP-SGD, end to end, N = 100, 2 steps",
            Method::DpSgd,
            4.0,
            1e-5,
            1,
            20_000,
            AuditSetting {
                dpsgd_n: 100,
                batch_size: 50,
                epochs: 1.0,
                ..AuditSetting::default()
            },
            true,
        ),
    ]
}

/// Runs one audit and prints its row: trials on D and D′, seconds, trials/s and the bound.
fn run_case(case: Case) {
    let (name, method, eps, delta, budget, trials, setting, e2e) = case;
    let req = AuditRequest {
        method,
        calibration: CalibrationMode::Corrected,
        privacy: Privacy::new(eps, delta).expect("valid"),
        budget,
        trials,
        seed: 1,
        confidence: 0.95,
        setting,
        end_to_end: e2e,
    };
    let t = Instant::now();
    let r = audit(&req).expect("audit runs");
    let s = t.elapsed().as_secs_f64();
    let total = 2 * trials;
    println!(
        "{:<46} {:>10} {:>10.3} {:>14.0}   (lower bound {:.3})",
        name,
        total,
        s,
        total as f64 / s,
        r.empirical_epsilon_lower
    );
}
