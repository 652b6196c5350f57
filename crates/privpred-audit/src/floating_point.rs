//! The floating-point audit: a reachability attack in the style of Mironov ("On significance
//! of the least significant bits for differential privacy", CCS 2012) against the samplers
//! privpred answers with, and a measurement of the timing channel (Jin et al., "Are we there
//! yet? Timing and floating-point attacks on differential privacy systems", S&P 2022).
//!
//! **The attack.** A release y is drawn from an input x; the attacker knows the sampler and a
//! neighbouring input x′ and asks whether x′ could have produced y's exact bits. A draw that x′
//! cannot produce tells x from x′ with certainty, whatever ε the calibration claims; the
//! distinguishing advantage is the fraction of such draws, reported with its one-sided
//! Clopper–Pearson upper bound. Every draw must be reachable from x itself (a check that the
//! attack's inversion is sound: a row whose self-check fails is not evidence of anything).
//!
//! **Rows.** A textbook Laplace sampler x + b·ln(u)·(±1) with u = k·2⁻⁵³ is kept as a
//! reference (privpred does not use it): the attack finds its leak. The selections every
//! released label is drawn with (exponential mechanism and permute-and-flip, over teachers'
//! votes and over logits) are drawn by `privpred_core::exact`: a label is reachable from x′
//! exactly when its probability under x′ is positive, which holds for every label (its exact
//! coin exp(−β·gap) is a positive rational's exponential); the row also counts draws whose
//! label x′ gives probability 0. The additive f64 releases of numbers (noisy logits with
//! ℓ2-Laplace or Gaussian noise, released as fl(x + n)) are checked coordinate by coordinate for
//! a double n with fl(x′ᵢ + n) = yᵢ: a coordinate no double reaches is a sound find (the leak is
//! real, whatever the sampler drew), but the test does not invert the samplers' own
//! floating-point image, so a zero there would not show exactness.
//!
//! **Timing.** For each selection the mean time of a draw from x and from x′ is measured
//! (interleaved batches), with the z-score of their difference, and the spread of the mean time
//! across the drawn labels (the noise), as the largest z-score of a label's mean time against
//! the overall mean.

use crate::stats::clopper_pearson_upper;
use privpred_core::exact::selection_gaps;
use privpred_core::noise::{sample_exponential_mechanism, seeded_rng};
use privpred_core::select::sample_permute_and_flip;
use privpred_core::{Noise, PrivRng};
use rand::Rng;
use rand_distr::{Distribution, StandardNormal};
use serde::Serialize;
use std::time::Instant;

/// What the audit says of one sampler.
#[derive(Clone, Debug, Serialize)]
pub struct FloatingPointRow {
    /// The sampler and the release it makes.
    pub mechanism: String,
    /// Whether privpred releases with this sampler (the textbook reference is not).
    pub shipped: bool,
    /// Whether the sampler is exact (integer arithmetic from random bits to the output).
    pub exact: bool,
    /// Draws from x.
    pub draws: u64,
    /// Draws from x that x′ cannot produce (each identifies x with certainty).
    pub unreachable: u64,
    /// Draws from x that the attack could not reproduce from x itself (must be 0).
    pub self_check_failures: u64,
    /// unreachable / draws.
    pub advantage: f64,
    /// One-sided Clopper–Pearson upper bound on the advantage at the audit's confidence.
    pub advantage_upper: f64,
    /// Whether a zero advantage is evidence (false: the test does not invert the sampler).
    pub conclusive: bool,
    /// The timing channel, for the selections.
    pub timing: Option<Timing>,
}

/// Mean draw times and what they reveal.
#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    /// Mean nanoseconds per draw from x.
    pub mean_ns_d: f64,
    /// Mean nanoseconds per draw from x′.
    pub mean_ns_d_prime: f64,
    /// z-score of the difference of the two means.
    pub z_inputs: f64,
    /// The largest z-score of a drawn label's mean time against the overall mean (how much the
    /// time reveals the noise drawn).
    pub z_labels: f64,
}

