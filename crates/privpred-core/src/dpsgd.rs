//! DP-SGD accounting: the schedule (q, steps), the ε spent under each accountant, and the
//! noise-multiplier search that never overshoots the target ε.

use crate::error::{CoreError, Result};
use crate::pld::{pld_epsilon, pld_epsilon_neighbours};
use crate::rdp::rdp_epsilon;
use crate::types::Neighbours;
use serde::{Deserialize, Serialize};

/// Which accountant bounds the ε of DP-SGD.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Accountant {
    /// Rényi DP of the sampled Gaussian (Mironov, Talwar & Zhang 2019), the smaller of the
    /// classic and improved conversions.
    #[default]
    Rdp,
    /// RDP with the classic conversion only (the paper's reference code, via TF-Privacy).
    RdpClassic,
    /// Privacy-loss distribution (pessimistic discretisation, FFT composition).
    Pld,
    /// The smaller of RDP and PLD (both are valid upper bounds).
    Best,
}

impl Accountant {
    /// The kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            Accountant::Rdp => "rdp",
            Accountant::RdpClassic => "rdp-classic",
            Accountant::Pld => "pld",
            Accountant::Best => "best",
        }
    }
}

/// A DP-SGD schedule as the user states it: expected batch size b and epochs. With the
/// training-set size N it gives q = b/N and steps = ⌈epochs·N/b⌉ ([`DpSgdSchedule::steps`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DpSgdSchedule {
    /// Expected batch size b (Poisson sampling with q = b/N).
    pub batch_size: usize,
    /// Number of epochs (may be fractional).
    pub epochs: f64,
}

impl DpSgdSchedule {
    /// (q, steps) = (b/N, ⌈epochs·N/b⌉), the contract (as in TF-Privacy).
    pub fn steps(&self, n: usize) -> Result<SampledSteps> {
        SampledSteps::from_epochs(n, self.batch_size, self.epochs)
    }
}

/// The accountant's view of a DP-SGD run: Poisson sampling rate q and number of steps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SampledSteps {
    /// q ∈ (0, 1].
    pub sampling_rate: f64,
    /// Number of noisy steps.
    pub steps: u64,
}

impl SampledSteps {
    /// Validated (q, steps).
    pub fn new(sampling_rate: f64, steps: u64) -> Result<Self> {
        if !(sampling_rate.is_finite() && sampling_rate > 0.0 && sampling_rate <= 1.0) {
            return Err(CoreError::invalid(
                "sampling-rate",
                sampling_rate,
                "must be in (0, 1]",
            ));
        }
        if steps == 0 {
            return Err(CoreError::invalid(
                "steps",
                steps,
                "must be an integer >= 1",
            ));
        }
        Ok(SampledSteps {
            sampling_rate,
            steps,
        })
    }

    /// q = b/N and steps = ⌈epochs·N/b⌉.
    pub fn from_epochs(n: usize, batch_size: usize, epochs: f64) -> Result<Self> {
        if n == 0 {
            return Err(CoreError::invalid("n", n, "must be an integer >= 1"));
        }
        if batch_size == 0 || batch_size > n {
            return Err(CoreError::invalid(
                "batch-size",
                batch_size,
                format!("must be in [1, N = {n}]"),
            ));
        }
        if !(epochs.is_finite() && epochs > 0.0) {
            return Err(CoreError::invalid(
                "epochs",
                epochs,
                "must be a finite number > 0",
            ));
        }
        let steps = (epochs * n as f64 / batch_size as f64).ceil();
        if steps > 1e12 {
            return Err(CoreError::invalid(
                "epochs",
                epochs,
                "gives more than 1e12 steps",
            ));
        }
        Self::new(batch_size as f64 / n as f64, steps as u64)
    }
}

