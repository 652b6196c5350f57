//! Peak resident memory of loading + preprocessing a dataset (Linux: `/proc/self/status`).
//!
//! ```text
//! cargo run --release -p privpred-data --example load_peak -- mnist1m [--pca K] [--bias]
//!     [--subsample N] [--classes C] [--borrowed]
//! ```
//! Prints VmHWM (peak RSS) after loading, fitting and preprocessing the training split, and
//! the size of one f32 copy of the raw training features for comparison. By default the
//! training split goes through the owned, in-place path
//! ([`FittedPreprocessing::apply_train_owned`]); `--borrowed` uses `apply_train(&train)`.

use privpred_data::preprocess::Preprocessing;
use privpred_data::{DatasetSpec, LoadOptions, load};

fn status_kib(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or("?".into(), |k| format!("{:.0} MiB", k as f64 / 1024.0))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "mnist1m".into());
    let mut recipe = Preprocessing::default();
    let mut borrowed = false;
    while let Some(a) = args.next() {
        let mut num = || -> Result<usize, Box<dyn std::error::Error>> {
            Ok(args.next().ok_or("missing value")?.parse()?)
        };
        match a.as_str() {
            "--pca" => recipe.pca = Some(num()?),
            "--subsample" => recipe.subsample = Some(num()?),
            "--classes" => recipe.classes = Some(num()?),
            "--bias" => recipe.bias = true,
            "--borrowed" => borrowed = true,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let t = std::time::Instant::now();
    let s = load(&DatasetSpec::parse(&name)?, &LoadOptions::default())?;
    let copy = (s.train.features.len() * 4) as f64 / (1 << 20) as f64;
    println!(
        "loaded {name}: {} × {} (one f32 copy of the training features: {copy:.0} MiB) in {:.1} s; peak RSS {}",
        s.train.n,
        s.train.d,
        t.elapsed().as_secs_f64(),
        mib(status_kib("VmHWM:"))
    );
    let fitted = recipe.fit(&s.train, 0)?;
    println!("fitted; peak RSS {}", mib(status_kib("VmHWM:")));
    let train = if borrowed {
        fitted.apply_train(&s.train)?
    } else {
        fitted.apply_train_owned(s.train)?
    };
    let test = fitted.apply_owned(s.test)?;
    println!(
        "preprocessed ({}): train {} × {}, test {} × {} in {:.1} s total; peak RSS {}, RSS now {}",
        if borrowed {
            "borrowed"
        } else {
            "owned, in place"
        },
        train.n,
        train.d,
        test.n,
        test.d,
        t.elapsed().as_secs_f64(),
        mib(status_kib("VmHWM:")),
        mib(status_kib("VmRSS:"))
    );
    Ok(())
}
