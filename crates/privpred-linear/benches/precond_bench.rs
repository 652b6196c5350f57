//! L-BFGS evaluations per loss-perturbation fit on real MNIST, plain vs the Kronecker-factored
//! preconditioner (`privpred_linear::precond`), counted in evaluations of the objective
//! (machine-independent; wall time on a loaded machine means nothing). Prints a table: mean ±
//! std of the evaluations over the noise draws for each variant, and the one-off setup costs
//! in evaluation-equivalents (measured wall time of the setup ÷ measured time per evaluation in
//! the same process).
//!
//! Data as in the study: pixels/255, bias feature, per-example normalisation into the unit
//! ball; N = 60,000, d = 785, C = 10; stopping rule max|∇ᵢ| ≤ 1e-4.
//!
//! Settings: (a) fig1b-like ε = 0.6, δ = 1e-5, corrected (Gaussian) at λ = 5e-4; (b) fig1a-like
//! ε = 1, δ = 0, corrected (ℓ2-Laplace-type) at λ = 5e-4; (c) fig6a-like ε = 1, δ = 0 at fixed
//! λ ∈ {1e-6, 1e-4, 1e-2}; plus the non-private fit from zero at λ = 5e-4.
//!
//! Run: `cargo bench -p privpred-linear --bench precond_bench [-- DRAWS [SETTING...]]`
//! (SETTING: a, b, c1e-6, c1e-4, c1e-2, np; default all, 5 draws).

use privpred_core::{Budget, CalibrationMode, Method, Privacy};
use privpred_data::{DatasetSpec, LoadOptions, Preprocessing, load};
use privpred_linear::kernel::Design;
use privpred_linear::methods::{
    LossPerturbationPreconditioner, LpStart, loss_perturbation_fit_preconditioned,
    loss_perturbation_fit_report, loss_perturbation_rho_eff,
};
use privpred_linear::precond::{DataMoment, KfacPreconditioner};
use privpred_linear::train::Objective;
use privpred_linear::{
    GradNorm, LbfgsOptions, LinearModel, PrecondScaling, Preconditioned, TrainParams, fit_logistic,
};
use rand::SeedableRng;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

