//! Tables through a schema: one table with numeric and categorical columns, as CSV and as
//! Parquet, through `data schema`, `compare`, `train`, `evaluate`, `predict` and `serve`
//! (raw rows with category names answered); the schema's refusals (wrong column count,
//! unknown category, a value outside its bounds under `refuse`, bad bounds, a header that does
//! not match) exit 2 naming the row and the column; clipping maps an out-of-bounds value to
//! its bound; a CSV without a schema is refused with how to write one.

mod common;

use common::{assert_bad, capture, json, ok, serve_model};
use privpred_serve::client::Client;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const SCHEMA: &str = r#"{"privpred_schema": 1, "header": true, "columns": [
 {"name": "age", "type": "numeric", "min": 0, "max": 120, "out_of_bounds": "clip"},
 {"name": "colour", "type": "categorical", "categories": ["red", "green"], "unknown": "other"},
 {"name": "income", "type": "numeric", "min": 0, "max": 200000},
 {"name": "id", "type": "ignore"},
 {"name": "outcome", "type": "label", "classes": ["no", "yes"]}]}"#;

/// One row of the table (see [`common::TableRow`]). The outcome is linear in the
/// encoded features: `yes` when age/120 + 0.35·[colour = red] > 0.5.
type Row = common::TableRow;

fn rows(n: usize) -> Vec<Row> {
    let mut state = 12345u64;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as f64 / (1u64 << 31) as f64
    };
    (0..n)
        .map(|i| {
            let age = (18.0 + 72.0 * next()).round();
            let colour = ["red", "green", "blue"][(next() * 3.0) as usize % 3];
            let income = (200000.0 * next()).round();
            let red = if colour == "red" { 0.35 } else { 0.0 };
            let y = if age / 120.0 + red > 0.5 { "yes" } else { "no" };
            (age, colour, income, i as i64, y)
        })
        .collect()
}

struct Table {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    csv: PathBuf,
    parquet: PathBuf,
    schema: PathBuf,
}

