//! The budget ledger: durable, transactional accounting of the inference budget.
//!
//! Every answer of a private-prediction model costs one unit of the budget B (docs/guarantees.md#neighbouring-relations). The
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
//! * **Answer store** (on by default). Answers are keyed by SHA-256(model id ‖ scope ‖
//!   preprocessed row), where the scope is the client's bearer token (per-token, the default)
//!   or empty (shared: no tokens, or `--share-answer-store`). A repeated identical query
//!   (same preprocessed input, same scope) gets the stored earlier answer and spends nothing:
//!   it is post-processing of an already released answer. Identical rows inside one request
//!   or one group cost one unit.
//! * **Never created silently.** A ledger (SQLite file, or the model's budget record) is
//!   created only when asked for (`init`, the CLI's `--init-ledger`); otherwise a missing
//!   ledger or record is an error, so deleting a ledger can never reset a budget. `init` on a
//!   ledger that already holds the model's record is refused too (it never resets a record).
//! * **The file it writes is the file it opened** (SQLite). Before every transaction the
//!   writer compares the device and inode of the ledger path (and of its `-wal` file) with
//!   those of the files it opened; if the ledger was deleted or replaced underneath the
//!   server, every request fails closed (HTTP 503) and one log line says why.
//! * **Self-contained after a clean shutdown** (SQLite). [`Ledger::close`] checkpoints the
//!   write-ahead log into the main file (`PRAGMA wal_checkpoint(TRUNCATE)`), so after a
//!   clean shutdown the `.sqlite` file alone holds the whole ledger and can be copied. While
//!   the server runs, back up with `privpred ledger backup` (the SQLite online backup API).
//! * **Cannot go backwards silently.** With a [`SpendMark`] (the CLI keeps one beside the
//!   model file), the ledger's new `spent` is mirrored into the mark after every spending
//!   commit and before any answer is released, and a ledger whose `spent` is below the mark is
//!   refused when opened: a restored older backup, a re-created ledger or a lost `-wal` file
//!   cannot hand out released answers again ([`mark`] says what it cannot see).
//! * **Group commit.** Requests that arrive while a transaction is in flight are decided one
//!   by one, in arrival order, inside the next single transaction: one fsync serves many
//!   requests (throughput), without changing any per-request decision.

pub mod mark;
mod postgres;
mod sqlite;

pub use mark::SpendMark;

use crate::error::{Result, ServeError};
use crate::model::Answer;
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// The most rows decided in one group transaction.
pub const MAX_GROUP_ROWS: usize = 16_384;

/// Where the ledger lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerSpec {
    /// An SQLite database file: `sqlite:PATH` (created only with `init`).
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

/// The largest budget B a ledger can record: both databases store counts as signed 64-bit
/// integers.
pub const MAX_LEDGER_BUDGET: u64 = privpred_core::MAX_BUDGET;

/// Reads a stored count (a signed 64-bit database integer) as a u64, refusing a negative one
/// (a corrupt or edited ledger).
pub(crate) fn stored_count(what: &str, v: i64) -> Result<u64> {
    u64::try_from(v)
        .map_err(|_| ServeError::Ledger(format!("corrupt ledger: {what} = {v} is negative")))
}

/// A budget count as a database integer, refusing one above [`MAX_LEDGER_BUDGET`].
pub(crate) fn db_count(what: &str, v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| {
        ServeError::Ledger(format!(
            "{what} = {v} exceeds the largest count a ledger records ({MAX_LEDGER_BUDGET})"
        ))
    })
}

/// The message of a ledger error without its `ledger error:` prefix (so that an error
/// forwarded to another request is printed with one prefix, not two).
pub(crate) fn bare_message(e: &ServeError) -> String {
    match e {
        ServeError::Ledger(m) => m.clone(),
        e => e.to_string(),
    }
}

/// One model's budget record, as `privpred ledger show` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerRecord {
    /// The model's id (the ledger id its artifact records).
    pub model_id: String,
    /// B.
    pub total: u64,
    /// Units spent.
    pub spent: u64,
    /// B − spent.
    pub remaining: u64,
    /// When the record was created (UTC, ISO 8601).
    pub created_at: String,
    /// Answers kept in the answer store for this model.
    pub stored_answers: u64,
}

/// SHA-256 key of a preprocessed row.
pub type Key = [u8; 32];

/// Answer-store key: SHA-256(model id ‖ 0 ‖ [0xFF ‖ token hash] ‖ preprocessed row as
/// little-endian f32). The token part is present when the store is scoped per token; a row
/// has 4·d bytes and the token part 33, so scoped and unscoped keys never collide, and an
/// unscoped key is the same as before scoping existed (stored answers stay valid). Public so
/// that every writer of a ledger (the server, the Python package) keys answers alike.
pub fn answer_key(model_id: &str, scope: Option<&[u8; 32]>, row: &[f32]) -> Key {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(model_id.as_bytes());
    h.update([0u8]);
    if let Some(t) = scope {
        h.update([0xFFu8]);
        h.update(t);
    }
    for v in row {
        // Normalise −0.0 to 0.0 so that equal inputs hash equally.
        let v = if *v == 0.0 { 0.0f32 } else { *v };
        h.update(v.to_le_bytes());
    }
    h.finalize().into()
}

