//! Bad input near the edges: corrupt Parquet files (the parquet crate's panics never reach
//! the user), parameters next to the ends of their ranges (δ next to 1, λ = 1e50, B = 2⁶⁴ −
//! 1), flags a method would ignore, classes that match each other, a schema that is not the
//! model's, spend marks and ledgers that are not what they should be, a query file past the
//! row limit, a null cell, the ledger's file holding every spend once `predict` exits, and
//! the messages of a missing cache and of out-of-range bounds. Each is refused with exit 2
//! naming the value and what is valid, quickly, or gives the documented result.

mod common;

use common::{assert_bad, capture, capture_env, ok, pixel_set};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// The fuzz crate's Parquet corpus and regressions: valid files and the corrupt ones on which
/// the parquet crate panics.
fn parquet_inputs() -> (Vec<PathBuf>, Vec<PathBuf>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../privpred-fuzz");
    let list = |d: &str| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(root.join(d).join("parquet"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    };
    (list("corpus"), list("regressions"))
}

const PARQUET_SCHEMA: &str = r#"{"privpred_schema": 1, "header": true, "columns": [
 {"name": "x", "type": "numeric", "min": 0, "max": 100},
 {"name": "colour", "type": "categorical", "categories": ["red", "green", "blue"]},
 {"name": "z", "type": "numeric", "min": 0, "max": 1},
 {"name": "label", "type": "label", "classes": ["0", "1"]}]}"#;

#[test]
fn corrupt_parquet_files_are_refused_by_every_command_without_a_panic() {
    let d = tempfile::tempdir().unwrap();
    let schema = d.path().join("s.json");
    std::fs::write(&schema, PARQUET_SCHEMA).unwrap();
    let schema = s(&schema);
    let (corpus, bad) = parquet_inputs();
    assert!(
        bad.len() >= 3,
        "the panicking files are checked in: {bad:?}"
    );
    // a model trained on a valid file, for evaluate
    let good = corpus
        .iter()
        .find(|p| p.ends_with("snappy.parquet"))
        .unwrap();
    let m = s(&d.path().join("m.safetensors"));
    let gds = format!("parquet:{}", s(good));
    ok(&[
        "train",
        "non-private",
        "--dataset",
        &gds,
        "--schema",
        &schema,
        "--lambda",
        "0.01",
        "--out",
        &m,
    ]);
    let out = s(&d.path().join("o.safetensors"));
    for f in &bad {
        let ds = format!("parquet:{}", s(f));
        let fs = s(f);
        for args in [
            vec!["data", "info", &ds, "--schema", &schema, "--no-fetch"],
            vec!["data", "schema", &fs],
            vec![
                "train",
                "non-private",
                "--dataset",
                &ds,
                "--schema",
                &schema,
                "--lambda",
                "0.01",
                "--out",
                &out,
            ],
            vec!["evaluate", "--model", &m, "--dataset", &ds],
            vec![
                "compare",
                "--dataset",
                &ds,
                "--schema",
                &schema,
                "--epsilon",
                "1",
                "--budget",
                "10",
                "--repetitions",
                "1",
            ],
        ] {
            let (rc, err) = common::bounded(&args, 60).unwrap_or_else(|| panic!("{args:?} hung"));
            assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
            assert_eq!(rc, 2, "{args:?}: {err}");
            assert!(err.contains("Parquet"), "{args:?}: {err}");
        }
    }
}

