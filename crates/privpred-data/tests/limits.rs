//! Hostile sizes in the data readers: sizes claimed by a file's header are
//! checked against the limits (`privpred_data::limits`) and the input's size before anything
//! is allocated for them, and a corrupt first CSV row is never silently taken for a header.
//! A counting global allocator records the largest single allocation of each read.

use privpred_data::{DatasetSpec, LoadOptions, load};
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;
static LARGEST: AtomicUsize = AtomicUsize::new(0);
// SAFETY: forwards to the system allocator; only records sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LARGEST.fetch_max(new, Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}
#[global_allocator]
static A: Counting = Counting;
/// The measured tests run one at a time (the counter is process-wide).
static SERIAL: Mutex<()> = Mutex::new(());

/// The largest single allocation while `f` runs, and its result.
fn largest<T>(f: impl FnOnce() -> T) -> (usize, T) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    LARGEST.store(0, Ordering::SeqCst);
    let r = f();
    (LARGEST.load(Ordering::SeqCst), r)
}

fn err_of(spec: &str) -> String {
    load(&DatasetSpec::parse(spec).unwrap(), &LoadOptions::default())
        .unwrap_err()
        .to_string()
}

fn idx_bytes(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, 8, dims.len() as u8];
    for d in dims {
        b.extend_from_slice(&d.to_be_bytes());
    }
    b.extend_from_slice(data);
    b
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// Pseudo-random (incompressible) bytes.
fn noise(n: usize) -> Vec<u8> {
    let mut s = 0x9e3779b97f4a7c15u64;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

#[test]
fn a_gzipped_idx_promising_millions_of_images_allocates_only_what_it_holds() {
    let t = tempfile::tempdir().unwrap();
    // 64 KiB of incompressible bytes: the gzip size allowance (× 1032) admits a header of
    // 60,000 × 28 × 28 = 47 M values, which a reader must not allocate at once (188 MB as f32).
    let p = t.path().join("train-images-idx3-ubyte.gz");
    std::fs::write(&p, gz(&idx_bytes(&[60_000, 28, 28], &noise(64 << 10)))).unwrap();
    let (big, r) = largest(|| privpred_data::idx::read_images(&p));
    let e = r.unwrap_err().to_string();
    assert!(e.contains("truncated"), "{e}");
    assert!(big < 8 << 20, "largest allocation {big} bytes");
    // A header beyond MAX_IDX_VALUES is refused by name.
    std::fs::write(&p, gz(&idx_bytes(&[4_000_000_000, 28, 28], &[0; 64]))).unwrap();
    let e = privpred_data::idx::read_images(&p).unwrap_err().to_string();
    assert!(e.contains("MAX_IDX_VALUES") || e.contains("at most"), "{e}");
    // A valid gzipped file still reads, with no spare capacity.
    let data = noise(50 * 28 * 28);
    std::fs::write(&p, gz(&idx_bytes(&[50, 28, 28], &data))).unwrap();
    let a = privpred_data::idx::read_images(&p).unwrap();
    assert_eq!(a.data.len(), data.len());
    assert_eq!(a.data.capacity(), a.data.len());
}

/// A tar archive with one entry `train/a/x.png` whose header claims `size` bytes, followed by
/// `body` (fewer bytes).
fn tar_claiming(size: u64, body: &[u8]) -> Vec<u8> {
    let mut h = tar::Header::new_gnu();
    h.set_path("set/train/a/x.png").unwrap();
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(size);
    h.set_cksum();
    let mut b = h.as_bytes().to_vec();
    b.extend_from_slice(body);
    b.resize(b.len().div_ceil(512) * 512 + 1024, 0);
    b
}

#[test]
fn a_tar_entry_claiming_exabytes_is_refused_before_allocating() {
    let t = tempfile::tempdir().unwrap();
    for size in [1u64 << 62, (1u64 << 63) - 1, 1 << 40, 100 << 20] {
        for compress in [false, true] {
            let raw = tar_claiming(size, &[0x89, b'P', b'N', b'G']);
            let p = t.path().join(if compress { "s.tar.gz" } else { "s.tar" });
            std::fs::write(&p, if compress { gz(&raw) } else { raw }).unwrap();
            let (big, e) = largest(|| err_of(&format!("images:{}", p.display())));
            assert!(
                e.contains("MAX_IMAGE_FILE_BYTES") || e.contains("tar"),
                "{size}: {e}"
            );
            assert!(big < 8 << 20, "{size}: largest allocation {big} bytes");
        }
    }
    // A claim within the limit but beyond the archive: truncated, without allocating it.
    let p = t.path().join("s.tar");
    std::fs::write(&p, tar_claiming(60 << 20, &[1, 2, 3])).unwrap();
    let (big, e) = largest(|| err_of(&format!("images:{}", p.display())));
    assert!(e.contains("tar"), "{e}");
    assert!(big < 8 << 20, "largest allocation {big} bytes");
}

#[test]
fn an_image_header_claiming_a_huge_side_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("train/a");
    std::fs::create_dir_all(&d).unwrap();
    // A 1×1 PNG whose IHDR is patched to 100,000 × 100,000 (CRC fixed up).
    let mut png = Vec::new();
    image::RgbImage::from_pixel(1, 1, image::Rgb([1, 2, 3]))
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
    png[16..20].copy_from_slice(&100_000u32.to_be_bytes());
    png[20..24].copy_from_slice(&100_000u32.to_be_bytes());
    let crc = crc32(&png[12..29]);
    png[29..33].copy_from_slice(&crc.to_be_bytes());
    std::fs::write(d.join("x.png"), &png).unwrap();
    let (big, e) = largest(|| err_of(&format!("images:{}", t.path().display())));
    assert!(e.contains("unreadable image"), "{e}");
    assert!(big < 64 << 20, "largest allocation {big} bytes");
}