/// ε spent by DP-SGD with noise multiplier σ under `accountant`, for the neighbouring
/// relation `neighbours` (docs/guarantees.md#neighbouring-relations).
///
/// - `add-remove`: [`dpsgd_epsilon`] (RDP: Mironov, Talwar & Zhang 2019; PLD: both
///   directions of the add/remove pair).
/// - `replace-one`: the PLD accountant of the replace-one dominating pair
///   (1−q)N(0,σ²) + qN(1,σ²) vs (1−q)N(0,σ²) + qN(−1,σ²) ([`pld_epsilon_neighbours`], whose
///   doc comment proves the domination) for `pld` and `best`. The RDP accountants here are
///   add/remove bounds and are refused under replace-one (an error, never the add/remove
///   number relabelled).
pub fn dpsgd_epsilon_neighbours(
    schedule: &SampledSteps,
    sigma: f64,
    delta: f64,
    accountant: Accountant,
    neighbours: Neighbours,
) -> Result<f64> {
    match neighbours {
        Neighbours::AddRemove => dpsgd_epsilon(schedule, sigma, delta, accountant),
        Neighbours::ReplaceOne => match accountant {
            Accountant::Pld | Accountant::Best => pld_epsilon_neighbours(
                schedule.sampling_rate,
                sigma,
                schedule.steps,
                delta,
                Neighbours::ReplaceOne,
            ),
            Accountant::Rdp | Accountant::RdpClassic => Err(replace_one_rdp_error(accountant)),
        },
    }
}

/// The error for an RDP accountant asked for a replace-one guarantee.
pub fn replace_one_rdp_error(accountant: Accountant) -> CoreError {
    CoreError::Unsupported(format!(
        "the {} accountant bounds add-remove neighbours only; for replace-one neighbours use --accountant pld (the replace-one PLD accountant) or --neighbours add-remove",
        accountant.name()
    ))
}

/// ε spent by DP-SGD with noise multiplier σ under `accountant` (add/remove neighbours).
pub fn dpsgd_epsilon(
    schedule: &SampledSteps,
    sigma: f64,
    delta: f64,
    accountant: Accountant,
) -> Result<f64> {
    let (q, k) = (schedule.sampling_rate, schedule.steps);
    match accountant {
        Accountant::Rdp => Ok(rdp_epsilon(q, sigma, k, delta)?.epsilon),
        Accountant::RdpClassic => Ok(rdp_epsilon(q, sigma, k, delta)?.classic),
        Accountant::Pld => pld_epsilon(q, sigma, k, delta),
        Accountant::Best => {
            let r = rdp_epsilon(q, sigma, k, delta)?.epsilon;
            match pld_epsilon(q, sigma, k, delta) {
                Ok(p) => Ok(r.min(p)),
                Err(_) => Ok(r),
            }
        }
    }
}

/// The smallest σ the noise-multiplier search evaluates. The accountants' cost grows as 1/σ²
/// (the PLD's privacy-loss grid: about 350,000 points at σ = 0.5, 9 million, past its limit,
/// at σ = 0.1, some 10⁹ at σ = 10⁻³), and only a δ next to 1 or a large ε (beyond about 10 at
/// the study's schedules, whose σ at ε = 8 is 0.86 or more) asks for less noise: a target
/// already met at the floor is answered with σ = the floor in one evaluation (more noise
/// than the least that meets it; the guarantee holds).
pub const SIGMA_FLOOR: f64 = 0.5;

/// The smallest noise multiplier σ ≥ [`SIGMA_FLOOR`] (to 1e-4, rounded up) whose ε after the
/// schedule is ≤ `target_epsilon` under `accountant`. The returned σ is checked: ε(σ) ≤
/// target always. Returns (σ, ε spent).
pub fn noise_multiplier(
    target_epsilon: f64,
    delta: f64,
    schedule: &SampledSteps,
    accountant: Accountant,
) -> Result<(f64, f64)> {
    noise_multiplier_neighbours(
        target_epsilon,
        delta,
        schedule,
        accountant,
        Neighbours::AddRemove,
    )
}

