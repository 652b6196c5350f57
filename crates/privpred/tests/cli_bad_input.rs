//! Hand-made bad input at the command line: a gzip bomb fails fast, query files are
//! bounded and never lose a row, false acceptances are refused, and every refusal of a bad
//! file or argument exits 2 with each cause printed once.

mod common;

use common::{assert_bad, ok, pixel_set, privpred};
use privpred_core::Method;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

/// A non-private model trained on [`dataset`] (no budget ledger needed to predict).
fn model(dir: &Path) -> String {
    let ds = pixel_set(dir, 150, 3, true);
    let m = dir.join("m.safetensors");
    let ms = m.to_str().unwrap().to_string();
    ok(&[
        "train",
        "non-private",
        "--dataset",
        &ds,
        "--lambda",
        "0.01",
        "--out",
        &ms,
    ]);
    ms
}

fn idx_bytes(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, 8, dims.len() as u8];
    for d in dims {
        b.extend_from_slice(&d.to_be_bytes());
    }
    b.extend_from_slice(data);
    b
}

#[test]
fn a_gzip_idx_bomb_is_refused_from_its_headers_in_milliseconds() {
    let t = tempfile::tempdir().unwrap();
    // Header: 2,730,000 × 28 × 28 ≈ 2.1 × 10⁹ values (inside MAX_IDX_VALUES); payload:
    // 32 MiB of zeros, 32 kB compressed. The label files hold 20 labels.
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&idx_bytes(&[2_730_000, 28, 28], &vec![0; 32 << 20]))
        .unwrap();
    let bomb = e.finish().unwrap();
    for (img, lab) in [
        ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte"),
        ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte"),
    ] {
        std::fs::write(t.path().join(img), &bomb).unwrap();
        std::fs::write(t.path().join(lab), idx_bytes(&[20], &[0, 1].repeat(10))).unwrap();
    }
    let t0 = Instant::now();
    let ds = format!("idx:{}", t.path().display());
    let out = t.path().join("m.safetensors");
    assert_bad(
        &[
            "train",
            "non-private",
            "--dataset",
            &ds,
            "--out",
            out.to_str().unwrap(),
        ],
        "20 labels but",
    );
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
}

#[test]
fn query_files_are_bounded_and_never_lose_a_row() {
    let t = tempfile::tempdir().unwrap();
    let m = model(t.path());
    let q = t.path().join("q.csv");
    let qs = q.to_str().unwrap();
    // /dev/zero: refused at the size limit, not read to exhaustion.
    let t0 = Instant::now();
    assert_bad(
        &["predict", "--model", &m, "--input", "/dev/zero"],
        "MAX_QUERY_BYTES",
    );
    assert!(t0.elapsed() < Duration::from_secs(20));
    // A typo in the first row is an error, not a dropped header.
    std::fs::write(&q, "1,2,x3\n4,5,6\n").unwrap();
    assert_bad(
        &["predict", "--model", &m, "--input", qs],
        "line 1: column 3 (`x3`)",
    );
    // A trailing comma names the empty column (not "no query rows").
    std::fs::write(&q, "1,2,3,\n").unwrap();
    assert_bad(
        &["predict", "--model", &m, "--input", qs],
        "column 4 is empty",
    );
    // Mixed delimiters are refused.
    std::fs::write(&q, "1,2;3\n").unwrap();
    assert_bad(
        &["predict", "--model", &m, "--input", qs],
        "mixes delimiters",
    );
    // A header only with --header; then every data row is answered.
    std::fs::write(&q, "a,b,c\n1,2,3\n4,5,6\n").unwrap();
    assert_bad(&["predict", "--model", &m, "--input", qs], "--header");
    let out = ok(&["predict", "--model", &m, "--input", qs, "--header"]);
    assert_eq!(out.lines().count(), 2, "{out}");
}

