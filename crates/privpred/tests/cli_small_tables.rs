//! `compare` on small tables: the defaults follow the public N (T = clamp(⌊√N/2⌋, 1, 256)
//! teachers, DP-SGD's batch clamp(⌊√N⌋, 1, 256)), so every method runs; a T or batch given
//! that does not fit is listed as not applicable with the reason and the flag that fits, never
//! an error; and the result is the same for the same `--seed` (an experiment), wherever the
//! file lies, different for another seed.

mod common;

use common::{capture, json};
use serde_json::Value;
use std::path::Path;

/// A table of `n` rows, two numeric features and a categorical one, with its schema.
fn small_table(dir: &Path, n: usize) -> (String, String) {
    let mut csv = String::from("x,z,colour,y\n");
    for i in 0..n {
        let x = (i * 37 % 100) as f64;
        let z = (i * 61 % 50) as f64;
        let colour = ["red", "green", "blue"][i % 3];
        let y = if x + if colour == "red" { 30.0 } else { 0.0 } > 55.0 {
            "b"
        } else {
            "a"
        };
        csv.push_str(&format!("{x},{z},{colour},{y}\n"));
    }
    let schema = r#"{"privpred_schema": 1, "header": true, "columns": [
 {"name": "x", "type": "numeric", "min": 0, "max": 100},
 {"name": "z", "type": "numeric", "min": 0, "max": 50},
 {"name": "colour", "type": "categorical", "categories": ["red", "green", "blue"]},
 {"name": "y", "type": "label", "classes": ["a", "b"]}]}"#;
    let (c, s) = (dir.join("t.csv"), dir.join("t.schema.json"));
    std::fs::write(&c, csv).unwrap();
    std::fs::write(&s, schema).unwrap();
    (
        format!("csv:{}", c.to_str().unwrap()),
        s.to_str().unwrap().to_string(),
    )
}

/// The comparison's JSON without the wall and CPU times (which vary run to run).
fn without_times(mut v: Value) -> Value {
    v["grid"]["timing"] = Value::Null;
    v["provenance"]["command"] = Value::Null;
    v
}

