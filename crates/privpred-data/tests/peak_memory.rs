//! Peak resident memory of loading + preprocessing a large IDX dataset (the rule: never
//! hold two copies). Measured with the kernel's own peak-RSS counter: `VmHWM` in
//! `/proc/self/status`, reset to the current RSS between cases by writing `5` to
//! `/proc/self/clear_refs`. One test in its own binary, so nothing else runs in the process.
//!
//! The data: a generated 100,000 × 28 × 28 IDX training file (plain and gzip) — 313 MB as
//! f32 — and a small test file. Every case asserts peak − baseline ≤ one f32 copy of the
//! training features × 1.05 + the preprocessed output where it is smaller than the input
//! (PCA) + fixed buffers (32 MiB + 2 MiB per worker thread). As a check that the meter sees copies, the borrowed
//! path (input and output both alive) must measure at least 1.8 copies.

#![cfg(target_os = "linux")]

use privpred_data::preprocess::{Preprocessing, UnitBall};
use privpred_data::{DatasetSpec, LoadOptions, load};
use std::io::Write;
use std::path::Path;

const N: usize = 100_000;
const SIDE: usize = 28;
const MIB: f64 = (1 << 20) as f64;

fn status_kib(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{key} missing from /proc/self/status"))
}

/// Resets the peak to the current RSS; returns the current RSS in bytes.
fn reset_peak() -> f64 {
    std::fs::write("/proc/self/clear_refs", "5")
        .expect("resetting the peak RSS needs /proc/self/clear_refs (Linux ≥ 4.0)");
    status_kib("VmRSS:") as f64 * 1024.0
}

fn peak() -> f64 {
    status_kib("VmHWM:") as f64 * 1024.0
}

/// Writes an IDX file row block by row block (never the whole payload in memory): MNIST-like
/// images (a dark border, a bright varying blob) and labels `i mod 10`.
fn write_split(dir: &Path, images: &str, labels: &str, n: usize, gzip: bool) {
    let open = |name: &str| -> Box<dyn Write> {
        let f = std::io::BufWriter::new(std::fs::File::create(dir.join(name)).unwrap());
        if gzip {
            Box::new(flate2::write::GzEncoder::new(
                f,
                flate2::Compression::fast(),
            ))
        } else {
            Box::new(f)
        }
    };
    let mut w = open(images);
    w.write_all(&[0, 0, 8, 3]).unwrap();
    for dim in [n, SIDE, SIDE] {
        w.write_all(&(dim as u32).to_be_bytes()).unwrap();
    }
    let mut img = vec![0u8; SIDE * SIDE];
    for i in 0..n {
        for (p, v) in img.iter_mut().enumerate() {
            let (y, x) = (p / SIDE, p % SIDE);
            let inside = (6..22).contains(&y) && (4 + i % 5..20 + i % 5).contains(&x);
            *v = if inside {
                ((i * 31 + p * 7) % 256) as u8
            } else {
                0
            };
        }
        w.write_all(&img).unwrap();
    }
    drop(w);
    let mut w = open(labels);
    w.write_all(&[0, 0, 8, 1]).unwrap();
    w.write_all(&(n as u32).to_be_bytes()).unwrap();
    let labs: Vec<u8> = (0..n).map(|i| (i % 10) as u8).collect();
    w.write_all(&labs).unwrap();
}

fn make_dir(gzip: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ext = if gzip { ".gz" } else { "" };
    write_split(
        dir.path(),
        &format!("train-images-idx3-ubyte{ext}"),
        &format!("train-labels-idx1-ubyte{ext}"),
        N,
        gzip,
    );
    write_split(
        dir.path(),
        &format!("t10k-images-idx3-ubyte{ext}"),
        &format!("t10k-labels-idx1-ubyte{ext}"),
        500,
        gzip,
    );
    dir
}

/// Loads + preprocesses; returns (peak above the baseline, one f32 copy, output bytes).
fn measure(dir: &Path, recipe: &Preprocessing, owned: bool) -> (f64, f64, f64) {
    let base = reset_peak();
    let s = load(
        &DatasetSpec::Idx(dir.to_path_buf()),
        &LoadOptions::default(),
    )
    .unwrap();
    let copy = (s.train.features.len() * 4) as f64;
    let fitted = recipe.fit(&s.train, 7).unwrap();
    let (train, test) = if owned {
        (
            fitted.apply_train_owned(s.train).unwrap(),
            fitted.apply_owned(s.test).unwrap(),
        )
    } else {
        (
            fitted.apply_train(&s.train).unwrap(),
            fitted.apply(&s.test).unwrap(),
        )
    };
    assert!(train.max_norm() <= 1.0 && test.max_norm() <= 1.0);
    let out = (train.features.len() * 4) as f64;
    let used = peak() - base;
    drop((train, test));
    (used, copy, out)
}

#[test]
fn loading_and_preprocessing_hold_one_copy_of_the_features() {
    let cases: [(&str, Preprocessing); 4] = [
        ("default (scale, normalise)", Preprocessing::default()),
        (
            "classes 0..5, subsample 30000, bias",
            Preprocessing {
                classes: Some(5),
                subsample: Some(30_000),
                bias: true,
                ..Default::default()
            },
        ),
        (
            "bias, clip:20",
            Preprocessing {
                bias: true,
                unit_ball: UnitBall::Clip { radius: 20.0 },
                ..Default::default()
            },
        ),
        (
            "pca 50, bias, max-norm",
            Preprocessing {
                pca: Some(50),
                bias: true,
                unit_ball: UnitBall::MaxNorm,
                ..Default::default()
            },
        ),
    ];
    // Fixed buffers, independent of the number of rows: read buffers, the PCA covariance
    // (d×d in f64 and f32) and GEMM packing, per-worker projection scratch.
    let fixed = (32.0 + 2.0 * rayon::current_num_threads() as f64) * MIB;
    for gzip in [false, true] {
        let dir = make_dir(gzip);
        for (name, recipe) in cases.iter().rev() {
            let (used, copy, out) = measure(dir.path(), recipe, true);
            let extra = if recipe.pca.is_some() { out } else { 0.0 };
            let limit = copy * 1.05 + extra + fixed;
            eprintln!(
                "{} {name}: peak {:.1} MiB above the baseline; one copy {:.1} MiB; limit {:.1} MiB",
                if gzip { "gzip " } else { "plain" },
                used / MIB,
                copy / MIB,
                limit / MIB
            );
            assert!(
                used <= limit,
                "{name} (gzip {gzip}): peak {:.1} MiB > limit {:.1} MiB (one copy {:.1} MiB)",
                used / MIB,
                limit / MIB,
                copy / MIB
            );
        }
    }
    // The meter sees a second copy: the borrowed path keeps input and output alive.
    let dir = make_dir(false);
    let (used, copy, _) = measure(dir.path(), &Preprocessing::default(), false);
    eprintln!(
        "borrowed default: peak {:.1} MiB above the baseline ({:.2} copies)",
        used / MIB,
        used / copy
    );
    assert!(
        used >= 1.8 * copy,
        "borrowed path measured {:.2} copies",
        used / copy
    );
}