impl Timing {
    /// The timing columns from draw times under x and x′ and the draws from x grouped by what
    /// was drawn (a label, or a quartile of the noise): the groups' largest z-score (groups of
    /// at least 30) is against the mean of all grouped draws.
    fn summarise(times_d: &[f64], times_dp: &[f64], groups: &[Vec<f64>]) -> Timing {
        let ((md, sd), (mdp, sdp)) = (mean_se(times_d), mean_se(times_dp));
        let all: Vec<f64> = groups.iter().flatten().copied().collect();
        let (m_all, _) = mean_se(&all);
        let z_labels = groups
            .iter()
            .filter(|v| v.len() >= 30)
            .map(|v| {
                let (m, se) = mean_se(v);
                ((m - m_all) / se.max(1e-9)).abs()
            })
            .fold(0.0, f64::max);
        Timing {
            mean_ns_d: md,
            mean_ns_d_prime: mdp,
            z_inputs: (md - mdp) / (sd * sd + sdp * sdp).sqrt().max(1e-9),
            z_labels,
        }
    }
}

/// The audit's settings.
#[derive(Clone, Copy, Debug)]
pub struct FloatingPointAudit {
    /// Draws per row.
    pub draws: u64,
    /// Seed of the draws (audits are experiments).
    pub seed: u64,
    /// Confidence of the upper bounds, in (0, 1).
    pub confidence: f64,
}

impl Default for FloatingPointAudit {
    fn default() -> Self {
        FloatingPointAudit {
            draws: 100_000,
            seed: 0,
            confidence: 0.95,
        }
    }
}

/// A textbook floating-point Laplace sampler, kept as the audit's reference (privpred does not
/// use it): x + s·b·ln(u), s a random sign, u = k·2⁻⁵³ with k uniform in 1..=2⁵³.
pub fn textbook_laplace<R: Rng + ?Sized>(rng: &mut R, x: f64, b: f64) -> f64 {
    let k = (rng.next_u64() >> 11) + 1;
    let sign = if rng.next_u32() & 1 == 1 { -1.0 } else { 1.0 };
    x + sign * b * (k as f64 * 2f64.powi(-53)).ln()
}

/// Whether [`textbook_laplace`] at input x can return exactly y: the noise y − x is inverted to
/// u ≈ exp(±(y − x)/b), and the 2⁻⁵³ grid points around it are tried with the sampler's own
/// operations.
pub fn textbook_laplace_reaches(y: f64, x: f64, b: f64) -> bool {
    const WINDOW: i64 = 64;
    let scale = 2f64.powi(53);
    for sign in [1.0, -1.0] {
        let t = sign * (y - x) / b;
        if t > 1e-9 {
            continue;
        }
        let centre = (t.min(0.0).exp() * scale).round() as i64;
        for k in (centre - WINDOW).max(1)..=(centre + WINDOW).min(1i64 << 53) {
            if x + sign * b * (k as f64 * 2f64.powi(-53)).ln() == y {
                return true;
            }
        }
    }
    false
}

fn row(
    mechanism: &str,
    shipped: bool,
    exact: bool,
    counts: (u64, u64, u64),
    conclusive: bool,
    timing: Option<Timing>,
    alpha: f64,
) -> FloatingPointRow {
    let (draws, unreachable, self_fail) = counts;
    FloatingPointRow {
        mechanism: mechanism.to_string(),
        shipped,
        exact,
        draws,
        unreachable,
        self_check_failures: self_fail,
        advantage: unreachable as f64 / draws as f64,
        advantage_upper: clopper_pearson_upper(unreachable, draws, alpha),
        conclusive,
        timing,
    }
}

