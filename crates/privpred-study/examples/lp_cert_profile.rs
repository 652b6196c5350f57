//! Where a certified loss-perturbation repetition spends its time (docs/guarantees.md#errata (erratum 4.8)): for each
//! `EPS:LAMBDA` pair, R repetitions on full MNIST as the study runs them (sequential kernels,
//! shared preconditioner around θ*(λ)), timing the fast f32 fit and the f64 certification
//! separately, plus one f32 pass, one f64 pass and one rounding-bound pass.
//!
//! `cargo run --release -p privpred-study --example lp_cert_profile -- R EPS:LAMBDA...`

use privpred_core::{Calibration, CalibrationMode, Method, Neighbours};
use privpred_data::UnitBallDataset;
use privpred_data::load::LoadOptions;
use privpred_data::preprocess::Preprocessing;
use privpred_data::spec::DatasetSpec;
use privpred_linear::kernel::{self, Design};
use privpred_linear::lbfgs::{PrecondScaling, Preconditioned, Preconditioner};
use privpred_linear::methods::{
    LossPerturbationPreconditioner, loss_perturbation_fit_certified,
    loss_perturbation_fit_selection, loss_perturbation_rho_eff,
};
use privpred_linear::precond::{DataMoment, KfacPreconditioner};
use privpred_linear::train::{Objective, SparseRows};
use privpred_linear::{GradNorm, LbfgsOptions, LinearModel, fit_logistic};
use rand::SeedableRng;
use std::sync::Arc;
use std::time::Instant;

/// CPU time of this thread (s), from /proc/thread-self/schedstat: contention-independent.
fn cpu() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    s.split_whitespace()
        .next()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1e9
}

type ProfileResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// Parses `R EPS:LAMBDA...`, loads MNIST (with PCA to `LP_PCA` dimensions if set), then
/// profiles each pair.
fn main() -> ProfileResult {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let reps: u64 = args.first().map_or(Ok(5), |s| s.parse())?;
    let pairs: Vec<(f64, f64)> = args[1..]
        .iter()
        .map(|s| {
            let (e, l) = s.split_once(':').expect("EPS:LAMBDA");
            (e.parse().unwrap(), l.parse().unwrap())
        })
        .collect();
    let raw = privpred_data::load(&DatasetSpec::parse("mnist")?, &LoadOptions::default())?;
    let pca = std::env::var("LP_PCA")
        .ok()
        .map(|v| v.parse::<usize>().unwrap());
    let recipe = Preprocessing {
        bias: true,
        pca,
        ..Preprocessing::default()
    };
    let train = recipe.fit(&raw.train, 0)?.apply_train(&raw.train)?;
    let (d, c) = (train.d, train.classes);
    let opts = LbfgsOptions {
        norm: GradNorm::Max,
        ..LbfgsOptions::default()
    };
    let design = Design::new(&train.features, &train.labels, d, c);
    let moment = Arc::new(kernel::sequential(|| DataMoment::new(&design))?);
    let sp = SparseRows::new(&design);
    let data = Data {
        train: &train,
        design: &design,
        moment: &moment,
        sp: &sp,
        opts,
    };
    for (eps, lambda) in pairs {
        profile_pair(&data, eps, lambda, reps)?;
    }
    Ok(())
}

/// What every pair shares: the training set, its design, data moment and sparse rows, and the
/// L-BFGS options (max|∇ᵢ| ≤ 1e-4).
struct Data<'a> {
    train: &'a UnitBallDataset,
    design: &'a Design<'a>,
    moment: &'a Arc<DataMoment>,
    sp: &'a SparseRows,
    opts: LbfgsOptions,
}

/// One `EPS:LAMBDA` pair, set up as the study does: θ*(λ), the calibration, the shared
/// preconditioner and the perturbed objective's smooth part.
struct Pair<'a> {
    lambda: f64,
    warm: LinearModel,
    cal: Calibration,
    rho_eff: f64,
    pre: LossPerturbationPreconditioner,
    obj: Objective<'a>,
}