#[test]
fn delta_next_to_one_for_dp_sgd_is_answered_without_a_hang() {
    let d = tempfile::tempdir().unwrap();
    let ds = pixel_set(d.path(), 60, 3, true);
    let out = s(&d.path().join("o.safetensors"));
    for args in [
        vec![
            "calibrate",
            "dp-sgd",
            "--epsilon",
            "1",
            "--delta",
            "0.999999999",
            "--n",
            "1000",
            "--batch-size",
            "10",
            "--epochs",
            "1",
        ],
        vec![
            "train",
            "dp-sgd",
            "--dataset",
            &ds,
            "--classes",
            "3",
            "--epsilon",
            "1",
            "--delta",
            "0.999999999",
            "--batch-size",
            "10",
            "--epochs",
            "1",
            "--out",
            &out,
        ],
    ] {
        // δ ∈ (0, 1) is DP-SGD's range: answered (σ searched no lower than its floor)
        let (rc, err) = common::bounded(&args, 60).unwrap_or_else(|| panic!("{args:?} hung"));
        assert_eq!(rc, 0, "{args:?}: {err}");
    }
}

#[test]
fn flags_a_method_would_ignore_are_refused_by_name() {
    let d = tempfile::tempdir().unwrap();
    let ds = pixel_set(d.path(), 60, 3, true);
    let out = s(&d.path().join("o.safetensors"));
    let schema = d.path().join("s.json");
    std::fs::write(&schema, PARQUET_SCHEMA).unwrap();
    let schema = s(&schema);
    for (args, needle) in [
        (
            vec![
                "train",
                "non-private",
                "--dataset",
                &ds,
                "--schema",
                &schema,
            ],
            "--schema",
        ),
        (
            vec![
                "train",
                "dp-sgd",
                "--dataset",
                &ds,
                "--classes",
                "3",
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
                "--lambda",
                "private",
            ],
            "--lambda does not apply to dp-sgd",
        ),
        (
            vec![
                "train",
                "dp-sgd",
                "--dataset",
                &ds,
                "--classes",
                "3",
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
                "--lambda",
                "cv",
            ],
            "--lambda does not apply to dp-sgd",
        ),
        (
            vec![
                "train",
                "model-sensitivity",
                "--dataset",
                &ds,
                "--classes",
                "3",
                "--epsilon",
                "1",
                "--clip",
                "private",
            ],
            "--clip does not apply to model-sensitivity",
        ),
    ] {
        let mut a = args.clone();
        a.extend(["--out", &out]);
        assert_bad(&a, needle);
    }
    assert_bad(
        &["data", "info", &ds, "--schema", &schema, "--no-fetch"],
        "schema only for a table",
    );
}

/// A table of the sweep's shape (a, b, c, label in 0..3) and schemas over it.
fn table(dir: &Path) -> (String, impl Fn(&str) -> String) {
    let mut csv = String::from("a,b,c,label\n");
    for i in 0..90 {
        let y = i % 3;
        let v: Vec<String> = (0..3)
            .map(|j| ((i * 31 + j * 7) % 40 + if j == y { 100 } else { 0 }).to_string())
            .collect();
        csv.push_str(&format!("{},{y}\n", v.join(",")));
    }
    let p = dir.join("t.csv");
    std::fs::write(&p, csv).unwrap();
    let dir = dir.to_path_buf();
    let schema = move |classes: &str| {
        let text = format!(
            r#"{{"privpred_schema": 1, "header": true, "columns": [
            {{"name": "a", "type": "numeric", "min": 0, "max": 200}},
            {{"name": "b", "type": "numeric", "min": 0, "max": 200}},
            {{"name": "c", "type": "numeric", "min": 0, "max": 200}},
            {{"name": "label", "type": "label", "classes": {classes}}}]}}"#
        );
        let p = dir.join(format!("s{}.json", classes.len()));
        std::fs::write(&p, text).unwrap();
        s(&p)
    };
    (format!("csv:{}", s(&p)), schema)
}

