//! The public rule's defaults through `train`: λ, T, DP-SGD's batch size and clip come from
//! public quantities only (N, d, C, ε, B) — two tables of the same shape but different rows
//! give the same λ — the record says `public-rule` with the formula, two-class data trains the
//! sigmoid, and small tables train every method at the defaults.

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
        n,
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
