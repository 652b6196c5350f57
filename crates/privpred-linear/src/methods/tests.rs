//! Tests across the methods: validation, certification, and the trait's dispatch and reuse.

use super::*;
use crate::error::LinearError;
use crate::train::tests::toy;
use privpred_core::{Budget, CalibrationMode, Noise, Privacy};
use rand::SeedableRng;

/// A configuration at (ε, δ, B) in `corrected` with the defaults of docs/study.md.
pub(crate) fn cfg(m: Method, eps: f64, delta: f64, b: u64) -> MethodConfig {
    MethodConfig::new(
        m,
        CalibrationMode::Corrected,
        Privacy::new(eps, delta).unwrap(),
        Budget::finite(b).unwrap(),
    )
}

#[test]
fn queries_are_validated() {
    assert!(matches!(
        check_query(&[0.1, 0.2], 3),
        Err(LinearError::Dimension(_))
    ));
    assert!(matches!(
        check_query(&[0.1, f32::NAN, 0.0], 3),
        Err(LinearError::NonFinite(_))
    ));
    assert!(matches!(
        check_query(&[0.1, f32::INFINITY, 0.0], 3),
        Err(LinearError::NonFinite(_))
    ));
    assert!(matches!(
        check_query(&[0.8, 0.8, 0.0], 3),
        Err(LinearError::UnitBall(_))
    ));
    assert!(check_query(&[0.6, 0.8, 0.0], 3).is_ok());
}

#[test]
fn lambda_must_be_positive_where_needed() {
    let ds = toy(100, 4, 2, 1);
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    for m in [
        Method::ModelSensitivity,
        Method::LossPerturbation,
        Method::PredictionSensitivity,
    ] {
        for l in [0.0, -1.0, f64::NAN] {
            let mut c = cfg(m, 1.0, 0.0, 10);
            c.lambda = l;
            assert!(
                matches!(
                    train_private(&c, &ds, &mut rng),
                    Err(LinearError::InvalidArgument { name: "lambda", .. })
                ),
                "{m} {l}"
            );
        }
    }
    // DP-SGD needs δ > 0: the core refuses
    let mut c = cfg(Method::DpSgd, 1.0, 0.0, 10);
    c.dp_sgd.batch_size = 10;
    assert!(matches!(
        train_private(&c, &ds, &mut rng),
        Err(LinearError::Core(_))
    ));
}

/// Erratum 4.8 end to end: in `corrected`, the released fits of model sensitivity,
/// prediction sensitivity and loss perturbation carry a certificate g ≤ γ and noise larger
/// than the exact-minimiser calibration's; with the solver stopped early (iteration cap)
/// they are refused; `paper` releases the early iterate and says it is not valid.
#[test]
fn certified_methods_refuse_early_stops_and_pay_for_the_residual() {
    let ds = toy(1500, 12, 4, 9);
    for m in [
        Method::ModelSensitivity,
        Method::PredictionSensitivity,
        Method::LossPerturbation,
    ] {
        let mut c = cfg(m, 1.0, 0.0, 10);
        c.lambda = 1e-2;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        let p = train_private(&c, &ds, &mut rng).unwrap();
        let o = p.optimization().expect("certified");
        assert!(o.gradient_norm <= o.gradient_norm_bound, "{m}: {o:?}");
        let exact = privpred_core::calibrate::calibrate(&c.request(ds.n, ds.classes)).unwrap();
        match (exact.noise(), p.calibration.noise()) {
            (Noise::L2Laplace { beta: a }, Noise::L2Laplace { beta: b })
            | (
                Noise::DiscreteL2Laplace { beta: a, .. },
                Noise::DiscreteL2Laplace { beta: b, .. },
            ) => {
                assert!(b < a, "{m}: the residual must cost noise ({a} vs {b})")
            }
            other => panic!("{other:?}"),
        }
        let mut capped = c.clone();
        capped.lbfgs.max_iter = 1;
        assert!(
            matches!(
                train_private(&capped, &ds, &mut rng),
                Err(LinearError::NotCertified(_))
            ),
            "{m}: an early-stopped fit was released"
        );
        capped.mode = CalibrationMode::Paper;
        let p = train_private(&capped, &ds, &mut rng).unwrap();
        assert!(
            !p.calibration.is_valid() && p.optimization().is_none(),
            "{m}"
        );
    }
}

