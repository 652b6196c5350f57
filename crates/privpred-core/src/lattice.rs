//! Released real vectors on a power-of-two grid with exact ℓ2-Laplace noise on the integer
//! lattice: the pure ε-DP (δ = 0) release of noisy logits, drawn without floating-point
//! arithmetic between the random bits and the released value (the δ > 0 counterpart is
//! [`crate::grid`]).
//!
//! **The release.** For a vector v ∈ Rᵈ with ℓ2 sensitivity Δ, a rate β (in the value's
//! units) and a rounding allowance r > 0:
//!
//! 1. the grid step is g = 2ᵏ, the largest power of two with g·√d ≤ r
//!    ([`crate::grid::grid_log2`]);
//! 2. each coordinate is rounded to the nearest multiple of g, n_i = round(v_i / g) (exact);
//! 3. (n + Z)·g is released, with Z ∈ Zᵈ drawn exactly from the lattice ℓ2-Laplace law
//!    P(Z = z) ∝ exp(−b′·‖z‖₂) at a rate b′ ≤ b = β·g (below, "the rates"), or, for d above
//!    [`LATTICE_L2_MAX_DIM`], from the product of discrete Laplace laws
//!    P(Z = z) ∝ exp(−a·‖z‖₁) with a ≤ b/√d. Which of the two is a function of d alone
//!    ([`lattice_sampler`]), so a stored calibration re-derives it.
//!
//! **Sensitivity with rounding.** |v_i − g·n_i| ≤ g/2, so for neighbours v, v′:
//! ‖n − n′‖₂·g ≤ ‖v − v′‖₂ + g·√d ≤ Δ + r. In grid units the sensitivity is (Δ + r)/g.
//!
//! **Privacy (ℓ2 law).** P(n + Z = y) = exp(−b′‖y − n‖₂)/C with C = Σ_{z∈Zᵈ} exp(−b′‖z‖₂),
//! the same for every centre n (the lattice sum is invariant under integer translation). For
//! neighbours, by the triangle inequality, P(n + Z = y)/P(n′ + Z = y) =
//! exp(b′(‖y − n′‖₂ − ‖y − n‖₂)) ≤ exp(b′‖n − n′‖₂) ≤ exp(b‖n − n′‖₂) ≤ exp(β·(Δ + r)).
//! So one release is β(Δ + r)-DP (pure), and B releases are Bβ(Δ + r)-DP by basic
//! composition; [`lattice_laplace_beta`] sets β = ε/(B(Δ + r)). The conversion of the
//! integer back to a double is post-processing.
//!
//! **Privacy (ℓ1 law, large d).** With Z_i independent, P(Z_i = z) ∝ exp(−a|z|), the ratio
//! at y is ≤ exp(a‖n − n′‖₁) ≤ exp(a√d‖n − n′‖₂) ≤ exp(b‖n − n′‖₂) (Cauchy–Schwarz and
//! a ≤ b/√d): the same bound, so the same β serves both laws.
//!
//! **The rates (rounded down).** b = β·g is a dyadic rational with a numerator of up to 53
//! bits; the draws use shorter ones. With w = q² for the ℓ2 law, where q = ⌈√d·2¹⁶⌉/2¹⁶ ≥ √d,
//! and w = d for the ℓ1 law, the proposal rate is a = s/2ᵏ with s = ⌊2ᵏ·b/√w⌋ and k the
//! integer with 2²² ≤ s < 2²³ ([`SCALE_BITS`]; s by an exact integer square root), so
//! b/√w·(1 − 2⁻²²) < a ≤ b/√w. The ℓ2 law's rate is b′ = q·a ≤ b (within one part in 2²²
//! of b), and a = b′/q ≤ b′/√d. Both are exact rationals and functions of (β, g, d) alone
//! ([`LatticeRates::scale`], [`LatticeRates::rate`]), so loading a calibration re-derives
//! them; rounding a rate down only adds noise, and the bounds above hold with b′ and a as
//! they are (tested exactly in integers over many β, g and d).
//!
//! **Exact sampling of the ℓ2 law (rejection).** Propose Z with independent discrete Laplace
//! coordinates of scale 1/a = 2ᵏ/s (Canonne, Kamath & Steinke 2020, Algorithm 2 with t = 2ᵏ:
//! the uniform U below t is k random bits and the coin exp(−U/t) compares bits lazily;
//! [`crate::exact::BitSource::discrete_laplace_dyadic`]), and accept with probability
//! exp(−γ), γ = b′‖Z‖₂ − a‖Z‖₁ = a·Y, Y = q‖Z‖₂ − ‖Z‖₁ ≥ 0 (‖z‖₁ ≤ √d‖z‖₂ ≤ q‖z‖₂). The
//! accepted Z has P ∝ exp(−a‖z‖₁)·exp(−(b′‖z‖₂ − a‖z‖₁)) = exp(−b′‖z‖₂): the target law
//! exactly, and the number of proposals is geometric, independent of the accepted Z.
//!
//! **The coin exp(−a·Y) with Y irrational.** With S = ‖Z‖₂², L = ‖Z‖₁ and q = q_n/2¹⁶,
//! Y = (√X − c)/2¹⁶ for the integers X = q_n²·S and c = 2¹⁶·L. With r = ⌊√X⌋ (integer square
//! root), n = ⌊Y⌋ = ⌊(r − c)/2¹⁶⌋ and f = Y − n ∈ [0, 1): exp(−aY) = exp(−a·n)·exp(−a·f).
//! The rational a·n = s·n/2ᵏ = w + ρ/2ᵏ gives w coins exp(−1) and one exp(−ρ/2ᵏ); exp(−a·f)
//! is Canonne, Kamath & Steinke (2020), Algorithm 1 (K = 1; while Bernoulli(1/K)·Bernoulli(a)·
//! Bernoulli(f), K += 1; heads iff K is odd; a < 1 on this path). Bernoulli(f) compares a
//! uniform U = (V + U′)/2¹⁶ with f, V uniform below 2¹⁶: U < f ⇔ c + n·2¹⁶ + V + U′ < √X, so
//! c + n·2¹⁶ + V < r says yes, > r says no, and = r (probability 2⁻¹⁶) leaves U′ < √X − r,
//! decided from U′'s binary digits drawn 64 at a time by squaring ((r·2ʲ + u)² ≥ X·4ʲ: no;
//! (r·2ʲ + u + 1)² ≤ X·4ʲ: yes). Integers only, throughout: machine integers (u64/u128) on
//! the common path, arbitrary precision when the integers do not fit (a tiny rate, k > 63, or
//! a huge proposal; [`ExpSqrtCoin`], the same law). The random bits come from a buffer that
//! hands out only the bits each draw needs ([`crate::exact::BitSource`]).
//!
//! **Timing.** The number of proposals does not depend on the accepted noise, but the time of
//! one proposal does (the discrete Laplace draws' loops, the coins' lengths, the integer
//! sizes): the answering time carries information on Z (docs/guarantees.md, "what is not
//! covered").

