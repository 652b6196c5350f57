//! Full-batch L-BFGS with a strong-Wolfe line search.
//!
//! Why not `argmin`: our objective computes value and gradient in one fused pass, and argmin's
//! separate `CostFunction`/`Gradient` calls would need memoisation; teachers of
//! subsample-and-aggregate run hundreds of small fits in parallel, where a plain allocation-light
//! loop is simplest. The algorithm is the textbook one (Nocedal & Wright 2006, Alg. 7.4 for the
//! two-loop recursion, Alg. 3.5/3.6 for the line search, with cubic interpolation in `zoom`),
//! the same structure as PyTorch's `LBFGS(line_search_fn="strong_wolfe")` used by the
//! reference code.

use serde::{Deserialize, Serialize};

/// Which norm of the gradient the stopping rule uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum GradNorm {
    /// max |gᵢ| — what PyTorch's `tolerance_grad` and scikit-learn's `tol` (L-BFGS-B `pgtol`)
    /// test; the reference code's criterion.
    Max,
    /// ‖g‖₂ — docs/study.md's "gradient norm ≤ 1e-4" taken literally; stricter than `Max` (the
    /// default: on MNIST it is worth ~0.2 points of test accuracy at λ = 1e-5).
    #[default]
    L2,
}

/// Options of the L-BFGS solver.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LbfgsOptions {
    /// History size m.
    pub memory: usize,
    /// Stop when the gradient norm is ≤ this (docs/study.md: 1e-4).
    pub grad_tol: f64,
    /// Which norm `grad_tol` applies to.
    pub norm: GradNorm,
    /// Maximum iterations (line searches).
    pub max_iter: usize,
    /// Maximum function+gradient evaluations.
    pub max_evals: usize,
    /// Armijo constant c₁.
    pub c1: f64,
    /// Curvature constant c₂ (strong Wolfe: |φ'(α)| ≤ c₂|φ'(0)|).
    pub c2: f64,
    /// Also stop when an accepted step changes the objective by less than this (absolute;
    /// PyTorch's `tolerance_change`, 1e-9 there). 0 disables it.
    pub f_tol: f64,
    /// Line search on the directional derivative only (for convex objectives): accept a step
    /// t with |φ'(t)| ≤ c₂|φ'(0)|, found by safeguarded secant steps on φ'. For refining a fit
    /// below the resolution of its objective's value (the decrease g²/(2L) of a step falls
    /// under the value's rounding, so Armijo tests on values stall), as the f64 certification
    /// pass of docs/guarantees.md#errata (erratum 4.8) does. Default: false (the strong-Wolfe search).
    #[serde(default)]
    pub gradient_only: bool,
}

impl Default for LbfgsOptions {
    fn default() -> Self {
        LbfgsOptions {
            memory: 10,
            grad_tol: 1e-4,
            norm: GradNorm::L2,
            max_iter: 5000,
            max_evals: 20000,
            c1: 1e-4,
            c2: 0.9,
            f_tol: 0.0,
            gradient_only: false,
        }
    }
}

/// Why the solver stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Termination {
    /// The gradient norm reached the tolerance.
    Converged,
    /// The iteration cap was hit.
    MaxIterations,
    /// The evaluation cap was hit.
    MaxEvaluations,
    /// The line search could not make progress (typically at the floating-point noise floor).
    LineSearchStalled,
    /// The objective changed by less than `f_tol` in one step.
    ValueConverged,
}

/// Why the optimiser stopped, in words.
impl std::fmt::Display for Termination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Termination::Converged => "the gradient norm reached the tolerance",
            Termination::MaxIterations => "the iteration cap",
            Termination::MaxEvaluations => "the evaluation cap",
            Termination::LineSearchStalled => "the line search stalled",
            Termination::ValueConverged => "the objective stopped changing",
        })
    }
}