/// [`noise_multiplier`] for the neighbouring relation `neighbours`, with ε from
/// [`dpsgd_epsilon_neighbours`]. Under replace-one the search starts from twice the
/// add/remove RDP multiplier (an initial guess only: every bracket is checked) and the
/// returned σ satisfies ε(σ) ≤ target under the replace-one accountant.
pub fn noise_multiplier_neighbours(
    target_epsilon: f64,
    delta: f64,
    schedule: &SampledSteps,
    accountant: Accountant,
    neighbours: Neighbours,
) -> Result<(f64, f64)> {
    // The search is a pure function of its arguments and the PLD accountant takes seconds at
    // study scale (thousands of steps), while a study calibrates the same setting once per
    // repetition: results are memoised (exact: same inputs, same answer).
    type Key = (u64, u64, u64, u64, Accountant, Neighbours);
    static CACHE: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<Key, (f64, f64)>>,
    > = std::sync::OnceLock::new();
    let key: Key = (
        target_epsilon.to_bits(),
        delta.to_bits(),
        schedule.sampling_rate.to_bits(),
        schedule.steps,
        accountant,
        neighbours,
    );
    let cache = CACHE.get_or_init(Default::default);
    if let Some(v) = cache.lock().ok().and_then(|c| c.get(&key).copied()) {
        return Ok(v);
    }
    let v = noise_multiplier_search(target_epsilon, delta, schedule, accountant, neighbours)?;
    if let Ok(mut c) = cache.lock() {
        if c.len() >= 10_000 {
            c.clear();
        }
        c.insert(key, v);
    }
    Ok(v)
}