use crate::error::{CoreError, Result, check_scale};
use crate::exact::{
    BitSource, Rational, bernoulli_exp_neg_one, discrete_laplace, uniform_below, uniform_below_u64,
};
use crate::grid::{grid_log2, grid_units, pow2, rounding_allowance};
use num_bigint::{BigInt, BigUint};
use num_traits::{ToPrimitive, Zero};
use rand::Rng;
use std::cell::RefCell;
use std::rc::Rc;

/// The largest dimension drawn from the ℓ2 law by rejection; above it the ℓ1 (product) law
/// is used. The acceptance rate of the rejection falls quickly with d (measured: 0.79 at
/// d = 2, 0.090 at d = 10, 0.017 at d = 16, 2.3e-4 at d = 32; about 1.7e-12 at d = 100 in
/// the continuous limit 2π^{d/2}Γ(d)/(Γ(d/2)(2√d)^d)), and a draw at d = 10 takes about
/// 7.7 µs, at d = 16 about 57 µs, at d = 32 about 16 ms (`cargo run --release -p
/// privpred-core --example lattice_laplace`).
pub const LATTICE_L2_MAX_DIM: usize = 16;

/// Fractional bits of the dyadic upper bound q on √d (module docs, "the rates").
const SQRT_D_BITS: u64 = 16;

