//! Fitting multinomial logistic regression by full-batch L-BFGS.
//!
//! Objective (docs/guarantees.md#the-setting, §3):
//! J(θ) = (1/N) Σₙ ℓ(θᵀxₙ, yₙ) + (λ/2)‖θ‖²_F + (1/N)⟨b, θ⟩,
//! with ℓ the softmax cross-entropy and `b` the optional loss-perturbation term (zero otherwise).

use crate::error::{LinearError, Result};
use crate::exact::{self, F64_BLOCK};
use crate::kernel::{self, Design, KernelParams};
use crate::lbfgs::{self, LbfgsOptions, LbfgsReport, Preconditioned};
use crate::model::{LinearModel, argmax};
use privpred_data::{Dataset, UnitBallDataset};
use serde::{Deserialize, Serialize};

pub use crate::exact::SparseRows;
pub use crate::lbfgs::{GradNorm, Termination};

/// The λ grid of docs/study.md (cross-validated on a 10 % hold-out).
pub const LAMBDA_GRID: [f64; 10] = [1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 1e-1, 5e-1];

/// The regularised (and optionally perturbed) logistic objective over a design.
#[derive(Debug, Clone)]
pub struct Objective<'a> {
    /// The data.
    pub design: Design<'a>,
    /// L2 strength λ ≥ 0.
    pub lambda: f64,
    /// Optional linear term b (row-major `d × c`), entering as (1/N)⟨b, θ⟩.
    pub linear: Option<Vec<f64>>,
    /// Whether the kernel may use rayon (turn off inside already-parallel loops).
    pub parallel: bool,
}

impl<'a> Objective<'a> {
    /// The plain regularised objective.
    pub fn new(design: Design<'a>, lambda: f64) -> Self {
        Objective {
            design,
            lambda,
            linear: None,
            parallel: true,
        }
    }

    /// Value and gradient (row-major `d × c`) at `theta`.
    pub fn value_grad(&self, theta: &[f64], grad: &mut [f64]) -> f64 {
        let (d, c, dp) = (self.design.d, self.design.c, self.design.dp);
        let n = self.design.n as f64;
        let p = KernelParams::from_theta(theta, d, c);
        let (loss, g) = kernel::loss_grad_sums(&self.design, &p, self.parallel);
        let mut v = loss / n;
        let mut sq = 0.0;
        for j in 0..d {
            for k in 0..c {
                let t = theta[j * c + k];
                sq += t * t;
                grad[j * c + k] = g[k * dp + j] / n + self.lambda * t;
            }
        }
        v += 0.5 * self.lambda * sq;
        if let Some(b) = &self.linear {
            let mut lin = 0.0;
            for ((gi, bi), ti) in grad.iter_mut().zip(b).zip(theta) {
                *gi += bi / n;
                lin += bi * ti;
            }
            v += lin / n;
        }
        v
    }