fn skipped(v: &Value) -> Vec<(String, String)> {
    v["grid"]["cells"][0]["skipped"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|s| {
            (
                s[0].as_str().unwrap_or_default().to_string(),
                s[1].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn ran(v: &Value) -> Vec<String> {
    v["grid"]["cells"][0]["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|r| r["method"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn compare_on_a_small_table_lists_what_does_not_fit_and_is_deterministic() {
    let d = tempfile::tempdir().unwrap();
    let (ds, schema) = small_table(d.path(), 120);
    let base = [
        "compare",
        "--dataset",
        &ds,
        "--schema",
        &schema,
        "--epsilon",
        "1,10",
        "--delta",
        "1e-5",
        "--budget",
        "10,100",
        "--repetitions",
        "2",
    ];
    // the defaults follow N = 96 training rows: T = 16, batch 9, and every method runs
    let mut defaults = base.to_vec();
    defaults.extend(["--seed", "3", "--json"]);
    let v = json(&defaults);
    assert_eq!(ran(&v).len(), 5, "{v}");
    assert!(skipped(&v).is_empty(), "{v}");
    let saa = v["grid"]["cells"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["method"] == "subsample-aggregate")
        .cloned()
        .unwrap();
    assert_eq!(saa["example"]["teachers"], 16, "{saa}");
    assert!(
        v["provenance"]["selection"]
            .as_str()
            .unwrap_or_default()
            .contains("public rule"),
        "{v}"
    );
    // T = 256 > N and a batch of 256 > the 90 % part, given: listed, with why
    let mut args = base.to_vec();
    args.extend([
        "--teachers",
        "256",
        "--dpsgd-batch-size",
        "256",
        "--seed",
        "3",
    ]);
    let (rc, out, err) = capture(&args);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("model-sensitivity"), "{out}");
    assert!(
        out.contains("subsample-aggregate: T = 256 teachers need at least one training row each"),
        "{out}"
    );
    assert!(out.contains("pass --teachers"), "{out}");
    assert!(out.contains("pass --dpsgd-batch-size"), "{out}");
    args.push("--json");
    let v = json(&args);
    let sk = skipped(&v);
    let names: Vec<&str> = sk.iter().map(|(m, _)| m.as_str()).collect();
    assert!(
        names.contains(&"dp-sgd") && names.contains(&"subsample-aggregate"),
        "{sk:?}"
    );
    // smaller T and batch: every method runs
    let mut small = base.to_vec();
    small.extend([
        "--teachers",
        "8",
        "--dpsgd-batch-size",
        "16",
        "--seed",
        "3",
        "--json",
    ]);
    let a = json(&small);
    assert_eq!(ran(&a).len(), 5, "{a}");
    assert!(skipped(&a).is_empty(), "{a}");
    // the same seed gives the same comparison; another seed other draws
    let b = json(&small);
    assert_eq!(without_times(a.clone()), without_times(b));
    // the same data at another path (another name too) gives the same draws: they are
    // seeded from the data's checksum, not from the path's text
    let moved = d.path().join("elsewhere");
    std::fs::create_dir(&moved).unwrap();
    let copy = moved.join("renamed.csv");
    std::fs::copy(d.path().join("t.csv"), &copy).unwrap();
    let copy_spec = format!("csv:{}", copy.to_str().unwrap());
    let mut elsewhere = small.clone();
    elsewhere[2] = &copy_spec;
    let e = json(&elsewhere);
    assert_eq!(
        without_times(a.clone())["grid"]["cells"],
        without_times(e)["grid"]["cells"]
    );
    let n = small.len();
    small[n - 2] = "4";
    let c = json(&small);
    assert_ne!(
        without_times(a)["grid"]["cells"],
        without_times(c)["grid"]["cells"]
    );
}

/// scikit-learn's wine table (142 training rows) through its example schema: at the defaults
/// every method runs; T = 256 and a batch of 256 given are listed as not applicable, with the
/// flags that fit; skipped (one `privpred-test-skip:` line) when the table is absent.
#[test]
fn compare_on_wine_handles_its_142_training_rows() {
    let opts = privpred_data::LoadOptions {
        fetch: false,
        ..Default::default()
    };
    let found = privpred_data::read::candidate_dirs("wine", &opts)
        .into_iter()
        .map(|(d, _)| d.join("wine_data.csv"))
        .find(|p| p.is_file());
    if privpred_data::testdata::or_skip(
        found,
        "cli_small_tables::compare_on_wine_handles_its_142_training_rows",
        "the wine table (`privpred data fetch wine`)",
    )
    .is_none()
    {
        return;
    }
    let args = [
        "compare",
        "--dataset",
        "wine",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--budget",
        "100",
        "--repetitions",
        "2",
        "--seed",
        "1",
        "--json",
    ];
    let v = json(&args);
    assert_eq!(ran(&v).len(), 5, "{v}");
    let mut too_many = args.to_vec();
    too_many.extend(["--teachers", "256", "--dpsgd-batch-size", "256"]);
    let v = json(&too_many);
    let sk = skipped(&v);
    let why = |m: &str| {
        sk.iter()
            .find(|(n, _)| n == m)
            .map(|(_, w)| w.clone())
            .unwrap_or_else(|| panic!("{m} not listed: {sk:?}"))
    };
    assert!(why("subsample-aggregate").contains("N = 142 rows: pass --teachers 142 or fewer"));
    assert!(why("dp-sgd").contains("pass --dpsgd-batch-size 128 or fewer"));
    assert_eq!(ran(&v).len(), 3, "{v}");
    assert_eq!(without_times(v), without_times(json(&too_many)));
}

/// `--clip private` cuts the training set into the selection's parts: on 300 rows a batch of
/// 8 does not fit them, and DP-SGD is listed as not applicable, naming the parts, while the
/// other methods run.
#[test]
fn compare_clip_private_on_a_small_table_lists_dp_sgd_as_not_applicable() {
    let d = tempfile::tempdir().unwrap();
    let (ds, schema) = small_table(d.path(), 300);
    let v = json(&[
        "compare",
        "--dataset",
        &ds,
        "--schema",
        &schema,
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--budget",
        "10",
        "--teachers",
        "4",
        "--dpsgd-batch-size",
        "8",
        "--clip",
        "private",
        "--repetitions",
        "1",
        "--json",
    ]);
    let sk = skipped(&v);
    let dp = sk.iter().find(|(m, _)| m == "dp-sgd");
    assert!(
        dp.is_some_and(
            |(_, why)| why.contains("private selection") && !why.contains("training-set size")
        ),
        "{sk:?}"
    );
    assert!(ran(&v).contains(&"model-sensitivity".to_string()), "{v}");
}