const ALL: [Method; 5] = [
    Method::ModelSensitivity,
    Method::LossPerturbation,
    Method::DpSgd,
    Method::PredictionSensitivity,
    Method::SubsampleAggregate,
];

/// A configuration every method can train on `toy(300, 5, 3, _)` quickly.
fn small(m: Method) -> MethodConfig {
    let mut c = cfg(m, 1.0, 1e-5, 10);
    c.lambda = 1e-2;
    c.teachers = 8;
    c.dp_sgd.batch_size = 30;
    c.dp_sgd.epochs = 2.0;
    c
}

/// Every `Method` reaches its own module: the dispatched calibration is the module's, the
/// shared fit is the module's variant, and the release carries the method's record and
/// weights.
#[test]
fn every_method_dispatches_to_its_module() {
    let ds = toy(300, 5, 3, 11);
    for m in ALL {
        let c = small(m);
        let cal = calibrate(&c, ds.n, ds.classes).unwrap();
        let own = match m {
            Method::ModelSensitivity => ModelSensitivity.calibrate(&c, ds.n, ds.classes),
            Method::LossPerturbation => LossPerturbation.calibrate(&c, ds.n, ds.classes),
            Method::DpSgd => DpSgd.calibrate(&c, ds.n, ds.classes),
            Method::PredictionSensitivity => PredictionSensitivity.calibrate(&c, ds.n, ds.classes),
            Method::SubsampleAggregate => SubsampleAggregate.calibrate(&c, ds.n, ds.classes),
        }
        .unwrap();
        assert_eq!(cal, own, "{m}");
        assert_eq!(cal.method(), m);
        let fit = Fit {
            cfg: &c,
            train: &ds,
            calibration: &cal,
            purpose: Purpose::Release,
        };
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        let shared = SharedFit::fit(&fit, &Reuse::default(), &mut rng).unwrap();
        assert_eq!(shared.method(), m);
        let variant_ok = matches!(
            (m, &shared),
            (Method::ModelSensitivity, SharedFit::ModelSensitivity(_))
                | (Method::LossPerturbation, SharedFit::LossPerturbation(_))
                | (Method::DpSgd, SharedFit::DpSgd(()))
                | (
                    Method::PredictionSensitivity,
                    SharedFit::PredictionSensitivity(_)
                )
                | (Method::SubsampleAggregate, SharedFit::SubsampleAggregate(_))
        );
        assert!(variant_ok, "{m}: {shared:?}");
        let p = shared.release(&fit, &mut rng).unwrap();
        assert_eq!(p.method(), m);
        let record_ok = matches!(
            (m, &p.params, &p.kind),
            (
                Method::ModelSensitivity | Method::LossPerturbation,
                MethodParams::Regularised { .. },
                PredictorKind::Released { .. }
            ) | (
                Method::DpSgd,
                MethodParams::DpSgd { .. },
                PredictorKind::Released { .. }
            ) | (
                Method::PredictionSensitivity,
                MethodParams::Regularised { .. },
                PredictorKind::NoisyLogits { .. }
            ) | (
                Method::SubsampleAggregate,
                MethodParams::Teachers { teachers: 8, .. },
                PredictorKind::Teachers { .. }
            )
        );
        assert!(record_ok, "{m}: {:?}", p.params);
        // a shared fit of one method refuses another method's configuration
        let other = small(if m == Method::DpSgd {
            Method::ModelSensitivity
        } else {
            Method::DpSgd
        });
        let wrong = Fit { cfg: &other, ..fit };
        assert!(shared.release(&wrong, &mut rng).is_err(), "{m}");
    }
}

/// A study's repetition ([`SharedFit::draw`]) is exactly one release answering every query
/// once: with the same seed, the labels of `draw` equal those of `release` followed by
/// `predict_dataset`, for every method (the shortcut is exact).
#[test]
fn a_draw_is_a_release_answering_each_query_once() {
    let ds = toy(300, 5, 3, 12);
    let queries = toy(120, 5, 3, 13);
    for m in ALL {
        let c = small(m);
        let cal = calibrate(&c, ds.n, ds.classes).unwrap();
        let fit = Fit {
            cfg: &c,
            train: &ds,
            calibration: &cal,
            purpose: Purpose::Release,
        };
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(2);
        let shared = SharedFit::fit(&fit, &Reuse::default(), &mut rng).unwrap();
        let scores = shared.score(&queries).unwrap();
        let mut a = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        let p = shared.release(&fit, &mut a).unwrap();
        let released = p.predict_dataset(&queries, &mut a).unwrap();
        let mut b = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        let drawn = shared.draw(&fit, &scores, &queries, &mut b).unwrap();
        assert_eq!(drawn.labels, released, "{m}");
        // without precomputed scores the draw computes them itself: the same labels
        let mut b = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        let plain = shared.draw(&fit, &Scores::None, &queries, &mut b).unwrap();
        assert_eq!(plain.labels, released, "{m}");
    }
}

