//! The budget ledger: durable, transactional accounting of the inference budget.
//!
//! Every answer of a private-prediction model costs one unit of the budget B (SPEC §1). The
//! ledger guarantees, for SQLite and PostgreSQL alike:
//!
//! * **Recorded before release.** A request's answers are computed in memory, then one
//!   transaction checks the remaining budget, adds the cost to `spent` and stores the answers
//!   (the answer store), and commits durably (SQLite: WAL + `synchronous=FULL`; PostgreSQL:
//!   `synchronous_commit=on`). Only after the commit does any answer leave the process. A crash
//!   at any moment therefore loses at most unreleased answers, never releases unrecorded ones:
//!   `kill -9` never yields more than B answers in total.
//! * **No overspend under concurrency.** Each transaction first takes the ledger's write lock
//!   (SQLite `BEGIN IMMEDIATE`, a single writer across processes; PostgreSQL
//!   `SELECT … FOR UPDATE` on the model's budget row, shared by all replicas), and the final
//!   `UPDATE … SET spent = spent + k WHERE spent + k <= total` plus a `CHECK (spent <= total)`
//!   constraint refuse any overspend at the database level as well.
//! * **Fails closed.** If the transaction cannot be written (read-only file, full disk, lost
//!   connection, constraint), nothing is answered (HTTP 503).
//! * **All or nothing per request.** A request that needs k new units when fewer than k remain
//!   is refused whole (HTTP 429, reporting how many remain), so a client can resend a smaller
//!   batch; no partial batches are answered.
//! * **Answer store** (on by default). Answers are keyed by SHA-256(model id ‖ preprocessed
//!   row). A repeated identical query (same preprocessed input) gets the stored earlier answer
//!   and spends nothing: it is post-processing of an already released answer. Identical rows
//!   inside one request or one group cost one unit.
//! * **Group commit.** Requests that arrive while a transaction is in flight are decided one
//!   by one, in arrival order, inside the next single transaction: one fsync serves many
//!   requests (throughput), without changing any per-request decision.

mod postgres;
mod sqlite;

use crate::error::{Result, ServeError};
use crate::model::Answer;
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use tokio::sync::{mpsc, oneshot};

/// The most rows decided in one group transaction.
pub const MAX_GROUP_ROWS: usize = 16_384;

/// Where the ledger lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerSpec {
    /// An SQLite database file (created if absent): `sqlite:PATH`.
    Sqlite(PathBuf),
    /// A PostgreSQL connection string: `postgres://…`, `postgresql://…`, or a libpq
    /// key=value string such as `"host=127.0.0.1 port=5432 user=u dbname=d"`.
    Postgres(String),
}

impl LedgerSpec {
    /// Parses `sqlite:PATH`, `postgres://…` / `postgresql://…`, or a libpq `key=value` string.
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim();
        if let Some(p) = s.strip_prefix("sqlite:") {
            let p = p.strip_prefix("//").unwrap_or(p);
            if p.is_empty() {
                return Err(ServeError::config(
                    "--ledger",
                    "sqlite: needs a path, e.g. sqlite:./ledger.sqlite",
                ));
            }
            return Ok(LedgerSpec::Sqlite(PathBuf::from(p)));
        }
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(LedgerSpec::Postgres(s.to_string()));
        }
        if let Some(p) = s.strip_prefix("postgres:") {
            return Ok(LedgerSpec::Postgres(p.to_string()));
        }
        if s.contains('=') && s.split_whitespace().all(|kv| kv.contains('=')) {
            return Ok(LedgerSpec::Postgres(s.to_string()));
        }
        Err(ServeError::config(
            "--ledger",
            format!(
                "'{s}' is not a ledger: use sqlite:PATH, postgres://user@host:port/db, or a libpq string \"host=… port=… user=… dbname=…\""
            ),
        ))
    }

    /// A description without credentials (for logs and `/v1/model`).
    pub fn describe(&self) -> String {
        match self {
            LedgerSpec::Sqlite(p) => format!("sqlite:{}", p.display()),
            LedgerSpec::Postgres(s) => {
                if let Some(rest) = s.split_once("://").map(|x| x.1) {
                    let host = rest.rsplit_once('@').map(|x| x.1).unwrap_or(rest);
                    format!("postgres://{}", host.split('?').next().unwrap_or(host))
                } else {
                    let kept: Vec<&str> = s
                        .split_whitespace()
                        .filter(|kv| !kv.to_ascii_lowercase().starts_with("password"))
                        .collect();
                    format!("postgres:{}", kept.join(" "))
                }
            }
        }
    }
}

