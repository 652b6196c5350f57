//! The neighbouring relation on every guarantee (docs/guarantees.md#neighbouring-relations and erratum 4.7):
//! `--neighbours replace-one|add-remove` on calibrate, account, train, compare, audit and
//! reproduce; the relation in `calibrate --json`, artifacts and result rows; and the PLD
//! accountant's degenerate inputs, which are errors with exit code 2, never panics
//! or hangs.

mod common;

use common::{assert_bad, code, digits_compare, json, ok, toy_dataset};
use serde_json::Value;

#[test]
fn calibrate_json_names_the_relation_and_loss_perturbation_beta_halves() {
    let beta = |v: &Value| v["noise"]["beta"].as_f64().unwrap();
    let ro = json(&["calibrate", "loss-perturbation", "--epsilon", "1", "--json"]);
    assert_eq!(ro["neighbours"], "replace-one", "{ro}");
    let ar = json(&[
        "calibrate",
        "loss-perturbation",
        "--epsilon",
        "1",
        "--neighbours",
        "add-remove",
        "--json",
    ]);
    assert_eq!(ar["neighbours"], "add-remove");
    // without N and λ the floor ρ = 2LC/ε = 10 (C = 10, L = 1/2): the noise spends
    // ε − C·ln(1 + L/ρ) of ε = 1, at sensitivity K (add/remove) or 2K (replace-one)
    let k = std::f64::consts::SQRT_2;
    let share = 1.0 - 10.0 * (1.0f64 + 0.5 / 10.0).ln();
    assert!((beta(&ar) - share / k).abs() < 1e-9 * beta(&ar), "{ar}");
    assert!(
        (beta(&ro) - share / (2.0 * k)).abs() < 1e-9 * beta(&ro),
        "{ro}"
    );
    // paper keeps the published beta = ε/(2K) and is flagged under replace-one only
    let paper = json(&[
        "calibrate",
        "loss-perturbation",
        "--epsilon",
        "1",
        "--calibration",
        "paper",
        "--json",
    ]);
    assert!((beta(&paper) - 1.0 / (2.0 * k)).abs() < 1e-12);
    assert_eq!(paper["valid_guarantee"], false);
    // every method's JSON carries the key
    for (m, extra) in [
        (
            "model-sensitivity",
            &["--n", "1000", "--lambda", "0.01"][..],
        ),
        ("subsample-aggregate", &["--budget", "10"][..]),
        (
            "prediction-sensitivity",
            &["--n", "1000", "--lambda", "0.01", "--budget", "5"][..],
        ),
    ] {
        let mut a = vec!["calibrate", m, "--epsilon", "1", "--json"];
        a.extend_from_slice(extra);
        assert_eq!(json(&a)["neighbours"], "replace-one");
        a.extend_from_slice(&["--neighbours", "add-remove"]);
        let (c, err) = code(&a);
        assert_eq!(c, 2, "{m}: {err}");
        assert!(err.contains("no analysis under add-remove"), "{err}");
    }
    assert_bad(
        &[
            "calibrate",
            "loss-perturbation",
            "--epsilon",
            "1",
            "--neighbours",
            "swap",
        ],
        "neighbours",
    );
}

#[test]
fn account_dp_sgd_under_both_relations() {
    let base = [
        "account",
        "dp-sgd",
        "--sampling-rate",
        "0.01",
        "--noise-multiplier",
        "1",
        "--steps",
        "200",
        "--delta",
        "1e-5",
        "--json",
    ];
    let ro = json(&base);
    assert_eq!(ro["neighbours"], "replace-one");
    assert_eq!(ro["accountant"], "pld");
    assert!(
        ro.get("epsilon_rdp").is_none(),
        "no add/remove RDP number under replace-one"
    );
    let mut a = base.to_vec();
    a.extend_from_slice(&["--neighbours", "add-remove", "--accountant", "pld"]);
    let ar = json(&a);
    assert_eq!(ar["neighbours"], "add-remove");
    assert!(ro["epsilon"].as_f64().unwrap() > ar["epsilon"].as_f64().unwrap());
    let mut a = base.to_vec();
    a.extend_from_slice(&["--accountant", "rdp"]);
    assert_bad(&a, "add-remove neighbours only");
}