/// Which law a lattice release of dimension d draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatticeSampler {
    /// P(z) ∝ exp(−b‖z‖₂), by rejection from the ℓ1 law (d ≤ [`LATTICE_L2_MAX_DIM`]).
    L2,
    /// P(z) ∝ exp(−a‖z‖₁), a ≤ b/√d: independent discrete Laplace coordinates.
    L1,
}

/// The law a release of dimension `dim` draws from: a function of the public dimension only.
pub fn lattice_sampler(dim: usize) -> LatticeSampler {
    if dim <= LATTICE_L2_MAX_DIM {
        LatticeSampler::L2
    } else {
        LatticeSampler::L1
    }
}

/// The rate β of B lattice releases that together are ε-DP, for a query of ℓ2 sensitivity Δ
/// and the rounding allowance r = Δ/1024 ([`crate::grid::rounding_allowance`]):
/// β = ε/(B(Δ + r)), rounded down by one part in 10¹² (more noise, never less). Returns
/// (β, r).
pub fn lattice_laplace_beta(epsilon: f64, budget: u64, sensitivity: f64) -> Result<(f64, f64)> {
    check_scale("sensitivity", sensitivity)?;
    check_scale("epsilon", epsilon)?;
    if budget == 0 {
        return Err(CoreError::invalid("budget", 0, "must be an integer >= 1"));
    }
    let r = rounding_allowance(sensitivity);
    let beta = epsilon / (budget as f64 * (sensitivity + r)) * (1.0 - 1e-12);
    Ok((beta, r))
}

/// The ε of B lattice releases at rate β with rounding allowance r for sensitivity Δ:
/// B·β·(Δ + r) (module docs).
pub fn lattice_laplace_epsilon(beta: f64, rounding: f64, sensitivity: f64, budget: u64) -> f64 {
    budget as f64 * beta * (sensitivity + rounding)
}

/// The significant bits of the proposal rate's numerator: a = s/2ᵏ with 2²² ≤ s < 2²³
/// (module docs, "the rates"), so the rates are rounded down by less than one part in 2²².
pub const SCALE_BITS: u32 = 22;

/// The exact rates of a lattice release: the proposal's (and the ℓ1 law's) rate a = s/2ᵏ and,
/// for the ℓ2 law, its rate b′ = q·a ≤ β·g (module docs, "the rates").
#[derive(Debug, Clone)]
pub struct LatticeRates {
    dim: usize,
    /// The discrete Laplace scale 1/a = 2ᵏ/s.
    scale: Rational,
    /// The rate b′ = q·a of the ℓ2 law (None for the ℓ1 law).
    rate: Option<Rational>,
    /// a = s/2ᵏ as (s, k), k possibly negative.
    s: BigUint,
    k: i64,
    /// q_n = q·2¹⁶.
    qn: BigUint,
    /// The same on machine integers, when they fit.
    small: Option<SmallRates>,
}

/// The machine-integer form of [`LatticeRates`] (23 ≤ k ≤ 63, so a < 1).
#[derive(Debug, Clone, Copy)]
struct SmallRates {
    dim: usize,
    s: u64,
    k: u32,
    qn2: u128,
}

/// ⌊x·2ᵉ⌋ for an integer x and any integer e.
fn shift(x: &BigUint, e: i64) -> BigUint {
    if e >= 0 {
        x << (e as u64)
    } else {
        x >> ((-e) as u64)
    }
}

