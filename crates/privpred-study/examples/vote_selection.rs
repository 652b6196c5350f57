//! Subsample-and-aggregate with δ = 0: the exponential mechanism (`corrected`) and
//! permute-and-flip (`tight`) over the votes of T = 256 linear teachers on MNIST (the study's
//! preprocessing, bias on), both at β = ε/(2B); test accuracy mean ± std of 20 draws on one
//! partition. `cargo run --release -p privpred-study --example vote_selection`.

use privpred_core::{Mechanism, Scores, seeded_rng};
use privpred_data::{DatasetSpec, LoadOptions, Preprocessing};
use privpred_linear::methods::{teacher_lbfgs_options, train_teachers};
use privpred_linear::train::accuracy_of;
use rayon::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let raw = privpred_data::load::load(&DatasetSpec::Mnist, &LoadOptions::default())?;
    let recipe = Preprocessing {
        bias: true,
        ..Preprocessing::default()
    };
    let fitted = recipe.fit(&raw.train, 1)?;
    let train = fitted.apply_train(&raw.train)?;
    let test = fitted.apply(&raw.test)?;
    let t0 = std::time::Instant::now();
    let teachers = train_teachers(
        &train,
        256,
        0.0,
        &teacher_lbfgs_options(),
        &mut seeded_rng(3),
    )?;
    let votes = teachers.vote_matrix(&test)?;
    eprintln!("teachers and votes in {:.0} s", t0.elapsed().as_secs_f64());
    let major = accuracy_of(&votes.majority(), &test.labels);
    println!("non-private majority vote: {:.2} %\n", 100.0 * major);
    println!("| ε | B | exponential (corrected) | permute-and-flip (tight) |");
    println!("|---|---|---|---|");
    for eps in [0.1, 1.0, 10.0] {
        for b in [1u64, 10, 100, 1000] {
            let beta = eps / (2.0 * b as f64);
            let run = |noise: Mechanism, salt: u64| {
                let a: Vec<f64> = (0..20u64)
                    .into_par_iter()
                    .map(|r| {
                        let mut rng = seeded_rng(salt * 1000 + r);
                        accuracy_of(
                            &votes.private_labels_with(&noise, &mut rng).unwrap(),
                            &test.labels,
                        )
                    })
                    .collect();
                let m = a.iter().sum::<f64>() / a.len() as f64;
                let s =
                    (a.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (a.len() - 1) as f64).sqrt();
                format!("{:.2} ± {:.2} %", 100.0 * m, 100.0 * s)
            };
            println!(
                "| {eps} | {b} | {} | {} |",
                run(
                    Mechanism::Exponential {
                        beta,
                        over: Scores::Votes
                    },
                    1
                ),
                run(
                    Mechanism::PermuteAndFlip {
                        beta,
                        over: Scores::Votes
                    },
                    2
                )
            );
        }
    }
    Ok(())
}