/// σ ≤ 1e-8 or q ≤ 1e-312 would overflow the PLD grid (index out of bounds in pld.rs) and
/// σ ≈ 1e-320 would hang it: each exits 2 with the valid range, promptly, under both relations and accountants.
#[test]
fn pld_degenerate_inputs_are_usage_errors() {
    for n in ["replace-one", "add-remove"] {
        for (sigma, q, needle) in [
            ("1e-8", "0.01", "noise-multiplier"),
            ("1e-9", "0.01", "noise-multiplier"),
            ("1e-320", "0.01", "noise-multiplier"),
            ("1", "1e-312", "sampling-rate"),
            ("2", "1e-315", "sampling-rate"),
            ("1", "1e-320", "sampling-rate"),
        ] {
            let t = std::time::Instant::now();
            assert_bad(
                &[
                    "account",
                    "dp-sgd",
                    "--sampling-rate",
                    q,
                    "--noise-multiplier",
                    sigma,
                    "--steps",
                    "10",
                    "--delta",
                    "1e-5",
                    "--accountant",
                    "pld",
                    "--neighbours",
                    n,
                ],
                needle,
            );
            assert!(
                t.elapsed().as_secs() < 10,
                "{n} sigma {sigma} q {q} too slow"
            );
        }
    }
}

/// Erratum 4.7 on the command line: the replace-one pair that moves b by 2K refutes the old
/// β = ε/(2K) (paper) and not the corrected β (sensitivity 2K, the share the Jacobian bound
/// leaves).
#[test]
fn audit_loss_perturbation_noise_term_under_replace_one() {
    let run = |cal: &str| {
        json(&[
            "audit",
            "loss-perturbation",
            "--noise-term",
            "--calibration",
            cal,
            "--neighbours",
            "replace-one",
            "--epsilon",
            "4",
            "--features",
            "1",
            "--classes",
            "2",
            "--trials",
            "100000",
            "--confidence",
            "0.999999",
            "--json",
        ])
    };
    let old = run("paper");
    assert_eq!(old["neighbours"], "replace-one");
    assert_eq!(old["claimed_epsilon"], 2.0);
    assert_eq!(old["exceeds_claim"], true, "{old}");
    let new = run("corrected");
    assert_eq!(new["exceeds_claim"], false, "{new}");
}

#[test]
fn train_records_the_relation_in_the_artifact() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = toy_dataset(tmp.path(), 600);
    for n in ["replace-one", "add-remove"] {
        let out = tmp.path().join(format!("lp-{n}.safetensors"));
        // add/remove: a separate test file (a seeded hold-out of one file permutes all rows)
        let both = format!("{ds},{}", ds.trim_start_matches("csv-pixels:"));
        let mut args = vec![
            "train",
            "loss-perturbation",
            "--dataset",
            if n == "add-remove" { &both } else { &ds },
            "--classes",
            "3",
            "--epsilon",
            "10",
            "--lambda",
            "1e-4",
            "--neighbours",
            n,
            "--seed",
            "1",
            "--json",
            "--out",
            out.to_str().unwrap(),
        ];
        if n == "add-remove" {
            // N is private under add/remove: the calibration takes a declared public size
            args.extend(["--public-n", "600"]);
        }
        let summary: Value = serde_json::from_str(&ok(&args)).unwrap();
        assert_eq!(summary["neighbours"], n, "{summary}");
        let e: Value = serde_json::from_str(&ok(&[
            "evaluate",
            "--model",
            out.to_str().unwrap(),
            "--dataset",
            &ds,
            "--repetitions",
            "1",
            "--json",
        ]))
        .unwrap();
        assert_eq!(e["neighbours"], n, "{e}");
    }
    // no analysis: refused before any work, nothing written
    let out = tmp.path().join("ms.safetensors");
    let (c, err) = code(&[
        "train",
        "model-sensitivity",
        "--dataset",
        &ds,
        "--classes",
        "3",
        "--epsilon",
        "1",
        "--neighbours",
        "add-remove",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(c, 2, "{err}");
    assert!(!out.exists());
}

#[test]
fn reproduce_and_compare_use_one_relation() {
    let tmp = tempfile::tempdir().unwrap();
    let o = tmp.path().join("fig1a");
    let (c, err) = code(&[
        "reproduce",
        "fig1a",
        "--dataset",
        "digits",
        "--neighbours",
        "add-remove",
        "--out",
        o.to_str().unwrap(),
    ]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("no analysis under add-remove"), "{err}");
    // replace-one (the default): every row carries the column
    ok(&[
        "reproduce",
        "fig1a",
        "--dataset",
        "digits",
        "--repetitions",
        "1",
        "--seed",
        "2",
        "--out",
        o.to_str().unwrap(),
    ]);
    let csv = std::fs::read_to_string(o.join("results.csv")).unwrap();
    let mut lines = csv.lines();
    // the last column (cells before it may be quoted and contain commas)
    assert!(lines.next().unwrap().ends_with(",neighbours"), "{csv}");
    let mut rows = 0;
    for l in lines {
        assert!(l.ends_with(",replace-one"), "{l}");
        rows += 1;
    }
    assert!(rows > 0);
    // compare under add-remove lists the methods without an analysis as not applicable
    let out = ok(&digits_compare("1", &["--neighbours", "add-remove"]));
    assert!(out.contains("add-remove neighbours"), "{out}");
    assert!(out.contains("no analysis under add-remove"), "{out}");
}
