//! `privpred data` end to end through the binary.

use std::process::Command;

fn privpred(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_privpred"))
        .args(args)
        .output()
        .expect("run privpred");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn info_mnist_json() {
    let (code, out, err) = privpred(&["data", "info", "mnist", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["name"], "mnist");
    assert_eq!(v["verified"], true);
    assert_eq!(v["feature_shape"], serde_json::json!([28, 28]));
    assert_eq!(v["splits"]["train"]["examples"], 60000);
    assert_eq!(v["splits"]["test"]["examples"], 10000);
    assert_eq!(v["splits"]["train"]["class_counts"][1], 6742);
    assert_eq!(v["splits"]["test"]["class_counts"][9], 1009);
    assert!(v["source"].as_str().is_some());
}

#[test]
fn info_text_and_bad_input_exit_2() {
    let (code, out, _) = privpred(&["data", "info", "mnist"]);
    assert_eq!(code, 0);
    assert!(out.contains("60000 examples") && out.contains("verified"));
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("bad.csv");
    std::fs::write(&p, "1,2,0\n1,2\n").unwrap();
    let (code, _, err) = privpred(&["data", "info", &format!("csv:{}", p.display())]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("bad.csv") && err.contains("ragged"), "{err}");
    let (code, _, err) = privpred(&["data", "info", "nosuchset"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = privpred(&["data", "info", &format!("idx:{}", t.path().display())]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no IDX files"), "{err}");
}

#[test]
fn generate_mnist1m_small_and_inspect() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("m1m");
    let d = dir.to_str().unwrap();
    let (code, out, err) = privpred(&[
        "data", "generate", "mnist1m", "--n", "2000", "--seed", "3", "--out", d,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("2000 digits"), "{out}");
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("metadata.json")).unwrap()).unwrap();
    assert!(meta["substitute"].as_str().unwrap().contains("substitute"));
    let (code, out, err) = privpred(&["data", "info", "mnist1m", "--json", "--data-dir", d]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["splits"]["train"]["examples"], 2000);
    assert_eq!(v["splits"]["test"]["examples"], 10000);
    assert!(v["labels"][0].as_str().unwrap().contains("substitute"));
    let (code, _, err) = privpred(&["data", "generate", "mnist1m", "--n", "0", "--out", d]);
    assert_eq!(code, 2, "{err}");
}