#[test]
fn one_class_data_and_guarantees_not_given_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let ds = pixel_set(t.path(), 150, 3, true);
    let out = t.path().join("m.safetensors");
    let os = out.to_str().unwrap();
    let one = t.path().join("one.csv");
    let rows: String = (0..50).map(|i| format!("{i},{},1\n", i % 7)).collect();
    std::fs::write(&one, rows).unwrap();
    let one = format!("csv-pixels:{}", one.display());
    assert_bad(
        &["train", "non-private", "--dataset", &one, "--out", os],
        "at least 2 classes",
    );
    assert_bad(
        &[
            "train",
            "subsample-aggregate",
            "--dataset",
            &one,
            "--classes",
            "3",
            "--epsilon",
            "1",
            "--out",
            os,
        ],
        "at least 2 classes",
    );
    assert_bad(
        &[
            "train",
            "non-private",
            "--dataset",
            &ds,
            "--epsilon",
            "1",
            "--out",
            os,
        ],
        "no privacy guarantee",
    );
    // train --out <directory>: exit 2 before any training.
    assert_bad(
        &[
            "train",
            "non-private",
            "--dataset",
            &ds,
            "--out",
            t.path().to_str().unwrap(),
        ],
        "is a directory",
    );
}

#[test]
fn serve_refuses_contradictory_or_empty_limits_and_a_noiseless_fixture() {
    let t = tempfile::tempdir().unwrap();
    let mut spec = privpred_serve::FixtureSpec::new(Method::PredictionSensitivity, 10, 4, 3);
    let good = t.path().join("good.json");
    std::fs::write(&good, spec.to_json()).unwrap();
    let gs = good.to_str().unwrap();
    for (args, needle) in [
        (vec!["--max-body-bytes", "0"], "max-body-bytes"),
        (
            vec!["--share-answer-store", "--no-answer-store"],
            "--no-answer-store",
        ),
    ] {
        let mut a = vec![
            "serve",
            "--model",
            gs,
            "--listen",
            "127.0.0.1:0",
            "--init-ledger",
        ];
        a.extend(args);
        let (code, e) = common::bounded(&a, 20).expect("serve started instead of refusing");
        assert_eq!(code, 2, "{e}");
        assert!(e.contains(needle), "{e}");
    }
    spec.sigma = 0.0;
    let zero = t.path().join("zero.json");
    std::fs::write(&zero, spec.to_json()).unwrap();
    let a = [
        "serve",
        "--model",
        zero.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--init-ledger",
    ];
    let (code, e) = common::bounded(&a, 20).expect("serve started on a noiseless fixture");
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("sigma = 0"), "{e}");
}

#[test]
fn a_missing_or_directory_model_exits_2_with_each_cause_once() {
    let t = tempfile::tempdir().unwrap();
    let ds = pixel_set(t.path(), 150, 3, true);
    let q = t.path().join("q.csv");
    std::fs::write(&q, "1,2,3\n").unwrap();
    let qs = q.to_str().unwrap();
    let missing = t.path().join("nowhere.safetensors");
    for m in [missing.to_str().unwrap(), t.path().to_str().unwrap()] {
        for args in [
            vec!["predict", "--model", m, "--input", qs],
            vec!["evaluate", "--model", m, "--dataset", &ds],
        ] {
            let o = privpred(&args);
            let e = String::from_utf8_lossy(&o.stderr).to_string();
            assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
            assert!(e.contains(m), "{e}");
            for cause in ["(os error 2)", "(os error 21)"] {
                assert!(e.matches(cause).count() <= 1, "printed twice: {e}");
            }
        }
    }
    // A size error names the file once.
    let bad = t.path().join("bad.safetensors");
    let mut h = (1u64 << 62).to_le_bytes().to_vec();
    h.extend_from_slice(b"{}");
    std::fs::write(&bad, &h).unwrap();
    let bs = bad.to_str().unwrap();
    let o = privpred(&["predict", "--model", bs, "--input", qs]);
    let e = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.matches(bs).count(), 1, "{e}");
}

#[test]
fn tiny_and_huge_numbers_are_printed_in_a_short_form() {
    for (eps, shown) in [("1e-300", "(1e-300, 0)"), ("1e300", "(1e300, 0)")] {
        let out = ok(&[
            "calibrate",
            "model-sensitivity",
            "--epsilon",
            eps,
            "--n",
            "1000",
            "--lambda",
            "0.01",
        ]);
        assert!(out.contains(shown), "{out}");
        assert!(out.lines().all(|l| l.len() < 300), "{out}");
    }
}
