//! How `reproduce` and `compare` select λ / ν, and that every row, summary line and report
//! says so (on the scikit-learn digits fixture): the study's default is the paper's
//! non-private hold-out selection, labelled outside the guarantee everywhere; `--selection
//! private` runs the private split (its record carries the row's ε, δ; the release is trained
//! on the split's final part only); `compare` selects nothing from the data by default; the
//! private split under add-remove neighbours is refused with exit 2.

mod common;

use common::{assert_bad, digits_compare, json, ok};
use privpred_core::tuning::{SELECTION_FRACTION, SplitPlan};
use serde_json::Value;
use std::path::Path;

const OUTSIDE: &str = "non-private-holdout — outside the guarantee";

fn rows(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// fig1a on digits, one repetition, with `extra`, into `dir` (and its HTML report `dir.html`).
fn fig1a(dir: &Path, extra: &[&str]) -> String {
    let d = dir.to_string_lossy().into_owned();
    let report = format!("{d}.html");
    let mut args = vec![
        "reproduce",
        "fig1a",
        "--dataset",
        "digits",
        "--repetitions",
        "1",
        "--seed",
        "2",
        "--out",
        &d,
        "--report",
        &report,
    ];
    args.extend_from_slice(extra);
    ok(&args)
}

#[test]
fn the_papers_selection_is_labelled_outside_the_guarantee_in_every_row_summary_and_report() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("paper");
    let stdout = fig1a(&dir, &[]);
    let rows = rows(&dir);
    assert_eq!(rows.len(), 4 * 10);
    for r in &rows {
        let (method, s) = (r["method"].as_str().unwrap(), &r["selection"]);
        if method == "subsample-aggregate" {
            // T is fixed and the teachers have no λ: nothing is selected
            assert_eq!(s["method"], "public", "{r}");
            assert_eq!(r["selection_label"], "public — costs nothing");
        } else {
            assert_eq!(s["method"], "non-private-holdout", "{r}");
            assert_eq!(s["composition"], "outside");
            assert!(s["epsilon"].is_null() && s["delta"].is_null(), "{r}");
            assert_eq!(r["selection_label"], OUTSIDE);
            assert_eq!(r["lambda_source"], "cross-validated");
        }
    }
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(
        header.contains(",selection,selection_epsilon,selection_delta,selection_label,"),
        "{header}"
    );
    assert_eq!(csv.matches(OUTSIDE).count(), 3 * 10, "{csv}");
    let line = format!(
        "selection: {OUTSIDE} (model-sensitivity, loss-perturbation, prediction-sensitivity)"
    );
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.contains(&line), "{summary}");
    assert!(stdout.contains(&line), "{stdout}");
    let summary_csv = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    assert_eq!(summary_csv.matches(OUTSIDE).count(), 3 * 10);
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(
        manifest["options"]["selection"],
        serde_json::json!({"protocol": "paper", "lambda": "cv", "clip": "cv"})
    );
    let html = std::fs::read_to_string(tmp.path().join("paper.html")).unwrap();
    assert!(html.contains(&format!("selection: {OUTSIDE}")), "report");
    assert!(html.contains("paper: λ non-private hold-out selection (outside the guarantee)"));
}

#[test]
fn private_selection_rows_carry_the_private_split_record_and_train_on_the_final_part() {
    let tmp = tempfile::tempdir().unwrap();
    fig1a(&tmp.path().join("paper"), &[]);
    let full_n = rows(&tmp.path().join("paper"))[0]["n_train"]
        .as_u64()
        .unwrap() as usize;
    let plan = SplitPlan::new(full_n, 10, SELECTION_FRACTION).unwrap();
    let dir = tmp.path().join("private");
    let stdout = fig1a(&dir, &["--selection", "private"]);
    let rows = rows(&dir);
    assert_eq!(rows.len(), 4 * 10);
    for r in &rows {
        let s = &r["selection"];
        if r["method"] == "subsample-aggregate" {
            assert_eq!(s["method"], "public", "{r}");
            assert_eq!(r["n_train"].as_u64(), Some(full_n as u64));
            continue;
        }
        assert_eq!(s["method"], "private-split", "{r}");
        assert_eq!(s["composition"], "parallel", "{r}");
        // the selection's cost is the row's whole (ε, δ), spent on a disjoint part
        assert_eq!(s["epsilon"], r["epsilon"], "{r}");
        assert_eq!(s["delta"], r["delta"], "{r}");
        assert_eq!(r["lambda_source"], "private-split");
        assert!(r["cv_draws"].is_null(), "{r}");
        // the release is trained on the final part only
        assert_eq!(r["n_train"].as_u64(), Some(plan.final_n as u64), "{r}");
        let label = r["selection_label"].as_str().unwrap();
        assert!(
            label.starts_with("private-split — ε = ") && label.contains("inside the guarantee"),
            "{label}"
        );
        assert!(
            !r["data_dependent_steps"]
                .as_str()
                .unwrap()
                .contains("cross-validated")
        );
    }
    assert!(!stdout.contains(OUTSIDE), "{stdout}");
    assert!(
        stdout.contains("selection: private-split — each setting's ε, δ"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(tmp.path().join("private.html")).unwrap();
    assert!(html.contains("selection: private-split — ε = 1, δ = 0"));
    assert!(!html.contains(OUTSIDE));
}

fn compare(extra: &[&str]) -> Value {
    let mut args = digits_compare("1", &["--json"]);
    args.extend_from_slice(extra);
    json(&args)
}

/// The methods' example rows of a one-point `compare --json`.
fn examples(v: &Value) -> Vec<(String, Value)> {
    v["grid"]["cells"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap().to_string(),
                r["example"].clone(),
            )
        })
        .collect()
}

