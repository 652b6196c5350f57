//! Why subsample-and-aggregate with T = 256 loses accuracy at N = 10⁶ on MNIST-1M (fig4): trains
//! 12 of the 256 teachers' shards (⌊N/256⌋ examples each, the study's preprocessing, no bias) at
//! N = 10⁴ … 10⁶ with the teachers' solver options and prints each N's mean teacher test
//! accuracy, training accuracy, pairwise agreement on the test set, L-BFGS iterations and ‖θ‖.
//! The teachers' λ is 0 (docs/study.md, as in the paper) unless `LAMBDA` is set.
//!
//! Run (after `privpred data generate mnist1m --n 1000000`):
//! `LAMBDA=0 cargo run --release -p privpred-linear --example teacher_probe`.
use privpred_data::{DatasetSpec, LoadOptions, Preprocessing, load};
use privpred_linear::methods::config::teacher_lbfgs_options;
use privpred_linear::train::{accuracy, accuracy_of, fit_logistic, predict_all};
use rayon::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let splits = load(&DatasetSpec::Mnist1m, &LoadOptions::default())?;
    let available = splits.train.n;
    let lambda: f64 = std::env::var("LAMBDA")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    println!("teachers' λ = {lambda}");
    for &n in &[10_000usize, 100_000, 300_000, 1_000_000] {
        let pre = Preprocessing {
            subsample: (n < available).then_some(n),
            ..Preprocessing::default()
        }
        .with_bias(0.0);
        let fitted = pre.fit(&splits.train, 7)?;
        let train = fitted.apply_train(&splits.train)?;
        let test = fitted.apply(&splits.test)?;
        let shard = train.n / 256;
        let t0 = std::time::Instant::now();
        let fits: Vec<_> = (0..12usize)
            .into_par_iter()
            .map(|k| {
                let idx: Vec<usize> = (k * shard..(k + 1) * shard).collect();
                let sub = train.subset(&idx);
                let f = fit_logistic(&sub, lambda, None, &teacher_lbfgs_options()).unwrap();
                let tr = accuracy(&f.model, &sub).unwrap();
                (f, tr)
            })
            .collect();
        let preds: Vec<Vec<u32>> = fits
            .iter()
            .map(|(f, _)| predict_all(&f.model, &test))
            .collect::<Result<_, _>>()?;
        let mut agree = 0.0;
        let mut pairs = 0.0;
        for a in 0..preds.len() {
            for b in a + 1..preds.len() {
                agree += preds[a]
                    .iter()
                    .zip(&preds[b])
                    .filter(|(x, y)| x == y)
                    .count() as f64
                    / test.n as f64;
                pairs += 1.0;
            }
        }
        let accs: Vec<f64> = preds.iter().map(|p| accuracy_of(p, &test.labels)).collect();
        let trs: Vec<f64> = fits.iter().map(|(_, t)| *t).collect();
        let its: Vec<usize> = fits.iter().map(|(f, _)| f.lbfgs.iterations).collect();
        let norms: Vec<f64> = fits
            .iter()
            .map(|(f, _)| f.model.theta.iter().map(|v| v * v).sum::<f64>().sqrt())
            .collect();
        println!(
            "N={n} shard={shard}: test acc mean {:.2} % (min {:.2}, max {:.2}), train acc mean {:.2} %, pairwise agreement {:.2} %, iterations {:?}, terminations {:?}, ‖θ‖ mean {:.1}, {:.1} s",
            100.0 * accs.iter().sum::<f64>() / accs.len() as f64,
            100.0 * accs.iter().cloned().fold(1.0, f64::min),
            100.0 * accs.iter().cloned().fold(0.0, f64::max),
            100.0 * trs.iter().sum::<f64>() / trs.len() as f64,
            100.0 * agree / pairs,
            its,
            fits.iter()
                .map(|(f, _)| format!("{:?}", f.lbfgs.termination))
                .collect::<std::collections::BTreeSet<_>>(),
            norms.iter().sum::<f64>() / norms.len() as f64,
            t0.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