/// One request's freshly computed (still unreleased) answers and their keys.
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
    /// A real write transaction (health check): proves the ledger can be written now.
    Probe(oneshot::Sender<Result<BudgetState>>),
    /// Checkpoint (SQLite) and stop the writer.
    Close(oneshot::Sender<Result<()>>),
}

impl Job {
    fn rows(&self) -> usize {
        match self {
            Job::Spend(r, _) => r.keys.len().max(1),
            _ => 1,
        }
    }

    fn is_close(&self) -> bool {
        matches!(self, Job::Close(_))
    }
}

/// How [`Ledger::open_with`] opens a model's budget record.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Serve repeated identical queries from the answer store without spending.
    pub answer_store: bool,
    /// Create the ledger and the record (`--init-ledger`); refused if the record exists.
    pub init: bool,
    /// Raise the record's `spent` to at least this many units (never lowers it), creating the
    /// record with this count if it is missing: carries the count of an older ledger (a
    /// migrated `predict` ledger, a spend mark being reconciled) into this one.
    pub carry_spent: Option<u64>,
    /// The spend mark to check at open and to raise before every release.
    pub spend_mark: Option<SpendMark>,
}

/// The spend mark of an open ledger and the highest value this process wrote to it.
struct MarkState {
    mark: SpendMark,
    written: tokio::sync::Mutex<u64>,
}

/// A handle on an open ledger (cheap to clone). A single writer (a thread for SQLite, a task
/// for PostgreSQL) owns the connection and commits requests in groups.
#[derive(Clone)]
pub struct Ledger {
    tx: mpsc::Sender<Job>,
    description: String,
    model_id: String,
    mark: Option<Arc<MarkState>>,
}

impl Ledger {
    /// Opens the ledger and the budget record of `model_id` with total `total`.
    ///
    /// With `init` it creates the ledger (file, tables) where missing and the model's record,
    /// and refuses if the record already exists (`init` never resets a budget). Without
    /// `init`, a missing ledger or record is an error. Fails if the ledger cannot be
    /// written, or if it holds a different total for this model.
    pub async fn open(
        spec: &LedgerSpec,
        model_id: &str,
        total: u64,
        answer_store: bool,
        init: bool,
    ) -> Result<Ledger> {
        let opts = OpenOptions {
            answer_store,
            init,
            ..OpenOptions::default()
        };
        Self::open_with(spec, model_id, total, opts).await
    }

    /// [`Ledger::open`] with every option: `carry_spent` raises the record's count (creating
    /// a missing record with it), and with a `spend_mark` a ledger whose `spent` is below the
    /// mark is refused (a configuration error) and every spending commit raises the mark
    /// before its answers are returned.
    pub async fn open_with(
        spec: &LedgerSpec,
        model_id: &str,
        total: u64,
        opts: OpenOptions,
    ) -> Result<Ledger> {
        db_count("the budget B", total)?;
        let carry = opts.carry_spent.map(|c| c.min(total));
        let (answer_store, init) = (opts.answer_store, opts.init);
        let (tx, rx) = mpsc::channel::<Job>(4096);
        match spec {
            LedgerSpec::Sqlite(path) => {
                sqlite::start(
                    path.clone(),
                    model_id.to_string(),
                    total,
                    answer_store,
                    (init, carry),
                    rx,
                )
                .await?
            }
            LedgerSpec::Postgres(conn) => {
                postgres::start(
                    conn.clone(),
                    model_id.to_string(),
                    total,
                    answer_store,
                    (init, carry),
                    rx,
                )
                .await?
            }
        }
        let mut ledger = Ledger {
            tx,
            description: spec.describe(),
            model_id: model_id.to_string(),
            mark: None,
        };
        if let Some(mark) = opts.spend_mark {
            // the mark first, then the ledger (see `SpendMark::check`)
            let (m, id) = (mark.clone(), model_id.to_string());
            let high = tokio::task::spawn_blocking(move || m.read(&id))
                .await
                .map_err(|e| ServeError::Ledger(e.to_string()))??;
            let st = ledger.status().await?;
            mark.check(model_id, high, st.spent, &ledger.description)?;
            ledger.mark = Some(Arc::new(MarkState {
                mark,
                written: tokio::sync::Mutex::new(0),
            }));
        }
        Ok(ledger)
    }