impl LatticeRates {
    /// The rates for a rate β (value units), the grid step 2^`log2_step` and dimension `dim`
    /// (module docs, "the rates"): a pure function of the three, so a stored calibration
    /// re-derives them.
    pub fn new(beta: f64, log2_step: i32, dim: usize) -> Result<Self> {
        check_scale("noise beta", beta)?;
        if dim == 0 {
            return Err(CoreError::invalid("dimension", dim, "must be >= 1"));
        }
        let beta = Rational::from_f64(beta)?;
        // b = β·g = bn/bd
        let (bn, bd) = if log2_step >= 0 {
            (beta.numer() << (log2_step as u64), beta.denom().clone())
        } else {
            (beta.numer().clone(), beta.denom() << ((-log2_step) as u64))
        };
        // q_n = ⌈√(d·2³²)⌉, so q = q_n/2¹⁶ ≥ √d
        let d2 = BigUint::from(dim as u64) << (2 * SQRT_D_BITS);
        let mut qn = d2.sqrt();
        if &qn * &qn < d2 {
            qn += 1u32;
        }
        let l2 = lattice_sampler(dim) == LatticeSampler::L2;
        // a ≤ b/√w with w = q² (ℓ2) or d (ℓ1) as wn/wd: s(k) = ⌊2ᵏ·b/√w⌋ =
        // ⌊√⌊4ᵏ·bn²·wd/(bd²·wn)⌋⌋, nondecreasing in k
        let (wn, wd) = if l2 {
            (&qn * &qn, BigUint::from(1u32) << (2 * SQRT_D_BITS))
        } else {
            (BigUint::from(dim as u64), BigUint::from(1u32))
        };
        let num = &bn * &bn * wd;
        let den = &bd * &bd * wn;
        let s_of = |k: i64| -> BigUint {
            if k >= 0 {
                ((&num << (2 * k as u64)) / &den).sqrt()
            } else {
                (&num / (&den << (2 * (-k) as u64))).sqrt()
            }
        };
        let (lo, hi) = (
            BigUint::from(1u64) << SCALE_BITS,
            BigUint::from(1u64) << (SCALE_BITS + 1),
        );
        // start from the bit lengths, then step to the k with 2²² ≤ s(k) < 2²³
        let mut k = SCALE_BITS as i64 - (num.bits() as i64 - den.bits() as i64) / 2;
        let mut s = s_of(k);
        while s < lo {
            k += 1;
            s = s_of(k);
        }
        while s >= hi {
            k -= 1;
            s = s_of(k);
        }
        let scale = if k >= 0 {
            Rational::new(BigUint::from(1u32) << (k as u64), s.clone())?
        } else {
            Rational::new(1u32, shift(&s, -k))?
        };
        let rate = if l2 {
            // b′ = q·a = q_n·s/2^(k+16)
            let e = k + SQRT_D_BITS as i64;
            Some(if e >= 0 {
                Rational::new(&qn * &s, BigUint::from(1u32) << (e as u64))?
            } else {
                Rational::new(shift(&(&qn * &s), -e), 1u32)?
            })
        } else {
            None
        };
        let mut rates = LatticeRates {
            dim,
            scale,
            rate,
            s,
            k,
            qn,
            small: None,
        };
        rates.small = rates.machine_form();
        Ok(rates)
    }

    fn machine_form(&self) -> Option<SmallRates> {
        if !(23..=63).contains(&self.k) {
            return None;
        }
        let qn = self.qn.to_u64()? as u128;
        Some(SmallRates {
            dim: self.dim,
            s: self.s.to_u64()?,
            k: self.k as u32,
            qn2: qn.checked_mul(qn)?,
        })
    }

    /// The discrete Laplace scale 1/a = 2ᵏ/s of the proposal (and of the ℓ1 law).
    pub fn scale(&self) -> &Rational {
        &self.scale
    }

