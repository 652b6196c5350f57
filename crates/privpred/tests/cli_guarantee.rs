//! The guarantee an artifact states is re-derived on load, not trusted: an artifact edited
//! with its checksum recomputed (the checksum is public, computed here exactly as the writer
//! does) is refused with exit 2 naming the field by `predict`, `serve` and `evaluate`. A model
//! whose guarantee is not valid (`paper` calibration) is answered and served only with
//! `--allow-invalid-guarantee`, and then every answer says so.

mod common;

use common::{Serve, capture, code, ok, serve_model, tamper};
use privpred_serve::client::Client;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A toy CSV: 300 rows of 8 pixel-like features, 3 classes.
fn write_csv(path: &Path) {
    let mut s = String::from("f0,f1,f2,f3,f4,f5,f6,f7,label\n");
    let mut state = 4242u64;
    for i in 0..300 {
        let y = i % 3;
        let row: Vec<String> = (0..8)
            .map(|j| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (((state >> 33) % 60) as u32 + if j % 3 == y { 180 } else { 0 }).to_string()
            })
            .collect();
        s.push_str(&format!("{},{y}\n", row.join(",")));
    }
    std::fs::write(path, s).unwrap();
}

struct Fixture {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    dataset: String,
    queries: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let csv = dir.join("data.csv");
        write_csv(&csv);
        let queries = dir.join("q.csv");
        std::fs::write(
            &queries,
            "200,10,30,190,20,5,185,40\n10,200,30,20,190,5,40,185\n",
        )
        .unwrap();
        let dataset = format!("csv-pixels:{}", csv.display());
        Fixture {
            _tmp: tmp,
            dir,
            dataset,
            queries,
        }
    }

    /// Trains `method` with `args` into `<name>.safetensors`.
    fn train(&self, name: &str, method: &str, args: &[&str]) -> PathBuf {
        let out = self.dir.join(format!("{name}.safetensors"));
        let mut all = vec![
            "train",
            method,
            "--dataset",
            &self.dataset,
            "--classes",
            "3",
            "--cv-draws",
            "1",
            "--epsilon",
            "1",
            "--out",
            out.to_str().unwrap(),
        ];
        all.extend_from_slice(args);
        ok(&all);
        out
    }

    fn predict(&self, model: &Path, extra: &[&str]) -> (i32, String, String) {
        let mut a = vec![
            "predict",
            "--model",
            model.to_str().unwrap(),
            "--input",
            self.queries.to_str().unwrap(),
            "--init-ledger",
        ];
        a.extend_from_slice(extra);
        capture(&a)
    }

    fn evaluate(&self, model: &Path) -> (i32, String) {
        code(&[
            "evaluate",
            "--model",
            model.to_str().unwrap(),
            "--dataset",
            &self.dataset,
        ])
    }
}

fn serve_refusal(model: &Path) -> (i32, String) {
    code(&[
        "serve",
        "--model",
        model.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--init-ledger",
    ])
}

/// The stored calibration record.
fn cal(m: &mut Value) -> &mut Value {
    &mut m["predictor"]["calibration"]
}

