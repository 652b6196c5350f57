//! The online fallback of `fetch` (download from mirrors with the system `curl`, SHA-256
//! verification, atomic install), exercised offline through `file://` mirrors holding
//! gzipped copies of the real MNIST files from the cache. Skipped with a note when MNIST is
//! not in the cache or `curl` is missing. The mirror is passed explicitly (no env vars).

use flate2::Compression;
use flate2::write::GzEncoder;
use privpred_data::fetch::fetch_from_mirrors;
use privpred_data::{DataError, DatasetSpec, fsutil, known};
use std::io::Write;
use std::path::{Path, PathBuf};

fn mnist_cache() -> Option<PathBuf> {
    let dir = privpred_data::load::cache_dir("mnist")?;
    if known::MNIST.iter().all(|(s, _)| dir.join(s).is_file())
        && std::process::Command::new("curl")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    {
        Some(dir)
    } else {
        eprintln!("note: MNIST not in the cache or no curl; skipping download tests");
        None
    }
}

/// Writes `<stem>.gz` of every MNIST file into `mirror`; `corrupt` names a stem whose
/// payload gets one byte flipped before compression (a valid gzip with the wrong content).
fn build_mirror(src: &Path, mirror: &Path, corrupt: Option<&str>) {
    for (stem, _) in known::MNIST {
        let mut bytes = std::fs::read(src.join(stem)).unwrap();
        if corrupt == Some(stem) {
            let i = bytes.len() / 2;
            bytes[i] ^= 0xff;
        }
        let f = std::fs::File::create(mirror.join(format!("{stem}.gz"))).unwrap();
        let mut e = GzEncoder::new(f, Compression::fast());
        e.write_all(&bytes).unwrap();
        e.finish().unwrap();
    }
}

fn url(dir: &Path) -> String {
    format!("file://{}/", dir.display())
}

#[test]
fn downloads_verifies_and_installs_from_a_file_mirror() {
    let Some(src) = mnist_cache() else { return };
    let mirror = tempfile::tempdir().unwrap();
    build_mirror(&src, mirror.path(), None);
    let cache = tempfile::tempdir().unwrap();
    let target = cache.path().join("privpred").join("mnist");
    // A dead mirror first: the fetch moves on to the next one.
    let dead = url(&cache.path().join("no-such-mirror"));
    let r = fetch_from_mirrors(&DatasetSpec::Mnist, &target, &[dead, url(mirror.path())])
        .expect("download from the file:// mirror");
    assert!(r.verified);
    assert_eq!(r.dir, target);
    for (stem, sha) in known::MNIST {
        assert_eq!(
            fsutil::sha256_file(&target.join(stem)).unwrap(),
            sha,
            "{stem}"
        );
        assert!(r.files.iter().any(|(f, h)| f == stem && h == sha));
    }
    // Only the installed directory is left in the cache root (no scratch directories).
    let left: Vec<_> = std::fs::read_dir(target.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("mnist")]);
    // The installed set loads with the reference checksums.
    let s = privpred_data::load::load_idx_dir(&target, "mnist", Some(&known::MNIST), Some(10))
        .unwrap()
        .unwrap();
    assert_eq!((s.train.n, s.test.n), (60_000, 10_000));
}

#[test]
fn checksum_mismatch_installs_nothing() {
    let Some(src) = mnist_cache() else { return };
    let mirror = tempfile::tempdir().unwrap();
    build_mirror(&src, mirror.path(), Some("train-labels-idx1-ubyte"));
    let cache = tempfile::tempdir().unwrap();
    let target = cache.path().join("privpred").join("mnist");
    let err = fetch_from_mirrors(&DatasetSpec::Mnist, &target, &[url(mirror.path())])
        .expect_err("a corrupted file must be rejected");
    match &err {
        DataError::Checksum {
            path,
            expected,
            actual,
        } => {
            assert!(
                path.to_string_lossy()
                    .contains("train-labels-idx1-ubyte.gz")
            );
            assert_eq!(expected, known::MNIST[1].1);
            assert_ne!(actual, expected);
            let msg = err.to_string();
            assert!(
                msg.contains(expected.as_str()) && msg.contains(actual.as_str()),
                "{msg}"
            );
        }
        e => panic!("expected a checksum error, got {e}"),
    }
    assert!(!target.exists());
    let left = std::fs::read_dir(target.parent().unwrap()).unwrap().count();
    assert_eq!(left, 0, "scratch directories left behind");
}

#[test]
fn not_gzip_is_a_clear_error() {
    if mnist_cache().is_none() {
        return;
    }
    let mirror = tempfile::tempdir().unwrap();
    for (stem, _) in known::MNIST {
        std::fs::write(mirror.path().join(format!("{stem}.gz")), b"not gzip").unwrap();
    }
    let cache = tempfile::tempdir().unwrap();
    let target = cache.path().join("mnist");
    let err = fetch_from_mirrors(&DatasetSpec::Mnist, &target, &[url(mirror.path())])
        .expect_err("garbage must be rejected");
    assert!(
        err.to_string().contains("train-images-idx3-ubyte.gz"),
        "{err}"
    );
    assert!(!target.exists());
}

#[test]
fn only_mnist_and_fashion_have_mirrors() {
    let cache = tempfile::tempdir().unwrap();
    let err = fetch_from_mirrors(
        &DatasetSpec::Digits,
        &cache.path().join("digits"),
        &["file:///nowhere/".to_string()],
    )
    .unwrap_err();
    assert!(matches!(err, DataError::InvalidArgument { .. }), "{err}");
    assert!(
        privpred_data::fetch::mirrors(&DatasetSpec::FashionMnist)
            .iter()
            .any(|m| m == known::FASHION_MNIST_MIRRORS[0])
    );
}
