//! Units of work: (figure, calibration, method, setting, repetition), their stable ids,
//! deterministic seeds, and sharding.

use crate::error::{Result, StudyError};
use crate::figures::{Figure, FigureId, Setting, fmt_num};
use privpred_core::{CalibrationMode, Method};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sha2::{Digest, Sha256};

/// The computations a group's repetitions share: one (figure, calibration, method, setting).
/// Repetitions of a group differ only in their noise draws, so a group is never split.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// The figure.
    pub figure: FigureId,
    /// The calibration mode.
    pub calibration: CalibrationMode,
    /// The method.
    pub method: Method,
    /// Index of the setting in [`Figure::settings`].
    pub setting_index: usize,
    /// The setting.
    pub setting: Setting,
    /// The x value on the figure's axis.
    pub x: f64,
    /// The line label.
    pub series: String,
}

impl Group {
    /// Stable id: `fig1a/corrected/loss-perturbation/03:epsilon=0.1`.
    pub fn id(&self) -> String {
        let def = self.figure.definition();
        let mut label = format!("{}={}", def.axis.kind.name(), fmt_num(self.x));
        if !def.series_epsilons.is_empty() {
            label = format!("epsilon={},{label}", fmt_num(self.setting.epsilon));
        }
        format!(
            "{}/{}/{}/{:02}:{label}",
            self.figure.name(),
            self.calibration.name(),
            self.method.name(),
            self.setting_index
        )
    }

    /// Stable id of one repetition: the group id plus `/r007`.
    pub fn unit_id(&self, repetition: u32) -> String {
        format!("{}/r{repetition:03}", self.id())
    }

    /// The sort key of the group's rows.
    pub fn sort_key(&self) -> (usize, CalibrationMode, usize, usize) {
        sort_key(
            self.figure,
            self.calibration,
            self.method,
            self.setting_index,
        )
    }
}

/// Sort key of a row: figure order, calibration, method order within the figure, setting.
pub fn sort_key(
    figure: FigureId,
    cal: CalibrationMode,
    method: Method,
    setting: usize,
) -> (usize, CalibrationMode, usize, usize) {
    let fi = FigureId::ALL
        .iter()
        .position(|f| *f == figure)
        .unwrap_or(usize::MAX);
    let mi = figure
        .definition()
        .methods
        .iter()
        .position(|m| *m == method)
        .unwrap_or(usize::MAX);
    (fi, cal, mi, setting)
}

/// All groups of the given figures and calibrations, in the canonical (sorted) order.
pub fn groups(figures: &[FigureId], calibrations: &[CalibrationMode]) -> Vec<Group> {
    let mut figs = figures.to_vec();
    figs.sort();
    figs.dedup();
    let mut cals = calibrations.to_vec();
    cals.sort();
    cals.dedup();
    let mut out = Vec::new();
    for f in figs {
        let def: Figure = f.definition();
        let settings = def.settings();
        for &cal in &cals {
            for &m in &def.methods {
                for (i, s) in settings.iter().enumerate() {
                    out.push(Group {
                        figure: f,
                        calibration: cal,
                        method: m,
                        setting_index: i,
                        setting: *s,
                        x: def.x_of(s),
                        series: def.series_label(m, s),
                    });
                }
            }
        }
    }
    out.sort_by_key(|g| g.sort_key());
    out
}

/// A deterministic share of the work: shard `index` of `count` (0-based index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    /// 0-based shard index (`< count`).
    pub index: usize,
    /// Number of shards (≥ 1).
    pub count: usize,
}

impl Shard {
    /// The whole run.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Parses `k/n` with 0 ≤ k < n (a Slurm `$SLURM_ARRAY_TASK_ID` from 0, or Kubernetes'
    /// `$JOB_COMPLETION_INDEX`).
    pub fn parse(s: &str) -> Result<Self> {
        let bad = || {
            StudyError::invalid(
                "--shard",
                s,
                "K/N with integers 0 <= K < N, N >= 1 (e.g. 0/4)",
            )
        };
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = k.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// Whether group number `i` of the canonical order belongs to this shard (round-robin,
    /// which spreads the cheap and the expensive settings evenly).
    pub fn owns(&self, i: usize) -> bool {
        i % self.count == self.index
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// A ChaCha20 generator seeded from the run seed and a stable label (a unit id, or a group id
/// plus a purpose), never from the order in which work runs: resumed, sharded and parallel
/// runs draw the same numbers.
pub fn rng_for(seed: u64, label: &str) -> ChaCha20Rng {
    let mut h = Sha256::new();
    h.update(b"privpred-study/v1\0");
    h.update(seed.to_le_bytes());
    h.update(label.as_bytes());
    let digest: [u8; 32] = h.finalize().into();
    ChaCha20Rng::from_seed(digest)
}

/// A 64-bit seed derived like [`rng_for`] (for APIs that take a `u64` seed).
pub fn seed_for(seed: u64, label: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(b"privpred-study/v1/u64\0");
    h.update(seed.to_le_bytes());
    h.update(label.as_bytes());
    let d = h.finalize();
    u64::from_le_bytes(d[..8].try_into().unwrap_or([0; 8]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    #[test]
    fn shard_parse() {
        assert_eq!(Shard::parse("0/4").unwrap(), Shard { index: 0, count: 4 });
        assert!(Shard::parse("4/4").is_err());
        assert!(Shard::parse("1/0").is_err());
        assert!(Shard::parse("x").is_err());
    }

    #[test]
    fn shards_partition_groups() {
        let g = groups(
            &[FigureId::Fig1a, FigureId::Fig6b],
            &[CalibrationMode::Paper, CalibrationMode::Tight],
        );
        let n = 3;
        let mut seen = vec![0; g.len()];
        for k in 0..n {
            let s = Shard { index: k, count: n };
            for (i, _) in g.iter().enumerate().filter(|(i, _)| s.owns(*i)) {
                seen[i] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c == 1));
    }

    #[test]
    fn ids_unique_and_stable() {
        let g = groups(&FigureId::ALL, &[CalibrationMode::Corrected]);
        let mut ids: Vec<String> = g.iter().map(|g| g.id()).collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n);
        assert_eq!(
            g[0].unit_id(7),
            "fig1a/corrected/model-sensitivity/00:epsilon=0.01/r007"
        );
    }

    #[test]
    fn rng_depends_on_label_only() {
        let a: u64 = rng_for(1, "x").random();
        let b: u64 = rng_for(1, "x").random();
        let c: u64 = rng_for(1, "y").random();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