/// The budget of one model as recorded in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BudgetState {
    /// B.
    pub total: u64,
    /// Units spent (answers released, plus any recorded but lost in a crash).
    pub spent: u64,
}

impl BudgetState {
    /// B − spent.
    pub fn remaining(&self) -> u64 {
        self.total.saturating_sub(self.spent)
    }
}

/// SHA-256 key of a preprocessed row.
pub type Key = [u8; 32];

/// One request's freshly computed (not yet released) answers and their keys.
#[derive(Debug)]
pub struct SpendRequest {
    /// One key per row (SHA-256 of model id and preprocessed row).
    pub keys: Vec<Key>,
    /// One fresh answer per row.
    pub fresh: Vec<Answer>,
}

/// The ledger's decision on one request.
#[derive(Debug, Clone)]
pub enum SpendOutcome {
    /// Recorded durably: these answers may be released.
    Answered {
        /// One per row, with `true` where it is a stored earlier answer (no cost).
        answers: Vec<(Answer, bool)>,
        /// Units this request spent.
        spent_now: u64,
        /// The budget after the group transaction.
        state: BudgetState,
    },
    /// Refused: the request needs more units than remain. Nothing was spent.
    Exhausted {
        /// Units the request would need.
        needed: u64,
        /// The budget at the decision (remaining = what was left for this request).
        state: BudgetState,
    },
}

enum Job {
    Spend(SpendRequest, oneshot::Sender<Result<SpendOutcome>>),
    Status(oneshot::Sender<Result<BudgetState>>),
}

impl Job {
    fn rows(&self) -> usize {
        match self {
            Job::Spend(r, _) => r.keys.len().max(1),
            Job::Status(_) => 1,
        }
    }
}

/// A handle on an open ledger (cheap to clone). A single writer (a thread for SQLite, a task
/// for PostgreSQL) owns the connection and commits requests in groups.
#[derive(Clone)]
pub struct Ledger {
    tx: mpsc::Sender<Job>,
    description: String,
}

impl Ledger {
    /// Opens (creating tables if needed) the ledger and the budget row of `model_id` with
    /// total `total`. Fails if the ledger cannot be written, or if it already holds a
    /// different total for this model.
    pub async fn open(
        spec: &LedgerSpec,
        model_id: &str,
        total: u64,
        answer_store: bool,
    ) -> Result<Ledger> {
        let (tx, rx) = mpsc::channel::<Job>(4096);
        match spec {
            LedgerSpec::Sqlite(path) => {
                sqlite::start(path.clone(), model_id.to_string(), total, answer_store, rx).await?
            }
            LedgerSpec::Postgres(conn) => {
                postgres::start(conn.clone(), model_id.to_string(), total, answer_store, rx).await?
            }
        }
        Ok(Ledger {
            tx,
            description: spec.describe(),
        })
    }

    /// Where the ledger lives (no credentials).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Decides and durably records one request (see the module docs).
    pub async fn spend(&self, req: SpendRequest) -> Result<SpendOutcome> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job::Spend(req, reply))
            .await
            .map_err(|_| ServeError::Ledger("ledger writer has stopped".into()))?;
        rx.await
            .map_err(|_| ServeError::Ledger("ledger writer dropped the request".into()))?
    }

    /// The current budget as recorded.
    pub async fn status(&self) -> Result<BudgetState> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job::Status(reply))
            .await
            .map_err(|_| ServeError::Ledger("ledger writer has stopped".into()))?;
        rx.await
            .map_err(|_| ServeError::Ledger("ledger writer dropped the request".into()))?
    }
}

