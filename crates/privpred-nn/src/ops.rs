//! Dense kernels for one example at a time: GEMM (the `gemm` crate, sequential inside rayon
//! workers), 3×3 convolution via im2col/col2im, GroupNorm, the type-A shortcut.
//!
//! Every activation is stored channel-major (`C × H × W`, row-major per channel).

/// A matrix operand of [`matmul`]: row-major elements, used as stored or transposed.
#[derive(Debug, Clone, Copy)]
pub struct Operand<'a> {
    /// The elements, row-major.
    pub data: &'a [f32],
    /// Whether the product uses the transpose.
    pub transposed: bool,
}

impl<'a> Operand<'a> {
    /// The matrix as stored.
    pub fn plain(data: &'a [f32]) -> Self {
        Operand {
            data,
            transposed: false,
        }
    }
    /// Its transpose.
    pub fn t(data: &'a [f32]) -> Self {
        Operand {
            data,
            transposed: true,
        }
    }
}

/// Row-major matrix product `dst (m×n) (+)= op(a) · op(b)` for `(m, n, k)` = `dims`.
///
/// `a` is `m×k` row-major (or `k×m` when transposed), `b` is `k×n` row-major (or `n×k` when
/// transposed). With `acc` the product is added to `dst`, otherwise `dst` is overwritten.
pub fn matmul(
    (m, n, k): (usize, usize, usize),
    dst: &mut [f32],
    acc: bool,
    a: Operand<'_>,
    b: Operand<'_>,
) {
    let (a, a_t) = (a.data, a.transposed);
    let (b, b_t) = (b.data, b.transposed);
    assert!(
        dst.len() >= m * n && a.len() >= m * k && b.len() >= k * n,
        "matmul shapes"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !acc {
            dst[..m * n].fill(0.0);
        }
        return;
    }
    let (a_rs, a_cs) = if a_t {
        (1isize, m as isize)
    } else {
        (k as isize, 1isize)
    };
    let (b_rs, b_cs) = if b_t {
        (1isize, k as isize)
    } else {
        (n as isize, 1isize)
    };
    // SAFETY: the slices are at least as long as the strided extents checked above; dst does
    // not alias a or b (distinct borrows).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            acc,
            a.as_ptr(),
            a_cs,
            a_rs,
            b.as_ptr(),
            b_cs,
            b_rs,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// Output side length of a 3×3 convolution with padding 1 and the given stride.
pub fn conv_out(size: usize, stride: usize) -> usize {
    (size - 1) / stride + 1
}

/// im2col for a 3×3 kernel, padding 1: `col[(c·9 + kh·3 + kw)·(Ho·Wo) + oh·Wo + ow]`.
pub fn im2col(x: &[f32], c: usize, h: usize, w: usize, stride: usize, col: &mut Vec<f32>) {
    let ho = conv_out(h, stride);
    let wo = conv_out(w, stride);
    let hw = ho * wo;
    col.clear();
    col.resize(c * 9 * hw, 0.0);
    for ci in 0..c {
        let xc = &x[ci * h * w..(ci + 1) * h * w];
        for kh in 0..3 {
            for kw in 0..3 {
                let row =
                    &mut col[((ci * 9) + kh * 3 + kw) * hw..((ci * 9) + kh * 3 + kw + 1) * hw];
                for oh in 0..ho {
                    let ih = (oh * stride + kh) as isize - 1;
                    if ih < 0 || ih >= h as isize {
                        continue; // stays zero
                    }
                    let xr = &xc[ih as usize * w..(ih as usize + 1) * w];
                    let dr = &mut row[oh * wo..(oh + 1) * wo];
                    if stride == 1 {
                        // iw = ow + kw - 1
                        match kw {
                            0 => dr[1..].copy_from_slice(&xr[..w - 1]),
                            1 => dr.copy_from_slice(xr),
                            _ => dr[..w - 1].copy_from_slice(&xr[1..]),
                        }
                    } else {
                        for (ow, d) in dr.iter_mut().enumerate() {
                            let iw = (ow * stride + kw) as isize - 1;
                            if iw >= 0 && iw < w as isize {
                                *d = xr[iw as usize];
                            }
                        }
                    }
                }
            }
        }
    }
}

/// col2im (the adjoint of [`im2col`]): accumulates `col` into `dx` (`c × h × w`), which is
/// overwritten.
pub fn col2im(col: &[f32], c: usize, h: usize, w: usize, stride: usize, dx: &mut Vec<f32>) {
    let ho = conv_out(h, stride);
    let wo = conv_out(w, stride);
    let hw = ho * wo;
    dx.clear();
    dx.resize(c * h * w, 0.0);
    for ci in 0..c {
        let xc = &mut dx[ci * h * w..(ci + 1) * h * w];
        for kh in 0..3 {
            for kw in 0..3 {
                let row = &col[((ci * 9) + kh * 3 + kw) * hw..((ci * 9) + kh * 3 + kw + 1) * hw];
                for oh in 0..ho {
                    let ih = (oh * stride + kh) as isize - 1;
                    if ih < 0 || ih >= h as isize {
                        continue;
                    }
                    let xr = &mut xc[ih as usize * w..(ih as usize + 1) * w];
                    let sr = &row[oh * wo..(oh + 1) * wo];
                    if stride == 1 {
                        let (dst, src) = match kw {
                            0 => (&mut xr[..w - 1], &sr[1..]),
                            1 => (&mut xr[..], sr),
                            _ => (&mut xr[1..], &sr[..w - 1]),
                        };
                        for (d, s) in dst.iter_mut().zip(src) {
                            *d += *s;
                        }
                    } else {
                        for (ow, s) in sr.iter().enumerate() {
                            let iw = (ow * stride + kw) as isize - 1;
                            if iw >= 0 && iw < w as isize {
                                xr[iw as usize] += *s;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The shape of a GroupNorm input: `c` channels of `hw` values in `groups` groups of
/// `c / groups` channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GnShape {
    /// Channels.
    pub c: usize,
    /// Values per channel (height × width).
    pub hw: usize,
    /// Groups.
    pub groups: usize,
}

/// GroupNorm epsilon (PyTorch's default).
pub const GN_EPS: f32 = 1e-5;

/// GroupNorm forward on one example (`c × hw`, `groups` groups of `c / groups` channels):
/// `y = γ·x̂ + β` with `x̂` normalised per group (biased variance, ε = 1e-5).
/// Stores `x̂` in `xhat` and 1/√(var + ε) per group in `rstd`.
pub fn group_norm_forward(
    x: &[f32],
    shape: GnShape,
    gamma: &[f32],
    beta: &[f32],
    y: &mut Vec<f32>,
    xhat: &mut Vec<f32>,
    rstd: &mut Vec<f32>,
) {
    let GnShape { c, hw, groups } = shape;
    let cpg = c / groups;
    let m = cpg * hw;
    y.clear();
    y.resize(c * hw, 0.0);
    xhat.clear();
    xhat.resize(c * hw, 0.0);
    rstd.clear();
    rstd.resize(groups, 0.0);
    for g in 0..groups {
        let xs = &x[g * m..(g + 1) * m];
        let mut mean = 0.0f64;
        for &v in xs {
            mean += v as f64;
        }
        mean /= m as f64;
        let mut var = 0.0f64;
        for &v in xs {
            let d = v as f64 - mean;
            var += d * d;
        }
        var /= m as f64;
        let r = (1.0 / (var + GN_EPS as f64).sqrt()) as f32;
        rstd[g] = r;
        let mean = mean as f32;
        for cc in 0..cpg {
            let ch = g * cpg + cc;
            let (ga, be) = (gamma[ch], beta[ch]);
            let off = ch * hw;
            for i in off..off + hw {
                let xh = (x[i] - mean) * r;
                xhat[i] = xh;
                y[i] = ga * xh + be;
            }
        }
    }
}

/// GroupNorm backward on one example. Accumulates dγ, dβ into `(dgamma, dbeta)`; writes dx
/// into `dx` (overwritten).
pub fn group_norm_backward(
    dy: &[f32],
    (xhat, rstd): (&[f32], &[f32]),
    shape: GnShape,
    gamma: &[f32],
    (dgamma, dbeta): (&mut [f32], &mut [f32]),
    dx: &mut Vec<f32>,
) {
    let GnShape { c, hw, groups } = shape;
    let cpg = c / groups;
    let m = cpg * hw;
    dx.clear();
    dx.resize(c * hw, 0.0);
    for (g, &r) in rstd.iter().enumerate().take(groups) {
        // sums over the group of dx̂ and dx̂·x̂
        let mut s1 = 0.0f64;
        let mut s2 = 0.0f64;
        for cc in 0..cpg {
            let ch = g * cpg + cc;
            let off = ch * hw;
            let mut dg = 0.0f64;
            let mut db = 0.0f64;
            for i in off..off + hw {
                dg += (dy[i] * xhat[i]) as f64;
                db += dy[i] as f64;
            }
            dgamma[ch] += dg as f32;
            dbeta[ch] += db as f32;
            s1 += db * gamma[ch] as f64;
            s2 += dg * gamma[ch] as f64;
        }
        let mf = m as f64;
        let a = (s1 / mf) as f32;
        let b = (s2 / mf) as f32;
        for cc in 0..cpg {
            let ch = g * cpg + cc;
            let off = ch * hw;
            let ga = gamma[ch];
            for i in off..off + hw {
                dx[i] = r * (ga * dy[i] - a - xhat[i] * b);
            }
        }
    }
}

/// Type-A shortcut forward (He et al. 2016, option A): subsample by 2 in space and zero-pad
/// the channels equally on both sides, `cin → cout`. Adds into `out` (`cout × ho × wo`).
pub fn shortcut_a_add(x: &[f32], cin: usize, h: usize, w: usize, cout: usize, out: &mut [f32]) {
    let (ho, wo) = (conv_out(h, 2), conv_out(w, 2));
    let pad = (cout - cin) / 2;
    for ci in 0..cin {
        let xc = &x[ci * h * w..(ci + 1) * h * w];
        let oc = &mut out[(ci + pad) * ho * wo..(ci + pad + 1) * ho * wo];
        for oh in 0..ho {
            for ow in 0..wo {
                oc[oh * wo + ow] += xc[(2 * oh) * w + 2 * ow];
            }
        }
    }
}

/// Adjoint of [`shortcut_a_add`]: adds the gradient `dout` into `dx` (`cin × h × w`).
pub fn shortcut_a_backward(
    dout: &[f32],
    cin: usize,
    h: usize,
    w: usize,
    cout: usize,
    dx: &mut [f32],
) {
    let (ho, wo) = (conv_out(h, 2), conv_out(w, 2));
    let pad = (cout - cin) / 2;
    for ci in 0..cin {
        let dc = &dout[(ci + pad) * ho * wo..(ci + pad + 1) * ho * wo];
        let xc = &mut dx[ci * h * w..(ci + 1) * h * w];
        for oh in 0..ho {
            for ow in 0..wo {
                xc[(2 * oh) * w + 2 * ow] += dc[oh * wo + ow];
            }
        }
    }
}

/// Numerically stable softmax of `z` into `p`; returns log Σ exp(z).
pub fn softmax(z: &[f32], p: &mut [f32]) -> f64 {
    let mx = z.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
    let mut s = 0.0f64;
    for (pi, &zi) in p.iter_mut().zip(z) {
        let e = ((zi as f64) - mx).exp();
        *pi = e as f32;
        s += e;
    }
    for pi in p.iter_mut() {
        *pi = (*pi as f64 / s) as f32;
    }
    mx + s.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_matches_naive_all_transposes() {
        let (m, n, k) = (3, 5, 4);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.91).cos()).collect();
        let naive = |at: bool, bt: bool| {
            let mut d = vec![0.0f32; m * n];
            for i in 0..m {
                for j in 0..n {
                    for l in 0..k {
                        let av = if at { a[l * m + i] } else { a[i * k + l] };
                        let bv = if bt { b[j * k + l] } else { b[l * n + j] };
                        d[i * n + j] += av * bv;
                    }
                }
            }
            d
        };
        for at in [false, true] {
            for bt in [false, true] {
                let mut d = vec![1.0f32; m * n];
                matmul(
                    (m, n, k),
                    &mut d,
                    true,
                    Operand {
                        data: &a,
                        transposed: at,
                    },
                    Operand {
                        data: &b,
                        transposed: bt,
                    },
                );
                let r = naive(at, bt);
                for (x, y) in d.iter().zip(&r) {
                    assert!((x - 1.0 - y).abs() < 1e-5);
                }
            }
        }
    }

    #[test]
    fn col2im_is_adjoint_of_im2col() {
        for stride in [1, 2] {
            let (c, h, w) = (2, 5, 6);
            let x: Vec<f32> = (0..c * h * w).map(|i| (i as f32 * 0.3).sin()).collect();
            let mut col = Vec::new();
            im2col(&x, c, h, w, stride, &mut col);
            let r: Vec<f32> = (0..col.len()).map(|i| (i as f32 * 0.7).cos()).collect();
            let mut back = Vec::new();
            col2im(&r, c, h, w, stride, &mut back);
            let lhs: f64 = col
                .iter()
                .zip(&r)
                .map(|(a, b)| (*a as f64) * (*b as f64))
                .sum();
            let rhs: f64 = x
                .iter()
                .zip(&back)
                .map(|(a, b)| (*a as f64) * (*b as f64))
                .sum();
            assert!((lhs - rhs).abs() < 1e-4, "stride {stride}: {lhs} vs {rhs}");
        }
    }

    #[test]
    fn shortcut_backward_is_adjoint() {
        let (cin, h, w, cout) = (2, 6, 6, 4);
        let x: Vec<f32> = (0..cin * h * w).map(|i| (i as f32 * 0.3).sin()).collect();
        let mut out = vec![0.0; cout * 9];
        shortcut_a_add(&x, cin, h, w, cout, &mut out);
        let r: Vec<f32> = (0..out.len()).map(|i| (i as f32 * 0.7).cos()).collect();
        let mut dx = vec![0.0; x.len()];
        shortcut_a_backward(&r, cin, h, w, cout, &mut dx);
        let lhs: f64 = out
            .iter()
            .zip(&r)
            .map(|(a, b)| (*a as f64) * (*b as f64))
            .sum();
        let rhs: f64 = x
            .iter()
            .zip(&dx)
            .map(|(a, b)| (*a as f64) * (*b as f64))
            .sum();
        assert!((lhs - rhs).abs() < 1e-4);
    }
}
