//! End-to-end tests of `privpred train`, `evaluate` and `predict` on a small generated CSV
//! dataset (fast), covering every method, the JSON contract, the budget ledger and bad input
//! (exit code 2, nothing written).

mod common;

use common::{code, ok, privpred as run};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// 600 rows, 8 pixel-like features (0..255), 3 well-separated classes, label last.
fn dataset(dir: &Path) -> PathBuf {
    let p = dir.join("toy.csv");
    let mut s = String::from("f0,f1,f2,f3,f4,f5,f6,f7,label\n");
    let mut state = 12345u64;
    let mut rnd = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % 60) as u32
    };
    for i in 0..600 {
        let y = i % 3;
        let row: Vec<String> = (0..8)
            .map(|j| (rnd() + if j % 3 == y { 180 } else { 0 }).to_string())
            .collect();
        s.push_str(&format!("{},{}\n", row.join(","), y));
    }
    std::fs::write(&p, s).unwrap();
    p
}

fn queries(dir: &Path, rows: &[&str]) -> PathBuf {
    let p = dir.join(format!(
        "q{}.csv",
        rows.len() * 7 + rows.first().map_or(0, |r| r.len())
    ));
    std::fs::write(&p, rows.join("\n")).unwrap();
    p
}

struct Env {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    ds: String,
}

fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let ds = format!("csv-pixels:{}", dataset(&dir).display());
    Env { _tmp: tmp, dir, ds }
}

