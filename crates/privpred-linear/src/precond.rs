//! A Kronecker-factored (K-FAC-style) preconditioner for the regularised multinomial logistic
//! objective J(θ) = (1/N) Σᵢ ℓ(θᵀxᵢ, yᵢ) + (μ/2)‖θ‖² (+ a linear term, which has no curvature).
//!
//! # The approximation
//! With θ row-major `d × C` and pᵢ = softmax(θᵀxᵢ), the Hessian acts on a direction V (`d × C`)
//! as H·V = (1/N) Σᵢ xᵢxᵢᵀ V Aᵢ + μV with Aᵢ = diag(pᵢ) − pᵢpᵢᵀ. Replacing the average of the
//! products by the product of the averages gives
//!
//! H ≈ Σ ⊗ A + μI,  Σ = XᵀX/N (`d × d`, the data's second moment),  A = (1/N) Σᵢ Aᵢ (`C × C`),
//!
//! which is exact when every Aᵢ is the same (e.g. at θ = 0, where every pᵢ is uniform). With the
//! eigendecompositions Σ = U diag(s) Uᵀ and A = W diag(a) Wᵀ, its inverse is
//! P·G = U [(UᵀGW) ⊘ (s aᵀ + μ)] Wᵀ: two `d × d × C` products per application (about 1 % of one
//! evaluation of the objective on MNIST), after a one-off `d × d` eigendecomposition.
//!
//! A has eigenvalue 0 along the all-classes direction 1/√C (the softmax is invariant to adding
//! the same value to every logit, so the loss is exactly flat along every v ⊗ 1): there P gives
//! 1/μ, the exact inverse curvature of the regulariser. Directions of Σ's null space (pixels
//! that are zero in every image) get 1/μ for the same reason.
//!
//! # Determinism
//! Σ is accumulated by [`privpred_data::linalg::mean_cov`] (panel GEMMs summed in panel order,
//! independent of the thread count), the eigensolver is sequential with fixed signs, and A is
//! summed over fixed row blocks in block order: the preconditioner is a deterministic function
//! of the data, θ and μ — the same whatever the thread count, scheduling, or which fits ran
//! before.
//!
//! # Why privpred-data's eigensolver and not `faer`
//! [`privpred_data::linalg::sym_eigen`] (Householder + implicit QL) is already a dependency,
//! sequential, and fixes each eigenvector's sign, so the preconditioner is reproducible bit for
//! bit; it runs once per dataset (`d = 785`: about as long as a few dozen evaluations), which
//! the hundreds of fits sharing it amortise. `faer`'s blocked solver would be faster but would
//! add a large dependency to this crate for a one-off cost.
//!
//! # Privacy
//! A preconditioner only changes the path L-BFGS takes to the minimiser of a strictly convex
//! objective, not the minimiser or the stopping rule; it depends on the training data, which is
//! the mechanism's input anyway. Loss perturbation's output (and so its guarantee) is unchanged.

use crate::error::{LinearError, Result};
use crate::kernel::{self, Design, KernelParams};
use crate::lbfgs::Preconditioner;
use rayon::prelude::*;
use std::sync::Arc;

/// The data's second moment Σ = XᵀX/N, eigendecomposed. Depends only on the features:
/// compute it once per dataset and share it (through an [`Arc`]) between preconditioners.
#[derive(Debug, Clone, PartialEq)]
pub struct DataMoment {
    d: usize,
    /// Eigenvalues, descending, clamped at 0.
    values: Vec<f64>,
    /// Unit eigenvectors as rows (`d × d`, row-major).
    vectors: Vec<f64>,
}