/// The shared fit is reused across repetitions: cross-validating λ over 3 values with 4 draws
/// each builds 3 shared fits (one per λ), not 12; and repeated draws from one shared fit are
/// fresh draws of the noise (they differ) while the shared fit itself is unchanged.
#[test]
fn the_shared_fit_is_reused_across_repetitions() {
    let ds = toy(300, 5, 3, 14);
    let hold = toy(100, 5, 3, 15);
    for m in [
        Method::ModelSensitivity,
        Method::LossPerturbation,
        Method::PredictionSensitivity,
    ] {
        let c = small(m);
        let before = shared_fits_built();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        cv_lambda_draws(&c, &ds, &hold, &[1e-3, 1e-2, 1e-1], 4, &mut rng).unwrap();
        assert_eq!(shared_fits_built() - before, 3, "{m}");
    }
    let c = small(Method::ModelSensitivity);
    let cal = calibrate(&c, ds.n, ds.classes).unwrap();
    let fit = Fit {
        cfg: &c,
        train: &ds,
        calibration: &cal,
        purpose: Purpose::Release,
    };
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(4);
    let shared = SharedFit::fit(&fit, &Reuse::default(), &mut rng).unwrap();
    let snapshot = format!("{shared:?}");
    let before = shared_fits_built();
    let draws: Vec<Vec<u32>> = (0..5)
        .map(|_| {
            shared
                .draw(&fit, &Scores::None, &hold, &mut rng)
                .unwrap()
                .labels
        })
        .collect();
    assert_eq!(shared_fits_built(), before);
    assert_eq!(format!("{shared:?}"), snapshot);
    assert!(draws.windows(2).any(|w| w[0] != w[1]), "no fresh noise");
}

/// The artifact's `predictor` object keeps its flat form: a release serialises with exactly
/// the fields written before the record was an enum, and reads back equal; a record missing a
/// field its method needs, or holding one it cannot have, is refused.
#[test]
fn the_predictor_keeps_its_serialised_form() {
    let ds = toy(300, 5, 3, 16);
    for m in ALL {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        let p = train_private(&small(m), &ds, &mut rng).unwrap();
        let v = serde_json::to_value(&p).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        keys.sort_unstable();
        let mut want = vec![
            "calibration",
            "clip",
            "dp_sgd",
            "kind",
            "lambda",
            "seed_policy",
            "teachers",
        ];
        if p.certificate().is_some() {
            want.push("optimization");
            want.sort_unstable();
        }
        assert_eq!(keys, want, "{m}");
        assert_eq!(v["lambda"].as_f64(), p.lambda(), "{m}");
        assert_eq!(v["clip"].as_f64(), p.clip(), "{m}");
        assert_eq!(
            v["teachers"].as_u64(),
            p.teachers().map(|t| t as u64),
            "{m}"
        );
        assert_eq!(v["dp_sgd"].is_null(), p.dp_sgd_steps().is_none(), "{m}");
        let back: PrivatePredictor = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back, p, "{m}");
        let (drop, add) = match m {
            Method::DpSgd => ("clip", ("lambda", serde_json::json!(0.1))),
            Method::SubsampleAggregate => ("teachers", ("clip", serde_json::json!(0.1))),
            _ => ("lambda", ("teachers", serde_json::json!(4))),
        };
        let mut missing = v.clone();
        missing[drop] = serde_json::Value::Null;
        let e = serde_json::from_value::<PrivatePredictor>(missing).unwrap_err();
        assert!(e.to_string().contains(drop), "{m}: {e}");
        let mut extra = v;
        extra[add.0] = add.1;
        let e = serde_json::from_value::<PrivatePredictor>(extra).unwrap_err();
        assert!(e.to_string().contains(add.0), "{m}: {e}");
    }
}