/// Outcome of one minimisation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LbfgsReport {
    /// Iterations (accepted steps).
    pub iterations: usize,
    /// Function+gradient evaluations, the initial one included.
    pub evaluations: usize,
    /// Final objective value.
    pub value: f64,
    /// Final gradient norm (in the configured norm).
    pub grad_norm: f64,
    /// Why it stopped.
    pub termination: Termination,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn gnorm(g: &[f64], n: GradNorm) -> f64 {
    match n {
        GradNorm::Max => g.iter().fold(0.0, |a, v| a.max(v.abs())),
        GradNorm::L2 => dot(g, g).sqrt(),
    }
}

/// Minimiser of the cubic interpolating the points (x1, f1, g1) and (x2, f2, g2) (position,
/// value, derivative), clamped to the bounds (lo, hi).
fn cubic_interpolate(p1: (f64, f64, f64), p2: (f64, f64, f64), (lo, hi): (f64, f64)) -> f64 {
    let ((x1, f1, g1), (x2, f2, g2)) = (p1, p2);
    let d1 = g1 + g2 - 3.0 * (f1 - f2) / (x1 - x2);
    let d2sq = d1 * d1 - g1 * g2;
    if d2sq >= 0.0 {
        let d2 = d2sq.sqrt();
        let t = if x1 <= x2 {
            x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2.0 * d2))
        } else {
            x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2.0 * d2))
        };
        if t.is_finite() {
            return t.clamp(lo, hi);
        }
    }
    (lo + hi) / 2.0
}

/// An approximation P ≈ ∇²f⁻¹ of the inverse Hessian, used by
/// [`minimize_preconditioned`] as the initial matrix H₀ of the two-loop recursion.
///
/// P must be symmetric positive definite: then every search direction −H g is a descent
/// direction and the L-BFGS update keeps H positive definite, so the stopping rule and the
/// minimiser of a strictly convex objective are unchanged — only the path to it (and the number
/// of evaluations) depends on P.
pub trait Preconditioner {
    /// Writes P·g into `out` (same length as `g`).
    fn apply(&self, g: &[f64], out: &mut [f64]);
}

/// How H₀ = P is scaled at each iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum PrecondScaling {
    /// H₀ = P as given: right when P is already the inverse Hessian's scale (a Newton-type
    /// approximation such as [`crate::precond::KfacPreconditioner`]).
    #[default]
    None,
    /// H₀ = γP with γ = sᵀy / yᵀPy from the latest pair (the preconditioned analogue of the
    /// usual γ = sᵀy / yᵀy; one extra application of P per accepted step).
    Scaled,
}

/// A preconditioner and how to scale it: the optional argument of
/// [`minimize_preconditioned`].
#[derive(Clone, Copy)]
pub struct Preconditioned<'a> {
    /// The approximate inverse Hessian.
    pub p: &'a dyn Preconditioner,
    /// Scaling rule.
    pub scaling: PrecondScaling,
}

/// Minimises `f` (which writes the gradient into its second argument and returns the value)
/// from `x0`. Returns the final point, its gradient and the report.
pub fn minimize<F>(f: F, x0: Vec<f64>, opts: &LbfgsOptions) -> (Vec<f64>, Vec<f64>, LbfgsReport)
where
    F: FnMut(&[f64], &mut [f64]) -> f64,
{
    minimize_preconditioned(f, x0, opts, None)
}

/// [`minimize`] with an optional preconditioner as H₀ of the two-loop recursion (instead of
/// the scalar γI). With a preconditioner the first direction is the preconditioned steepest
/// descent −P g with a unit initial step (a Newton-type step when P ≈ ∇²f⁻¹), and a restart
/// after a non-descent direction or a failed line search also goes along −P g. With `None`
/// this is exactly [`minimize`] (bit for bit: the same operations in the same order).
pub fn minimize_preconditioned<F>(
    mut f: F,
    x0: Vec<f64>,
    opts: &LbfgsOptions,
    pre: Option<Preconditioned<'_>>,
) -> (Vec<f64>, Vec<f64>, LbfgsReport)
where
    F: FnMut(&[f64], &mut [f64]) -> f64,
{
    let mut g = vec![0.0; x0.len()];
    let fx = f(&x0, &mut g);
    minimize_from_evaluated(f, x0, fx, g, opts, pre)
}