    /// Hessian-vector product H(θ)·v (row-major `d × c`), exact:
    /// H v = (1/N) Σᵢ xᵢ ⊗ [(diag(pᵢ) − pᵢpᵢᵀ)(Vᵀxᵢ)] + λ v, with pᵢ = softmax(θᵀxᵢ)
    /// (the linear term of loss perturbation has no curvature). The two forward products per
    /// row run on the same fused register-tiled kernel as the gradient; rows are processed in
    /// parallel blocks with f64 accumulation. Used for Newton-type diagnostics (the Hessian's
    /// eigenvalues are ≤ L = 1/2 per unit-norm row: docs/guarantees.md#the-setting).
    pub fn hessian_vector(&self, theta: &[f64], v: &[f64], out: &mut [f64]) {
        use rayon::prelude::*;
        let (d, c) = (self.design.d, self.design.c);
        let n = self.design.n;
        let pt = KernelParams::from_theta(theta, d, c);
        let pv = KernelParams::from_theta(v, d, c);
        let block = 1024usize;
        let nblocks = n.div_ceil(block);
        let work = |b: usize| -> Vec<f64> {
            let mut acc = vec![0f64; d * c];
            let mut l = vec![0f32; pt.cp];
            let mut u = vec![0f32; pv.cp];
            let mut p = vec![0f64; c];
            let mut r = vec![0f64; c];
            for i in b * block..((b + 1) * block).min(n) {
                let x = self.design.row(i);
                kernel::forward_row(x, &pt.w, pt.dp, pt.cp, &mut l);
                kernel::forward_row(x, &pv.w, pv.dp, pv.cp, &mut u);
                let m = l[..c].iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
                let mut z = 0.0;
                for k in 0..c {
                    p[k] = (l[k] as f64 - m).exp();
                    z += p[k];
                }
                let mut pu = 0.0;
                for k in 0..c {
                    p[k] /= z;
                    pu += p[k] * u[k] as f64;
                }
                for k in 0..c {
                    r[k] = p[k] * (u[k] as f64 - pu);
                }
                for (j, &xj) in x[..d].iter().enumerate() {
                    if xj != 0.0 {
                        let xj = xj as f64;
                        for k in 0..c {
                            acc[j * c + k] += xj * r[k];
                        }
                    }
                }
            }
            acc
        };
        let sum = if self.parallel && nblocks > 1 {
            (0..nblocks).into_par_iter().map(work).reduce(
                || vec![0f64; d * c],
                |mut a, b| {
                    a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
                    a
                },
            )
        } else {
            (0..nblocks).map(work).fold(vec![0f64; d * c], |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
                a
            })
        };
        let nf = n as f64;
        for ((o, s), vi) in out.iter_mut().zip(&sum).zip(v) {
            *o = s / nf + self.lambda * vi;
        }
    }

    /// Value and gradient in f64 throughout: the features are widened exactly from their
    /// stored f32, θ stays f64 (the fast kernel rounds it to f32), products, softmax and every
    /// sum are f64, zero features are skipped (MNIST is ~80 % zeros). The certification pass of
    /// docs/guarantees.md#errata (erratum 4.8) ([`Objective::certify`]); deterministic (row blocks reduced in order).
    pub fn value_grad_f64(&self, theta: &[f64], grad: &mut [f64]) -> f64 {
        self.value_grad_sparse(&SparseRows::new(&self.design), theta, grad)
    }

    /// [`Objective::value_grad_f64`] over prebuilt [`SparseRows`] of this objective's design.
    pub fn value_grad_sparse(&self, sp: &SparseRows, theta: &[f64], grad: &mut [f64]) -> f64 {
        use rayon::prelude::*;
        let (d, c, n) = (self.design.d, self.design.c, self.design.n);
        let nblocks = n.div_ceil(F64_BLOCK);
        let padded = exact::pad_theta(theta, c);
        let work = |b: usize| -> (f64, Vec<f64>) {
            let mut acc = vec![0f64; d * c];
            let rows = b * F64_BLOCK..((b + 1) * F64_BLOCK).min(n);
            let loss = exact::rows_pass(
                sp,
                &self.design.y,
                c,
                theta,
                padded.as_deref(),
                rows,
                &mut acc,
            );
            (loss, acc)
        };
        let parts: Vec<(f64, Vec<f64>)> =
            if self.parallel && kernel::parallel_allowed() && nblocks > 1 {
                (0..nblocks).into_par_iter().map(work).collect()
            } else {
                (0..nblocks).map(work).collect()
            };
        self.finish_sparse(
            parts.iter().map(|(l, a)| (*l, a.as_slice())),
            self.linear.as_deref(),
            theta,
            grad,
        )
    }

    /// The end of an f64 pass: sums the row blocks' losses and gradients (in block order),
    /// then adds the regulariser and the linear term `linear` (the objective's own `b`, or one
    /// problem's of a batch).
    fn finish_sparse<'p>(
        &self,
        parts: impl Iterator<Item = (f64, &'p [f64])>,
        linear: Option<&[f64]>,
        theta: &[f64],
        grad: &mut [f64],
    ) -> f64 {
        let nf = self.design.n.max(1) as f64;
        let mut loss = 0.0;
        grad.iter_mut().for_each(|g| *g = 0.0);
        for (l, a) in parts {
            loss += l;
            grad.iter_mut().zip(a).for_each(|(g, x)| *g += x);
        }
        let mut v = loss / nf;
        let mut sq = 0.0;
        for (g, t) in grad.iter_mut().zip(theta) {
            *g = *g / nf + self.lambda * t;
            sq += t * t;
        }
        v += 0.5 * self.lambda * sq;
        if let Some(b) = linear {
            let mut lin = 0.0;
            for ((gi, bi), ti) in grad.iter_mut().zip(b).zip(theta) {
                *gi += bi / nf;
                lin += bi * ti;
            }
            v += lin / nf;
        }
        v
    }

    /// [`Objective::value_grad_sparse`] of several problems at once that differ only in their
    /// linear term (`problems[q]` = (θ_q, b_q); `None` uses this objective's own): one read of
    /// each row's nonzeros serves every problem ([`exact`]'s multi-right-hand-side pass), and
    /// each problem's value and gradient (written to `grads[q]`) are bit-identical to its own
    /// [`Objective::value_grad_sparse`] (the same operations per problem, in the same order,
    /// sequential or parallel alike). Used by batched loss-perturbation fits.
    pub fn value_grad_sparse_batch(
        &self,
        sp: &SparseRows,
        problems: &[(&[f64], Option<&[f64]>)],
        grads: &mut [Vec<f64>],
    ) -> Vec<f64> {
        use rayon::prelude::*;
        let (d, c, n) = (self.design.d, self.design.c, self.design.n);
        let nblocks = n.div_ceil(F64_BLOCK);
        let thetas: Vec<&[f64]> = problems.iter().map(|p| p.0).collect();
        let padded: Vec<Option<Vec<f64>>> = thetas.iter().map(|t| exact::pad_theta(t, c)).collect();
        let work = |b: usize| -> (Vec<f64>, Vec<Vec<f64>>) {
            let mut accs = vec![vec![0f64; d * c]; thetas.len()];
            let rows = b * F64_BLOCK..((b + 1) * F64_BLOCK).min(n);
            let loss =
                exact::rows_pass_multi(sp, &self.design.y, c, &thetas, &padded, rows, &mut accs);
            (loss, accs)
        };
        let parts: Vec<(Vec<f64>, Vec<Vec<f64>>)> =
            if self.parallel && kernel::parallel_allowed() && nblocks > 1 {
                (0..nblocks).into_par_iter().map(work).collect()
            } else {
                (0..nblocks).map(work).collect()
            };
        problems
            .iter()
            .zip(grads.iter_mut())
            .enumerate()
            .map(|(q, ((theta, b), grad))| {
                let linear = b.or(self.linear.as_deref());
                let it = parts.iter().map(|(l, a)| (l[q], a[q].as_slice()));
                self.finish_sparse(it, linear, theta, grad)
            })
            .collect()
    }

    /// A bound on the rounding error of ‖∇J(θ)‖₂ as computed by [`Objective::value_grad_f64`]
    /// (running error analysis, one extra f64 pass; u = 2⁻⁵³, first order, ×2 to spare).
    /// Row i, with nᵢ nonzero features and Aᵢₖ = Σⱼ|xᵢⱼθⱼₖ|: each logit is off by
    /// ≤ nᵢ·u·Aᵢₖ, which moves pᵢ by ≤ 2·maxₖ(nᵢuAᵢₖ) in ℓ1; exp (of the shifted logit, whose
    /// own rounding costs ≤ u·t·e⁻ᵗ ≤ u per class) and the normalisation add ≤ (C + 8)u in ℓ1.
    /// The sum over rows (recursive in blocks of 1,024, then across blocks) adds
    /// ≤ (block + blocks + 1)·u·Σᵢ|xᵢⱼ|·‖rᵢ‖₁ with ‖rᵢ‖₁ ≤ 2. So the ℓ2 error over the classes
    /// of coordinate row j is ≤ (1/N)Σᵢ|xᵢⱼ|·(Eᵢ + 2(block + blocks + 1)u), and the λθ and b/N
    /// terms add ≤ 3u(λ‖θ‖₂ + ‖b‖₂/N); the norm itself is accurate to (DC + 2)u relative.
    pub fn f64_gradient_error_bound(&self, theta: &[f64]) -> f64 {
        self.gradient_error_bound_sparse(&SparseRows::new(&self.design), theta)
    }

    /// [`Objective::f64_gradient_error_bound`] over prebuilt [`SparseRows`].
    pub fn gradient_error_bound_sparse(&self, sp: &SparseRows, theta: &[f64]) -> f64 {
        use rayon::prelude::*;
        let u = f64::EPSILON / 2.0;
        let (d, c, n) = (self.design.d, self.design.c, self.design.n);
        let nblocks = n.div_ceil(F64_BLOCK);
        let sum_term = 2.0 * (F64_BLOCK + nblocks + 1) as f64 * u;
        let work = |b: usize| -> Vec<f64> {
            let mut acc = vec![0f64; d];
            let mut a = vec![0f64; c];
            for i in b * F64_BLOCK..((b + 1) * F64_BLOCK).min(n) {
                let (ix, xv) = sp.row(i);
                a.iter_mut().for_each(|v| *v = 0.0);
                for (&j, &xj) in ix.iter().zip(xv) {
                    let (j, xj) = (j as usize, (xj as f64).abs());
                    for (ak, tk) in a.iter_mut().zip(&theta[j * c..(j + 1) * c]) {
                        *ak += xj * tk.abs();
                    }
                }
                let amax = a.iter().fold(0f64, |m, &v| m.max(v));
                let e = 2.0 * ix.len() as f64 * u * amax + (c + 8) as f64 * u + sum_term;
                for (&j, &xj) in ix.iter().zip(xv) {
                    acc[j as usize] += (xj as f64).abs() * e;
                }
            }
            acc
        };
        let parts: Vec<Vec<f64>> = if self.parallel && kernel::parallel_allowed() && nblocks > 1 {
            (0..nblocks).into_par_iter().map(work).collect()
        } else {
            (0..nblocks).map(work).collect()
        };
        let nf = n.max(1) as f64;
        let mut per_j = vec![0f64; d];
        for p in &parts {
            per_j.iter_mut().zip(p).for_each(|(s, v)| *s += v);
        }
        let data = per_j.iter().map(|v| (v / nf).powi(2)).sum::<f64>().sqrt();
        let b_norm = self.linear.as_ref().map_or(0.0, |b| l2(b));
        let reg = 3.0 * u * (self.lambda * l2(theta) + b_norm / nf);
        2.0 * (data + reg) * (1.0 + (d * c + 2) as f64 * u)
    }

    /// An a-priori bound on the rounding error of ‖∇J(θ)‖₂ as computed by
    /// [`Objective::value_grad_sparse`]: [`Objective::gradient_error_bound_sparse`]'s bound
    /// with each row's Σⱼ|xᵢⱼθⱼₖ| replaced by its Cauchy–Schwarz bound ‖xᵢ‖₂‖θ·ₖ‖₂, so that the
    /// sum over rows factors into per-feature sums of the data built once with `sp`
    /// ([`SparseRows`]): O(D·C) instead of a pass over the data, never smaller than the
    /// one-pass bound (tested: `a_priori_bound_dominates_the_pass_bound`).
    pub fn gradient_error_bound_a_priori(&self, sp: &SparseRows, theta: &[f64]) -> f64 {
        let u = f64::EPSILON / 2.0;
        let (d, c) = (self.design.d, self.design.c);
        let nf = self.design.n.max(1) as f64;
        let data = sp.rounding_bound(theta, c);
        let b_norm = self.linear.as_ref().map_or(0.0, |b| l2(b));
        let reg = 3.0 * u * (self.lambda * l2(theta) + b_norm / nf);
        2.0 * (data + reg) * (1.0 + (d * c + 2) as f64 * u)
    }

    /// The rounding bound with which the computed f64 gradient norm `norm` at `theta` meets
    /// `gamma` (norm·(1 + (DC + 2)u) + bound ≤ γ), or `None` when it does not: the a-priori
    /// bound first (free), the one-pass bound only when the a-priori one is too loose.
    fn certificate_slack(
        &self,
        sp: &SparseRows,
        theta: &[f64],
        norm: f64,
        gamma: f64,
    ) -> Option<f64> {
        let np = (theta.len() + 2) as f64 * f64::EPSILON;
        let computed = norm * (1.0 + np);
        if computed.is_nan() || computed > gamma || theta.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let a_priori = self.gradient_error_bound_a_priori(sp, theta);
        if computed + a_priori <= gamma {
            return Some(a_priori);
        }
        let pass = self.gradient_error_bound_sparse(sp, theta);
        (computed + pass <= gamma).then_some(pass)
    }

    /// Certifies ‖∇J(θ̂)‖₂ ≤ `gamma` in f64 on the iterate that will be released (SPEC erratum
    /// 4.8; the bound the calibration assumed, see `privpred_core::certify`). The f64 gradient
    /// at `theta` is computed once; when it does not meet γ, L-BFGS continues from there on the
    /// f64 objective (with the preconditioner, if any; gradient-only line search) until the f64
    /// gradient norm is ≤ 0.8γ. The final iterate is checked: computed norm + a bound on its
    /// rounding error ([`Objective::gradient_error_bound_a_priori`], or
    /// [`Objective::f64_gradient_error_bound`] when that is too loose) ≤ γ, or the fit is
    /// refused with [`LinearError::NotCertified`]. Never releases silently.
    ///
    /// `theta` may be any start — a fast f32 fit, or (as loss perturbation does) the start of
    /// the fit itself, the whole minimisation then running in f64.
    ///
    /// `sparse`: the [`SparseRows`] of this objective's design when the caller keeps them
    /// across fits (built here otherwise).
    pub fn certify(
        &self,
        theta: Vec<f64>,
        gamma: f64,
        opts: &LbfgsOptions,
        pre: Option<Preconditioned<'_>>,
        sparse: Option<&SparseRows>,
    ) -> Result<(Vec<f64>, Optimization)> {
        self.certify_report(theta, gamma, opts, pre, sparse)
            .map(|(t, o, _)| (t, o))
    }

    /// [`Objective::certify`], also returning the report of the f64 run (its evaluations
    /// include the check of the start).
    pub fn certify_report(
        &self,
        theta: Vec<f64>,
        gamma: f64,
        opts: &LbfgsOptions,
        pre: Option<Preconditioned<'_>>,
        sparse: Option<&SparseRows>,
    ) -> Result<(Vec<f64>, Optimization, LbfgsReport)> {
        if !(gamma.is_finite() && gamma > 0.0) {
            return Err(LinearError::invalid(
                "gradient_norm_bound",
                gamma,
                "must be a finite number > 0",
            ));
        }
        let built;
        let sp = match sparse {
            Some(sp) => sp,
            None => {
                built = SparseRows::new(&self.design);
                &built
            }
        };
        let mut g = vec![0.0; theta.len()];
        let f0 = self.value_grad_sparse(sp, &theta, &mut g);
        let norm = l2(&g);
        if let Some(slack) = self.certificate_slack(sp, &theta, norm, gamma) {
            let report = LbfgsReport {
                iterations: 0,
                evaluations: 1,
                value: f0,
                grad_norm: norm,
                termination: Termination::Converged,
            };
            let cert = Optimization {
                gradient_norm: norm,
                gradient_norm_bound: gamma,
                rounding_bound: slack,
                refinement_evaluations: 0,
            };
            return Ok((theta, cert, report));
        }
        let ropts = LbfgsOptions {
            grad_tol: 0.8 * gamma,
            norm: GradNorm::L2,
            f_tol: 0.0,
            gradient_only: true,
            ..*opts
        };
        let (t2, g2, rep) = lbfgs::minimize_from_evaluated(
            |t, g| self.value_grad_sparse(sp, t, g),
            theta,
            f0,
            g,
            &ropts,
            pre,
        );
        let norm = l2(&g2);
        let Some(slack) = self.certificate_slack(sp, &t2, norm, gamma) else {
            return Err(LinearError::NotCertified(format!(
                "after {} more L-BFGS iterations on the f64 objective (stopped: {}) the gradient norm is {norm:.3e} > the bound gamma = {gamma:.3e} that the guarantee assumes (erratum 4.8), or above it once its rounding error is added; the model is not released. At lambda = {:e}: a larger lambda (at most {:e}) makes the objective better conditioned",
                rep.iterations,
                rep.termination,
                self.lambda,
                privpred_core::params::MAX_LAMBDA
            )));
        };
        let cert = Optimization {
            gradient_norm: norm,
            gradient_norm_bound: gamma,
            rounding_bound: slack,
            refinement_evaluations: rep.evaluations - 1,
        };
        Ok((t2, cert, rep))
    }

    /// [`Objective::minimize_with`] on the f64 pass over the nonzeros
    /// ([`Objective::value_grad_sparse`] with `sp`, this objective's [`SparseRows`]) from
    /// `start`: the same objective, the same L-BFGS and stopping rule `opts`, its value and
    /// gradient computed in f64 instead of the f32 kernel (on sparse data such as MNIST, about
    /// 19 % nonzeros, the f64 pass costs less than the dense f32 one). Loss perturbation's
    /// uncertified fits (`paper` mode, hyper-parameter selection) run here on sparse data.
    pub fn minimize_sparse_with(
        &self,
        sp: &SparseRows,
        start: Vec<f64>,
        opts: &LbfgsOptions,
        pre: Option<Preconditioned<'_>>,
    ) -> Result<(LinearModel, LbfgsReport)> {
        let (d, c) = (self.design.d, self.design.c);
        if start.len() != d * c || sp.rows() != self.design.n {
            return Err(LinearError::Dimension(format!(
                "start has {} parameters and the nonzeros {} rows, the problem needs {d} × {c} and {} rows",
                start.len(),
                sp.rows(),
                self.design.n
            )));
        }
        let (theta, _, report) = lbfgs::minimize_preconditioned(
            |t, g| self.value_grad_sparse(sp, t, g),
            start,
            opts,
            pre,
        );
        if theta.iter().any(|v| !v.is_finite()) || !report.value.is_finite() {
            return Err(LinearError::Numerical(
                "L-BFGS produced non-finite parameters".into(),
            ));
        }
        Ok((LinearModel { d, c, theta }, report))
    }

    /// Minimises the objective from `warm` (or zero).
    pub fn minimize(
        &self,
        warm: Option<&[f64]>,
        opts: &LbfgsOptions,
    ) -> Result<(LinearModel, LbfgsReport)> {
        self.minimize_with(warm, opts, None)
    }

    /// [`Objective::minimize`] with an optional preconditioner for L-BFGS (e.g. a
    /// [`crate::precond::KfacPreconditioner`]): same stopping rule, same minimiser (the objective
    /// is strictly convex for λ > 0), usually fewer evaluations; `None` is exactly `minimize`.
    pub fn minimize_with(
        &self,
        warm: Option<&[f64]>,
        opts: &LbfgsOptions,
        pre: Option<Preconditioned<'_>>,
    ) -> Result<(LinearModel, LbfgsReport)> {
        let (d, c) = (self.design.d, self.design.c);
        let x0 = match warm {
            Some(w) if w.len() == d * c => w.to_vec(),
            Some(w) => {
                return Err(LinearError::Dimension(format!(
                    "warm start has {} parameters, the problem needs {d} × {c}",
                    w.len()
                )));
            }
            None => vec![0.0; d * c],
        };
        let (theta, _, report) =
            lbfgs::minimize_preconditioned(|t, g| self.value_grad(t, g), x0, opts, pre);
        if theta.iter().any(|v| !v.is_finite()) || !report.value.is_finite() {
            return Err(LinearError::Numerical(
                "L-BFGS produced non-finite parameters".into(),
            ));
        }
        Ok((LinearModel { d, c, theta }, report))
    }
}