#[test]
fn non_private_train_evaluate_predict() {
    let e = env();
    let out = e.dir.join("np.safetensors");
    ok(&[
        "train",
        "non-private",
        "--dataset",
        &e.ds,
        "--seed",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let j: Value = serde_json::from_str(&ok(&[
        "evaluate",
        "--model",
        out.to_str().unwrap(),
        "--dataset",
        &e.ds,
        "--json",
    ]))
    .unwrap();
    assert_eq!(j["method"], "non-private");
    assert!(j["accuracy"]["mean"].as_f64().unwrap() > 0.9, "{j}");
    let q = queries(
        &e.dir,
        &["200,10,10,200,10,10,200,10", "10,200,10,10,200,10,10,200"],
    );
    let labels = ok(&[
        "predict",
        "--model",
        out.to_str().unwrap(),
        "--input",
        q.to_str().unwrap(),
    ]);
    assert_eq!(labels.lines().collect::<Vec<_>>(), vec!["0", "1"]);
}

#[test]
fn every_private_method_trains_and_reports_its_guarantee() {
    let e = env();
    let cases: [(&str, &[&str]); 5] = [
        ("model-sensitivity", &["--epsilon", "10"]),
        (
            "loss-perturbation",
            &["--epsilon", "10", "--lambda", "1e-3"],
        ),
        (
            "prediction-sensitivity",
            &["--epsilon", "10", "--budget", "10", "--lambda", "1e-2"],
        ),
        (
            "subsample-aggregate",
            &["--epsilon", "10", "--budget", "10", "--teachers", "8"],
        ),
        (
            "dp-sgd",
            &[
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
                "--clip",
                "0.5",
                "--epochs",
                "5",
                "--batch-size",
                "32",
            ],
        ),
    ];
    for (m, extra) in cases {
        let out = e.dir.join(format!("{m}.safetensors"));
        let mut args = vec![
            "train",
            m,
            "--dataset",
            &e.ds,
            "--classes",
            "3",
            "--seed",
            "3",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        ok(&args);
        let j: Value = serde_json::from_str(&ok(&[
            "evaluate",
            "--model",
            out.to_str().unwrap(),
            "--dataset",
            &e.ds,
            "--repetitions",
            "3",
            "--seed",
            "4",
            "--json",
        ]))
        .unwrap();
        assert_eq!(j["method"], m, "{j}");
        assert_eq!(j["calibration"], "corrected");
        assert!(j["epsilon"].as_f64().unwrap() > 0.0);
        assert!(j["delta"].is_number());
        assert!(j.get("budget").is_some());
        assert_eq!(j["accuracy"]["repetitions"], 3);
        let acc = j["accuracy"]["mean"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&acc) && j["accuracy"]["std"].as_f64().unwrap() >= 0.0);
        // three well-separated classes at a generous ε: every method beats chance (1/3)
        assert!(acc > 0.45, "{m}: accuracy {acc}");
    }
}

#[test]
fn predict_spends_the_budget_and_refuses_past_it() {
    let e = env();
    let out = e.dir.join("sa.safetensors");
    ok(&[
        "train",
        "subsample-aggregate",
        "--dataset",
        &e.ds,
        "--classes",
        "3",
        "--epsilon",
        "1",
        "--budget",
        "5",
        "--teachers",
        "8",
        "--out",
        out.to_str().unwrap(),
    ]);
    let q3 = queries(
        &e.dir,
        &[
            "200,10,10,200,10,10,200,10",
            "10,200,10,10,200,10,10,200",
            "10,10,200,10,10,200,10,10",
        ],
    );
    // the first use creates the ledger, deliberately (--init-ledger)
    let labels = ok(&[
        "predict",
        "--model",
        out.to_str().unwrap(),
        "--input",
        q3.to_str().unwrap(),
        "--init-ledger",
    ]);
    assert_eq!(labels.lines().count(), 3);
    let ledger = common::ledger_record(&out);
    assert_eq!(ledger["spent"], 3);
    assert_eq!(ledger["total"], 5);
    // the same 3 rows again: their stored answers, at no cost
    assert_eq!(
        ok(&[
            "predict",
            "--model",
            out.to_str().unwrap(),
            "--input",
            q3.to_str().unwrap()
        ]),
        labels
    );
    // 3 new rows would exceed B = 5: refused, nothing answered, ledger unchanged
    let q3_new = queries(
        &e.dir,
        &[
            "202,10,10,200,10,10,200,10",
            "12,200,10,10,200,10,10,200",
            "12,10,200,10,10,200,10,10",
        ],
    );
    let o = run(&[
        "predict",
        "--model",
        out.to_str().unwrap(),
        "--input",
        q3_new.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    assert!(String::from_utf8_lossy(&o.stderr).contains("budget exhausted"));
    assert_eq!(common::ledger_record(&out)["spent"], 3);
    // two more fit exactly (new rows: a repeated row gets its stored answer at no cost)
    let q2 = queries(
        &e.dir,
        &["201,10,10,200,10,10,200,10", "11,200,10,10,200,10,10,200"],
    );
    assert_eq!(
        ok(&[
            "predict",
            "--model",
            out.to_str().unwrap(),
            "--input",
            q2.to_str().unwrap()
        ])
        .lines()
        .count(),
        2
    );
}

#[test]
fn bad_input_exits_2_and_writes_nothing() {
    let e = env();
    let out = e.dir.join("m.safetensors");
    let o = out.to_str().unwrap();
    // λ ≤ 0 where the method needs λ > 0
    for l in ["0", "-1", "nan"] {
        let (c, err) = code(&[
            "train",
            "model-sensitivity",
            "--dataset",
            &e.ds,
            "--classes",
            "3",
            "--epsilon",
            "1",
            "--lambda",
            l,
            "--out",
            o,
        ]);
        assert_eq!(c, 2, "lambda {l}: {err}");
        assert!(err.contains("lambda"), "{err}");
        assert!(!out.exists());
    }
    // invalid ε, δ = 0 for DP-SGD, missing ε
    assert_eq!(
        code(&[
            "train",
            "model-sensitivity",
            "--dataset",
            &e.ds,
            "--classes",
            "3",
            "--epsilon",
            "-1",
            "--lambda",
            "1e-3",
            "--out",
            o
        ])
        .0,
        2
    );
    assert_eq!(
        code(&[
            "train",
            "dp-sgd",
            "--dataset",
            &e.ds,
            "--classes",
            "3",
            "--epsilon",
            "1",
            "--clip",
            "0.1",
            "--out",
            o
        ])
        .0,
        2
    );
    assert_eq!(
        code(&["train", "loss-perturbation", "--dataset", &e.ds, "--out", o]).0,
        2
    );
    assert!(!out.exists());
    // a good model, then bad queries
    ok(&[
        "train",
        "model-sensitivity",
        "--dataset",
        &e.ds,
        "--classes",
        "3",
        "--epsilon",
        "1",
        "--lambda",
        "1e-2",
        "--out",
        o,
    ]);
    let wrong_dim = queries(&e.dir, &["1,2,3"]);
    let (c, err) = code(&[
        "predict",
        "--model",
        o,
        "--input",
        wrong_dim.to_str().unwrap(),
    ]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("expects 8"), "{err}");
    let nan = queries(&e.dir, &["1,2,3,4,5,6,7,NaN"]);
    assert_eq!(
        code(&["predict", "--model", o, "--input", nan.to_str().unwrap()]).0,
        2
    );
    let inf = queries(&e.dir, &["1,2,3,4,5,6,7,inf"]);
    assert_eq!(
        code(&["predict", "--model", o, "--input", inf.to_str().unwrap()]).0,
        2
    );
    // corrupt model files: truncated, flipped weight byte, not a model at all
    let bytes = std::fs::read(&out).unwrap();
    let bad = e.dir.join("bad.safetensors");
    std::fs::write(&bad, &bytes[..bytes.len() / 2]).unwrap();
    let good_q = queries(&e.dir, &["1,2,3,4,5,6,7,8"]);
    let (c, err) = code(&[
        "predict",
        "--model",
        bad.to_str().unwrap(),
        "--input",
        good_q.to_str().unwrap(),
    ]);
    assert_eq!(c, 2, "{err}");
    let mut flipped = bytes.clone();
    let last = flipped.len() - 3;
    flipped[last] ^= 0x55;
    std::fs::write(&bad, &flipped).unwrap();
    let (c, err) = code(&[
        "evaluate",
        "--model",
        bad.to_str().unwrap(),
        "--dataset",
        &e.ds,
    ]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("signature"), "{err}");
    std::fs::write(&bad, b"hello").unwrap();
    assert_eq!(
        code(&[
            "evaluate",
            "--model",
            bad.to_str().unwrap(),
            "--dataset",
            &e.ds
        ])
        .0,
        2
    );
    // evaluating on a dataset of another dimension
    let other = e.dir.join("other.csv");
    std::fs::write(&other, "a,b,label\n1,2,0\n2,1,1\n3,3,0\n1,1,1\n2,2,0\n").unwrap();
    let (c, err) = code(&[
        "evaluate",
        "--model",
        o,
        "--dataset",
        &format!("csv-pixels:{}", other.display()),
    ]);
    assert_eq!(c, 2, "{err}");
}

#[test]
fn release_path_without_seed_records_os_randomness() {
    let e = env();
    let out = e.dir.join("r.safetensors");
    let s = ok(&[
        "train",
        "model-sensitivity",
        "--dataset",
        &e.ds,
        "--classes",
        "3",
        "--epsilon",
        "1",
        "--lambda",
        "1e-2",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let j: Value = serde_json::from_str(&s).unwrap();
    assert_eq!(j["method"], "model-sensitivity");
    // two release trainings differ (fresh OS-seeded noise)
    let out2 = e.dir.join("r2.safetensors");
    ok(&[
        "train",
        "model-sensitivity",
        "--dataset",
        &e.ds,
        "--classes",
        "3",
        "--epsilon",
        "1",
        "--lambda",
        "1e-2",
        "--out",
        out2.to_str().unwrap(),
    ]);
    assert_ne!(std::fs::read(&out).unwrap(), std::fs::read(&out2).unwrap());
}

/// Erratum 4.9: a `--seed` artifact of each of the five methods is marked as an experiment,
/// `predict` and `serve` refuse it (exit 2, saying why and how to train without `--seed`), and
/// `evaluate` still reads it.
#[test]
fn seeded_artifacts_are_experiments_not_releases() {
    let e = env();
    let q = queries(&e.dir, &["200,10,10,200,10,10,200,10"]);
    let cases: [(&str, &[&str]); 5] = [
        (
            "model-sensitivity",
            &["--epsilon", "10", "--lambda", "1e-2"],
        ),
        (
            "loss-perturbation",
            &["--epsilon", "10", "--lambda", "1e-2"],
        ),
        (
            "prediction-sensitivity",
            &["--epsilon", "10", "--budget", "10", "--lambda", "1e-2"],
        ),
        (
            "subsample-aggregate",
            &["--epsilon", "10", "--budget", "10", "--teachers", "8"],
        ),
        (
            "dp-sgd",
            &[
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
                "--clip",
                "0.5",
                "--epochs",
                "2",
            ],
        ),
    ];
    for (m, extra) in cases {
        let out = e.dir.join(format!("seeded-{m}.safetensors"));
        let o = out.to_str().unwrap();
        let mut args = vec![
            "train",
            m,
            "--dataset",
            &e.ds,
            "--classes",
            "3",
            "--seed",
            "7",
            "--json",
            "--out",
            o,
        ];
        args.extend_from_slice(extra);
        let j: Value = serde_json::from_str(&ok(&args)).unwrap();
        assert_eq!(j["release"], "experiment", "{m}: {j}");
        // the artifact's metadata says so
        let bytes = common::payload(&out);
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        assert_eq!(header["__metadata__"]["release"], "experiment", "{m}");
        let (c, err) = code(&["predict", "--model", o, "--input", q.to_str().unwrap()]);
        assert_eq!(c, 2, "{m}: {err}");
        assert!(
            err.contains("--seed 7")
                && err.contains("not a private release")
                && err.contains("without --seed"),
            "{m}: {err}"
        );
        let (c, err) = code(&["serve", "--model", o, "--listen", "127.0.0.1:0"]);
        assert_eq!(c, 2, "{m}: {err}");
        assert!(err.contains("not a private release"), "{m}: {err}");
        // evaluate reads experiments
        ok(&[
            "evaluate",
            "--model",
            o,
            "--dataset",
            &e.ds,
            "--repetitions",
            "1",
            "--seed",
            "1",
        ]);
    }
    // the release path is accepted by predict
    let out = e.dir.join("release.safetensors");
    let o = out.to_str().unwrap();
    let j: Value = serde_json::from_str(&ok(&[
        "train",
        "model-sensitivity",
        "--dataset",
        &e.ds,
        "--classes",
        "3",
        "--epsilon",
        "10",
        "--lambda",
        "1e-2",
        "--json",
        "--out",
        o,
    ]))
    .unwrap();
    assert_eq!(j["release"], "private-release");
    ok(&["predict", "--model", o, "--input", q.to_str().unwrap()]);
}

/// Erratum 4.8: every released linear fit reports its certificate, g ≤ γ, and the calibration
/// notes show the sensitivity that includes it; `paper` has none and is labelled invalid.
#[test]
fn released_fits_carry_their_certificate() {
    let e = env();
    for (m, extra) in [
        ("model-sensitivity", &["--lambda", "1e-2"][..]),
        ("loss-perturbation", &["--lambda", "1e-2"][..]),
        (
            "prediction-sensitivity",
            &["--lambda", "1e-2", "--budget", "10"][..],
        ),
    ] {
        let out = e.dir.join(format!("cert-{m}.safetensors"));
        let mut args = vec![
            "train",
            m,
            "--dataset",
            &e.ds,
            "--classes",
            "3",
            "--epsilon",
            "1",
            "--json",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let j: Value = serde_json::from_str(&ok(&args)).unwrap();
        // the bound is public; the measured norm is the data owner's (not in the artifact)
        let o = &j["optimization"];
        assert_eq!(o["certified"], true, "{m}: {o}");
        let (g, gamma) = (
            j["private_diagnostics"]["optimization"]["gradient_norm"]
                .as_f64()
                .unwrap(),
            o["gradient_norm_bound"].as_f64().unwrap(),
        );
        assert!(g <= gamma && gamma > 0.0, "{m}: {o}");
        // γ = 0.01·K/N (output/prediction) or 1e-3·K/N (loss perturbation)
        let k = std::f64::consts::SQRT_2;
        let n = j["n"].as_f64().unwrap();
        let want = if m == "loss-perturbation" { 1e-3 } else { 1e-2 } * k / n;
        assert!((gamma - want).abs() < 1e-12 * want, "{m}: {gamma}");
        let notes = j["notes"].to_string();
        assert!(
            notes.contains("4.8") && notes.contains("gamma"),
            "{m}: {notes}"
        );
        assert_eq!(j["valid_guarantee"], true);
        // the artifact carries it too
        let bytes = common::payload(&out);
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        let model: Value =
            serde_json::from_str(header["__metadata__"]["model"].as_str().unwrap()).unwrap();
        assert_eq!(
            model["predictor"]["optimization"]["gradient_norm_bound"].as_f64(),
            Some(gamma),
            "{m}"
        );
        // paper: the published behaviour, no certificate, not a valid guarantee
        let mut args = vec![
            "train",
            m,
            "--dataset",
            &e.ds,
            "--classes",
            "3",
            "--epsilon",
            "1",
            "--json",
            "--calibration",
            "paper",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let j: Value = serde_json::from_str(&ok(&args)).unwrap();
        assert!(j["optimization"].is_null(), "{m}: {j}");
        assert_eq!(j["valid_guarantee"], false, "{m}");
    }
}

/// `--lambda`/`--clip` take "a number > 0 or `cv`" (0 included in the refusal, as their help
/// says), and `--model`, `--engine`, `--unit-ball` are checked by clap: exit 2 with the valid
/// range before any work, nothing written.
#[test]
fn typed_arguments_refuse_zero_and_unknown_values_with_the_valid_range() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.safetensors");
    let o = out.to_str().unwrap();
    let base = [
        "train",
        "model-sensitivity",
        "--dataset",
        "digits",
        "--epsilon",
        "1",
    ];
    for (extra, needle) in [
        (
            ["--lambda", "0"],
            "must be a finite number > 0 (a public value, costs nothing), `private`",
        ),
        (
            ["--lambda", "-0"],
            "must be a finite number > 0 (a public value, costs nothing), `private`",
        ),
        (
            ["--clip", "0"],
            "must be a finite number > 0 (a public value, costs nothing), `private`",
        ),
        (
            ["--model", "resnet7"],
            "[possible values: linear, resnet20, resnet-tiny]",
        ),
        (["--engine", "gpu"], "[possible values: cpu, torch]"),
        (
            ["--unit-ball", "clip:0"],
            "normalize, clip:R (R > 0, finite) or max-norm",
        ),
    ] {
        let mut args = base.to_vec();
        args.extend(extra);
        args.extend(["--out", o]);
        common::assert_bad(&args, needle);
        assert!(!out.exists(), "{extra:?} wrote a model");
    }
}

#[test]
fn bias_value_and_cv_draws_are_checked_and_recorded() {
    let e = env();
    let out = e.dir.join("b.safetensors");
    let o = out.to_str().unwrap();
    // out of [0, 1), not a number, or zero draws: exit 2 naming the option, nothing written
    for (flag, v) in [
        ("--bias", "1"),
        ("--bias", "-0.1"),
        ("--bias", "x"),
        ("--cv-draws", "0"),
    ] {
        let (c, err) = code(&[
            "train",
            "model-sensitivity",
            "--dataset",
            &e.ds,
            "--classes",
            "3",
            "--epsilon",
            "1",
            flag,
            v,
            "--out",
            o,
        ]);
        assert_eq!(c, 2, "{flag} {v}: {err}");
        assert!(
            err.contains(flag.trim_start_matches("--").split('-').next().unwrap()),
            "{flag} {v}: {err}"
        );
        assert!(!out.exists());
    }
    // a valid value is applied and recorded, with the number of draws behind the λ pick
    let s: Value = serde_json::from_str(&ok(&[
        "train",
        "model-sensitivity",
        "--dataset",
        &e.ds,
        "--classes",
        "3",
        "--epsilon",
        "10",
        "--bias",
        "0.1",
        "--lambda",
        "cv",
        "--cv-draws",
        "3",
        "--json",
        "--out",
        o,
    ]))
    .unwrap();
    let b = s["bias"].as_f64().unwrap();
    assert!((b - 0.1).abs() < 1e-6, "{s}");
    assert_eq!(
        s["private_diagnostics"]["cross_validation"]["draws"], 3,
        "{s}"
    );
    assert!(out.exists());
}
