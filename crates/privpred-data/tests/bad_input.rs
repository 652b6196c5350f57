//! Bad input: each case is a one-line error naming the file and what is wrong; nothing is
//! loaded partially.

use privpred_data::{DataError, DatasetSpec, LoadOptions, load};
use std::io::Write;
use std::path::Path;

fn idx_bytes(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, 8, dims.len() as u8];
    for d in dims {
        b.extend_from_slice(&d.to_be_bytes());
    }
    b.extend_from_slice(data);
    b
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).unwrap();
}

/// A valid tiny IDX set: 3 train and 2 test images of 2×2.
fn idx_set(dir: &Path) {
    write(
        dir,
        "train-images-idx3-ubyte",
        &idx_bytes(&[3, 2, 2], &[1; 12]),
    );
    write(dir, "train-labels-idx1-ubyte", &idx_bytes(&[3], &[0, 1, 2]));
    write(
        dir,
        "t10k-images-idx3-ubyte",
        &idx_bytes(&[2, 2, 2], &[2; 8]),
    );
    write(dir, "t10k-labels-idx1-ubyte", &idx_bytes(&[2], &[1, 0]));
}

fn err_of(spec: &str) -> String {
    let e = load(
        &DatasetSpec::parse(spec).unwrap(),
        &LoadOptions {
            fetch: false,
            ..Default::default()
        },
    )
    .unwrap_err();
    let s = e.to_string();
    assert!(!s.contains('\n'), "multi-line error: {s}");
    s
}

#[test]
fn valid_idx_dir_loads_plain_and_gz() {
    let t = tempfile::tempdir().unwrap();
    idx_set(t.path());
    let s = load(&DatasetSpec::Idx(t.path().into()), &LoadOptions::default()).unwrap();
    assert_eq!(
        (s.train.n, s.test.n, s.train.d, s.train.classes),
        (3, 2, 4, 3)
    );
    // gzip the training images.
    let raw = std::fs::read(t.path().join("train-images-idx3-ubyte")).unwrap();
    std::fs::remove_file(t.path().join("train-images-idx3-ubyte")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).unwrap();
    write(
        t.path(),
        "train-images-idx3-ubyte.gz",
        &gz.finish().unwrap(),
    );
    let s2 = load(&DatasetSpec::Idx(t.path().into()), &LoadOptions::default()).unwrap();
    assert_eq!(s.train, s2.train);
}

#[test]
fn idx_wrong_magic() {
    let t = tempfile::tempdir().unwrap();
    idx_set(t.path());
    let mut b = idx_bytes(&[3, 2, 2], &[1; 12]);
    b[0] = 7;
    write(t.path(), "train-images-idx3-ubyte", &b);
    let e = err_of(&format!("idx:{}", t.path().display()));
    assert!(
        e.contains("train-images-idx3-ubyte") && e.contains("wrong IDX magic"),
        "{e}"
    );
}

#[test]
fn idx_truncated() {
    let t = tempfile::tempdir().unwrap();
    idx_set(t.path());
    write(
        t.path(),
        "t10k-images-idx3-ubyte",
        &idx_bytes(&[2, 2, 2], &[2; 5]),
    );
    let e = err_of(&format!("idx:{}", t.path().display()));
    assert!(
        e.contains("t10k-images-idx3-ubyte") && e.contains("truncated"),
        "{e}"
    );
}

#[test]
fn idx_count_mismatch() {
    let t = tempfile::tempdir().unwrap();
    idx_set(t.path());
    write(
        t.path(),
        "train-labels-idx1-ubyte",
        &idx_bytes(&[2], &[0, 1]),
    );
    let e = err_of(&format!("idx:{}", t.path().display()));
    assert!(
        e.contains("train-labels-idx1-ubyte") && e.contains("2 labels") && e.contains("3 images"),
        "{e}"
    );
}

#[test]
fn named_dataset_label_out_of_range_and_checksum() {
    let t = tempfile::tempdir().unwrap();
    idx_set(t.path());
    // As "mnist" the (tiny) files fail the checksum: never used.
    let e = load(
        &DatasetSpec::Mnist,
        &LoadOptions {
            data_dir: Some(t.path().into()),
            fetch: false,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, DataError::Checksum { .. }), "{e}");
    let s = e.to_string();
    assert!(
        s.contains("checksum mismatch")
            && s.contains("not used")
            && s.contains("train-images-idx3-ubyte"),
        "{s}"
    );
    // Labels outside the class range of a named 10-class set.
    let ld = privpred_data::load::load_idx_dir(t.path(), "x", None, Some(2))
        .unwrap_err()
        .to_string();
    assert!(
        ld.contains("label 2") && ld.contains("0..2") && ld.contains("train-labels"),
        "{ld}"
    );
}

#[test]
fn idx_empty() {
    let t = tempfile::tempdir().unwrap();
    idx_set(t.path());
    write(
        t.path(),
        "train-images-idx3-ubyte",
        &idx_bytes(&[0, 2, 2], &[]),
    );
    write(t.path(), "train-labels-idx1-ubyte", &idx_bytes(&[0], &[]));
    let e = err_of(&format!("idx:{}", t.path().display()));
    assert!(e.contains("empty"), "{e}");
}

fn csv_err(content: &str) -> String {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("data.csv");
    std::fs::write(&p, content).unwrap();
    let e = err_of(&format!("csv:{}", p.display()));
    assert!(e.contains("data.csv"), "{e}");
    e
}

