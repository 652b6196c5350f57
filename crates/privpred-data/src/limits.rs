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