    /// The rate b′ = q·a ≤ β·g of the ℓ2 law in grid units (None for the ℓ1 law, whose rate
    /// is a ≤ β·g/√d; module docs, "the rates").
    pub fn rate(&self) -> Option<&Rational> {
        self.rate.as_ref()
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The acceptance coin exp(−(b′‖z‖₂ − a‖z‖₁)) of a proposal z.
    pub fn acceptance(&self, z: &[BigInt]) -> ExpSqrtCoin {
        let mut s = BigUint::zero();
        let mut l = BigUint::zero();
        for v in z {
            let m = v.magnitude();
            s += m * m;
            l += m;
        }
        self.coin(s, l)
    }

    /// γ = a·(q‖z‖₂ − ‖z‖₁) = (√X − c)/D with a = s·2⁻ᵏ, q = q_n·2⁻¹⁶: X = (s·q_n)²·S,
    /// c = s·2¹⁶·L, D = 2^(k+16), all scaled by 2^(−k−16) when k + 16 < 0.
    fn coin(&self, s2: BigUint, l: BigUint) -> ExpSqrtCoin {
        let e = self.k + SQRT_D_BITS as i64;
        let (an, dd) = if e >= 0 {
            (self.s.clone(), BigUint::from(1u32) << (e as u64))
        } else {
            (shift(&self.s, -e), BigUint::from(1u32))
        };
        let sq = &an * &self.qn;
        ExpSqrtCoin {
            x: &sq * &sq * s2,
            c: (an << SQRT_D_BITS) * l,
            d: dd,
        }
    }
}

/// One exact draw of the lattice noise Z ∈ Z^dim at `rates` ([`lattice_sampler`] picks the
/// law), with the number of proposals drawn (1 for the ℓ1 law).
pub fn sample_lattice_noise<R: Rng + ?Sized>(
    rng: &mut R,
    rates: &LatticeRates,
) -> Result<(Vec<BigInt>, u64)> {
    if let Some(small) = rates.small {
        let mut z = vec![0i64; rates.dim];
        let proposals = sample_small(rng, &small, &mut z)?;
        return Ok((z.into_iter().map(BigInt::from).collect(), proposals));
    }
    sample_big(rng, rates)
}

/// [`sample_lattice_noise`] on arbitrary-precision integers (rates outside the machine
/// range).
fn sample_big<R: Rng + ?Sized>(rng: &mut R, rates: &LatticeRates) -> Result<(Vec<BigInt>, u64)> {
    let mut proposals = 0u64;
    loop {
        proposals += 1;
        let z = (0..rates.dim)
            .map(|_| discrete_laplace(rng, &rates.scale))
            .collect::<Result<Vec<_>>>()?;
        if lattice_sampler(rates.dim) == LatticeSampler::L1 || rates.acceptance(&z).flip(rng) {
            return Ok((z, proposals));
        }
    }
}

/// [`sample_lattice_noise`] on machine integers, taking only the random bits each draw
/// needs ([`BitSource`]): writes Z into `z`, returns the number of proposals. The coin is
/// exp(−a·Y) for Y = q‖z‖₂ − ‖z‖₁ = (√X − c)/2¹⁶ with X = q_n²·S, c = 2¹⁶·L (module docs);
/// a proposal whose integers do not fit in 128 bits flips the arbitrary-precision coin.
fn sample_small<R: Rng + ?Sized>(rng: &mut R, r: &SmallRates, z: &mut [i64]) -> Result<u64> {
    let l1 = lattice_sampler(r.dim) == LatticeSampler::L1;
    let mut bits = BitSource::new(rng);
    let mut proposals = 0u64;
    loop {
        proposals += 1;
        // ‖z‖₂² and ‖z‖₁, None on overflow
        let (mut s2, mut l) = (Some(0u128), Some(0u128));
        for v in z.iter_mut() {
            *v = bits.discrete_laplace_dyadic(r.k, r.s)?;
            let m = v.unsigned_abs() as u128;
            s2 = s2.and_then(|s2| s2.checked_add(m * m));
            l = l.and_then(|l| l.checked_add(m));
        }
        if l1 {
            return Ok(proposals);
        }
        let xc = match (s2, l) {
            (Some(s2), Some(l)) => r.qn2.checked_mul(s2).zip(l.checked_mul(1 << SQRT_D_BITS)),
            _ => None,
        };
        let heads = match xc {
            Some((x, c)) => flip_scaled_coin(&mut bits, x, c, r.s, r.k),
            None => {
                let (mut s2, mut l) = (BigUint::zero(), BigUint::zero());
                for v in z.iter() {
                    let m = BigUint::from(v.unsigned_abs());
                    s2 += &m * &m;
                    l += m;
                }
                let rates = LatticeRates {
                    dim: r.dim,
                    scale: Rational::new(BigUint::from(1u32) << r.k, r.s)?,
                    rate: None,
                    s: BigUint::from(r.s),
                    k: r.k as i64,
                    qn: BigUint::from(r.qn2.isqrt()),
                    small: None,
                };
                rates.coin(s2, l).flip_big(bits.rng())
            }
        };
        if heads {
            return Ok(proposals);
        }
    }
}

/// A coin of probability exp(−a·Y) for a = s/2ᵏ < 1 (s < 2ᵏ) and Y = (√X − c)/2¹⁶ ≥ 0
/// (module docs): with r = ⌊√X⌋, n = ⌊Y⌋ = ⌊(r − c)/2¹⁶⌋ and f = Y − n ∈ [0, 1),
/// exp(−aY) = exp(−1)^w·exp(−ρ/2ᵏ)·exp(−a·f) where s·n = w·2ᵏ + ρ; the last by Canonne,
/// Kamath & Steinke (2020), Algorithm 1 with Bernoulli(a·f/K) = Bernoulli(1/K)·Bernoulli(a)·
/// Bernoulli(f), and Bernoulli(f) from U = (V + U′)/2¹⁶, V uniform below 2¹⁶: c + n·2¹⁶ + V
/// below r says yes, above r no, equal (probability 2⁻¹⁶) leaves U′ < √X − r, decided on
/// arbitrary-precision integers.
fn flip_scaled_coin<R: Rng + ?Sized>(
    bits: &mut BitSource<'_, R>,
    x: u128,
    c: u128,
    s: u64,
    k: u32,
) -> bool {
    let root = x.isqrt();
    let n = (root - c) >> SQRT_D_BITS;
    let c = c + (n << SQRT_D_BITS);
    let sn = s as u128 * n;
    let whole = sn >> k;
    let frac = sn & ((1u128 << k) - 1);
    let mut i = 0u128;
    while i < whole {
        if !bits.exp_neg_one() {
            return false;
        }
        i += 1;
    }
    if frac != 0 && !bits.exp_neg_dyadic(frac, k) {
        return false;
    }
    let mut j: u64 = 1;
    while bits.below(j) == 0 && bits.below_dyadic(s as u128, k) && {
        let w = c + bits.bits(SQRT_D_BITS as u32) as u128;
        match w.cmp(&root) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => {
                below_root_fraction(bits.rng(), &BigUint::from(x), &BigUint::from(root))
            }
        }
    } {
        j += 1;
    }
    j % 2 == 1
}