#[test]
fn compare_selects_nothing_from_the_data_by_default_and_labels_cv_outside() {
    let v = compare(&[]);
    let ex = examples(&v);
    assert_eq!(ex.len(), 5);
    for (m, e) in &ex {
        assert_eq!(e["selection"]["epsilon"], 0.0);
        match m.as_str() {
            "dp-sgd" | "subsample-aggregate" => {
                assert_eq!(e["selection"]["method"], "public", "{m}: {e}");
                assert_eq!(e["selection_label"], "public — costs nothing");
                if m == "dp-sgd" {
                    assert_eq!(e["clip"], 1.0, "{e}");
                }
            }
            _ => {
                // λ by the public rule from N, d, C, ε (and B), reading no row
                assert_eq!(e["selection"]["method"], "public-rule", "{m}: {e}");
                assert_eq!(e["selection_label"], "public-rule — costs nothing");
                assert_eq!(e["lambda_source"], "public rule", "{m}: {e}");
                assert_eq!(e["data_dependent_steps"], "", "{m}: {e}");
            }
        }
    }
    assert_eq!(v["selection"]["protocol"], "public-rule");
    assert!(
        v["guarantees"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["selection"] == "public — costs nothing"
                || g["selection"] == "public-rule — costs nothing")
    );
    // `cv`: the paper's selection, labelled outside the guarantee in rows and report
    let tmp = tempfile::tempdir().unwrap();
    let report = tmp.path().join("cv.html");
    let cv = compare(&["--lambda", "cv", "--report", report.to_str().unwrap()]);
    for (m, e) in examples(&cv) {
        let want = match m.as_str() {
            "dp-sgd" | "subsample-aggregate" => "public",
            _ => "non-private-holdout",
        };
        assert_eq!(e["selection"]["method"], want, "{m}: {e}");
    }
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains(&format!("selection: {OUTSIDE}")));
    assert!(html.contains("outside the stated guarantee"));
    // `private`: the private split's record with the setting's ε, δ
    let p = compare(&["--lambda", "private"]);
    for (m, e) in examples(&p) {
        if m == "model-sensitivity" {
            assert_eq!(e["selection"]["method"], "private-split", "{e}");
            assert_eq!(
                (
                    e["selection"]["epsilon"].as_f64(),
                    e["selection"]["delta"].as_f64()
                ),
                (Some(1.0), Some(1e-5))
            );
        }
    }
}

#[test]
fn the_private_split_under_add_remove_is_refused_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x");
    let o = out.to_str().unwrap();
    assert_bad(
        &[
            "reproduce",
            "fig1a",
            "--dataset",
            "digits",
            "--neighbours",
            "add-remove",
            "--selection",
            "private",
            "--out",
            o,
        ],
        "replace-one",
    );
    assert!(!out.exists(), "nothing written before the refusal");
    for knob in ["--lambda", "--clip"] {
        assert_bad(
            &[
                "compare",
                "--dataset",
                "digits",
                "--epsilon",
                "1",
                "--budget",
                "10",
                "--neighbours",
                "add-remove",
                knob,
                "private",
            ],
            "replace-one",
        );
    }
    // a public value is fine under add-remove; a bad one names its range
    assert_bad(
        &[
            "compare",
            "--dataset",
            "digits",
            "--epsilon",
            "1",
            "--budget",
            "10",
            "--lambda",
            "-1",
        ],
        "private",
    );
}
