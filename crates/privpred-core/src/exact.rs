//! Exact samplers: every released value is computed from uniformly random bits with integer
//! arithmetic only — no floating-point operation lies between the random bits and the output.
//!
//! **Why.** A floating-point sampler (x + b·ln u, Box–Muller, Gumbel-max) does not draw from
//! the distribution its privacy proof assumes: its outputs lie on a set of doubles that depends
//! on the input, and an observer of the exact bits can tell neighbouring inputs apart (Mironov,
//! "On significance of the least significant bits for differential privacy", CCS 2012; Jin et
//! al., "Are we there yet? Timing and floating-point attacks on differential privacy systems",
//! S&P 2022). The samplers here draw *exactly* from their stated distributions.
//!
//! **How.** Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy"
//! (NeurIPS 2020), Algorithms 1–3: Bernoulli(exp(−γ)) for a rational γ ≥ 0
//! ([`bernoulli_exp_neg`]), the discrete Laplace distribution with a rational scale
//! ([`discrete_laplace`]) and the discrete Gaussian with a rational variance
//! ([`discrete_gaussian`]), all from exact Bernoulli(n/d) coins (a uniform integer below d,
//! drawn by rejection from raw bits, compared with n). Parameters given as `f64` enter as the
//! dyadic rationals they are: every finite double is m·2^e exactly ([`Rational::from_f64`]),
//! so β·(q* − q_r) for `f64` scores and an `f64` β is an exact rational too.
//!
//! **Selections.** The exponential mechanism P(r) ∝ exp(−γ_r), γ_r = β·(q* − q_r), is drawn by
//! rejection: a uniform candidate r, accepted with probability exp(−γ_r); a maximum (γ = 0) is
//! always accepted, so each round accepts with probability ≥ 1/|R| and the accepted index has
//! exactly the target law ([`exponential_mechanism`]). Permute-and-flip (McKenna & Sheldon 2020,
//! Algorithm 1) visits the candidates in a uniformly random order (Fisher–Yates from exact
//! uniform indices) with exact coins exp(−γ_r) ([`permute_and_flip`]).
//!
//! **Timing.** The number of coins drawn depends on the draw (as in every rejection sampler);
//! the selections' loop count depends on which candidate is accepted. Callers that expose
//! answering time should know this (see the guarantees page's "what is not covered").

use crate::error::{CoreError, Result};
use num_bigint::{BigInt, BigUint, Sign};
use num_integer::Integer;
use num_traits::{One, Signed, ToPrimitive, Zero};
use rand::Rng;

/// A nonnegative rational number num/den (den > 0), kept unreduced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rational {
    num: BigUint,
    den: BigUint,
}

impl Rational {
    /// num/den; errors when den = 0.
    pub fn new(num: impl Into<BigUint>, den: impl Into<BigUint>) -> Result<Self> {
        let (num, den) = (num.into(), den.into());
        if den.is_zero() {
            return Err(CoreError::invalid("denominator", 0, "must be > 0"));
        }
        Ok(Rational { num, den })
    }

    /// The integer n as a rational.
    pub fn integer(n: impl Into<BigUint>) -> Self {
        Rational {
            num: n.into(),
            den: BigUint::one(),
        }
    }

    /// The exact value of a finite double x ≥ 0 (every finite double is m·2^e).
    pub fn from_f64(x: f64) -> Result<Self> {
        if !(x.is_finite() && x >= 0.0) {
            return Err(CoreError::invalid(
                "value",
                x,
                "must be a finite number >= 0",
            ));
        }
        let (m, e) = dyadic(x);
        Ok(from_dyadic(m.magnitude().clone(), e))
    }

    /// The numerator.
    pub fn numer(&self) -> &BigUint {
        &self.num
    }

    /// The denominator.
    pub fn denom(&self) -> &BigUint {
        &self.den
    }

    /// Whether the value is 0.
    pub fn is_zero(&self) -> bool {
        self.num.is_zero()
    }

    /// ⌊num/den⌋ and the fractional part (num mod den)/den.
    fn split(&self) -> (BigUint, Rational) {
        let (q, r) = self.num.div_rem(&self.den);
        (
            q,
            Rational {
                num: r,
                den: self.den.clone(),
            },
        )
    }

    /// The value as f64 (for tests and reports only; never on a sampling path).
    pub fn to_f64(&self) -> f64 {
        // scale both to at most 1000 bits so the conversion neither overflows nor loses range
        let shift = self.num.bits().max(self.den.bits()).saturating_sub(1000);
        let n = (&self.num >> shift).to_f64().unwrap_or(f64::INFINITY);
        let d = (&self.den >> shift).to_f64().unwrap_or(f64::INFINITY);
        n / d
    }
}