/// [`minimize_preconditioned`] from a start whose value `f0` and gradient `g0` the caller has
/// already computed (the same run, without evaluating `x0` again; the report counts that
/// evaluation as the first). Used by the certification pass (docs/guarantees.md#errata (erratum 4.8)), which checks
/// the start before refining it.
pub fn minimize_from_evaluated<F>(
    mut f: F,
    x0: Vec<f64>,
    f0: f64,
    g0: Vec<f64>,
    opts: &LbfgsOptions,
    pre: Option<Preconditioned<'_>>,
) -> (Vec<f64>, Vec<f64>, LbfgsReport)
where
    F: FnMut(&[f64], &mut [f64]) -> f64,
{
    let n = x0.len();
    assert_eq!(g0.len(), n, "gradient and start have the same length");
    let mut x = x0;
    let mut g = g0;
    let mut fx = f0;
    let mut evals = 1;
    let mut hist = History::new(opts.memory.max(1), n, pre.is_some());
    let mut d = vec![0.0; n];
    let mut xt = vec![0.0; n];
    let mut gt = vec![0.0; n];
    let mut iter = 0;
    let mut stalls = 0;
    let termination = loop {
        if let Some(t) = stop_before_step(&g, fx, iter, evals, opts) {
            break t;
        }
        let dg = hist.direction(&g, &mut d, pre.as_ref());
        let t0 = if pre.is_some() {
            1.0
        } else if hist.is_empty() {
            (1.0 / dot(&g, &g).sqrt()).min(1.0)
        } else {
            1.0
        };
        let start = LineStart {
            x: &x,
            f0: fx,
            dg0: dg,
            d: &d,
            t_init: t0,
            budget: opts.max_evals - evals,
        };
        let ls = if opts.gradient_only {
            gradient_search(&mut f, &start, opts.c2, &mut xt, &mut gt)
        } else {
            strong_wolfe(&mut f, &start, opts, &mut xt, &mut gt)
        };
        evals += ls.evals;
        match ls.step {
            Some((t, ft)) if ft <= fx || opts.gradient_only => {
                // accept: s = t d, y = g_t − g
                let s: Vec<f64> = d.iter().map(|di| t * di).collect();
                let y: Vec<f64> = gt.iter().zip(&g).map(|(a, b)| a - b).collect();
                x.copy_from_slice(&xt);
                g.copy_from_slice(&gt);
                let improved = ft < fx;
                let change = fx - ft;
                fx = ft;
                hist.push(s, y, pre.as_ref());
                iter += 1;
                if opts.f_tol > 0.0 && change < opts.f_tol && gnorm(&g, opts.norm) > opts.grad_tol {
                    break Termination::ValueConverged;
                }
                if improved || opts.gradient_only {
                    stalls = 0;
                } else {
                    stalls += 1;
                    if stalls >= 3 {
                        break Termination::LineSearchStalled;
                    }
                }
            }
            _ => {
                if hist.is_empty() {
                    break Termination::LineSearchStalled;
                }
                // retry once from steepest descent with a fresh memory
                hist.clear();
                stalls += 1;
                if stalls >= 3 {
                    break Termination::LineSearchStalled;
                }
            }
        }
    };
    let report = LbfgsReport {
        iterations: iter,
        evaluations: evals,
        value: fx,
        grad_norm: gnorm(&g, opts.norm),
        termination,
    };
    (x, g, report)
}