impl DataMoment {
    /// Σ = XᵀX/N over the rows of `design` (its first `d` columns), accumulated blockwise in a
    /// fixed order, then eigendecomposed.
    pub fn new(design: &Design<'_>) -> Result<Self> {
        let (n, d, dp) = (design.n, design.d, design.dp);
        if n == 0 || d == 0 {
            return Err(LinearError::invalid(
                "design",
                format!("{n} × {d}"),
                "needs at least one row and one feature",
            ));
        }
        let idx: Vec<usize> = (0..n).collect();
        // Centred covariance + mean meanᵀ = the uncentred second moment. `mean_cov` uses rayon
        // internally; it runs on a dedicated thread with its own one-thread pool, so a caller
        // inside the global pool that guards this computation with a lock or a `OnceLock` (the
        // study's compute-once caches) cannot deadlock by stealing a task that waits on that
        // same lock. The result does not depend on the thread count.
        let (mean, cov) = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    rayon::ThreadPoolBuilder::new()
                        .num_threads(1)
                        .build()
                        .map(|pool| {
                            pool.install(|| {
                                privpred_data::linalg::mean_cov(&design.x, dp, &idx, 1.0)
                            })
                        })
                        .map_err(|e| LinearError::Numerical(format!("data moment: {e}")))
                })
                .join()
                .unwrap_or_else(|_| {
                    Err(LinearError::Numerical(
                        "data moment: worker thread panicked".into(),
                    ))
                })
        })?;
        let mut sigma = vec![0f64; d * d];
        for j in 0..d {
            for k in 0..d {
                sigma[j * d + k] = cov[j * dp + k] + mean[j] * mean[k];
            }
        }
        Self::from_matrix(&sigma, d)
    }

    /// From an explicit symmetric `d × d` second-moment matrix (row-major).
    pub fn from_matrix(sigma: &[f64], d: usize) -> Result<Self> {
        if sigma.len() != d * d || sigma.iter().any(|v| !v.is_finite()) {
            return Err(LinearError::Numerical(format!(
                "second-moment matrix: {} finite values needed for d = {d}",
                d * d
            )));
        }
        let (mut values, vectors) = privpred_data::linalg::sym_eigen(sigma, d);
        values.iter_mut().for_each(|v| *v = v.max(0.0));
        Ok(DataMoment { d, values, vectors })
    }

    /// Feature dimension d.
    pub fn dim(&self) -> usize {
        self.d
    }

    /// Eigenvalues of Σ, descending (clamped at 0).
    pub fn eigenvalues(&self) -> &[f64] {
        &self.values
    }
}

/// Rows per block of the class-curvature pass.
const BLOCK: usize = 1024;

/// A = (1/N) Σᵢ (diag(pᵢ) − pᵢpᵢᵀ) at θ (row-major `d × C`), `C × C` row-major: the class
/// factor of the Fisher/Gauss–Newton matrix. Summed in f64 per block of rows, blocks in order
/// (deterministic whatever the thread count; parallel across blocks unless the caller runs
/// under [`kernel::sequential`]).
pub fn class_curvature(design: &Design<'_>, theta: &[f64]) -> Vec<f64> {
    let (n, d, c) = (design.n, design.d, design.c);
    let params = KernelParams::from_theta(theta, d, c);
    let block = |b: usize| -> Vec<f64> {
        let mut acc = vec![0f64; c * c];
        let mut l = vec![0f32; params.cp];
        let mut p = vec![0f64; c];
        for i in b * BLOCK..((b + 1) * BLOCK).min(n) {
            kernel::forward_row(design.row(i), &params.w, params.dp, params.cp, &mut l);
            let m = l[..c].iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v)) as f64;
            let mut z = 0.0;
            for k in 0..c {
                p[k] = (l[k] as f64 - m).exp();
                z += p[k];
            }
            p.iter_mut().for_each(|v| *v /= z);
            for k in 0..c {
                acc[k * c + k] += p[k];
                for q in 0..c {
                    acc[k * c + q] -= p[k] * p[q];
                }
            }
        }
        acc
    };
    let nblocks = n.div_ceil(BLOCK);
    let parts: Vec<Vec<f64>> = if kernel::parallel_allowed() && nblocks > 1 {
        (0..nblocks).into_par_iter().map(block).collect()
    } else {
        (0..nblocks).map(block).collect()
    };
    let mut a = vec![0f64; c * c];
    for part in &parts {
        a.iter_mut().zip(part).for_each(|(x, y)| *x += y);
    }
    let nf = n.max(1) as f64;
    // symmetrise exactly and average
    for k in 0..c {
        for q in k..c {
            let v = 0.5 * (a[k * c + q] + a[q * c + k]) / nf;
            a[k * c + q] = v;
            a[q * c + k] = v;
        }
    }
    a
}

