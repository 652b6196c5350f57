//! The seed corpora, generated (`privpred-fuzz seeds`): small valid inputs of every target,
//! written under `corpus/<target>/`. They are checked in; regenerate only to add seeds.

use crate::parquet_seed::parquet_table;
use crate::sweep::png;
use privpred_core::{Budget, CalibrationMode, Method, Privacy};
use privpred_data::{Dataset, Preprocessing, Provenance};
use std::io::Write;
use std::path::Path;

fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, 8, dims.len() as u8];
    for d in dims {
        b.extend_from_slice(&d.to_be_bytes());
    }
    b.extend_from_slice(data);
    b
}

fn gz(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn put(dir: &Path, target: &str, name: &str, bytes: &[u8]) {
    let d = dir.join(target);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join(name), bytes).unwrap();
}

fn toy(n: usize, d: usize, c: usize) -> Dataset {
    let mut f = Vec::with_capacity(n * d);
    let mut l = Vec::with_capacity(n);
    for i in 0..n {
        let y = i % c;
        for j in 0..d {
            f.push(((i * 13 + j * 7) % 17) as f32 / 17.0 + if j % c == y { 2.0 } else { 0.0 });
        }
        l.push(y as u32);
    }
    Dataset::new(d, c, f, l, Provenance::default()).unwrap()
}

/// Writes every target's seeds under `dir/<target>/`.
pub fn write(dir: &Path) {
    // IDX
    let img = idx(&[3, 2, 2], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 255]);
    put(dir, "idx", "images.idx3", &img);
    put(dir, "idx", "images.idx3.gz", &gz(&img));
    put(dir, "idx", "labels.idx1", &idx(&[4], &[0, 1, 2, 9]));
    // CSV
    put(
        dir,
        "csv",
        "header.csv",
        b"a,b,label\n1,2,0\n3.5,-4,1\n5,6e2,2\n",
    );
    put(dir, "csv", "plain.csv", b"1,2,0\n3,4,1\n5,6,0\n7,8,1\n");
    put(dir, "csv", "semicolon.csv", b"label;x;y\n0;1;2\n1;3;4\n");
    put(dir, "csv", "plain.csv.gz", &gz(b"1,2,0\n3,4,1\n5,6,0\n"));
    bad_input_seeds(dir);
    parquet_seeds(dir);
    // image archives
    let mut b = tar::Builder::new(Vec::new());
    for (split, class, v) in [("train", "a", 10u8), ("train", "b", 200), ("test", "a", 12)] {
        let p = png(v);
        let mut h = tar::Header::new_gnu();
        h.set_size(p.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, format!("set/{split}/{class}/x.png"), &p[..])
            .unwrap();
    }
    let t = b.into_inner().unwrap();
    put(dir, "images-tar", "set.tar", &t);
    put(dir, "images-tar", "set.tar.gz", &gz(&t));
    // linear artifacts: non-private, and every private kind, one with PCA
    let tmp = tempfile::tempdir().unwrap();
    let raw = toy(60, 4, 3);
    let mut rng = <rand_chacha::ChaCha20Rng as rand::SeedableRng>::seed_from_u64(1);
    for (name, method, pca) in [
        ("released-pca", Method::ModelSensitivity, Some(2)),
        ("noisy-logits", Method::PredictionSensitivity, None),
        ("teachers", Method::SubsampleAggregate, None),
    ] {
        let fitted = Preprocessing {
            scale: 1.0,
            pca,
            ..Preprocessing::default()
        }
        .fit(&raw, 0)
        .unwrap();
        let ds = fitted.apply_train(&raw).unwrap();
        let cfg = privpred_core::ParamGuard::check(
            privpred_linear::TrainParams::new(
                method,
                CalibrationMode::Corrected,
                Privacy::new(1.0, 0.0).unwrap(),
                Budget::finite(10).unwrap(),
            )
            .teachers(3)
            .lambda(1e-2),
        )
        .unwrap();
        let p = privpred_linear::train_private(&cfg, &ds, &mut rng).unwrap();
        let f = tmp.path().join("m.safetensors");
        privpred_linear::artifact::save(&f, &p, &fitted, serde_json::Value::Null).unwrap();
        put(
            dir,
            "linear-artifact",
            &format!("{name}.safetensors"),
            &std::fs::read(&f).unwrap(),
        );
    }
    // a ResNet teacher ensemble (tiny architecture)
    let cfg = privpred_nn::ResNetConfig::tiny(3);
    let net = privpred_nn::ResNet::new(cfg).unwrap();
    let cal = privpred_nn::calib::subsample_aggregate(
        CalibrationMode::Corrected,
        Privacy::new(1.0, 0.0).unwrap(),
        10,
        3,
    )
    .unwrap();
    let w: Vec<f32> = (0..net.num_params())
        .map(|i| ((i * 7919) % 101) as f32 / 101.0 - 0.5)
        .collect();
    let m = privpred_nn::artifact::NnModel::new(
        privpred_nn::artifact::ModelHeader {
            kind: privpred_nn::artifact::ModelKind::Teachers,
            config: cfg,
            normalization: privpred_nn::data::Normalization::cifar10(),
            calibration: Some(cal),
            training: Some(privpred_nn::calib::PublicTraining {
                n: 100,
                dp_sgd: None,
                teachers: Some(2),
            }),
            seed_policy: Some(privpred_core::SeedPolicy::OsRandom),
            members: 2,
            class_names: None,
            data_source: "seed".into(),
        },
        vec![w.clone(), w],
        serde_json::Value::Null,
    )
    .unwrap();
    let f = tmp.path().join("n.safetensors");
    privpred_nn::artifact::save(&f, &m).unwrap();
    put(
        dir,
        "nn-artifact",
        "teachers.safetensors",
        &std::fs::read(&f).unwrap(),
    );
}

