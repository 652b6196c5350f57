//! The linear algebra of PCA: a blocked covariance (f32 GEMM panels accumulated in f64) and a
//! symmetric eigendecomposition (Householder tridiagonalisation + implicit QL, after the
//! public-domain JAMA / EISPACK `tred2` / `tql2`).

use rayon::prelude::*;

/// A matrix operand of [`gemm_f32`]: its elements with explicit row and column strides
/// (in elements), element (i, j) at `data[i·rs + j·cs]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Strided<'a> {
    /// The elements.
    pub data: &'a [f32],
    /// Row stride.
    pub rs: usize,
    /// Column stride.
    pub cs: usize,
}

/// `dst (m×n, row-major) = lhs · rhs` for `(m, n, k)` = `dims` (lhs m×k, rhs k×n),
/// single-threaded GEMM. Panics only on programming errors (slice too short for the strides),
/// checked up front.
pub(crate) fn gemm_f32(
    dst: &mut [f32],
    dims: (usize, usize, usize),
    lhs: Strided<'_>,
    rhs: Strided<'_>,
) {
    gemm_f32_with(dst, dims, lhs, rhs, gemm::Parallelism::None);
}

/// [`gemm_f32`] with the given parallelism (`Rayon(0)`: the gemm kernel splits the output
/// blocks over the rayon pool; each output value is still one sequential dot product).
fn gemm_f32_with(
    dst: &mut [f32],
    (m, n, k): (usize, usize, usize),
    lhs: Strided<'_>,
    rhs: Strided<'_>,
    parallelism: gemm::Parallelism,
) {
    let Strided {
        data: lhs,
        rs: lhs_rs,
        cs: lhs_cs,
    } = lhs;
    let Strided {
        data: rhs,
        rs: rhs_rs,
        cs: rhs_cs,
    } = rhs;
    if m == 0 || n == 0 {
        return;
    }
    assert!(dst.len() >= m * n);
    if k == 0 {
        dst[..m * n].fill(0.0);
        return;
    }
    assert!(lhs.len() > (m - 1) * lhs_rs + (k - 1) * lhs_cs);
    assert!(rhs.len() > (k - 1) * rhs_rs + (n - 1) * rhs_cs);
    // SAFETY: the asserts above bound every index the kernel touches; dst is exclusive.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            false,
            lhs.as_ptr(),
            lhs_cs as isize,
            lhs_rs as isize,
            rhs.as_ptr(),
            rhs_cs as isize,
            rhs_rs as isize,
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// Rows per GEMM panel of the covariance.
const PANEL: usize = 512;

/// Mean (f64) and covariance (f64, `d×d` row-major, divided by `n`) of the rows
/// `row(i)` for `i` in `idx`, each transformed by `x·scale`. Panels of `PANEL` centred rows,
/// built from the rows in place (no copy of the data beyond one panel), go through an f32
/// GEMM `PᵀP` parallelised inside the kernel; the panel results are accumulated in f64 in
/// panel order. Memory: one panel, one `d×d` f32 product and one `d×d` f64 accumulator (plus
/// the GEMM's packing buffer), whatever the thread count; the result does not depend on the
/// thread count or on scheduling.
pub fn mean_cov(features: &[f32], d: usize, idx: &[usize], scale: f32) -> (Vec<f64>, Vec<f64>) {
    let n = idx.len();
    let mut mean = vec![0f64; d];
    for &i in idx {
        for (m, &v) in mean.iter_mut().zip(&features[i * d..(i + 1) * d]) {
            *m += (v * scale) as f64;
        }
    }
    mean.iter_mut().for_each(|m| *m /= n.max(1) as f64);
    let mean32: Vec<f32> = mean.iter().map(|&m| m as f32).collect();
    let mut cov = vec![0f64; d * d];
    let mut panel = vec![0f32; PANEL * d];
    let mut g = vec![0f32; d * d];
    for chunk in idx.chunks(PANEL) {
        let k = chunk.len();
        panel[..k * d]
            .par_chunks_mut(d)
            .zip(chunk.par_iter())
            .for_each(|(p, &i)| {
                let src = &features[i * d..(i + 1) * d];
                for ((p, &v), &m) in p.iter_mut().zip(src).zip(&mean32) {
                    *p = v * scale - m;
                }
            });
        // g = Pᵀ P : lhs(i, r) = P[r, i] → rs 1, cs d; rhs(r, j) = P[r, j] → rs d, cs 1.
        gemm_f32_with(
            &mut g,
            (d, d, k),
            Strided {
                data: &panel,
                rs: 1,
                cs: d,
            },
            Strided {
                data: &panel,
                rs: d,
                cs: 1,
            },
            gemm::Parallelism::Rayon(0),
        );
        cov.par_chunks_mut(d.max(1) * 16)
            .zip(g.par_chunks(d.max(1) * 16))
            .for_each(|(a, b)| {
                for (x, &y) in a.iter_mut().zip(b) {
                    *x += y as f64;
                }
            });
    }
    drop((panel, g));
    let nf = n.max(1) as f64;
    // Symmetrise exactly and normalise.
    for i in 0..d {
        for j in i..d {
            let v = 0.5 * (cov[i * d + j] + cov[j * d + i]) / nf;
            cov[i * d + j] = v;
            cov[j * d + i] = v;
        }
    }
    (mean, cov)
}

/// Eigen-decomposition of a symmetric `n×n` row-major matrix: eigenvalues in descending
/// order and the matching unit eigenvectors as the rows of the returned `n×n` matrix. Each
/// eigenvector's sign is fixed so that its largest-magnitude entry is positive
/// (deterministic output).
pub fn sym_eigen(a: &[f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    if n == 0 {
        return (Vec::new(), Vec::new());
    }
    let mut v = a.to_vec();
    let mut d = vec![0f64; n];
    let mut e = vec![0f64; n];
    // tred2 runs on transposed storage (element (i, j) at j·n + i; A is symmetric so the
    // input is unchanged): its inner loops then walk contiguous memory, and the result is
    // already the transpose tql2 wants (eigenvectors as rows).
    tred2(n, &mut v, &mut d, &mut e);
    let mut vt = v;
    tql2(n, &mut vt, &mut d, &mut e);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&x, &y| d[y].total_cmp(&d[x]));
    let mut vals = Vec::with_capacity(n);
    let mut vecs = Vec::with_capacity(n * n);
    for &k in &order {
        vals.push(d[k]);
        let row = &vt[k * n..(k + 1) * n];
        let big = row
            .iter()
            .copied()
            .fold(0f64, |m, x| if x.abs() > m.abs() { x } else { m });
        let s = if big < 0.0 { -1.0 } else { 1.0 };
        vecs.extend(row.iter().map(|&x| s * x));
    }
    (vals, vecs)
}

#[allow(clippy::needless_range_loop)]
/// Householder reduction to tridiagonal form (JAMA `tred2`); `v` n×n stored transposed
/// (element (i, j) at `j·n + i`).
fn tred2(n: usize, v: &mut [f64], d: &mut [f64], e: &mut [f64]) {
    let idx = |i: usize, j: usize| j * n + i;
    for j in 0..n {
        d[j] = v[idx(n - 1, j)];
    }
    for i in (1..n).rev() {
        let mut scale = 0.0;
        let mut h = 0.0;
        for k in 0..i {
            scale += d[k].abs();
        }
        if scale == 0.0 {
            e[i] = d[i - 1];
            for j in 0..i {
                d[j] = v[idx(i - 1, j)];
                v[idx(i, j)] = 0.0;
                v[idx(j, i)] = 0.0;
            }
        } else {
            for k in 0..i {
                d[k] /= scale;
                h += d[k] * d[k];
            }
            let mut f = d[i - 1];
            let mut g = h.sqrt();
            if f > 0.0 {
                g = -g;
            }
            e[i] = scale * g;
            h -= f * g;
            d[i - 1] = f - g;
            for x in e.iter_mut().take(i) {
                *x = 0.0;
            }
            for j in 0..i {
                f = d[j];
                v[idx(j, i)] = f;
                g = e[j] + v[idx(j, j)] * f;
                for k in j + 1..i {
                    g += v[idx(k, j)] * d[k];
                    e[k] += v[idx(k, j)] * f;
                }
                e[j] = g;
            }
            f = 0.0;
            for j in 0..i {
                e[j] /= h;
                f += e[j] * d[j];
            }
            let hh = f / (h + h);
            for j in 0..i {
                e[j] -= hh * d[j];
            }
            for j in 0..i {
                f = d[j];
                g = e[j];
                for k in j..i {
                    v[idx(k, j)] -= f * e[k] + g * d[k];
                }
                d[j] = v[idx(i - 1, j)];
                v[idx(i, j)] = 0.0;
            }
        }
        d[i] = h;
    }
    for i in 0..n - 1 {
        v[idx(n - 1, i)] = v[idx(i, i)];
        v[idx(i, i)] = 1.0;
        let h = d[i + 1];
        if h != 0.0 {
            for k in 0..=i {
                d[k] = v[idx(k, i + 1)] / h;
            }
            for j in 0..=i {
                let mut g = 0.0;
                for k in 0..=i {
                    g += v[idx(k, i + 1)] * v[idx(k, j)];
                }
                for k in 0..=i {
                    v[idx(k, j)] -= g * d[k];
                }
            }
        }
        for k in 0..=i {
            v[idx(k, i + 1)] = 0.0;
        }
    }
    for j in 0..n {
        d[j] = v[idx(n - 1, j)];
        v[idx(n - 1, j)] = 0.0;
    }
    v[idx(n - 1, n - 1)] = 1.0;
    e[0] = 0.0;
}

#[allow(clippy::needless_range_loop)]
/// Implicit QL on the tridiagonal (JAMA `tql2`); `vt` holds eigenvectors as rows.
fn tql2(n: usize, vt: &mut [f64], d: &mut [f64], e: &mut [f64]) {
    for i in 1..n {
        e[i - 1] = e[i];
    }
    e[n - 1] = 0.0;
    let mut f = 0.0f64;
    let mut tst1 = 0.0f64;
    let eps = f64::EPSILON;
    for l in 0..n {
        tst1 = tst1.max(d[l].abs() + e[l].abs());
        let mut m = l;
        while m < n - 1 {
            if e[m].abs() <= eps * tst1 {
                break;
            }
            m += 1;
        }
        if m > l {
            let mut iter = 0;
            loop {
                iter += 1;
                let mut g = d[l];
                let mut p = (d[l + 1] - g) / (2.0 * e[l]);
                let mut r = p.hypot(1.0);
                if p < 0.0 {
                    r = -r;
                }
                d[l] = e[l] / (p + r);
                d[l + 1] = e[l] * (p + r);
                let dl1 = d[l + 1];
                let mut h = g - d[l];
                for x in d.iter_mut().take(n).skip(l + 2) {
                    *x -= h;
                }
                f += h;
                p = d[m];
                let mut c = 1.0;
                let mut c2 = c;
                let mut c3 = c;
                let el1 = e[l + 1];
                let mut s = 0.0;
                let mut s2 = 0.0;
                for i in (l..m).rev() {
                    c3 = c2;
                    c2 = c;
                    s2 = s;
                    g = c * e[i];
                    h = c * p;
                    r = p.hypot(e[i]);
                    e[i + 1] = s * r;
                    s = e[i] / r;
                    c = p / r;
                    p = c * d[i] - s * g;
                    d[i + 1] = h + s * (c * g + s * d[i]);
                    let (lo, hi) = vt.split_at_mut((i + 1) * n);
                    let vi = &mut lo[i * n..];
                    let vi1 = &mut hi[..n];
                    for k in 0..n {
                        let hk = vi1[k];
                        vi1[k] = s * vi[k] + c * hk;
                        vi[k] = c * vi[k] - s * hk;
                    }
                }
                p = -s * s2 * c3 * el1 * e[l] / dl1;
                e[l] = s * p;
                d[l] = c * p;
                if e[l].abs() <= eps * tst1 || iter >= 300 {
                    break;
                }
            }
        }
        d[l] += f;
        e[l] = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eigen_reconstructs_random_symmetric() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        for n in [1usize, 2, 3, 10, 57] {
            let mut a = vec![0f64; n * n];
            for i in 0..n {
                for j in i..n {
                    let x: f64 = rng.random_range(-1.0..1.0);
                    a[i * n + j] = x;
                    a[j * n + i] = x;
                }
            }
            let (vals, vecs) = sym_eigen(&a, n);
            for w in vals.windows(2) {
                assert!(w[0] >= w[1]);
            }
            for k in 0..n {
                let v = &vecs[k * n..(k + 1) * n];
                let norm: f64 = v.iter().map(|x| x * x).sum();
                assert!((norm - 1.0).abs() < 1e-10);
                for i in 0..n {
                    let av: f64 = (0..n).map(|j| a[i * n + j] * v[j]).sum();
                    assert!((av - vals[k] * v[i]).abs() < 1e-9, "n={n} k={k}");
                }
            }
        }
    }

    #[test]
    fn covariance_matches_naive() {
        let d = 5;
        let n = 1100;
        let feats: Vec<f32> = (0..n * d).map(|i| ((i * 7919) % 251) as f32).collect();
        let idx: Vec<usize> = (0..n).collect();
        let (mean, cov) = mean_cov(&feats, d, &idx, 1.0 / 255.0);
        for i in 0..d {
            for j in 0..d {
                let mut s = 0f64;
                for r in 0..n {
                    let a = feats[r * d + i] as f64 / 255.0 - mean[i];
                    let b = feats[r * d + j] as f64 / 255.0 - mean[j];
                    s += a * b;
                }
                assert!((s / n as f64 - cov[i * d + j]).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn covariance_is_independent_of_the_thread_count() {
        let d = 37;
        let n = 3 * PANEL + 77;
        let feats: Vec<f32> = (0..n * d).map(|i| ((i * 7919) % 251) as f32).collect();
        let idx: Vec<usize> = (0..n).rev().step_by(2).chain((0..n).step_by(2)).collect();
        let run = |threads| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| mean_cov(&feats, d, &idx, 1.0 / 255.0))
        };
        let (m1, c1) = run(1);
        for t in [2, 3, 8] {
            let (m, c) = run(t);
            assert!(m.iter().zip(&m1).all(|(a, b)| a.to_bits() == b.to_bits()));
            assert!(
                c.iter().zip(&c1).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{t} threads"
            );
        }
    }
}