/// The stopping tests checked before each step, in order: converged (gradient norm ≤ the
/// tolerance), non-finite value, iteration and evaluation budgets.
fn stop_before_step(
    g: &[f64],
    fx: f64,
    iter: usize,
    evals: usize,
    opts: &LbfgsOptions,
) -> Option<Termination> {
    if gnorm(g, opts.norm) <= opts.grad_tol {
        Some(Termination::Converged)
    } else if !fx.is_finite() {
        Some(Termination::LineSearchStalled)
    } else if iter >= opts.max_iter {
        Some(Termination::MaxIterations)
    } else if evals >= opts.max_evals {
        Some(Termination::MaxEvaluations)
    } else {
        None
    }
}

/// The L-BFGS memory: the newest m pairs (s, y) with ρ = 1/sᵀy, the two-loop recursion's
/// scratch, and (with a preconditioner) P·q and yᵀPy of the newest pair (scaled mode).
struct History {
    m: usize,
    s: Vec<Vec<f64>>,
    y: Vec<Vec<f64>>,
    rho: Vec<f64>,
    alpha: Vec<f64>,
    pq: Vec<f64>,
    y_p_y: f64,
}

impl History {
    fn new(m: usize, n: usize, preconditioned: bool) -> Self {
        History {
            m,
            s: Vec::with_capacity(m),
            y: Vec::with_capacity(m),
            rho: Vec::with_capacity(m),
            alpha: vec![0.0; m],
            pq: if preconditioned {
                vec![0.0; n]
            } else {
                Vec::new()
            },
            y_p_y: 0.0,
        }
    }

    fn is_empty(&self) -> bool {
        self.s.is_empty()
    }

    fn clear(&mut self) {
        self.s.clear();
        self.y.clear();
        self.rho.clear();
    }

    /// The search direction d = −H g by the two-loop recursion (H₀ = γI, or P), restarting
    /// from (preconditioned) steepest descent with a fresh memory when that is not a descent
    /// direction (numerical trouble). Returns dᵀg.
    fn direction(&mut self, g: &[f64], d: &mut [f64], pre: Option<&Preconditioned<'_>>) -> f64 {
        d.iter_mut().zip(g).for_each(|(di, gi)| *di = -gi);
        let k = self.s.len();
        for i in (0..k).rev() {
            self.alpha[i] = self.rho[i] * dot(&self.s[i], d);
            let a = self.alpha[i];
            d.iter_mut()
                .zip(&self.y[i])
                .for_each(|(di, yi)| *di -= a * yi);
        }
        match pre {
            None => {
                if k > 0 {
                    let gamma = 1.0 / (self.rho[k - 1] * dot(&self.y[k - 1], &self.y[k - 1]));
                    d.iter_mut().for_each(|di| *di *= gamma);
                }
            }
            Some(pc) => {
                pc.p.apply(d, &mut self.pq);
                let gamma = match pc.scaling {
                    PrecondScaling::Scaled if k > 0 && self.y_p_y > 0.0 => {
                        1.0 / (self.rho[k - 1] * self.y_p_y)
                    }
                    _ => 1.0,
                };
                d.iter_mut()
                    .zip(&self.pq)
                    .for_each(|(di, pi)| *di = gamma * pi);
            }
        }
        for i in 0..k {
            let b = self.rho[i] * dot(&self.y[i], d);
            let a = self.alpha[i] - b;
            d.iter_mut()
                .zip(&self.s[i])
                .for_each(|(di, si)| *di += a * si);
        }
        let dg = dot(d, g);
        if !(dg.is_nan() || dg >= 0.0) {
            return dg;
        }
        self.clear();
        match pre {
            None => d.iter_mut().zip(g).for_each(|(di, gi)| *di = -gi),
            Some(pc) => {
                pc.p.apply(g, &mut self.pq);
                d.iter_mut().zip(&self.pq).for_each(|(di, pi)| *di = -pi);
            }
        }
        dot(d, g)
    }