fn crc32(b: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &x in b {
        c ^= x as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

fn csv_err(dir: &Path, body: &str) -> String {
    let p = dir.join("d.csv");
    std::fs::write(&p, body).unwrap();
    err_of(&format!("csv:{}", p.display()))
}

#[test]
fn a_huge_csv_label_is_refused_instead_of_deciding_the_class_count() {
    let t = tempfile::tempdir().unwrap();
    let rows: String = (0..40).map(|i| format!("{i},1,{}\n", i % 2)).collect();
    for label in ["4294967295", "1000000", "1000"] {
        let (big, e) = largest(|| csv_err(t.path(), &format!("{rows}5,5,{label}\n")));
        assert!(
            e.contains(label) && e.contains("at most 1000 classes") && e.contains("row 41"),
            "{label}: {e}"
        );
        assert!(big < 8 << 20, "{label}: largest allocation {big} bytes");
    }
    // 999 is a class index within the limit.
    let p = t.path().join("ok.csv");
    std::fs::write(&p, format!("{rows}5,5,999\n")).unwrap();
    let s = load(
        &DatasetSpec::parse(&format!("csv:{}", p.display())).unwrap(),
        &LoadOptions::default(),
    )
    .unwrap();
    assert_eq!(s.train.classes, 1000);
    // --classes beyond the limit
    let e = load(
        &DatasetSpec::parse(&format!("csv:{}", p.display())).unwrap(),
        &LoadOptions {
            classes: Some(5000),
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("MAX_CLASSES"), "{e}");
}

#[test]
fn a_corrupt_first_csv_row_is_an_error_not_a_header() {
    let t = tempfile::tempdir().unwrap();
    let rows: String = (0..40).map(|i| format!("{i},1,{}\n", i % 2)).collect();
    for (first, needle) in [
        ("1,abc,0", "mixes numbers"),
        ("1,\0,0", "mixes numbers"),
        ("1,2,x", "mixes numbers"),
        ("a,\0,label", "control character"),
        ("a,,label", "empty"),
    ] {
        let e = csv_err(t.path(), &format!("{first}\n{rows}"));
        assert!(e.contains("line 1") && e.contains(needle), "{first:?}: {e}");
    }
    // The same corruption in row 2 is an error too.
    let e = csv_err(t.path(), &format!("1,1,0\n1,abc,0\n{rows}"));
    assert!(e.contains("line 2"), "{e}");
    // pandas' default header (0, 1, …, and a named label) is a header; 0, 2 is not.
    let p = t.path().join("h.csv");
    std::fs::write(&p, format!("0,1,target\n{rows}")).unwrap();
    let s = load(
        &DatasetSpec::parse(&format!("csv:{}", p.display())).unwrap(),
        &LoadOptions::default(),
    )
    .unwrap();
    assert_eq!(s.train.n + s.test.n, 40);
    let e = csv_err(t.path(), &format!("0,2,target\n{rows}"));
    assert!(e.contains("line 1"), "{e}");
    // A real header (every cell a name) is still taken as one.
    let p = t.path().join("h.csv");
    std::fs::write(&p, format!("x,y,label\n{rows}")).unwrap();
    let s = load(
        &DatasetSpec::parse(&format!("csv:{}", p.display())).unwrap(),
        &LoadOptions::default(),
    )
    .unwrap();
    assert_eq!(s.train.n + s.test.n, 40);
}

#[test]
fn idx_train_and_test_images_of_different_shapes_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let w = |n: &str, b: Vec<u8>| std::fs::write(t.path().join(n), b).unwrap();
    w(
        "train-images-idx3-ubyte",
        idx_bytes(&[3, 28, 28], &[1; 3 * 784]),
    );
    w("train-labels-idx1-ubyte", idx_bytes(&[3], &[0, 1, 0]));
    w(
        "t10k-images-idx3-ubyte",
        idx_bytes(&[2, 784, 1], &[1; 2 * 784]),
    );
    w("t10k-labels-idx1-ubyte", idx_bytes(&[2], &[1, 0]));
    let e = err_of(&format!("idx:{}", t.path().display()));
    assert!(e.contains("784×1") && e.contains("28×28"), "{e}");
}

#[test]
fn a_gzip_bomb_with_mismatched_labels_is_refused_before_its_payload_is_decompressed() {
    let t = tempfile::tempdir().unwrap();
    // Each image file promises 2,730,000 × 28 × 28 ≈ 2.1 × 10⁹ values (inside MAX_IDX_VALUES)
    // and holds 64 MiB of zeros (64 kB compressed); the label files hold 20 labels. The
    // headers disagree, so nothing of the payload may be decompressed or allocated.
    let bomb = gz(&idx_bytes(&[2_730_000, 28, 28], &vec![0u8; 64 << 20]));
    let labels = idx_bytes(&[20], &[1; 20]);
    for (img, lab) in [
        ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte"),
        ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte"),
    ] {
        std::fs::write(t.path().join(img), &bomb).unwrap();
        std::fs::write(t.path().join(lab), &labels).unwrap();
    }
    let spec = format!("idx:{}", t.path().display());
    let t0 = std::time::Instant::now();
    let (big, e) = largest(|| err_of(&spec));
    assert!(
        e.contains("20 labels") && e.contains("2730000 images"),
        "{e}"
    );
    assert!(big < 8 << 20, "largest allocation {big} bytes");
    assert!(t0.elapsed() < std::time::Duration::from_secs(5));
    // Matching counts whose arrays exceed the machine's memory share are refused by name
    // before the payload is read (checked here against a 1 GiB machine).
    let e = privpred_data::limits::check_memory_within(
        "the data set",
        2_730_000 * 784 * 4,
        Some(1 << 30),
    )
    .unwrap_err();
    assert!(e.contains("MAX_DATA_MEMORY_PERCENT"), "{e}");
}