fn l2(g: &[f64]) -> f64 {
    g.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// The certificate of a released fit as measured (docs/guarantees.md#errata (erratum 4.8)). Its measured values
/// (`gradient_norm`, `rounding_bound`, `refinement_evaluations`) are statistics of the
/// private data: `train --json` reports them to the data owner, but a released artifact
/// carries only the public [`Certificate`] (the bound γ and that it was met).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Optimization {
    /// ‖∇J(θ̂)‖₂ computed in f64 on the released iterate (≤ `gradient_norm_bound` −
    /// `rounding_bound`).
    pub gradient_norm: f64,
    /// γ: the bound the calibration assumed.
    pub gradient_norm_bound: f64,
    /// Bound on the f64 rounding error of `gradient_norm`.
    #[serde(default)]
    pub rounding_bound: f64,
    /// f64 gradient evaluations after the check of the start (0 when the start already met γ;
    /// for a fit run in f64 from its start, as loss perturbation's, all but one of its
    /// evaluations).
    #[serde(default)]
    pub refinement_evaluations: usize,
}

impl Optimization {
    /// The public part of the certificate: the bound γ the released fit was certified to meet.
    pub fn certificate(&self) -> Certificate {
        Certificate {
            gradient_norm_bound: self.gradient_norm_bound,
        }
    }
}

