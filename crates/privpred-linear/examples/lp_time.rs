//! Times loss-perturbation fits on real MNIST (N = 60,000, no bias feature: the study's
//! default) in `paper` and `corrected` mode, with the study's shared preconditioner and solver
//! options, one kernel thread: the seconds, iterations and evaluations of each fit and its
//! final gradient norm (certified in `corrected`), so that two builds can be compared for
//! identical fits and their speed. Where a certified fit's time goes: ≈ 40 f64 passes at small
//! ρ_eff (ε = 10, λ = 1e-4), 4 at the study's usual λ = 0.05.
//!
//! Run: `EPS=10 LAMBDA=1e-4 REPS=3 cargo run --release -p privpred-linear --example lp_time`
//! (defaults ε = 1, λ = 0.05, 4 fits per mode).
use privpred_core::{Budget, CalibrationMode, Method, Privacy};
use privpred_linear::TrainParams;
use privpred_linear::kernel::Design;
use privpred_linear::lbfgs::LbfgsOptions;
use privpred_linear::methods::calibrate;
use privpred_linear::methods::loss_perturbation::*;
use privpred_linear::precond::DataMoment;
use rand::SeedableRng;
use std::sync::Arc;
use std::time::Instant;

/// The environment variable `name` parsed, or `default` when unset (an unparsable value is
/// an error, not a silent default).
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a valid value")),
        Err(_) => default,
    }
}

fn main() {
    let eps: f64 = env_or("EPS", 1.0);
    let lambda: f64 = env_or("LAMBDA", 0.05);
    let reps: usize = env_or("REPS", 4);
    let ds = mnist();
    let design = Design::new(&ds.features, &ds.labels, ds.d, ds.classes);
    let moment = Arc::new(DataMoment::new(&design).unwrap());
    let opts = LbfgsOptions::default();
    let np = privpred_linear::train::fit_logistic(&ds, lambda, None, &opts)
        .unwrap()
        .model;
    let cell = Arc::new(privpred_linear::exact::NonzerosCell::default());
    for mode in [CalibrationMode::Paper, CalibrationMode::Corrected] {
        // the study's route: checked parameters, then the method's calibration (certified in
        // `corrected`, erratum 4.8)
        let privacy = Privacy::new(eps, 0.0).unwrap();
        let cfg = TrainParams::new(Method::LossPerturbation, mode, privacy, Budget::Unlimited)
            .lambda(lambda)
            .check_for(ds.n)
            .unwrap();
        let calib = calibrate(&cfg, ds.n, ds.classes).unwrap();
        let rho_eff = loss_perturbation_rho_eff(&calib, lambda, ds.n, ds.classes);
        let pre = LossPerturbationPreconditioner::new(&ds, moment.clone(), &np, rho_eff)
            .unwrap()
            .sharing_nonzeros(cell.clone());
        for r in 0..reps {
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(r as u64);
            let t = Instant::now();
            let (_, rep, cert) = privpred_linear::kernel::sequential(|| {
                loss_perturbation_fit_certified(
                    &ds,
                    &calib,
                    lambda,
                    Some(&pre),
                    cfg.lbfgs(),
                    &mut rng,
                )
            })
            .unwrap();
            println!(
                "{mode:?} eps={eps} lambda={lambda} rho_eff={rho_eff:.1} rep {r}: {:.3} s, {} it, {} evals, |g|={:.2e} cert={:?}",
                t.elapsed().as_secs_f64(),
                rep.iterations,
                rep.evaluations,
                rep.grad_norm,
                cert.map(|c| c.gradient_norm)
            );
        }
    }
}

fn mnist() -> privpred_data::UnitBallDataset {
    use privpred_data::{load::LoadOptions, preprocess::Preprocessing, spec::DatasetSpec};
    let raw = privpred_data::load::load(
        &DatasetSpec::parse("mnist").unwrap(),
        &LoadOptions::default(),
    )
    .unwrap();
    let p = Preprocessing::default();
    p.fit(&raw.train, 0)
        .unwrap()
        .apply_train(&raw.train)
        .unwrap()
}
