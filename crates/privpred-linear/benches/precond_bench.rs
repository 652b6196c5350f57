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

use privpred_core::{Budget, Calibration, CalibrationMode, Method, Privacy};
use privpred_data::{DatasetSpec, LoadOptions, Preprocessing, UnitBallDataset, load};
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

type BenchResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// The loss-perturbation settings: (tag, label, ε, δ, λ).
const SETTINGS: [(&str, &str, f64, f64, f64); 5] = [
    ("a", "(a) fig1b-like ε=0.6 δ=1e-5 λ=5e-4", 0.6, 1e-5, 5e-4),
    ("b", "(b) fig1a-like ε=1 δ=0 λ=5e-4", 1.0, 0.0, 5e-4),
    ("c1e-6", "(c) fig6a-like ε=1 δ=0 λ=1e-6", 1.0, 0.0, 1e-6),
    ("c1e-4", "(c) fig6a-like ε=1 δ=0 λ=1e-4", 1.0, 0.0, 1e-4),
    ("c1e-2", "(c) fig6a-like ε=1 δ=0 λ=1e-2", 1.0, 0.0, 1e-2),
];

/// Each fit variant of a setting: plain L-BFGS, or preconditioned with a start and a scaling.
const VARIANTS: [(&str, Option<(LpStart, PrecondScaling)>); 5] = [
    ("plain, θw − b/ρ (current)", None),
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

/// Parses the arguments (draws, then the settings wanted), loads and preprocesses MNIST, runs
/// every wanted setting and prints the tables.
fn main() -> BenchResult {
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
    println!(
        "MNIST: N = {n}, d = {d}, C = {c}, {draws} noise draws per setting, threads = {}",
        rayon::current_num_threads()
    );
    let mut bench = Bench::new(&train, draws)?;
    for (tag, label, eps, delta, lambda) in SETTINGS {
        if want(tag) {
            bench.loss_perturbation(tag, label, Privacy::new(eps, delta)?, lambda)?;
        }
    }
    if want("np") {
        bench.nonprivate()?;
    }
    bench.print_tables()
}

/// What every setting shares (the data, its moment, the L-BFGS options, the warm models by λ)
/// and what has been measured so far (seconds per evaluation, result rows, setup costs).
struct Bench<'a> {
    train: &'a UnitBallDataset,
    design: Design<'a>,
    moment: Arc<DataMoment>,
    opts: LbfgsOptions,
    draws: usize,
    warm: HashMap<u64, LinearModel>,
    eval_secs: Vec<f64>,
    rows: Vec<String>,
    setup_rows: Vec<(String, f64)>,
}

impl<'a> Bench<'a> {
    /// Computes the data moment (timed: a one-off setup cost) with the stopping rule
    /// max|∇ᵢ| ≤ 1e-4.
    fn new(train: &'a UnitBallDataset, draws: usize) -> BenchResult<Self> {
        let design = Design::new(&train.features, &train.labels, train.d, train.classes);
        let t = Instant::now();
        let moment = Arc::new(DataMoment::new(&design)?);
        let moment_s = t.elapsed().as_secs_f64();
        println!(
            "data moment Σ = XᵀX/N + eigendecomposition: {moment_s:.2} s; top eigenvalues {:?}",
            &moment.eigenvalues()[..4]
        );
        Ok(Bench {
            train,
            design,
            moment,
            opts: LbfgsOptions {
                norm: GradNorm::Max,
                ..LbfgsOptions::default()
            },
            draws,
            warm: HashMap::new(),
            eval_secs: Vec::new(),
            rows: Vec::new(),
            setup_rows: vec![("data moment (once per data set)".into(), moment_s)],
        })
    }

    /// The non-private model at `lambda` (fitted once, its time per evaluation recorded).
    fn warm_fit(&mut self, lambda: f64) -> BenchResult<LinearModel> {
        if let Some(m) = self.warm.get(&lambda.to_bits()) {
            return Ok(m.clone());
        }
        let t = Instant::now();
        let f = fit_logistic(self.train, lambda, None, &self.opts)?;
        let s = t.elapsed().as_secs_f64();
        self.eval_secs.push(s / f.lbfgs.evaluations as f64);
        println!(
            "warm model λ = {lambda:e}: {} evaluations, {s:.1} s, {:?}",
            f.lbfgs.evaluations, f.lbfgs.termination
        );
        self.warm.insert(lambda.to_bits(), f.model.clone());
        Ok(f.model)
    }