/// Waits for one job, then takes whatever else is queued (up to [`MAX_GROUP_ROWS`] rows).
fn take_group(first: Job, rx: &mut mpsc::Receiver<Job>) -> Vec<Job> {
    let mut rows = first.rows();
    let mut jobs = vec![first];
    while rows < MAX_GROUP_ROWS {
        match rx.try_recv() {
            Ok(j) => {
                rows += j.rows();
                jobs.push(j);
            }
            Err(_) => break,
        }
    }
    jobs
}

/// The decisions for one group, computed inside the transaction from the locked budget and
/// the stored answers.
struct Plan {
    outcomes: Vec<SpendOutcome>,
    inserts: Vec<(Key, Answer)>,
    units: u64,
}

/// Decides each request in order (pure function: the backends supply the locked state).
fn plan(
    requests: &[&SpendRequest],
    existing: &HashMap<Key, Answer>,
    state: BudgetState,
    answer_store: bool,
) -> Plan {
    let mut group_new: HashMap<Key, Answer> = HashMap::new();
    let mut inserts = Vec::new();
    let mut units = 0u64;
    let mut outcomes = Vec::with_capacity(requests.len());
    for req in requests {
        let mut answers = Vec::with_capacity(req.keys.len());
        let mut mine: HashMap<Key, Answer> = HashMap::new();
        let mut order: Vec<Key> = Vec::new();
        let mut needed = 0u64;
        for (key, fresh) in req.keys.iter().zip(&req.fresh) {
            if answer_store {
                if let Some(a) = existing.get(key).or_else(|| group_new.get(key)) {
                    answers.push((a.clone(), true));
                    continue;
                }
                if let Some(a) = mine.get(key) {
                    answers.push((a.clone(), true));
                    continue;
                }
                mine.insert(*key, fresh.clone());
                order.push(*key);
            }
            needed += 1;
            answers.push((fresh.clone(), false));
        }
        let available = state.total.saturating_sub(state.spent + units);
        if needed > available {
            outcomes.push(SpendOutcome::Exhausted {
                needed,
                state: BudgetState {
                    total: state.total,
                    spent: state.spent + units,
                },
            });
            continue;
        }
        units += needed;
        for k in order {
            let a = mine.remove(&k).expect("key recorded");
            inserts.push((k, a.clone()));
            group_new.insert(k, a);
        }
        outcomes.push(SpendOutcome::Answered {
            answers,
            spent_now: needed,
            state,
        });
    }
    let after = BudgetState {
        total: state.total,
        spent: state.spent + units,
    };
    for o in outcomes.iter_mut() {
        if let SpendOutcome::Answered { state, .. } = o {
            *state = after;
        }
    }
    Plan {
        outcomes,
        inserts,
        units,
    }
}

fn answer_json(a: &Answer) -> String {
    serde_json::to_string(a).expect("answer serialises")
}

fn answer_from_json(s: &str) -> Result<Answer> {
    serde_json::from_str(s).map_err(|e| ServeError::Ledger(format!("corrupt stored answer: {e}")))
}

/// Administrative operations on a ledger (inspection, and fault injection for tests).
pub mod admin {
    use super::*;

    /// Reads the recorded budget of `model_id` (None if the ledger has no row for it).
    pub async fn read_state(spec: &LedgerSpec, model_id: &str) -> Result<Option<BudgetState>> {
        match spec {
            LedgerSpec::Sqlite(p) => {
                let p = p.clone();
                let id = model_id.to_string();
                tokio::task::spawn_blocking(move || sqlite::read_state(&p, &id))
                    .await
                    .map_err(|e| ServeError::Ledger(e.to_string()))?
            }
            LedgerSpec::Postgres(c) => postgres::read_state(c, model_id).await,
        }
    }

    /// Makes every further budget update of `model_id` fail (a database trigger), simulating
    /// a ledger that cannot be written. For fail-closed tests.
    pub async fn block_writes(spec: &LedgerSpec, model_id: &str) -> Result<()> {
        match spec {
            LedgerSpec::Sqlite(p) => {
                let p = p.clone();
                let id = model_id.to_string();
                tokio::task::spawn_blocking(move || sqlite::block_writes(&p, &id))
                    .await
                    .map_err(|e| ServeError::Ledger(e.to_string()))?
            }
            LedgerSpec::Postgres(c) => postgres::block_writes(c, model_id).await,
        }
    }
}

