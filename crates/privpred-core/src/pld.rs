//! Privacy-loss-distribution (PLD) accountant of the Poisson-subsampled Gaussian mechanism
//! (DP-SGD), for `tight` mode.
//!
//! Method (Koskela, Jälkö & Honkela 2020; Google's `dp_accounting` PLD accountant; the
//! "connect-the-dots" discretisation of Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022):
//! 1. The privacy loss L(x) = ln(p(x)/q(x)) of one step, for each neighbouring direction
//!    (remove: P = (1−q)N(0,σ²) + qN(1,σ²), Q = N(0,σ²); add: the pair swapped), is
//!    discretised onto the grid {k·h}. The P-mass of each grid cell [a, b] is split between its
//!    two end points so that the total mass and E_P[e^{−L}] (= the Q-mass of the cell) are
//!    kept. The resulting privacy profile δ(ε) equals the true one on the grid and dominates it
//!    everywhere (the chord of a convex function), so every ε it reports is an upper bound.
//! 2. Tails beyond `tail_mass` are moved pessimistically: the upper tail to +∞ (it counts
//!    fully in δ), the lower tail up to the lowest kept point.
//! 3. k-fold self-composition is the k-fold convolution of the PMF, by FFT (`rustfft`) with
//!    repeated squaring (⌈log₂ k⌉ squarings), truncating the tails after each product.
//! 4. ε(δ) = the smallest ε with δ(ε) = m_∞ + Σ_{L_i > ε} p_i(1 − e^{ε − L_i}) ≤ δ (bisection,
//!    rounded up); the reported ε is the larger of the two directions.

use crate::error::{CoreError, Result};
use crate::gaussian::ndtr;
use rustfft::FftPlanner;
use rustfft::num_complex::Complex;

/// Discretisation settings of the PLD accountant.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PldConfig {
    /// Grid spacing h of the privacy-loss values.
    pub discretization: f64,
    /// Mass below which a tail is truncated (pessimistically) at each step.
    pub tail_mass: f64,
}

impl Default for PldConfig {
    fn default() -> Self {
        PldConfig {
            discretization: 1e-4,
            tail_mass: 1e-15,
        }
    }
}

impl PldConfig {
    /// The default for k steps: h = 0.01/√k clamped to [1e-4, 1e-3] (the composed loss
    /// spreads like √k, so the grid error stays comparable), tails at 1e-15. Any h gives a
    /// valid upper bound; a finer grid is tighter and slower.
    pub fn for_steps(k: u64) -> Self {
        PldConfig {
            discretization: (0.01 / (k.max(1) as f64).sqrt()).clamp(1e-4, 1e-3),
            tail_mass: 1e-15,
        }
    }
}

/// Largest grid (number of points) the accountant will build (8,388,608 points, 64 MiB of
/// f64). The grid of one step spans the privacy-loss range over the truncated outputs, about
/// (1 + 2σ·8.3)/(2σ²)/h points for the Gaussian: a small noise multiplier σ or a fine grid h
/// exceed it and get a clear error (use the RDP accountant or a larger σ), never a panic.
pub const MAX_GRID: usize = 1 << 23;

/// The grid index range ⌊l_lo/h⌋..=⌈l_hi/h⌉ of one step, checked in f64 before any integer
/// arithmetic or allocation: non-finite ends or more than [`MAX_GRID`] points are an error.
fn grid_range(l_lo: f64, l_hi: f64, h: f64) -> Result<(i64, i64)> {
    let lo = (l_lo / h).floor();
    let hi = (l_hi / h).ceil();
    let points = hi - lo + 1.0;
    if !(lo.is_finite() && hi.is_finite() && points.is_finite()) || points > MAX_GRID as f64 {
        return Err(CoreError::Numerical(format!(
            "PLD grid of {points:.3e} points (privacy losses {l_lo:.3e} to {l_hi:.3e} at spacing {h:e}) exceeds the limit of {MAX_GRID} points: the noise multiplier is too small for the PLD accountant (use the RDP accountant or a larger sigma)"
        )));
    }
    Ok((lo as i64, hi as i64))
}

/// A discrete privacy-loss distribution: mass `probs[i]` at loss (offset + i)·h, plus a mass
/// at +∞.
#[derive(Debug, Clone, PartialEq)]
pub struct Pld {
    /// Grid spacing h.
    pub h: f64,
    /// Grid index of `probs[0]`.
    pub offset: i64,
    /// Masses on the grid.
    pub probs: Vec<f64>,
    /// Mass at +∞.
    pub inf_mass: f64,
}