/// A finite double as m·2^e exactly (m signed; 0 as (0, 0)).
fn dyadic(x: f64) -> (BigInt, i64) {
    if x == 0.0 {
        return (BigInt::zero(), 0);
    }
    let bits = x.to_bits();
    let sign = if bits >> 63 == 1 {
        Sign::Minus
    } else {
        Sign::Plus
    };
    let exp_bits = ((bits >> 52) & 0x7ff) as i64;
    let frac = bits & ((1u64 << 52) - 1);
    let (m, e) = if exp_bits == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), exp_bits - 1075)
    };
    (BigInt::from_biguint(sign, BigUint::from(m)), e)
}

/// m·2^e for m ≥ 0 as a rational.
fn from_dyadic(m: BigUint, e: i64) -> Rational {
    if e >= 0 {
        Rational {
            num: m << (e as u64),
            den: BigUint::one(),
        }
    } else {
        Rational {
            num: m,
            den: BigUint::one() << ((-e) as u64),
        }
    }
}

/// A uniform integer in [0, n), n ≥ 1, by rejection from raw bits (exact: each value has
/// probability exactly 1/n).
pub fn uniform_below<R: Rng + ?Sized>(rng: &mut R, n: &BigUint) -> BigUint {
    debug_assert!(!n.is_zero());
    if let Some(small) = n.to_u64() {
        return BigUint::from(uniform_below_u64(rng, small));
    }
    let bits = n.bits();
    let words = bits.div_ceil(64) as usize;
    let top = bits % 64;
    loop {
        let mut digits: Vec<u64> = (0..words).map(|_| rng.next_u64()).collect();
        if top != 0 {
            digits[words - 1] &= (1u64 << top) - 1;
        }
        let v = BigUint::from_slice(
            &digits
                .iter()
                .flat_map(|w| [*w as u32, (*w >> 32) as u32])
                .collect::<Vec<u32>>(),
        );
        if &v < n {
            return v;
        }
    }
}

/// A uniform integer in [0, n), n ≥ 1: the smallest all-ones mask covering n − 1, rejection
/// (exact; fewer than 2 draws on average).
pub fn uniform_below_u64<R: Rng + ?Sized>(rng: &mut R, n: u64) -> u64 {
    debug_assert!(n >= 1);
    if n == 1 {
        return 0;
    }
    let mask = u64::MAX >> (n - 1).leading_zeros();
    loop {
        let v = rng.next_u64() & mask;
        if v < n {
            return v;
        }
    }
}

/// A uniform index in [0, n), n ≥ 1 (exact).
pub fn uniform_index<R: Rng + ?Sized>(rng: &mut R, n: usize) -> usize {
    uniform_below_u64(rng, n as u64) as usize
}

/// Bernoulli(num/den) (heads for num ≥ den; exact: a uniform integer below den, compared with
/// num; for a power-of-two den the comparison is lazy, 64 random bits at a time from the top,
/// so it ends after one word but with probability 2⁻⁶⁴).
pub fn bernoulli<R: Rng + ?Sized>(rng: &mut R, p: &Rational) -> bool {
    if p.num.is_zero() {
        return false;
    }
    if p.num >= p.den {
        return true;
    }
    if p.den.count_ones() == 1 {
        return below_power_of_two(rng, &p.num, p.den.bits() - 1);
    }
    uniform_below(rng, &p.den) < p.num
}

/// Whether a uniform k-bit integer u (k ≥ 1) is below num < 2^k: u's 64-bit words are drawn
/// from the most significant down and compared with num's as they come.
fn below_power_of_two<R: Rng + ?Sized>(rng: &mut R, num: &BigUint, k: u64) -> bool {
    let digits: Vec<u64> = num.iter_u64_digits().collect();
    let words = k.div_ceil(64) as usize;
    let top = k % 64;
    for i in (0..words).rev() {
        let mut w = rng.next_u64();
        if i == words - 1 && top != 0 {
            w &= (1u64 << top) - 1;
        }
        let d = digits.get(i).copied().unwrap_or(0);
        if w != d {
            return w < d;
        }
    }
    false
}

