//! The human-readable output of `train`, `calibrate`, `audit`, `evaluate` and `compare` is
//! written for people: no Rust `Debug` forms (`L2Laplace { beta: … }`, `Some(…)`, enum variant
//! names such as `AtLeast`) reach it. `--json` keeps its structured fields.

mod common;

use common::{capture, json, pixel_set};

/// Debug forms a `{:?}` of the library's types would print; none may appear in human output.
const DEBUG_FORMS: &[&str] = &[
    "{ ",
    "Some(",
    "None",
    "L2Laplace",
    "Gaussian {",
    "Exponential {",
    "PermuteAndFlip",
    "AtLeast",
    "Below",
    "Neighbour,",
    "Original",
    "Finite(",
    "Unlimited",
    "MaxIterations",
    "LineSearchStalled",
];

/// Runs `privpred ARGS`, which must succeed, and checks stdout and stderr for Debug forms.
fn human(args: &[&str]) -> String {
    let (code, out, err) = capture(args);
    assert_eq!(code, 0, "privpred {args:?} failed: {err}\n{out}");
    let all = format!("{out}{err}");
    for form in DEBUG_FORMS {
        assert!(
            !all.contains(form),
            "privpred {args:?} printed the Debug form `{form}`:\n{all}"
        );
    }
    all
}

#[test]
fn train_evaluate_and_compare_print_no_debug_forms() {
    let dir = tempfile::tempdir().unwrap();
    let ds = pixel_set(dir.path(), 600, 8, false);
    let cases: &[(&str, &[&str], &str)] = &[
        ("model-sensitivity", &[], "noise: ℓ2-Laplace, β = "),
        ("loss-perturbation", &[], "noise: ℓ2-Laplace, β = "),
        (
            "prediction-sensitivity",
            &[],
            "noise: ℓ2-Laplace on a grid, β = ",
        ),
        (
            "subsample-aggregate",
            &["--teachers", "8"],
            "noise: exponential mechanism, β = 0.05",
        ),
        (
            "subsample-aggregate",
            &["--teachers", "8", "--calibration", "tight"],
            "noise: permute-and-flip, β = 0.05",
        ),
        (
            "dp-sgd",
            &["--delta", "1e-5", "--batch-size", "32"],
            "noise: Gaussian, σ = ",
        ),
        ("non-private", &[], "no privacy guarantee"),
    ];
    for (i, (method, extra, expect)) in cases.iter().enumerate() {
        let out = dir.path().join(format!("m{i}.safetensors"));
        let out = out.to_str().unwrap();
        let mut args = vec![
            "train",
            method,
            "--dataset",
            &ds,
            "--classes",
            "3",
            "--out",
            out,
            "--seed",
            "3",
        ];
        if *method != "non-private" {
            args.extend_from_slice(&["--epsilon", "1", "--budget", "10"]);
        }
        args.extend_from_slice(extra);
        let text = human(&args);
        assert!(text.contains(expect), "{args:?}: no `{expect}` in\n{text}");
        human(&["evaluate", "--model", out, "--dataset", &ds]);
    }
    human(&[
        "compare",
        "--dataset",
        &ds,
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--budget",
        "10",
        "--teachers",
        "8",
        "--quick",
        "--seed",
        "1",
    ]);
}

#[test]
fn calibrate_prints_no_debug_forms() {
    let common = ["--epsilon", "1", "--n", "1000", "--budget", "10"];
    let cases: &[&[&str]] = &[
        &["model-sensitivity", "--lambda", "0.01"],
        &["loss-perturbation"],
        &["prediction-sensitivity", "--lambda", "0.01"],
        &[
            "prediction-sensitivity",
            "--lambda",
            "0.01",
            "--calibration",
            "tight",
        ],
        &["subsample-aggregate"],
        &["subsample-aggregate", "--calibration", "tight"],
        &["subsample-aggregate", "--calibration", "paper"],
        &["loss-perturbation", "--neighbours", "add-remove"],
    ];
    for case in cases {
        let mut args = vec!["calibrate"];
        args.extend_from_slice(case);
        args.extend_from_slice(&common);
        human(&args);
    }
    human(&[
        "calibrate",
        "dp-sgd",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--n",
        "1000",
        "--batch-size",
        "50",
        "--epochs",
        "2",
    ]);
}

#[test]
fn audit_prints_no_debug_forms_and_its_json_keeps_the_fields() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["subsample-aggregate", "--epsilon", "2"],
            "noise                   exponential mechanism, β = 1\n",
        ),
        (
            &["model-sensitivity", "--epsilon", "2"],
            "noise                   ℓ2-Laplace, β = ",
        ),
        (
            &["dp-sgd", "--epsilon", "2", "--delta", "1e-5"],
            "noise                   Gaussian, σ = ",
        ),
        (
            // β = 3 computes as 2.9999999999999996: printed to 12 significant digits
            &[
                "prediction-sensitivity",
                "--calibration",
                "tight",
                "--epsilon",
                "2",
            ],
            "noise                   permute-and-flip, β = 3\n",
        ),
    ];
    for (case, expect) in cases {
        let mut args = vec!["audit"];
        args.extend_from_slice(case);
        args.extend_from_slice(&["--trials", "2000", "--seed", "4"]);
        let text = human(&args);
        assert!(text.contains(expect), "{args:?}: no `{expect}` in\n{text}");
        assert!(
            text.contains("region score ≥ t") || text.contains("region score < t"),
            "{text}"
        );
        assert!(
            text.contains("likelier under D′)") || text.contains("likelier under D)"),
            "{text}"
        );
        args.push("--json");
        let v = json(&args);
        assert!(v["noise"].is_object(), "{v}");
        assert!(v["test"]["side"].is_string(), "{v}");
    }
}