/// DP-SGD's clip ν is scored by the mean hold-out accuracy of k private runs: each
/// ν's score equals the mean of k runs trained by hand from the same generator stream, the k
/// runs are distinct draws (their accuracies differ for some ν), one draw per value is
/// [`cv_clip`], and k outside 1..=1000 is refused.
#[test]
fn clip_selection_averages_k_private_runs() {
    let ds = toy(300, 5, 3, 21);
    let hold = toy(200, 5, 3, 22);
    let c = small(Method::DpSgd);
    let grid = [1e-2, 1e-1, 1.0];
    let k = 3;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(9);
    let cv = cv_clip_draws(&c, &ds, &hold, &grid, k, &mut rng).unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(9);
    let mut distinct = false;
    for (i, &nu) in grid.iter().enumerate() {
        let mut cn = c.clone();
        cn.dp_sgd.clip = Some(nu);
        let accs: Vec<f64> = (0..k)
            .map(|_| {
                let p = train_private(&cn, &ds, &mut rng).unwrap();
                p.accuracy(&hold, &mut rng).unwrap()
            })
            .collect();
        distinct |= accs.windows(2).any(|w| w[0] != w[1]);
        let mean = accs.iter().sum::<f64>() / k as f64;
        assert_eq!(cv.scores[i].accuracy, mean, "ν = {nu}: {accs:?}");
    }
    assert!(distinct, "the k runs were not fresh draws");
    let one = cv_clip_draws(
        &c,
        &ds,
        &hold,
        &grid,
        1,
        &mut rand_chacha::ChaCha20Rng::seed_from_u64(9),
    );
    let old = cv_clip(
        &c,
        &ds,
        &hold,
        &grid,
        &mut rand_chacha::ChaCha20Rng::seed_from_u64(9),
    );
    assert_eq!(format!("{one:?}"), format!("{old:?}"));
    for bad in [0, 1001] {
        assert!(matches!(
            cv_clip_draws(&c, &ds, &hold, &grid, bad, &mut rng),
            Err(LinearError::InvalidArgument { .. })
        ));
    }
}

/// What the trainer measured on the private data (the certificate's gradient norm, rounding
/// bound and refinement count; DP-SGD's examples and clipped fraction) stays in the trained
/// predictor's private diagnostics and is never serialised; records written by earlier
/// builds, which carried it, read back without it.
#[test]
fn the_serialised_predictor_holds_no_measured_statistics() {
    let ds = toy(300, 5, 3, 16);
    for m in ALL {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        let p = train_private(&small(m), &ds, &mut rng).unwrap();
        let v = serde_json::to_value(&p).unwrap();
        let text = v.to_string();
        for measured in [
            "gradient_norm\"",
            "rounding_bound",
            "refinement_evaluations",
            "clipped_fraction",
            "examples",
        ] {
            assert!(!text.contains(measured), "{m}: {measured} in {text}");
        }
        match m {
            Method::DpSgd => {
                assert!(
                    p.dp_sgd().is_some(),
                    "{m}: the trainer keeps its statistics"
                );
                assert_eq!(
                    v["dp_sgd"],
                    serde_json::json!({"steps": p.dp_sgd_steps().unwrap()})
                );
            }
            _ if p.certificate().is_some() => {
                let o = p.optimization().expect("the trainer keeps its measurement");
                assert_eq!(
                    v["optimization"],
                    serde_json::json!({"gradient_norm_bound": o.gradient_norm_bound, "certified": true}),
                    "{m}"
                );
            }
            _ => {}
        }
        // a record carrying measurements of the private data is refused, not cleaned
        let mut measured = v.clone();
        let mut edited = false;
        if !measured["optimization"].is_null() {
            measured["optimization"]["gradient_norm"] = 1e-9.into();
            edited = true;
        }
        if !measured["dp_sgd"].is_null() {
            measured["dp_sgd"]["clipped_fraction"] = 0.5.into();
            edited = true;
        }
        if edited {
            assert!(
                serde_json::from_value::<PrivatePredictor>(measured).is_err(),
                "{m}"
            );
        }
        let back: PrivatePredictor = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back, p, "{m}");
        assert_eq!(back.diagnostics, Default::default(), "{m}");
        assert_eq!(serde_json::to_value(&back).unwrap(), v, "{m}");
    }
}