#[test]
fn csv_errors() {
    assert!(csv_err("1,2,0\n3,4\n").contains("ragged"));
    assert!(csv_err("1,2,0\n3,x,1\n").contains("`x` is not a number"));
    assert!(csv_err("1,2,0\n3,nan,1\n").contains("non-finite"));
    assert!(csv_err("1,2,0\n3,inf,1\n").contains("non-finite"));
    assert!(csv_err("1,2,0\n3,4,1.5\n").contains("not a class index"));
    assert!(csv_err("1,2,0\n3,4,-1\n").contains("not a class index"));
    assert!(csv_err("").contains("empty"));
    assert!(csv_err("a,b,label\n").contains("empty"));
}

#[test]
fn csv_header_and_label_column() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("d.csv");
    let rows: String = (0..50)
        .map(|i| format!("{},{}.5,{}\n", i % 3, i, i))
        .collect();
    std::fs::write(&p, format!("label,x,y\n{rows}")).unwrap();
    let opts = LoadOptions {
        csv: privpred_data::csvfile::CsvOptions {
            label: privpred_data::csvfile::LabelColumn::Name("label".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let s = load(
        &DatasetSpec::parse(&format!("csv:{}", p.display())).unwrap(),
        &opts,
    )
    .unwrap();
    assert_eq!(
        (s.train.n + s.test.n, s.train.d, s.train.classes),
        (50, 2, 3)
    );
    assert_eq!(s.test.n, 10);
    assert!(s.train.provenance.steps[0].contains("hold-out"));
}

#[test]
fn unreadable_image_is_named() {
    let t = tempfile::tempdir().unwrap();
    for (split, class) in [("train", "a"), ("train", "b"), ("test", "a")] {
        let d = t.path().join(split).join(class);
        std::fs::create_dir_all(&d).unwrap();
        let img = image::RgbImage::from_pixel(4, 4, image::Rgb([10, 20, 30]));
        img.save(d.join("0.png")).unwrap();
    }
    let s = load(
        &DatasetSpec::Images(t.path().into()),
        &LoadOptions::default(),
    )
    .unwrap();
    assert_eq!(
        (s.train.n, s.test.n, s.train.d, s.train.classes),
        (2, 1, 48, 2)
    );
    assert_eq!(&s.test.features[..2], &[10.0, 10.0]);
    assert_eq!(s.test.features[16], 20.0);
    std::fs::write(t.path().join("train/b/broken.jpg"), b"not a jpeg").unwrap();
    let e = err_of(&format!("images:{}", t.path().display()));
    assert!(
        e.contains("broken.jpg") && e.contains("unreadable image"),
        "{e}"
    );
}

#[test]
fn bad_cifar_batch() {
    let t = tempfile::tempdir().unwrap();
    let rec = |label: u8| {
        let mut r = vec![label];
        r.extend(std::iter::repeat_n(7u8, 3072));
        r
    };
    for i in 1..=5 {
        write(t.path(), &format!("data_batch_{i}.bin"), &rec(i as u8));
    }
    write(t.path(), "test_batch.bin", &rec(0));
    let s = load(
        &DatasetSpec::CifarBin(t.path().into()),
        &LoadOptions::default(),
    )
    .unwrap();
    assert_eq!((s.train.n, s.test.n, s.train.d), (5, 1, 3072));
    write(t.path(), "data_batch_3.bin", &rec(12));
    let e = err_of(&format!("cifar-bin:{}", t.path().display()));
    assert!(
        e.contains("data_batch_3.bin") && e.contains("label 12"),
        "{e}"
    );
    write(t.path(), "data_batch_3.bin", &rec(1)[..100]);
    let e = err_of(&format!("cifar-bin:{}", t.path().display()));
    assert!(
        e.contains("data_batch_3.bin") && e.contains("multiple"),
        "{e}"
    );
}

#[test]
fn bad_specs_and_recipes() {
    assert!(
        DatasetSpec::parse("foo")
            .unwrap_err()
            .to_string()
            .contains("mnist, fashion-mnist")
    );
    assert!(DatasetSpec::parse("csv:").is_err());
    assert!("clip:-1".parse::<privpred_data::UnitBall>().is_err());
    assert!("clip:2.5".parse::<privpred_data::UnitBall>().is_ok());
    let t = tempfile::tempdir().unwrap();
    idx_set(t.path());
    let s = load(&DatasetSpec::Idx(t.path().into()), &LoadOptions::default()).unwrap();
    use privpred_data::Preprocessing;
    for p in [
        Preprocessing {
            pca: Some(5),
            ..Default::default()
        },
        Preprocessing {
            classes: Some(4),
            ..Default::default()
        },
        Preprocessing {
            subsample: Some(4),
            ..Default::default()
        },
        Preprocessing {
            scale: f64::NAN,
            ..Default::default()
        },
    ] {
        let e = p.fit(&s.train, 0).unwrap_err().to_string();
        assert!(e.starts_with("invalid "), "{e}");
    }
}

#[test]
fn tab_separated_and_mixed_delimiter_csv_files_are_named_as_such() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("tabs.csv");
    std::fs::write(&p, "a\tb\tlabel\n1\t2\t0\n3\t4\t1\n").unwrap();
    let e = err_of(&format!("csv:{}", p.display()));
    assert!(
        e.contains("holds a tab") && !e.contains("control character"),
        "{e}"
    );
    let p = t.path().join("mixed.csv");
    std::fs::write(&p, "1,2,0\n3;4,1\n5\t6,0\n").unwrap();
    let e = err_of(&format!("csv:{}", p.display()));
    assert!(
        e.contains("line 2") && e.contains("holds a semicolon"),
        "{e}"
    );
}
