//! Neighbouring data sets through every input path the CLI reads (a `csv:` table and a
//! `parquet:` table through a schema, `csv-pixels:`, `idx:` and an `images:` folder), under
//! both relations: D and D′ (one row replaced; under add/remove one row removed, with
//! `--public-n`) give model files whose envelope header and payload header are the same apart
//! from the noisy release and the hashes over it, and `privpred serve`'s `GET /v1/model` is the
//! same apart from the model id (the file's hash) and the ledger's location (the operator's
//! path).

mod common;

use common::{ok, serve_model};
use privpred_serve::client::Client;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The payload's metadata entries random by design: the file's `checksum` (over every entry
/// and the weights), `weights_sha256` (the weights) and `ledger_id` (128 bits from the OS at
/// every save).
const RANDOM_METADATA: &[&str] = &["checksum", "weights_sha256", "ledger_id"];

/// Which data set of a pair an input path writes.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Variant {
    /// D.
    Base,
    /// D′ under replace-one: row 0 replaced by an outlier of another class.
    Replaced,
    /// D′ under add/remove: row 0 removed.
    Removed,
}

/// Training rows of every input path (the test split is a separate copy of D).
const ROWS: usize = 300;

/// Pixel-like values of row `i` (class `i % 3`), `d` of them, in 0..=255; row 0 of
/// [`Variant::Replaced`] is an outlier of class 2.
fn pixel_row(i: usize, d: usize, variant: Variant) -> (Vec<u8>, usize) {
    if variant == Variant::Replaced && i == 0 {
        return ((0..d).map(|j| [255, 0, 7][j % 3]).collect(), 2);
    }
    let y = i % 3;
    let v = (0..d)
        .map(|j| ((i * 37 + j * 11) % 60) as u8 + if j % 3 == y { 180 } else { 0 })
        .collect();
    (v, y)
}

/// The rows of `variant` (row 0 dropped for [`Variant::Removed`]).
fn kept(variant: Variant) -> impl Iterator<Item = usize> {
    (0..ROWS).filter(move |&i| !(variant == Variant::Removed && i == 0))
}

const SCHEMA: &str = r#"{"privpred_schema": 1, "header": true, "columns": [
 {"name": "age", "type": "numeric", "min": 0, "max": 120, "out_of_bounds": "clip"},
 {"name": "colour", "type": "categorical", "categories": ["red", "green"], "unknown": "other"},
 {"name": "income", "type": "numeric", "min": 0, "max": 200000},
 {"name": "id", "type": "ignore"},
 {"name": "outcome", "type": "label", "classes": ["no", "yes"]}]}"#;

/// One table row: (age, colour, income, id, outcome); row 0 of [`Variant::Replaced`] is an
/// outlier (an unknown colour, bounds at both ends, the other outcome).
fn table_row(i: usize, variant: Variant) -> common::TableRow {
    if variant == Variant::Replaced && i == 0 {
        return (120.0, "purple", 0.0, 999_999, "no");
    }
    let age = 18.0 + ((i * 29) % 72) as f64;
    let colour = ["red", "green", "blue"][i % 3];
    let income = ((i * 7919) % 200_000) as f64;
    let red = if colour == "red" { 0.35 } else { 0.0 };
    let y = if age / 120.0 + red > 0.5 { "yes" } else { "no" };
    (age, colour, income, i as i64, y)
}

/// An input path: how it writes D (or D′) and the flags that read it.
#[derive(Clone, Copy, Debug)]
enum Input {
    CsvTable,
    ParquetTable,
    CsvPixels,
    Idx,
    Images,
}

