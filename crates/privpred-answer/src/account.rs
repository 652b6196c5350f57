//! A model's budget and the one way it is opened for answering.
//!
//! * **identity** ([`BudgetIdentity`]): the ledger id written into the artifact at training,
//!   inside its signed header. The ledger is keyed on it, never on the file's bytes: a key
//!   derived from the bytes would change with an edit that keeps the file valid, and each
//!   such key would be a fresh budget. A model with a finite budget B whose file carries no
//!   ledger id is refused;
//! * **ledger**: the transactional [`crate::ledger`] (by default the SQLite file
//!   `<MODEL>.ledger.sqlite` beside the model, [`default_ledger`]; PostgreSQL for replicas);
//! * **spend mark**: `<MODEL>.ledger-mark.json` ([`default_spend_mark`]), a high-water mark of
//!   the spent budget outside the ledger, raised before answers are released and checked when
//!   the ledger is opened, so a ledger restored from an older backup is refused whoever opens
//!   it.
//!
//! [`Account::open`] opens the ledger with the mark, whatever front end answers; one-shot
//! users call [`Account::spend_once`], blocking long-lived users [`Account::session`].

use crate::error::{AnswerError, Result};
use crate::ledger::{
    BudgetState, Key, Ledger, LedgerSpec, OpenOptions, SpendMark, SpendOutcome, SpendRequest,
    answer_key,
};
use privpred_core::Answer;
use privpred_release::{Coverage, Header, Marks, Model, Released};
use std::path::{Path, PathBuf};

/// `model` with `suffix` appended to its file name.
fn beside(model: &Path, suffix: &str) -> PathBuf {
    let mut s = model.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The default ledger of a model file: `sqlite:<MODEL>.ledger.sqlite`.
pub fn default_ledger(model: &Path) -> LedgerSpec {
    LedgerSpec::Sqlite(beside(model, ".ledger.sqlite"))
}

/// The spend mark of a model file: `<MODEL>.ledger-mark.json`.
pub fn default_spend_mark(model: &Path) -> SpendMark {
    SpendMark::new(beside(model, ".ledger-mark.json"))
}

/// The ledger named by `arg` (`sqlite:PATH`, `postgres://…`, a libpq string), or the
/// model's [`default_ledger`].
pub fn ledger_spec(arg: Option<&str>, model: &Path) -> Result<LedgerSpec> {
    match arg {
        Some(l) => LedgerSpec::parse(l),
        None => Ok(default_ledger(model)),
    }
}

/// What a ledger knows of a model: its key and its budget B.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetIdentity {
    /// The ledger id the model's signed header records (the ledger's key).
    pub ledger_id: String,
    /// B.
    pub total: u64,
}

impl BudgetIdentity {
    /// The identity of the model file `model` with budget `total`: its ledger id; a file
    /// without one is refused (a configuration error).
    pub fn of(model: &Path, ledger_id: Option<&str>, total: u64) -> Result<BudgetIdentity> {
        let ledger_id = ledger_id.filter(|s| !s.is_empty()).ok_or_else(|| {
            AnswerError::config(
                "model",
                format!(
                    "{}: this model has a finite inference budget but its file carries no ledger id. Its budget \
                     cannot be tied to the model: any key taken from the file's bytes changes with an edit that \
                     keeps the file valid, and each would be a fresh budget. Train the model again to answer from it",
                    model.display()
                ),
            )
        })?;
        Ok(BudgetIdentity {
            ledger_id: ledger_id.to_string(),
            total,
        })
    }

    /// The answer-store key of each preprocessed row, unscoped (as `predict`, Python and a
    /// server without tokens key them, so that they share stored answers).
    pub fn keys(&self, rows: &[Vec<f32>]) -> Vec<Key> {
        rows.iter()
            .map(|r| answer_key(&self.ledger_id, None, r))
            .collect()
    }
}

/// The budget of one model: its identity, its ledger and its spend mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// The ledger key and B.
    pub identity: BudgetIdentity,
    /// Where the ledger lives.
    pub ledger: LedgerSpec,
    /// The spend mark checked at open and raised before every release (`None` only for
    /// a model that is not a file, such as the service's test fixture).
    pub mark: Option<SpendMark>,
}

impl Account {
    /// The account of a model file: its [`BudgetIdentity`], the ledger `ledger` (default:
    /// [`default_ledger`]) and the file's [`default_spend_mark`].
    pub fn of_model_file(
        model: &Path,
        ledger_id: Option<&str>,
        total: u64,
        ledger: Option<&str>,
    ) -> Result<Account> {
        Ok(Account {
            identity: BudgetIdentity::of(model, ledger_id, total)?,
            ledger: ledger_spec(ledger, model)?,
            mark: Some(default_spend_mark(model)),
        })
    }

    /// Opens the ledger and this model's record, with the spend mark: a ledger below the
    /// mark is refused, every spending commit raises it before its answers are returned.
    /// `init` creates the record (refused if it exists); without it a missing ledger or
    /// record is an error.
    pub async fn open(&self, answer_store: bool, init: bool) -> Result<Ledger> {
        let opts = OpenOptions {
            answer_store,
            init,
            carry_spent: None,
            spend_mark: self.mark.clone(),
        };
        Ledger::open_with(
            &self.ledger,
            &self.identity.ledger_id,
            self.identity.total,
            opts,
        )
        .await
    }

