//! Measures the test accuracy of the three ways `privpred train` can choose λ (or DP-SGD's
//! clip ν) at the same total ε: the private split selection (inside the guarantee), a fixed
//! public value (costs nothing) and the paper's non-private hold-out selection (outside the
//! guarantee). The table of docs/selection.md.
//!
//! ```sh
//! RAYON_NUM_THREADS=2 cargo run --release -p privpred-study --example selection -- \
//!     --datasets mnist,fashion-mnist --reps 3 --seed 1 --out results/selection.jsonl
//! ```
//!
//! Every protocol trains on the whole training split (60,000 digits for MNIST and
//! Fashion-MNIST), with `train`'s defaults (unit-ball `normalize`, no bias, B = 100, DP-SGD
//! b = 256, 20 epochs) and is scored on the test split, one mechanism draw per test query.

use privpred_core::{Budget, CalibrationMode, Method, Privacy, SelectionMethod, defaults};
use privpred_data::{DatasetSpec, LoadOptions, Preprocessing, UnitBallDataset, load};
use privpred_linear::dpsgd::CLIP_GRID;
use privpred_linear::methods::{self, Knob, MethodConfig, private_split_select};
use privpred_linear::train::LAMBDA_GRID;
use privpred_linear::{TrainParams, train_private};
use rand::RngExt;
use std::io::Write;
use std::time::Instant;

type Res<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The public λ of protocol (b), fixed before the measurement (`train`'s default).
const PUBLIC_LAMBDA: f64 = defaults::LINEAR_PUBLIC_LAMBDA;

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == &format!("--{name}"))
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

fn cfg(m: Method, eps: f64, lambda: f64, clip: f64, sel: SelectionMethod) -> Res<MethodConfig> {
    let delta = if m == Method::DpSgd { 1e-5 } else { 0.0 };
    let p = TrainParams::new(
        m,
        CalibrationMode::Corrected,
        Privacy::new(eps, delta)?,
        Budget::finite(defaults::BUDGET)?,
    )
    .lambda(lambda)
    .clip(clip)
    .selection(sel);
    Ok(privpred_core::ParamGuard::check(p)?)
}

fn test_accuracy(
    c: &MethodConfig,
    train: &UnitBallDataset,
    test: &UnitBallDataset,
    rng: &mut privpred_core::PrivRng,
) -> Res<f64> {
    let p = train_private(c, train, rng)?;
    Ok(p.accuracy(test, rng)?)
}

fn main() -> Res<()> {
    let datasets = arg("datasets", "mnist,fashion-mnist");
    let methods_arg = arg(
        "methods",
        "model-sensitivity,loss-perturbation,prediction-sensitivity,dp-sgd",
    );
    let epsilons: Vec<f64> = arg("epsilons", "0.1,1,10")
        .split(',')
        .map(|s| s.parse())
        .collect::<std::result::Result<_, _>>()?;
    let reps: usize = arg("reps", "3").parse()?;
    let seed: u64 = arg("seed", "1").parse()?;
    let cv_draws: usize = arg("cv-draws", "5").parse()?;
    let out = arg("out", "selection.jsonl");
    let mut f = std::fs::File::create(&out)?;
    for ds in datasets.split(',') {
        let splits = load(&DatasetSpec::parse(ds)?, &LoadOptions::default())?;
        let fitted = Preprocessing::default().fit(&splits.train, 0)?;
        let train = fitted.apply_train(&splits.train)?;
        let test = fitted.apply(&splits.test)?;
        eprintln!("{ds}: N = {}, test = {}", train.n, test.n);
        for mname in methods_arg.split(',') {
            let m = *Method::ALL
                .iter()
                .find(|m| m.name() == mname)
                .ok_or(format!("unknown method `{mname}`"))?;
            let knob = if m == Method::DpSgd {
                Knob::Clip
            } else {
                Knob::Lambda
            };
            let grid: &[f64] = if m == Method::DpSgd {
                &CLIP_GRID
            } else {
                &LAMBDA_GRID
            };
            for &eps in &epsilons {
                for rep in 0..reps {
                    let mut rng = privpred_core::seeded_rng(
                        seed ^ (rep as u64) << 32 ^ (eps * 1000.0) as u64,
                    );
                    let base = cfg(
                        m,
                        eps,
                        PUBLIC_LAMBDA,
                        defaults::LINEAR_DPSGD_CLIP,
                        SelectionMethod::Public,
                    )?;
                    // (a) private split
                    let t = Instant::now();
                    let s = private_split_select(&base, &train, grid, knob, &mut rng)?;
                    let (l, c) = match knob {
                        Knob::Lambda => (s.chosen, defaults::LINEAR_DPSGD_CLIP),
                        Knob::Clip => (PUBLIC_LAMBDA, s.chosen),
                    };
                    let pc = cfg(m, eps, l, c, SelectionMethod::PrivateSplit)?;
                    let acc_private = test_accuracy(&pc, &s.final_train, &test, &mut rng)?;
                    let t_private = t.elapsed().as_secs_f64();
                    // (b) public fixed value
                    let t = Instant::now();
                    let acc_public = test_accuracy(&base, &train, &test, &mut rng)?;
                    let t_public = t.elapsed().as_secs_f64();
                    // (c) the paper's non-private hold-out selection
                    let t = Instant::now();
                    let (tr, ho) = privpred_data::split::holdout_unit(
                        &train,
                        defaults::HOLDOUT_FRACTION,
                        rng.random(),
                    );
                    let cv = match knob {
                        Knob::Lambda => {
                            methods::cv_lambda_draws(&base, &tr, &ho, grid, cv_draws, &mut rng)?
                        }
                        Knob::Clip => {
                            methods::cv_clip_draws(&base, &tr, &ho, grid, cv_draws, &mut rng)?
                        }
                    };
                    let (l, c) = match knob {
                        Knob::Lambda => (cv.best, defaults::LINEAR_DPSGD_CLIP),
                        Knob::Clip => (PUBLIC_LAMBDA, cv.best),
                    };
                    let nc = cfg(m, eps, l, c, SelectionMethod::NonPrivateHoldout)?;
                    let acc_nonprivate = test_accuracy(&nc, &train, &test, &mut rng)?;
                    let t_nonprivate = t.elapsed().as_secs_f64();
                    let row = serde_json::json!({
                        "dataset": ds, "method": m.name(), "epsilon": eps, "rep": rep,
                        "private_split": {"accuracy": acc_private, "chosen": s.chosen, "final_n": s.plan.final_n, "seconds": t_private},
                        "public": {"accuracy": acc_public, "value": if knob == Knob::Clip { defaults::LINEAR_DPSGD_CLIP } else { PUBLIC_LAMBDA }, "seconds": t_public},
                        "non_private_holdout": {"accuracy": acc_nonprivate, "chosen": cv.best, "seconds": t_nonprivate},
                    });
                    eprintln!("{row}");
                    writeln!(f, "{row}")?;
                    f.flush()?;
                }
            }
        }
    }
    Ok(())
}
