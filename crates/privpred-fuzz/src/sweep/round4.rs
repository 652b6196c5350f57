//! Families 9 and 10 of the sweep, the classes of the third attack set.
//!
//! Family 9, Parquet tables: mutated copies of small valid Parquet files (snappy, plain, with
//! nulls) read by `data info`, `data schema`, `train`, `evaluate` and `compare`; the parquet
//! crate panics on some corrupt files, and none of those panics may reach the user. A
//! mutation may leave valid data.
//!
//! Family 10, edges and ignored flags: `--delta` next to 1 for DP-SGD (answered within the
//! timeout); and each of these refused as bad input (exit 2), quickly: `--schema` for a dataset that is not a table; `--lambda`
//! with `dp-sgd` and `--clip` with another method; classes that match each other (`1`, `1.0`);
//! a schema whose classes are not the model's; B = 2⁶⁴ − 1; `--lambda 1e50`; a spend mark that
//! is corrupt, foreign, negative or a directory, and a ledger that is not SQLite or is a
//! directory (`predict` and `serve`); a table model's query file of more rows than the limit.

use super::{Expect, Sweep, Tally, run_case, s};
use crate::mutate;
use crate::parquet_seed::{PARQUET_SCHEMA, parquet_table};
use std::path::Path;

/// Writes `bytes` to `dir/name` and returns the path as text.
fn put(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    s(p)
}

/// Builds an argument vector from words.
fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