fn textbook_row(a: &FloatingPointAudit, rng: &mut PrivRng, alpha: f64) -> FloatingPointRow {
    let (x, x_prime, b) = (0.0, 1.0, 1.0);
    let (mut unreachable, mut self_fail) = (0, 0);
    for _ in 0..a.draws {
        let y = textbook_laplace(rng, x, b);
        if !textbook_laplace_reaches(y, x, b) {
            self_fail += 1;
        }
        if !textbook_laplace_reaches(y, x_prime, b) {
            unreachable += 1;
        }
    }
    row(
        "textbook Laplace x + b·ln(u), 53-bit u (reference, not used by privpred)",
        false,
        false,
        (a.draws, unreachable, self_fail),
        true,
        None,
        alpha,
    )
}

/// A worst-case pair of score vectors for a selection: `x` and its neighbour.
struct SelectionPair {
    name: &'static str,
    x: Vec<f64>,
    x_prime: Vec<f64>,
    noise: Noise,
}

fn selection_pairs() -> Vec<SelectionPair> {
    // 256 teachers, 10 classes; replace-one moves one vote from one class to another; the
    // exponential mechanism's β = ε/2 at ε = 1 (sensitivity 1 per vote count)
    let votes = vec![181.0, 40.0, 12.0, 9.0, 5.0, 3.0, 3.0, 2.0, 1.0, 0.0];
    let mut votes_prime = votes.clone();
    votes_prime[0] -= 1.0;
    votes_prime[1] += 1.0;
    // 10 logits; the neighbour's move is within the calibrated range Δ (here 0.1)
    let logits = vec![2.31, -0.7, 0.05, 1.9, -3.2, 0.4, 0.41, -1.0, 2.0, 0.0];
    let logits_prime: Vec<f64> = logits
        .iter()
        .enumerate()
        .map(|(i, v)| if i % 2 == 0 { v + 0.05 } else { v - 0.05 })
        .collect();
    vec![
        SelectionPair {
            name: "exponential mechanism over 256 teachers' votes (exact)",
            x: votes.clone(),
            x_prime: votes_prime.clone(),
            noise: Noise::Exponential { beta: 0.5 },
        },
        SelectionPair {
            name: "permute-and-flip over 256 teachers' votes (exact)",
            x: votes,
            x_prime: votes_prime,
            noise: Noise::PermuteAndFlip { beta: 0.5 },
        },
        SelectionPair {
            name: "exponential mechanism over 10 logits (exact)",
            x: logits.clone(),
            x_prime: logits_prime.clone(),
            noise: Noise::Exponential { beta: 5.0 },
        },
        SelectionPair {
            name: "permute-and-flip over 10 logits (exact)",
            x: logits,
            x_prime: logits_prime,
            noise: Noise::PermuteAndFlip { beta: 5.0 },
        },
    ]
}

fn draw(p: &SelectionPair, rng: &mut PrivRng, prime: bool) -> usize {
    let scores = if prime { &p.x_prime } else { &p.x };
    match p.noise {
        Noise::Exponential { beta } => sample_exponential_mechanism(rng, scores, beta),
        Noise::PermuteAndFlip { beta } => sample_permute_and_flip(rng, scores, beta),
        _ => unreachable!("selection pairs hold selections only"),
    }
    .expect("the audit's fixed scores are valid")
}

/// Mean and standard error of a sample.
fn mean_se(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|t| (t - m).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (m, (var / n).sqrt())
}