#[test]
fn classes_that_match_each_other_and_a_schema_that_is_not_the_models_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let (ds, schema) = table(d.path());
    let out = s(&d.path().join("o.safetensors"));
    assert_bad(
        &[
            "train",
            "non-private",
            "--dataset",
            &ds,
            "--schema",
            &schema(r#"["0", "1", "1.0"]"#),
            "--out",
            &out,
        ],
        "it matches `1`",
    );
    // a model trained without a schema (the numbers as pixels), evaluated through a schema of
    // four classes where it has three
    let px = ds.replace("csv:", "csv-pixels:");
    let m = s(&d.path().join("m.safetensors"));
    ok(&[
        "train",
        "non-private",
        "--dataset",
        &px,
        "--lambda",
        "0.01",
        "--out",
        &m,
    ]);
    assert_bad(
        &[
            "evaluate",
            "--model",
            &m,
            "--dataset",
            &ds,
            "--schema",
            &schema(r#"["0", "1", "2", "3"]"#),
        ],
        "has 4 classes, the model 3",
    );
}

#[test]
fn a_budget_predict_cannot_serve_and_a_huge_lambda_are_refused_at_training() {
    let d = tempfile::tempdir().unwrap();
    let ds = pixel_set(d.path(), 60, 3, true);
    let out = s(&d.path().join("o.safetensors"));
    assert_bad(
        &[
            "train",
            "prediction-sensitivity",
            "--dataset",
            &ds,
            "--classes",
            "3",
            "--epsilon",
            "1",
            "--budget",
            "18446744073709551615",
            "--out",
            &out,
        ],
        "1..=9223372036854775807",
    );
    let (rc, _, err) = capture(&[
        "train",
        "model-sensitivity",
        "--dataset",
        &ds,
        "--classes",
        "3",
        "--epsilon",
        "1",
        "--lambda",
        "1e50",
        "--out",
        &out,
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("lambda") && err.contains("1e50"), "{err}");
    assert!(!err.contains("A larger lambda"), "{err}");
}

/// A budgeted model (unseeded: predict and serve answer from it) and a query file.
fn budgeted(dir: &Path) -> (PathBuf, String) {
    let ds = pixel_set(dir, 90, 3, true);
    let m = dir.join("ps.safetensors");
    ok(&[
        "train",
        "prediction-sensitivity",
        "--dataset",
        &ds,
        "--classes",
        "3",
        "--epsilon",
        "1",
        "--budget",
        "10",
        "--out",
        &s(&m),
    ]);
    let q = dir.join("q.csv");
    std::fs::write(&q, "10,20,30\n1,2,3\n5,5,150\n40,150,2\n").unwrap();
    (m, s(&q))
}

#[test]
fn bad_spend_marks_and_ledgers_are_bad_input_for_predict_and_serve() {
    let d = tempfile::tempdir().unwrap();
    let (base, q) = budgeted(d.path());
    let bytes = std::fs::read(&base).unwrap();
    let copy = |name: &str| {
        let p = d.path().join(name);
        std::fs::write(&p, &bytes).unwrap();
        p
    };
    let check = |m: &Path, extra: &[&str], needle: &str| {
        let ms = s(m);
        let mut p = vec!["predict", "--model", &ms, "--input", &q, "--init-ledger"];
        p.extend_from_slice(extra);
        assert_bad(&p, needle);
        let mut v = vec!["--model", &ms, "--listen", "127.0.0.1:0"];
        // predict may have created the default ledger's record before refusing the mark
        if !extra.is_empty() || !Path::new(&format!("{ms}.ledger.sqlite")).exists() {
            v.push("--init-ledger");
        }
        v.extend_from_slice(extra);
        match common::spawn_serve(&v) {
            Ok(_) => panic!("serve started with {extra:?} ({needle})"),
            Err((rc, err)) => {
                assert_eq!(rc, 2, "serve {extra:?}: {err}");
                assert!(err.contains(needle), "serve: {err}");
            }
        }
    };
    for (k, text) in [
        Some("{\"format\": "),
        Some(r#"{"format": "other", "spent": {}}"#),
        Some(r#"{"format": "privpred-spend-mark", "spent": {"x": -1}}"#),
        None,
    ]
    .into_iter()
    .enumerate()
    {
        let m = copy(&format!("m{k}.safetensors"));
        let mark = format!("{}.ledger-mark.json", s(&m));
        match text {
            Some(t) => std::fs::write(&mark, t).unwrap(),
            None => std::fs::create_dir(&mark).unwrap(),
        }
        check(&m, &[], "spend mark");
    }
    let junk = d.path().join("junk.sqlite");
    std::fs::write(
        &junk,
        "this is not an SQLite database, it is much longer than a header\n".repeat(20),
    )
    .unwrap();
    let dir = d.path().join("ledger-dir");
    std::fs::create_dir(&dir).unwrap();
    for (l, needle) in [
        (junk, "not an SQLite database"),
        (dir, "not a regular file"),
    ] {
        let m = copy("l.safetensors");
        check(&m, &["--ledger", &format!("sqlite:{}", s(&l))], needle);
    }
}

#[test]
fn the_ledger_file_alone_holds_every_answer_once_predict_exits() {
    let d = tempfile::tempdir().unwrap();
    let (m, _) = budgeted(d.path());
    let ms = s(&m);
    for i in 0..4 {
        let q = d.path().join(format!("q{i}.csv"));
        std::fs::write(&q, format!("{},{},{}\n", 10 + i, 20 * i, 150)).unwrap();
        let mut a = vec!["predict", "--model", &ms, "--input", q.to_str().unwrap()];
        if i == 0 {
            a.push("--init-ledger");
        }
        ok(&a);
        // a plain copy of the ledger file alone, as a backup tool would take it
        let copy = d.path().join(format!("copy{i}.sqlite"));
        std::fs::copy(format!("{ms}.ledger.sqlite"), &copy).unwrap();
        let c = rusqlite::Connection::open(&copy).unwrap();
        let spent: i64 = c
            .query_row("SELECT spent FROM privpred_budget", [], |r| r.get(0))
            .unwrap();
        let stored: i64 = c
            .query_row("SELECT COUNT(*) FROM privpred_answers", [], |r| r.get(0))
            .unwrap();
        assert_eq!((spent, stored), (i + 1, i + 1), "after answer {}", i + 1);
    }
}

/// Several `predict` processes answering at once on one ledger: once they have all exited,
/// the ledger file alone (a plain copy without its -wal file) holds every answer of every
/// one of them, round after round (each process's close waits its turn for the checkpoint
/// that the others' connections block).
#[test]
fn the_ledger_file_alone_holds_every_answer_once_concurrent_predicts_exit() {
    let d = tempfile::tempdir().unwrap();
    let ds = pixel_set(d.path(), 90, 3, true);
    let m = s(&d.path().join("ps.safetensors"));
    ok(&[
        "train",
        "prediction-sensitivity",
        "--dataset",
        &ds,
        "--classes",
        "3",
        "--epsilon",
        "1",
        "--budget",
        "100",
        "--out",
        &m,
    ]);
    let query = |i: usize| {
        let q = d.path().join(format!("q{i}.csv"));
        std::fs::write(&q, format!("{},{},{}\n", i, 2 * i + 1, 150)).unwrap();
        s(&q)
    };
    ok(&[
        "predict",
        "--model",
        &m,
        "--input",
        &query(0),
        "--init-ledger",
    ]);
    let (rounds, per_round) = (3, 8);
    for round in 0..rounds {
        let children: Vec<_> = (0..per_round)
            .map(|k| {
                common::bin()
                    .args(["predict", "--model", &m, "--input"])
                    .arg(query(1 + round * per_round + k))
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        let copy = d.path().join(format!("copy{round}.sqlite"));
        std::fs::copy(format!("{m}.ledger.sqlite"), &copy).unwrap();
        let c = rusqlite::Connection::open(&copy).unwrap();
        let spent: i64 = c
            .query_row("SELECT spent FROM privpred_budget", [], |r| r.get(0))
            .unwrap();
        let stored: i64 = c
            .query_row("SELECT COUNT(*) FROM privpred_answers", [], |r| r.get(0))
            .unwrap();
        let want = (1 + (round + 1) * per_round) as i64;
        assert_eq!((spent, stored), (want, want), "after round {round}");
    }
}

#[test]
fn a_table_models_query_file_is_bounded_while_it_is_read() {
    let d = tempfile::tempdir().unwrap();
    let (ds, schema) = table(d.path());
    let m = s(&d.path().join("t.safetensors"));
    ok(&[
        "train",
        "non-private",
        "--dataset",
        &ds,
        "--schema",
        &schema(r#"["0", "1", "2"]"#),
        "--lambda",
        "0.01",
        "--out",
        &m,
    ]);
    let rows = d.path().join("rows.csv");
    std::fs::write(&rows, b",,\n".repeat(1_100_000)).unwrap();
    let t0 = Instant::now();
    let (rc, err) = common::bounded(&["predict", "--model", &m, "--input", &s(&rows)], 60)
        .expect("predict must stop at the row limit");
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("MAX_QUERY_ROWS"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(60));
    // a `;`-separated row says why it reads as one value
    let semi = d.path().join("semi.csv");
    std::fs::write(&semi, "10;20;30\n").unwrap();
    assert_bad(
        &["predict", "--model", &m, "--input", &s(&semi)],
        "not comma-separated",
    );
}

#[test]
fn a_null_cell_is_a_missing_value_not_a_parse_error() {
    let d = tempfile::tempdir().unwrap();
    let (ds, schema) = table(d.path());
    let m = d.path().join("t.safetensors");
    ok(&[
        "train",
        "model-sensitivity",
        "--dataset",
        &ds,
        "--classes",
        "3",
        "--schema",
        &schema(r#"["0", "1", "2"]"#),
        "--epsilon",
        "1",
        "--out",
        &s(&m),
    ]);
    let srv = common::serve_model(&m, &[]);
    let mut c = privpred_serve::client::Client::new(srv.addr, None);
    let r = c
        .post_json("/v1/predict", r#"{"inputs": [[10, null, 30]]}"#)
        .unwrap();
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body.contains("missing value"), "{}", r.body);
    assert!(!r.body.contains("untagged"), "{}", r.body);
}

#[test]
fn messages_of_a_missing_cache_and_of_huge_bounds_name_what_is_wrong() {
    let d = tempfile::tempdir().unwrap();
    // HOME unset and no other place: the message says so instead of an empty list
    let (rc, _, err) = capture_env(
        &["data", "info", "mnist", "--no-fetch"],
        &[
            ("HOME", ""),
            ("XDG_CACHE_HOME", ""),
            ("PRIVPRED_DATA_DIR", ""),
        ],
    );
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("searched nowhere"), "{err}");
    assert!(!err.contains("(searched )"), "{err}");
    // a relative XDG_CACHE_HOME is ignored (the XDG specification): a cache entry there is
    // not used
    let rel = d.path().join("rel");
    std::fs::create_dir_all(rel.join("privpred/digits")).unwrap();
    let (_, _, err) = capture_env(
        &["data", "info", "digits", "--no-fetch"],
        &[
            ("HOME", s(&d.path().join("home")).as_str()),
            ("XDG_CACHE_HOME", "rel"),
            ("PRIVPRED_DATA_DIR", ""),
        ],
    );
    assert!(!err.contains("rel/privpred"), "{err}");
    // a cache entry that is a file is named
    let home = d.path().join("home2");
    std::fs::create_dir_all(home.join(".cache/privpred")).unwrap();
    std::fs::write(home.join(".cache/privpred/wine"), "x").unwrap();
    let (rc, _, err) = capture_env(
        &["data", "info", "wine", "--no-fetch"],
        &[
            ("HOME", s(&home).as_str()),
            ("XDG_CACHE_HOME", ""),
            ("PRIVPRED_DATA_DIR", ""),
        ],
    );
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("is a file, not a directory"), "{err}");
    // bounds of ±1.7e308 are printed short
    let (ds, _) = table(d.path());
    let huge = d.path().join("huge.json");
    std::fs::write(
        &huge,
        r#"{"privpred_schema": 1, "header": true, "columns": [
        {"name": "a", "type": "numeric", "min": -1.7e308, "max": 1.7e308},
        {"name": "b", "type": "numeric", "min": 0, "max": 200},
        {"name": "c", "type": "numeric", "min": 0, "max": 200},
        {"name": "label", "type": "label", "classes": ["0", "1", "2"]}]}"#,
    )
    .unwrap();
    let (rc, _, err) = capture(&["data", "info", &ds, "--schema", &s(&huge), "--no-fetch"]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("-1.7e308") && err.len() < 600, "{err}");
}

/// A null in a Parquet file (an OPTIONAL column) is a missing value of its column, named with
/// its row, not a parse error of the reader's own types.
#[test]
fn a_null_parquet_cell_is_a_missing_value_named_by_its_column() {
    use parquet::data_type::{ByteArray, ByteArrayType, DoubleType};
    use std::sync::Arc;
    let d = tempfile::tempdir().unwrap();
    let (_, schema) = table(d.path());
    let p = d.path().join("t.parquet");
    let message = "message t { OPTIONAL DOUBLE a; OPTIONAL DOUBLE b; OPTIONAL DOUBLE c; REQUIRED BYTE_ARRAY label (UTF8); }";
    let f = std::fs::File::create(&p).unwrap();
    let mut w = parquet::file::writer::SerializedFileWriter::new(
        f,
        Arc::new(parquet::schema::parser::parse_message_type(message).unwrap()),
        Arc::new(parquet::file::properties::WriterProperties::builder().build()),
    )
    .unwrap();
    let mut rg = w.next_row_group().unwrap();
    let n = 30;
    for k in 0..4 {
        let mut col = rg.next_column().unwrap().unwrap();
        if k < 3 {
            // row 7 of column b is null
            let def: Vec<i16> = (0..n).map(|i| i16::from(!(k == 1 && i == 7))).collect();
            let v: Vec<f64> = (0..n)
                .filter(|&i| def[i] == 1)
                .map(|i| ((i * 7 + k) % 40) as f64)
                .collect();
            col.typed::<DoubleType>()
                .write_batch(&v, Some(&def), None)
                .unwrap();
        } else {
            let v: Vec<ByteArray> = (0..n)
                .map(|i| ByteArray::from((i % 3).to_string().as_str()))
                .collect();
            col.typed::<ByteArrayType>()
                .write_batch(&v, None, None)
                .unwrap();
        }
        col.close().unwrap();
    }
    rg.close().unwrap();
    w.close().unwrap();
    let m = d.path().join("m.safetensors");
    let (rc, _, err) = capture(&[
        "train",
        "non-private",
        "--dataset",
        &format!("parquet:{}", s(&p)),
        "--schema",
        &schema(r#"["0", "1", "2"]"#),
        "--out",
        &s(&m),
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("column `b`: missing value") && err.contains('8'),
        "{err}"
    );
    assert!(
        !err.contains("untagged") && !err.contains("panicked"),
        "{err}"
    );
    assert!(!m.exists());
}

/// With HOME unset (not only empty) and no other place to look, the message says that nothing
/// was searched and why; `data fetch` over a cache entry that is a file replaces it and leaves
/// nothing beside it (no `wine.old-PID`).
#[test]
fn home_unset_and_a_file_in_the_cache_entrys_place() {
    let d = tempfile::tempdir().unwrap();
    let o = common::bin()
        .args(["data", "info", "mnist", "--no-fetch"])
        .env_remove("HOME")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("PRIVPRED_DATA_DIR")
        .output()
        .unwrap();
    let (rc, _, err) = common::outcome(&o);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("searched nowhere") && err.contains("HOME"),
        "{err}"
    );
    assert!(!err.contains("(searched )"), "{err}");
    // a file where wine's cache directory belongs; fetched from a copy of the pinned table
    let Some(source) = privpred_data::read::candidate_dirs(
        "wine",
        &privpred_data::LoadOptions {
            fetch: false,
            ..Default::default()
        },
    )
    .into_iter()
    .map(|(dir, _)| dir.join("wine_data.csv"))
    .find(|p| p.is_file()) else {
        privpred_data::testdata::or_skip(
            None::<PathBuf>,
            "cli_bad_input_edges::home_unset_and_a_file_in_the_cache_entrys_place",
            "the wine table (`privpred data fetch wine`)",
        );
        return;
    };
    let home = d.path().join("home");
    let cache = home.join(".cache/privpred");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("wine"), "x").unwrap();
    let env = [
        ("HOME", s(&home)),
        ("XDG_CACHE_HOME", String::new()),
        ("PRIVPRED_DATA_DIR", String::new()),
    ];
    let (rc, _, err) = capture_env(&["data", "fetch", "wine", "--from", &s(&source)], &env);
    assert_eq!(rc, 0, "{err}");
    assert!(cache.join("wine/wine_data.csv").is_file());
    let left: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["wine"], "left beside the cache entry: {left:?}");
    let (rc, _, err) = capture_env(&["data", "info", "wine", "--no-fetch"], &env);
    assert_eq!(rc, 0, "{err}");
}

/// A schema with `"header": true` on a named table (wine, breast-cancer, fair) whose next line
/// is a data row, not its column names: `train` refuses it (exit 2, naming line 2 and the
/// mismatch) rather than drop that row unseen; the table's own schema (`"header": false`)
/// trains on every row. Skipped per table (one `privpred-test-skip:` line) when it is absent.
#[test]
fn a_header_row_on_a_named_table_is_checked_through_the_cli() {
    let opts = privpred_data::LoadOptions {
        fetch: false,
        ..Default::default()
    };
    let d = tempfile::tempdir().unwrap();
    for (name, file, rows) in [
        ("wine", "wine_data.csv", 178),
        ("breast-cancer", "breast_cancer.csv", 569),
        ("fair", "fair.csv", 6366),
    ] {
        let found = privpred_data::read::candidate_dirs(name, &opts)
            .into_iter()
            .map(|(dir, _)| dir.join(file))
            .find(|p| p.is_file());
        let test = format!(
            "cli_bad_input_edges::a_header_row_on_a_named_table_is_checked_through_the_cli ({name})"
        );
        if privpred_data::testdata::or_skip(
            found,
            &test,
            &format!("the {name} table (`privpred data fetch {name}`)"),
        )
        .is_none()
        {
            continue;
        }
        let own = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("../../examples/{name}.schema.json"));
        let text = std::fs::read_to_string(&own).unwrap();
        assert!(text.contains("\"header\": false"), "{name}");
        let with_header = d.path().join(format!("{name}.json"));
        std::fs::write(
            &with_header,
            text.replacen("\"header\": false", "\"header\": true", 1),
        )
        .unwrap();
        let m = d.path().join(format!("{name}.safetensors"));
        let train = |schema: &Path| {
            capture(&[
                "train",
                "non-private",
                "--dataset",
                name,
                "--schema",
                &s(schema),
                "--lambda",
                "0.01",
                "--seed",
                "0",
                "--json",
                "--out",
                &s(&m),
            ])
        };
        let (rc, _, err) = train(&with_header);
        assert_eq!(rc, 2, "{name}: {err}");
        assert!(
            err.contains("line 2") && err.contains("header"),
            "{name}: {err}"
        );
        assert!(!m.exists(), "{name}");
        let (rc, out, err) = train(&own);
        assert_eq!(rc, 0, "{name}: {err}");
        let j: serde_json::Value = serde_json::from_str(&out).unwrap();
        // the training split of every row (a seeded hold-out of round(N/5) rows is the test)
        let n = j["n"].as_u64().unwrap() as usize;
        assert_eq!(
            n,
            rows - (rows as f64 * 0.2).round() as usize,
            "{name}: {n} of {rows}"
        );
    }
}
