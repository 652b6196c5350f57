//! A model's inference budget at the command line: the answering path of `privpred_answer`
//! (budget identity = the signed ledger id, the default ledger `<MODEL>.ledger.sqlite`, the
//! spend mark `<MODEL>.ledger-mark.json`, the one opener), with the CLI's exit codes, for
//! `predict`, `serve` and `ledger`.

use crate::exit::usage;
use privpred_answer::ledger::SpendOutcome;
use privpred_answer::{Account, AnswerError};
use privpred_core::Answer;
use std::path::Path;

/// An error of the answering path as the CLI reports it: configuration errors and refused
/// files exit 2.
pub(crate) fn ledger_err(e: AnswerError) -> anyhow::Error {
    if e.is_config() {
        usage(e)
    } else {
        anyhow::Error::new(e)
    }
}

/// What the ledger needs to know of a model file.
pub(crate) struct Identity {
    /// The ledger key.
    pub id: String,
    /// B, for a model that spends a budget.
    pub budget: Option<u64>,
}

/// The identity of any model file `predict` and `serve` accept (a model file verified
/// against the default trusted key, from its signed header; or a test fixture).
pub(crate) fn identity(model: &Path) -> anyhow::Result<Identity> {
    let bytes = std::fs::read(model).map_err(|e| usage(format!("{}: {e}", model.display())))?;
    if privpred_serve::FixtureModel::is_fixture(&bytes) {
        let f = privpred_serve::FixtureModel::from_bytes(&bytes).map_err(usage)?;
        use privpred_serve::ServedModel;
        let info = f.info();
        return Ok(Identity {
            id: info.model_id.clone(),
            budget: info.budget.get(),
        });
    }
    let trust = super::keys::TrustArgs::default().trust()?;
    let (header, _) =
        privpred_release::open_header(model, &trust).map_err(super::keys::release_err)?;
    let budget =
        privpred_release::header_budget(model, &header).map_err(super::keys::release_err)?;
    Ok(Identity {
        id: header.ledger_id,
        budget,
    })
}

/// Records the answers `fresh` to the preprocessed `rows` (which key the answer store)
/// durably before returning them, through the model's [`Account`] (one transaction checks
/// the budget, adds the new answers' cost and stores them; the spend mark is raised; a
/// repeated row gets its stored earlier answer at no cost). A request that needs more than
/// what is left is refused whole (exit 2), nothing spent.
pub(crate) fn spend(
    account: &Account,
    model: &Path,
    rows: &[Vec<f32>],
    fresh: Vec<Answer>,
    init: bool,
) -> anyhow::Result<Vec<Answer>> {
    match account.spend_once(rows, fresh, init).map_err(ledger_err)? {
        SpendOutcome::Answered { answers, .. } => Ok(answers.into_iter().map(|(a, _)| a).collect()),
        SpendOutcome::Exhausted { needed, state } => Err(usage(format!(
            "budget exhausted: {needed} new answers requested, {} of {} left for {} (ledger {})",
            state.remaining(),
            state.total,
            model.display(),
            account.ledger.describe()
        ))),
    }
}
