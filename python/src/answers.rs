//! The in-memory budget ledger of a fitted private-prediction model, with the answer rule of
//! the durable ledger of the answering path (`privpred_answer::ledger`): answers are keyed by
//! `answer_key` over the preprocessed row; a row asked before gets its stored answer and
//! spends nothing (post-processing of a released answer); identical rows inside one request
//! cost one unit and get one answer; a request that needs more new answers than remain is
//! refused whole. So `predict` in memory, through a durable ledger and through the server
//! answer a repeated row the same way.

use crate::errors::BudgetExhausted;
use privpred_answer::ledger::{Key, answer_key};
use pyo3::PyResult;
use std::collections::HashMap;

/// The model id the in-memory store keys its answers with (one store per model).
const MEMORY_MODEL_ID: &str = "in-memory";

/// Answers released so far and the budget they spend.
#[derive(Debug, Default)]
pub struct MemoryLedger {
    /// Answers released (units of B spent).
    pub spent: u64,
    /// The released answers by key (at most B of them).
    store: HashMap<Key, u32>,
}

/// One request against the store: which rows are new (each distinct new row once, in order
/// of first appearance) and where every row's answer comes from.
pub struct Plan {
    keys: Vec<Key>,
    /// Per row: its stored answer, or the index of its distinct new row in `fresh_rows`.
    source: Vec<Result<u32, usize>>,
    /// Indices (into the request) of the distinct new rows, which need fresh answers.
    pub fresh_rows: Vec<usize>,
}

impl MemoryLedger {
    /// Plans the answers to `rows` (preprocessed) and checks the budget `total`: refused
    /// whole with `BudgetExhausted` when the distinct new rows outnumber what remains.
    pub fn plan<'a>(&self, rows: impl Iterator<Item = &'a [f32]>, total: u64) -> PyResult<Plan> {
        let mut keys = Vec::new();
        let mut source = Vec::new();
        let mut fresh_rows = Vec::new();
        let mut new_index: HashMap<Key, usize> = HashMap::new();
        for (i, row) in rows.enumerate() {
            let key = answer_key(MEMORY_MODEL_ID, None, row);
            source.push(match self.store.get(&key) {
                Some(&a) => Ok(a),
                None => Err(*new_index.entry(key).or_insert_with(|| {
                    fresh_rows.push(i);
                    fresh_rows.len() - 1
                })),
            });
            keys.push(key);
        }
        let needed = fresh_rows.len() as u64;
        if self.spent.saturating_add(needed) > total {
            let left = total.saturating_sub(self.spent);
            return Err(BudgetExhausted::new_err(if left == 0 {
                format!(
                    "the inference budget of {total} answers is exhausted; the guarantee covers no further answers (rows asked before are answered again for free)"
                )
            } else {
                format!(
                    "this request needs {needed} new answers but only {left} remain of the budget of {total}; send at most {left} new rows"
                )
            }));
        }
        Ok(Plan {
            keys,
            source,
            fresh_rows,
        })
    }

    /// Records the fresh answers of `plan` (one per distinct new row, in its order), charges
    /// them to the budget and returns every row's answer.
    pub fn commit(&mut self, plan: Plan, fresh: &[u32]) -> Vec<u32> {
        for (&row, &label) in plan.fresh_rows.iter().zip(fresh) {
            self.store.insert(plan.keys[row], label);
        }
        self.spent += plan.fresh_rows.len() as u64;
        plan.source
            .into_iter()
            .map(|s| match s {
                Ok(a) => a,
                Err(j) => fresh[j],
            })
            .collect()
    }
}