/// Mass of N(μ, s²) on (x1, x2], accurate in both tails.
fn normal_mass(x1: f64, x2: f64, mu: f64, s: f64) -> f64 {
    if x2 <= x1 {
        return 0.0;
    }
    let a = (x1 - mu) / s;
    let b = (x2 - mu) / s;
    let m = if a > 0.0 {
        ndtr(-a) - ndtr(-b)
    } else {
        ndtr(b) - ndtr(a)
    };
    m.max(0.0)
}

/// Direction of neighbouring datasets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// P = (1−q)N(0,σ²) + qN(1,σ²), Q = N(0,σ²).
    Remove,
    /// P = N(0,σ²), Q = (1−q)N(0,σ²) + qN(1,σ²).
    Add,
}

/// The x at which the remove-direction loss ln(1−q+q·e^{(2x−1)/(2σ²)}) equals v
/// (−∞ for v ≤ ln(1−q)).
fn x_of_remove_loss(v: f64, q: f64, sigma: f64) -> f64 {
    // e^v − (1−q) = q e^z  ⇒  z = ln((e^v − 1 + q)/q); x = σ² z + 1/2.
    let t = v.exp_m1() + q;
    if t <= 0.0 {
        return f64::NEG_INFINITY;
    }
    sigma * sigma * (t / q).ln() + 0.5
}

fn remove_loss(x: f64, q: f64, sigma: f64) -> f64 {
    let z = (2.0 * x - 1.0) / (2.0 * sigma * sigma);
    // ln(1 − q + q e^z), stably.
    if z > 0.0 {
        z + q.ln() + ((1.0 - q) * (-z).exp() / q).ln_1p()
    } else {
        (q * z.exp_m1()).ln_1p()
    }
}

fn single_step(q: f64, sigma: f64, dir: Direction, cfg: &PldConfig) -> Result<Pld> {
    let h = cfg.discretization;
    let tail = cfg.tail_mass;
    let t = (2.0 * (1.0 / (0.5 * tail)).ln()).sqrt();
    let mix = |x1: f64, x2: f64| {
        (1.0 - q) * normal_mass(x1, x2, 0.0, sigma) + q * normal_mass(x1, x2, 1.0, sigma)
    };
    let gauss = |x1: f64, x2: f64| normal_mass(x1, x2, 0.0, sigma);
    let lmin_remove = (-q).ln_1p();
    match dir {
        Direction::Remove => {
            // L increasing in x, L ≥ ln(1−q). Truncate at x_hi (P-mass above → +∞).
            let x_hi = 1.0 + sigma * t;
            let x_lo = -sigma * t;
            let l_hi = remove_loss(x_hi, q, sigma);
            let (k_lo, k_hi) = grid_range(remove_loss(x_lo, q, sigma).max(lmin_remove), l_hi, h)?;
            let n = (k_hi - k_lo + 1).max(2) as usize;
            let mut probs = vec![0.0; n];
            for k in k_lo..k_hi {
                let a = k as f64 * h;
                let b = (k + 1) as f64 * h;
                let x1 = x_of_remove_loss(a, q, sigma).max(x_lo);
                let x2 = x_of_remove_loss(b, q, sigma).clamp(x_lo, x_hi);
                let mp = mix(x1, x2);
                let mq = gauss(x1, x2);
                split(&mut probs, (k - k_lo) as usize, a, h, mp, mq);
            }
            // Lower tail (L below the grid's first cell end): moved up to the second point.
            probs[1] += mix(f64::NEG_INFINITY, x_lo);
            let inf_mass = mix(x_hi, f64::INFINITY);
            Ok(Pld {
                h,
                offset: k_lo,
                probs,
                inf_mass,
            })
        }
        Direction::Add => {
            // L(x) = −remove_loss(x), decreasing in x, L ≤ −ln(1−q). Truncate at x_hi
            // (P-mass above: L below the grid, moved up to the lowest point).
            let x_hi = sigma * t;
            let l_lo = -remove_loss(x_hi, q, sigma);
            let (k_lo, k_hi) = grid_range(l_lo, -lmin_remove, h)?;
            let n = (k_hi - k_lo + 1).max(2) as usize;
            let mut probs = vec![0.0; n];
            for k in k_lo..k_hi {
                let a = k as f64 * h;
                let b = (k + 1) as f64 * h;
                // L ∈ [a, b] ⟺ remove-loss ∈ [−b, −a] ⟺ x ∈ [x(−b), x(−a)].
                let x1 = x_of_remove_loss(-b, q, sigma).min(x_hi);
                let x2 = x_of_remove_loss(-a, q, sigma).min(x_hi);
                let mp = gauss(x1, x2);
                let mq = mix(x1, x2);
                split(&mut probs, (k - k_lo) as usize, a, h, mp, mq);
            }
            probs[1] += gauss(x_hi, f64::INFINITY);
            Ok(Pld {
                h,
                offset: k_lo,
                probs,
                inf_mass: 0.0,
            })
        }
    }
}