fn noise_multiplier_search(
    target_epsilon: f64,
    delta: f64,
    schedule: &SampledSteps,
    accountant: Accountant,
    neighbours: Neighbours,
) -> Result<(f64, f64)> {
    crate::privacy::Epsilon::new(target_epsilon)?;
    if !(delta.is_finite() && delta > 0.0 && delta < 1.0) {
        return Err(CoreError::invalid(
            "delta",
            delta,
            "must be in (0, 1) for DP-SGD",
        ));
    }
    if neighbours == Neighbours::ReplaceOne
        && matches!(accountant, Accountant::Rdp | Accountant::RdpClassic)
    {
        return Err(replace_one_rdp_error(accountant));
    }
    let eps = |s: f64| dpsgd_epsilon_neighbours(schedule, s, delta, accountant, neighbours);
    // For PLD-based accountants, RDP's σ is an upper bracket (PLD's ε ≤ RDP's here, but
    // check rather than assume); replace-one needs about twice the add/remove noise.
    let mut hi = match accountant {
        Accountant::Pld | Accountant::Best => {
            let rdp = noise_multiplier(target_epsilon, delta, schedule, Accountant::Rdp)?.0;
            match neighbours {
                Neighbours::AddRemove => rdp,
                Neighbours::ReplaceOne => 2.0 * rdp,
            }
        }
        _ => 1.0,
    };
    let mut e_hi = eps(hi)?;
    while e_hi > target_epsilon {
        hi *= 2.0;
        if hi > 1e6 {
            // the request is out of range (a smaller epsilon or more steps than any noise
            // multiplier up to 1e6 meets), not a failure of the search
            return Err(CoreError::invalid(
                "epsilon",
                target_epsilon,
                format!(
                    "no noise multiplier up to 1e6 reaches it in {} steps at sampling rate q = {:e}: use a larger epsilon, fewer epochs (steps) or a smaller batch size",
                    schedule.steps, schedule.sampling_rate
                ),
            ));
        }
        e_hi = eps(hi)?;
    }
    // Walk down geometrically until ε(lo) > target. PLD searches start near RDP's σ and step
    // by 0.75 (tiny σ makes the PLD grid huge); RDP steps by 0.5.
    let shrink = if matches!(accountant, Accountant::Pld | Accountant::Best) {
        0.75
    } else {
        0.5
    };
    let mut lo = hi * shrink;
    loop {
        if lo < SIGMA_FLOOR {
            // not searched below the floor: the floor itself when it meets the target
            // (one evaluation), else bisect between it and `hi`
            lo = SIGMA_FLOOR.min(hi);
            if let Ok(e) = eps(lo)
                && e <= target_epsilon
            {
                return Ok((lo, e));
            }
            break;
        }
        match eps(lo) {
            Ok(e) if e <= target_epsilon => {
                hi = lo;
                e_hi = e;
                lo *= shrink;
            }
            // ε(lo) > target, or the accountant cannot evaluate this σ (treated as too little noise).
            _ => break,
        }
    }
    // Invariant: ε(hi) ≤ target < ε(lo) (or lo is the floor).
    while hi - lo > 1e-4 {
        let mid = 0.5 * (lo + hi);
        match eps(mid) {
            Ok(e) if e <= target_epsilon => {
                hi = mid;
                e_hi = e;
            }
            _ => lo = mid,
        }
    }
    debug_assert!(e_hi <= target_epsilon);
    Ok((hi, e_hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_from_epochs_matches_tf_privacy() {
        let s = SampledSteps::from_epochs(60000, 256, 60.0).unwrap();
        assert_eq!(s.steps, 14063);
        assert!((s.sampling_rate - 256.0 / 60000.0).abs() < 1e-18);
        assert!(SampledSteps::from_epochs(0, 256, 60.0).is_err());
        assert!(SampledSteps::from_epochs(100, 256, 60.0).is_err());
    }

    #[test]
    fn a_delta_next_to_one_is_answered_at_the_floor() {
        // δ = 1 − 1e-9 is in DP-SGD's range (0, 1): tiny noise would do; the search stops at
        // its floor, whose ε is checked to meet the target, under every accountant
        let s = SampledSteps::from_epochs(1000, 10, 1.0).unwrap();
        for (acc, nb) in [
            (Accountant::Rdp, Neighbours::AddRemove),
            (Accountant::Pld, Neighbours::AddRemove),
            (Accountant::Pld, Neighbours::ReplaceOne),
        ] {
            let (sigma, spent) =
                noise_multiplier_neighbours(1.0, 0.999999999, &s, acc, nb).unwrap();
            assert_eq!(sigma, SIGMA_FLOOR, "{acc:?} {nb:?}");
            let e = dpsgd_epsilon_neighbours(&s, sigma, 0.999999999, acc, nb).unwrap();
            assert!(e <= 1.0 && spent == e, "{acc:?} {nb:?}: {e}");
        }
    }

    #[test]
    fn noise_search_never_overshoots_rdp_grid() {
        // Property over a grid: ε(σ returned) ≤ target, and σ − 1e-4 would overshoot.
        for &(n, b, epochs) in &[
            (60000usize, 256usize, 60.0),
            (1000, 100, 5.0),
            (50000, 600, 100.0),
        ] {
            let s = SampledSteps::from_epochs(n, b, epochs).unwrap();
            for &eps in &[0.1, 0.5, 1.0, 3.0, 8.0] {
                for &delta in &[1e-5, 1e-8] {
                    let (sigma, spent) = noise_multiplier(eps, delta, &s, Accountant::Rdp).unwrap();
                    let check = dpsgd_epsilon(&s, sigma, delta, Accountant::Rdp).unwrap();
                    assert!(
                        check <= eps && spent == check,
                        "n={n} eps={eps} sigma={sigma} check={check}"
                    );
                    let below =
                        dpsgd_epsilon(&s, sigma - 1.001e-4, delta, Accountant::Rdp).unwrap();
                    assert!(
                        below > eps * (1.0 - 1e-12),
                        "sigma not minimal: {sigma} {below}"
                    );
                }
            }
        }
    }
}