/// The public part of a released fit's certificate (docs/guarantees.md#errata (erratum 4.8)): the bound γ on
/// ‖∇J(θ̂)‖₂ that the released iterate was certified to meet. γ is a function of the method,
/// the loss's constants and N only, so it may be released; the measured norm may not.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Certificate {
    /// γ: the bound the calibration assumed and the released fit met.
    pub gradient_norm_bound: f64,
}

/// A fitted model and how the fit went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitReport {
    /// The minimiser.
    pub model: LinearModel,
    /// λ used.
    pub lambda: f64,
    /// Solver statistics (iterations, evaluations, final gradient norm, termination).
    pub lbfgs: LbfgsReport,
    /// The certificate, for fits made with [`fit_logistic_certified`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimization: Option<Optimization>,
}

/// Checks λ ≥ 0 (or > 0 with `strict`), finite.
pub fn check_lambda(lambda: f64, strict: bool) -> Result<()> {
    let ok = lambda.is_finite() && if strict { lambda > 0.0 } else { lambda >= 0.0 };
    if !ok {
        return Err(LinearError::invalid(
            "lambda",
            lambda,
            if strict {
                "must be a finite number > 0 for this method"
            } else {
                "must be a finite number >= 0"
            },
        ));
    }
    Ok(())
}

