//! `privpred-fuzz`: the mutation loop over the seed corpora, a replay of one file, and the
//! command-line bad-input sweep. See the crate documentation (`src/lib.rs`).
//!
//! ```text
//! privpred-fuzz run [--seconds S] [--seed N] [--out DIR] [TARGET…]   # default: every target, 45 s each
//! privpred-fuzz replay TARGET FILE…
//! privpred-fuzz sweep --bin target/release/privpred [--cases N] [--timeout S] [--out DIR]
//! ```
//! Findings (panics, allocations over the limit, hangs) are written to `DIR/<target>/`
//! (default `fuzz-out/`) and the exit status is 1. An abort (e.g. a failed allocation) ends the
//! process: the input that caused it is `DIR/<target>/current`.

use privpred_fuzz::{ALLOC_LIMIT, Rng, TARGETS, Target, inputs, mutate, read, target};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

struct Counting;
static LARGEST: AtomicUsize = AtomicUsize::new(0);
// SAFETY: forwards to the system allocator; only records the largest size requested.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        unsafe { System.alloc_zeroed(l) }
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

/// One input per call longer than this is a hang.
const HANG: Duration = Duration::from_secs(10);

fn sha8(d: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(d)
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Runs one input; `Err(kind, message)` for a finding.
fn exec(t: Target, data: &[u8]) -> Result<(), (&'static str, String)> {
    LARGEST.store(0, Ordering::SeqCst);
    let r = std::panic::catch_unwind(|| (t.run)(data));
    let big = LARGEST.load(Ordering::SeqCst);
    match r {
        Err(e) => {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(("panic", msg))
        }
        Ok(()) if big > ALLOC_LIMIT => Err(("alloc", format!("{big} bytes in one allocation"))),
        Ok(()) => Ok(()),
    }
}

fn run(args: &[String]) -> i32 {
    let mut seconds = 45u64;
    let mut seed = 1u64;
    let mut out = PathBuf::from("fuzz-out");
    let mut names = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => seconds = it.next().and_then(|v| v.parse().ok()).unwrap_or(45),
            "--seed" => seed = it.next().and_then(|v| v.parse().ok()).unwrap_or(1),
            "--out" => out = it.next().map(PathBuf::from).unwrap_or(out),
            n => names.push(n.to_string()),
        }
    }
    let targets: Vec<Target> = if names.is_empty() {
        TARGETS.to_vec()
    } else {
        match names.iter().map(|n| target(n).ok_or(n)).collect() {
            Ok(v) => v,
            Err(n) => {
                eprintln!(
                    "unknown target {n}; targets: {}",
                    TARGETS
                        .iter()
                        .map(|t| t.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                return 2;
            }
        }
    };
    std::panic::set_hook(Box::new(|_| {}));
    // A watchdog: an input running longer than HANG is reported and ends the process.
    static STARTED_MS: AtomicU64 = AtomicU64::new(0);
    let t0 = Instant::now();
    let hang_out = out.clone();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let s = STARTED_MS.load(Ordering::SeqCst);
            if s > 0 && t0.elapsed().as_millis() as u64 > s + HANG.as_millis() as u64 {
                eprintln!(
                    "HANG: an input ran over {HANG:?}; it is {}/<target>/current",
                    hang_out.display()
                );
                std::process::exit(1);
            }
        }
    });
    let mut findings = 0;
    for t in targets {
        let dir = out.join(t.name);
        std::fs::create_dir_all(&dir).expect("output directory");
        let mut pool: Vec<Vec<u8>> = inputs("corpus", t.name)
            .iter()
            .chain(inputs("regressions", t.name).iter())
            .map(|p| read(p))
            .collect();
        if pool.is_empty() {
            pool.push(Vec::new());
        }
        let base = pool.len();
        let mut rng = Rng::new(seed ^ (t.name.len() as u64) << 32);
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let (mut n, mut found) = (0u64, 0);
        let current = dir.join("current");
        while Instant::now() < deadline {
            let a = rng.below(pool.len());
            let b = rng.below(pool.len());
            let input = mutate(&pool[a], &pool[b], &mut rng);
            std::fs::write(&current, &input).expect("write current input");
            STARTED_MS.store(t0.elapsed().as_millis() as u64 + 1, Ordering::SeqCst);
            let r = exec(t, &input);
            STARTED_MS.store(0, Ordering::SeqCst);
            n += 1;
            if let Err((kind, msg)) = r {
                let p = dir.join(format!("{kind}-{}", sha8(&input)));
                std::fs::write(&p, &input).expect("write finding");
                eprintln!("{}: {kind}: {msg} (input {})", t.name, p.display());
                found += 1;
            }
            // Keep some mutants as stepping stones (stacked mutations), bounded.
            if rng.below(8) == 0 && input.len() < 1 << 20 {
                if pool.len() < base + 64 {
                    pool.push(input);
                } else {
                    let k = base + rng.below(64);
                    pool[k] = input;
                }
            }
        }
        let _ = std::fs::remove_file(&current);
        println!("{}: {n} inputs in {seconds} s, {found} findings", t.name);
        findings += found;
    }
    i32::from(findings > 0)
}

fn replay(args: &[String]) -> i32 {
    let Some(t) = args.first().and_then(|n| target(n)) else {
        eprintln!("usage: privpred-fuzz replay TARGET FILE…");
        return 2;
    };
    let mut bad = 0;
    for f in &args[1..] {
        match exec(t, &read(Path::new(f))) {
            Ok(()) => println!("{f}: ok"),
            Err((k, m)) => {
                println!("{f}: {k}: {m}");
                bad += 1;
            }
        }
    }
    i32::from(bad > 0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("run") => run(&args[1..]),
        Some("replay") => replay(&args[1..]),
        Some("sweep") => privpred_fuzz::sweep::main(&args[1..]),
        Some("seeds") => {
            privpred_fuzz::seeds::write(&privpred_fuzz::crate_dir().join("corpus"));
            0
        }
        _ => {
            eprintln!(
                "usage: privpred-fuzz run [--seconds S] [--seed N] [--out DIR] [TARGET…] | replay TARGET FILE… | sweep --bin PATH [--cases N] [--timeout S]"
            );
            2
        }
    };
    std::process::exit(code);
}