/// The inverse of the Kronecker-factored Hessian approximation (Σ ⊗ A + μI)⁻¹ (see the module
/// documentation): symmetric positive definite, with eigenvalues in [1/(s₁a₁ + μ), 1/μ].
#[derive(Debug, Clone)]
pub struct KfacPreconditioner {
    moment: Arc<DataMoment>,
    c: usize,
    mu: f64,
    /// Eigenvalues of A (clamped at 0; the all-classes one is ≈ 0).
    a_values: Vec<f64>,
    /// Unit eigenvectors of A as rows (`C × C`).
    a_vectors: Vec<f64>,
    /// 1/(sⱼ aₖ + μ), `d × C` row-major.
    inv: Vec<f64>,
}

impl KfacPreconditioner {
    /// From the data moment, a class factor A (symmetric `C × C`, row-major) and μ > 0.
    pub fn new(moment: Arc<DataMoment>, a: &[f64], c: usize, mu: f64) -> Result<Self> {
        if !(mu.is_finite() && mu > 0.0) {
            return Err(LinearError::invalid(
                "mu",
                mu,
                "the preconditioner needs an L2 strength > 0 (the loss is flat along θ ↦ θ + v1ᵀ)",
            ));
        }
        if c < 2 || a.len() != c * c || a.iter().any(|v| !v.is_finite()) {
            return Err(LinearError::Numerical(format!(
                "class curvature: {} finite values needed for C = {c}",
                c * c
            )));
        }
        let (mut a_values, a_vectors) = privpred_data::linalg::sym_eigen(a, c);
        a_values.iter_mut().for_each(|v| *v = v.max(0.0));
        let d = moment.d;
        let mut inv = vec![0f64; d * c];
        for j in 0..d {
            for k in 0..c {
                inv[j * c + k] = 1.0 / (moment.values[j] * a_values[k] + mu);
            }
        }
        Ok(KfacPreconditioner {
            moment,
            c,
            mu,
            a_values,
            a_vectors,
            inv,
        })
    }

    /// The preconditioner of the objective with L2 strength `mu` at `theta` (row-major
    /// `d × C`) over `design`: A from one forward pass ([`class_curvature`]).
    pub fn at(
        moment: Arc<DataMoment>,
        design: &Design<'_>,
        theta: &[f64],
        mu: f64,
    ) -> Result<Self> {
        let (d, c) = (design.d, design.c);
        if moment.d != d || theta.len() != d * c {
            return Err(LinearError::Dimension(format!(
                "preconditioner: data moment of dimension {}, design {d} × {c}, θ of length {}",
                moment.d,
                theta.len()
            )));
        }
        let a = class_curvature(design, theta);
        Self::new(moment, &a, c, mu)
    }

    /// The preconditioner of the same objective (same data moment, same μ) with the class
    /// factor A taken at `theta` instead: one forward pass ([`class_curvature`]). Loss
    /// perturbation's certified fits rebuild it at each fit's own start, whose softmax
    /// probabilities (far from the non-private model's when the noise is large) set the
    /// curvature the f64 run has to resolve (2–2.5× fewer evaluations on MNIST at ε ≤ 0.5).
    pub fn rebuilt_at(&self, design: &Design<'_>, theta: &[f64]) -> Result<Self> {
        Self::at(self.moment.clone(), design, theta, self.mu)
    }

    /// The L2 strength μ it was built for.
    pub fn mu(&self) -> f64 {
        self.mu
    }

    /// Eigenvalues of the class factor A (descending, clamped at 0).
    pub fn class_eigenvalues(&self) -> &[f64] {
        &self.a_values
    }

    /// Parameter count d·C.
    pub fn len(&self) -> usize {
        self.moment.d * self.c
    }