    /// One loss-perturbation setting: calibrate, build the preconditioner at the warm model
    /// (timed), then one row per variant of [`VARIANTS`].
    fn loss_perturbation(
        &mut self,
        tag: &str,
        label: &str,
        privacy: Privacy,
        lambda: f64,
    ) -> BenchResult {
        let (n, c) = (self.train.n, self.train.classes);
        let m = self.warm_fit(lambda)?;
        let cfg = privpred_core::ParamGuard::check(
            TrainParams::new(
                Method::LossPerturbation,
                CalibrationMode::Corrected,
                privacy,
                Budget::Unlimited,
            )
            .lambda(lambda),
        )?;
        let cal = privpred_core::calibrate::calibrate(&cfg.request(n, c))?;
        let rho_eff = loss_perturbation_rho_eff(&cal, lambda, n, c);
        let t = Instant::now();
        let mut pre =
            LossPerturbationPreconditioner::new(self.train, self.moment.clone(), &m, rho_eff)?;
        let setup_s = t.elapsed().as_secs_f64();
        self.setup_rows.push((
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
        for (vname, v) in VARIANTS {
            let (evals, terms) = self.run_variant(v, &cal, lambda, &m, &mut pre)?;
            let (mu, sd) = mean_std(&evals);
            let row = format!(
                "| {label} | {vname} | {mu:.1} ± {sd:.1} | {evals:?} | {} |",
                terms.join(",")
            );
            println!("{row}");
            self.rows.push(row);
        }
        Ok(())
    }

    /// The evaluations and terminations of `draws` seeded fits of one variant (`None`: plain
    /// L-BFGS from the warm model, whose time per evaluation is recorded).
    fn run_variant(
        &mut self,
        v: Option<(LpStart, PrecondScaling)>,
        cal: &Calibration,
        lambda: f64,
        warm: &LinearModel,
        pre: &mut LossPerturbationPreconditioner,
    ) -> BenchResult<(Vec<usize>, Vec<String>)> {
        let mut evals = Vec::new();
        let mut terms = Vec::new();
        for r in 0..self.draws {
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1000 + r as u64);
            let t = Instant::now();
            let (_, rep) = match v {
                None => loss_perturbation_fit_report(
                    self.train,
                    cal,
                    lambda,
                    Some(warm),
                    &self.opts,
                    &mut rng,
                )?,
                Some((start, scaling)) => {
                    pre.start = start;
                    pre.scaling = scaling;
                    loss_perturbation_fit_preconditioned(
                        self.train, cal, lambda, pre, &self.opts, &mut rng,
                    )?
                }
            };
            if v.is_none() {
                self.eval_secs
                    .push(t.elapsed().as_secs_f64() / rep.evaluations as f64);
            }
            evals.push(rep.evaluations);
            terms.push(format!("{:?}", rep.termination));
        }
        Ok((evals, terms))
    }

    /// The non-private fit from zero at λ = 5e-4, plain and with K-FAC at θ = 0 (its setup
    /// timed).
    fn nonprivate(&mut self) -> BenchResult {
        let lambda = 5e-4;
        let (d, c) = (self.train.d, self.train.classes);
        for (vname, pre) in [("plain from 0", false), ("P from 0 (K-FAC at θ = 0)", true)] {
            let obj = Objective::new(self.design.clone(), lambda);
            let t = Instant::now();
            let p = if pre {
                Some(KfacPreconditioner::at(
                    self.moment.clone(),
                    &self.design,
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
            let (_, rep) = obj.minimize_with(None, &self.opts, pc)?;
            if !pre {
                self.eval_secs
                    .push(t.elapsed().as_secs_f64() / rep.evaluations as f64);
            } else {
                self.setup_rows
                    .push(("K-FAC at θ = 0 (non-private)".into(), setup));
            }
            let row = format!(
                "| non-private λ=5e-4 | {vname} | {} | - | {:?} |",
                rep.evaluations, rep.termination
            );
            println!("{row}");
            self.rows.push(row);
        }
        Ok(())
    }

    /// Measures one application of P, then prints the median time per evaluation, the rows,
    /// and the setup costs in evaluation-equivalents.
    fn print_tables(&self) -> BenchResult {
        let (d, c) = (self.train.d, self.train.classes);
        let pre0 =
            KfacPreconditioner::at(self.moment.clone(), &self.design, &vec![0.0; d * c], 1e-3)?;
        let g = vec![1.0; d * c];
        let mut out = vec![0.0; d * c];
        let t = Instant::now();
        for _ in 0..20 {
            privpred_linear::Preconditioner::apply(&pre0, &g, &mut out);
        }
        let apply_s = t.elapsed().as_secs_f64() / 20.0;
        let mut es = self.eval_secs.clone();
        es.sort_by(f64::total_cmp);
        let eval_s = es.get(es.len() / 2).copied().unwrap_or(f64::NAN);
        println!("\nmedian time per evaluation here: {eval_s:.4} s");
        println!("\n| setting | variant | evaluations mean ± std | per draw | termination |");
        println!("|---|---|---|---|---|");
        for r in &self.rows {
            println!("{r}");
        }
        println!("\n| one-off setup | seconds | evaluation-equivalents |\n|---|---|---|");
        for (what, s) in &self.setup_rows {
            println!("| {what} | {s:.2} | {:.1} |", s / eval_s);
        }
        println!(
            "| one application of P (per L-BFGS iteration) | {apply_s:.4} | {:.3} |",
            apply_s / eval_s
        );
        Ok(())
    }
}
