//! The durable budget ledger for Python: the answering path of `privpred_answer`, the one
//! `privpred predict` and `privpred serve` take. A model file's [`Account`] (its signed
//! ledger id, B, the ledger — by default `<MODEL>.ledger.sqlite` beside the file, as for the
//! CLI — and the file's spend mark) is opened by `Account::session`: a ledger below the spend
//! mark is refused, and every spending commit raises the mark before its answers are
//! released. A Python process, `predict` and a server sharing the ledger share one budget B.

use crate::errors::BudgetExhausted;
use privpred_answer::ledger::SpendOutcome;
use privpred_answer::{Account, AnswerError, BudgetState, Session};
use privpred_core::Answer;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::path::Path;

/// An open ledger for one model file.
pub struct DurableLedger {
    session: Session,
    /// Where the ledger lives (for messages).
    pub description: String,
}

/// An error of the answering path: a refused model file as the release loader's errors
/// (`ValueError`, `OSError`); a ledger that is missing, below the spend mark or cannot be
/// written, or a seeded model's answers, a `RuntimeError`.
pub fn answer_err(e: AnswerError) -> PyErr {
    match e {
        AnswerError::Release(r) => crate::errors::release(r),
        e => PyRuntimeError::new_err(crate::errors::python_words(&e.to_string())),
    }
}

/// The ledger argument as the CLI reads `--ledger`; a bare path is an SQLite file. The
/// Python package writes SQLite ledgers only.
pub fn ledger_arg(ledger: &str) -> PyResult<String> {
    let t = ledger.trim();
    if t.starts_with("postgres")
        || (t.contains('=') && t.split_whitespace().all(|kv| kv.contains('=')))
    {
        return Err(PyValueError::new_err(format!(
            "invalid ledger = {ledger:?}: the Python package writes SQLite ledgers only (a file path or `sqlite:PATH`); PostgreSQL ledgers are served by `privpred serve`"
        )));
    }
    Ok(match t.starts_with("sqlite:") {
        true => t.to_string(),
        false => format!("sqlite:{t}"),
    })
}

/// The account of the model file `model` (ledger id `ledger_id`, budget `total`) on
/// `ledger` (default: the CLI's default ledger beside the file).
pub fn account(
    model: &Path,
    ledger_id: Option<&str>,
    total: u64,
    ledger: Option<&str>,
) -> PyResult<Account> {
    let arg = ledger.map(ledger_arg).transpose()?;
    Account::of_model_file(model, ledger_id, total, arg.as_deref()).map_err(answer_err)
}

impl DurableLedger {
    /// Opens `account`'s ledger (`init` creates the record and is refused when it exists; a
    /// budget is never reset; without it a missing ledger or record is an error, as for the CLI).
    pub fn open(account: &Account, init: bool) -> PyResult<Self> {
        let session = account.session(init).map_err(answer_err)?;
        Ok(DurableLedger {
            description: session.description().to_string(),
            session,
        })
    }

    /// The budget as recorded now.
    pub fn state(&self) -> PyResult<BudgetState> {
        self.session.state().map_err(answer_err)
    }

    /// Records `fresh` answers to preprocessed `rows` (one each) and returns the answers to
    /// release: stored earlier answers for rows asked before (no cost), the fresh ones for
    /// the rest. Refused whole with `BudgetExhausted` when more units are needed than remain.
    pub fn spend(&self, rows: &[Vec<f32>], fresh: Vec<Answer>) -> PyResult<Vec<Answer>> {
        match self.session.spend(rows, fresh).map_err(answer_err)? {
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