/// A coin of probability exp(−γ) for γ = (√X − c)/D ≥ 0 with integers X, c ≥ 0, D ≥ 1
/// (module docs: integer part by the integer square root, the fraction by Canonne, Kamath &
/// Steinke 2020, Algorithm 1 with an exact Bernoulli(f)).
#[derive(Debug, Clone)]
pub struct ExpSqrtCoin {
    x: BigUint,
    c: BigUint,
    d: BigUint,
}

impl ExpSqrtCoin {
    /// The coin exp(−(√x − c)/d); errors when d = 0 or √x < c (γ < 0).
    pub fn new(x: BigUint, c: BigUint, d: BigUint) -> Result<Self> {
        if d.is_zero() {
            return Err(CoreError::invalid("denominator", 0, "must be > 0"));
        }
        if &c * &c > x {
            return Err(CoreError::invalid(
                "exponent",
                "negative",
                "sqrt(x) - c must be >= 0",
            ));
        }
        Ok(ExpSqrtCoin { x, c, d })
    }

    /// γ as f64 (for tests and reports only; never on a sampling path).
    pub fn gamma_f64(&self) -> f64 {
        (self.x.to_f64().unwrap_or(f64::INFINITY).sqrt() - self.c.to_f64().unwrap_or(0.0))
            / self.d.to_f64().unwrap_or(f64::INFINITY)
    }

