//! The `nn` feature boundary and the deep-model CLI paths. Without the feature, ResNet figures,
//! ResNet training and `privpred-nn` artifacts exit 2 and say how to get them. With it, a
//! tiny ResNet trained on a few hundred real CIFAR-10 images goes through `train`,
//! `evaluate`, `predict` and `serve` like a linear model (DP-SGD: unlimited answers with
//! scores; teachers: a finite budget of label-only answers, enforced by the ledgers).

mod common;

#[cfg(feature = "nn")]
use common::{json_of, small_cifar};
use common::{privpred, stderr};
#[cfg(feature = "nn")]
use std::path::{Path, PathBuf};
#[cfg(feature = "nn")]
use std::process::Command;

#[cfg(not(feature = "nn"))]
#[test]
fn fig7_without_the_nn_feature_says_how_to_get_it() {
    for fig in ["fig7a", "fig7b"] {
        let out = privpred(&["reproduce", fig, "--quick"]);
        assert_eq!(out.status.code(), Some(2), "{fig}: {}", stderr(&out));
        assert!(stderr(&out).contains("--features nn"));
    }
}

#[cfg(not(feature = "nn"))]
#[test]
fn nn_artifacts_and_resnet_training_need_the_feature() {
    // a minimal model file whose header says it holds a ResNet
    let dir = tempfile::tempdir().unwrap();
    let header = privpred_release::Header {
        format: privpred_release::envelope::FORMAT.into(),
        version: privpred_release::envelope::FORMAT_VERSION,
        family: privpred_release::Family::Resnet,
        method: "dp-sgd".into(),
        seed_policy: privpred_release::SeedPolicy::OsRandom,
        ledger_id: "0".repeat(32),
        calibration: serde_json::Value::Null,
        payload_sha256: String::new(),
        sealed: None,
        signer: None,
    };
    let bytes = privpred_release::envelope::encode(header, &[0; 4], None, None).unwrap();
    let model = dir.path().join("resnet.safetensors");
    std::fs::write(&model, bytes).unwrap();
    let input = dir.path().join("q.csv");
    std::fs::write(&input, "1,2,3\n").unwrap();
    let m = model.to_str().unwrap();
    for args in [
        vec!["evaluate", "--model", m, "--dataset", "digits"],
        vec!["predict", "--model", m, "--input", input.to_str().unwrap()],
        vec!["serve", "--model", m, "--listen", "127.0.0.1:0"],
    ] {
        let o = privpred(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("privpred-nn") && stderr(&o).contains("--features nn"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    let out = dir.path().join("m.safetensors");
    let o = privpred(&[
        "train",
        "dp-sgd",
        "--model",
        "resnet20",
        "--dataset",
        "cifar10",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--features nn"), "{}", stderr(&o));
    assert!(!out.exists());
}

/// A CSV of `n` rows of 3072 raw pixel values.
#[cfg(feature = "nn")]
fn pixel_csv(dir: &Path, name: &str, n: usize, len: usize) -> PathBuf {
    let mut s = String::new();
    for i in 0..n {
        let row: Vec<String> = (0..len)
            .map(|j| ((i * 31 + j * 7) % 256).to_string())
            .collect();
        s.push_str(&row.join(","));
        s.push('\n');
    }
    let p = dir.join(name);
    std::fs::write(&p, s).unwrap();
    p
}

#[cfg(feature = "nn")]
struct Served {
    child: std::process::Child,
    addr: std::net::SocketAddr,
}

#[cfg(feature = "nn")]
impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(feature = "nn")]
fn serve(model: &Path) -> Result<Served, (Option<i32>, String)> {
    serve_with(model, &["--init-ledger"])
}

#[cfg(feature = "nn")]
fn serve_with(model: &Path, extra: &[&str]) -> Result<Served, (Option<i32>, String)> {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let err = model.with_extension("serve.stderr");
    let mut child = common::bin()
        .args([
            "serve",
            "--model",
            model.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err).unwrap())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    if let Some(a) = line.trim().strip_prefix("listening on http://") {
        std::thread::spawn(move || {
            let mut sink = String::new();
            while out.read_line(&mut sink).unwrap_or(0) > 0 {
                sink.clear();
            }
        });
        return Ok(Served {
            child,
            addr: a.parse().unwrap(),
        });
    }
    let status = child.wait().unwrap();
    Err((
        status.code(),
        std::fs::read_to_string(&err).unwrap_or_default(),
    ))
}

#[cfg(feature = "nn")]
fn post(s: &Served, rows: &[Vec<f32>]) -> (u16, serde_json::Value) {
    let mut c = privpred_serve::client::Client::new(s.addr, None);
    let r = c
        .post_json(
            "/v1/predict",
            &serde_json::json!({ "inputs": rows }).to_string(),
        )
        .unwrap();
    (r.status, r.json())
}

/// CIFAR-10's published class names, in label order: a private ResNet on an image folder
/// takes its class set as a public parameter (`--classes`), never from the folders present.
#[cfg(feature = "nn")]
const CIFAR_CLASSES: &str = "airplane,automobile,bird,cat,deer,dog,frog,horse,ship,truck";

#[cfg(feature = "nn")]
fn row(i: usize) -> Vec<f32> {
    (0..3072).map(|j| ((i * 13 + j * 5) % 256) as f32).collect()
}

#[cfg(feature = "nn")]
#[test]
fn dp_sgd_resnet_trains_evaluates_predicts_and_serves() {
    let dir = tempfile::tempdir().unwrap();
    let Some(folder) = small_cifar(
        dir.path(),
        "cli_nn::dp_sgd_resnet_trains_evaluates_predicts_and_serves",
    ) else {
        return;
    };
    let data = format!("images:{}", folder.display());
    let model = dir.path().join("dp.safetensors");
    let m = model.to_str().unwrap();
    let t = json_of(&privpred(&[
        "train",
        "dp-sgd",
        "--model",
        "resnet-tiny",
        "--dataset",
        &data,
        "--classes",
        CIFAR_CLASSES,
        "--epochs",
        "1",
        "--batch-size",
        "50",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--out",
        m,
        "--json",
    ]));
    assert_eq!(t["method"], "dp-sgd");
    assert_eq!(t["n"], 300);
    assert_eq!(t["valid_guarantee"], true);
    assert!(t["noise_multiplier"].as_f64().unwrap() > 0.5);
    // the same artifact on the full CIFAR-10 test split through the named dataset
    let e = json_of(&privpred(&[
        "evaluate",
        "--model",
        m,
        "--dataset",
        "cifar10",
        "--json",
    ]));
    assert_eq!(e["method"], "dp-sgd");
    assert_eq!(e["test_examples"], 10000);
    assert_eq!(e["epsilon"], 1.0);
    assert!(
        e["dataset_labels"]
            .to_string()
            .contains("CIFAR-10 (JPEG copy)")
    );
    let acc = e["accuracy"]["mean"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&acc));
    // predict: labels and probabilities, no budget spent
    let q = pixel_csv(dir.path(), "q.csv", 3, 3072);
    let p = json_of(&privpred(&[
        "predict",
        "--model",
        m,
        "--input",
        q.to_str().unwrap(),
        "--json",
    ]));
    let answers = p["answers"].as_array().unwrap();
    assert_eq!(answers.len(), 3);
    for a in answers {
        assert!(a["label"].as_u64().unwrap() < 10);
        let s: f64 = a["scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .sum();
        assert!((s - 1.0).abs() < 1e-4, "probabilities sum to {s}");
    }
    assert!(!dir.path().join("dp.safetensors.ledger.json").exists());
    // bad queries: exit 2, named
    let short = pixel_csv(dir.path(), "short.csv", 1, 3071);
    let o = privpred(&["predict", "--model", m, "--input", short.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("3072"), "{}", stderr(&o));
    let big = dir.path().join("big.csv");
    std::fs::write(&big, vec!["300"; 3072].join(",")).unwrap();
    let o = privpred(&["predict", "--model", m, "--input", big.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("0..=255"), "{}", stderr(&o));
    // an MNIST-shaped dataset does not fit the model
    let o = privpred(&["evaluate", "--model", m, "--dataset", "digits"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("dimension mismatch"), "{}", stderr(&o));
    // serve: unlimited answers with scores; bad rows are 422 and spend nothing
    let s = serve(&model).unwrap_or_else(|e| panic!("serve: {e:?}"));
    let mut c = privpred_serve::client::Client::new(s.addr, None);
    let info = c.get("/v1/model").unwrap().json();
    assert_eq!(info["method"], "dp-sgd", "{info}");
    assert_eq!(info["input_dim"], 3072);
    assert_eq!(info["budget"]["unlimited"], true, "{info}");
    let (st, v) = post(&s, &[row(0), row(1)]);
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["answers"][1]["scores"].as_array().unwrap().len(), 10);
    let (st, v) = post(&s, &[vec![1.0; 3071]]);
    assert_eq!(st, 422, "{v}");
    let (st, v) = post(&s, &[vec![256.0; 3072]]);
    assert_eq!(st, 422, "{v}");
}

#[cfg(feature = "nn")]
#[test]
fn teacher_ensemble_spends_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let Some(folder) = small_cifar(dir.path(), "cli_nn::teacher_ensemble_spends_its_budget") else {
        return;
    };
    let data = format!("images:{}", folder.display());
    let model = dir.path().join("sa.safetensors");
    let m = model.to_str().unwrap();
    let t = json_of(&privpred(&[
        "train",
        "subsample-aggregate",
        "--model",
        "resnet-tiny",
        "--dataset",
        &data,
        "--classes",
        CIFAR_CLASSES,
        "--teachers",
        "4",
        "--epochs",
        "2",
        "--batch-size",
        "25",
        "--epsilon",
        "1",
        "--budget",
        "3",
        "--out",
        m,
        "--json",
    ]));
    assert_eq!(t["method"], "subsample-aggregate");
    assert_eq!(t["teachers"], 4);
    assert_eq!(t["budget"], 3);
    // evaluation draws the mechanism afresh per repetition and does not spend the budget
    let e = json_of(&privpred(&[
        "evaluate",
        "--model",
        m,
        "--dataset",
        &data,
        "--repetitions",
        "3",
        "--seed",
        "1",
        "--json",
    ]));
    assert_eq!(e["teachers"], 4);
    assert_eq!(e["test_examples"], 200);
    assert_eq!(e["accuracy"]["repetitions"], 3);
    // predict: label-only answers; 2 + 2 > B = 3 is refused with nothing answered
    let q = pixel_csv(dir.path(), "q.csv", 2, 3072);
    let q2 = pixel_csv(dir.path(), "q2.csv", 4, 3072);
    let p = json_of(&privpred(&[
        "predict",
        "--model",
        m,
        "--input",
        q.to_str().unwrap(),
        "--json",
        "--init-ledger",
    ]));
    assert_eq!(p["answers"].as_array().unwrap().len(), 2);
    assert!(p["answers"][0]["scores"].is_null());
    // the same two rows again: their stored answers, at no cost
    let again = json_of(&privpred(&[
        "predict",
        "--model",
        m,
        "--input",
        q.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(again["answers"], p["answers"]);
    // two new rows (of four) when one answer is left: refused whole
    let o = privpred(&["predict", "--model", m, "--input", q2.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("budget exhausted"), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    // serve shares predict's ledger (one budget per model): the record exists, so
    // --init-ledger is refused, and without it one answer is left
    let (code, err) = serve(&model).err().expect("the record exists");
    assert_eq!(code, Some(2), "{err}");
    let s = serve_with(&model, &[]).unwrap_or_else(|e| panic!("serve: {e:?}"));
    let mut c = privpred_serve::client::Client::new(s.addr, None);
    let info = c.get("/v1/model").unwrap().json();
    assert_eq!(info["method"], "subsample-aggregate", "{info}");
    assert_eq!(info["releases_scores"], false, "{info}");
    let (st, v) = post(&s, &[row(0)]);
    assert_eq!(st, 200, "{v}");
    assert!(
        v["answers"][0].get("scores").is_none_or(|s| s.is_null()),
        "{v}"
    );
    let (st, v) = post(&s, &[row(3)]);
    assert!(st >= 400 && st != 422, "answer beyond B: {st} {v}");
    assert!(
        !dir.path().join("sa.safetensors.ledger.json").exists(),
        "no JSON ledger is written"
    );
}

#[cfg(feature = "nn")]
#[test]
fn nonprivate_resnet_evaluates_but_is_not_served_and_bad_arguments_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let Some(folder) = small_cifar(
        dir.path(),
        "cli_nn::nonprivate_resnet_evaluates_but_is_not_served_and_bad_arguments_exit_2",
    ) else {
        return;
    };
    let data = format!("images:{}", folder.display());
    let model = dir.path().join("np.safetensors");
    let m = model.to_str().unwrap();
    let t = json_of(&privpred(&[
        "train",
        "non-private",
        "--model",
        "resnet-tiny",
        "--dataset",
        &data,
        "--epochs",
        "1",
        "--batch-size",
        "50",
        "--seed",
        "3",
        "--out",
        m,
        "--json",
    ]));
    assert!(t["calibration"].is_null());
    let e = json_of(&privpred(&[
        "evaluate",
        "--model",
        m,
        "--dataset",
        &data,
        "--json",
    ]));
    assert_eq!(e["method"], "non-private");
    match serve(&model) {
        Ok(_) => panic!("a non-private ResNet was served"),
        Err((code, err)) => {
            assert_eq!(code, Some(2), "{err}");
            assert!(err.contains("non-private"), "{err}");
        }
    }
    let out = dir.path().join("x.safetensors");
    let o = out.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "dp-sgd",
                "--model",
                "resnet7",
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
            ],
            "resnet7",
        ),
        (
            vec![
                "model-sensitivity",
                "--model",
                "resnet-tiny",
                "--epsilon",
                "1",
            ],
            "model-sensitivity",
        ),
        (
            vec!["non-private", "--model", "resnet-tiny", "--pca", "10"],
            "--pca",
        ),
        (
            vec!["dp-sgd", "--model", "resnet-tiny", "--delta", "1e-5"],
            "epsilon",
        ),
        (
            vec![
                "dp-sgd",
                "--model",
                "resnet-tiny",
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
                "--clip",
                "cv",
            ],
            "clip",
        ),
        (
            vec![
                "non-private",
                "--model",
                "resnet-tiny",
                "--subsample",
                "100000",
            ],
            "subsample",
        ),
        (
            vec!["non-private", "--model", "resnet-tiny", "--epochs", "0"],
            "epochs",
        ),
    ];
    for (args, needle) in cases {
        let mut full = vec!["train"];
        full.extend(&args);
        full.extend(["--dataset", &data, "--out", o]);
        let r = privpred(&full);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", stderr(&r));
        assert!(stderr(&r).contains(needle), "{args:?}: {}", stderr(&r));
        assert!(!out.exists(), "{args:?} wrote a model");
    }
}

#[cfg(feature = "nn")]
#[test]
fn nn_artifacts_round_trip_through_the_linked_library() {
    use privpred_core::{CalibrationMode, Privacy};
    use privpred_nn::artifact::{self, ModelHeader, ModelKind, NnModel};
    use privpred_nn::{ResNet, ResNetConfig, calib, data::Normalization};
    use rand::SeedableRng;
    let net = ResNet::new(ResNetConfig::tiny(10)).unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(0);
    let p = net.init_params(&mut rng);
    let cal = calib::dpsgd(
        CalibrationMode::Corrected,
        Privacy::new(1.0, 1e-5).unwrap(),
        1000,
        100,
        1.0,
        10,
    )
    .unwrap();
    let model = NnModel::new(
        ModelHeader {
            kind: ModelKind::DpSgd,
            config: *net.config(),
            normalization: Normalization::generic(3),
            calibration: Some(cal),
            training: Some(calib::PublicTraining {
                n: 1000,
                dp_sgd: Some(privpred_core::DpSgdSchedule {
                    batch_size: 100,
                    epochs: 1.0,
                }),
                teachers: None,
            }),
            seed_policy: Some(privpred_core::SeedPolicy::Seeded { seed: 0 }),
            members: 1,
            class_names: None,
            data_source: "test".into(),
        },
        vec![p],
        serde_json::Value::Null,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dpsgd.safetensors");
    artifact::save(&path, &model).unwrap();
    let back = artifact::load(&path).unwrap();
    let row = vec![128.0f32; back.input_dim()];
    let ans = back.predict(&[&row[..]], &mut rng).unwrap();
    assert!(ans[0].label < 10 && ans[0].scores.as_ref().unwrap().len() == 10);
}

#[cfg(feature = "nn")]
#[test]
fn fig7_with_the_nn_feature_goes_through_the_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fig7a");
    // A shard that owns none of fig7a's groups: the sweep machinery (manifest, results,
    // summary) runs end to end without training a network.
    let o = common::bin()
        .args([
            "reproduce",
            "fig7a",
            "--quick",
            "--shard",
            "999/1000",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("runs");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("0 units computed"));
    // Bad arguments still exit 2 with the argument named.
    let o = common::bin()
        .args(["reproduce", "fig7b", "--quick", "--shard", "3/2", "--out"])
        .arg(&out)
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--shard"));
}

/// Erratum 4.9 for ResNet artifacts: `train --seed` of a DP-SGD network or a teacher ensemble is
/// an experiment (`release: experiment` in its metadata); `predict` and `serve` refuse it with
/// exit 2 and say why; `evaluate` reads it.
#[cfg(feature = "nn")]
#[test]
fn seeded_resnet_artifacts_are_experiments() {
    let dir = tempfile::tempdir().unwrap();
    let Some(folder) = small_cifar(
        dir.path(),
        "cli_nn::seeded_resnet_artifacts_are_experiments",
    ) else {
        return;
    };
    let data = format!("images:{}", folder.display());
    let q = pixel_csv(dir.path(), "q.csv", 1, 3072);
    for (method, extra) in [
        (
            "dp-sgd",
            &["--epsilon", "1", "--delta", "1e-5", "--batch-size", "50"][..],
        ),
        (
            "subsample-aggregate",
            &[
                "--epsilon",
                "1",
                "--budget",
                "3",
                "--teachers",
                "2",
                "--batch-size",
                "25",
            ][..],
        ),
    ] {
        let model = dir.path().join(format!("seeded-{method}.safetensors"));
        let m = model.to_str().unwrap();
        let mut args = vec![
            "train",
            method,
            "--model",
            "resnet-tiny",
            "--dataset",
            &data,
            "--classes",
            CIFAR_CLASSES,
            "--epochs",
            "1",
            "--seed",
            "5",
            "--out",
            m,
        ];
        args.extend_from_slice(extra);
        let o = privpred(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let o = privpred(&["predict", "--model", m, "--input", q.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{method}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("not a private release"),
            "{}",
            stderr(&o)
        );
        let o = privpred(&["serve", "--model", m, "--listen", "127.0.0.1:0"]);
        assert_eq!(o.status.code(), Some(2), "{method}: {}", stderr(&o));
        assert!(stderr(&o).contains("--seed 5"), "{}", stderr(&o));
        let o = privpred(&["evaluate", "--model", m, "--dataset", &data, "--json"]);
        assert_eq!(o.status.code(), Some(0), "{method}: {}", stderr(&o));
        // the payload's typed `seed_policy` is the one record of the seed policy: relabelled
        // as a release (checksum recomputed, re-signed), written with a seed 5.0 or removed,
        // the model is refused, never a release
        let bad = dir.path().join("bad.safetensors");
        let b = bad.to_str().unwrap();
        for (what, policy, needle) in [
            (
                "relabelled os-random",
                serde_json::json!({"policy": "os-random"}),
                "does not match",
            ),
            (
                "seed 5.0",
                serde_json::json!({"policy": "seeded", "seed": 5.0}),
                "corrupt model header",
            ),
            ("removed", serde_json::Value::Null, "seed_policy"),
        ] {
            common::tamper(&model, &bad, |m, _, _| m["seed_policy"] = policy.clone());
            let q = q.to_str().unwrap();
            for args in [
                &["predict", "--model", b, "--input", q, "--init-ledger"][..],
                &[
                    "serve",
                    "--model",
                    b,
                    "--listen",
                    "127.0.0.1:0",
                    "--init-ledger",
                ][..],
            ] {
                let o = privpred(args);
                assert_eq!(o.status.code(), Some(2), "{method} {what}: {}", stderr(&o));
                assert!(stderr(&o).contains(needle), "{what}: {}", stderr(&o));
            }
        }
    }
}

/// `reproduce fig7 --nn-time-limit-s`: a run stopped at its time limit keeps a checkpoint and
/// exits with code 3 ("stopped, resumable") saying so; `--resume` continues the training from it (not from the start); a bad
/// limit exits 2. Skips when the CIFAR-10 JPEG copy is absent.
#[cfg(feature = "nn")]
#[test]
fn fig7_training_stops_at_its_time_limit_and_resumes_from_the_checkpoint() {
    let o = common::bin()
        .args(["reproduce", "fig7", "--quick", "--nn-time-limit-s", "0"])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--nn-time-limit-s"), "{}", stderr(&o));
    let Some(tarball) = common::cifar_or_skip(
        "cli_nn::fig7_training_stops_at_its_time_limit_and_resumes_from_the_checkpoint",
    ) else {
        return;
    };
    let data_dir = tarball.parent().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fig7");
    let run = || {
        common::bin()
            .env("PRIVPRED_NN_ENGINE", "cpu")
            .args([
                "reproduce",
                "fig7",
                "--quick",
                "--resume",
                "--nn-time-limit-s",
                "1",
            ])
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--out")
            .arg(&out)
            .output()
            .expect("runs")
    };
    let stopped_at = |o: &std::process::Output| -> usize {
        assert_eq!(o.status.code(), Some(3), "{}", stderr(o));
        let e = stderr(o);
        assert!(e.contains("stopped, resumable"), "{e}");
        let at = e
            .split("time limit reached at step ")
            .nth(1)
            .unwrap_or_else(|| panic!("no stop message: {e}"));
        at.split('/').next().unwrap().parse().unwrap()
    };
    let first = stopped_at(&run());
    let ckpts: Vec<_> = std::fs::read_dir(out.join("nn-cache"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "ckpt"))
        .collect();
    assert_eq!(ckpts.len(), 1, "one checkpoint of the training in progress");
    let second = stopped_at(&run());
    assert_eq!(
        second,
        2 * first,
        "the second run continues from step {first}"
    );
}

/// The prepared GPU run (scripts/gpu_fig7_run.sh) parses, and every option it passes to
/// `privpred reproduce` exists.
#[cfg(feature = "nn")]
#[test]
fn the_prepared_gpu_run_uses_options_that_exist() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/gpu_fig7_run.sh");
    let o = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(
        text.contains("reproduce fig7 "),
        "the script runs both panels"
    );
    let help = common::bin()
        .args(["reproduce", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for opt in [
        "--quick",
        "--resume",
        "--data-dir",
        "--out",
        "--nn-time-limit-s",
    ] {
        assert!(text.contains(opt), "{opt} not in the script");
        assert!(help.contains(opt), "{opt} not in reproduce --help");
    }
}

/// A ResNet's guarantee is for replace-one neighbours only (its DP-SGD schedule and its
/// teachers' partition are set from the exact N): `--neighbours add-remove` is refused with
/// exit 2, naming the flag, before any data is read.
#[cfg(feature = "nn")]
#[test]
fn resnets_refuse_add_remove_neighbours_before_reading_data() {
    for (method, extra) in [
        ("dp-sgd", &["--delta", "1e-5"][..]),
        ("subsample-aggregate", &[][..]),
    ] {
        let o = common::bin()
            .args(["train", method, "--model", "resnet-tiny", "--epsilon", "1"])
            .args(extra)
            .args([
                "--neighbours",
                "add-remove",
                "--dataset",
                "images:/no/such/folder",
            ])
            .args(["--out", "/no/such/dir/m.safetensors"])
            .output()
            .expect("runs");
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{method}: {e}");
        // DP-SGD by the ResNet rule; subsample-and-aggregate has no add-remove analysis at all
        assert!(e.contains("add-remove"), "{method}: {e}");
        if method == "dp-sgd" {
            assert!(e.contains("--neighbours add-remove is refused"), "{e}");
        }
        assert!(e.contains("replace-one"), "{method}: {e}");
        assert!(
            !e.contains("/no/such/folder"),
            "{method}: refused before the data: {e}"
        );
    }
}
