//! `tight` label-only selections: `calibrate --json` names permute-and-flip for
//! subsample-and-aggregate with δ = 0 and the selection over the logits for prediction
//! sensitivity with δ = 0; trained artifacts carry it, `predict` spends the budget, and
//! `serve` reports the mechanism in `GET /v1/model` and spends one unit per answer.

mod common;

use common::{json, ok, toy_dataset, train_into};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;

fn calibrate(method: &str, mode: &str, delta: &str) -> Value {
    json(&[
        "calibrate",
        method,
        "--epsilon",
        "1",
        "--delta",
        delta,
        "--budget",
        "10",
        "--n",
        "60000",
        "--lambda",
        "0.001",
        "--calibration",
        mode,
        "--json",
    ])
}

#[test]
fn calibrate_names_the_selection_mechanism() {
    let v = calibrate("subsample-aggregate", "tight", "0");
    assert_eq!(v["noise"]["distribution"], "permute-and-flip");
    assert_eq!(v["mechanism"], "permute-and-flip-over-votes");
    // β = ε/(2B): per-count sensitivity 1 (McKenna & Sheldon 2020, Thm 1)
    assert!((v["noise"]["beta"].as_f64().unwrap() - 0.05).abs() < 1e-15);
    assert_eq!(v["valid_guarantee"], true);
    let v = calibrate("subsample-aggregate", "corrected", "0");
    assert_eq!(v["noise"]["distribution"], "exponential");
    assert_eq!(v["mechanism"], "exponential-over-votes");
    let v = calibrate("subsample-aggregate", "tight", "1e-5");
    assert_eq!(v["mechanism"], "exponential-over-votes");

    let v = calibrate("prediction-sensitivity", "tight", "0");
    assert_eq!(v["noise"]["distribution"], "permute-and-flip");
    assert_eq!(v["mechanism"], "permute-and-flip-over-logits");
    // β = ε/(B·√2·Δ), Δ = 2√2/(Nλ) = 2√2/60
    let want = 1.0 / (10.0 * std::f64::consts::SQRT_2 * (2.0 * std::f64::consts::SQRT_2 / 60.0));
    assert!((v["noise"]["beta"].as_f64().unwrap() / want - 1.0).abs() < 1e-12);
    let v = calibrate("prediction-sensitivity", "corrected", "0");
    assert_eq!(v["mechanism"], "noisy-logits");
    // the noisy logits on the grid with the exact lattice ℓ2-Laplace
    assert_eq!(v["noise"]["distribution"], "discrete-l2-laplace");
    let v = calibrate("prediction-sensitivity", "paper", "0");
    assert_eq!(v["noise"]["distribution"], "l2-laplace");
    let v = calibrate("prediction-sensitivity", "tight", "1e-5");
    assert_eq!(v["mechanism"], "noisy-logits");
    // the text output names it too
    let t = ok(&[
        "calibrate",
        "subsample-aggregate",
        "--epsilon",
        "1",
        "--budget",
        "10",
        "--calibration",
        "tight",
    ]);
    assert!(t.contains("permute-and-flip"), "{t}");
}

fn train(dir: &Path, method: &str, extra: &[&str]) -> (PathBuf, Value) {
    let ds = toy_dataset(dir, 300);
    let mut args = vec![
        "--epsilon",
        "10",
        "--budget",
        "6",
        "--calibration",
        "tight",
        "--json",
    ];
    args.extend_from_slice(extra);
    let (out, stdout) = train_into(dir, method, method, &ds, &args);
    let v = serde_json::from_str(&stdout).expect("train --json prints one JSON object");
    (out, v)
}

#[test]
fn trained_artifacts_predict_and_spend_with_the_selection() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for (method, extra, mech) in [
        (
            "subsample-aggregate",
            &["--teachers", "8"][..],
            "permute-and-flip-over-votes",
        ),
        (
            "prediction-sensitivity",
            &["--lambda", "1e-2"][..],
            "permute-and-flip-over-logits",
        ),
    ] {
        let (out, v) = train(dir, method, extra);
        assert_eq!(v["mechanism"], mech, "{v}");
        assert_eq!(v["noise"]["distribution"], "permute-and-flip", "{v}");
        let q = dir.join(format!("{method}-q.csv"));
        std::fs::write(
            &q,
            "200,10,10,200,10,10,200,10\n10,200,10,10,200,10,10,200\n",
        )
        .unwrap();
        let labels = ok(&[
            "predict",
            "--model",
            out.to_str().unwrap(),
            "--input",
            q.to_str().unwrap(),
            "--init-ledger",
        ]);
        assert_eq!(labels.lines().count(), 2, "{labels}");
        let ledger = common::ledger_record(&out);
        assert_eq!(ledger["spent"], 2);
        assert_eq!(ledger["total"], 6);
    }
}

#[test]
fn serve_reports_the_mechanism_and_spends_the_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (out, _) = train(dir, "prediction-sensitivity", &["--lambda", "1e-2"]);
    let ledger = format!("sqlite:{}", dir.join("l.sqlite").display());
    let mut child = common::bin()
        .args([
            "serve",
            "--model",
            out.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--ledger",
            &ledger,
            "--init-ledger",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("serve printed {line:?}"))
        .parse()
        .unwrap();
    let mut c = privpred_serve::client::Client::new(addr, None);
    let info = c.get("/v1/model").unwrap().json();
    assert_eq!(info["mechanism"], "permute-and-flip-over-logits", "{info}");
    assert_eq!(
        info["guarantee"]["noise"]["distribution"],
        "permute-and-flip"
    );
    assert_eq!(info["releases_scores"], false);
    let body = serde_json::json!({"inputs": [[200.0, 10.0, 10.0, 200.0, 10.0, 10.0, 200.0, 10.0],
                                              [10.0, 200.0, 10.0, 10.0, 200.0, 10.0, 10.0, 200.0]]});
    let r = c.post_json("/v1/predict", &body.to_string()).unwrap();
    let v = r.json();
    assert_eq!(r.status, 200, "{v}");
    assert_eq!(v["spent"], 2, "{v}");
    assert!(
        v["answers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a.get("scores").is_none_or(|s| s.is_null())),
        "{v}"
    );
    let info = c.get("/v1/model").unwrap().json();
    assert_eq!(info["budget"]["spent"], 2, "{info}");
    // 5 more would exceed B = 6: refused, nothing spent
    // distinct directions (the answer store returns stored answers for repeated queries)
    let five: Vec<Vec<f32>> = (0..5)
        .map(|i| {
            (0..8)
                .map(|j| if j == i + 2 { 250.0 } else { 5.0 * j as f32 })
                .collect()
        })
        .collect();
    let r = c
        .post_json(
            "/v1/predict",
            &serde_json::json!({ "inputs": five }).to_string(),
        )
        .unwrap();
    assert_eq!(r.status, 429, "{}", r.json());
    let info = c.get("/v1/model").unwrap().json();
    assert_eq!(info["budget"]["spent"], 2, "{info}");
    let _ = child.kill();
    let _ = child.wait();
}
