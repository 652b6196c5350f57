//! Subsample-and-aggregate's teachers (docs/guarantees.md#calibrations): T models trained on disjoint shards of a
//! random partition ([`train_teachers`]), their votes on a query set ([`VoteMatrix`]) and the
//! selection mechanisms over those votes.

use crate::error::{LinearError, Result};
use crate::kernel::{self, Design, KernelParams};
use crate::lbfgs::LbfgsOptions;
use crate::model::LinearModel;
use crate::train::{Objective, check_classes, check_lambda};
use privpred_core::Mechanism;
use privpred_data::{Dataset, UnitBallDataset};
use rand::{Rng, RngExt};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// T teachers trained on disjoint shards (row-major `d × c` each).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Teachers {
    /// Input dimension.
    pub d: usize,
    /// Classes.
    pub c: usize,
    /// The teachers.
    pub models: Vec<LinearModel>,
    /// Examples per teacher ⌊N/T⌋.
    pub shard_size: usize,
}

/// Vote counts of T teachers on n queries: `counts[i*c + k]` teachers voted k on query i.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VoteMatrix {
    /// Queries.
    pub n: usize,
    /// Classes.
    pub c: usize,
    /// Teachers.
    pub t: usize,
    /// Row-major `n × c` counts.
    pub counts: Vec<u32>,
}

impl VoteMatrix {
    /// One draw of the exponential mechanism per query: P(k) ∝ exp(β·votes_k)
    /// ([`Mechanism::Exponential`] over the votes; a calibrated release uses
    /// [`VoteMatrix::private_labels_with`] and the calibration's own mechanism).
    pub fn private_labels<R: Rng + ?Sized>(&self, beta: f64, rng: &mut R) -> Result<Vec<u32>> {
        let mechanism = Mechanism::Exponential {
            beta,
            over: privpred_core::Scores::Votes,
        };
        self.private_labels_with(&mechanism, rng)
    }

    /// One draw per query of the calibrated selection `mechanism` over the votes: the
    /// exponential mechanism or permute-and-flip (`tight`, δ = 0)
    /// ([`Mechanism::select`]; an additive mechanism is an error).
    pub fn private_labels_with<R: Rng + ?Sized>(
        &self,
        mechanism: &Mechanism,
        rng: &mut R,
    ) -> Result<Vec<u32>> {
        self.counts
            .chunks_exact(self.c)
            .map(|v| Ok(mechanism.select(rng, v)? as u32))
            .collect()
    }

    /// The non-private majority vote (lowest class on ties).
    pub fn majority(&self) -> Vec<u32> {
        self.counts
            .chunks_exact(self.c)
            .map(|v| {
                v.iter()
                    .enumerate()
                    .fold(0, |b, (k, &x)| if x > v[b] { k } else { b }) as u32
            })
            .collect()
    }
}

impl Teachers {
    /// The vote counts on every row of `queries` (computed once per partition).
    pub fn vote_matrix(&self, queries: &Dataset) -> Result<VoteMatrix> {
        if queries.d != self.d {
            return Err(LinearError::Dimension(format!(
                "queries have {} features, the teachers expect {}",
                queries.d, self.d
            )));
        }
        let design = Design::new(&queries.features, &queries.labels, queries.d, self.c);
        let params: Vec<KernelParams> = self
            .models
            .iter()
            .map(|m| KernelParams::from_theta(&m.theta, m.d, m.c))
            .collect();
        let c = self.c;
        let mut counts = vec![0u32; queries.n * c];
        let per_row = |(i, out): (usize, &mut [u32])| {
            let mut l = vec![0f32; params.first().map_or(c, |p| p.cp)];
            for p in &params {
                kernel::forward_row(design.row(i), &p.w, p.dp, p.cp, &mut l);
                let mut best = 0;
                for k in 1..c {
                    if l[k] > l[best] {
                        best = k;
                    }
                }
                out[best] += 1;
            }
        };
        counts.par_chunks_mut(c).enumerate().for_each(per_row);
        Ok(VoteMatrix {
            n: queries.n,
            c,
            t: self.models.len(),
            counts,
        })
    }

    /// Vote counts for one query.
    pub fn votes(&self, x: &[f32]) -> Vec<u32> {
        let mut v = vec![0u32; self.c];
        for m in &self.models {
            v[m.predict(x) as usize] += 1;
        }
        v
    }
}

/// Trains T teachers on disjoint ⌊N/T⌋ slices of a random partition (drawn from `rng`), in
/// parallel across teachers (each fit sequential).
pub fn train_teachers<R: Rng + ?Sized>(
    train: &UnitBallDataset,
    t: usize,
    lambda: f64,
    opts: &LbfgsOptions,
    rng: &mut R,
) -> Result<Teachers> {
    check_classes(train)?;
    check_lambda(lambda, false)?;
    let n = train.n;
    if t == 0 || t > n {
        return Err(LinearError::invalid(
            "teachers",
            t,
            format!("must be in 1..={n}"),
        ));
    }
    let shard = n / t;
    // Fisher–Yates permutation
    let mut perm: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng.random_range(0..=i);
        perm.swap(i, j);
    }
    let design = Design::new(&train.features, &train.labels, train.d, train.classes);
    let models: Result<Vec<LinearModel>> = (0..t)
        .into_par_iter()
        .map(|k| {
            let sub = design.select(&perm[k * shard..(k + 1) * shard]);
            let obj = Objective {
                design: sub,
                lambda,
                linear: None,
                parallel: false,
            };
            Ok(obj.minimize(None, opts)?.0)
        })
        .collect();
    Ok(Teachers {
        d: train.d,
        c: train.classes,
        models: models?,
        shard_size: shard,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::teacher_lbfgs_options;
    use crate::train::{self, tests::toy};
    use rand::SeedableRng;

    #[test]
    fn teachers_vote_matrix_matches_per_query_votes() {
        let ds = toy(800, 6, 3, 8);
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        let t = train_teachers(&ds, 16, 0.0, &teacher_lbfgs_options(), &mut rng).unwrap();
        assert_eq!((t.models.len(), t.shard_size), (16, 50));
        let vm = t.vote_matrix(&ds).unwrap();
        for i in [0, 17, 799] {
            assert_eq!(&vm.counts[i * 3..i * 3 + 3], t.votes(ds.row(i)).as_slice());
        }
        assert!(vm.counts.chunks(3).all(|v| v.iter().sum::<u32>() == 16));
        let maj = vm.majority();
        assert!(train::accuracy_of(&maj, &ds.labels) > 0.8);
        // β → large: the exponential mechanism returns the majority wherever it is unique
        let private = vm.private_labels(1e3, &mut rng).unwrap();
        for (i, v) in vm.counts.chunks(3).enumerate() {
            let top = *v.iter().max().unwrap();
            if v.iter().filter(|&&x| x == top).count() == 1 {
                assert_eq!(private[i], maj[i], "row {i}: {v:?}");
            }
        }
    }
}
