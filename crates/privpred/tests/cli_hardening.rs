//! Hostile sizes and edited files at the command line: counts near `u64::MAX` are usage errors
//! naming the flag and its limit (not capacity-overflow panics, huge allocations or hangs), an
//! edited model artifact is refused by every command that loads it, and bad data files are
//! clear errors.

mod common;

use common::{assert_bad, ok, pixel_set, privpred};
use std::time::{Duration, Instant};

const MAX: &str = "18446744073709551615";

#[test]
fn audit_counts_beyond_their_limits_are_usage_errors() {
    let t0 = Instant::now();
    assert_bad(
        &[
            "audit",
            "model-sensitivity",
            "--epsilon",
            "1",
            "--features",
            "100000",
            "--classes",
            "1000",
        ],
        "MAX_AUDIT_PARAMETERS",
    );
    for (method, flag, value, needle) in [
        ("model-sensitivity", "--trials", MAX, "MAX_AUDIT_TRIALS"),
        ("subsample-aggregate", "--budget", MAX, "MAX_AUDIT_BUDGET"),
        ("model-sensitivity", "--classes", MAX, "MAX_CLASSES"),
        ("model-sensitivity", "--features", MAX, "MAX_FEATURES"),
        (
            "model-sensitivity",
            "--features",
            "100000",
            "MAX_AUDIT_WORK",
        ),
        (
            "subsample-aggregate",
            "--budget",
            "1000000",
            "MAX_AUDIT_WORK",
        ),
        ("subsample-aggregate", "--teachers", MAX, "MAX_TEACHERS"),
        ("loss-perturbation", "--e2e-n", MAX, "MAX_AUDIT_E2E_N"),
        ("dp-sgd", "--dpsgd-n", MAX, "MAX_AUDIT_N"),
        ("dp-sgd", "--epochs", "1e300", "MAX_AUDIT_STEPS"),
        ("dp-sgd", "--epochs", "NaN", "epochs"),
        ("dp-sgd", "--tensors", MAX, "MAX_AUDIT_TENSORS"),
    ] {
        assert_bad(
            &[
                "audit",
                method,
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
                flag,
                value,
            ],
            needle,
        );
    }
    assert!(t0.elapsed() < Duration::from_secs(60));
}

#[test]
fn repetitions_beyond_the_limit_are_usage_errors() {
    assert_bad(
        &[
            "evaluate",
            "--model",
            "nowhere.safetensors",
            "--dataset",
            "digits",
            "--repetitions",
            MAX,
        ],
        "MAX_REPETITIONS",
    );
    assert_bad(
        &[
            "compare",
            "--epsilon",
            "1",
            "--budget",
            "10",
            "--repetitions",
            "4294967295",
        ],
        "MAX_REPETITIONS",
    );
    assert_bad(
        &[
            "compare",
            "--epsilon",
            "1",
            "--budget",
            "10",
            "--teachers",
            MAX,
        ],
        "MAX_TEACHERS",
    );
    assert_bad(
        &[
            "reproduce",
            "fig1a",
            "--repetitions",
            "4294967295",
            "--out",
            "/nonexistent/x",
        ],
        "MAX_REPETITIONS",
    );
}

#[test]
fn an_edited_artifact_is_refused_by_evaluate_and_predict() {
    let t = tempfile::tempdir().unwrap();
    let ds = pixel_set(t.path(), 300, 3, true);
    let m = t.path().join("m.safetensors");
    let ms = m.to_str().unwrap();
    ok(&[
        "train",
        "subsample-aggregate",
        "--dataset",
        &ds,
        "--classes",
        "3",
        "--epsilon",
        "1",
        "--budget",
        "10",
        "--teachers",
        "4",
        "--seed",
        "1",
        "--out",
        ms,
    ]);
    ok(&["evaluate", "--model", ms, "--dataset", &ds]);
    // ε = 1 → 9 in the public header: same length, still in range and canonical, only the
    // signature sees it.
    let bytes = std::fs::read(&m).unwrap();
    let pat = br#""epsilon":1.0"#;
    let at = bytes
        .windows(pat.len())
        .position(|w| w == pat)
        .expect("epsilon in the header");
    let mut b = bytes.clone();
    b[at + pat.len() - 3] = b'9';
    let bad = t.path().join("bad.safetensors");
    std::fs::write(&bad, &b).unwrap();
    let bs = bad.to_str().unwrap();
    assert_bad(&["evaluate", "--model", bs, "--dataset", &ds], "signature");
    let q = t.path().join("q.csv");
    std::fs::write(&q, "1,2,3\n").unwrap();
    assert_bad(
        &["predict", "--model", bs, "--input", q.to_str().unwrap()],
        "signature",
    );
    // A header length of 2^32 - 1: refused, nothing allocated for it.
    let mut h = b"PPMODEL\0".to_vec();
    h.extend_from_slice(&2u32.to_le_bytes());
    h.extend_from_slice(&u32::MAX.to_le_bytes());
    h.extend_from_slice(b"{}");
    std::fs::write(&bad, &h).unwrap();
    assert_bad(
        &["evaluate", "--model", bs, "--dataset", &ds],
        "header of 4294967295 bytes",
    );
}

#[test]
fn a_csv_label_of_u32_max_is_a_clear_error() {
    let t = tempfile::tempdir().unwrap();
    let mut s = String::new();
    for i in 0..50 {
        s.push_str(&format!("{i},1,{}\n", i % 2));
    }
    s.push_str("1,1,4294967295\n");
    let p = t.path().join("d.csv");
    std::fs::write(&p, s).unwrap();
    let t0 = Instant::now();
    let o = privpred(&[
        "train",
        "non-private",
        "--dataset",
        &format!("csv-pixels:{}", p.display()),
        "--out",
        t.path().join("m.safetensors").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("at most 1000 classes"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(30));
}
