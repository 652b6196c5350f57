//! A model's inference budget at the command line, one implementation for `predict`, `serve`
//! and `ledger`:
//!
//! * **identity**: the ledger id written into the artifact at training (covered by its
//!   checksum). The ledger is keyed on it, never on the file's bytes. A model with a finite
//!   budget B whose file carries no ledger id (written by an earlier build) is refused: any
//!   key derived from its bytes changes with an edit that keeps the file valid (header
//!   padding), and each such key would be a fresh budget;
//! * **ledger**: the transactional ledger of `privpred_serve::ledger` (SQLite by default, the
//!   same file `<MODEL>.ledger.sqlite` for `predict` and `serve`; PostgreSQL for replicas);
//! * **spend mark**: `<MODEL>.ledger-mark.json`, a high-water mark of the spent budget outside
//!   the ledger, raised before answers are released and checked when the ledger is opened;
//! * **migration**: the JSON ledger `<MODEL>.ledger.json` of earlier `predict` builds is read
//!   once, its count carried into the ledger, and renamed `<MODEL>.ledger.json.migrated`; no
//!   JSON ledger is ever written.

use crate::exit::usage;
use privpred_serve::ledger::{OpenOptions, SpendOutcome, SpendRequest, answer_key, blocking};
use privpred_serve::{Answer, LedgerSpec, ServeError, SpendMark};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// `path` with `suffix` appended to its file name.
fn beside(model: &Path, suffix: &str) -> PathBuf {
    let mut s = model.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The ledger named by `--ledger`, or the default `sqlite:<MODEL>.ledger.sqlite`.
pub(crate) fn ledger_spec(arg: Option<&str>, model: &Path) -> anyhow::Result<LedgerSpec> {
    match arg {
        Some(l) => LedgerSpec::parse(l).map_err(usage),
        None => Ok(LedgerSpec::Sqlite(beside(model, ".ledger.sqlite"))),
    }
}

/// The spend mark of a model file: `<MODEL>.ledger-mark.json`.
pub(crate) fn spend_mark(model: &Path) -> SpendMark {
    SpendMark::new(beside(model, ".ledger-mark.json"))
}

/// A ledger error as the CLI reports it: configuration errors exit 2.
pub(crate) fn ledger_err(e: ServeError) -> anyhow::Error {
    if e.is_config() {
        usage(e)
    } else {
        anyhow::Error::new(e)
    }
}

/// The ledger key of a model with a finite budget: its ledger id; a file without one is
/// refused (exit 2).
pub(crate) fn ledger_key(model: &Path, ledger_id: Option<&str>) -> anyhow::Result<String> {
    ledger_id.map(str::to_string).ok_or_else(|| {
        usage(format!(
            "{}: this model has a finite inference budget but its file carries no ledger id (it was written \
             by an earlier privpred). Its budget cannot be tied to the model: any key taken from the file's \
             bytes changes with an edit that keeps the file valid, and each would be a fresh budget. \
             Train the model again with this privpred to answer from it",
            model.display()
        ))
    })
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

/// The JSON ledger of earlier `predict` builds.
#[derive(Debug, Deserialize)]
struct JsonLedger {
    weights_sha256: String,
    budget: u64,
    spent: u64,
}

/// Reads `<MODEL>.ledger.json` if it exists: its count, after checking it belongs to these
/// weights and fits B (a foreign or corrupt one is refused, never ignored).
fn legacy_json(model: &Path, weights_sha256: &str, budget: u64) -> anyhow::Result<Option<u64>> {
    let lp = beside(model, ".ledger.json");
    let bytes = match std::fs::read(&lp) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(usage(format!("{}: {e}", lp.display()))),
    };
    let l: JsonLedger = serde_json::from_slice(&bytes).map_err(|e| {
        usage(format!(
            "{}: corrupt budget ledger ({e}); refusing to answer",
            lp.display()
        ))
    })?;
    if l.weights_sha256 != weights_sha256 {
        return Err(usage(format!(
            "{}: the ledger belongs to other model weights (sha256 {}, the model's are {weights_sha256}); \
             refusing to answer. Move it away if the model file was replaced on purpose",
            lp.display(),
            l.weights_sha256
        )));
    }
    if l.budget != budget || l.spent > l.budget {
        return Err(usage(format!(
            "{}: corrupt budget ledger (records {} spent of a budget of {}, the model states B = {budget}); \
             refusing to answer",
            lp.display(),
            l.spent,
            l.budget
        )));
    }
    Ok(Some(l.spent))
}

/// One budgeted answering run.
pub(crate) struct Spend<'a> {
    /// The model file (for the default ledger, the mark and the old JSON ledger).
    pub model: &'a Path,
    /// `--ledger`, if given.
    pub ledger: Option<&'a str>,
    /// The model's ledger id.
    pub ledger_id: &'a str,
    /// The SHA-256 of its weights (what old JSON ledgers were keyed by).
    pub weights_sha256: &'a str,
    /// B.
    pub budget: u64,
    /// `--init-ledger`.
    pub init: bool,
}

impl Spend<'_> {
    /// Records the answers to `rows` (the preprocessed queries, which key the answer store)
    /// durably before returning them, as the service does: one transaction checks the budget,
    /// adds the new answers' cost and stores them; the spend mark is raised; only then are the
    /// answers returned (a repeated row gets its stored earlier answer at no cost). A request
    /// that needs more than what is left is refused whole (exit 2), nothing spent.
    pub fn answer(&self, rows: &[Vec<f32>], fresh: Vec<Answer>) -> anyhow::Result<Vec<Answer>> {
        let spec = ledger_spec(self.ledger, self.model)?;
        let carried = legacy_json(self.model, self.weights_sha256, self.budget)?;
        let opts = OpenOptions {
            answer_store: true,
            init: self.init,
            carry_spent: carried,
            spend_mark: Some(spend_mark(self.model)),
        };
        let keys = rows
            .iter()
            .map(|r| answer_key(self.ledger_id, None, r))
            .collect();
        let req = SpendRequest { keys, fresh };
        let out = blocking::spend_once(&spec, self.ledger_id, self.budget, opts, req)
            .map_err(ledger_err)?;
        if carried.is_some() {
            let lp = beside(self.model, ".ledger.json");
            let done = beside(self.model, ".ledger.json.migrated");
            // NotFound: a concurrent run migrated it first (its count is carried either way)
            std::fs::rename(&lp, &done)
                .or_else(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => Ok(()),
                    _ => Err(e),
                })
                .map_err(|e| {
                usage(format!(
                    "{}: its count was carried into {}, but it could not be renamed to {} ({e}); move it away",
                    lp.display(),
                    spec.describe(),
                    done.display()
                ))
            })?;
            eprintln!(
                "privpred predict: migrated {} into {} (renamed to {})",
                lp.display(),
                spec.describe(),
                done.display()
            );
        }
        match out {
            SpendOutcome::Answered { answers, .. } => {
                Ok(answers.into_iter().map(|(a, _)| a).collect())
            }
            SpendOutcome::Exhausted { needed, state } => Err(usage(format!(
                "budget exhausted: {needed} new answers requested, {} of {} left for {} (ledger {})",
                state.remaining(),
                state.total,
                self.model.display(),
                spec.describe()
            ))),
        }
    }
}