/// Parquet seeds: snappy and uncompressed, with and without nulls.
fn parquet_seeds(dir: &Path) {
    put(
        dir,
        "parquet",
        "snappy.parquet",
        &parquet_table(12, true, false),
    );
    put(
        dir,
        "parquet",
        "plain.parquet",
        &parquet_table(12, false, false),
    );
    put(
        dir,
        "parquet",
        "nulls.parquet",
        &parquet_table(10, true, true),
    );
}

/// Seeds of the classes of bad input the second hardening round found (they must be refused,
/// and mutations around them explored): an IDX header promising 2.1 × 10⁹ values over a short
/// gzip payload, trailing bytes after gzip data, one-class labels; CSVs with tabs, mixed
/// delimiters, one class, a trailing comma and a typo in the first row (a query file's shape).
fn bad_input_seeds(dir: &Path) {
    put(
        dir,
        "idx",
        "bomb.idx3.gz",
        &gz(&idx(&[2_730_000, 28, 28], &[0; 4096])),
    );
    let mut trailing = gz(&idx(&[4], &[0, 1, 0, 1]));
    trailing.extend_from_slice(b"garbage");
    put(dir, "idx", "trailing.idx1.gz", &trailing);
    put(dir, "idx", "one-class.idx1", &idx(&[6], &[1; 6]));
    for (name, text) in [
        ("tabs.csv", &b"a\tb\tlabel\n1\t2\t0\n3\t4\t1\n"[..]),
        ("mixed.csv", b"1,2,0\n3;4,1\n5\t6,0\n"),
        ("one-class.csv", b"1,2,1\n3,4,1\n5,6,1\n"),
        ("trailing-comma.csv", b"10,20,30,0,\n1,2,3,1,\n"),
        ("typo-first-row.csv", b"10,20,x30,0\n1,2,3,1\n"),
    ] {
        put(dir, "csv", name, text);
    }
}
