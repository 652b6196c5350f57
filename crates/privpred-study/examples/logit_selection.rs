//! Label-only prediction sensitivity with δ = 0: ℓ2-Laplace noise on the
//! whole logit vector (β = ε/(BΔ), then arg-max) against a selection over the logits at
//! β = ε/(B·√2·Δ) — the exponential mechanism and permute-and-flip — on MNIST with the
//! study's preprocessing (bias feature on) and λ grid.
//!
//! λ is chosen per (mechanism, ε, B) by the mean hold-out accuracy of `HOLD_DRAWS` draws (fit
//! on the 90 % part, scored on the 10 % training hold-out, never the test set); test accuracy
//! is then the mean ± std of `TEST_DRAWS` draws on the full-data fit at that λ.
//!
//! `cargo run --release -p privpred-study --example logit_selection` (MNIST cached).

use privpred_core::calibrate::{CalibrationRequest, calibrate, logit_selection_beta};
use privpred_core::{Budget, CalibrationMode, Mechanism, Method, Privacy, Scores, seeded_rng};
use privpred_data::{DatasetSpec, LoadOptions, Preprocessing};
use privpred_linear::train::{accuracy_of, logits_all};
use privpred_linear::{GradNorm, LbfgsOptions, fit_logistic};
use rayon::prelude::*;

const LAMBDAS: [f64; 10] = [1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 1e-1, 5e-1];
const HOLD_DRAWS: usize = 5;
const TEST_DRAWS: usize = 20;

fn draw(logits: &[f64], c: usize, noise: &Mechanism, rng: &mut privpred_core::PrivRng) -> Vec<u32> {
    let mut out = Vec::with_capacity(logits.len() / c);
    let mut buf = vec![0.0; c];
    for l in logits.chunks_exact(c) {
        if noise.is_selection() {
            out.push(noise.select(rng, l).unwrap() as u32);
        } else {
            buf.copy_from_slice(l);
            noise.perturb(rng, &mut buf).unwrap();
            let mut b = 0;
            for k in 1..c {
                if buf[k] > buf[b] {
                    b = k;
                }
            }
            out.push(b as u32);
        }
    }
    out
}

fn mean_std(v: &[f64]) -> (f64, f64) {
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let s = (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1).max(1) as f64).sqrt();
    (m, s)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let raw = privpred_data::load::load(&DatasetSpec::Mnist, &LoadOptions::default())?;
    let recipe = Preprocessing {
        bias: true,
        ..Preprocessing::default()
    };
    let fitted = recipe.fit(&raw.train, 1)?;
    let train = fitted.apply_train(&raw.train)?;
    let test = fitted.apply(&raw.test)?;
    let (train90, hold) = privpred_data::split::holdout_unit(&train, 0.1, 2);
    let c = train.classes;
    let opts = LbfgsOptions {
        norm: GradNorm::Max,
        ..LbfgsOptions::default()
    };
    eprintln!(
        "fitting {} λ values twice (N = {}, D = {})",
        LAMBDAS.len(),
        train.n,
        train.d
    );
    let t0 = std::time::Instant::now();
    let fits: Vec<(Vec<f64>, Vec<f64>)> = LAMBDAS
        .par_iter()
        .map(|&l| {
            let m90 = fit_logistic(&train90, l, None, &opts).unwrap().model;
            let m = fit_logistic(&train, l, Some(&m90), &opts).unwrap().model;
            (
                logits_all(&m90, &hold).unwrap(),
                logits_all(&m, &test).unwrap(),
            )
        })
        .collect();
    eprintln!("fits done in {:.0} s", t0.elapsed().as_secs_f64());
    println!(
        "| ε | B | mechanism | λ (hold-out) | hold-out acc. | test accuracy (mean ± std, {TEST_DRAWS} draws) |"
    );
    println!("|---|---|---|---|---|---|");
    for eps in [0.1, 1.0, 10.0] {
        for b in [1u64, 10, 100, 1000] {
            for mech in ["l2-laplace", "exponential", "permute-and-flip"] {
                let noise_at = |n: usize, l: f64| -> Mechanism {
                    let sens = 2.0 * std::f64::consts::SQRT_2 / (n as f64 * l);
                    match mech {
                        "l2-laplace" => {
                            let mut r = CalibrationRequest::new(
                                Method::PredictionSensitivity,
                                CalibrationMode::Corrected,
                                Privacy::new(eps, 0.0).unwrap(),
                            );
                            r.budget = Budget::finite(b).unwrap();
                            r.n = Some(n);
                            r.lambda = Some(l);
                            calibrate(&r).unwrap().mechanism
                        }
                        "exponential" => Mechanism::Exponential {
                            beta: logit_selection_beta(eps, b, sens),
                            over: Scores::Logits,
                        },
                        _ => Mechanism::PermuteAndFlip {
                            beta: logit_selection_beta(eps, b, sens),
                            over: Scores::Logits,
                        },
                    }
                };
                let seed = (eps * 1000.0) as u64 * 1_000_003 + b * 7 + mech.len() as u64;
                let hold_scores: Vec<f64> = LAMBDAS
                    .par_iter()
                    .enumerate()
                    .map(|(i, &l)| {
                        let noise = noise_at(train90.n, l);
                        let mut rng = seeded_rng(seed ^ (i as u64) << 32);
                        let accs: Vec<f64> = (0..HOLD_DRAWS)
                            .map(|_| {
                                accuracy_of(&draw(&fits[i].0, c, &noise, &mut rng), &hold.labels)
                            })
                            .collect();
                        mean_std(&accs).0
                    })
                    .collect();
                let best = (0..LAMBDAS.len()).fold(0, |b, i| {
                    if hold_scores[i] > hold_scores[b] {
                        i
                    } else {
                        b
                    }
                });
                let noise = noise_at(train.n, LAMBDAS[best]);
                let accs: Vec<f64> = (0..TEST_DRAWS)
                    .into_par_iter()
                    .map(|r| {
                        let mut rng = seeded_rng(seed.wrapping_mul(31) + r as u64);
                        accuracy_of(&draw(&fits[best].1, c, &noise, &mut rng), &test.labels)
                    })
                    .collect();
                let (m, s) = mean_std(&accs);
                println!(
                    "| {eps} | {b} | {mech} | {:e} | {:.2} % | {:.2} ± {:.2} % |",
                    LAMBDAS[best],
                    100.0 * hold_scores[best],
                    100.0 * m,
                    100.0 * s
                );
            }
        }
    }
    Ok(())
}