    /// Whether the parameter count is 0 (never, for a constructed preconditioner).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Σᵢ a[i]·b[i] with 8 independent partial sums (vectorises; fixed order).
fn dot8(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0f64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut s = acc.iter().sum::<f64>();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

impl Preconditioner for KfacPreconditioner {
    /// out = U [(UᵀGW) ⊘ (s aᵀ + μ)] Wᵀ for G row-major `d × C`.
    fn apply(&self, g: &[f64], out: &mut [f64]) {
        let (d, c) = (self.moment.d, self.c);
        let (e, f) = (&self.moment.vectors, &self.a_vectors);
        assert!(
            g.len() == d * c && out.len() == d * c,
            "preconditioner size"
        );
        if c > 16 {
            return self.apply_wide(g, out);
        }
        // G class-major (C × d), so that UᵀG is C dot products per eigenvector
        let mut gc = vec![0f64; c * d];
        for j in 0..d {
            for l in 0..c {
                gc[l * d + j] = g[j * c + l];
            }
        }
        // T = UᵀG (d × C), then T ← (T W) ⊘ (s aᵀ + μ), then T ← T Wᵀ
        let mut t = vec![0f64; d * c];
        let mut row = vec![0f64; c];
        for j in 0..d {
            let ej = &e[j * d..(j + 1) * d];
            for l in 0..c {
                row[l] = dot8(ej, &gc[l * d..(l + 1) * d]);
            }
            // rotate into A's eigenbasis (W's columns are F's rows), scale, rotate back
            let tj = &mut t[j * c..(j + 1) * c];
            let mut r2 = [0f64; 16];
            for k in 0..c {
                let fk = &f[k * c..(k + 1) * c];
                r2[k] = fk.iter().zip(&row).map(|(x, y)| x * y).sum::<f64>() * self.inv[j * c + k];
            }
            for (l, o) in tj.iter_mut().enumerate() {
                *o = (0..c).map(|k| r2[k] * f[k * c + l]).sum();
            }
        }
        // out = U T: class-major accumulation Vc[l] += T[j, l] · U[:, j]ᵀ = T[j, l] · e_j
        let vc = &mut gc;
        vc.fill(0.0);
        for j in 0..d {
            let ej = &e[j * d..(j + 1) * d];
            for l in 0..c {
                let tl = t[j * c + l];
                if tl != 0.0 {
                    vc[l * d..(l + 1) * d]
                        .iter_mut()
                        .zip(ej)
                        .for_each(|(v, x)| *v += tl * x);
                }
            }
        }
        for j in 0..d {
            for l in 0..c {
                out[j * c + l] = vc[l * d + j];
            }
        }
    }
}

impl KfacPreconditioner {
    /// [`Preconditioner::apply`] for C > 16 (heap scratch per row).
    fn apply_wide(&self, g: &[f64], out: &mut [f64]) {
        let (d, c) = (self.moment.d, self.c);
        let (e, f) = (&self.moment.vectors, &self.a_vectors);
        let mut t = vec![0f64; d * c];
        for j in 0..d {
            let ej = &e[j * d..(j + 1) * d];
            let row: Vec<f64> = (0..c)
                .map(|l| (0..d).map(|i| ej[i] * g[i * c + l]).sum())
                .collect();
            let r2: Vec<f64> = (0..c)
                .map(|k| (0..c).map(|l| f[k * c + l] * row[l]).sum::<f64>() * self.inv[j * c + k])
                .collect();
            for l in 0..c {
                t[j * c + l] = (0..c).map(|k| r2[k] * f[k * c + l]).sum();
            }
        }
        out.fill(0.0);
        for j in 0..d {
            let ej = &e[j * d..(j + 1) * d];
            for i in 0..d {
                for l in 0..c {
                    out[i * c + l] += ej[i] * t[j * c + l];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lbfgs::{LbfgsOptions, PrecondScaling, Preconditioned, Termination};
    use crate::train::{Objective, tests::toy};
    use proptest::prelude::*;
    use rand::{RngExt, SeedableRng};

    fn dotp(a: &[f64], b: &[f64]) -> f64 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    fn norm(a: &[f64]) -> f64 {
        dotp(a, a).sqrt()
    }

    /// The Kronecker factorisation is exact at θ = 0 (every pᵢ uniform, so every Aᵢ is the same
    /// (I − 11ᵀ/C)/C): there P·H·v = v for every v, H the exact Hessian-vector product.
    #[test]
    fn inverts_the_exact_kronecker_hessian() {
        for (n, d, c, mu, seed) in [
            (400, 9, 3, 0.05, 1),
            (1000, 23, 10, 0.01, 2),
            (300, 17, 5, 0.2, 3),
            (500, 30, 20, 0.05, 4),
        ] {
            let ds = toy(n, d, c, seed);
            let design = Design::new(&ds.features, &ds.labels, d, c);
            let moment = Arc::new(DataMoment::new(&design).unwrap());
            let theta = vec![0.0; d * c];
            let pre = KfacPreconditioner::at(moment, &design, &theta, mu).unwrap();
            let a = class_curvature(&design, &theta);
            for k in 0..c {
                for q in 0..c {
                    let exact = if k == q { 1.0 / c as f64 } else { 0.0 } - 1.0 / (c * c) as f64;
                    assert!((a[k * c + q] - exact).abs() < 1e-7, "A[{k},{q}]");
                }
            }
            let obj = Objective::new(design.clone(), mu);
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
            for _ in 0..5 {
                let v: Vec<f64> = (0..d * c).map(|_| rng.random::<f64>() - 0.5).collect();
                let mut hv = vec![0.0; d * c];
                obj.hessian_vector(&theta, &v, &mut hv);
                let mut phv = vec![0.0; d * c];
                pre.apply(&hv, &mut phv);
                let err: Vec<f64> = phv.iter().zip(&v).map(|(a, b)| a - b).collect();
                // f32 products in H·v (~1e-7 relative) amplified by at most 1/μ
                assert!(
                    norm(&err) <= 1e-4 * norm(&v),
                    "n={n} d={d} c={c}: |PHv − v| = {} vs |v| = {}",
                    norm(&err),
                    norm(&v)
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        /// P is symmetric positive definite with the spectrum bounds of its construction, and
        /// gives exactly 1/μ along the flat all-classes directions v ⊗ 1.
        #[test]
        fn symmetric_positive_definite(
            n in 5usize..200, d in 1usize..25, c in 2usize..13, seed in 0u64..1000,
            log_mu in -6.0f64..0.0, scale in 0.0f64..5.0,
        ) {
            let mu = 10f64.powf(log_mu);
            let ds = toy(n, d, c, seed);
            let design = Design::new(&ds.features, &ds.labels, d, c);
            let moment = Arc::new(DataMoment::new(&design).unwrap());
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed + 11);
            let theta: Vec<f64> = (0..d * c).map(|_| (rng.random::<f64>() - 0.5) * scale).collect();
            let pre = KfacPreconditioner::at(moment.clone(), &design, &theta, mu).unwrap();
            let u: Vec<f64> = (0..d * c).map(|_| rng.random::<f64>() - 0.5).collect();
            let v: Vec<f64> = (0..d * c).map(|_| rng.random::<f64>() - 0.5).collect();
            let (mut pu, mut pv) = (vec![0.0; d * c], vec![0.0; d * c]);
            pre.apply(&u, &mut pu);
            pre.apply(&v, &mut pv);
            let (upv, vpu) = (dotp(&u, &pv), dotp(&v, &pu));
            prop_assert!((upv - vpu).abs() <= 1e-9 * norm(&u) * norm(&v) / mu, "{upv} vs {vpu}");
            let vpv = dotp(&v, &pv) / dotp(&v, &v);
            let top = moment.eigenvalues()[0] * pre.class_eigenvalues()[0] + mu;
            prop_assert!(vpv > 0.0);
            prop_assert!(vpv <= (1.0 + 1e-9) / mu && vpv >= (1.0 - 1e-9) / top, "{vpv}");
            // flat direction: V = w 1ᵀ for a random w ∈ R^d
            let flat: Vec<f64> = (0..d).flat_map(|j| std::iter::repeat_n(u[j], c)).collect();
            let mut pf = vec![0.0; d * c];
            pre.apply(&flat, &mut pf);
            for (a, b) in pf.iter().zip(&flat) {
                prop_assert!((a * mu - b).abs() <= 1e-7 * norm(&flat), "{a} vs {b}/μ");
            }
        }
    }

    /// Σ and A do not depend on the number of threads (bit for bit).
    #[test]
    fn deterministic_across_thread_counts() {
        let ds = toy(9000, 20, 10, 5);
        let design = Design::new(&ds.features, &ds.labels, 20, 10);
        let theta: Vec<f64> = (0..200)
            .map(|i| ((i * 37) % 11) as f64 * 0.1 - 0.5)
            .collect();
        let build = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    let m = DataMoment::new(&design).unwrap();
                    let a = class_curvature(&design, &theta);
                    (m, a)
                })
        };
        let (m1, a1) = build(1);
        let (m3, a3) = build(3);
        assert_eq!(m1, m3);
        assert_eq!(a1, a3);
    }

    /// Preconditioned and plain L-BFGS reach the same minimiser: both stop at ‖∇J‖ ≤ τ and J
    /// is μ-strongly convex, so ‖θ₁ − θ₂‖ ≤ ‖∇J(θ₁) − ∇J(θ₂)‖/μ ≤ 2τ/μ.
    #[test]
    fn same_minimiser_as_plain_lbfgs() {
        let (d, c) = (40, 10);
        let ds = toy(3000, d, c, 9);
        let design = Design::new(&ds.features, &ds.labels, d, c);
        let mu = 1e-3;
        let tol = 1e-5;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(4);
        let b: Vec<f64> = (0..d * c)
            .map(|_| (rng.random::<f64>() - 0.5) * 20.0)
            .collect();
        let mut obj = Objective::new(design.clone(), mu);
        obj.linear = Some(b);
        let opts = LbfgsOptions {
            grad_tol: tol,
            ..LbfgsOptions::default()
        };
        let (plain, rp) = obj.minimize(None, &opts).unwrap();
        let moment = Arc::new(DataMoment::new(&design).unwrap());
        let warm = vec![0.0; d * c];
        let pre = KfacPreconditioner::at(moment, &design, &warm, mu).unwrap();
        for scaling in [PrecondScaling::None, PrecondScaling::Scaled] {
            let pc = Preconditioned { p: &pre, scaling };
            let (fast, rf) = obj.minimize_with(None, &opts, Some(pc)).unwrap();
            assert_eq!(rf.termination, Termination::Converged, "{rf:?}");
            assert_eq!(rp.termination, Termination::Converged, "{rp:?}");
            let diff: Vec<f64> = fast
                .theta
                .iter()
                .zip(&plain.theta)
                .map(|(a, b)| a - b)
                .collect();
            assert!(norm(&diff) <= 2.0 * tol / mu, "‖Δθ‖ = {}", norm(&diff));
            assert!(norm(&plain.theta) > 100.0 * tol / mu, "a trivial problem");
        }
    }

    #[test]
    fn rejects_bad_input() {
        let m = Arc::new(DataMoment::from_matrix(&[1.0, 0.0, 0.0, 1.0], 2).unwrap());
        let a = [0.25, -0.25, -0.25, 0.25];
        assert!(KfacPreconditioner::new(m.clone(), &a, 2, 0.0).is_err());
        assert!(KfacPreconditioner::new(m.clone(), &a, 2, f64::NAN).is_err());
        assert!(KfacPreconditioner::new(m.clone(), &a[..3], 2, 1.0).is_err());
        assert!(DataMoment::from_matrix(&[1.0, f64::NAN, 0.0, 1.0], 2).is_err());
        assert!(DataMoment::from_matrix(&[1.0], 2).is_err());
        assert!(KfacPreconditioner::new(m, &a, 2, 1.0).is_ok());
    }
}