impl Input {
    /// Writes `variant` under `dir` (the test split, a copy of D, too) and returns the
    /// arguments that read it: `--dataset` and the public class set or schema.
    fn write(self, dir: &Path, variant: Variant) -> Vec<String> {
        let d = |p: &Path| p.display().to_string();
        match self {
            Input::CsvTable | Input::ParquetTable => {
                let rows = |v| kept(v).map(|i| table_row(i, v)).collect::<Vec<_>>();
                let ext = if matches!(self, Input::CsvTable) {
                    "csv"
                } else {
                    "parquet"
                };
                let (train, test) = (
                    dir.join(format!("train.{ext}")),
                    dir.join(format!("test.{ext}")),
                );
                let write = |p: &Path, r: &[common::TableRow]| match self {
                    Input::CsvTable => common::write_table_csv(p, r),
                    _ => common::write_table_parquet(p, r),
                };
                write(&train, &rows(variant));
                write(&test, &rows(Variant::Base));
                let schema = dir.join("schema.json");
                std::fs::write(&schema, SCHEMA).unwrap();
                vec![
                    "--dataset".into(),
                    format!("{ext}:{},{}", d(&train), d(&test)),
                    "--schema".into(),
                    d(&schema),
                ]
            }
            Input::CsvPixels => {
                let text = |v| {
                    let mut s = String::from("p0,p1,p2,p3,p4,p5,p6,p7,label\n");
                    for i in kept(v) {
                        let (px, y) = pixel_row(i, 8, v);
                        let cells: Vec<String> = px.iter().map(u8::to_string).collect();
                        s.push_str(&format!("{},{y}\n", cells.join(",")));
                    }
                    s
                };
                let (train, test) = (dir.join("train.csv"), dir.join("test.csv"));
                std::fs::write(&train, text(variant)).unwrap();
                std::fs::write(&test, text(Variant::Base)).unwrap();
                vec![
                    "--dataset".into(),
                    format!("csv-pixels:{},{}", d(&train), d(&test)),
                    "--classes".into(),
                    "3".into(),
                ]
            }
            Input::Idx => {
                let idx = dir.join("idx");
                std::fs::create_dir_all(&idx).unwrap();
                for (stem, v) in [("train", variant), ("t10k", Variant::Base)] {
                    let (mut px, mut ys) = (Vec::new(), Vec::new());
                    for i in kept(v) {
                        let (p, y) = pixel_row(i, 16, v);
                        px.extend(p);
                        ys.push(y as u8);
                    }
                    let n = ys.len();
                    privpred_data::idx::write_idx_atomic(
                        &idx.join(format!("{stem}-images-idx3-ubyte")),
                        &[n, 4, 4],
                        &px,
                    )
                    .unwrap();
                    privpred_data::idx::write_idx_atomic(
                        &idx.join(format!("{stem}-labels-idx1-ubyte")),
                        &[n],
                        &ys,
                    )
                    .unwrap();
                }
                vec![
                    "--dataset".into(),
                    format!("idx:{}", d(&idx)),
                    "--classes".into(),
                    "3".into(),
                ]
            }
            Input::Images => {
                let root = dir.join("images");
                let _ = std::fs::remove_dir_all(&root);
                for (split, v) in [("train", variant), ("test", Variant::Base)] {
                    for i in kept(v) {
                        let (px, y) = pixel_row(i, 16, v);
                        let class = ["a", "b", "c"][y];
                        let folder = root.join(split).join(class);
                        std::fs::create_dir_all(&folder).unwrap();
                        std::fs::write(folder.join(format!("{i:03}.png")), png_gray(4, 4, &px))
                            .unwrap();
                    }
                }
                vec![
                    "--dataset".into(),
                    format!("images:{}", d(&root)),
                    "--classes".into(),
                    "a,b,c".into(),
                ]
            }
        }
    }
}

/// A `w`×`h` 8-bit grayscale PNG of `px` (row-major).
fn png_gray(w: u32, h: u32, px: &[u8]) -> Vec<u8> {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut c = 0xffff_ffffu32;
        for &b in bytes {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 == 1 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        !c
    }
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
    }
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = w.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    let mut raw = Vec::new();
    for row in px.chunks(w as usize) {
        raw.push(0);
        raw.extend_from_slice(row);
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&raw).unwrap();
    chunk(&mut out, b"IDAT", &z.finish().unwrap());
    chunk(&mut out, b"IEND", &[]);
    out
}

/// Replace-one: every method, with public values for what the guarantee takes as given.
const REPLACE_ONE: [(&str, &[&str]); 5] = [
    ("model-sensitivity", &["--epsilon", "1", "--lambda", "0.01"]),
    ("loss-perturbation", &["--epsilon", "1", "--lambda", "0.01"]),
    (
        "dp-sgd",
        &[
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--epochs",
            "2",
            "--clip",
            "0.5",
            "--batch-size",
            "32",
        ],
    ),
    (
        "prediction-sensitivity",
        &["--epsilon", "1", "--budget", "10", "--lambda", "0.01"],
    ),
    (
        "subsample-aggregate",
        &["--epsilon", "1", "--budget", "10", "--teachers", "8"],
    ),
];

/// Add/remove: the methods with an analysis under it, with N̂ declared.
const ADD_REMOVE: [(&str, &[&str]); 2] = [
    (
        "loss-perturbation",
        &[
            "--epsilon",
            "1",
            "--lambda",
            "0.01",
            "--neighbours",
            "add-remove",
            "--public-n",
            "320",
        ],
    ),
    (
        "dp-sgd",
        &[
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--epochs",
            "2",
            "--clip",
            "0.5",
            "--batch-size",
            "32",
            "--neighbours",
            "add-remove",
            "--public-n",
            "320",
        ],
    ),
];