/// Profiles one pair: its setup and per-pass costs ([`pass_costs`]), `reps` repetitions
/// ([`repetition`], with `LP_VARIANTS` set also [`refinement_variants`]) and their means.
fn profile_pair(data: &Data<'_>, eps: f64, lambda: f64, reps: u64) -> ProfileResult {
    let (n, c) = (data.train.n, data.train.classes);
    let t = Instant::now();
    let warm = kernel::sequential(|| fit_logistic(data.train, lambda, None, &data.opts))?.model;
    let t_np = t.elapsed().as_secs_f64();
    let cal = privpred_study::linear::calibrate(&privpred_study::linear::CalibrationInput {
        method: Method::LossPerturbation,
        mode: CalibrationMode::Corrected,
        epsilon: eps,
        delta: 0.0,
        budget: 100,
        n,
        classes: c,
        lambda: Some(lambda),
        dpsgd: &Default::default(),
        neighbours: Neighbours::ReplaceOne,
        loss: privpred_core::Loss::Softmax,
    })?;
    let rho_eff = loss_perturbation_rho_eff(&cal, lambda, n, c);
    let pre = kernel::sequential(|| {
        LossPerturbationPreconditioner::new(data.train, data.moment.clone(), &warm, rho_eff)
    })?;
    let obj = Objective {
        design: data.design.clone(),
        lambda: rho_eff / n as f64,
        linear: None,
        parallel: false,
    };
    let pair = Pair {
        lambda,
        warm,
        cal,
        rho_eff,
        pre,
        obj,
    };
    let (p32, p64, pb) = pass_costs(data, &pair);
    println!(
        "eps={eps} lambda={lambda} rho_eff={rho_eff:.1} mu={:.2e} gamma={:.2e} nonprivate_fit={t_np:.2}s pass: f32 {:.1} ms, f64 {:.1} ms, bound {:.1} ms",
        rho_eff / n as f64,
        pair.cal.certified.unwrap().gradient_norm_bound,
        p32 * 1e3,
        p64 * 1e3,
        pb * 1e3
    );
    let (mut s32, mut scert, mut e32, mut e64) = (0.0, 0.0, 0, 0);
    for r in 0..reps {
        let (a, b, evals32, evals64) = repetition(data, &pair, r)?;
        s32 += a;
        scert += b;
        e32 += evals32;
        e64 += evals64;
        if std::env::var("LP_VARIANTS").is_ok() {
            refinement_variants(data, &pair, r)?;
        }
    }
    let r = reps as f64;
    println!(
        "  mean: f32 fit {:.2}s ({:.0} evals), certified {:.2}s (+{:.0} f64 evals): certification {:.0}% of the fit",
        s32 / r,
        e32 as f64 / r,
        scert / r,
        e64 as f64 / r,
        100.0 * (scert - s32) / scert
    );
    Ok(())
}

/// CPU seconds of one f32 pass, one f64 pass and one rounding-bound pass at θ*(λ) (mean of 5).
fn pass_costs(data: &Data<'_>, pair: &Pair<'_>) -> (f64, f64, f64) {
    let (obj, warm, sp) = (&pair.obj, &pair.warm, data.sp);
    let mut g = vec![0.0; data.train.d * data.train.classes];
    let time = |f: &mut dyn FnMut()| {
        let t = cpu();
        for _ in 0..5 {
            f();
        }
        (cpu() - t) / 5.0
    };
    let p32 = time(&mut || {
        obj.value_grad(&warm.theta, &mut g);
    });
    let p64 = time(&mut || {
        obj.value_grad_sparse(sp, &warm.theta, &mut g);
    });
    let pb = time(&mut || {
        obj.gradient_error_bound_sparse(sp, &warm.theta);
    });
    (p32, p64, pb)
}