fn selection_row(
    p: &SelectionPair,
    a: &FloatingPointAudit,
    rng: &mut PrivRng,
    alpha: f64,
) -> FloatingPointRow {
    let beta = match p.noise {
        Noise::Exponential { beta } | Noise::PermuteAndFlip { beta } => beta,
        _ => unreachable!("selection pairs hold selections only"),
    };
    // support under each input: a label is reachable iff its exact coin is a finite rational's
    // exp(−γ) > 0, i.e. iff selection_gaps succeeds (every gap is then finite)
    let support = |s: &[f64]| selection_gaps(s, beta).map(|g| vec![true; g.len()]);
    let (sx, sxp) = (
        support(&p.x).expect("valid scores"),
        support(&p.x_prime).expect("valid scores"),
    );
    // batches of 64 draws, alternating x and x′, timed per batch
    const BATCH: u64 = 64;
    let batches = (a.draws / BATCH).max(2);
    let (mut times_d, mut times_dp) = (Vec::new(), Vec::new());
    let mut per_label: Vec<Vec<f64>> = vec![Vec::new(); p.x.len()];
    let (mut unreachable, mut self_fail) = (0, 0);
    for _ in 0..batches {
        let t = Instant::now();
        let mut labels = [0usize; BATCH as usize];
        for l in labels.iter_mut() {
            *l = draw(p, rng, false);
        }
        times_d.push(t.elapsed().as_nanos() as f64 / BATCH as f64);
        for &l in &labels {
            if !sxp[l] {
                unreachable += 1;
            }
            if !sx[l] {
                self_fail += 1;
            }
        }
        let t = Instant::now();
        for _ in 0..BATCH {
            draw(p, rng, true);
        }
        times_dp.push(t.elapsed().as_nanos() as f64 / BATCH as f64);
        // one draw timed alone, by the label it gave
        let t = Instant::now();
        let l = draw(p, rng, false);
        per_label[l].push(t.elapsed().as_nanos() as f64);
    }
    let timing = Timing::summarise(&times_d, &times_dp, &per_label);
    row(
        p.name,
        true,
        true,
        (batches * BATCH, unreachable, self_fail),
        true,
        Some(timing),
        alpha,
    )
}

/// Whether some double v gives fl(a + v) = y. fl(a + v) is non-decreasing in v, so the v that
/// give y form an interval of doubles: the search brackets y between fl(a + v) and
/// fl(a + next_up(v)) near v = fl(y − a). Undecided (not bracketed in a few steps) counts as
/// reachable, so a `false` is always sound.
pub fn additive_reaches(y: f64, a: f64) -> bool {
    let mut v = y - a;
    for _ in 0..8 {
        if a + v < y {
            v = v.next_up();
        } else {
            break;
        }
    }
    for _ in 0..16 {
        if a + v > y {
            v = v.next_down();
        } else {
            break;
        }
    }
    // unreachable exactly when y is bracketed strictly: fl(a + v) < y < fl(a + next_up(v));
    // anything else (a hit, or a search that ran out) counts as reachable
    !(a + v < y && a + v.next_up() > y)
}

/// The additive f64 releases of noisy logits y = fl(x + n): a coordinate yᵢ that no double n
/// turns x′ᵢ into identifies x (the release is computed as fl(x + n), whatever the sampler
/// drew). The logits include a 0, as a zero query's logits are: y there carries the noise's
/// full precision, which no nonzero x′ᵢ reproduces near 0. A found leak is conclusive; a zero
/// would not be, as the samplers' own image is not inverted.
fn additive_row(
    name: &str,
    noise: Noise,
    a: &FloatingPointAudit,
    rng: &mut PrivRng,
    alpha: f64,
) -> FloatingPointRow {
    let add = |rng: &mut PrivRng, y: &mut [f64]| {
        noise
            .add_to(rng, y)
            .expect("the audit's fixed noise is valid")
    };
    additive_row_with(name, true, add, a, rng, alpha)
}

/// [`additive_row`] for a noise given as the operation that adds it in place; `released`
/// says whether privpred releases the noisy values themselves.
fn additive_row_with(
    name: &str,
    released: bool,
    mut add: impl FnMut(&mut PrivRng, &mut [f64]),
    a: &FloatingPointAudit,
    rng: &mut PrivRng,
    alpha: f64,
) -> FloatingPointRow {
    let x = [2.31, -0.7, 0.05, 1.9, -3.2, 0.4, 0.41, -1.0, 2.0, 0.0];
    let x_prime: Vec<f64> = x.iter().map(|v| v + 0.05).collect();
    let reaches = |y: f64, from: f64| additive_reaches(y, from);
    let (mut unreachable, mut self_fail) = (0, 0);
    for _ in 0..a.draws {
        let mut y = x.to_vec();
        add(rng, &mut y);
        if !y.iter().zip(&x_prime).all(|(&yi, &xi)| reaches(yi, xi)) {
            unreachable += 1;
        }
        if !y.iter().zip(&x).all(|(&yi, &xi)| reaches(yi, xi)) {
            self_fail += 1;
        }
    }
    row(
        name,
        released,
        false,
        (a.draws, unreachable, self_fail),
        unreachable > 0,
        None,
        alpha,
    )
}