    /// Where the ledger lives (no credentials).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The backend alone (`sqlite` or `postgres`), for what clients see: `/v1/model` never
    /// shows the ledger's path or host.
    pub fn kind(&self) -> &'static str {
        if self.description.starts_with("sqlite") {
            "sqlite"
        } else {
            "postgres"
        }
    }

    /// Sends one job to the writer thread and waits for its reply; a stopped writer or a
    /// dropped reply is a ledger error (the request fails closed).
    async fn ask<T>(&self, job: impl FnOnce(oneshot::Sender<Result<T>>) -> Job) -> Result<T> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(job(reply))
            .await
            .map_err(|_| ServeError::Ledger("ledger writer has stopped".into()))?;
        rx.await
            .map_err(|_| ServeError::Ledger("ledger writer dropped the request".into()))?
    }

    /// Decides and durably records one request (see the module docs). With a spend mark, the
    /// mark is raised to the new `spent` before the answers are returned; if that fails the
    /// request fails closed (its units stay spent, nothing is released).
    pub async fn spend(&self, req: SpendRequest) -> Result<SpendOutcome> {
        let out = self.ask(|r| Job::Spend(req, r)).await?;
        if let (Some(m), SpendOutcome::Answered { state, .. }) = (&self.mark, &out) {
            let mut written = m.written.lock().await;
            if *written < state.spent {
                let (mark, id, spent) = (m.mark.clone(), self.model_id.clone(), state.spent);
                tokio::task::spawn_blocking(move || mark.raise(&id, spent))
                    .await
                    .map_err(|e| ServeError::Ledger(e.to_string()))?
                    .map_err(|e| {
                        ServeError::Ledger(format!("{}; nothing released", bare_message(&e)))
                    })?;
                *written = spent;
            }
        }
        Ok(out)
    }

    /// The current budget as recorded.
    pub async fn status(&self) -> Result<BudgetState> {
        self.ask(Job::Status).await
    }

    /// Proves the ledger writable now: one real write transaction on the model's budget
    /// record (and, for SQLite, the check that the file is still the one opened). Returns
    /// the recorded budget. A predict would fail closed exactly when this fails.
    pub async fn probe(&self) -> Result<BudgetState> {
        self.ask(Job::Probe).await
    }

    /// Finishes with the ledger: SQLite checkpoints its write-ahead log into the main file
    /// (`PRAGMA wal_checkpoint(TRUNCATE)`), so the `.sqlite` file alone holds everything.
    /// Requests sent after this fail closed.
    pub async fn close(&self) -> Result<()> {
        self.ask(Job::Close).await
    }
}