    /// Stores the accepted pair (s, y) when sᵀy is safely positive, dropping the oldest when
    /// full.
    fn push(&mut self, s: Vec<f64>, y: Vec<f64>, pre: Option<&Preconditioned<'_>>) {
        let sy = dot(&s, &y);
        if sy > 1e-10 * dot(&y, &y).max(f64::MIN_POSITIVE) {
            if self.s.len() == self.m {
                self.s.remove(0);
                self.y.remove(0);
                self.rho.remove(0);
            }
            if let Some(pc) = pre
                && pc.scaling == PrecondScaling::Scaled
            {
                pc.p.apply(&y, &mut self.pq);
                self.y_p_y = dot(&y, &self.pq);
            }
            self.s.push(s);
            self.y.push(y);
            self.rho.push(1.0 / sy);
        }
    }
}

struct LineSearch {
    step: Option<(f64, f64)>,
    evals: usize,
}

/// Where a line search starts: the point x, its value f0, the directional derivative
/// dg0 = ∇f(x)·d along the direction d, the first trial step and the evaluations left.
#[derive(Clone, Copy)]
struct LineStart<'a> {
    x: &'a [f64],
    f0: f64,
    dg0: f64,
    d: &'a [f64],
    t_init: f64,
    budget: usize,
}

/// Strong-Wolfe line search along `d` from `x` (Nocedal & Wright Alg. 3.5 + 3.6). On success
/// `xt`/`gt` hold the accepted point and its gradient.
fn strong_wolfe<F>(
    f: &mut F,
    start: &LineStart,
    opts: &LbfgsOptions,
    xt: &mut [f64],
    gt: &mut [f64],
) -> LineSearch
where
    F: FnMut(&[f64], &mut [f64]) -> f64,
{
    let LineStart {
        x,
        f0,
        dg0,
        d,
        t_init,
        budget,
    } = *start;
    let mut evals = 0;
    let mut eval = |t: f64, xt: &mut [f64], gt: &mut [f64], evals: &mut usize| -> (f64, f64) {
        xt.iter_mut()
            .zip(x.iter().zip(d))
            .for_each(|(o, (xi, di))| *o = xi + t * di);
        let ft = f(xt, gt);
        *evals += 1;
        (ft, dot(gt, d))
    };
    let (c1, c2) = (opts.c1, opts.c2);
    let max_ls = 25.min(budget.max(1));
    // best point seen (for the fallback when the search stalls at the noise floor)
    let mut best: Option<(f64, f64, f64)> = None; // (t, f, dg)
    let mut t_prev = 0.0;
    let (mut f_prev, mut dg_prev) = (f0, dg0);
    let mut t = t_init;
    let (mut lo, mut hi);
    loop {
        let (ft, dgt) = eval(t, xt, gt, &mut evals);
        if !ft.is_finite() {
            // step too long: shrink
            lo = (t_prev, f_prev, dg_prev);
            hi = (t, f64::INFINITY, f64::NAN);
            break;
        }
        if ft < f0 && best.is_none_or(|b| ft < b.1) {
            best = Some((t, ft, dgt));
        }
        if ft > f0 + c1 * t * dg0 || (evals > 1 && ft >= f_prev) {
            lo = (t_prev, f_prev, dg_prev);
            hi = (t, ft, dgt);
            break;
        }
        if dgt.abs() <= -c2 * dg0 {
            return LineSearch {
                step: Some((t, ft)),
                evals,
            };
        }
        if dgt >= 0.0 {
            lo = (t, ft, dgt);
            hi = (t_prev, f_prev, dg_prev);
            break;
        }
        if evals >= max_ls {
            return finish(best, &mut eval, xt, gt, evals);
        }
        // extrapolate
        let t_new = cubic_interpolate(
            (t_prev, f_prev, dg_prev),
            (t, ft, dgt),
            (t + 0.01 * (t - t_prev), t * 10.0),
        );
        t_prev = t;
        f_prev = ft;
        dg_prev = dgt;
        t = t_new;
    }
    // zoom between lo (satisfies Armijo, lower value) and hi
    loop {
        if evals >= max_ls
            || (hi.0 - lo.0).abs() * d.iter().fold(0.0f64, |a, v| a.max(v.abs())) < 1e-16
        {
            return finish(best, &mut eval, xt, gt, evals);
        }
        let (a, b) = if lo.0 < hi.0 {
            (lo.0, hi.0)
        } else {
            (hi.0, lo.0)
        };
        let width = b - a;
        let mut tn = if hi.1.is_finite() && hi.2.is_finite() {
            cubic_interpolate(lo, hi, (a, b))
        } else {
            (a + b) / 2.0
        };
        // keep away from the ends
        let eps = 0.1 * width;
        if tn - a < eps || b - tn < eps {
            tn = (a + b) / 2.0;
        }
        let (ft, dgt) = eval(tn, xt, gt, &mut evals);
        if ft.is_finite() && ft < f0 && best.is_none_or(|bst| ft < bst.1) {
            best = Some((tn, ft, dgt));
        }
        if !ft.is_finite() || ft > f0 + c1 * tn * dg0 || ft >= lo.1 {
            hi = (tn, ft, dgt);
        } else {
            if dgt.abs() <= -c2 * dg0 {
                return LineSearch {
                    step: Some((tn, ft)),
                    evals,
                };
            }
            if dgt * (hi.0 - lo.0) >= 0.0 {
                hi = lo;
            }
            lo = (tn, ft, dgt);
        }
    }
}

