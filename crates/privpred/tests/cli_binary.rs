//! Two-class problems as one sigmoid output on the command line: `calibrate --loss logistic`
//! (K = 1, Chaudhuri, Monteleoni & Sarwate 2011, Corollary 8: β = Nλε/2), `train --loss
//! logistic` for model sensitivity, prediction sensitivity, loss perturbation and DP-SGD, `predict` and `evaluate` on the artifact,
//! and the refusals (more than two classes, methods that do not train the sigmoid model).

mod common;

use common::{assert_bad, json, ok, toy_csv};
use serde_json::Value;
use std::path::Path;

/// The toy set's classes 0 and 1 only (a two-class CSV).
fn two_class(dir: &Path) -> String {
    let src = std::fs::read_to_string(toy_csv(dir, 300)).unwrap();
    let mut lines = src.lines();
    let mut s = format!("{}\n", lines.next().unwrap());
    for l in lines.filter(|l| !l.ends_with(",2")) {
        s.push_str(l);
        s.push('\n');
    }
    let p = dir.join("two.csv");
    std::fs::write(&p, s).unwrap();
    format!("csv-pixels:{}", p.display())
}

#[test]
fn calibrate_logistic_is_chaudhuri_corollary_8() {
    let v = json(&[
        "calibrate",
        "model-sensitivity",
        "--epsilon",
        "1",
        "--n",
        "569",
        "--lambda",
        "0.01",
        "--classes",
        "2",
        "--loss",
        "logistic",
        "--json",
    ]);
    let beta = v["noise"]["beta"].as_f64().unwrap();
    assert!((beta - 569.0 * 0.01 / 2.0).abs() < 1e-12, "{v}");
    assert_eq!(v["assumptions"]["loss"], "logistic");
    assert_eq!(v["assumptions"]["K"], 1.0);
    assert_eq!(v["assumptions"]["L"], 0.25);
    assert_bad(
        &[
            "calibrate",
            "model-sensitivity",
            "--epsilon",
            "1",
            "--n",
            "569",
            "--lambda",
            "0.01",
            "--loss",
            "logistic",
        ],
        "classes",
    );
}

#[test]
fn train_predict_evaluate_with_one_sigmoid_output() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ds = two_class(dir);
    for method in [
        "model-sensitivity",
        "prediction-sensitivity",
        "loss-perturbation",
        "dp-sgd",
    ] {
        let out = dir.join(format!("{method}.safetensors"));
        let mut args = vec![
            "train",
            method,
            "--dataset",
            &ds,
            "--classes",
            "2",
            "--epsilon",
            "10",
            "--loss",
            "logistic",
            "--budget",
            "1",
            "--seed",
            "1",
            "--out",
            out.to_str().unwrap(),
        ];
        if method == "dp-sgd" {
            args.extend(["--clip", "0.5", "--delta", "1e-5", "--batch-size", "32"]);
        } else {
            args.extend(["--lambda", "0.01"]);
        }
        ok(&args);
        let j: Value = serde_json::from_str(&ok(&[
            "evaluate",
            "--model",
            out.to_str().unwrap(),
            "--dataset",
            &ds,
            "--json",
        ]))
        .unwrap();
        assert!(
            j["accuracy"]["mean"].as_f64().unwrap() > 0.8,
            "{method}: {j}"
        );
        assert_eq!(j["loss"], "logistic", "{method}: {j}");
    }
    // refusals: three classes, and methods that do not train the sigmoid model
    let three = format!("csv-pixels:{}", toy_csv(dir, 90).display());
    let o = dir.join("x.safetensors");
    let o = o.to_str().unwrap();
    let base = [
        "--epsilon",
        "1",
        "--lambda",
        "0.01",
        "--loss",
        "logistic",
        "--out",
        o,
    ];
    let mut a = vec![
        "train",
        "model-sensitivity",
        "--dataset",
        &three,
        "--classes",
        "3",
    ];
    a.extend_from_slice(&base);
    assert_bad(&a, "2 classes");
    let mut a = vec!["train", "subsample-aggregate", "--dataset", &ds];
    a.extend_from_slice(&base);
    assert_bad(&a, "loss");
}