/// Bernoulli(exp(−γ)) for a rational γ ∈ [0, 1] (Canonne, Kamath & Steinke 2020,
/// Algorithm 1): K = 1; while Bernoulli(γ/K) succeeds, K += 1; heads iff K is odd. P(K > k) =
/// γ^k/k!, so P(K odd) = Σ_k (−γ)^k/k! = exp(−γ). Bernoulli(γ/K) is drawn as the product of
/// the independent coins Bernoulli(1/K) and Bernoulli(γ).
fn bernoulli_exp_neg_unit<R: Rng + ?Sized>(rng: &mut R, gamma: &Rational) -> bool {
    debug_assert!(gamma.num <= gamma.den);
    if let (Some(n), Some(d)) = (gamma.num.to_u64(), gamma.den.to_u64()) {
        return bernoulli_exp_neg_unit_u64(rng, n, d);
    }
    let mut k: u64 = 1;
    while uniform_below_u64(rng, k) == 0 && bernoulli(rng, gamma) {
        k += 1;
    }
    k % 2 == 1
}

/// Bernoulli(exp(−γ)) for any rational γ ≥ 0 (Canonne, Kamath & Steinke 2020, Algorithm 1):
/// ⌊γ⌋ coins of exp(−1), stopping at the first tails, then one of exp(−(γ − ⌊γ⌋)). γ = 0 is
/// always heads.
pub fn bernoulli_exp_neg<R: Rng + ?Sized>(rng: &mut R, gamma: &Rational) -> bool {
    if gamma.num <= gamma.den {
        return bernoulli_exp_neg_unit(rng, gamma);
    }
    ExpCoin::new(gamma.clone()).flip(rng)
}

/// A coin of probability exp(−γ), γ ≥ 0 rational, with γ split once into ⌊γ⌋ and its
/// fractional part (a selection flips the same candidate's coin many times).
#[derive(Clone, Debug)]
pub struct ExpCoin {
    whole: BigUint,
    frac: Rational,
}

impl ExpCoin {
    /// The coin exp(−γ).
    pub fn new(gamma: Rational) -> Self {
        if gamma.num < gamma.den {
            return ExpCoin {
                whole: BigUint::zero(),
                frac: gamma,
            };
        }
        let (whole, frac) = gamma.split();
        ExpCoin { whole, frac }
    }

    /// Whether γ = 0 (the coin always comes up heads).
    pub fn is_certain(&self) -> bool {
        self.whole.is_zero() && self.frac.is_zero()
    }

    /// One flip (Canonne, Kamath & Steinke 2020, Algorithm 1): ⌊γ⌋ coins of exp(−1), stopping
    /// at the first tails, then one of exp(−(γ − ⌊γ⌋)).
    pub fn flip<R: Rng + ?Sized>(&self, rng: &mut R) -> bool {
        let one = Rational::integer(1u32);
        match self.whole.to_u64() {
            Some(w) => {
                for _ in 0..w {
                    if !bernoulli_exp_neg_unit(rng, &one) {
                        return false;
                    }
                }
            }
            None => {
                let mut i = BigUint::zero();
                while i < self.whole {
                    if !bernoulli_exp_neg_unit(rng, &one) {
                        return false;
                    }
                    i += 1u32;
                }
            }
        }
        self.frac.is_zero() || bernoulli_exp_neg_unit(rng, &self.frac)
    }
}

/// One draw of the discrete Laplace distribution on the integers with rational scale
/// t/s > 0: P(Z = z) ∝ exp(−|z|·s/t) (Canonne, Kamath & Steinke 2020, Algorithm 2; exact).
/// When t and s fit in 64 bits the draw runs on machine integers ([`discrete_laplace_u64`],
/// the same output from the same random bits).
pub fn discrete_laplace<R: Rng + ?Sized>(rng: &mut R, scale: &Rational) -> Result<BigInt> {
    if scale.num.is_zero() {
        return Err(CoreError::invalid("scale", 0, "must be > 0"));
    }
    if let (Some(t), Some(s)) = (scale.num.to_u64(), scale.den.to_u64()) {
        return discrete_laplace_u64(rng, t, s).map(BigInt::from);
    }
    discrete_laplace_big(rng, scale)
}

/// A coin of probability exp(−1) (Canonne, Kamath & Steinke 2020, Algorithm 1 with γ = 1:
/// K = 1; while Bernoulli(1/K), K += 1; heads iff K is odd), on machine integers; the same
/// random bits as [`bernoulli_exp_neg`] at γ = 1.
#[inline]
pub fn bernoulli_exp_neg_one<R: Rng + ?Sized>(rng: &mut R) -> bool {
    let mut k: u64 = 1;
    while uniform_below_u64(rng, k) == 0 {
        k += 1;
    }
    k % 2 == 1
}