/// Line search on φ'(t) = ∇f(x + t·d)·d only (see [`LbfgsOptions::gradient_only`]). For a
/// convex f, φ' is nondecreasing: a bracket [lo, hi] with φ'(lo) < 0 < φ'(hi) is narrowed by
/// safeguarded secant steps until |φ'(t)| ≤ c₂|φ'(0)|. Every accepted t with φ'(t) ≤ 0 lies
/// before the minimiser along d, so f decreased; the fallback after `max_ls` evaluations is the
/// largest such t seen.
fn gradient_search<F>(
    f: &mut F,
    start: &LineStart,
    c2: f64,
    xt: &mut [f64],
    gt: &mut [f64],
) -> LineSearch
where
    F: FnMut(&[f64], &mut [f64]) -> f64,
{
    let LineStart {
        x,
        dg0,
        d,
        t_init,
        budget,
        ..
    } = *start;
    let mut evals = 0;
    let mut eval = |t: f64, xt: &mut [f64], gt: &mut [f64], evals: &mut usize| -> (f64, f64) {
        xt.iter_mut()
            .zip(x.iter().zip(d))
            .for_each(|(o, (xi, di))| *o = xi + t * di);
        let ft = f(xt, gt);
        *evals += 1;
        (ft, dot(gt, d))
    };
    let max_ls = 25.min(budget.max(1));
    let mut lo = (0.0, dg0);
    let mut hi: Option<(f64, f64)> = None;
    let mut t = t_init;
    while evals < max_ls {
        let (ft, dgt) = eval(t, xt, gt, &mut evals);
        if !ft.is_finite() || !dgt.is_finite() {
            hi = Some((t, f64::INFINITY));
        } else if dgt.abs() <= -c2 * dg0 {
            return LineSearch {
                step: Some((t, ft)),
                evals,
            };
        } else if dgt < 0.0 {
            lo = (t, dgt);
        } else {
            hi = Some((t, dgt));
        }
        t = match hi {
            None => {
                // extrapolate: secant through (0, φ'(0)) … (lo), at most ×10
                let (tl, gl) = lo;
                let s = if gl > dg0 {
                    tl - gl * tl / (gl - dg0)
                } else {
                    10.0 * tl
                };
                s.clamp(2.0 * tl, 10.0 * tl)
            }
            Some((th, gh)) => {
                let (tl, gl) = lo;
                let w = th - tl;
                let s = if gh.is_finite() {
                    tl - gl * w / (gh - gl)
                } else {
                    tl + w / 2.0
                };
                if s.is_finite() {
                    s.clamp(tl + 0.1 * w, th - 0.1 * w)
                } else {
                    tl + w / 2.0
                }
            }
        };
        if hi.is_some_and(|(th, _)| (th - lo.0).abs() <= 1e-16 * th.abs()) {
            break;
        }
    }
    if lo.0 > 0.0 {
        let (ft, _) = eval(lo.0, xt, gt, &mut evals);
        LineSearch {
            step: Some((lo.0, ft)),
            evals,
        }
    } else {
        LineSearch { step: None, evals }
    }
}