fn table() -> Table {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_path_buf();
    let r = rows(400);
    let (csv, parquet, schema) = (dir.join("t.csv"), dir.join("t.parquet"), dir.join("s.json"));
    common::write_table_csv(&csv, &r);
    common::write_table_parquet(&parquet, &r);
    std::fs::write(&schema, SCHEMA).unwrap();
    Table {
        _dir: d,
        dir,
        csv,
        parquet,
        schema,
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The same table from CSV and from Parquet trains the same non-private model (same split,
/// same features), which learns the rule; `evaluate` reads the test table through the
/// model's schema; `predict` maps raw rows (categories by name, the label column left out or
/// included) and an unknown colour falls into the declared "other" slot.
#[test]
fn a_table_from_csv_or_parquet_trains_evaluates_and_predicts_through_one_schema() {
    let t = table();
    let mut accs = Vec::new();
    for ds in [
        format!("csv:{}", s(&t.csv)),
        format!("parquet:{}", s(&t.parquet)),
    ] {
        let m = t.dir.join("m.safetensors");
        json(&[
            "train",
            "non-private",
            "--dataset",
            &ds,
            "--schema",
            s(&t.schema),
            "--lambda",
            "1e-4",
            "--seed",
            "1",
            "--out",
            s(&m),
            "--json",
        ]);
        let e = json(&["evaluate", "--model", s(&m), "--dataset", &ds, "--json"]);
        accs.push(
            e["accuracy"]["mean"]
                .as_f64()
                .unwrap_or_else(|| panic!("{e}")),
        );
        let q = t.dir.join("q.csv");
        std::fs::write(&q, "100,red,5,7\n20,green,5,7\n20,purple,5,7,no\n").unwrap();
        let out = ok(&["predict", "--model", s(&m), "--input", s(&q)]);
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            ["1", "0", "0"],
            "{ds}: {out}"
        );
    }
    assert_eq!(accs[0], accs[1], "CSV and Parquet give the same data");
    assert!(
        accs[0] > 0.9,
        "the rule is linear in the encoded features: {}",
        accs[0]
    );
}

/// The schema is recorded in the model (covered by its signature): `serve` answers raw rows
/// with category names as `predict` does, reports the table's width, and refuses a row the schema refuses
/// (HTTP 422, nothing spent), naming the column.
#[test]
fn serve_answers_raw_table_rows_through_the_stored_schema() {
    let t = table();
    let m = t.dir.join("m.safetensors");
    ok(&[
        "train",
        "loss-perturbation",
        "--epsilon",
        "10",
        "--dataset",
        &format!("csv:{}", s(&t.csv)),
        "--schema",
        s(&t.schema),
        "--lambda",
        "1e-3",
        "--out",
        s(&m),
    ]);
    // the table's SHA-256 is in its provenance (the results of `compare` name it), but a
    // private model never carries a hash of the caller's own file
    let sha = privpred_data::fsutil::sha256_file(&t.csv).unwrap();
    let bytes = std::fs::read(&m).unwrap();
    assert!(
        !bytes.windows(sha.len()).any(|w| w == sha.as_bytes()),
        "the model carries the table's hash"
    );
    let q = t.dir.join("q.csv");
    std::fs::write(&q, "100,red,5,1\n20,green,5,2\n").unwrap();
    let want: Vec<u64> = ok(&["predict", "--model", s(&m), "--input", s(&q)])
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let srv = serve_model(&m, &[]);
    let mut c = Client::new(srv.addr, None);
    let info = c.get("/v1/model").unwrap().json();
    assert_eq!(info["input_dim"], 4, "{info}");
    let r = c
        .post_json(
            "/v1/predict",
            &json!({"inputs": [[100, "red", 5, 1], [20, "green", 5, 2]]}).to_string(),
        )
        .unwrap();
    let v: Value = r.json();
    let labels: Vec<u64> = v["answers"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|a| a["label"].as_u64().unwrap())
        .collect();
    assert_eq!(labels, want, "{v}");
    let r = c
        .post_json(
            "/v1/predict",
            &json!({"inputs": [[20, "green", -5, 1]]}).to_string(),
        )
        .unwrap();
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body.contains("income"), "{}", r.body);
    // an edited schema in the artifact is refused on load
    let bytes = std::fs::read(&m).unwrap();
    let at = bytes.windows(6).position(|w| w == b"200000").unwrap();
    let mut edited = bytes.clone();
    edited[at] = b'9';
    let m2 = t.dir.join("edited.safetensors");
    std::fs::write(&m2, edited).unwrap();
    assert_bad(
        &["predict", "--model", s(&m2), "--input", s(&t.csv)],
        "signature",
    );
}

/// `compare` on the table reads it through the schema and speaks of the user's task: its
/// progress lines name methods and grid points, never the study's figure ids.
#[test]
fn compare_runs_on_a_table_and_names_no_figures() {
    let t = table();
    for ds in [
        format!("csv:{}", s(&t.csv)),
        format!("parquet:{}", s(&t.parquet)),
    ] {
        let (rc, out, err) = capture(&[
            "compare",
            "--dataset",
            &ds,
            "--schema",
            s(&t.schema),
            "--epsilon",
            "1,10",
            "--budget",
            "10",
            "--repetitions",
            "1",
            "--teachers",
            "8",
            "--quick",
        ]);
        assert_eq!(rc, 0, "{err}");
        assert!(out.contains("loss-perturbation"), "{out}");
        for text in [&out, &err] {
            assert!(!text.contains("fig2") && !text.contains("Fig2"), "{text}");
        }
    }
}

/// Every schema refusal exits 2 naming what is wrong, the column and (for data) the row.
#[test]
fn schema_errors_name_the_row_and_the_column() {
    let t = table();
    let out = t.dir.join("m.safetensors");
    let train = |csv: &Path, schema: &Path, needle: &str| {
        assert_bad(
            &[
                "train",
                "non-private",
                "--dataset",
                &format!("csv:{}", s(csv)),
                "--schema",
                s(schema),
                "--out",
                s(&out),
            ],
            needle,
        );
        assert!(!out.exists());
    };
    let bad = t.dir.join("bad.csv");
    let with = |body: &str| {
        std::fs::write(
            &bad,
            format!("age,colour,income,id,outcome\n30,red,5,1,no\n{body}\n"),
        )
        .unwrap();
        bad.clone()
    };
    // wrong column count
    train(
        &with("30,red,5,no"),
        &t.schema,
        "data row 2 (line 3): 4 columns, the schema declares 5",
    );
    // an unknown category without an "other" slot
    let strict = t.dir.join("strict.json");
    std::fs::write(&strict, SCHEMA.replace(r#", "unknown": "other""#, "")).unwrap();
    train(
        &with("30,blue,5,2,no"),
        &strict,
        "data row 2 (line 3): column `colour`: unknown category `blue`",
    );
    // out of bounds under refuse (income declares no policy: refuse)
    train(
        &with("30,red,-1,2,no"),
        &t.schema,
        "data row 2 (line 3): column `income`: value -1 outside the declared bounds [0, 200000]",
    );
    // a label not among the classes
    train(
        &with("30,red,5,2,maybe"),
        &t.schema,
        "column `outcome`: label `maybe`",
    );
    // a header that does not match
    std::fs::write(&bad, "age,color,income,id,outcome\n30,red,5,1,no\n").unwrap();
    train(
        &bad,
        &t.schema,
        "column 1 of the header is `color`, the schema declares `colour`",
    );
    // bad bounds, a missing label, a misspelt field
    for (edit, needle) in [
        (
            SCHEMA.replace(r#""max": 120"#, r#""max": -1"#),
            "bounds [0, -1] of column `age`",
        ),
        (
            SCHEMA.replace(
                r#""type": "label", "classes": ["no", "yes"]"#,
                r#""type": "ignore""#,
            ),
            "0 label columns",
        ),
        (
            SCHEMA.replace("out_of_bounds", "out_of_bound"),
            "unknown field `out_of_bound`",
        ),
    ] {
        let p = t.dir.join("edited.json");
        std::fs::write(&p, edit).unwrap();
        train(&t.csv, &p, needle);
    }
    assert_bad(
        &[
            "train",
            "non-private",
            "--dataset",
            &format!("csv:{}", s(&t.csv)),
            "--schema",
            "/nonexistent.json",
            "--out",
            s(&out),
        ],
        "--schema",
    );
}

/// A value outside its bounds under `clip` is mapped exactly as the bound itself: the
/// answers (label and scores) for age 1e9 and age 120 agree.
#[test]
fn out_of_bounds_values_are_clipped_to_the_bound() {
    let t = table();
    let m = t.dir.join("m.safetensors");
    ok(&[
        "train",
        "non-private",
        "--dataset",
        &format!("csv:{}", s(&t.csv)),
        "--schema",
        s(&t.schema),
        "--lambda",
        "1e-4",
        "--out",
        s(&m),
    ]);
    let q = t.dir.join("q.csv");
    std::fs::write(&q, "1e9,green,5,1\n120,green,5,1\n-3,red,5,1\n0,red,5,1\n").unwrap();
    let v = json(&["predict", "--model", s(&m), "--input", s(&q), "--json"]);
    let a = v["answers"].as_array().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(a[0], a[1], "{v}");
    assert_eq!(a[2], a[3], "{v}");
    // training data outside the bounds is clipped too (age is `clip`)
    let wide = t.dir.join("wide.csv");
    let mut r = rows(100);
    r[0].0 = 500.0;
    common::write_table_csv(&wide, &r);
    ok(&[
        "train",
        "non-private",
        "--dataset",
        &format!("csv:{}", s(&wide)),
        "--schema",
        s(&t.schema),
        "--out",
        s(&m),
    ]);
}

/// A CSV without a schema is refused with how to write one; `data schema` drafts one (with
/// the warning that it is read from the data) that trains as it stands.
#[test]
fn a_table_without_a_schema_is_refused_and_a_drafted_one_works() {
    let t = table();
    let out = t.dir.join("m.safetensors");
    let ds = format!("csv:{}", s(&t.csv));
    assert_bad(
        &["train", "non-private", "--dataset", &ds, "--out", s(&out)],
        "--schema FILE",
    );
    assert_bad(
        &["train", "non-private", "--dataset", &ds, "--out", s(&out)],
        "privpred data schema",
    );
    let numbers = t.dir.join("n.csv");
    std::fs::write(&numbers, "1,2,0\n3,4,1\n5,6,0\n7,8,1\n9,10,0\n11,12,1\n").unwrap();
    assert_bad(
        &[
            "train",
            "non-private",
            "--dataset",
            &format!("csv:{}", s(&numbers)),
            "--out",
            s(&out),
        ],
        "csv-pixels:PATH",
    );
    assert_bad(
        &[
            "train",
            "non-private",
            "--dataset",
            &format!("parquet:{}", s(&t.parquet)),
            "--out",
            s(&out),
        ],
        "--schema FILE",
    );
    for file in [&t.csv, &t.parquet] {
        let (rc, drafted, err) = capture(&["data", "schema", s(file), "--label", "outcome"]);
        assert_eq!(rc, 0, "{err}");
        assert!(err.contains("NOT private"), "{err}");
        let v: Value = serde_json::from_str(&drafted).unwrap();
        assert_eq!(
            v["columns"][1]["categories"],
            json!(["blue", "green", "red"]),
            "{v}"
        );
        assert_eq!(v["columns"][4]["classes"], json!(["no", "yes"]), "{v}");
        let p = t.dir.join("drafted.json");
        std::fs::write(&p, drafted).unwrap();
        ok(&[
            "train",
            "non-private",
            "--dataset",
            &ds,
            "--schema",
            s(&p),
            "--out",
            s(&out),
        ]);
    }
}

/// scikit-learn's breast-cancer table, fetched by `privpred data fetch breast-cancer`, is read
/// through `examples/breast-cancer.schema.json` by default and trains a good non-private
/// model; skipped (one `privpred-test-skip:` line) when the table is absent.
#[test]
fn breast_cancer_is_read_through_its_example_schema() {
    let opts = privpred_data::LoadOptions {
        fetch: false,
        ..Default::default()
    };
    for (name, file) in [
        ("breast-cancer", "breast_cancer.csv"),
        ("wine", "wine_data.csv"),
    ] {
        let found = privpred_data::read::candidate_dirs(name, &opts)
            .into_iter()
            .map(|(d, _)| d.join(file))
            .find(|p| p.is_file());
        let test = format!("cli_tables::breast_cancer_is_read_through_its_example_schema ({name})");
        if privpred_data::testdata::or_skip(
            found,
            &test,
            &format!("the {name} table (`privpred data fetch {name}`)"),
        )
        .is_none()
        {
            continue;
        }
        let t = tempfile::tempdir().unwrap();
        let m = t.path().join("m.safetensors");
        let j = json(&[
            "train",
            "non-private",
            "--dataset",
            name,
            "--seed",
            "0",
            "--out",
            s(&m),
            "--json",
        ]);
        assert!(j["n"].as_u64().is_some(), "{j}");
        let e = json(&["evaluate", "--model", s(&m), "--dataset", name, "--json"]);
        let acc = e["accuracy"]["mean"].as_f64().unwrap();
        assert!(acc > 0.9, "{name}: {acc}");
    }
}

/// Fair's affairs survey, fetched by `privpred data fetch fair` (statsmodels' copy, label
/// `affairs > 0`), is read through `examples/fair.schema.json` by default — six numeric
/// columns and two categorical ones, 18 features — and a non-private model beats the majority
/// class of the test split (68.3 %); a private one (loss perturbation, ε = 1) trains and
/// evaluates on it. Skipped (one `privpred-test-skip:` line) when the table is absent.
#[test]
fn fair_is_read_through_its_example_schema() {
    let opts = privpred_data::LoadOptions {
        fetch: false,
        ..Default::default()
    };
    let found = privpred_data::read::candidate_dirs("fair", &opts)
        .into_iter()
        .map(|(d, _)| d.join("fair.csv"))
        .find(|p| p.is_file());
    if privpred_data::testdata::or_skip(
        found,
        "cli_tables::fair_is_read_through_its_example_schema",
        "the fair table (`privpred data fetch fair`)",
    )
    .is_none()
    {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let m = t.path().join("m.safetensors");
    let train = |method: &str, extra: &[&str]| {
        let mut a = vec!["train", method, "--dataset", "fair", "--seed", "0"];
        a.extend_from_slice(extra);
        a.extend_from_slice(&["--out", s(&m), "--json"]);
        json(&a)
    };
    let j = train("non-private", &[]);
    assert_eq!(j["n"].as_u64(), Some(5093), "{j}");
    let e = json(&["evaluate", "--model", s(&m), "--dataset", "fair", "--json"]);
    assert_eq!(e["input_dim"].as_u64(), Some(18), "{e}");
    assert_eq!(e["test_examples"].as_u64(), Some(1273), "{e}");
    let acc = e["accuracy"]["mean"].as_f64().unwrap();
    assert!(acc > 0.70, "non-private accuracy on fair: {acc}");
    train("loss-perturbation", &["--epsilon", "1"]);
    let e = json(&["evaluate", "--model", s(&m), "--dataset", "fair", "--json"]);
    assert_eq!(e["epsilon"].as_f64(), Some(1.0), "{e}");
    let acc = e["accuracy"]["mean"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&acc), "{e}");
}
