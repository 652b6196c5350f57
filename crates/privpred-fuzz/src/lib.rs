//! # privpred-fuzz
//!
//! Fuzzing that runs on stable Rust, without nightly or sanitizers: each [`Target`] feeds one
//! input (bytes) to a parser of user files and must return — an error is fine, a panic, an
//! abort, a hang or an allocation beyond [`ALLOC_LIMIT`] is a finding. Inputs come from a
//! deterministic mutation loop ([`mutate`]) over the seed corpus checked in under
//! `crates/privpred-fuzz/corpus/<target>/`; every finding is saved and, once fixed, checked in
//! under `crates/privpred-fuzz/regressions/<target>/`, which `cargo test -p privpred-fuzz`
//! replays together with the corpus.
//!
//! Run: `privpred-fuzz run [--seconds 45] [--seed N] [TARGET…]` (see `.ci/run`).
//!
//! ## Adding a target
//! 1. Write `fn my_target(data: &[u8])` that parses `data` with the code under test (through
//!    a temporary file if the parser reads a path: [`scratch_file`]) and ignores errors.
//! 2. Add `Target { name: "my-target", run: my_target }` to [`TARGETS`].
//! 3. Put a few valid inputs under `corpus/my-target/` (small: the mutator starts from them).
//!
//! A crate whose parser lives elsewhere (e.g. the HTTP request parser of `privpred-serve`)
//! adds the dependency to this crate's `Cargo.toml` and its target the same way.

use std::io::Write;
use std::path::{Path, PathBuf};

pub mod parquet_seed;
pub mod seeds;
pub mod sweep;
pub mod targets;

pub use targets::TARGETS;

/// A parser under test.
#[derive(Clone, Copy)]
pub struct Target {
    /// Name (also the corpus directory).
    pub name: &'static str,
    /// Parses one input; must not panic, abort, hang or allocate beyond [`ALLOC_LIMIT`].
    pub run: fn(&[u8]),
}

/// Largest single allocation a target may make for one input (256 MiB): more is a finding
/// (the readers must check a claimed size against their input and the limits first).
pub const ALLOC_LIMIT: usize = 256 << 20;

/// A target by name.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().copied().find(|t| t.name == name)
}

/// This crate's directory (corpora and regressions live under it).
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The files of `crate_dir()/<kind>/<target>/`, sorted (empty if the directory is absent).
pub fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = crate_dir().join(kind).join(target);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

thread_local! {
    static SCRATCH: tempfile::TempDir = tempfile::tempdir().expect("temporary directory");
}

/// Writes `data` to a per-thread scratch file named `name` (its extension matters to some
/// readers: `.tar`, `.gz`) and returns its path.
pub fn scratch_file(name: &str, data: &[u8]) -> PathBuf {
    SCRATCH.with(|d| {
        let p = d.path().join(name);
        let mut f = std::fs::File::create(&p).expect("scratch file");
        f.write_all(data).expect("write scratch file");
        p
    })
}

/// A deterministic xorshift generator (the mutation loop must be reproducible from its seed).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// From a seed (any value).
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    /// Next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// Uniform in `0..n` (n ≥ 1).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// Integers that break size arithmetic, as big-endian and little-endian 4- and 8-byte
/// values.
const INTERESTING: [u64; 12] = [
    0,
    1,
    2,
    0x7f,
    0xff,
    0xffff,
    0x7fff_ffff,
    0xffff_ffff,
    1 << 31,
    1 << 62,
    (1 << 63) - 1,
    u64::MAX,
];

/// Textual values that break number parsing and counts.
const TEXT: [&str; 14] = [
    "-1",
    "0",
    "NaN",
    "inf",
    "-inf",
    "1e309",
    "4294967295",
    "18446744073709551615",
    "1000000",
    "",
    "\0",
    "abc",
    "\"",
    ",,,,",
];

/// One to four random mutations of `input` (bit flips, interesting bytes and integers,
/// insertions, deletions, truncation, duplicated or spliced chunks from `other`, textual
/// numbers), deterministic in `rng`.
pub fn mutate(input: &[u8], other: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let n = v.len();
        match rng.below(10) {
            0 if n > 0 => {
                let i = rng.below(n);
                v[i] ^= 1 << rng.below(8);
            }
            1 if n > 0 => {
                let i = rng.below(n);
                v[i] = [0u8, 0xff, 0x7f, 0x80, b'0', b'9', b',', b'\n'][rng.below(8)];
            }
            2 if n >= 4 => {
                let x = INTERESTING[rng.below(INTERESTING.len())];
                let i = rng.below(n - 3);
                let b = if rng.below(2) == 0 {
                    (x as u32).to_be_bytes()
                } else {
                    (x as u32).to_le_bytes()
                };
                v[i..i + 4].copy_from_slice(&b);
            }
            3 if n >= 8 => {
                let x = INTERESTING[rng.below(INTERESTING.len())];
                let i = rng.below(n - 7);
                v[i..i + 8].copy_from_slice(&x.to_le_bytes());
            }
            4 => {
                let i = rng.below(n + 1);
                let k = 1 + rng.below(16);
                let b: Vec<u8> = (0..k).map(|_| rng.next_u64() as u8).collect();
                v.splice(i..i, b);
            }
            5 if n > 0 => {
                let i = rng.below(n);
                let k = (1 + rng.below(32)).min(n - i);
                v.drain(i..i + k);
            }
            6 if n > 0 => v.truncate(rng.below(n)),
            7 if n > 0 => {
                let i = rng.below(n);
                let k = (1 + rng.below(64)).min(n - i);
                let chunk = v[i..i + k].to_vec();
                let j = rng.below(n + 1);
                v.splice(j..j, chunk);
            }
            8 if !other.is_empty() => {
                let i = rng.below(other.len());
                let k = (1 + rng.below(256)).min(other.len() - i);
                let j = rng.below(n + 1);
                v.splice(j..j, other[i..i + k].iter().copied());
            }
            _ => {
                // Replace a run of digits (or any position) with a textual value.
                let t = TEXT[rng.below(TEXT.len())].as_bytes();
                let start = if n > 0 { rng.below(n) } else { 0 };
                let mut end = start;
                while end < n && v[end].is_ascii_digit() {
                    end += 1;
                }
                v.splice(start..end, t.iter().copied());
            }
        }
    }
    v
}

/// Reads a file (for corpora), panicking with the path on failure (test/CLI use only).
pub fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}