/// Fallback when the search runs out of evaluations: take the best decreasing point seen
/// (re-evaluated so `xt`/`gt` match it), or report failure.
fn finish<E>(
    best: Option<(f64, f64, f64)>,
    eval: &mut E,
    xt: &mut [f64],
    gt: &mut [f64],
    mut evals: usize,
) -> LineSearch
where
    E: FnMut(f64, &mut [f64], &mut [f64], &mut usize) -> (f64, f64),
{
    match best {
        Some((t, _, _)) => {
            let (ft, _) = eval(t, xt, gt, &mut evals);
            LineSearch {
                step: Some((t, ft)),
                evals,
            }
        }
        None => LineSearch { step: None, evals },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rosenbrock_converges() {
        let f = |x: &[f64], g: &mut [f64]| {
            let (a, b) = (x[0], x[1]);
            g[0] = -2.0 * (1.0 - a) - 400.0 * a * (b - a * a);
            g[1] = 200.0 * (b - a * a);
            (1.0 - a).powi(2) + 100.0 * (b - a * a).powi(2)
        };
        let opts = LbfgsOptions {
            grad_tol: 1e-8,
            ..Default::default()
        };
        let (x, _, r) = minimize(f, vec![-1.2, 1.0], &opts);
        assert_eq!(r.termination, Termination::Converged, "{r:?}");
        assert!(
            (x[0] - 1.0).abs() < 1e-6 && (x[1] - 1.0).abs() < 1e-6,
            "{x:?}"
        );
    }

    /// Handing in the start's value and gradient is the same run as evaluating it (bit for bit).
    #[test]
    fn minimize_from_evaluated_is_the_same_run() {
        let diag: Vec<f64> = (1..=30).map(|i| i as f64 * 0.37).collect();
        let f = |x: &[f64], g: &mut [f64]| {
            let mut v = 0.0;
            for i in 0..x.len() {
                g[i] = diag[i] * (x[i] - 1.0) + (x[i] - 1.0).powi(3);
                v += 0.5 * diag[i] * (x[i] - 1.0).powi(2) + 0.25 * (x[i] - 1.0).powi(4);
            }
            v
        };
        for gradient_only in [false, true] {
            let opts = LbfgsOptions {
                grad_tol: 1e-10,
                gradient_only,
                ..Default::default()
            };
            let x0 = vec![0.3; 30];
            let a = minimize_preconditioned(f, x0.clone(), &opts, None);
            let mut g0 = vec![0.0; 30];
            let f0 = f(&x0, &mut g0);
            let b = minimize_from_evaluated(f, x0, f0, g0, &opts, None);
            assert_eq!(a, b);
        }
    }

    #[test]
    fn quadratic_converges_fast() {
        let diag: Vec<f64> = (1..=50).map(|i| i as f64).collect();
        let f = |x: &[f64], g: &mut [f64]| {
            let mut v = 0.0;
            for i in 0..x.len() {
                g[i] = diag[i] * (x[i] - 1.0);
                v += 0.5 * diag[i] * (x[i] - 1.0).powi(2);
            }
            v
        };
        let (x, _, r) = minimize(
            f,
            vec![0.0; 50],
            &LbfgsOptions {
                grad_tol: 1e-10,
                ..Default::default()
            },
        );
        assert_eq!(r.termination, Termination::Converged);
        assert!(x.iter().all(|v| (v - 1.0).abs() < 1e-9));
    }
}
