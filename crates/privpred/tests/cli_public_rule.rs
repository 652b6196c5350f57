//! The public rule's defaults through `train`: λ, T, DP-SGD's batch size and clip come from
//! public quantities only (N, d, C, ε, B) — two tables of the same shape but different rows
//! give the same λ — the record says `public-rule` with the formula, two-class data trains the
//! sigmoid, small tables train every method at the defaults, and DP-SGD's epochs follow ε.

mod common;

use common::json;
use privpred_core::public_rule::{self, PublicInputs};
use privpred_core::{Budget, Loss, Method};
use serde_json::Value;
use std::path::Path;

const SCHEMA: &str = r#"{"privpred_schema": 1, "header": true, "columns": [
 {"name": "x", "type": "numeric", "min": 0, "max": 100},
 {"name": "z", "type": "numeric", "min": 0, "max": 50},
 {"name": "colour", "type": "categorical", "categories": ["red", "green", "blue"]},
 {"name": "y", "type": "label", "classes": ["a", "b"]}]}"#;

/// A table of `n` rows whose values and labels depend on `variant`, with the shared schema.
fn table(dir: &Path, name: &str, n: usize, variant: usize) -> String {
    let mut csv = String::from("x,z,colour,y\n");
    for i in 0..n {
        let x = ((i * (37 + variant * 11) + variant) % 100) as f64;
        let z = ((i * (61 + variant * 7)) % 50) as f64;
        let colour = ["red", "green", "blue"][(i + variant) % 3];
        let y = if (x + z + variant as f64 * 13.0) % 90.0 > 40.0 {
            "b"
        } else {
            "a"
        };
        csv.push_str(&format!("{x},{z},{colour},{y}\n"));
    }
    let c = dir.join(format!("{name}.csv"));
    std::fs::write(&c, csv).unwrap();
    format!("csv:{}", c.to_str().unwrap())
}

