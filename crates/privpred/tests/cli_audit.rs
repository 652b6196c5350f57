//! `privpred audit` through the binary: the JSON contract, the verdicts for sound
//! and erroneous calibrations, and exit code 2 on bad input. Seeded, deterministic.

mod common;

use common::privpred;
use serde_json::Value;

fn audit_json(args: &[&str]) -> Value {
    let mut all = vec!["audit"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = privpred(&all);
    assert!(
        out.status.success(),
        "{all:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn lower(v: &Value) -> f64 {
    v["empirical_epsilon_lower"]
        .as_f64()
        .expect("empirical_epsilon_lower")
}

#[test]
fn json_has_the_contract_fields() {
    let v = audit_json(&[
        "subsample-aggregate",
        "--epsilon",
        "2",
        "--trials",
        "2000",
        "--seed",
        "1",
    ]);
    for key in [
        "method",
        "calibration",
        "claimed_epsilon",
        "delta",
        "empirical_epsilon_lower",
        "confidence",
        "trials",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert_eq!(v["method"], "subsample-aggregate");
    assert_eq!(v["calibration"], "corrected");
    assert_eq!(v["claimed_epsilon"].as_f64(), Some(2.0));
    assert_eq!(v["delta"].as_f64(), Some(0.0));
    assert_eq!(v["confidence"].as_f64(), Some(0.95));
    assert_eq!(v["trials"].as_u64(), Some(2000));
    // deterministic from the seed
    let w = audit_json(&[
        "subsample-aggregate",
        "--epsilon",
        "2",
        "--trials",
        "2000",
        "--seed",
        "1",
    ]);
    assert_eq!(lower(&v), lower(&w));
}

/// Every method in `corrected` and `tight`: the 95% lower bound does not exceed the claim.
#[test]
fn corrected_and_tight_are_not_refuted() {
    let cases: &[&[&str]] = &[
        &["subsample-aggregate", "--epsilon", "4", "--trials", "50000"],
        &[
            "subsample-aggregate",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--budget",
            "10",
            "--trials",
            "20000",
        ],
        &[
            "prediction-sensitivity",
            "--epsilon",
            "1",
            "--trials",
            "50000",
        ],
        &[
            "prediction-sensitivity",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--budget",
            "10",
            "--trials",
            "20000",
        ],
        &[
            "model-sensitivity",
            "--epsilon",
            "1",
            "--features",
            "2",
            "--trials",
            "50000",
        ],
        &[
            "model-sensitivity",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--features",
            "2",
            "--trials",
            "50000",
        ],
        &[
            "dp-sgd",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--trials",
            "20000",
        ],
        &[
            "dp-sgd",
            "--epsilon",
            "4",
            "--delta",
            "1e-5",
            "--end-to-end",
            "--dpsgd-n",
            "100",
            "--batch-size",
            "50",
            "--epochs",
            "1",
            "--trials",
            "2000",
        ],
        &["loss-perturbation", "--epsilon", "4", "--trials", "2000"],
        &[
            "loss-perturbation",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--trials",
            "2000",
        ],
    ];
    for mode in ["corrected", "tight"] {
        for case in cases {
            let mut args = case.to_vec();
            args.extend_from_slice(&["--calibration", mode, "--seed", "5"]);
            let v = audit_json(&args);
            let claimed = v["claimed_epsilon"].as_f64().unwrap();
            assert!(lower(&v) <= claimed, "{args:?}: {v}");
            assert_eq!(v["exceeds_claim"], false);
        }
    }
}

/// Erratum 4.1 and 4.2 through the CLI: the paper's calibrations are refuted.
#[test]
fn paper_errata_are_refuted() {
    let v = audit_json(&[
        "subsample-aggregate",
        "--calibration",
        "paper",
        "--epsilon",
        "4",
        "--trials",
        "50000",
        "--seed",
        "2",
    ]);
    assert!(lower(&v) > 4.0, "{v}");
    assert_eq!(v["exceeds_claim"], true);
    let v = audit_json(&[
        "dp-sgd",
        "--calibration",
        "paper",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--tensors",
        "16",
        "--trials",
        "50000",
        "--seed",
        "2",
    ]);
    assert!(lower(&v) > 1.0, "{v}");
}

#[test]
fn text_output_names_the_verdict() {
    let out = privpred(&[
        "audit",
        "subsample-aggregate",
        "--calibration",
        "paper",
        "--epsilon",
        "4",
        "--trials",
        "20000",
    ]);
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("REFUTED") && s.contains("empirical epsilon"),
        "{s}"
    );
}

#[test]
fn bad_input_exits_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["audit", "dp-sgd", "--epsilon", "1"], "delta"),
        (
            &["audit", "subsample-aggregate", "--epsilon", "-1"],
            "epsilon",
        ),
        (
            &[
                "audit",
                "subsample-aggregate",
                "--epsilon",
                "1",
                "--trials",
                "3",
            ],
            "trials",
        ),
        (
            &[
                "audit",
                "subsample-aggregate",
                "--epsilon",
                "1",
                "--confidence",
                "1",
            ],
            "confidence",
        ),
        (
            &[
                "audit",
                "subsample-aggregate",
                "--epsilon",
                "1",
                "--budget",
                "0",
            ],
            "budget",
        ),
        (
            &[
                "audit",
                "model-sensitivity",
                "--epsilon",
                "1",
                "--end-to-end",
            ],
            "end-to-end",
        ),
        (
            &[
                "audit",
                "dp-sgd",
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
                "--batch-size",
                "0",
            ],
            "batch-size",
        ),
    ];
    for (args, needle) in cases {
        let out = privpred(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err} should name {needle}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// `privpred audit floating-point`: the reachability attack finds the textbook Laplace
/// sampler's leak (Mironov 2012) and the f64 releases of noisy logits and of one DP-SGD step
/// beside a zero coordinate, finds none in the exact selections and the discrete Gaussian and
/// lattice ℓ2-Laplace grid releases, and every draw is reproduced from its own input; a method
/// audit without --epsilon and too few draws exit 2.
#[test]
fn floating_point_audit_finds_the_textbook_leak_and_none_in_the_exact_selections() {
    let v = audit_json(&["floating-point", "--trials", "4000", "--seed", "3"]);
    let rows = v.as_array().expect("one row per sampler");
    assert_eq!(rows.len(), 10);
    for r in rows {
        assert_eq!(r["self_check_failures"], 0, "{r}");
        let name = r["mechanism"].as_str().unwrap();
        let advantage = r["advantage"].as_f64().unwrap();
        if name.starts_with("textbook") {
            assert_eq!(r["shipped"], false);
            assert!(advantage > 0.2, "{r}");
        } else if r["exact"] == true {
            assert_eq!(r["unreachable"], 0, "{r}");
            if name.contains("grid") {
                // the grid releases (discrete Gaussian, lattice ℓ2-Laplace): the whole image
                // inverted, conclusive
                assert_eq!(r["conclusive"], true, "{r}");
                assert!(r["advantage_upper"].as_f64().unwrap() < 1e-2, "{r}");
            } else {
                assert!(r["timing"]["mean_ns_d"].as_f64().unwrap() > 0.0);
            }
        } else {
            assert!(advantage > 0.2 && r["conclusive"] == true, "{r}");
        }
    }
    let out = privpred(&["audit", "floating-point", "--trials", "100"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("draws (--trials)"));
    let out = privpred(&["audit", "model-sensitivity"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--epsilon is required"));
}