    /// One flip: heads with probability exactly exp(−γ). When X fits in 128 bits and D in 64
    /// it runs on machine integers (the same outcome from the same random bits).
    pub fn flip<R: Rng + ?Sized>(&self, rng: &mut R) -> bool {
        if let (Some(x), Some(c), Some(d)) = (self.x.to_u128(), self.c.to_u128(), self.d.to_u64()) {
            return flip_sqrt_coin_small(rng, x, c, d);
        }
        self.flip_big(rng)
    }

    /// [`ExpSqrtCoin::flip`] on arbitrary-precision integers.
    fn flip_big<R: Rng + ?Sized>(&self, rng: &mut R) -> bool {
        // ⌊√X⌋ ≥ c because √X ≥ c and c is an integer
        let root = self.x.sqrt();
        let m = (&root - &self.c) / &self.d;
        match m.to_u64() {
            Some(m) => {
                for _ in 0..m {
                    if !bernoulli_exp_neg_one(rng) {
                        return false;
                    }
                }
            }
            None => {
                let mut i = BigUint::zero();
                while i < m {
                    if !bernoulli_exp_neg_one(rng) {
                        return false;
                    }
                    i += 1u32;
                }
            }
        }
        let c = &self.c + &m * &self.d;
        // exp(−f), f = (√X − c)/D ∈ [0, 1): Canonne, Kamath & Steinke 2020, Algorithm 1
        let mut k: u64 = 1;
        while uniform_below_u64(rng, k) == 0 && {
            // Bernoulli(f): U = (V + U′)/D, V uniform below D (module docs)
            let w = &c + uniform_below(rng, &self.d);
            match w.cmp(&root) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Greater => false,
                std::cmp::Ordering::Equal => below_root_fraction(rng, &self.x, &root),
            }
        } {
            k += 1;
        }
        k % 2 == 1
    }
}

/// [`ExpSqrtCoin::flip`] for X < 2¹²⁸, c < 2¹²⁸ and 1 ≤ D < 2⁶⁴ (√X ≥ c), without allocation
/// but in the rare case (probability 1/D per Bernoulli(f)) that U's first D-ary digit leaves
/// the comparison undecided.
fn flip_sqrt_coin_small<R: Rng + ?Sized>(rng: &mut R, x: u128, c: u128, d: u64) -> bool {
    let root = x.isqrt();
    let m = (root - c) / d as u128;
    let mut i = 0u128;
    while i < m {
        if !bernoulli_exp_neg_one(rng) {
            return false;
        }
        i += 1;
    }
    // c + m·D ≤ ⌊√X⌋
    let c = c + m * d as u128;
    let mut k: u64 = 1;
    while uniform_below_u64(rng, k) == 0 && {
        let w = c + uniform_below_u64(rng, d) as u128;
        match w.cmp(&root) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => {
                below_root_fraction(rng, &BigUint::from(x), &BigUint::from(root))
            }
        }
    } {
        k += 1;
    }
    k % 2 == 1
}