/// Whether the grid release of `privpred_core::grid` can return y from some input: exactly
/// when y is m·g for an integer m with |m| ≤ 2⁵³ (the released double of the integer
/// round(x/g) + Z, Z a discrete Gaussian, which gives every integer positive probability).
/// The set does not depend on the input, so this is also the answer for x′: the test inverts
/// the sampler's whole image, and a zero advantage is conclusive.
pub fn grid_reaches(y: f64, g: f64) -> bool {
    let m = y / g;
    m.is_finite() && m.fract() == 0.0 && m.abs() <= 2f64.powi(53)
}

/// The noisy logits on the grid with exact discrete Gaussian noise, as shipped for δ > 0: every
/// coordinate of every draw must be a grid point (self-check) and is then reachable from x′.
fn grid_row(a: &FloatingPointAudit, rng: &mut PrivRng, alpha: f64) -> FloatingPointRow {
    let x = [2.31, -0.7, 0.05, 1.9, -3.2, 0.4, 0.41, -1.0, 2.0, 0.0];
    // σ and r of a calibration at Δ = 0.1: r = Δ/1024
    let (sigma, rounding) = (0.5, 0.1 / 1024.0);
    let noise = Noise::DiscreteGaussian { sigma, rounding };
    let k = privpred_core::grid::grid_log2(rounding, x.len()).expect("valid allowance");
    let g = 2f64.powi(k);
    let (mut unreachable, mut self_fail) = (0, 0);
    for _ in 0..a.draws {
        let mut y = x.to_vec();
        noise
            .add_to(rng, &mut y)
            .expect("the audit's fixed noise is valid");
        // the image is the same set of grid points from x and from x′
        if !y.iter().all(|&yi| grid_reaches(yi, g)) {
            self_fail += 1;
            unreachable += 1;
        }
    }
    row(
        "noisy logits and weights, discrete Gaussian on a power-of-two grid (exact)",
        true,
        true,
        (a.draws, unreachable, self_fail),
        true,
        None,
        alpha,
    )
}