    /// For a command that answers once and exits: opens the ledger (answer store on),
    /// decides and records the answers `fresh` to the preprocessed `rows` in one transaction,
    /// and closes it (an SQLite ledger is checkpointed into its main file, waiting its turn
    /// for up to 30 s while other processes' connections block the checkpoint; the spend is
    /// committed either way, and a checkpoint still blocked after that wait leaves it in the
    /// -wal file, where every open of the ledger reads it). The answers of an
    /// `Answered` outcome were committed, and the mark raised, before this returns.
    pub fn spend_once(
        &self,
        rows: &[Vec<f32>],
        fresh: Vec<Answer>,
        init: bool,
    ) -> Result<SpendOutcome> {
        let keys = self.identity.keys(rows);
        rt()?.block_on(async {
            let l = self.open(true, init).await?;
            let out = l.spend(SpendRequest { keys, fresh }).await?;
            let _ = l.close().await;
            Ok(out)
        })
    }

    /// For a blocking caller that answers many times (the Python bindings): the ledger
    /// opened by [`Account::open`] (answer store on) with its own runtime.
    pub fn session(&self, init: bool) -> Result<Session> {
        let rt = rt()?;
        let ledger = rt.block_on(self.open(true, init))?;
        Ok(Session {
            rt,
            ledger,
            account: self.clone(),
        })
    }
}

fn rt() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| AnswerError::Io {
            context: "starting the ledger's runtime".into(),
            source: e,
        })
}

/// An open ledger for a blocking caller ([`Account::session`]); closed (an SQLite ledger
/// checkpointed) when dropped.
pub struct Session {
    rt: tokio::runtime::Runtime,
    ledger: Ledger,
    account: Account,
}

impl Session {
    /// The account it charges.
    pub fn account(&self) -> &Account {
        &self.account
    }

    /// Where the ledger lives, without credentials.
    pub fn description(&self) -> &str {
        self.ledger.description()
    }

    /// The budget as recorded now.
    pub fn state(&self) -> Result<BudgetState> {
        self.rt.block_on(self.ledger.status())
    }

    /// Records the answers `fresh` to the preprocessed `rows` (one each) in one transaction,
    /// raising the spend mark, before they may be released; a row asked before gets its
    /// stored answer at no cost. A request needing more than what is left is refused whole.
    pub fn spend(&self, rows: &[Vec<f32>], fresh: Vec<Answer>) -> Result<SpendOutcome> {
        let keys = self.account.identity.keys(rows);
        self.rt
            .block_on(self.ledger.spend(SpendRequest { keys, fresh }))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.rt.block_on(self.ledger.close());
    }
}

/// A released model ready to answer: what may answer, what every answer carries, and the
/// budget it spends.
#[derive(Debug)]
pub struct Answering {
    /// The model (its guarantee re-derived by the release loader).
    pub model: Model,
    /// Its public header.
    pub header: Header,
    /// What every answer must carry (not covered by a trusted signature).
    pub marks: Marks,
    /// The experiment seed of a seeded model opened with `allow_seeded`: its answers are
    /// not a private release and each one must say so. `None` for a release.
    pub experiment_seed: Option<u64>,
    /// The budget its answers spend; `None` for a model whose answers spend none
    /// (private training, non-private).
    pub account: Option<Account>,
}

impl Answering {
    /// The one opener of an answering model: `released` (from `privpred_release::open_file`
    /// of `path`) passes [`Released::for_release`] — a seeded model is refused unless
    /// `allow_seeded`, and then its answers are marked as an experiment's — and a model
    /// that spends a finite budget gets its [`Account`] on the ledger `ledger` (default: the
    /// model file's), keyed by its signed ledger id, with the file's spend mark.
    pub fn open(
        path: &Path,
        released: Released,
        ledger: Option<&str>,
        allow_seeded: bool,
    ) -> Result<Answering> {
        let (marks, experiment_seed) = match released.experiment_seed() {
            Some(seed) if allow_seeded => {
                // a seeded file is refused by `for_release`; opted in, only its coverage counts
                let not_covered = match &released.coverage {
                    Coverage::Signed(_) => None,
                    Coverage::NotCovered(why) => Some(why.clone()),
                };
                (Marks { not_covered }, Some(seed))
            }
            _ => (released.for_release(path)?, None),
        };
        let budget = privpred_release::header_budget(path, &released.header)?;
        let account = match budget {
            Some(total) => Some(Account::of_model_file(
                path,
                Some(&released.header.ledger_id),
                total,
                ledger,
            )?),
            None => None,
        };
        Ok(Answering {
            model: released.model,
            header: released.header,
            marks,
            experiment_seed,
            account,
        })
    }
}

/// The refusal of a seeded model's answers as a private release (`allow_seeded` false), or
/// the seed its marked answers carry: the rule [`Answering::open`] applies to a model file,
/// for a model that answers before it is written to one (a fitted Python estimator).
pub fn seed_gate(seed: Option<u64>, allow_seeded: bool) -> Result<Option<u64>> {
    match seed {
        Some(s) if !allow_seeded => Err(AnswerError::config(
            "model",
            format!(
                "trained with the seed {s}: its noise can be regenerated from the seed and subtracted, so its answers \
                 are an experiment's, not a private release; train again without a seed (OS-seeded noise), or opt in \
                 to answers marked as an experiment's"
            ),
        )),
        s => Ok(s),
    }
}

#[cfg(test)]
mod tests;