fn train(dir: &Path, data: &str, method: &str, extra: &[&str]) -> Value {
    let schema = dir.join("t.schema.json");
    std::fs::write(&schema, SCHEMA).unwrap();
    let out = dir.join(format!("{method}.safetensors"));
    let mut args = vec![
        "train",
        method,
        "--dataset",
        data,
        "--schema",
        schema.to_str().unwrap(),
        "--epsilon",
        "1",
        "--seed",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    json(&args)
}

#[test]
fn lambda_reads_no_row_and_is_recorded_as_the_public_rule() {
    let d = tempfile::tempdir().unwrap();
    let a = table(d.path(), "a", 200, 0);
    let b = table(d.path(), "b", 200, 3);
    let va = train(d.path(), &a, "loss-perturbation", &[]);
    let vb = train(d.path(), &b, "loss-perturbation", &[]);
    // same N, d, C, ε: the same λ, whatever the rows hold
    assert_eq!(va["n"], vb["n"], "{va}\n{vb}");
    assert_eq!(va["lambda"], vb["lambda"], "{va}\n{vb}");
    assert_eq!(va["lambda_rule"], vb["lambda_rule"]);
    // the sigmoid by default on two classes, the rule's value, its record and formula
    assert_eq!(va["loss"], "logistic", "{va}");
    let n = va["n"].as_u64().unwrap() as usize;
    let want = public_rule::lambda(&PublicInputs {
        method: Method::LossPerturbation,
        loss: Loss::Logistic,
        classes: 2,
        n: public_rule::PublicN::new(privpred_core::Neighbours::ReplaceOne, n, None).unwrap(),
        dim: 5,
        epsilon: 1.0,
        budget: Budget::Unlimited,
    })
    .unwrap();
    assert_eq!(va["lambda"].as_f64().unwrap(), want.value, "{va}");
    assert_eq!(va["selection"]["method"], "public-rule", "{va}");
    assert_eq!(va["selection"]["epsilon"], 0.0);
    let f = va["lambda_rule"].as_str().unwrap_or_default();
    assert!(
        f.contains(&format!("N = {n}")) && f.contains("d = 5"),
        "{f}"
    );
    // another N: another λ (the rule follows the public size)
    let c = table(d.path(), "c", 400, 0);
    let vc = train(d.path(), &c, "loss-perturbation", &[]);
    assert!(vc["lambda"].as_f64() < va["lambda"].as_f64(), "{vc}");
    // a λ given is a public value
    let vg = train(d.path(), &a, "loss-perturbation", &["--lambda", "0.05"]);
    assert_eq!(vg["lambda"], 0.05);
    assert_eq!(vg["selection"]["method"], "public");
    assert!(vg.get("lambda_rule").is_none(), "{vg}");
}

#[test]
fn small_tables_train_every_method_at_the_defaults() {
    let d = tempfile::tempdir().unwrap();
    // 60 rows: 48 training rows, fewer than the fixed T = 256 and batch 256
    let t = table(d.path(), "small", 60, 1);
    let v = train(d.path(), &t, "subsample-aggregate", &["--budget", "10"]);
    let n = v["n"].as_u64().unwrap() as usize;
    let n = public_rule::PublicN::new(privpred_core::Neighbours::ReplaceOne, n, None).unwrap();
    assert_eq!(v["teachers"], public_rule::teachers(n), "{v}");
    let v = train(d.path(), &t, "dp-sgd", &["--delta", "1e-5"]);
    assert_eq!(v["clip"], public_rule::DPSGD_CLIP, "{v}");
    assert_eq!(v["loss"], "logistic", "{v}");
    for m in ["model-sensitivity", "prediction-sensitivity"] {
        let v = train(d.path(), &t, m, &["--budget", "10"]);
        assert_eq!(v["selection"]["method"], "public-rule", "{m}: {v}");
    }
    // softmax when asked
    let v = train(d.path(), &t, "loss-perturbation", &["--loss", "softmax"]);
    assert_eq!(v["loss"], "softmax", "{v}");
}

/// Under add/remove the exact N is private and the rule reads the declared N̂ instead: two
/// tables of different sizes with the same `--public-n` get the same λ, formula, DP-SGD
/// batch (its steps) and clip, and that λ is the rule's value at N = N̂.
#[test]
fn under_add_remove_the_rule_reads_the_declared_public_n() {
    let d = tempfile::tempdir().unwrap();
    let test = table(d.path(), "test", 50, 5);
    let test = test.trim_start_matches("csv:");
    let small = format!("{},{test}", table(d.path(), "small", 180, 0));
    let large = format!("{},{test}", table(d.path(), "large", 260, 3));
    let ar = ["--neighbours", "add-remove", "--public-n", "500"];
    for (method, extra) in [
        // (model and prediction sensitivity and the teachers have no add/remove analysis)
        ("loss-perturbation", &[][..]),
        ("dp-sgd", &["--delta", "1e-5", "--epochs", "2"][..]),
    ] {
        let args: Vec<&str> = ar.iter().chain(extra).copied().collect();
        let vs = train(d.path(), &small, method, &args);
        let vl = train(d.path(), &large, method, &args);
        assert_ne!(vs["n"], vl["n"], "{vs}\n{vl}");
        for key in ["lambda", "teachers", "clip", "steps", "selection"] {
            assert_eq!(vs[key], vl[key], "{method} {key}: {vs}\n{vl}");
        }
        assert_eq!(vs["lambda_rule"], vl["lambda_rule"], "{method}");
        let n_hat = public_rule::PublicN::new(privpred_core::Neighbours::AddRemove, 180, Some(500))
            .unwrap();
        match method {
            "dp-sgd" => {
                assert_eq!(vs["clip"], public_rule::DPSGD_CLIP, "{vs}");
                // steps = ⌈epochs·N̂/b⌉ with b the rule's batch for N̂
                let b = public_rule::dpsgd_batch_size(n_hat) as f64;
                assert_eq!(vs["steps"], (2.0 * 500.0 / b).ceil() as u64, "{vs}");
            }
            _ => {
                assert_eq!(vs["selection"]["method"], "public-rule", "{method}: {vs}");
                let f = vs["lambda_rule"].as_str().unwrap_or_default();
                assert!(f.contains("N̂ = 500"), "{method}: {f}");
                let want = public_rule::lambda(&PublicInputs {
                    method: Method::LossPerturbation,
                    loss: Loss::Logistic,
                    classes: 2,
                    n: n_hat,
                    dim: 5,
                    epsilon: 1.0,
                    budget: Budget::finite(10).unwrap(),
                })
                .unwrap();
                assert_eq!(vs["lambda"].as_f64().unwrap(), want.value, "{method}: {vs}");
            }
        }
    }
}

/// `compare` picks each method's loss by `train`'s rule: the sigmoid on a two-class table for
/// the methods that train it (its guarantees recalibrated for it), the softmax for the
/// teachers and on three classes.
#[test]
fn compare_trains_the_sigmoid_on_two_classes_as_train_does() {
    let d = tempfile::tempdir().unwrap();
    let t = table(d.path(), "cmp", 240, 2);
    let schema = d.path().join("t.schema.json");
    std::fs::write(&schema, SCHEMA).unwrap();
    let run = |schema: &Path, data: &str| {
        json(&[
            "compare",
            "--dataset",
            data,
            "--schema",
            schema.to_str().unwrap(),
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--budget",
            "10",
            "--repetitions",
            "1",
            "--json",
        ])
    };
    let v = run(&schema, &t);
    let results = v["grid"]["cells"][0]["results"].as_array().unwrap();
    assert!(results.len() >= 4, "{v}");
    for r in results {
        let want = match r["method"].as_str().unwrap() {
            "subsample-aggregate" => "softmax",
            _ => "logistic",
        };
        assert_eq!(r["example"]["loss"], want, "{r}");
    }
    assert!(
        results.iter().any(|r| r["method"] == "loss-perturbation"),
        "{v}"
    );
    // the same rule as train: `Loss::default_for`
    for m in [
        Method::ModelSensitivity,
        Method::PredictionSensitivity,
        Method::LossPerturbation,
        Method::DpSgd,
    ] {
        assert_eq!(Loss::default_for(Some(m), 2), Loss::Logistic);
        assert_eq!(Loss::default_for(Some(m), 3), Loss::Softmax);
    }
    assert_eq!(
        Loss::default_for(Some(Method::SubsampleAggregate), 2),
        Loss::Softmax
    );
    assert_eq!(Loss::default_for(None, 2), Loss::Softmax);
    // three classes: the softmax everywhere
    let three = SCHEMA.replace(r#"["a", "b"]"#, r#"["a", "b", "c"]"#);
    let schema3 = d.path().join("t3.schema.json");
    std::fs::write(&schema3, three).unwrap();
    let v = run(&schema3, &t);
    for r in v["grid"]["cells"][0]["results"].as_array().unwrap() {
        assert_eq!(r["example"]["loss"], "softmax", "{r}");
    }
}

/// DP-SGD's epochs follow the target ε by the rule when `--epochs` is not given: 20 at ε ≤ 1,
/// more at larger ε, the steps ⌈epochs·N/b⌉ with the rule's batch b; `--epochs` overrides.
#[test]
fn dpsgd_epochs_follow_epsilon_unless_given() {
    let d = tempfile::tempdir().unwrap();
    let t = table(d.path(), "t", 300, 2);
    let schema = d.path().join("t.schema.json");
    std::fs::write(&schema, SCHEMA).unwrap();
    let run = |eps: &str, extra: &[&str]| {
        let out = d.path().join(format!("dp-{eps}.safetensors"));
        let mut args = vec![
            "train",
            "dp-sgd",
            "--dataset",
            &t,
            "--schema",
            schema.to_str().unwrap(),
            "--epsilon",
            eps,
            "--delta",
            "1e-5",
            "--seed",
            "1",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ];
        args.extend_from_slice(extra);
        json(&args)
    };
    for (eps, e) in [("1", 1.0), ("10", 10.0)] {
        let v = run(eps, &[]);
        let n = v["n"].as_u64().unwrap() as usize;
        let b = public_rule::dpsgd_batch_size(
            public_rule::PublicN::new(privpred_core::Neighbours::ReplaceOne, n, None).unwrap(),
        ) as f64;
        let epochs = public_rule::dpsgd_epochs(e);
        assert_eq!(
            v["steps"],
            (epochs * n as f64 / b).ceil() as u64,
            "ε = {eps}: {v}"
        );
    }
    assert!(public_rule::dpsgd_epochs(10.0) > public_rule::dpsgd_epochs(1.0));
    let v = run("10", &["--epochs", "2"]);
    let n = v["n"].as_u64().unwrap() as f64;
    let b = public_rule::dpsgd_batch_size(
        public_rule::PublicN::new(privpred_core::Neighbours::ReplaceOne, n as usize, None).unwrap(),
    ) as f64;
    assert_eq!(v["steps"], (2.0 * n / b).ceil() as u64, "{v}");
}
