//! `privpred data schema FILE --epsilon E --delta D`: the private schema draft at the CLI. It
//! is charged to the data's odometer before anything drafted is printed, records its cost in
//! the schema, trains through `train --schema`, and refuses a bad flag with exit code 2 before
//! any charge.

mod common;

use common::{capture, ok};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A table of 6000 rows: age 18..=77, income, a region (three frequent values and one held by
/// a single row) and an outcome that follows age.
fn table(dir: &Path) -> PathBuf {
    let mut t = String::from("age,income,region,outcome\n");
    for i in 0..6000u32 {
        let age = 18 + i % 60;
        let income = 20_000 + (i * 7919) % 60_000;
        let region = if i == 0 {
            "atlantis"
        } else {
            ["north", "south", "east"][(i % 3) as usize]
        };
        let outcome = if age > 47 { "yes" } else { "no" };
        t.push_str(&format!("{age},{income},{region},{outcome}\n"));
    }
    let p = dir.join("t.csv");
    std::fs::write(&p, t).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn limit(odo: &str, key: &str, eps: &str) {
    ok(&[
        "odometer",
        "limit",
        "--odometer",
        odo,
        "--key",
        key,
        "--epsilon",
        eps,
        "--delta",
        "1e-4",
    ]);
}

fn spent(odo: &str, key: &str) -> Value {
    let out = ok(&[
        "odometer",
        "show",
        "--odometer",
        odo,
        "--key",
        key,
        "--json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    v["datasets"][0].clone()
}

fn draft(csv: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut a = vec![
        "data",
        "schema",
        s(csv),
        "--label",
        "outcome",
        "--categorical",
        "region",
    ];
    a.extend_from_slice(extra);
    capture(&a)
}

/// `privpred train model-sensitivity` (ε = 1, λ = 0.01) on `csv` through `schema`, writing
/// `out`, with `extra` flags.
fn fit(csv: &Path, schema: &Path, out: &Path, extra: &[&str]) -> (i32, String, String) {
    let ds = format!("csv:{}", s(csv));
    let mut t = vec![
        "train",
        "model-sensitivity",
        "--dataset",
        &ds,
        "--schema",
        s(schema),
        "--epsilon",
        "1",
        "--lambda",
        "1e-2",
        "--out",
        s(out),
    ];
    t.extend_from_slice(extra);
    capture(&t)
}

#[test]
fn a_private_draft_is_charged_recorded_and_trains() {
    let dir = tempfile::tempdir().unwrap();
    let csv = table(dir.path());
    let odo = dir.path().join("odo.sqlite");
    let odo = s(&odo);
    limit(odo, "survey", "30");
    let charge = ["--odometer", odo, "--odometer-key", "survey"];
    let mut args = vec!["--epsilon", "20", "--delta", "1e-6"];
    args.extend_from_slice(&charge);
    let (c, out, err) = draft(&csv, &args);
    assert_eq!(c, 0, "{err}");
    assert!(
        !err.contains("WARNING") && !err.contains("NOT private"),
        "{err}"
    );
    assert!(
        err.contains("this draft charged epsilon = 20, delta = 1e-6")
            && err.contains("drafted privately")
            && err.contains("replace-one"),
        "{err}"
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    let d = &v["drafted"];
    assert_eq!(d["epsilon"], 20.0);
    assert_eq!(d["delta"], 1e-6);
    assert_eq!(d["relation"], "replace-one");
    assert_eq!(d["composition"], "basic");
    assert_eq!(d["quantiles"], serde_json::json!([0.01, 0.99]));
    assert!(d.get("seed").is_none(), "{d}");
    let cols = v["columns"].as_array().unwrap();
    let total: f64 = d["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["epsilon"].as_f64().unwrap())
        .sum();
    assert!((total - 20.0).abs() < 1e-9, "{d}");
    // bounds are round numbers around the data, clipped outside; the single-row region is not
    // released and falls into the other slot
    let (lo, hi) = (
        cols[0]["min"].as_f64().unwrap(),
        cols[0]["max"].as_f64().unwrap(),
    );
    assert!(
        (10.0..=20.0).contains(&lo) && (60.0..=100.0).contains(&hi),
        "{lo} {hi}"
    );
    assert_eq!(cols[0]["out_of_bounds"], "clip");
    assert_eq!(
        cols[2]["categories"],
        serde_json::json!(["east", "north", "south"])
    );
    assert_eq!(cols[2]["unknown"], "other");
    assert_eq!(cols[3]["classes"], serde_json::json!(["no", "yes"]));
    let rec = spent(odo, "survey");
    assert_eq!(rec["spent"]["epsilon"], 20.0, "{rec}");
    assert_eq!(rec["fits"][0]["method"], "schema-draft", "{rec}");
    assert_eq!(rec["fits"][0]["state"], "released", "{rec}");

    // the drafted schema trains, and the fit is charged to the same key
    let schema = dir.path().join("s.json");
    std::fs::write(&schema, &out).unwrap();
    let m = dir.path().join("m.safetensors");
    let (c, _, err) = fit(&csv, &schema, &m, &charge);
    assert_eq!(c, 0, "{err}");
    assert_eq!(spent(odo, "survey")["spent"]["epsilon"], 21.0);

    // a second draft would pass the limit: refused, nothing printed, nothing charged
    let (c, out, err) = draft(&csv, &args);
    assert_eq!(c, 2, "{err}");
    assert!(out.is_empty() && err.contains("past the limit"), "{err}");
    assert_eq!(spent(odo, "survey")["spent"]["epsilon"], 21.0);
}

#[test]
fn a_fit_on_a_private_draft_defaults_to_the_drafts_odometer_key() {
    let dir = tempfile::tempdir().unwrap();
    let csv = table(dir.path());
    let odo = dir.path().join("odo.sqlite");
    let odo = s(&odo);
    limit(odo, "survey", "30");
    let (c, out, err) = draft(
        &csv,
        &[
            "--epsilon",
            "20",
            "--delta",
            "1e-6",
            "--odometer",
            odo,
            "--odometer-key",
            "survey",
        ],
    );
    assert_eq!(c, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["drafted"]["odometer_key"], "survey", "{v}");
    let schema = dir.path().join("s.json");
    std::fs::write(&schema, &out).unwrap();
    let m = dir.path().join("m.safetensors");
    let fit = |extra: &[&str]| fit(&csv, &schema, &m, &[&["--odometer", odo], extra].concat());
    // no --odometer-key: the fit is charged to the draft's key, one budget for both
    let (c, _, err) = fit(&[]);
    assert_eq!(c, 0, "{err}");
    assert!(err.contains("dataset survey"), "{err}");
    let rec = spent(odo, "survey");
    assert_eq!(rec["spent"]["epsilon"], 21.0, "{rec}");
    assert_eq!(rec["fits"][1]["method"], "model-sensitivity", "{rec}");
    // a key given explicitly still wins (it needs its own limit)
    limit(odo, "other", "5");
    let (c, _, err) = fit(&["--odometer-key", "other"]);
    assert_eq!(c, 0, "{err}");
    assert_eq!(spent(odo, "other")["spent"]["epsilon"], 1.0);
    assert_eq!(spent(odo, "survey")["spent"]["epsilon"], 21.0);

    // a draft without an odometer records no key
    let (c, out, err) = draft(&csv, &["--epsilon", "20", "--delta", "1e-6", "--seed", "3"]);
    assert_eq!(c, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["drafted"].get("odometer_key").is_none(), "{v}");
}

#[test]
fn bad_flags_exit_2_and_charge_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let csv = table(dir.path());
    let odo = dir.path().join("odo.sqlite");
    let odo = s(&odo);
    limit(odo, "survey", "30");
    let charge = ["--odometer", odo, "--odometer-key", "survey"];
    for (flags, needle) in [
        (vec!["--epsilon", "0", "--delta", "1e-6"], "--epsilon = 0"),
        (
            vec!["--epsilon", "-1", "--delta", "1e-6"],
            "must be a finite number > 0",
        ),
        (vec!["--epsilon", "1"], "--delta"),
        (vec!["--epsilon", "1", "--delta", "1"], "must be in (0, 1)"),
        (
            vec!["--epsilon", "1", "--delta", "1e-6", "--quantile", "0.7"],
            "--quantile = 0.7",
        ),
        (
            vec!["--epsilon", "1", "--delta", "1e-6", "--ignore", "outcome"],
            "--ignore = outcome",
        ),
        (
            vec!["--epsilon", "1", "--delta", "1e-6", "--categorical", "nope"],
            "--categorical = nope",
        ),
        (
            vec!["--epsilon", "1", "--delta", "1e-6", "--seed", "3"],
            "--seed 3 is refused",
        ),
    ] {
        let mut a = flags.clone();
        a.extend_from_slice(&charge);
        let (c, out, err) = draft(&csv, &a);
        assert_eq!(c, 2, "{flags:?}: {err}");
        assert!(err.contains(needle), "{flags:?}: {err}");
        assert!(
            out.is_empty() && !err.contains("panicked"),
            "{flags:?}: {out}{err}"
        );
    }
    // --odometer without a key, and flags of the private draft without --epsilon
    for (a, needle) in [
        (
            vec!["--epsilon", "1", "--delta", "1e-6", "--odometer", odo],
            "--odometer-key",
        ),
        (vec!["--delta", "1e-6"], "--epsilon"),
        (vec!["--odometer", odo], "--epsilon"),
    ] {
        let (c, _, err) = draft(&csv, &a);
        assert_eq!(c, 2, "{a:?}: {err}");
        assert!(err.contains(needle), "{a:?}: {err}");
    }
    let rec = spent(odo, "survey");
    assert_eq!(rec["spent"]["fits"], 0, "{rec}");
    assert_eq!(rec["spent"]["epsilon"], 0.0, "{rec}");
    // a key without a limit: refused by the odometer, nothing printed
    let (c, out, err) = draft(
        &csv,
        &[
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--odometer",
            odo,
            "--odometer-key",
            "other",
        ],
    );
    assert_eq!(c, 2, "{err}");
    assert!(out.is_empty() && err.contains("no limit"), "{err}");
}

#[test]
fn a_seeded_draft_is_an_experiment_and_the_plain_draft_keeps_its_warning() {
    let dir = tempfile::tempdir().unwrap();
    let csv = table(dir.path());
    let a = ["--epsilon", "5", "--delta", "1e-6", "--seed", "7"];
    let (c, out, err) = draft(&csv, &a);
    assert_eq!(c, 0, "{err}");
    assert!(err.contains("not a release"), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["drafted"]["seed"], 7);
    assert_eq!(draft(&csv, &a).1, out, "the seed regenerates the draft");
    // the draft without --epsilon reads the data without noise and says so
    let (c, out, err) = capture(&["data", "schema", s(&csv)]);
    assert_eq!(c, 0, "{err}");
    assert!(err.contains("NOT private"), "{err}");
    assert!(!out.contains("drafted"), "{out}");
    // a first row of numbers is data, not a header: refused unless --no-header
    let body = std::fs::read_to_string(&csv).unwrap();
    let headless = dir.path().join("h.csv");
    std::fs::write(
        &headless,
        body.lines().skip(1).collect::<Vec<_>>().join("\n"),
    )
    .unwrap();
    let (c, _, err) = capture(&[
        "data",
        "schema",
        s(&headless),
        "--epsilon",
        "5",
        "--delta",
        "1e-6",
    ]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("--no-header"), "{err}");
    let (c, out, err) = capture(&[
        "data",
        "schema",
        s(&headless),
        "--epsilon",
        "5",
        "--delta",
        "1e-6",
        "--no-header",
        "--categorical",
        "column_2",
    ]);
    assert_eq!(c, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["header"], false);
    assert_eq!(v["columns"][3]["name"], "column_3");
}