/// Bernoulli(num/den) on machine integers (heads for num ≥ den; den ≥ 1): the same random
/// bits and outcome as [`bernoulli`] on the same fraction.
#[inline]
pub fn bernoulli_u64<R: Rng + ?Sized>(rng: &mut R, num: u64, den: u64) -> bool {
    debug_assert!(den >= 1);
    if num == 0 {
        return false;
    }
    if num >= den {
        return true;
    }
    // for a power-of-two den the lazy comparison of [`bernoulli`] reads one word, masked to
    // den's bits: the same as a uniform integer below den
    uniform_below_u64(rng, den) < num
}

/// Bernoulli(exp(−num/den)) for num ≤ den ≥ 1 on machine integers (Canonne, Kamath & Steinke
/// 2020, Algorithm 1, as [`bernoulli_exp_neg`]; the same random bits and outcome).
#[inline]
fn bernoulli_exp_neg_unit_u64<R: Rng + ?Sized>(rng: &mut R, num: u64, den: u64) -> bool {
    debug_assert!(num <= den);
    let mut k: u64 = 1;
    while uniform_below_u64(rng, k) == 0 && bernoulli_u64(rng, num, den) {
        k += 1;
    }
    k % 2 == 1
}

/// [`discrete_laplace`] at scale t/s for t, s ≥ 1 that fit in 64 bits, on machine integers
/// (no allocation; Canonne, Kamath & Steinke 2020, Algorithm 2): the same output from the
/// same random bits as the arbitrary-precision path.
pub fn discrete_laplace_u64<R: Rng + ?Sized>(rng: &mut R, t: u64, s: u64) -> Result<i128> {
    if t == 0 {
        return Err(CoreError::invalid("scale", 0, "must be > 0"));
    }
    if s == 0 {
        return Err(CoreError::invalid("denominator", 0, "must be > 0"));
    }
    loop {
        let u = uniform_below_u64(rng, t);
        if !bernoulli_exp_neg_unit_u64(rng, u, t) {
            continue;
        }
        let mut v: u64 = 0;
        while bernoulli_exp_neg_one(rng) {
            v += 1;
        }
        // u + t·v < 2¹²⁸ for t, v < 2⁶⁴
        let x = u as u128 + t as u128 * v as u128;
        let y = x / s as u128;
        let negative = rng.next_u32() & 1 == 1;
        if negative && y == 0 {
            continue;
        }
        let y = i128::try_from(y)
            .map_err(|_| CoreError::Numerical("discrete Laplace draw out of range".into()))?;
        return Ok(if negative { -y } else { y });
    }
}

/// A source of exact uniform draws that takes from the random generator only the bits it
/// needs: a uniform integer below n uses ⌈log₂ n⌉ bits per try, where [`uniform_below_u64`]
/// uses a 64-bit word. Bits left in the buffer when a request needs more are discarded; the
/// bits handed out are never reused, so every draw is independent and exactly uniform.
pub struct BitSource<'a, R: Rng + ?Sized> {
    rng: &'a mut R,
    buf: u64,
    left: u32,
}

impl<'a, R: Rng + ?Sized> BitSource<'a, R> {
    /// A source over `rng` with an empty buffer.
    pub fn new(rng: &'a mut R) -> Self {
        BitSource {
            rng,
            buf: 0,
            left: 0,
        }
    }

    /// The generator (for whole 64-bit words).
    pub fn rng(&mut self) -> &mut R {
        self.rng
    }

    /// `n` uniform bits, 1 ≤ n ≤ 64.
    #[inline]
    pub fn bits(&mut self, n: u32) -> u64 {
        debug_assert!((1..=64).contains(&n));
        if n > self.left {
            self.buf = self.rng.next_u64();
            self.left = 64;
        }
        let v = if n == 64 {
            self.buf
        } else {
            self.buf & ((1u64 << n) - 1)
        };
        self.buf = self.buf.checked_shr(n).unwrap_or(0);
        self.left -= n;
        v
    }