fn mean_std(v: &[usize]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let m = v.iter().sum::<usize>() as f64 / n;
    let var = v.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (m, var.sqrt())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let draws: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(5);
    let wanted: Vec<String> = args
        .iter()
        .filter(|a| a.parse::<usize>().is_err())
        .cloned()
        .collect();
    let want = |s: &str| wanted.is_empty() || wanted.iter().any(|w| w == s);

    let splits = load(&DatasetSpec::Mnist, &LoadOptions::default())?;
    let recipe = Preprocessing {
        bias: true,
        ..Preprocessing::default()
    };
    let train = recipe.fit(&splits.train, 0)?.apply_train(&splits.train)?;
    let (n, d, c) = (train.n, train.d, train.classes);
    let design = Design::new(&train.features, &train.labels, d, c);
    println!(
        "MNIST: N = {n}, d = {d}, C = {c}, {draws} noise draws per setting, threads = {}",
        rayon::current_num_threads()
    );
    let opts = LbfgsOptions {
        norm: GradNorm::Max,
        ..LbfgsOptions::default()
    };

    // time per evaluation (for the setup costs in evaluation-equivalents)
    let mut eval_secs = Vec::new();
    let t = Instant::now();
    let moment = Arc::new(DataMoment::new(&design)?);
    let moment_s = t.elapsed().as_secs_f64();
    println!(
        "data moment Σ = XᵀX/N + eigendecomposition: {moment_s:.2} s; top eigenvalues {:?}",
        &moment.eigenvalues()[..4]
    );

    let mut warm: HashMap<u64, LinearModel> = HashMap::new();
    let mut warm_fit = |lambda: f64,
                        eval_secs: &mut Vec<f64>|
     -> Result<LinearModel, Box<dyn std::error::Error>> {
        if let Some(m) = warm.get(&lambda.to_bits()) {
            return Ok(m.clone());
        }
        let t = Instant::now();
        let f = fit_logistic(&train, lambda, None, &opts)?;
        let s = t.elapsed().as_secs_f64();
        eval_secs.push(s / f.lbfgs.evaluations as f64);
        println!(
            "warm model λ = {lambda:e}: {} evaluations, {s:.1} s, {:?}",
            f.lbfgs.evaluations, f.lbfgs.termination
        );
        warm.insert(lambda.to_bits(), f.model.clone());
        Ok(f.model)
    };

    let mut rows: Vec<String> = Vec::new();
    let mut setup_rows: Vec<(String, f64)> =
        vec![("data moment (once per data set)".into(), moment_s)];
    let settings: [(&str, &str, f64, f64, f64); 5] = [
        ("a", "(a) fig1b-like ε=0.6 δ=1e-5 λ=5e-4", 0.6, 1e-5, 5e-4),
        ("b", "(b) fig1a-like ε=1 δ=0 λ=5e-4", 1.0, 0.0, 5e-4),
        ("c1e-6", "(c) fig6a-like ε=1 δ=0 λ=1e-6", 1.0, 0.0, 1e-6),
        ("c1e-4", "(c) fig6a-like ε=1 δ=0 λ=1e-4", 1.0, 0.0, 1e-4),
        ("c1e-2", "(c) fig6a-like ε=1 δ=0 λ=1e-2", 1.0, 0.0, 1e-2),
    ];
    for (tag, label, eps, delta, lambda) in settings {
        if !want(tag) {
            continue;
        }
        let m = warm_fit(lambda, &mut eval_secs)?;
        let cfg = privpred_core::ParamGuard::check(
            TrainParams::new(
                Method::LossPerturbation,
                CalibrationMode::Corrected,
                Privacy::new(eps, delta)?,
                Budget::Unlimited,
            )
            .lambda(lambda),
        )?;
        let cal = privpred_core::calibrate::calibrate(&cfg.request(n, c))?;
        let rho_eff = loss_perturbation_rho_eff(&cal, lambda, n, c);
        let t = Instant::now();
        let mut pre = LossPerturbationPreconditioner::new(&train, moment.clone(), &m, rho_eff)?;
        let setup_s = t.elapsed().as_secs_f64();
        setup_rows.push((
            format!("LP preconditioner {tag} (per λ, ρ_eff, warm model)"),
            setup_s,
        ));
        println!(
            "{label}: noise {:?}, ρ_eff/N = {:.3e}, A eigenvalues {}",
            cal.noise(),
            rho_eff / n as f64,
            pre.preconditioner()
                .class_eigenvalues()
                .iter()
                .map(|v| format!("{v:.2e}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let variants: [(&str, Option<(LpStart, PrecondScaling)>); 5] = [
            ("plain, θw − b/ρ (today)", None),
            ("P, θw − b/ρ", Some((LpStart::Shift, PrecondScaling::None))),
            (
                "P, Newton start",
                Some((LpStart::Newton, PrecondScaling::None)),
            ),
            (
                "γP, θw − b/ρ",
                Some((LpStart::Shift, PrecondScaling::Scaled)),
            ),
            (
                "γP, Newton start",
                Some((LpStart::Newton, PrecondScaling::Scaled)),
            ),
        ];
        for (vname, v) in variants {
            let mut evals = Vec::new();
            let mut thetas = Vec::new();
            for r in 0..draws {
                let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1000 + r as u64);
                let t = Instant::now();
                let (model, rep) = match v {
                    None => loss_perturbation_fit_report(
                        &train,
                        &cal,
                        lambda,
                        Some(&m),
                        &opts,
                        &mut rng,
                    )?,
                    Some((start, scaling)) => {
                        pre.start = start;
                        pre.scaling = scaling;
                        loss_perturbation_fit_preconditioned(
                            &train, &cal, lambda, &pre, &opts, &mut rng,
                        )?
                    }
                };
                if v.is_none() {
                    eval_secs.push(t.elapsed().as_secs_f64() / rep.evaluations as f64);
                }
                evals.push(rep.evaluations);
                thetas.push((model.theta, rep.termination));
            }
            let (mu, sd) = mean_std(&evals);
            let terms: Vec<String> = thetas.iter().map(|(_, t)| format!("{t:?}")).collect();
            let row = format!(
                "| {label} | {vname} | {mu:.1} ± {sd:.1} | {evals:?} | {} |",
                terms.join(",")
            );
            println!("{row}");
            rows.push(row);
        }
    }
    if want("np") {
        let lambda = 5e-4;
        for (vname, pre) in [("plain from 0", false), ("P from 0 (K-FAC at θ = 0)", true)] {
            let obj = Objective::new(design.clone(), lambda);
            let t = Instant::now();
            let p = if pre {
                Some(KfacPreconditioner::at(
                    moment.clone(),
                    &design,
                    &vec![0.0; d * c],
                    lambda,
                )?)
            } else {
                None
            };
            let setup = t.elapsed().as_secs_f64();
            let pc = p.as_ref().map(|p| Preconditioned {
                p,
                scaling: PrecondScaling::None,
            });
            let t = Instant::now();
            let (_, rep) = obj.minimize_with(None, &opts, pc)?;
            if !pre {
                eval_secs.push(t.elapsed().as_secs_f64() / rep.evaluations as f64);
            } else {
                setup_rows.push(("K-FAC at θ = 0 (non-private)".into(), setup));
            }
            let row = format!(
                "| non-private λ=5e-4 | {vname} | {} | - | {:?} |",
                rep.evaluations, rep.termination
            );
            println!("{row}");
            rows.push(row);
        }
    }
    // P·g application cost
    let pre0 = KfacPreconditioner::at(moment.clone(), &design, &vec![0.0; d * c], 1e-3)?;
    let g = vec![1.0; d * c];
    let mut out = vec![0.0; d * c];
    let t = Instant::now();
    for _ in 0..20 {
        privpred_linear::Preconditioner::apply(&pre0, &g, &mut out);
    }
    let apply_s = t.elapsed().as_secs_f64() / 20.0;
    let mut es = eval_secs.clone();
    es.sort_by(f64::total_cmp);
    let eval_s = es.get(es.len() / 2).copied().unwrap_or(f64::NAN);
    println!("\nmedian time per evaluation here: {eval_s:.4} s");
    println!("\n| setting | variant | evaluations mean ± std | per draw | termination |");
    println!("|---|---|---|---|---|");
    for r in &rows {
        println!("{r}");
    }
    println!("\n| one-off setup | seconds | evaluation-equivalents |\n|---|---|---|");
    for (what, s) in &setup_rows {
        println!("| {what} | {s:.2} | {:.1} |", s / eval_s);
    }
    println!(
        "| one application of P (per L-BFGS iteration) | {apply_s:.4} | {:.3} |",
        apply_s / eval_s
    );
    Ok(())
}