/// Repetition `r`: the fast f32 fit (as the study's selection draws) and the certified fit
/// from the same seed, timed apart; prints the line and returns (f32 seconds, certified
/// seconds, f32 evaluations, f64 refinement evaluations).
fn repetition(data: &Data<'_>, pair: &Pair<'_>, r: u64) -> ProfileResult<(f64, f64, usize, usize)> {
    let (train, cal, lambda, opts) = (data.train, &pair.cal, pair.lambda, &data.opts);
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(r);
    let t = cpu();
    kernel::sequential(|| {
        loss_perturbation_fit_selection(train, cal, lambda, Some(&pair.pre), None, opts, &mut rng)
    })?;
    let a = cpu() - t;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(r);
    let t = cpu();
    let (_, rep, cert) = kernel::sequential(|| {
        loss_perturbation_fit_certified(train, cal, lambda, Some(&pair.pre), opts, &mut rng)
    })?;
    let b = cpu() - t;
    let cert = cert.unwrap();
    println!(
        "  r{r}: f32 fit {a:.2}s ({} evals, max|g| {:.1e}); certified fit {b:.2}s (+{} f64 evals, ||g|| {:.2e} + {:.1e})",
        rep.evaluations,
        rep.grad_norm,
        cert.refinement_evaluations,
        cert.gradient_norm,
        cert.rounding_bound
    );
    Ok((a, b, rep.evaluations, cert.refinement_evaluations))
}

/// `LP_VARIANTS`: the f64 refinement of repetition `r` from a preconditioned start under
/// variants of the preconditioner (at θ*(λ) or at the start), its scaling, the L-BFGS memory
/// and the tolerance; prints one line of CPU times and iteration counts.
fn refinement_variants(data: &Data<'_>, pair: &Pair<'_>, r: u64) -> ProfileResult {
    let (n, d, c) = (data.train.n, data.train.d, data.train.classes);
    let (cal, obj, warm, sp) = (&pair.cal, &pair.obj, &pair.warm, data.sp);
    let mu = pair.rho_eff / n as f64;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(r);
    let mut bvec = vec![0.0; d * c];
    cal.mechanism.perturb(&mut rng, &mut bvec)?;
    let mut o = obj.clone();
    o.linear = Some(bvec.clone());
    let pw = KfacPreconditioner::at(data.moment.clone(), data.design, &warm.theta, mu)?;
    let mut g0 = vec![0.0; d * c];
    obj.value_grad_sparse(sp, &warm.theta, &mut g0);
    let (mut pg, mut pb) = (vec![0.0; d * c], vec![0.0; d * c]);
    pw.apply(&g0, &mut pg);
    pw.apply(&bvec, &mut pb);
    let start: Vec<f64> = warm
        .theta
        .iter()
        .zip(&pg)
        .zip(&pb)
        .map(|((t, p), q)| t - p - q / n as f64)
        .collect();
    let t = cpu();
    let ps = KfacPreconditioner::at(data.moment.clone(), data.design, &start, mu)?;
    let build = cpu() - t;
    let gamma = cal.certified.unwrap().gradient_norm_bound;
    let mut line = format!("    P(start) build {build:.2}s;");
    for (name, p, m, sc, tol) in [
        ("base", &pw, 10, PrecondScaling::None, 0.8),
        ("m30", &pw, 30, PrecondScaling::None, 0.8),
        ("scaled", &pw, 10, PrecondScaling::Scaled, 0.8),
        ("Pstart", &ps, 10, PrecondScaling::None, 0.8),
        ("Pstart-m30", &ps, 30, PrecondScaling::None, 0.8),
        ("tol.95", &pw, 10, PrecondScaling::None, 0.95),
    ] {
        let ropts = LbfgsOptions {
            grad_tol: tol * gamma,
            norm: GradNorm::L2,
            gradient_only: true,
            memory: m,
            ..data.opts
        };
        let t = cpu();
        let (_, _, rr) = privpred_linear::lbfgs::minimize_preconditioned(
            |t, g| o.value_grad_sparse(sp, t, g),
            start.clone(),
            &ropts,
            Some(Preconditioned { p, scaling: sc }),
        );
        line += &format!(
            " {name}: {:.2}s {}it/{}ev;",
            cpu() - t,
            rr.iterations,
            rr.evaluations
        );
    }
    println!("{line}");
    Ok(())
}