    /// A uniform integer in [0, n), n ≥ 1 (rejection from ⌈log₂ n⌉ bits; exact).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n >= 1);
        if n == 1 {
            return 0;
        }
        let k = 64 - (n - 1).leading_zeros();
        loop {
            let v = self.bits(k);
            if v < n {
                return v;
            }
        }
    }

    /// Bernoulli(num/2ᵏ) for num < 2ᵏ, 1 ≤ k ≤ 128: a uniform k-bit integer compared with num
    /// from the most significant bits down, 16 at a time, stopping at the first difference.
    #[inline]
    pub fn below_dyadic(&mut self, num: u128, k: u32) -> bool {
        debug_assert!((1..=128).contains(&k) && (k == 128 || num >> k == 0));
        let mut rest = k;
        while rest > 0 {
            let c = rest.min(16);
            rest -= c;
            let w = self.bits(c) as u128;
            let d = (num >> rest) & ((1u128 << c) - 1);
            if w != d {
                return w < d;
            }
        }
        false
    }

    /// A coin of probability exp(−1) (Canonne, Kamath & Steinke 2020, Algorithm 1 with
    /// γ = 1).
    #[inline]
    pub fn exp_neg_one(&mut self) -> bool {
        let mut k: u64 = 1;
        while self.below(k) == 0 {
            k += 1;
        }
        k % 2 == 1
    }

    /// A coin of probability exp(−num/2ᵏ) for num < 2ᵏ (Canonne, Kamath & Steinke 2020,
    /// Algorithm 1 with Bernoulli(γ/K) = Bernoulli(1/K)·Bernoulli(num/2ᵏ)).
    #[inline]
    pub fn exp_neg_dyadic(&mut self, num: u128, k: u32) -> bool {
        let mut j: u64 = 1;
        while self.below(j) == 0 && self.below_dyadic(num, k) {
            j += 1;
        }
        j % 2 == 1
    }

    /// One draw of the discrete Laplace distribution with the dyadic scale 2ᵏ/s
    /// (1 ≤ k ≤ 63, s ≥ 1): P(Z = z) ∝ exp(−|z|·s/2ᵏ) (Canonne, Kamath & Steinke 2020,
    /// Algorithm 2 with t = 2ᵏ: U is k uniform bits and the coin exp(−U/t) compares bits
    /// lazily).
    pub fn discrete_laplace_dyadic(&mut self, k: u32, s: u64) -> Result<i64> {
        if !(1..=63).contains(&k) || s == 0 {
            return Err(CoreError::invalid(
                "dyadic scale",
                format!("2^{k}/{s}"),
                "needs 1 <= k <= 63 and s >= 1",
            ));
        }
        loop {
            let u = self.bits(k);
            if !self.exp_neg_dyadic(u as u128, k) {
                continue;
            }
            let mut v: u64 = 0;
            while self.exp_neg_one() {
                v += 1;
            }
            // u + 2ᵏ·v < 2¹²⁸ for v < 2⁶⁴
            let x = u as u128 + ((v as u128) << k);
            let y = match u64::try_from(x) {
                Ok(x) => (x / s) as u128,
                Err(_) => x / s as u128,
            };
            let negative = self.bits(1) == 1;
            if negative && y == 0 {
                continue;
            }
            let y = i64::try_from(y)
                .map_err(|_| CoreError::Numerical("discrete Laplace draw out of range".into()))?;
            return Ok(if negative { -y } else { y });
        }
    }
}

/// The arbitrary-precision path of [`discrete_laplace`].
fn discrete_laplace_big<R: Rng + ?Sized>(rng: &mut R, scale: &Rational) -> Result<BigInt> {
    if scale.num.is_zero() {
        return Err(CoreError::invalid("scale", 0, "must be > 0"));
    }
    let (t, s) = (&scale.num, &scale.den);
    let one = Rational::integer(1u32);
    loop {
        let u = uniform_below(rng, t);
        let d = Rational {
            num: u.clone(),
            den: t.clone(),
        };
        if !bernoulli_exp_neg(rng, &d) {
            continue;
        }
        let mut v = BigUint::zero();
        while bernoulli_exp_neg_unit(rng, &one) {
            v += 1u32;
        }
        let x = u + t * v;
        let y = x / s;
        let negative = rng.next_u32() & 1 == 1;
        if negative && y.is_zero() {
            continue;
        }
        let sign = if negative { Sign::Minus } else { Sign::Plus };
        return Ok(BigInt::from_biguint(sign, y));
    }
}