/// The noisy logits on the grid with exact lattice ℓ2-Laplace noise, as shipped for δ = 0
/// (`privpred_core::lattice`): every coordinate of every draw must be a grid point
/// (self-check; the image is all of the grid from any input, as every lattice point has
/// positive probability), so the inversion covers the sampler's whole image and a zero
/// advantage is conclusive. Timing: draws from x and from x′ alternate, each timed alone;
/// the draws from x are also grouped by the quartile of the noise's norm ‖y − x‖₂ (the
/// noise drawn), and the largest z-score of a group's mean time against the overall mean
/// is reported.
fn lattice_row(a: &FloatingPointAudit, rng: &mut PrivRng, alpha: f64) -> FloatingPointRow {
    let x = [2.31, -0.7, 0.05, 1.9, -3.2, 0.4, 0.41, -1.0, 2.0, 0.0];
    let x_prime: Vec<f64> = x.iter().map(|v| v + 0.05).collect();
    // β and r of a calibration at Δ = 0.1, ε = 2: β = ε/(Δ + r), r = Δ/1024
    let rounding = 0.1 / 1024.0;
    let noise = Noise::DiscreteL2Laplace {
        beta: 2.0 / (0.1 + rounding),
        rounding,
    };
    let k = privpred_core::grid::grid_log2(rounding, x.len()).expect("valid allowance");
    let g = 2f64.powi(k);
    let (mut unreachable, mut self_fail) = (0, 0);
    let (mut times_d, mut times_dp, mut norms) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..a.draws {
        for prime in [false, true] {
            let mut y = if prime { x_prime.clone() } else { x.to_vec() };
            let t = Instant::now();
            noise
                .add_to(rng, &mut y)
                .expect("the audit's fixed noise is valid");
            let ns = t.elapsed().as_nanos() as f64;
            if prime {
                times_dp.push(ns);
                continue;
            }
            times_d.push(ns);
            norms.push(y.iter().zip(&x).map(|(a, b)| (a - b).powi(2)).sum::<f64>());
            if !y.iter().all(|&yi| grid_reaches(yi, g)) {
                self_fail += 1;
                unreachable += 1;
            }
        }
    }
    let mut sorted = norms.clone();
    sorted.sort_by(f64::total_cmp);
    let q = |f: f64| sorted[((sorted.len() - 1) as f64 * f) as usize];
    let cuts = [q(0.25), q(0.5), q(0.75)];
    let mut groups: Vec<Vec<f64>> = vec![Vec::new(); 4];
    for (&t, &n) in times_d.iter().zip(&norms) {
        groups[cuts.iter().filter(|&&c| n > c).count()].push(t);
    }
    let timing = Timing::summarise(&times_d, &times_dp, &groups);
    row(
        "noisy logits, ℓ2-Laplace on a power-of-two grid (exact lattice sampler, δ = 0)",
        true,
        true,
        (a.draws, unreachable, self_fail),
        true,
        Some(timing),
        alpha,
    )
}

/// Runs the floating-point audit: the textbook reference, the four exact selections, the
/// discrete Gaussian and lattice ℓ2-Laplace grid releases and the two f64 additive releases
/// of numbers.
pub fn audit_floating_point(a: &FloatingPointAudit) -> crate::Result<Vec<FloatingPointRow>> {
    crate::stats::check_confidence(a.confidence)?;
    if a.draws < 128 {
        return Err(crate::AuditError::invalid(
            "draws (--trials)",
            a.draws,
            "must be at least 128",
        ));
    }
    let alpha = 1.0 - a.confidence;
    let mut rng = seeded_rng(a.seed);
    let mut rows = vec![textbook_row(a, &mut rng, alpha)];
    for p in selection_pairs() {
        rows.push(selection_row(&p, a, &mut rng, alpha));
    }
    rows.push(grid_row(a, &mut rng, alpha));
    rows.push(lattice_row(a, &mut rng, alpha));
    rows.push(additive_row(
        "ℓ2-Laplace (f64 sampler; model sensitivity's weights at δ = 0 and the paper calibration's noisy logits)",
        Noise::L2Laplace { beta: 2.0 },
        a,
        &mut rng,
        alpha,
    ));
    rows.push(additive_row(
        "noisy logits, Gaussian (f64 sampler; the paper calibration only)",
        Noise::Gaussian { sigma: 0.5 },
        a,
        &mut rng,
        alpha,
    ));
    rows.push(additive_row_with(
        "DP-SGD one step's noisy gradient sum, Gaussian (f64 sampler; not released by itself)",
        false,
        dpsgd_step_noise,
        a,
        &mut rng,
        alpha,
    ));
    Ok(rows)
}