/// Waits for one job, then takes whatever else is queued (up to [`MAX_GROUP_ROWS`] rows; a
/// `Close` ends the group).
fn take_group(first: Job, rx: &mut mpsc::Receiver<Job>) -> Vec<Job> {
    let mut rows = first.rows();
    let closing = first.is_close();
    let mut jobs = vec![first];
    while rows < MAX_GROUP_ROWS && !closing {
        match rx.try_recv() {
            Ok(j) if j.is_close() => {
                jobs.push(j);
                break;
            }
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
/// All budget arithmetic is checked: a sum that would pass u64::MAX refuses the request
/// (it can never wrap round to a small `spent`).
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
            needed = needed.saturating_add(1);
            answers.push((fresh.clone(), false));
        }
        let spent_so_far = state.spent.saturating_add(units);
        let available = state.total.saturating_sub(spent_so_far);
        if needed > available {
            outcomes.push(SpendOutcome::Exhausted {
                needed,
                state: BudgetState {
                    total: state.total,
                    spent: spent_so_far,
                },
            });
            continue;
        }
        // needed <= total - spent - units, so neither sum can overflow
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
        spent: state.spent.saturating_add(units),
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

/// Administrative operations on a ledger (inspection, backup, and fault injection for tests).
pub mod admin {
    use super::*;
    use std::path::Path;

    /// Every budget record in the ledger (read only; the ledger must exist).
    pub async fn show(spec: &LedgerSpec) -> Result<Vec<LedgerRecord>> {
        match spec {
            LedgerSpec::Sqlite(p) => {
                let p = p.clone();
                tokio::task::spawn_blocking(move || sqlite::show(&p))
                    .await
                    .map_err(|e| ServeError::Ledger(e.to_string()))?
            }
            LedgerSpec::Postgres(c) => postgres::show(c).await,
        }
    }

    /// Backs the ledger up into `out` (written whole or not at all): SQLite with the online
    /// backup API (a copy of the database file, consistent even while a server writes);
    /// PostgreSQL as a plain-SQL dump (restore with `psql -f`; restoring never lowers a
    /// recorded `spent`). Returns the number of budget records copied.
    pub async fn backup(spec: &LedgerSpec, out: &Path) -> Result<usize> {
        match spec {
            LedgerSpec::Sqlite(p) => {
                let p = p.clone();
                let out = out.to_path_buf();
                tokio::task::spawn_blocking(move || sqlite::backup(&p, &out))
                    .await
                    .map_err(|e| ServeError::Ledger(e.to_string()))?
            }
            LedgerSpec::Postgres(c) => {
                let sql = postgres::dump_sql(c).await?;
                let n = sql
                    .lines()
                    .filter(|l| l.starts_with("INSERT INTO privpred_budget"))
                    .count();
                write_file_atomic(out, sql.as_bytes())?;
                Ok(n)
            }
        }
    }

    /// Temp file beside `path`, synced, then renamed over it.
    fn write_file_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
        use std::io::Write;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        let name = path
            .file_name()
            .ok_or_else(|| ServeError::config("--out", "names no file"))?
            .to_string_lossy()
            .into_owned();
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let io = |context: String| move |e| ServeError::Io { context, source: e };
        let r = (|| {
            let mut f =
                std::fs::File::create(&tmp).map_err(io(format!("creating {}", tmp.display())))?;
            f.write_all(bytes)
                .map_err(io(format!("writing {}", tmp.display())))?;
            f.sync_all()
                .map_err(io(format!("syncing {}", tmp.display())))?;
            std::fs::rename(&tmp, path).map_err(io(format!("renaming to {}", path.display())))
        })();
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r
    }

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

    /// See [`admin::show`].
    pub fn show(spec: &LedgerSpec) -> Result<Vec<LedgerRecord>> {
        rt()?.block_on(admin::show(spec))
    }

    /// See [`admin::backup`].
    pub fn backup(spec: &LedgerSpec, out: &std::path::Path) -> Result<usize> {
        rt()?.block_on(admin::backup(spec, out))
    }

    /// Opens the ledger with `opts`, decides and records one request, and closes the ledger
    /// (an SQLite ledger is checkpointed into its main file, waiting its turn while other
    /// processes' connections block the checkpoint). The answers of an `Answered` outcome were
    /// committed (and the spend mark raised) before this returns. For a command that answers
    /// once and exits (`privpred predict`).
    pub fn spend_once(
        spec: &LedgerSpec,
        model_id: &str,
        total: u64,
        opts: OpenOptions,
        req: SpendRequest,
    ) -> Result<SpendOutcome> {
        rt()?.block_on(async {
            let l = Ledger::open_with(spec, model_id, total, opts).await?;
            let out = l.spend(req).await?;
            // Closed before returning: an SQLite ledger is checkpointed (retried while other
            // connections block it), so that its file alone (without the -wal file) holds
            // this spend when the process exits. The spend is committed either way: a
            // checkpoint still blocked after the close's bounded wait leaves it in the -wal
            // file, where every open of the ledger reads it.
            let _ = l.close().await;
            Ok(out)
        })
    }

    /// Raises the record of `model_id` to the spend mark (creating it with the mark's count
    /// if it is missing); never lowers it. Returns the count before (None: no record) and the
    /// budget after.
    pub fn reconcile(
        spec: &LedgerSpec,
        model_id: &str,
        total: u64,
        mark: &SpendMark,
    ) -> Result<(Option<BudgetState>, BudgetState)> {
        let before = admin_state(spec, model_id).ok().flatten();
        let carry = mark.read(model_id)?;
        rt()?.block_on(async {
            let opts = OpenOptions {
                answer_store: true,
                carry_spent: Some(carry),
                spend_mark: Some(mark.clone()),
                ..OpenOptions::default()
            };
            let l = Ledger::open_with(spec, model_id, total, opts).await?;
            Ok((before, l.status().await?))
        })
    }

    fn admin_state(spec: &LedgerSpec, model_id: &str) -> Result<Option<BudgetState>> {
        match spec {
            LedgerSpec::Sqlite(p) if !p.is_file() => Ok(None),
            _ => read_state(spec, model_id),
        }
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
    fn plan_arithmetic_is_checked_at_the_u64_edge() {
        // A budget at the edge of u64 never wraps: no unit is left, the request is refused.
        let r = SpendRequest {
            keys: vec![[1; 32], [2; 32]],
            fresh: vec![a(1), a(2)],
        };
        for spent in [u64::MAX - 1, u64::MAX] {
            let p = plan(
                &[&r],
                &HashMap::new(),
                BudgetState {
                    total: u64::MAX,
                    spent,
                },
                true,
            );
            assert_eq!(p.units, 0);
            assert!(matches!(
                p.outcomes[0],
                SpendOutcome::Exhausted { needed: 2, .. }
            ));
        }
        assert!(db_count("B", u64::MAX).is_err());
        assert!(db_count("B", MAX_LEDGER_BUDGET).is_ok());
        assert!(stored_count("spent", -1).is_err());
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