impl Sweep {
    /// Runs `privpred ARGS` to prepare a case; `false` (after saying why) if it failed.
    fn prepare_run(&self, a: &[String]) -> bool {
        let out = super::privpred(&self.bin)
            .args(a)
            .output()
            .expect("run privpred");
        if !out.status.success() {
            eprintln!(
                "sweep: preparing {a:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        out.status.success()
    }

    /// Family 9 (see the module documentation).
    pub(super) fn parquet_tables(&mut self) -> (&'static str, Tally) {
        let mut t = Tally::default();
        let d = self.dir.join("parquet");
        std::fs::create_dir_all(&d).unwrap();
        let schema = put(&d, "t.schema.json", PARQUET_SCHEMA.as_bytes());
        let seeds = [
            parquet_table(40, true, false),
            parquet_table(40, false, false),
            parquet_table(40, true, true),
        ];
        let good = put(&d, "good.parquet", &seeds[0]);
        let model = s(d.join("m.safetensors"));
        let trained = self.prepare_run(&args(&[
            "train",
            "non-private",
            "--dataset",
            &format!("parquet:{good}"),
            "--schema",
            &schema,
            "--lambda",
            "0.01",
            "--out",
            &model,
        ]));
        for i in 0..self.cases {
            let (a, b) = (&seeds[i % 3], &seeds[(i + 1) % 3]);
            let f = put(&d, &format!("p{i}.parquet"), &mutate(a, b, &mut self.rng));
            let ds = format!("parquet:{f}");
            let case = match i % 5 {
                0 => args(&["data", "info", &ds, "--schema", &schema, "--no-fetch"]),
                1 => args(&["data", "schema", &f]),
                2 | 4 if !trained => args(&["data", "schema", &f]),
                2 => args(&["evaluate", "--model", &model, "--dataset", &ds]),
                // compare runs every method: a few cases only
                3 if i % 20 == 3 => args(&[
                    "compare",
                    "--dataset",
                    &ds,
                    "--schema",
                    &schema,
                    "--epsilon",
                    "1",
                    "--budget",
                    "10",
                    "--teachers",
                    "4",
                    "--dpsgd-batch-size",
                    "4",
                    "--repetitions",
                    "1",
                ]),
                _ => args(&[
                    "train",
                    "non-private",
                    "--dataset",
                    &ds,
                    "--schema",
                    &schema,
                    "--lambda",
                    "0.01",
                    "--out",
                    &s(d.join("o.safetensors")),
                ]),
            };
            run_case(&self.bin, &case, self.timeout, Expect::Either, &mut t);
        }
        (
            "Parquet tables (mutated; data info, data schema, train, evaluate, compare)",
            t,
        )
    }

    /// Family 10 (see the module documentation).
    pub(super) fn edges_and_flags(&mut self) -> (&'static str, Tally) {
        let mut t = Tally::default();
        let d = self.dir.join("round4");
        std::fs::create_dir_all(&d).unwrap();
        let mut cases: Vec<Vec<String>> = Vec::new();
        let near_one = "0.999999999";
        cases.push(args(&[
            "calibrate",
            "dp-sgd",
            "--epsilon",
            "1",
            "--delta",
            near_one,
            "--n",
            "1000",
            "--batch-size",
            "10",
            "--epochs",
            "1",
        ]));
        let out = s(d.join("o.safetensors"));
        // ... answered (δ ∈ (0, 1) is DP-SGD's range), within the timeout
        let mut answered: Vec<Vec<String>> = std::mem::take(&mut cases);
        let train = |extra: &[&str]| -> Vec<String> {
            let mut a = args(&["train"]);
            a.extend(extra.iter().map(|x| x.to_string()));
            a.extend(["--out".to_string(), out.clone()]);
            a
        };
        let ds = self.ds.clone();
        answered.push(train(&[
            "dp-sgd",
            "--dataset",
            &ds,
            "--classes",
            "3",
            "--epsilon",
            "1",
            "--delta",
            near_one,
        ]));
        answered.push(args(&[
            "compare",
            "--dataset",
            &ds,
            "--epsilon",
            "1",
            "--delta",
            near_one,
            "--budget",
            "10",
            "--repetitions",
            "1",
        ]));
        cases.extend(self.table_and_flag_cases(&d));
        cases.extend(self.store_cases(&d));
        for a in &answered {
            run_case(&self.bin, a, self.timeout, Expect::Either, &mut t);
        }
        for a in &cases {
            run_case(&self.bin, a, self.timeout, Expect::Usage, &mut t);
        }
        (
            "edges and ignored flags (delta near 1, flags that do not apply, alike classes, B = 2^64 - 1, spend marks and ledgers)",
            t,
        )
    }

    /// The refusals of family 10 on a table and training flags: alike classes, `--schema` for
    /// a non-table, flags a method ignores, B = 2⁶⁴ − 1, λ = 1e50, a schema of more classes
    /// than the model, a table model's query file past the row limit.
    fn table_and_flag_cases(&self, d: &Path) -> Vec<Vec<String>> {
        let mut cases: Vec<Vec<String>> = Vec::new();
        let out = s(d.join("o.safetensors"));
        let train = |extra: &[&str]| -> Vec<String> {
            let mut a = args(&["train"]);
            a.extend(extra.iter().map(|x| x.to_string()));
            a.extend(["--out".to_string(), out.clone()]);
            a
        };
        let ds = self.ds.clone();
        // the table of the sweep (a, b, c, d, label 0..2) read through schemas
        let csv = put(d, "t.csv", &self.csv);
        let cols = r#"{"name": "a", "type": "numeric", "min": 0, "max": 200},
            {"name": "b", "type": "numeric", "min": 0, "max": 200},
            {"name": "c", "type": "numeric", "min": 0, "max": 200},
            {"name": "d", "type": "numeric", "min": 0, "max": 200}"#;
        let schema = |classes: &str| {
            format!(
                r#"{{"privpred_schema": 1, "header": true, "columns": [{cols},
                {{"name": "label", "type": "label", "classes": {classes}}}]}}"#
            )
        };
        let good = put(
            d,
            "good.schema.json",
            schema(r#"["0", "1", "2"]"#).as_bytes(),
        );
        let alike = put(
            d,
            "alike.schema.json",
            schema(r#"["0", "1", "1.0"]"#).as_bytes(),
        );
        let four = put(
            d,
            "four.schema.json",
            schema(r#"["0", "1", "2", "3"]"#).as_bytes(),
        );
        cases.push(train(&[
            "non-private",
            "--dataset",
            &format!("csv:{csv}"),
            "--schema",
            &alike,
        ]));
        cases.push(train(&["non-private", "--dataset", &ds, "--schema", &good]));
        cases.push(train(&[
            "dp-sgd",
            "--dataset",
            &ds,
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--lambda",
            "private",
        ]));
        cases.push(train(&[
            "model-sensitivity",
            "--dataset",
            &ds,
            "--epsilon",
            "1",
            "--clip",
            "private",
        ]));
        cases.push(train(&[
            "prediction-sensitivity",
            "--dataset",
            &ds,
            "--epsilon",
            "1",
            "--budget",
            "18446744073709551615",
        ]));
        cases.push(train(&[
            "model-sensitivity",
            "--dataset",
            &ds,
            "--epsilon",
            "1",
            "--lambda",
            "1e50",
        ]));
        // a model trained on the CSV without a schema, evaluated on it through one of more classes
        let pixels = s(d.join("pixels.safetensors"));
        let table = s(d.join("table.safetensors"));
        let np = |dataset: &str, extra: &[&str], out: &str| -> Vec<String> {
            let mut a = args(&["train", "non-private", "--dataset", dataset]);
            a.extend(extra.iter().map(|x| x.to_string()));
            a.extend(args(&["--lambda", "0.01", "--out", out]));
            a
        };
        if self.prepare_run(&np(&ds, &[], &pixels)) {
            cases.push(args(&[
                "evaluate",
                "--model",
                &pixels,
                "--dataset",
                &format!("csv:{csv}"),
                "--schema",
                &four,
            ]));
        }
        // a table model's query file past the row limit (2 bytes a row: under the size limit)
        if self.prepare_run(&np(&format!("csv:{csv}"), &["--schema", &good], &table)) {
            let rows = put(d, "rows.csv", &b",\n".repeat(1_100_000));
            cases.push(args(&["predict", "--model", &table, "--input", &rows]));
        }
        cases
    }

    /// `predict` and `serve` of a budgeted (unseeded) model with a spend mark that is corrupt,
    /// foreign, negative or a directory, and with a ledger that is not SQLite or a directory.
    fn store_cases(&self, d: &Path) -> Vec<Vec<String>> {
        let base = s(d.join("ps.safetensors"));
        let mut cases = Vec::new();
        if !self.prepare_run(&args(&[
            "train",
            "prediction-sensitivity",
            "--dataset",
            &self.ds,
            "--classes",
            "3",
            "--epsilon",
            "1",
            "--budget",
            "10",
            "--out",
            &base,
        ])) {
            return cases;
        }
        let bytes = std::fs::read(&base).unwrap();
        let q = s(&self.q);
        let both = |m: &str, extra: &[&str]| -> Vec<Vec<String>> {
            let mut p = args(&["predict", "--model", m, "--input", &q, "--init-ledger"]);
            p.extend(extra.iter().map(|x| x.to_string()));
            let mut v = args(&["serve", "--model", m, "--listen", "127.0.0.1:0"]);
            // the predict case before may have created the default ledger's record
            if !extra.is_empty() {
                v.push("--init-ledger".into());
            }
            v.extend(extra.iter().map(|x| x.to_string()));
            vec![p, v]
        };
        let marks: [(&str, Option<&str>); 4] = [
            ("corrupt", Some("{\"format\": ")),
            ("foreign", Some(r#"{"format": "other", "spent": {}}"#)),
            (
                "negative",
                Some(r#"{"format": "privpred-spend-mark", "spent": {"x": -1}}"#),
            ),
            ("directory", None),
        ];
        for (k, (name, text)) in marks.into_iter().enumerate() {
            let m = put(d, &format!("mark{k}-{name}.safetensors"), &bytes);
            let mark = format!("{m}.ledger-mark.json");
            match text {
                Some(t) => std::fs::write(&mark, t).unwrap(),
                None => std::fs::create_dir_all(&mark).unwrap(),
            }
            cases.extend(both(&m, &[]));
        }
        let junk = put(d, "junk.sqlite", b"this is not an SQLite database\n");
        let dir = d.join("ledger-dir");
        std::fs::create_dir_all(&dir).unwrap();
        for (k, l) in [junk, s(&dir)].into_iter().enumerate() {
            let m = put(d, &format!("ledger{k}.safetensors"), &bytes);
            cases.extend(both(&m, &["--ledger", &format!("sqlite:{l}")]));
        }
        cases
    }
}