/// Fits L2-regularised multinomial logistic regression (non-private) on unit-ball data, from
/// `warm` when given, to the gradient tolerance of `opts`.
pub fn fit_logistic(
    ds: &UnitBallDataset,
    lambda: f64,
    warm: Option<&LinearModel>,
    opts: &LbfgsOptions,
) -> Result<FitReport> {
    check_lambda(lambda, false)?;
    check_classes(ds)?;
    let design = Design::of(ds);
    let obj = Objective::new(design, lambda);
    let (model, lbfgs) = obj.minimize(warm.map(|m| m.theta.as_slice()), opts)?;
    Ok(FitReport {
        model,
        lambda,
        lbfgs,
        optimization: None,
    })
}

/// [`fit_logistic`] whose result is certified to ‖∇J(θ̂)‖₂ ≤ `gamma` in f64
/// ([`Objective::certify`]): the fits that model sensitivity and prediction sensitivity
/// release (docs/guarantees.md#errata (erratum 4.8)). Errors with [`LinearError::NotCertified`] when the bound is not
/// reached.
pub fn fit_logistic_certified(
    ds: &UnitBallDataset,
    lambda: f64,
    warm: Option<&LinearModel>,
    opts: &LbfgsOptions,
    gamma: f64,
) -> Result<FitReport> {
    let mut fit = fit_logistic(ds, lambda, warm, opts)?;
    let design = Design::of(ds);
    let obj = Objective::new(design, lambda);
    let (theta, cert) = obj.certify(
        std::mem::take(&mut fit.model.theta),
        gamma,
        opts,
        None,
        None,
    )?;
    fit.model.theta = theta;
    fit.optimization = Some(cert);
    Ok(fit)
}

pub(crate) fn check_classes(ds: &Dataset) -> Result<()> {
    if ds.classes < 2 {
        return Err(LinearError::invalid(
            "classes",
            ds.classes,
            "need at least 2 classes",
        ));
    }
    Ok(())
}

/// Arg-max predictions of `model` on every row of `ds` (fast kernel).
pub fn predict_all(model: &LinearModel, ds: &Dataset) -> Result<Vec<u32>> {
    let logits = logits_all(model, ds)?;
    Ok(logits
        .chunks_exact(model.c)
        .map(|l| argmax(l) as u32)
        .collect())
}

/// Logits (row-major `n × c`) of `model` on every row of `ds`.
pub fn logits_all(model: &LinearModel, ds: &Dataset) -> Result<Vec<f64>> {
    if ds.d != model.d {
        return Err(LinearError::Dimension(format!(
            "dataset {} has {} features, the model expects {}",
            ds.provenance.name, ds.d, model.d
        )));
    }
    let design = Design::new(&ds.features, &ds.labels, ds.d, model.c);
    Ok(kernel::all_logits(
        &design,
        &KernelParams::from_theta(&model.theta, model.d, model.c),
    ))
}

/// Fraction of correct labels.
pub fn accuracy_of(pred: &[u32], labels: &[u32]) -> f64 {
    if pred.is_empty() {
        return 0.0;
    }
    pred.iter().zip(labels).filter(|(a, b)| a == b).count() as f64 / pred.len() as f64
}

/// Test accuracy of a non-private model.
pub fn accuracy(model: &LinearModel, ds: &Dataset) -> Result<f64> {
    Ok(accuracy_of(&predict_all(model, ds)?, &ds.labels))
}

/// One cross-validation score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CvPoint {
    /// The hyper-parameter value.
    pub value: f64,
    /// Hold-out accuracy.
    pub accuracy: f64,
}

/// Result of a cross-validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CvResult {
    /// The chosen value (best hold-out accuracy; the smaller-noise end on ties).
    pub best: f64,
    /// All scores.
    pub scores: Vec<CvPoint>,
}

/// Chooses the value of `grid` that maximises `score` (ties → first).
pub fn select_best(grid: &[f64], mut score: impl FnMut(f64) -> Result<f64>) -> Result<CvResult> {
    if grid.is_empty() {
        return Err(LinearError::invalid(
            "grid",
            "[]",
            "needs at least one value",
        ));
    }
    let mut scores = Vec::with_capacity(grid.len());
    for &v in grid {
        scores.push(CvPoint {
            value: v,
            accuracy: score(v)?,
        });
    }
    let best = scores
        .iter()
        .fold(
            scores[0],
            |b, p| if p.accuracy > b.accuracy { *p } else { b },
        )
        .value;
    Ok(CvResult { best, scores })
}

