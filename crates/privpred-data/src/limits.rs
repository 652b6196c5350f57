//! Limits on what user input may ask for, as named constants. Every reader checks a size
//! against these (and against the size of its input) *before* allocating for it, and refuses
//! anything larger with an error that names the limit. They are far above every data set of
//! the study (MNIST-1M: 1,000,000 × 784 values; CIFAR-10: 60,000 × 3,072) and well below
//! what would exhaust a workstation's memory.

/// Most classes a data set or a model may have (labels `0..MAX_CLASSES`). A user CSV whose
/// largest label is 4,294,967,295 would otherwise ask for 4 × 10⁹ classes.
pub const MAX_CLASSES: usize = 1_000;

/// Most values (items × rows × columns) one IDX file may hold after decompression: 2³¹,
/// 8 GiB as f32 (MNIST-1M's training images are 7.8 × 10⁸).
pub const MAX_IDX_VALUES: u64 = 1 << 31;

/// Most bytes one file inside an image archive (`.tar[.gz]`) or image folder may have
/// (a CIFAR-10 JPEG is about 1 kB).
pub const MAX_IMAGE_FILE_BYTES: u64 = 64 << 20;

/// Most bytes of image files an image archive or folder may hold in total (decompressed).
pub const MAX_IMAGE_SET_BYTES: u64 = 8 << 30;

/// Largest width or height of one decoded image, in pixels.
pub const MAX_IMAGE_SIDE: u32 = 4_096;

/// Most feature values (images × channels × height × width) of a decoded image set: 2³¹
/// (8 GiB as f32).
pub const MAX_IMAGE_SET_VALUES: u64 = 1 << 31;

/// Most bytes of a safetensors header (JSON) a model artifact may have (ours are a few kB;
/// the safetensors crate itself allows 100 MB).
pub const MAX_ARTIFACT_HEADER_BYTES: u64 = 16 << 20;

/// Most bytes a model artifact may have (a 256-teacher ResNet-20 ensemble is about 280 MB).
pub const MAX_ARTIFACT_BYTES: u64 = 4 << 30;

/// Share of the machine's available memory (`MemAvailable` in `/proc/meminfo`) one data set
/// may allocate for its arrays, in percent. A data set whose headers promise more is refused
/// before its payload is read (instead of the process aborting on a failed allocation).
pub const MAX_DATA_MEMORY_PERCENT: u64 = 80;

/// The memory available to this process (bytes), from `MemAvailable` in `/proc/meminfo`;
/// `None` where that is not readable (other systems), and then only the fixed limits apply.
pub fn available_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// `Ok` when `bytes` fit [`MAX_DATA_MEMORY_PERCENT`] of the available memory (always `Ok`
/// where that is unknown); otherwise the reason, naming both sizes and the limit.
pub fn check_memory(what: &str, bytes: u64) -> Result<(), String> {
    check_memory_within(what, bytes, available_memory_bytes())
}

/// [`check_memory`] against a given available size (`None`: unknown, no bound).
pub fn check_memory_within(what: &str, bytes: u64, available: Option<u64>) -> Result<(), String> {
    let Some(avail) = available else {
        return Ok(());
    };
    let allowed = avail / 100 * MAX_DATA_MEMORY_PERCENT;
    if bytes <= allowed {
        Ok(())
    } else {
        Err(format!(
            "{what} needs {} of memory, more than the {} allowed ({MAX_DATA_MEMORY_PERCENT} % of the {} available; privpred_data::limits::MAX_DATA_MEMORY_PERCENT)",
            human_bytes(bytes),
            human_bytes(allowed),
            human_bytes(avail)
        ))
    }
}

/// A byte count in a short form (`8.0 GiB`, `512 B`).
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_bound_refuses_more_than_the_share_of_what_is_available() {
        assert!(check_memory_within("x", 1 << 40, None).is_ok());
        assert!(check_memory_within("x", 800, Some(1000)).is_ok());
        let e = check_memory_within("the data set", 8 << 30, Some(4 << 30)).unwrap_err();
        assert!(
            e.contains("8.0 GiB") && e.contains("3.2 GiB") && e.contains("4.0 GiB"),
            "{e}"
        );
        assert!(e.contains("MAX_DATA_MEMORY_PERCENT"), "{e}");
        assert_eq!(human_bytes(512), "512 B");
    }
}