/// The per-step noise of the linear DP-SGD trainer as it computes it
/// (`privpred_linear::dpsgd`): gᵢ + std·z with z a `rand_distr::StandardNormal` f64 draw, at
/// std = σ·ν = 1.1 (a noise multiplier of 1.1 and a clip of 1). The trainer never releases a
/// step's sum (the released θ is the end of the run), so a leak here is what an observer of one
/// step's exact bits could see, not an attack on the released model.
fn dpsgd_step_noise(rng: &mut PrivRng, y: &mut [f64]) {
    let std = 1.1;
    for v in y.iter_mut() {
        let z: f64 = StandardNormal.sample(rng);
        *v += std * z;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    /// The attack finds the textbook sampler's leak (Mironov 2012): many of its outputs at
    /// x = 0 cannot come from x′ = 1, and every output is reproduced from x itself.
    #[test]
    fn the_attack_finds_the_textbook_laplace_leak() {
        let a = FloatingPointAudit {
            draws: 20_000,
            ..Default::default()
        };
        let mut rng = seeded_rng(1);
        let r = textbook_row(&a, &mut rng, 0.05);
        assert_eq!(r.self_check_failures, 0, "the inversion is unsound");
        assert!(r.advantage > 0.2, "advantage {}", r.advantage);
    }

    /// The exact selections give every label positive probability under both inputs: no draw
    /// identifies its input.
    #[test]
    fn exact_selections_have_no_reachability_advantage() {
        let a = FloatingPointAudit {
            draws: 4_096,
            ..Default::default()
        };
        let mut rng = seeded_rng(2);
        for p in selection_pairs() {
            let r = selection_row(&p, &a, &mut rng, 0.05);
            assert_eq!(
                (r.unreachable, r.self_check_failures),
                (0, 0),
                "{}",
                r.mechanism
            );
            assert!(r.advantage_upper < 1e-3, "{}", r.mechanism);
            assert!(r.timing.is_some());
        }
    }

    /// The additive check on hand-made cases: y = fl(a + v) is always reached from a; a value
    /// with bits finer than 0.05's spacing near 0 is not reached from 0.05 (no double v gives
    /// it), and is from 0.
    #[test]
    fn additive_reachability_is_sound_on_known_cases() {
        let mut rng = seeded_rng(3);
        for _ in 0..10_000 {
            let a: f64 = rng.random_range(-4.0..4.0);
            let v: f64 = rng.random_range(-4.0..4.0) * 10f64.powi(rng.random_range(-6..3));
            assert!(additive_reaches(a + v, a), "{a} + {v}");
        }
        let y = 1e-20 + 3e-37;
        assert!(additive_reaches(y, 0.0));
        assert!(!additive_reaches(y, 0.05));
    }

    /// The grid release: every draw is a grid point, so x′ reaches it too (advantage 0 with a
    /// conclusive bound); a value off the grid is recognised as unreachable.
    #[test]
    fn grid_release_has_no_reachability_advantage() {
        let a = FloatingPointAudit {
            draws: 4_096,
            ..Default::default()
        };
        let mut rng = seeded_rng(4);
        let r = grid_row(&a, &mut rng, 0.05);
        assert_eq!((r.unreachable, r.self_check_failures), (0, 0));
        assert!(r.conclusive && r.exact && r.advantage_upper < 1e-3);
        assert!(grid_reaches(3.0 * 2f64.powi(-20), 2f64.powi(-20)));
        assert!(!grid_reaches(3.5 * 2f64.powi(-20), 2f64.powi(-20)));
        assert!(!grid_reaches(f64::NAN, 1.0));
    }

    /// The lattice release: every draw is a grid point, so x′ reaches it too (advantage 0
    /// with a conclusive bound), and the timing is measured.
    #[test]
    fn lattice_release_has_no_reachability_advantage() {
        let a = FloatingPointAudit {
            draws: 4_096,
            ..Default::default()
        };
        let mut rng = seeded_rng(5);
        let r = lattice_row(&a, &mut rng, 0.05);
        assert_eq!((r.unreachable, r.self_check_failures), (0, 0));
        assert!(r.conclusive && r.exact && r.advantage_upper < 1e-3);
        assert!(r.timing.is_some_and(|t| t.mean_ns_d > 0.0));
    }

    #[test]
    fn too_few_draws_is_an_error() {
        let a = FloatingPointAudit {
            draws: 10,
            ..Default::default()
        };
        assert!(audit_floating_point(&a).is_err());
    }
}