/// Whether a uniform U′ ∈ [0, 1) lies below √X − r for r = ⌊√X⌋: U′'s binary digits drawn 64
/// at a time, after j digits U′ ∈ [u/2ʲ, (u + 1)/2ʲ), and U′ < √X − r is decided once
/// (r·2ʲ + u)² ≥ X·4ʲ (no) or (r·2ʲ + u + 1)² ≤ X·4ʲ (yes); never for a perfect square X
/// (the first test says no).
fn below_root_fraction<R: Rng + ?Sized>(rng: &mut R, x: &BigUint, root: &BigUint) -> bool {
    let mut u = BigUint::zero();
    let mut j: u64 = 0;
    loop {
        u = (u << 64u32) + BigUint::from(rng.next_u64());
        j += 64;
        let target = x << (2 * j);
        let lo = (root << j) + &u;
        if &lo * &lo >= target {
            return false;
        }
        let hi = lo + 1u32;
        if &hi * &hi <= target {
            return true;
        }
    }
}

/// Releases `values` in place on the grid of `rounding` with exact lattice ℓ2-Laplace noise
/// of rate β (ℓ1 law above [`LATTICE_L2_MAX_DIM`]; module docs). Errors on a non-finite
/// value, a value too large for the grid, or a β not positive.
pub fn release_lattice_laplace<R: Rng + ?Sized>(
    rng: &mut R,
    values: &mut [f64],
    beta: f64,
    rounding: f64,
) -> Result<()> {
    release_lattice_laplace_counted(rng, values, beta, rounding).map(|_| ())
}

/// [`release_lattice_laplace`], returning the number of proposals the draw took (for the
/// timing measurements of the audit and the benchmarks).
pub fn release_lattice_laplace_counted<R: Rng + ?Sized>(
    rng: &mut R,
    values: &mut [f64],
    beta: f64,
    rounding: f64,
) -> Result<u64> {
    check_scale("noise beta", beta)?;
    if values.is_empty() {
        return Ok(0);
    }
    let (k, rates) = cached_rates(beta, rounding, values.len())?;
    let units = grid_units(values, k)?;
    let g = pow2(k);
    let out_of_range = || CoreError::Numerical("lattice Laplace draw out of range".into());
    if let Some(small) = rates.small {
        let mut z = vec![0i64; values.len()];
        let proposals = sample_small(rng, &small, &mut z)?;
        for ((v, n), z) in values.iter_mut().zip(units).zip(z) {
            let z = z as i128;
            if z.abs() >= 1i128 << 100 {
                return Err(out_of_range());
            }
            // post-processing of the exact integer: its nearest double, times the exact step
            *v = (n + z) as f64 * g;
        }
        return Ok(proposals);
    }
    let (z, proposals) = sample_big(rng, &rates)?;
    for ((v, n), z) in values.iter_mut().zip(units).zip(z) {
        let z = z
            .to_i128()
            .filter(|z| z.abs() < 1i128 << 100)
            .ok_or_else(out_of_range)?;
        // post-processing of the exact integer: its nearest double, times the exact step
        *v = (n + z) as f64 * g;
    }
    Ok(proposals)
}

/// The grid exponent and the rates of a release, kept for the last (β, r, d) a thread used:
/// a service answers many queries at the same calibration (a pure function of the three, so
/// the cache changes nothing but the time).
fn cached_rates(beta: f64, rounding: f64, dim: usize) -> Result<(i32, Rc<LatticeRates>)> {
    type Entry = Option<((u64, u64, usize), i32, Rc<LatticeRates>)>;
    thread_local! {
        static LAST: RefCell<Entry> = const { RefCell::new(None) };
    }
    let key = (beta.to_bits(), rounding.to_bits(), dim);
    if let Some(hit) = LAST.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|e| e.0 == key)
            .map(|e| (e.1, e.2.clone()))
    }) {
        return Ok(hit);
    }
    let k = grid_log2(rounding, dim)?;
    let rates = Rc::new(LatticeRates::new(beta, k, dim)?);
    LAST.with(|c| *c.borrow_mut() = Some((key, k, rates.clone())));
    Ok((k, rates))
}

/// The rate b = β·g of a release in grid units, as f64 (for tests and reports).
pub fn grid_rate(beta: f64, rounding: f64, dim: usize) -> Result<f64> {
    Ok(beta * pow2(grid_log2(rounding, dim)?))
}

#[cfg(test)]
mod tests;