/// ln((1 − q) + q·e^z), stable for every z (−∞ included).
fn ln_mix(q: f64, z: f64) -> f64 {
    if z > 0.0 {
        z + q.ln() + ((1.0 - q) * (-z).exp() / q).ln_1p()
    } else {
        (q * z.exp_m1()).ln_1p()
    }
}

/// ln(e^a + e^b).
fn log_add(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY {
        return hi;
    }
    hi + (lo - hi).exp().ln_1p()
}

/// The privacy loss of the replace-one pair at output x (module docs of
/// [`pld_epsilon_neighbours`]): L(x) = ln((1−q) + q·e^{(2x−1)/(2σ²)}) −
/// ln((1−q) + q·e^{(−2x−1)/(2σ²)}), strictly increasing from −∞ to +∞.
fn replace_loss(x: f64, q: f64, sigma: f64) -> f64 {
    let s2 = 2.0 * sigma * sigma;
    ln_mix(q, (2.0 * x - 1.0) / s2) - ln_mix(q, (-2.0 * x - 1.0) / s2)
}

/// The x with [`replace_loss`]`(x) = v`, in closed form. With w = e^{x/σ²} and
/// c = e^{−1/(2σ²)} the equation is q·c·w² + (1−q)(1−e^v)·w − q·c·e^v = 0, whose positive root
/// is taken in the numerically stable form for each sign of v, in log space (q·c underflows
/// for small σ).
fn x_of_replace_loss(v: f64, q: f64, sigma: f64) -> f64 {
    let t = q.ln() - 1.0 / (2.0 * sigma * sigma); // ln(q·c)
    let b = -(1.0 - q) * v.exp_m1(); // (1−q)(1−e^v)
    let ln_e = 4f64.ln() + 2.0 * t + v; // ln(4 q² c² e^v)
    let ln_abs_b = b.abs().ln(); // −∞ when v = 0 or q = 1
    let ln_d = 0.5 * log_add(2.0 * ln_abs_b, ln_e); // ln √(b² + 4q²c²e^v)
    let ln_sum = log_add(ln_abs_b, ln_d); // ln(|b| + √(…))
    let ln_w = if b >= 0.0 {
        // w = 2qc·e^v / (b + √(…)) (no cancellation for v ≤ 0).
        2f64.ln() + t + v - ln_sum
    } else {
        // w = (|b| + √(…)) / (2qc) for v > 0.
        ln_sum - 2f64.ln() - t
    };
    sigma * sigma * ln_w
}

/// One step of the Poisson-subsampled Gaussian under replace-one neighbours: the PLD of
/// P = (1−q)N(0,σ²) + qN(1,σ²) against Q = (1−q)N(0,σ²) + qN(−1,σ²), discretised like the
/// add/remove directions (connect-the-dots, pessimistic tails). The pair is symmetric (x ↦ −x
/// swaps P and Q), so this one direction is the whole accountant.
fn single_step_replace_one(q: f64, sigma: f64, cfg: &PldConfig) -> Result<Pld> {
    let h = cfg.discretization;
    let t = (2.0 * (1.0 / (0.5 * cfg.tail_mass)).ln()).sqrt();
    let p_mass = |x1: f64, x2: f64| {
        (1.0 - q) * normal_mass(x1, x2, 0.0, sigma) + q * normal_mass(x1, x2, 1.0, sigma)
    };
    let q_mass = |x1: f64, x2: f64| {
        (1.0 - q) * normal_mass(x1, x2, 0.0, sigma) + q * normal_mass(x1, x2, -1.0, sigma)
    };
    // P's mass outside [x_lo, x_hi] is below the tail mass: above → +∞, below → moved up.
    let x_hi = 1.0 + sigma * t;
    let x_lo = -1.0 - sigma * t;
    let (k_lo, k_hi) = grid_range(
        replace_loss(x_lo, q, sigma),
        replace_loss(x_hi, q, sigma),
        h,
    )?;
    let n = (k_hi - k_lo + 1).max(2) as usize;
    let mut probs = vec![0.0; n];
    for k in k_lo..k_hi {
        let a = k as f64 * h;
        let b = (k + 1) as f64 * h;
        let x1 = x_of_replace_loss(a, q, sigma).clamp(x_lo, x_hi);
        let x2 = x_of_replace_loss(b, q, sigma).clamp(x_lo, x_hi);
        split(
            &mut probs,
            (k - k_lo) as usize,
            a,
            h,
            p_mass(x1, x2),
            q_mass(x1, x2),
        );
    }
    probs[1] += p_mass(f64::NEG_INFINITY, x_lo);
    Ok(Pld {
        h,
        offset: k_lo,
        probs,
        inf_mass: p_mass(x_hi, f64::INFINITY),
    })
}

