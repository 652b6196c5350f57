//! Accuracy targets on real full MNIST (60,000 training / 10,000 test digits, default
//! preprocessing: pixels/255, per-example unit norm). Reads MNIST from the cache (CI fetches it
//! first). One test so the data is loaded once; total a few minutes on 2 cores.

use privpred_core::ParamGuard;
use privpred_core::{Budget, CalibrationMode, Method, Privacy};
use privpred_data::split::holdout_unit;
use privpred_data::{DatasetSpec, LoadOptions, Preprocessing, load};
use privpred_linear::TrainParams;
use privpred_linear::methods::train_private;
use privpred_linear::train::{LAMBDA_GRID, accuracy, cv_lambda_nonprivate};
use privpred_linear::{LbfgsOptions, fit_logistic};
use rand::SeedableRng;

#[test]
fn full_mnist_accuracy_targets() {
    let splits = load(&DatasetSpec::Mnist, &LoadOptions::default()).expect("MNIST in the cache");
    let fitted = Preprocessing::default().fit(&splits.train, 0).unwrap();
    let train = fitted.apply_train(&splits.train).unwrap();
    let test = fitted.apply(&splits.test).unwrap();
    assert_eq!(
        (train.n, test.n, train.d, train.classes),
        (60_000, 10_000, 784, 10)
    );

    // non-private, λ cross-validated on a 10 % hold-out (docs/study.md grid): ≥ 92 %
    let opts = LbfgsOptions::default();
    let (tr, ho) = holdout_unit(&train, 0.1, 7);
    let cv = cv_lambda_nonprivate(&tr, &ho, &LAMBDA_GRID, &opts).unwrap();
    let fit = fit_logistic(&train, cv.best, None, &opts).unwrap();
    assert!(fit.lbfgs.grad_norm <= 1e-4, "{:?}", fit.lbfgs);
    let acc = accuracy(&fit.model, &test).unwrap();
    println!(
        "non-private: lambda {:e} (CV), test accuracy {:.2} %, {:?}",
        cv.best,
        100.0 * acc,
        fit.lbfgs
    );
    assert!(acc >= 0.92, "non-private accuracy {acc}");

    // ε = 1, B = 100, δ = 0, corrected: the four δ = 0 methods (λ as chosen by their own CV
    // on the hold-out in `privpred train`: loss perturbation 1e-2, model/prediction
    // sensitivity 1e-1; teachers λ = 0, T = 256)
    let privacy = Privacy::new(1.0, 0.0).unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(2020);
    let mut report = Vec::new();
    for (m, lambda) in [
        (Method::ModelSensitivity, 1e-1),
        (Method::LossPerturbation, 1e-2),
        (Method::PredictionSensitivity, 1e-1),
        (Method::SubsampleAggregate, 0.0),
    ] {
        let cfg = TrainParams::new(
            m,
            CalibrationMode::Corrected,
            privacy,
            Budget::finite(100).unwrap(),
        )
        .lambda(if lambda > 0.0 { lambda } else { 1e-4 })
        .check()
        .unwrap();
        let p = train_private(&cfg, &train, &mut rng).unwrap();
        assert!(p.calibration.is_valid());
        let accs: Vec<f64> = (0..5)
            .map(|_| p.accuracy(&test, &mut rng).unwrap())
            .collect();
        let mean = accs.iter().sum::<f64>() / accs.len() as f64;
        println!(
            "{m}: lambda {lambda:e}, test accuracy {:.2} % (mean of 5 draws)",
            100.0 * mean
        );
        report.push((m, mean));
    }
    let get = |m: Method| report.iter().find(|r| r.0 == m).unwrap().1;
    // chance is 10 %. Subsample-and-aggregate at β = ε/(2B) = 0.005 is capped near
    // e^{1.28}/(e^{1.28} + 9) ≈ 28.6 % even with unanimous teachers.
    assert!(get(Method::LossPerturbation) > 0.5, "{report:?}");
    assert!(get(Method::SubsampleAggregate) > 0.18, "{report:?}");
    assert!(get(Method::ModelSensitivity) > 0.3, "{report:?}");
    assert!(get(Method::PredictionSensitivity) > 0.15, "{report:?}");
}