/// One draw of the discrete Gaussian on the integers with rational variance parameter
/// σ² > 0: P(Z = z) ∝ exp(−z²/(2σ²)) (Canonne, Kamath & Steinke 2020, Algorithm 3; exact):
/// t = ⌊σ⌋ + 1, Y ~ discrete Laplace with scale t, accepted with probability
/// exp(−(|Y| − σ²/t)²/(2σ²)).
pub fn discrete_gaussian<R: Rng + ?Sized>(rng: &mut R, sigma2: &Rational) -> Result<BigInt> {
    if sigma2.num.is_zero() {
        return Err(CoreError::invalid("sigma^2", 0, "must be > 0"));
    }
    let (a, b) = (&sigma2.num, &sigma2.den);
    // ⌊σ⌋ = ⌊√⌊σ²⌋⌋ (the square root is monotone and integral at squares)
    let t = (a / b).sqrt() + 1u32;
    let scale = Rational::integer(t.clone());
    let two_a_b_t2 = BigUint::from(2u32) * a * b * &t * &t;
    let bt = BigInt::from(b * &t);
    let a_signed = BigInt::from(a.clone());
    loop {
        let y = discrete_laplace(rng, &scale)?;
        // (|Y| − a/(bt))² / (2a/b) = (|Y|·b·t − a)² / (2·a·b·t²)
        let diff = y.abs() * &bt - &a_signed;
        let gamma = Rational {
            num: diff.magnitude() * diff.magnitude(),
            den: two_a_b_t2.clone(),
        };
        if bernoulli_exp_neg(rng, &gamma) {
            return Ok(y);
        }
    }
}

/// The exact gaps γ_r = β·(q* − q_r) ≥ 0 of finite scores at a finite β ≥ 0 (errors name the
/// bad input, as the floating-point selections do).
pub fn selection_gaps<T: Copy + Into<f64>>(scores: &[T], beta: f64) -> Result<Vec<Rational>> {
    if !(beta.is_finite() && beta >= 0.0) {
        return Err(CoreError::invalid(
            "beta",
            beta,
            "must be a finite number >= 0",
        ));
    }
    if scores.is_empty() {
        return Err(CoreError::invalid(
            "scores",
            "[]",
            "must hold at least one class",
        ));
    }
    let q: Vec<f64> = scores.iter().map(|&s| s.into()).collect();
    if q.iter().any(|v| !v.is_finite()) {
        return Err(CoreError::invalid("scores", "non-finite", "must be finite"));
    }
    let top = q.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let (mt, et) = dyadic(top);
    let (mb, eb) = dyadic(beta);
    Ok(q.iter()
        .map(|&v| {
            let (mv, ev) = dyadic(v);
            let e = et.min(ev);
            let gap = (&mt << ((et - e) as u64)) - (mv << ((ev - e) as u64));
            let prod = gap * &mb;
            debug_assert!(!prod.is_negative());
            from_dyadic(prod.magnitude().clone(), e + eb)
        })
        .collect())
}

/// One exact draw of the exponential mechanism P(r) ∝ exp(β·q_r): a uniform candidate,
/// accepted with probability exp(−β·(q* − q_r)), repeated until one is accepted (see the
/// module documentation).
pub fn exponential_mechanism<R: Rng + ?Sized, T: Copy + Into<f64>>(
    rng: &mut R,
    scores: &[T],
    beta: f64,
) -> Result<usize> {
    let coins: Vec<ExpCoin> = selection_gaps(scores, beta)?
        .into_iter()
        .map(ExpCoin::new)
        .collect();
    loop {
        let r = uniform_index(rng, coins.len());
        if coins[r].is_certain() || coins[r].flip(rng) {
            return Ok(r);
        }
    }
}

/// One exact draw of permute-and-flip (McKenna & Sheldon 2020, Algorithm 1): the candidates in
/// a uniformly random order (Fisher–Yates from exact uniform indices, drawn lazily), each
/// accepted with probability exp(−β·(q* − q_r)); the first accepted one is returned.
pub fn permute_and_flip<R: Rng + ?Sized, T: Copy + Into<f64>>(
    rng: &mut R,
    scores: &[T],
    beta: f64,
) -> Result<usize> {
    let gaps = selection_gaps(scores, beta)?;
    let n = gaps.len();
    let mut order: Vec<usize> = (0..n).collect();
    for i in 0..n {
        let j = i + uniform_index(rng, n - i);
        order.swap(i, j);
        let r = order[i];
        if gaps[r].is_zero() || ExpCoin::new(gaps[r].clone()).flip(rng) {
            return Ok(r);
        }
    }
    // unreachable: a maximum (γ = 0) is always accepted
    Err(CoreError::Numerical(
        "permute-and-flip accepted no candidate".into(),
    ))
}

#[cfg(test)]
mod tests;
