//! SQLite backend: one writer thread owns the connection (WAL, `synchronous=FULL`) and
//! commits groups of requests with `BEGIN IMMEDIATE` (the database-wide write lock, so
//! several processes on one file never overspend either).

use super::{BudgetState, Job, Key, SpendOutcome, answer_from_json, answer_json, plan, take_group};
use crate::error::{Result, ServeError};
use crate::model::Answer;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS privpred_budget (
    model_id   TEXT PRIMARY KEY,
    total      INTEGER NOT NULL CHECK (total >= 0),
    spent      INTEGER NOT NULL CHECK (spent >= 0 AND spent <= total),
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE TABLE IF NOT EXISTS privpred_answers (
    model_id TEXT NOT NULL,
    key      BLOB NOT NULL,
    answer   TEXT NOT NULL,
    PRIMARY KEY (model_id, key)
) WITHOUT ROWID;
";

fn open(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| {
        ServeError::Ledger(format!("cannot open sqlite ledger {}: {e}", path.display()))
    })?;
    conn.busy_timeout(Duration::from_secs(10))?;
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(ServeError::Ledger(format!(
            "sqlite ledger {}: cannot enable WAL mode (got '{mode}')",
            path.display()
        )));
    }
    conn.execute_batch("PRAGMA synchronous=FULL;")?;
    Ok(conn)
}

fn init(conn: &mut Connection, model_id: &str, total: u64) -> Result<()> {
    // A write transaction at start-up: a read-only ledger fails here, before serving.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(SCHEMA)?;
    tx.execute(
        "INSERT INTO privpred_budget (model_id, total, spent) VALUES (?1, ?2, 0) ON CONFLICT (model_id) DO NOTHING",
        params![model_id, total as i64],
    )?;
    let (t, _s): (i64, i64) = tx.query_row(
        "SELECT total, spent FROM privpred_budget WHERE model_id = ?1",
        [model_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    if t as u64 != total {
        return Err(ServeError::Ledger(format!(
            "the ledger records a budget of {t} for model {model_id}, the model states {total}: refusing to serve"
        )));
    }
    // Touch the row so that the start-up transaction really writes (fails on a read-only file).
    tx.execute(
        "UPDATE privpred_budget SET spent = spent WHERE model_id = ?1",
        [model_id],
    )?;
    tx.commit()?;
    Ok(())
}

pub(super) async fn start(
    path: PathBuf,
    model_id: String,
    total: u64,
    answer_store: bool,
    mut rx: mpsc::Receiver<Job>,
) -> Result<()> {
    let (ready_tx, ready_rx) = oneshot::channel::<Result<()>>();
    std::thread::Builder::new()
        .name("privpred-ledger".into())
        .spawn(move || {
            let mut conn =
                match open(&path).and_then(|mut c| init(&mut c, &model_id, total).map(|_| c)) {
                    Ok(c) => {
                        let _ = ready_tx.send(Ok(()));
                        c
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
            while let Some(first) = rx.blocking_recv() {
                let jobs = take_group(first, &mut rx);
                run_group(&mut conn, &model_id, answer_store, jobs);
            }
        })
        .map_err(|e| ServeError::Io {
            context: "spawning the ledger thread".into(),
            source: e,
        })?;
    ready_rx
        .await
        .map_err(|_| ServeError::Ledger("ledger thread failed to start".into()))?
}

fn run_group(conn: &mut Connection, model_id: &str, answer_store: bool, jobs: Vec<Job>) {
    let mut spends = Vec::new();
    for job in jobs {
        match job {
            Job::Status(reply) => {
                let _ = reply.send(state(conn, model_id));
            }
            Job::Spend(req, reply) => spends.push((req, reply)),
        }
    }
    if spends.is_empty() {
        return;
    }
    let reqs: Vec<_> = spends.iter().map(|(r, _)| r).collect();
    let result = (|| -> Result<Vec<SpendOutcome>> {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let st = state(&tx, model_id)?;
        let mut existing: HashMap<Key, Answer> = HashMap::new();
        if answer_store {
            let mut stmt = tx.prepare_cached(
                "SELECT answer FROM privpred_answers WHERE model_id = ?1 AND key = ?2",
            )?;
            for r in &reqs {
                for k in &r.keys {
                    if existing.contains_key(k) {
                        continue;
                    }
                    let found: Option<String> = stmt
                        .query_row(params![model_id, &k[..]], |row| row.get(0))
                        .optional()?;
                    if let Some(s) = found {
                        existing.insert(*k, answer_from_json(&s)?);
                    }
                }
            }
        }
        let p = plan(&reqs, &existing, st, answer_store);
        if !p.inserts.is_empty() {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO privpred_answers (model_id, key, answer) VALUES (?1, ?2, ?3)",
            )?;
            for (k, a) in &p.inserts {
                stmt.execute(params![model_id, &k[..], answer_json(a)])?;
            }
        }
        if p.units > 0 {
            let n = tx.execute(
                "UPDATE privpred_budget SET spent = spent + ?2 WHERE model_id = ?1 AND spent + ?2 <= total",
                params![model_id, p.units as i64],
            )?;
            if n != 1 {
                return Err(ServeError::Ledger(
                    "budget update refused by the ledger".into(),
                ));
            }
        }
        tx.commit()?;
        Ok(p.outcomes)
    })();
    match result {
        Ok(outcomes) => {
            for ((_, reply), o) in spends.into_iter().zip(outcomes) {
                let _ = reply.send(Ok(o));
            }
        }
        Err(e) => {
            let msg = e.to_string();
            for (_, reply) in spends {
                let _ = reply.send(Err(ServeError::Ledger(msg.clone())));
            }
        }
    }
}

fn state(conn: &Connection, model_id: &str) -> Result<BudgetState> {
    let (t, s): (i64, i64) = conn
        .query_row(
            "SELECT total, spent FROM privpred_budget WHERE model_id = ?1",
            [model_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?
        .ok_or_else(|| ServeError::Ledger(format!("no budget row for model {model_id}")))?;
    Ok(BudgetState {
        total: t as u64,
        spent: s as u64,
    })
}

pub(super) fn read_state(path: &Path, model_id: &str) -> Result<Option<BudgetState>> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    match state(&conn, model_id) {
        Ok(s) => Ok(Some(s)),
        Err(_) => Ok(None),
    }
}

pub(super) fn block_writes(path: &Path, model_id: &str) -> Result<()> {
    let conn = open(path)?;
    let name = format!("privpred_block_{}", &model_id[..model_id.len().min(16)]);
    conn.execute_batch(&format!(
        "CREATE TRIGGER IF NOT EXISTS {name} BEFORE UPDATE ON privpred_budget WHEN NEW.model_id = '{}' \
         BEGIN SELECT RAISE(ABORT, 'ledger is read-only (administrative block)'); END;",
        model_id.replace('\'', "''")
    ))?;
    Ok(())
}