/// Connect-the-dots split of a cell [a, a+h] with P-mass mp and Q-mass mq between its ends:
/// w_a + w_b = mp, w_a e^{−a} + w_b e^{−b} = mq.
fn split(probs: &mut [f64], i: usize, a: f64, h: f64, mp: f64, mq: f64) {
    if mp <= 0.0 {
        return;
    }
    // w_b = (mp·e^{−a} − mq)/(e^{−a}(1 − e^{−h})) = (mp − mq·e^{a})/(1 − e^{−h}).
    let wb = ((mp - mq * a.exp()) / (-(-h).exp_m1())).clamp(0.0, mp);
    let wa = mp - wb;
    probs[i] += wa;
    probs[i + 1] += wb;
}

impl Pld {
    /// δ(ε) of this PLD: m_∞ + Σ_{L_i > ε} p_i (1 − e^{ε − L_i}).
    pub fn delta(&self, epsilon: f64) -> f64 {
        let mut d = 0.0;
        let start = ((epsilon / self.h).floor() as i64 - self.offset + 1).max(0) as usize;
        for (i, &p) in self.probs.iter().enumerate().skip(start) {
            let l = (self.offset + i as i64) as f64 * self.h;
            if l > epsilon {
                d += p * (-(epsilon - l).exp_m1());
            }
        }
        (d + self.inf_mass).min(1.0)
    }

