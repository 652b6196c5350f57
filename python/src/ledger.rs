//! The durable budget ledger for Python: the same SQLite ledger as `privpred serve`
//! (`privpred_serve::Ledger`), opened for one model file and written exactly as the server
//! writes it — answers keyed by `privpred_serve::ledger::answer_key` over the preprocessed row
//! (unscoped, as a server without tokens keys them), computed first, recorded durably in one
//! transaction (all rows or none), released only after the commit. A Python process and a
//! server (or several Python processes) sharing the file therefore share one budget B.

use crate::errors::BudgetExhausted;
use privpred_core::Answer;
use privpred_serve::ledger::{LedgerSpec, SpendOutcome, SpendRequest, answer_key};
use privpred_serve::{BudgetState, Ledger};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::path::Path;

/// An open ledger for one model (its file's SHA-256 is the model id, as the server's).
pub struct DurableLedger {
    rt: tokio::runtime::Runtime,
    ledger: Ledger,
    /// SHA-256 of the model file.
    pub model_id: String,
    /// Where the ledger lives (for messages).
    pub description: String,
}

fn ledger_err(e: privpred_serve::ServeError) -> PyErr {
    PyRuntimeError::new_err(crate::errors::python_words(&e.to_string()))
}

impl DurableLedger {
    /// Opens `ledger` (a path, or `sqlite:PATH`) for the model whose file bytes hash to
    /// `model_id`, with budget `total`. `init` creates the file and the model's record and is
    /// refused when the record exists (a budget is never reset); without it a missing ledger
    /// or record is an error, as for `privpred serve`.
    pub fn open(ledger: &str, model_id: String, total: u64, init: bool) -> PyResult<Self> {
        let spec = if ledger.starts_with("sqlite:") {
            LedgerSpec::parse(ledger)
                .map_err(|e| PyValueError::new_err(crate::errors::python_words(&e.to_string())))?
        } else if ledger.starts_with("postgres") || ledger.contains("host=") {
            return Err(PyValueError::new_err(format!(
                "invalid ledger = {ledger:?}: the Python package writes SQLite ledgers only (a file path or `sqlite:PATH`); PostgreSQL ledgers are served by `privpred serve`"
            )));
        } else {
            LedgerSpec::Sqlite(Path::new(ledger).to_path_buf())
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| {
                PyRuntimeError::new_err(format!("cannot start the ledger runtime: {e}"))
            })?;
        let opened = rt.block_on(Ledger::open(&spec, &model_id, total, true, init));
        let ledger = opened.map_err(ledger_err)?;
        Ok(DurableLedger {
            rt,
            description: ledger.description().to_string(),
            ledger,
            model_id,
        })
    }

    /// The budget as recorded now.
    pub fn state(&self) -> PyResult<BudgetState> {
        self.rt.block_on(self.ledger.status()).map_err(ledger_err)
    }

    /// Records `fresh` answers to preprocessed `rows` (one each) and returns the answers to
    /// release: stored earlier answers for rows asked before (no cost), the fresh ones for
    /// the rest. Refused whole with `BudgetExhausted` when more units are needed than remain.
    pub fn spend(&self, rows: &[Vec<f32>], fresh: Vec<Answer>) -> PyResult<Vec<Answer>> {
        let keys = rows
            .iter()
            .map(|r| answer_key(&self.model_id, None, r))
            .collect();
        let outcome = self
            .rt
            .block_on(self.ledger.spend(SpendRequest { keys, fresh }))
            .map_err(ledger_err)?;
        match outcome {
            SpendOutcome::Answered { answers, .. } => {
                Ok(answers.into_iter().map(|(a, _)| a).collect())
            }
            SpendOutcome::Exhausted { needed, state } => {
                let left = state.remaining();
                Err(BudgetExhausted::new_err(if left == 0 {
                    format!(
                        "the inference budget of {} answers is exhausted (ledger {}); the guarantee covers no further answers",
                        state.total, self.description
                    )
                } else {
                    format!(
                        "this request needs {needed} new answers but only {left} remain of the budget of {} (ledger {}); send at most {left} new rows",
                        state.total, self.description
                    )
                }))
            }
        }
    }
}

impl Drop for DurableLedger {
    /// Checkpoints the write-ahead log into the main file, so the `.sqlite` file alone holds
    /// the ledger once the model is gone (a failure here loses nothing: the WAL is durable).
    fn drop(&mut self) {
        let _ = self.rt.block_on(self.ledger.close());
    }
}
