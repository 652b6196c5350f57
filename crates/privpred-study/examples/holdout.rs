//! Regenerates the hold-out tables of docs/study.md. Everything is measured on the
//! study's 10 % hold-out of the training set, never on the test set.
//!
//! ```sh
//! # the bias value: every method × ε × bias value, best λ by mean hold-out accuracy
//! RAYON_NUM_THREADS=2 cargo run --release -p privpred-study --example holdout -- bias \
//!     --datasets mnist,fashion-mnist --out results/holdout-bias.jsonl
//! # cross-validation draws: how often each λ is picked across 100 selections with k draws
//! RAYON_NUM_THREADS=2 cargo run --release -p privpred-study --example holdout -- cv \
//!     --epsilons 0.1,1 --out results/holdout-cv.jsonl
//! ```
//!
//! Options (both modes): `--datasets A,B`, `--epsilons E,…`, `--biases V,…` (bias mode; cv
//! mode takes one `--bias V`), `--draws K` (bias mode, per λ; default 20), `--lp-draws K`
//! (loss perturbation's, each a fit; default 5), `--pool P` (cv mode: draws per λ the
//! selections sample from; default 300), `--ks K,…` (cv mode), `--selections S`, `--teachers T`,
//! `--budget B`, `--seed S`, `--quick` (5,000 training examples: a smoke test), `--methods
//! model-sensitivity,…`, `--out FILE` (JSON lines of every point).

use privpred_core::Method;
use privpred_study::figures::{LAMBDA_GRID, fmt_num};
use privpred_study::holdout::{self, HoldoutPoint};
use privpred_study::linear::{BIAS_DEFAULT, LinearOptions, LinearRunner};
use privpred_study::summary::mean_std;
use std::collections::HashMap;
use std::io::Write;

type Res<T> = std::result::Result<T, Box<dyn std::error::Error>>;

struct Args {
    mode: String,
    opts: HashMap<String, String>,
    quick: bool,
}

impl Args {
    fn parse() -> Res<Args> {
        let mut it = std::env::args().skip(1);
        let mode = it
            .next()
            .ok_or("usage: holdout bias|cv [--option value …]")?;
        let mut opts = HashMap::new();
        let mut quick = false;
        while let Some(a) = it.next() {
            if a == "--quick" {
                quick = true;
                continue;
            }
            let k = a.strip_prefix("--").ok_or(format!("unexpected `{a}`"))?;
            let v = it.next().ok_or(format!("--{k} needs a value"))?;
            opts.insert(k.to_string(), v);
        }
        Ok(Args { mode, opts, quick })
    }
    fn list<T: std::str::FromStr>(&self, k: &str, default: &str) -> Res<Vec<T>> {
        self.opts
            .get(k)
            .map_or(default, |s| s.as_str())
            .split(',')
            .map(|s| {
                s.trim()
                    .parse::<T>()
                    .map_err(|_| format!("bad --{k} `{s}`").into())
            })
            .collect()
    }
    fn one<T: std::str::FromStr>(&self, k: &str, default: T) -> Res<T> {
        match self.opts.get(k) {
            Some(s) => s.parse().map_err(|_| format!("bad --{k} `{s}`").into()),
            None => Ok(default),
        }
    }
}

fn runner(dataset: &str, bias: f64, quick: bool) -> LinearRunner {
    let mut o = LinearOptions::new(quick);
    o.dataset = Some(dataset.to_string());
    o.bias = bias;
    LinearRunner::new(o)
}

fn method(s: &str) -> Res<Method> {
    Ok(match s {
        "model-sensitivity" => Method::ModelSensitivity,
        "prediction-sensitivity" => Method::PredictionSensitivity,
        "loss-perturbation" => Method::LossPerturbation,
        "subsample-aggregate" => Method::SubsampleAggregate,
        _ => return Err(format!("unknown method `{s}`").into()),
    })
}

fn best(points: &[HoldoutPoint]) -> (usize, f64, f64) {
    let mut b = (0, f64::NEG_INFINITY, 0.0);
    for (i, p) in points.iter().enumerate() {
        let (m, s) = mean_std(&p.accuracies);
        if m > b.1 {
            b = (i, m, s);
        }
    }
    b
}