/// Cross-validates λ of the non-private model on `holdout` (trained on `train`); warm-starts
/// each fit from the previous one (the grid is visited from large λ to small).
/// The privacy cost of hyper-parameter selection is ignored, as in the paper (docs/guarantees.md#the-setting).
pub fn cv_lambda_nonprivate(
    train: &UnitBallDataset,
    holdout: &Dataset,
    grid: &[f64],
    opts: &LbfgsOptions,
) -> Result<CvResult> {
    let mut order: Vec<f64> = grid.to_vec();
    order.sort_by(|a, b| b.partial_cmp(a).unwrap_or(std::cmp::Ordering::Equal));
    let mut warm: Option<LinearModel> = None;
    let mut acc = std::collections::HashMap::new();
    for &l in &order {
        let fit = fit_logistic(train, l, warm.as_ref(), opts)?;
        acc.insert(l.to_bits(), accuracy(&fit.model, holdout)?);
        warm = Some(fit.model);
    }
    select_best(grid, |l| Ok(acc[&l.to_bits()]))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use privpred_data::Provenance;
    use proptest::prelude::*;

    pub(crate) fn toy(n: usize, d: usize, c: usize, seed: u64) -> UnitBallDataset {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let mut f = Vec::with_capacity(n * d);
        let mut y = Vec::with_capacity(n);
        for i in 0..n {
            let cls = (i % c) as u32;
            let mut row: Vec<f32> = (0..d)
                .map(|j| rng.random::<f32>() - 0.5 + if j % c == cls as usize { 0.7 } else { 0.0 })
                .collect();
            let norm = row.iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt();
            let s = (rng.random::<f64>() * 0.99 + 0.01) / norm;
            row.iter_mut().for_each(|v| *v = (*v as f64 * s) as f32);
            f.extend(row);
            y.push(cls);
        }
        UnitBallDataset::new(
            Dataset::new(
                d,
                c,
                f,
                y,
                Provenance {
                    name: "toy".into(),
                    ..Default::default()
                },
            )
            .unwrap(),
        )
        .unwrap()
    }

    fn f64_objective(ds: &Dataset, lambda: f64, b: Option<&[f64]>, theta: &[f64]) -> f64 {
        let (d, c) = (ds.d, ds.classes);
        let mut tot = 0.0;
        for i in 0..ds.n {
            let x = ds.row(i);
            let l: Vec<f64> = (0..c)
                .map(|k| (0..d).map(|j| x[j] as f64 * theta[j * c + k]).sum())
                .collect();
            let m = l.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = l.iter().map(|v| (v - m).exp()).sum();
            tot += s.ln() + m - l[ds.labels[i] as usize];
        }
        let mut v = tot / ds.n as f64 + 0.5 * lambda * theta.iter().map(|t| t * t).sum::<f64>();
        if let Some(b) = b {
            v += b.iter().zip(theta).map(|(a, t)| a * t).sum::<f64>() / ds.n as f64;
        }
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        /// The Hessian-vector product matches central differences of the (independently
        /// tested) gradient: H v ≈ (∇J(θ + h v) − ∇J(θ − h v)) / (2h).
        #[test]
        fn hessian_vector_matches_gradient_differences(
            n in 1usize..40, d in 1usize..21, c in 2usize..14, seed in 0u64..1000,
            lambda in 0.0f64..1.0, scale in 0.1f64..3.0,
        ) {
            use rand::{RngExt, SeedableRng};
            let ds = toy(n, d, c, seed);
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed + 7);
            let theta: Vec<f64> = (0..d * c).map(|_| (rng.random::<f64>() - 0.5) * scale).collect();
            let v: Vec<f64> = (0..d * c).map(|_| rng.random::<f64>() - 0.5).collect();
            let obj = Objective::new(Design::new(&ds.features, &ds.labels, d, c), lambda);
            let mut hv = vec![0.0; d * c];
            obj.hessian_vector(&theta, &v, &mut hv);
            let h = 1e-2;
            let tp: Vec<f64> = theta.iter().zip(&v).map(|(t, w)| t + h * w).collect();
            let tm: Vec<f64> = theta.iter().zip(&v).map(|(t, w)| t - h * w).collect();
            let (mut gp, mut gm) = (vec![0.0; d * c], vec![0.0; d * c]);
            obj.value_grad(&tp, &mut gp);
            obj.value_grad(&tm, &mut gm);
            let vnorm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
            for i in 0..d * c {
                let fd = (gp[i] - gm[i]) / (2.0 * h);
                // f32 products in the kernel: tolerance relative to ‖v‖ (‖x‖ ≤ 1, H ≤ 1/2 + λ).
                prop_assert!((fd - hv[i]).abs() <= 2e-3 * vnorm + 1e-4, "i={i} fd={fd} hv={}", hv[i]);
            }
            // Curvature bound of docs/guarantees.md#the-setting: vᵀHv ≤ (L + λ)‖v‖² with L = 1/2 on the unit ball.
            let vhv: f64 = v.iter().zip(&hv).map(|(a, b)| a * b).sum();
            prop_assert!(vhv <= (0.5 + lambda) * vnorm * vnorm + 1e-6);
            prop_assert!(vhv >= lambda * vnorm * vnorm - 1e-6);
        }

        /// The fused kernel's gradient matches central finite differences of an independent
        /// f64 implementation of the objective, and its value matches that implementation.
        #[test]
        fn gradient_matches_finite_differences(
            n in 1usize..40, d in 1usize..21, c in 2usize..14, seed in 0u64..1000,
            lambda in 0.0f64..1.0, scale in 0.1f64..3.0, with_b in any::<bool>(),
        ) {
            use rand::{RngExt, SeedableRng};
            let ds = toy(n, d, c, seed);
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed + 1);
            let theta: Vec<f64> = (0..d * c).map(|_| (rng.random::<f64>() - 0.5) * scale).collect();
            let b: Option<Vec<f64>> = with_b.then(|| (0..d * c).map(|_| rng.random::<f64>() - 0.5).collect());
            let mut obj = Objective::new(Design::new(&ds.features, &ds.labels, d, c), lambda);
            obj.linear = b.clone();
            let mut g = vec![0.0; d * c];
            let v = obj.value_grad(&theta, &mut g);
            let v_ref = f64_objective(&ds, lambda, b.as_deref(), &theta);
            prop_assert!((v - v_ref).abs() <= 1e-5 * (1.0 + v_ref.abs()), "value {v} vs {v_ref}");
            let h = 1e-5;
            for i in 0..d * c {
                let mut tp = theta.clone();
                tp[i] += h;
                let mut tm = theta.clone();
                tm[i] -= h;
                let fd = (f64_objective(&ds, lambda, b.as_deref(), &tp) - f64_objective(&ds, lambda, b.as_deref(), &tm)) / (2.0 * h);
                prop_assert!((g[i] - fd).abs() <= 1e-5, "coord {i}: {} vs fd {}", g[i], fd);
            }
        }
    }

    /// The multi-right-hand-side f64 pass is an execution detail: each problem's value and
    /// gradient are bit-identical to its own single pass (with its own linear term, or the
    /// objective's when `None`), sequential and parallel alike, on sparse rows with an empty row.
    #[test]
    fn value_grad_sparse_batch_is_bit_identical() {
        let ds = toy(2500, 9, 3, 21);
        let f: Vec<f32> = ds
            .features
            .iter()
            .enumerate()
            .map(|(i, &v)| if i % 3 == 0 || i < 40 { 0.0 } else { v })
            .collect();
        let design = Design::new(&f, &ds.labels, ds.d, ds.classes);
        let sp = SparseRows::new(&design);
        let k = ds.d * ds.classes;
        let thetas: Vec<Vec<f64>> = (0..4)
            .map(|q| {
                (0..k)
                    .map(|i| ((i * 37 + q * 11) % 17) as f64 * 0.3 - 2.4)
                    .collect()
            })
            .collect();
        let bs: Vec<Vec<f64>> = (0..4)
            .map(|q| (0..k).map(|i| ((i + 3 * q) % 7) as f64 - 3.0).collect())
            .collect();
        for parallel in [false, true] {
            let obj = Objective {
                design: design.clone(),
                lambda: 0.03,
                linear: Some(bs[3].clone()),
                parallel,
            };
            let problems: Vec<(&[f64], Option<&[f64]>)> = (0..4)
                .map(|q| (thetas[q].as_slice(), (q < 3).then(|| bs[q].as_slice())))
                .collect();
            let mut grads = vec![vec![0.0; k]; 4];
            let values = obj.value_grad_sparse_batch(&sp, &problems, &mut grads);
            for q in 0..4 {
                let single = Objective {
                    linear: Some(bs[q].clone()),
                    ..obj.clone()
                };
                let mut g = vec![0.0; k];
                let v = single.value_grad_sparse(&sp, &thetas[q], &mut g);
                assert_eq!(v.to_bits(), values[q].to_bits(), "problem {q}");
                assert!(
                    g.iter()
                        .zip(&grads[q])
                        .all(|(a, b)| a.to_bits() == b.to_bits())
                );
            }
        }
    }

    #[test]
    fn parallel_and_sequential_agree() {
        let ds = toy(20000, 37, 10, 3);
        let design = Design::new(&ds.features, &ds.labels, ds.d, ds.classes);
        let theta: Vec<f64> = (0..37 * 10)
            .map(|i| ((i * 7919) % 13) as f64 * 0.1 - 0.6)
            .collect();
        let mut a = Objective::new(design.clone(), 0.01);
        let mut ga = vec![0.0; 370];
        let va = a.value_grad(&theta, &mut ga);
        a.parallel = false;
        let mut gb = vec![0.0; 370];
        let vb = a.value_grad(&theta, &mut gb);
        assert!((va - vb).abs() < 1e-9);
        assert!(ga.iter().zip(&gb).all(|(x, y)| (x - y).abs() < 1e-9));
    }

    #[test]
    fn fit_reaches_tolerance_and_is_optimal() {
        let ds = toy(3000, 30, 5, 7);
        let r = fit_logistic(&ds, 1e-3, None, &LbfgsOptions::default()).unwrap();
        assert_eq!(r.lbfgs.termination, Termination::Converged, "{:?}", r.lbfgs);
        assert!(r.lbfgs.grad_norm <= 1e-4);
        // warm start from the solution converges immediately
        let r2 = fit_logistic(&ds, 1e-3, Some(&r.model), &LbfgsOptions::default()).unwrap();
        assert!(r2.lbfgs.evaluations <= 2, "{:?}", r2.lbfgs);
        assert!(accuracy(&r.model, &ds).unwrap() > 0.5);
    }

    /// The f64 pass (erratum 4.8's certification) matches an independent naive f64 gradient
    /// (dense loops, no blocking) to 1e-12, and central differences of the independent f64
    /// objective to 1e-6; its rounding-error bound is positive and far below γ-sized numbers.
    #[test]
    fn f64_gradient_matches_independent_reference() {
        use rand::{RngExt, SeedableRng};
        for (n, d, c, seed) in [(300, 9, 10, 1), (2500, 17, 3, 2), (40, 5, 2, 3)] {
            let ds = toy(n, d, c, seed);
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
            let theta: Vec<f64> = (0..d * c)
                .map(|_| (rng.random::<f64>() - 0.5) * 4.0)
                .collect();
            let b: Vec<f64> = (0..d * c).map(|_| rng.random::<f64>() - 0.5).collect();
            let mut obj = Objective::new(Design::new(&ds.features, &ds.labels, d, c), 0.01);
            obj.linear = Some(b.clone());
            let mut g = vec![0.0; d * c];
            let v = obj.value_grad_f64(&theta, &mut g);
            // naive reference
            let mut gr = vec![0.0; d * c];
            for i in 0..n {
                let x = ds.row(i);
                let l: Vec<f64> = (0..c)
                    .map(|k| (0..d).map(|j| x[j] as f64 * theta[j * c + k]).sum())
                    .collect();
                let m = l.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = l.iter().map(|v| (v - m).exp()).sum();
                for k in 0..c {
                    let r =
                        (l[k] - m).exp() / z - if k == ds.labels[i] as usize { 1.0 } else { 0.0 };
                    for j in 0..d {
                        gr[j * c + k] += x[j] as f64 * r / n as f64;
                    }
                }
            }
            for i in 0..d * c {
                gr[i] += 0.01 * theta[i] + b[i] / n as f64;
                assert!(
                    (g[i] - gr[i]).abs() < 1e-12,
                    "coord {i}: {} vs {}",
                    g[i],
                    gr[i]
                );
            }
            let v_ref = f64_objective(&ds, 0.01, Some(&b), &theta);
            assert!((v - v_ref).abs() < 1e-10 * (1.0 + v_ref.abs()));
            let h = 1e-5;
            for i in (0..d * c).step_by(7) {
                let mut tp = theta.clone();
                tp[i] += h;
                let mut tm = theta.clone();
                tm[i] -= h;
                let fd = (f64_objective(&ds, 0.01, Some(&b), &tp)
                    - f64_objective(&ds, 0.01, Some(&b), &tm))
                    / (2.0 * h);
                assert!((g[i] - fd).abs() < 1e-6, "coord {i}: {} vs fd {fd}", g[i]);
            }
            let e = obj.f64_gradient_error_bound(&theta);
            assert!(e > 0.0 && e < 1e-10, "{e}");
        }
    }

    /// Erratum 4.8: the certificate is met on the released iterate (f64 norm + rounding bound
    /// ≤ γ, far below the fast fit's f32 noise floor), and a fit stopped early (an iteration
    /// cap) is refused instead of being released.
    #[test]
    fn certified_fit_or_refusal() {
        let ds = toy(2000, 20, 10, 5);
        let gamma = 0.01 * std::f64::consts::SQRT_2 / 2000.0;
        let r = fit_logistic_certified(&ds, 1e-2, None, &LbfgsOptions::default(), gamma).unwrap();
        let o = r.optimization.unwrap();
        assert!(o.gradient_norm + o.rounding_bound <= gamma, "{o:?}");
        assert!(
            o.refinement_evaluations > 0,
            "the f32 fit alone should not reach {gamma}"
        );
        // independent check of the certificate
        let obj = Objective::new(
            Design::new(&ds.features, &ds.labels, ds.d, ds.classes),
            1e-2,
        );
        let mut g = vec![0.0; r.model.theta.len()];
        obj.value_grad_f64(&r.model.theta, &mut g);
        assert!(g.iter().map(|x| x * x).sum::<f64>().sqrt() <= gamma);
        // stopped early: refused, not released
        let capped = LbfgsOptions {
            max_iter: 2,
            ..LbfgsOptions::default()
        };
        match fit_logistic_certified(&ds, 1e-2, None, &capped, gamma) {
            Err(LinearError::NotCertified(m)) => assert!(m.contains("not released"), "{m}"),
            other => panic!("an early-stopped fit was not refused: {other:?}"),
        }
        // uncertified (paper): the same cap releases an iterate far from the bound
        let p = fit_logistic(&ds, 1e-2, None, &capped).unwrap();
        assert!(p.lbfgs.grad_norm > 100.0 * gamma, "{:?}", p.lbfgs);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
        /// The a-priori rounding bound (no pass over the data) is never below the one-pass
        /// running bound it relaxes, for sparse and dense rows, any θ scale and a linear term.
        #[test]
        fn a_priori_bound_dominates_the_pass_bound(
            n in 1usize..300, d in 1usize..30, c in 2usize..14, seed in 0u64..1000,
            scale in 0.01f64..100.0, sparsity in 0usize..4, with_b in any::<bool>(),
        ) {
            use rand::{RngExt, SeedableRng};
            let ds = toy(n, d, c, seed);
            let mut f = ds.features.clone();
            for (i, v) in f.iter_mut().enumerate() {
                if sparsity > 0 && i % (sparsity + 1) != 0 {
                    *v = 0.0;
                }
            }
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
            let theta: Vec<f64> = (0..d * c).map(|_| (rng.random::<f64>() - 0.5) * scale).collect();
            let mut obj = Objective::new(Design::new(&f, &ds.labels, d, c), 0.01);
            obj.linear = with_b.then(|| (0..d * c).map(|_| rng.random::<f64>() - 0.5).collect());
            let sp = SparseRows::new(&obj.design);
            let pass = obj.gradient_error_bound_sparse(&sp, &theta);
            let apriori = obj.gradient_error_bound_a_priori(&sp, &theta);
            prop_assert!(pass > 0.0 && apriori >= pass, "a priori {apriori} < pass {pass}");
            prop_assert!(apriori.is_finite());
        }
    }

    /// A start that already meets γ is certified with one f64 evaluation and released as is;
    /// one that does not is refined from its own evaluation (no second evaluation of it), and
    /// the certificate holds on an independent f64 gradient.
    #[test]
    fn certify_checks_the_start_once() {
        let ds = toy(1500, 15, 6, 11);
        let obj = Objective::new(
            Design::new(&ds.features, &ds.labels, ds.d, ds.classes),
            1e-2,
        );
        let gamma = 1e-9;
        let (theta, cert, rep) = obj
            .certify_report(vec![0.0; 90], gamma, &LbfgsOptions::default(), None, None)
            .unwrap();
        assert_eq!(rep.evaluations, cert.refinement_evaluations + 1);
        assert!(
            cert.gradient_norm + cert.rounding_bound <= gamma,
            "{cert:?}"
        );
        let mut g = vec![0.0; 90];
        obj.value_grad_f64(&theta, &mut g);
        assert!(l2(&g) <= gamma);
        let (again, c2, r2) = obj
            .certify_report(theta.clone(), gamma, &LbfgsOptions::default(), None, None)
            .unwrap();
        assert_eq!((c2.refinement_evaluations, r2.evaluations), (0, 1));
        assert_eq!(again, theta);
    }

    #[test]
    fn rejects_bad_lambda() {
        let ds = toy(10, 3, 2, 1);
        assert!(fit_logistic(&ds, -1.0, None, &LbfgsOptions::default()).is_err());
        assert!(fit_logistic(&ds, f64::NAN, None, &LbfgsOptions::default()).is_err());
        assert!(check_lambda(0.0, true).is_err());
    }
}