/// Every tampering the issue lists, each refused by predict, serve and evaluate with exit 2
/// and the field named; the same files with only the checksum recomputed still load.
#[test]
fn edited_guarantees_with_a_recomputed_checksum_are_refused_by_every_consumer() {
    let f = Fixture::new();
    let ms = f.train("ms", "model-sensitivity", &["--lambda", "0.01"]);
    let ps = f.train(
        "ps",
        "prediction-sensitivity",
        &["--lambda", "0.01", "--budget", "10"],
    );
    let sa = f.train(
        "sa",
        "subsample-aggregate",
        &["--teachers", "8", "--budget", "10"],
    );
    let paper = f.train(
        "paper",
        "model-sensitivity",
        &["--lambda", "0.01", "--calibration", "paper"],
    );
    let seeded = f.train(
        "seeded",
        "model-sensitivity",
        &["--lambda", "0.01", "--seed", "3"],
    );
    type Edit = Box<dyn Fn(&mut Value, &mut Value, &mut HashMap<String, String>)>;
    let cases: Vec<(&str, &Path, Edit, &str)> = vec![
        (
            "beta = 1e300",
            &ps,
            Box::new(|m, _, _| cal(m)["noise"]["beta"] = 1e300.into()),
            "`noise.beta`",
        ),
        (
            "epsilon 0.001, the old noise",
            &ms,
            Box::new(|m, _, _| cal(m)["privacy"]["epsilon"] = 0.001.into()),
            "`noise.beta`",
        ),
        (
            "B x 100, the old noise",
            &ps,
            Box::new(|m, _, _| cal(m)["budget"]["finite"] = 1000.into()),
            "`noise.beta`",
        ),
        (
            "N = 1e9",
            &ms,
            Box::new(|m, _, _| cal(m)["assumptions"]["n"] = 1_000_000_000u64.into()),
            "`noise.beta`",
        ),
        (
            "Gaussian noise on a pure-epsilon prediction-sensitivity model",
            &ps,
            Box::new(|m, _, _| {
                cal(m)["noise"] = serde_json::json!({"distribution": "gaussian", "sigma": 1.0})
            }),
            "`noise.distribution`",
        ),
        (
            "permute-and-flip over the votes in corrected mode",
            &sa,
            Box::new(|m, _, _| cal(m)["noise"]["distribution"] = "permute-and-flip".into()),
            "`noise.distribution`",
        ),
        (
            "a paper calibration marked valid",
            &paper,
            Box::new(|m, _, _| cal(m)["valid_guarantee"] = true.into()),
            "`valid_guarantee`",
        ),
        (
            "seed_policy flipped alone",
            &seeded,
            Box::new(|m, _, _| {
                m["predictor"]["seed_policy"] = serde_json::json!({"policy": "os-random"})
            }),
            "seed_policy",
        ),
        (
            "extra.seed written as 3.0",
            &seeded,
            Box::new(|_, e, _| e["seed"] = 3.0.into()),
            "extra.seed",
        ),
        (
            "extra.seed written as \"3\"",
            &seeded,
            Box::new(|_, e, _| e["seed"] = "3".into()),
            "extra.seed",
        ),
    ];
    let bad = f.dir.join("bad.safetensors");
    for (what, src, edit, field) in &cases {
        tamper(src, &bad, edit);
        let (c, _, err) = f.predict(&bad, &[]);
        assert_eq!(c, 2, "predict, {what}: {err}");
        assert!(err.contains(field), "predict, {what}: {err}");
        let (c, err) = serve_refusal(&bad);
        assert_eq!(c, 2, "serve, {what}: {err}");
        assert!(err.contains(field), "serve, {what}: {err}");
        let (c, err) = f.evaluate(&bad);
        assert_eq!(c, 2, "evaluate, {what}: {err}");
        assert!(err.contains(field), "evaluate, {what}: {err}");
        let _ = std::fs::remove_file(f.dir.join("bad.safetensors.ledger.json"));
    }
    // control: the rewrite alone (checksum recomputed, nothing edited) changes nothing
    for src in [&ms, &ps, &sa] {
        tamper(src, &bad, |_, _, _| {});
        let (c, _, err) = f.predict(&bad, &[]);
        assert_eq!(c, 0, "{}: {err}", src.display());
        let _ = std::fs::remove_file(f.dir.join("bad.safetensors.ledger.json"));
        let (c, err) = f.evaluate(&bad);
        assert_eq!(c, 0, "{err}");
    }
    // the untampered seeded model is still an experiment: evaluate reads it, predict refuses
    assert_eq!(f.evaluate(&seeded).0, 0);
    let (c, _, err) = f.predict(&seeded, &[]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("--seed 3"), "{err}");
}

/// `serve --allow-invalid-guarantee` on a model whose ledger record `predict` created.
fn serve_allowing_invalid(model: &Path) -> Serve {
    serve_model(model, &["--allow-invalid-guarantee"])
}

/// A `paper`-calibrated model (its guarantee is not valid) is refused by predict and serve
/// naming `valid_guarantee`; with `--allow-invalid-guarantee` it is answered, with a warning
/// on stderr and every answer marked, and served with every response marked.
#[test]
fn an_invalid_guarantee_is_answered_only_when_allowed_and_then_marked() {
    let f = Fixture::new();
    let paper = f.train(
        "paper",
        "prediction-sensitivity",
        &[
            "--lambda",
            "0.01",
            "--budget",
            "10",
            "--calibration",
            "paper",
        ],
    );
    let (c, _, err) = f.predict(&paper, &[]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("valid_guarantee: false"), "{err}");
    assert!(err.contains("--allow-invalid-guarantee"), "{err}");
    // refused before the ledger is opened: no ledger, no record
    assert!(!f.dir.join("paper.safetensors.ledger.sqlite").exists());
    let (c, err) = serve_refusal(&paper);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("valid_guarantee: false"), "{err}");
    // allowed: a warning, and every answer says so
    let (c, out, err) = f.predict(&paper, &["--allow-invalid-guarantee"]);
    assert_eq!(c, 0, "{err}");
    assert!(err.contains("NOT valid"), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines.iter().all(|l| l.ends_with("guarantee-not-valid")),
        "{out}"
    );
    let o = common::bin()
        .args(["predict", "--model", paper.to_str().unwrap()])
        .args(["--input", f.queries.to_str().unwrap()])
        .args(["--json", "--allow-invalid-guarantee"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["valid_guarantee"], false, "{j}");
    assert!(j["warning"].as_str().unwrap().contains("NOT valid"), "{j}");
    let answers = j["answers"].as_array().unwrap();
    assert!(answers.iter().all(|a| a["valid_guarantee"] == false), "{j}");
    // served with the flag: every response is marked
    let s = serve_allowing_invalid(&paper);
    let mut client = Client::new(s.addr, None);
    let r = client
        .post_json(
            "/v1/predict",
            r#"{"inputs": [[200,10,30,190,20,5,185,40]]}"#,
        )
        .unwrap();
    let j = r.json();
    assert_eq!(j["valid_guarantee"], false, "{j}");
    assert!(j["warning"].as_str().unwrap().contains("NOT valid"), "{j}");
    let m = client.get("/v1/model").unwrap().json();
    assert_eq!(m["guarantee"]["valid_guarantee"], false, "{m}");
}
