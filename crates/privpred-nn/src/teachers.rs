//! Subsample-and-aggregate over a teacher ensemble: the vote matrix is computed once per
//! partition, and every (ε, B) answer set is derived from it by the exponential mechanism
//! P(y) ∝ exp(β·votes_y) with β from the calibration (docs/guarantees.md#calibrations, §4.1).

use crate::error::{NnError, Result};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Votes of T teachers on n queries: `counts[i·C + y]` teachers predict class y for query i.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoteMatrix {
    /// Queries.
    pub n: usize,
    /// Classes C.
    pub classes: usize,
    /// Teachers T.
    pub teachers: usize,
    /// Row-major `n × C` counts; every row sums to T.
    pub counts: Vec<u32>,
}

impl VoteMatrix {
    /// Builds the matrix from each teacher's predicted labels (`preds[t][i]`).
    pub fn from_predictions(preds: &[Vec<u32>], classes: usize) -> Result<Self> {
        let t = preds.len();
        if t == 0 {
            return Err(NnError::invalid("teachers", 0, "need at least one teacher"));
        }
        let n = preds[0].len();
        let mut counts = vec![0u32; n * classes];
        for (k, p) in preds.iter().enumerate() {
            if p.len() != n {
                return Err(NnError::Shape(format!(
                    "teacher {k} answered {} queries, teacher 0 answered {n}",
                    p.len()
                )));
            }
            for (i, &y) in p.iter().enumerate() {
                if y as usize >= classes {
                    return Err(NnError::Shape(format!(
                        "teacher {k} predicted class {y} ≥ {classes}"
                    )));
                }
                counts[i * classes + y as usize] += 1;
            }
        }
        Ok(VoteMatrix {
            n,
            classes,
            teachers: t,
            counts,
        })
    }

    /// The votes for query `i`.
    pub fn votes(&self, i: usize) -> &[u32] {
        &self.counts[i * self.classes..(i + 1) * self.classes]
    }

    /// Non-private plurality vote (ties to the smaller class).
    pub fn plurality(&self) -> Vec<u32> {
        (0..self.n)
            .map(|i| {
                let v = self.votes(i);
                let mut b = 0;
                for (c, &x) in v.iter().enumerate() {
                    if x > v[b] {
                        b = c;
                    }
                }
                b as u32
            })
            .collect()
    }

    /// One private answer per query: the exponential mechanism with inverse temperature β
    /// over the vote counts (its privacy per answer is 2β, docs/guarantees.md#errata (erratum 4.1): β must come from the
    /// calibration), drawn by [`privpred_core::Mechanism::Exponential`] over the votes.
    pub fn private_answers(&self, beta: f64, rng: &mut impl Rng) -> Result<Vec<u32>> {
        let mechanism = privpred_core::Mechanism::Exponential {
            beta,
            over: privpred_core::Scores::Votes,
        };
        self.private_answers_with(&mechanism, rng)
    }

    /// One private answer per query from the calibrated selection `mechanism` over the votes
    /// (the exponential mechanism, or permute-and-flip in `tight` with δ = 0;
    /// [`privpred_core::Mechanism::select`], an additive mechanism is an error).
    pub fn private_answers_with(
        &self,
        mechanism: &privpred_core::Mechanism,
        rng: &mut impl Rng,
    ) -> Result<Vec<u32>> {
        (0..self.n)
            .map(|i| Ok(mechanism.select(rng, self.votes(i))? as u32))
            .collect()
    }

    /// Accuracy of one draw of private answers against `labels`.
    pub fn private_accuracy(&self, labels: &[u32], beta: f64, rng: &mut impl Rng) -> Result<f64> {
        Ok(crate::train::accuracy(
            &self.private_answers(beta, rng)?,
            labels,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn votes_sum_to_teachers_and_plurality() {
        let preds = vec![vec![0, 1, 2], vec![0, 2, 2], vec![1, 2, 2]];
        let v = VoteMatrix::from_predictions(&preds, 3).unwrap();
        for i in 0..3 {
            assert_eq!(v.votes(i).iter().sum::<u32>(), 3);
        }
        assert_eq!(v.plurality(), vec![0, 2, 2]);
        // β → ∞ gives the plurality; β = 0 is uniform
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        assert_eq!(v.private_answers(1e3, &mut rng).unwrap(), vec![0, 2, 2]);
    }
}