/// Blocking wrappers of [`admin`] for callers without an async runtime (tests, CLI tools).
pub mod blocking {
    use super::*;

    fn rt() -> Result<tokio::runtime::Runtime> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ServeError::Io {
                context: "starting the async runtime".into(),
                source: e,
            })
    }

    /// See [`admin::read_state`].
    pub fn read_state(spec: &LedgerSpec, model_id: &str) -> Result<Option<BudgetState>> {
        rt()?.block_on(admin::read_state(spec, model_id))
    }

    /// Creates a PostgreSQL schema (for isolated tests); no-op for SQLite.
    pub fn create_schema(spec: &LedgerSpec, schema: &str) -> Result<()> {
        match spec {
            LedgerSpec::Sqlite(_) => Ok(()),
            LedgerSpec::Postgres(c) => rt()?.block_on(postgres::create_schema(c, schema)),
        }
    }

    /// See [`admin::block_writes`].
    pub fn block_writes(spec: &LedgerSpec, model_id: &str) -> Result<()> {
        rt()?.block_on(admin::block_writes(spec, model_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(label: u32) -> Answer {
        Answer {
            label,
            scores: None,
        }
    }

    #[test]
    fn plan_refuses_whole_request_and_dedups() {
        let r1 = SpendRequest {
            keys: vec![[1; 32], [2; 32], [1; 32]],
            fresh: vec![a(1), a(2), a(3)],
        };
        let r2 = SpendRequest {
            keys: vec![[3; 32], [4; 32]],
            fresh: vec![a(4), a(5)],
        };
        let r3 = SpendRequest {
            keys: vec![[2; 32]],
            fresh: vec![a(6)],
        };
        let p = plan(
            &[&r1, &r2, &r3],
            &HashMap::new(),
            BudgetState { total: 3, spent: 0 },
            true,
        );
        assert_eq!(p.units, 2);
        match &p.outcomes[0] {
            SpendOutcome::Answered {
                answers,
                spent_now,
                state,
            } => {
                assert_eq!(*spent_now, 2);
                assert_eq!(answers[2], (a(1), true));
                assert_eq!(state.spent, 2);
            }
            o => panic!("{o:?}"),
        }
        assert!(matches!(
            p.outcomes[1],
            SpendOutcome::Exhausted {
                needed: 2,
                state: BudgetState { total: 3, spent: 2 }
            }
        ));
        match &p.outcomes[2] {
            SpendOutcome::Answered {
                answers,
                spent_now: 0,
                ..
            } => assert_eq!(answers[0], (a(2), true)),
            o => panic!("{o:?}"),
        }
        assert_eq!(p.inserts.len(), 2);
    }

    #[test]
    fn plan_without_store_charges_every_row() {
        let r1 = SpendRequest {
            keys: vec![[1; 32], [1; 32]],
            fresh: vec![a(1), a(2)],
        };
        let p = plan(
            &[&r1],
            &HashMap::new(),
            BudgetState { total: 5, spent: 0 },
            false,
        );
        assert_eq!(p.units, 2);
        assert!(p.inserts.is_empty());
    }

    #[test]
    fn spec_parsing() {
        assert_eq!(
            LedgerSpec::parse("sqlite:/tmp/x.db").unwrap(),
            LedgerSpec::Sqlite("/tmp/x.db".into())
        );
        assert!(matches!(
            LedgerSpec::parse("postgres://u:pw@h:1/d").unwrap(),
            LedgerSpec::Postgres(_)
        ));
        assert!(matches!(
            LedgerSpec::parse("host=127.0.0.1 port=5 user=u").unwrap(),
            LedgerSpec::Postgres(_)
        ));
        assert!(LedgerSpec::parse("mysql://x").is_err());
        assert!(LedgerSpec::parse("sqlite:").is_err());
        assert_eq!(
            LedgerSpec::parse("postgres://u:pw@h:1/d")
                .unwrap()
                .describe(),
            "postgres://h:1/d"
        );
        assert!(
            !LedgerSpec::parse("host=h password=secret")
                .unwrap()
                .describe()
                .contains("secret")
        );
    }
}