    /// The smallest ε ≥ 0 with δ(ε) ≤ δ (bisection to 1e-10, rounded up); errors when the mass
    /// at +∞ alone exceeds δ.
    pub fn epsilon(&self, delta: f64) -> Result<f64> {
        if self.inf_mass >= delta {
            return Err(CoreError::Numerical(format!(
                "PLD: mass at infinity {} exceeds delta {delta}",
                self.inf_mass
            )));
        }
        if self.delta(0.0) <= delta {
            return Ok(0.0);
        }
        let mut lo = 0.0;
        let mut hi = (self.offset + self.probs.len() as i64) as f64 * self.h + self.h;
        if self.delta(hi) > delta {
            return Err(CoreError::Numerical("PLD: no bracket for epsilon".into()));
        }
        for _ in 0..200 {
            if hi - lo <= 1e-10 {
                break;
            }
            let mid = 0.5 * (lo + hi);
            if self.delta(mid) > delta {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(hi)
    }

    fn truncate(&mut self, tail: f64) {
        for p in &mut self.probs {
            if *p < 0.0 || !p.is_finite() {
                *p = 0.0;
            }
        }
        // Lower tail: move up to the first kept point.
        let mut acc = 0.0;
        let mut lo = 0;
        while lo + 1 < self.probs.len() && acc + self.probs[lo] <= tail / 2.0 {
            acc += self.probs[lo];
            lo += 1;
        }
        // Upper tail: move to +∞.
        let mut up = 0.0;
        let mut hi = self.probs.len();
        while hi > lo + 1 && up + self.probs[hi - 1] <= tail / 2.0 {
            up += self.probs[hi - 1];
            hi -= 1;
        }
        let mut v = self.probs[lo..hi].to_vec();
        v[0] += acc;
        self.offset += lo as i64;
        self.probs = v;
        self.inf_mass += up;
    }

    /// The PLD of the composition of two mechanisms (convolution of the PMFs).
    pub fn compose(&self, other: &Pld, tail: f64, planner: &mut FftPlanner<f64>) -> Result<Pld> {
        let n = self.probs.len() + other.probs.len() - 1;
        if n > MAX_GRID {
            return Err(CoreError::Numerical(format!(
                "PLD grid of {n} points is too large: use a coarser discretization or the RDP accountant"
            )));
        }
        let probs = if (self.probs.len() as u64) * (other.probs.len() as u64) <= 1 << 16 {
            let mut out = vec![0.0; n];
            for (i, &a) in self.probs.iter().enumerate() {
                for (j, &b) in other.probs.iter().enumerate() {
                    out[i + j] += a * b;
                }
            }
            out
        } else {
            let size = n.next_power_of_two();
            let fft = planner.plan_fft_forward(size);
            let ifft = planner.plan_fft_inverse(size);
            let mut a: Vec<Complex<f64>> = (0..size)
                .map(|i| Complex::new(*self.probs.get(i).unwrap_or(&0.0), 0.0))
                .collect();
            let mut b: Vec<Complex<f64>> = (0..size)
                .map(|i| Complex::new(*other.probs.get(i).unwrap_or(&0.0), 0.0))
                .collect();
            fft.process(&mut a);
            fft.process(&mut b);
            for (x, y) in a.iter_mut().zip(&b) {
                *x *= *y;
            }
            ifft.process(&mut a);
            let s = 1.0 / size as f64;
            a[..n].iter().map(|c| c.re * s).collect()
        };
        let inf_mass = 1.0 - (1.0 - self.inf_mass) * (1.0 - other.inf_mass);
        let mut out = Pld {
            h: self.h,
            offset: self.offset + other.offset,
            probs,
            inf_mass,
        };
        out.truncate(tail);
        Ok(out)
    }

    /// The k-fold self-composition, by repeated squaring.
    pub fn self_compose(&self, k: u64, tail: f64) -> Result<Pld> {
        let mut planner = FftPlanner::new();
        let mut result: Option<Pld> = None;
        let mut base = self.clone();
        let mut k = k;
        while k > 0 {
            if k & 1 == 1 {
                result = Some(match result {
                    None => base.clone(),
                    Some(r) => r.compose(&base, tail, &mut planner)?,
                });
            }
            k >>= 1;
            if k > 0 {
                base = base.compose(&base, tail, &mut planner)?;
            }
        }
        Ok(result.unwrap_or(Pld {
            h: self.h,
            offset: 0,
            probs: vec![1.0],
            inf_mass: 0.0,
        }))
    }
}

/// ε of `steps` steps of the Poisson-subsampled Gaussian (sampling rate q, noise multiplier
/// σ, sensitivity 1, add/remove neighbours) at δ, by the PLD accountant (module docs); the
/// larger ε of the two neighbouring directions. An upper bound on the true ε.
/// Uses [`PldConfig::for_steps`].
pub fn pld_epsilon(q: f64, sigma: f64, steps: u64, delta: f64) -> Result<f64> {
    pld_epsilon_with(q, sigma, steps, delta, &PldConfig::for_steps(steps))
}

/// [`pld_epsilon`] with explicit discretisation settings.
pub fn pld_epsilon_with(
    q: f64,
    sigma: f64,
    steps: u64,
    delta: f64,
    cfg: &PldConfig,
) -> Result<f64> {
    check_pld(q, sigma, steps, delta, cfg)?;
    // Without subsampling (q = 1) the privacy loss distribution is exactly Gaussian:
    // `steps` releases with sensitivity 1 and std σ are √steps/σ-GDP (Dong, Roth & Su 2019,
    // Cor. 3.3), whose ε(δ) is exact. The discretised grid below needs ln(1 − q) > −∞.
    if q >= 1.0 {
        return crate::gaussian::gdp_epsilon((steps as f64).sqrt() / sigma, delta);
    }
    let mut eps: f64 = 0.0;
    for dir in [Direction::Remove, Direction::Add] {
        let one = single_step(q, sigma, dir, cfg)?;
        let all = one.self_compose(steps, cfg.tail_mass)?;
        eps = eps.max(all.epsilon(delta)?);
    }
    Ok(eps)
}

/// Golden values of the composed replace-one accountant, (q, σ, steps, δ, ε_lo, ε_hi), from
/// scripts/replace_one_pld_golden.py (dp_accounting 0.6.0; see the test that uses them).
#[cfg(test)]
const GOLDEN_COMPOSED: &[(f64, f64, u64, f64, f64, f64)] = &[
    (0.01, 1.0, 100, 1e-5, 0.894625, 0.895625),
    (256.0 / 60000.0, 1.1, 1000, 1e-5, 0.958735, 0.978735),
    (0.02, 2.0, 500, 1e-6, 1.998705, 2.008705),
];

/// ε of `steps` steps of the Poisson-subsampled Gaussian (sampling rate q, noise multiplier
/// σ, clip norm 1) at δ under the neighbouring relation `neighbours`, by the PLD accountant.
/// An upper bound on the true ε (pessimistic discretisation), [`PldConfig::for_steps`].
///
/// - `add-remove`: [`pld_epsilon`] (the larger ε of the remove and add directions).
/// - `replace-one`: the PLD of the dominating pair P = (1−q)N(0,σ²) + qN(1,σ²) against
///   Q = (1−q)N(0,σ²) + qN(−1,σ²) (one direction suffices: x ↦ −x swaps P and Q), composed
///   `steps` times. Without subsampling (q = 1) the pair is N(1,σ²) vs N(−1,σ²), a Gaussian of
///   sensitivity 2, and ε is the exact 2√steps/σ-GDP value (Dong, Roth & Su 2019, Cor. 3.3).
///
/// # Why this pair dominates DP-SGD under replace-one
/// One step releases Σ_{i∈S} gᵢ + N(0, σ²I) with S Poisson-sampled at rate q and ‖gᵢ‖ ≤ 1.
/// D = D₀ ∪ {z}, D′ = D₀ ∪ {z′}: couple the samples of D₀ (and the coin of the replaced slot).
/// Conditioned on the sum c of D₀'s sampled gradients the outputs are
/// P_{u,v} = (1−q)N(c, σ²I) + qN(c+u, σ²I) and Q_{u,v} = (1−q)N(c, σ²I) + qN(c+v, σ²I)
/// with u = g(z), v = g(z′). The hockey-stick divergences H_α are jointly convex (mixing over
/// c cannot increase them) and translation invariant, so c = 0. For α′ ≥ 1 the advanced joint
/// convexity identity (Balle, Barthe & Gaboardi 2018, Thm 2, an equality for two mixtures
/// sharing the (1−q) component) gives, with α′ = 1 + q(α−1) and β = α′/α,
/// H_{α′}(P_{u,v}‖Q_{u,v}) = q·H_α(N(u)‖(1−β)N(0) + βN(v)) = q·E[(1 − α·r)₊] with
/// r = (1−β)e^{X₁} + βe^{X₂}, X₁ = −⟨Z,u⟩/σ − ‖u‖²/(2σ²), X₂ = ⟨Z,v−u⟩/σ − ‖v−u‖²/(2σ²),
/// Z ~ N(0, I). Each e^{Xᵢ} is a mean-one lognormal with log-std a = ‖u‖/σ ≤ 1/σ and
/// b = ‖v−u‖/σ ≤ 2/σ. A comonotone sum is the largest in convex order among sums with the
/// same marginals, and comonotone sums preserve the convex order of their marginals (Dhaene,
/// Denuit, Goovaerts, Kaas & Vyncke 2002, "The concept of comonotonicity in actuarial
/// science and finance: theory", §§ 4–6); mean-one lognormals increase in convex order with
/// their log-std (e^{bZ−b²/2} = e^{aZ−a²/2}·(an independent mean-one factor)). So r is
/// below, in convex order, the r* of u = e₁, v = −e₁ (a = 1/σ, b = 2/σ, comonotone), and
/// (1 − α·r)₊ is convex: H_{α′}(P_{u,v}‖Q_{u,v}) ≤ H_{α′}(P‖Q). For α′ < 1,
/// H_{α′}(A‖B) = 1 − α′ + α′·H_{1/α′}(B‖A) and the family is closed under swapping u and v
/// while (P, Q) is symmetric. Hence (P, Q) dominates one step for every α ≥ 0 (Zhu, Dong &
/// Wang 2022, "Optimal accounting of differential privacy via characteristic function",
/// AISTATS, Def. 8), and dominating pairs compose adaptively (ibid., Thm 10), so the k-fold
/// PLD of (P, Q) bounds DP-SGD. The same pair is the replace-one worst case of Lebeda,
/// Regehr, Kamath & Steinke 2024 ("Avoiding pitfalls for privacy accounting of subsampled
/// mechanisms under composition") and is what `privpred audit dp-sgd --neighbours
/// replace-one` simulates.
pub fn pld_epsilon_neighbours(
    q: f64,
    sigma: f64,
    steps: u64,
    delta: f64,
    neighbours: crate::types::Neighbours,
) -> Result<f64> {
    pld_epsilon_neighbours_with(
        q,
        sigma,
        steps,
        delta,
        neighbours,
        &PldConfig::for_steps(steps),
    )
}

/// [`pld_epsilon_neighbours`] with explicit discretisation settings.
pub fn pld_epsilon_neighbours_with(
    q: f64,
    sigma: f64,
    steps: u64,
    delta: f64,
    neighbours: crate::types::Neighbours,
    cfg: &PldConfig,
) -> Result<f64> {
    use crate::types::Neighbours;
    match neighbours {
        Neighbours::AddRemove => pld_epsilon_with(q, sigma, steps, delta, cfg),
        Neighbours::ReplaceOne => {
            check_pld(q, sigma, steps, delta, cfg)?;
            if q >= 1.0 {
                return crate::gaussian::gdp_epsilon(2.0 * (steps as f64).sqrt() / sigma, delta);
            }
            let one = single_step_replace_one(q, sigma, cfg)?;
            one.self_compose(steps, cfg.tail_mass)?.epsilon(delta)
        }
    }
}

fn check_pld(q: f64, sigma: f64, steps: u64, delta: f64, cfg: &PldConfig) -> Result<()> {
    crate::rdp::check_dpsgd(q, sigma, delta)?;
    if steps == 0 {
        return Err(CoreError::invalid(
            "steps",
            steps,
            "must be an integer >= 1",
        ));
    }
    if !(cfg.discretization.is_finite() && cfg.discretization > 0.0) {
        return Err(CoreError::invalid(
            "discretization",
            cfg.discretization,
            "must be > 0",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gaussian::gaussian_delta;

    #[test]
    fn single_gaussian_matches_analytic() {
        // q = 1 (no subsampling), one step: the PLD is that of N(0,σ²) vs N(1,σ²), whose
        // exact profile is Balle & Wang's δ(σ, ε). The pessimistic PLD ε is ≥ the exact ε
        // and within a grid step of it.
        let sigma = 2.0;
        let delta = 1e-5;
        let exact = crate::gaussian::gdp_epsilon(1.0 / sigma, delta).unwrap();
        let e = pld_epsilon(1.0 - 1e-12, sigma, 1, delta).unwrap();
        assert!(
            e >= exact - 1e-6 && e <= exact + 2e-3,
            "pld {e} exact {exact}"
        );
        // Composition of 16 Gaussians = one Gaussian with σ/4.
        let e16 = pld_epsilon(1.0 - 1e-12, sigma, 16, delta).unwrap();
        let exact16 = crate::gaussian::gdp_epsilon(4.0 / sigma, delta).unwrap();
        assert!(
            e16 >= exact16 - 1e-6 && e16 <= exact16 + 5e-3,
            "pld {e16} exact {exact16}"
        );
        let _ = gaussian_delta(sigma, exact);
    }

    #[test]
    fn golden_pld_tf_privacy_mnist_example() {
        // Reference: Google's dp_accounting PLD accountant (pessimistic estimate, value
        // discretization 1e-4) for the TF-Privacy MNIST example (q = 256/60000, σ = 1.1,
        // 14063 steps, δ = 1e-5) gives ε ≈ 2.382 (the figure). Ours is an upper bound
        // of the same kind; the RDP bound is 2.597.
        let e = pld_epsilon(256.0 / 60000.0, 1.1, 14063, 1e-5).unwrap();
        assert!((e - 2.382).abs() < 2e-3, "{e}");
    }

    /// Regression (audit finding): q = 1 (full batch) made the grid bounds infinite and
    /// panicked; it must give the exact GDP ε, which equals the RDP bound's limit from below.
    #[test]
    fn full_batch_is_exact_gdp_not_a_panic() {
        let eps = pld_epsilon(1.0, 2.0, 1, 1e-5).unwrap();
        let exact = crate::gaussian::gdp_epsilon(0.5, 1e-5).unwrap();
        assert_eq!(eps, exact);
        let rdp = crate::rdp::rdp_epsilon(1.0, 2.0, 1, 1e-5).unwrap().epsilon;
        assert!(eps <= rdp + 1e-9, "pld {eps} > rdp {rdp}");
    }

    use crate::types::Neighbours;

    /// The closed-form inverse of the replace-one loss agrees with the loss itself.
    #[test]
    fn replace_one_inverse_roundtrips() {
        for &(q, sigma) in &[(0.01, 1.0), (0.3, 0.2), (1e-6, 5.0), (0.999, 0.7)] {
            for &v in &[-30.0, -3.0, -1e-3, 0.0, 1e-3, 2.0, 40.0] {
                let x = x_of_replace_loss(v, q, sigma);
                if !x.is_finite() {
                    continue;
                }
                let back = replace_loss(x, q, sigma);
                assert!(
                    (back - v).abs() < 1e-7 * v.abs().max(1.0),
                    "q={q} s={sigma} v={v} x={x} back={back}"
                );
            }
        }
    }

    /// Golden values, one step: exact ε from mpmath quadrature of ∫(p − e^ε q)₊ at 50 digits
    /// (scripts/replace_one_pld_golden.py, part 1). The PLD value is an upper bound within
    /// the grid's resolution.
    #[test]
    fn golden_replace_one_single_step_mpmath() {
        for &(q, sigma, delta, exact) in &[
            (0.01, 1.0, 1e-5, 0.209371555659007),
            (0.1, 0.8, 1e-5, 2.83266497397629),
            (0.5, 2.0, 1e-3, 1.3121059421058),
        ] {
            let e = pld_epsilon_neighbours(q, sigma, 1, delta, Neighbours::ReplaceOne).unwrap();
            assert!(
                e >= exact - 1e-9 && e <= exact + 2e-3,
                "q={q} s={sigma}: pld {e} exact {exact}"
            );
        }
    }

    /// Golden values, composed: scripts/replace_one_pld_golden.py part 2 (Google's
    /// dp_accounting 0.6.0 composing a PMF built with scipy, rounded down and up) brackets the
    /// true ε; our connect-the-dots upper bound lies in the bracket.
    #[test]
    fn golden_replace_one_composed_dp_accounting() {
        for &(q, sigma, steps, delta, lo, hi) in GOLDEN_COMPOSED {
            let e = pld_epsilon_neighbours(q, sigma, steps, delta, Neighbours::ReplaceOne).unwrap();
            assert!(
                e >= lo - 1e-6 && e <= hi + 1e-6,
                "q={q} s={sigma} k={steps}: {e} not in [{lo}, {hi}]"
            );
        }
    }

    /// Without subsampling the replace-one pair is N(1,σ²) vs N(−1,σ²): exactly 2√k/σ-GDP.
    #[test]
    fn replace_one_full_batch_is_gaussian_with_sensitivity_two() {
        let e = pld_epsilon_neighbours(1.0, 3.0, 4, 1e-5, Neighbours::ReplaceOne).unwrap();
        let exact = crate::gaussian::gdp_epsilon(2.0 * 2.0 / 3.0, 1e-5).unwrap();
        assert_eq!(e, exact);
        // and the subsampled accountant converges to it as q → 1
        let near =
            pld_epsilon_neighbours(1.0 - 1e-9, 3.0, 4, 1e-5, Neighbours::ReplaceOne).unwrap();
        assert!(
            near >= exact - 1e-6 && near <= exact + 5e-3,
            "{near} vs {exact}"
        );
    }

    /// Property: for the same σ, q, steps and δ, replace-one ε ≥ add/remove ε (the add/remove
    /// pair is in the replace-one family: v = 0), and ≤ the group-privacy bound's ε at 2
    /// steps of add/remove is not claimed; only the ordering is.
    #[test]
    fn replace_one_epsilon_is_at_least_add_remove() {
        for &(q, sigma, steps) in &[
            (0.01, 1.0, 1u64),
            (0.01, 1.0, 50),
            (0.1, 1.5, 20),
            (0.004, 0.9, 200),
        ] {
            let ro = pld_epsilon_neighbours(q, sigma, steps, 1e-5, Neighbours::ReplaceOne).unwrap();
            let ar = pld_epsilon_neighbours(q, sigma, steps, 1e-5, Neighbours::AddRemove).unwrap();
            assert!(
                ro >= ar,
                "q={q} s={sigma} k={steps}: replace-one {ro} < add-remove {ar}"
            );
        }
    }

    /// Degenerate parameters: tiny σ or q would make the grid arithmetic overflow (index out
    /// of bounds) or hang; they are clear errors, under both relations.
    #[test]
    fn degenerate_parameters_are_errors_not_panics() {
        for n in Neighbours::ALL {
            for &(q, sigma, steps) in &[
                (0.01, 1e-8, 1u64),
                (0.01, 1e-9, 1),
                (0.5, 1e-8, 1),
                (0.01, 1e-320, 10),
                (1e-312, 1.0, 1),
                (1e-315, 2.0, 100),
                (1e-320, 1.0, 10),
                (0.3, 1e-5, 3),
            ] {
                let r = pld_epsilon_neighbours(q, sigma, steps, 1e-5, n);
                assert!(r.is_err(), "{n} q={q} s={sigma}: {r:?}");
                let msg = r.unwrap_err().to_string();
                assert!(
                    msg.contains("sampling-rate") || msg.contains("noise-multiplier"),
                    "{msg}"
                );
            }
            // Just above the limits: a number or a clear grid error, never a panic.
            for &(q, sigma) in &[
                (0.5, crate::rdp::MIN_NOISE_MULTIPLIER),
                (crate::rdp::MIN_SAMPLING_RATE, 1.0),
                (0.01, 0.01),
            ] {
                match pld_epsilon_neighbours(q, sigma, 3, 1e-5, n) {
                    Ok(e) => assert!(e.is_finite() && e >= 0.0),
                    Err(e) => assert!(e.to_string().contains("PLD grid"), "{e}"),
                }
            }
        }
    }
}