fn bias_mode(a: &Args, out: &mut dyn Write) -> Res<()> {
    let datasets: Vec<String> = a.list("datasets", "mnist,fashion-mnist")?;
    let epsilons: Vec<f64> = a.list("epsilons", "0.1,1,10")?;
    let biases: Vec<f64> = a.list("biases", "0,0.05,0.1,0.2,0.7071067811865476")?;
    let methods: Vec<String> = a.list(
        "methods",
        "model-sensitivity,prediction-sensitivity,loss-perturbation,subsample-aggregate",
    )?;
    let (draws, lp_draws) = (a.one("draws", 20usize)?, a.one("lp-draws", 5usize)?);
    let (teachers, budget, seed) = (
        a.one("teachers", 256usize)?,
        a.one("budget", 100u64)?,
        a.one("seed", 0u64)?,
    );
    // (dataset, method, ε) → per bias: "mean ± std (λ)"
    let mut table: Vec<(String, String, f64, Vec<String>)> = Vec::new();
    for ds in &datasets {
        for &bias in &biases {
            privpred_data::preprocess::check_bias(bias)?;
            let r = runner(ds, bias, a.quick);
            let t0 = std::time::Instant::now();
            for m in &methods {
                let m = method(m)?;
                let votes = if m == Method::SubsampleAggregate {
                    let g = holdout::group(m, 1.0, 0.0, budget, teachers);
                    Some(holdout::holdout_votes(&r, &g, teachers, seed)?)
                } else {
                    None
                };
                for &eps in &epsilons {
                    let g = holdout::group(m, eps, 0.0, budget, teachers);
                    let points = match &votes {
                        Some(v) => vec![holdout::votes_draws(&r, &g, v, draws, seed)?],
                        None => {
                            let k = if m == Method::LossPerturbation {
                                lp_draws
                            } else {
                                draws
                            };
                            holdout::lambda_draws(&r, &g, &LAMBDA_GRID, k, seed)?
                        }
                    };
                    for p in &points {
                        let line = serde_json::json!({"dataset": ds, "method": m.name(), "epsilon": eps, "delta": 0.0, "budget": budget, "bias": bias, "lambda": p.lambda, "accuracies": p.accuracies});
                        writeln!(out, "{line}")?;
                    }
                    let (i, mean, std) = best(&points);
                    let lam = points[i]
                        .lambda
                        .map_or(String::new(), |l| format!(" (λ {})", fmt_num(l)));
                    let cell = format!("{:.1} ± {:.1}{lam}", 100.0 * mean, 100.0 * std);
                    eprintln!("{ds} bias {bias:.4} {} ε {eps}: {cell}", m.name());
                    match table
                        .iter_mut()
                        .find(|(d, mm, e, _)| d == ds && mm == m.name() && *e == eps)
                    {
                        Some(row) => row.3.push(cell),
                        None => table.push((ds.clone(), m.name().to_string(), eps, vec![cell])),
                    }
                }
            }
            eprintln!("{ds} bias {bias}: {:.0} s", t0.elapsed().as_secs_f64());
        }
    }
    let head: Vec<String> = biases
        .iter()
        .map(|b| format!("v = {}", fmt_num(*b)))
        .collect();
    println!("| dataset | method | ε | {} |", head.join(" | "));
    println!("|---|---|---|{}", "---|".repeat(biases.len()));
    for (d, m, e, cells) in &table {
        println!("| {d} | {m} | {} | {} |", fmt_num(*e), cells.join(" | "));
    }
    Ok(())
}

fn cv_mode(a: &Args, out: &mut dyn Write) -> Res<()> {
    let datasets: Vec<String> = a.list("datasets", "mnist")?;
    let epsilons: Vec<f64> = a.list("epsilons", "0.1,1")?;
    let ks: Vec<usize> = a.list("ks", "1,3,5,10,20")?;
    let m = method(&a.one("method", "model-sensitivity".to_string())?)?;
    let bias = privpred_data::preprocess::check_bias(a.one("bias", BIAS_DEFAULT)?)?;
    let (pool, selections, seed) = (
        a.one("pool", 300usize)?,
        a.one("selections", 100usize)?,
        a.one("seed", 0u64)?,
    );
    let lam: Vec<String> = LAMBDA_GRID.iter().map(|l| fmt_num(*l)).collect();
    for ds in &datasets {
        let r = runner(ds, bias, a.quick);
        for &eps in &epsilons {
            let g = holdout::group(m, eps, 0.0, 100, 256);
            let points = holdout::lambda_draws(&r, &g, &LAMBDA_GRID, pool, seed)?;
            for p in &points {
                let line = serde_json::json!({"dataset": ds, "method": m.name(), "epsilon": eps, "bias": bias, "lambda": p.lambda, "accuracies": p.accuracies});
                writeln!(out, "{line}")?;
            }
            let pools: Vec<Vec<f64>> = points.iter().map(|p| p.accuracies.clone()).collect();
            let means: Vec<f64> = pools.iter().map(|p| mean_std(p).0).collect();
            let top = means.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            println!(
                "\n{ds}, {}, ε = {}, bias {}: hold-out accuracy per λ (mean ± std of {pool} draws)\n",
                m.name(),
                fmt_num(eps),
                fmt_num(bias)
            );
            println!("| λ | {} |", lam.join(" | "));
            println!("|---|{}", "---|".repeat(lam.len()));
            let cells: Vec<String> = pools
                .iter()
                .map(|p| {
                    let (mm, s) = mean_std(p);
                    format!("{:.1} ± {:.1}", 100.0 * mm, 100.0 * s)
                })
                .collect();
            println!("| accuracy % | {} |", cells.join(" | "));
            for &k in &ks {
                let counts = holdout::pick_counts(&pools, k, selections, seed);
                let expected: f64 = counts
                    .iter()
                    .zip(&means)
                    .map(|(&c, &mm)| c as f64 * mm)
                    .sum::<f64>()
                    / selections as f64;
                let c: Vec<String> = counts.iter().map(|c| c.to_string()).collect();
                println!(
                    "| k = {k}: picks of {selections} (mean accuracy of the pick {:.1} %, best λ {:.1} %) | {} |",
                    100.0 * expected,
                    100.0 * top,
                    c.join(" | ")
                );
            }
        }
    }
    Ok(())
}

fn main() -> Res<()> {
    let a = Args::parse()?;
    let mut out: Box<dyn Write> = match a.opts.get("out") {
        Some(p) => Box::new(std::io::BufWriter::new(std::fs::File::create(p)?)),
        None => Box::new(std::io::sink()),
    };
    match a.mode.as_str() {
        "bias" => bias_mode(&a, out.as_mut())?,
        "cv" => cv_mode(&a, out.as_mut())?,
        m => return Err(format!("unknown mode `{m}`: bias or cv").into()),
    }
    out.flush()?;
    Ok(())
}