/// What a model file shows of D: its envelope header and its payload's safetensors header
/// (tensor names, shapes and the metadata), less the hashes over the noisy release, the
/// sealing nonce and the ledger id.
fn released(path: &Path) -> Value {
    let (header, payload) = common::open_envelope(path);
    let mut header = serde_json::to_value(&header).unwrap();
    let h = header.as_object_mut().unwrap();
    for k in ["payload_sha256", "ledger_id"] {
        assert!(h.remove(k).is_some(), "{k}: {h:?}");
    }
    if let Some(s) = h.get_mut("sealed").and_then(Value::as_object_mut) {
        assert!(s.remove("nonce").is_some());
    }
    let n = u64::from_le_bytes(payload[..8].try_into().unwrap()) as usize;
    let mut tensors: Value = serde_json::from_slice(&payload[8..8 + n]).unwrap();
    let meta = tensors["__metadata__"].as_object_mut().unwrap();
    for k in RANDOM_METADATA {
        assert!(meta.remove(*k).is_some(), "{k}");
    }
    serde_json::json!({"header": header, "payload": tensors})
}

/// `GET /v1/model` of the model at `path` (served with a fresh ledger), less the model id and
/// the ledger's location.
fn model_endpoint(path: &Path) -> Value {
    let s = serve_model(path, &["--init-ledger"]);
    let mut c = Client::new(s.addr, None);
    let mut info = c.get("/v1/model").unwrap().json();
    let o = info.as_object_mut().unwrap();
    assert!(o.remove("model_id").is_some(), "{info}");
    o.remove("ledger");
    info
}

/// Trains `method` on `input`'s `variant` (release generator) into a fresh directory under
/// `dir`; returns the model's path and the trainer's private diagnostics (`train --json`).
fn train(
    dir: &Path,
    input: Input,
    variant: Variant,
    method: &str,
    args: &[&str],
) -> (PathBuf, Value) {
    let data = dir.join(format!("{input:?}-{variant:?}"));
    std::fs::create_dir_all(&data).unwrap();
    // the same file names for D and D′: write D′ over D in one place
    let shared = dir.join(format!("{input:?}-data"));
    std::fs::create_dir_all(&shared).unwrap();
    let input_args = input.write(&shared, variant);
    let out = data.join(format!("{method}.model"));
    let mut all = vec!["train", method];
    all.extend(input_args.iter().map(String::as_str));
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", "--out", out.to_str().unwrap()]);
    let summary: Value = serde_json::from_str(&ok(&all)).unwrap();
    (out, summary["private_diagnostics"].clone())
}

/// For `input` and each method of `methods`: D and `neighbour` give the same released view
/// and the same `GET /v1/model`.
fn same_release(input: Input, neighbour: Variant, methods: &[(&str, &[&str])]) {
    let tmp = tempfile::tempdir().unwrap();
    for (method, args) in methods {
        let (mut views, mut diagnostics) = (Vec::new(), Vec::new());
        for v in [Variant::Base, neighbour] {
            let (m, diag) = train(tmp.path(), input, v, method, args);
            views.push((released(&m), model_endpoint(&m)));
            diagnostics.push(diag);
        }
        // the data owner sees that D and D′ differ (the comparison is not vacuous);
        // subsample-and-aggregate measures nothing
        if *method != "subsample-aggregate" {
            assert_ne!(diagnostics[0], diagnostics[1], "{input:?} {method}");
        }
        let text = views[0].0.to_string();
        if neighbour == Variant::Removed {
            // N̂ is what the calibration records, never the exact N of D or D′
            assert!(text.contains("\\\"n\\\":320"), "{input:?} {method}: {text}");
            for exact in ["300", "299"] {
                assert!(
                    !text.contains(&format!("\\\"n\\\":{exact}")),
                    "{input:?} {method}: {text}"
                );
            }
        }
        let ((file_d, info_d), (file_n, info_n)) = (&views[0], &views[1]);
        assert_eq!(
            file_d, file_n,
            "{input:?} {method} {neighbour:?}: the model files differ beyond the noisy release"
        );
        assert_eq!(
            info_d, info_n,
            "{input:?} {method} {neighbour:?}: GET /v1/model differs"
        );
    }
}

#[test]
fn a_csv_table_releases_nothing_of_the_neighbour() {
    same_release(Input::CsvTable, Variant::Replaced, &REPLACE_ONE);
    same_release(Input::CsvTable, Variant::Removed, &ADD_REMOVE);
}

#[test]
fn a_parquet_table_releases_nothing_of_the_neighbour() {
    same_release(Input::ParquetTable, Variant::Replaced, &REPLACE_ONE);
    same_release(Input::ParquetTable, Variant::Removed, &ADD_REMOVE);
}

#[test]
fn a_pixel_csv_releases_nothing_of_the_neighbour() {
    same_release(Input::CsvPixels, Variant::Replaced, &REPLACE_ONE);
    same_release(Input::CsvPixels, Variant::Removed, &ADD_REMOVE);
}

#[test]
fn an_idx_set_releases_nothing_of_the_neighbour() {
    same_release(Input::Idx, Variant::Replaced, &REPLACE_ONE);
    same_release(Input::Idx, Variant::Removed, &ADD_REMOVE);
}

#[test]
fn an_image_folder_releases_nothing_of_the_neighbour() {
    same_release(Input::Images, Variant::Replaced, &REPLACE_ONE);
    same_release(Input::Images, Variant::Removed, &ADD_REMOVE);
}
