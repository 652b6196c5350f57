//! PostgreSQL backend, for several replicas sharing one budget. One writer task per server
//! commits groups of requests; replicas serialise on the model's budget row
//! (`SELECT … FOR UPDATE`), and the final `UPDATE … SET spent = spent + k WHERE spent + k <=
//! total RETURNING …` refuses any overspend at the database level.

use super::{
    BudgetState, Job, Key, LedgerRecord, SpendOutcome, answer_from_json, answer_json, bare_message,
    db_count, plan, stored_count, take_group,
};
use crate::error::{AnswerError, Result};
use privpred_core::Answer;
use std::collections::HashMap;
use tokio::sync::mpsc;
use tokio_postgres::{Client, NoTls};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS privpred_budget (
    model_id   TEXT PRIMARY KEY,
    total      BIGINT NOT NULL CHECK (total >= 0),
    spent      BIGINT NOT NULL CHECK (spent >= 0 AND spent <= total),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS privpred_answers (
    model_id TEXT NOT NULL,
    key      BYTEA NOT NULL,
    answer   TEXT NOT NULL,
    PRIMARY KEY (model_id, key)
);
";

/// An arbitrary constant identifying privpred's schema-creation advisory lock.
const SCHEMA_LOCK: i64 = 0x7072_6976_7072_6564;

async fn connect(conn: &str) -> Result<Client> {
    let (client, connection) = tokio_postgres::connect(conn, NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    // Durable commits even where the server's default says otherwise.
    client.batch_execute("SET synchronous_commit = on").await?;
    Ok(client)
}

async fn has_budget_table(c: &impl tokio_postgres::GenericClient) -> Result<bool> {
    let row = c
        .query_one("SELECT to_regclass('privpred_budget') IS NOT NULL", &[])
        .await?;
    Ok(row.get(0))
}

/// Checks (and with `create` makes) the model's record in one transaction; `carry` raises its
/// `spent` to at least that count, creating a missing record with it.
async fn init(
    client: &mut Client,
    model_id: &str,
    total: u64,
    (create, carry): (bool, Option<u64>),
) -> Result<()> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .await?;
    let existing = if has_budget_table(&tx).await? {
        tx.query_opt(
            "SELECT total, spent FROM privpred_budget WHERE model_id = $1 FOR UPDATE",
            &[&model_id],
        )
        .await?
        .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1)))
    } else {
        None
    };
    match (existing, create) {
        (Some((t, s)), true) => {
            return Err(AnswerError::config(
                "--init-ledger",
                format!(
                    "the postgres ledger already holds the budget record of model {model_id} ({s} of {t} spent); \
                 --init-ledger only creates a new record and never resets one: drop --init-ledger to serve it"
                ),
            ));
        }
        (None, false) if carry.is_none() => {
            return Err(AnswerError::config(
                "--ledger",
                format!(
                    "the postgres ledger holds no budget record for model {model_id}; pass --init-ledger to create \
                 a new budget record (a ledger is never created silently: a fresh ledger would reset the budget)"
                ),
            ));
        }
        (None, _) => {
            tx.batch_execute(SCHEMA).await?;
            tx.execute(
                "INSERT INTO privpred_budget (model_id, total, spent) VALUES ($1, $2, $3)",
                &[
                    &model_id,
                    &db_count("the budget B", total)?,
                    &db_count("spent", carry.unwrap_or(0).min(total))?,
                ],
            )
            .await?;
        }
        (Some(_), false) => {}
    }
    let row = tx
        .query_one(
            "SELECT total, spent FROM privpred_budget WHERE model_id = $1 FOR UPDATE",
            &[&model_id],
        )
        .await?;
    let t = stored_count("total", row.get(0))?;
    let s = stored_count("spent", row.get(1))?;
    if s > t {
        return Err(AnswerError::config(
            "--ledger",
            format!(
                "corrupt ledger: the postgres ledger records {s} answers spent of a budget of {t} for model {model_id} (spent can never exceed the budget: the table was edited)"
            ),
        ));
    }
    if t != total {
        return Err(AnswerError::Ledger(format!(
            "the ledger records a budget of {t} for model {model_id}, the model states {total}: refusing to serve"
        )));
    }
    tx.execute(
        "UPDATE privpred_budget SET spent = GREATEST(spent, $2) WHERE model_id = $1",
        &[
            &model_id,
            &db_count("spent", carry.unwrap_or(0).min(total))?,
        ],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

pub(super) async fn start(
    conn: String,
    model_id: String,
    total: u64,
    answer_store: bool,
    init_mode: (bool, Option<u64>),
    mut rx: mpsc::Receiver<Job>,
) -> Result<()> {
    let mut client = connect(&conn).await?;
    init(&mut client, &model_id, total, init_mode).await?;
    tokio::spawn(async move {
        let mut client = Some(client);
        while let Some(first) = rx.recv().await {
            let jobs = take_group(first, &mut rx);
            let closing = jobs.iter().any(Job::is_close);
            if client.as_ref().is_none_or(|c| c.is_closed()) {
                // Reconnect after a lost connection; while it fails, every request fails closed.
                client = connect(&conn).await.ok();
            }
            match client.as_mut() {
                Some(c) => run_group(c, &model_id, answer_store, jobs).await,
                None => fail_all(jobs, "cannot connect to the postgres ledger"),
            }
            if closing {
                break;
            }
        }
    });
    Ok(())
}

fn fail_all(jobs: Vec<Job>, msg: &str) {
    for job in jobs {
        match job {
            Job::Status(r) => {
                let _ = r.send(Err(AnswerError::Ledger(msg.into())));
            }
            Job::Spend(_, r) => {
                let _ = r.send(Err(AnswerError::Ledger(msg.into())));
            }
            Job::Probe(r) => {
                let _ = r.send(Err(AnswerError::Ledger(msg.into())));
            }
            Job::Close(r) => {
                let _ = r.send(Ok(()));
            }
        }
    }
}

/// A real write transaction on the model's record (a health check).
async fn probe(client: &mut Client, model_id: &str) -> Result<BudgetState> {
    let tx = client.transaction().await?;
    let row = tx
        .query_opt(
            "UPDATE privpred_budget SET spent = spent WHERE model_id = $1 RETURNING total, spent",
            &[&model_id],
        )
        .await?
        .ok_or_else(|| AnswerError::Ledger(format!("no budget row for model {model_id}")))?;
    let st = BudgetState {
        total: stored_count("total", row.get(0))?,
        spent: stored_count("spent", row.get(1))?,
    };
    tx.commit().await?;
    Ok(st)
}

async fn run_group(client: &mut Client, model_id: &str, answer_store: bool, jobs: Vec<Job>) {
    let mut spends = Vec::new();
    let mut close = None;
    for job in jobs {
        match job {
            Job::Status(reply) => {
                let _ = reply.send(state(client, model_id, false).await);
            }
            Job::Probe(reply) => {
                let _ = reply.send(probe(client, model_id).await);
            }
            Job::Spend(req, reply) => spends.push((req, reply)),
            Job::Close(reply) => close = Some(reply),
        }
    }
    if !spends.is_empty() {
        spend_group(client, model_id, answer_store, spends).await;
    }
    if let Some(reply) = close {
        // Every commit is already durable on the server: nothing to flush.
        let _ = reply.send(Ok(()));
    }
}

type SpendJob = (
    super::SpendRequest,
    tokio::sync::oneshot::Sender<Result<SpendOutcome>>,
);

async fn spend_group(
    client: &mut Client,
    model_id: &str,
    answer_store: bool,
    spends: Vec<SpendJob>,
) {
    let reqs: Vec<_> = spends.iter().map(|(r, _)| r).collect();
    let result: Result<Vec<SpendOutcome>> = async {
        let tx = client.transaction().await?;
        let row = tx
            .query_opt("SELECT total, spent FROM privpred_budget WHERE model_id = $1 FOR UPDATE", &[&model_id])
            .await?
            .ok_or_else(|| AnswerError::Ledger(format!("no budget row for model {model_id}")))?;
        let st = BudgetState {
            total: stored_count("total", row.get(0))?,
            spent: stored_count("spent", row.get(1))?,
        };
        let mut existing: HashMap<Key, Answer> = HashMap::new();
        if answer_store {
            let mut keys: Vec<&[u8]> = reqs.iter().flat_map(|r| r.keys.iter().map(|k| &k[..])).collect();
            keys.sort_unstable();
            keys.dedup();
            let rows = tx
                .query(
                    "SELECT key, answer FROM privpred_answers WHERE model_id = $1 AND key = ANY($2)",
                    &[&model_id, &keys],
                )
                .await?;
            for r in rows {
                let k: &[u8] = r.get(0);
                let a: &str = r.get(1);
                let key: Key = k.try_into().map_err(|_| AnswerError::Ledger("corrupt answer key".into()))?;
                existing.insert(key, answer_from_json(a)?);
            }
        }
        let p = plan(&reqs, &existing, st, answer_store);
        if !p.inserts.is_empty() {
            let keys: Vec<&[u8]> = p.inserts.iter().map(|(k, _)| &k[..]).collect();
            let answers: Vec<String> = p.inserts.iter().map(|(_, a)| answer_json(a)).collect();
            tx.execute(
                "INSERT INTO privpred_answers (model_id, key, answer) \
                 SELECT $1, k, a FROM unnest($2::bytea[], $3::text[]) AS t(k, a)",
                &[&model_id, &keys, &answers],
            )
            .await?;
        }
        if p.units > 0 {
            let updated = tx
                .query_opt(
                    "UPDATE privpred_budget SET spent = spent + $2 WHERE model_id = $1 AND spent <= total - $2 \
                     RETURNING total, spent",
                    &[&model_id, &db_count("units", p.units)?],
                )
                .await?;
            if updated.is_none() {
                return Err(AnswerError::Ledger("budget update refused by the ledger".into()));
            }
        }
        tx.commit().await?;
        Ok(p.outcomes)
    }
    .await;
    match result {
        Ok(outcomes) => {
            for ((_, reply), o) in spends.into_iter().zip(outcomes) {
                let _ = reply.send(Ok(o));
            }
        }
        Err(e) => {
            let msg = bare_message(&e);
            for (_, reply) in spends {
                let _ = reply.send(Err(AnswerError::Ledger(msg.clone())));
            }
        }
    }
}

async fn state(client: &Client, model_id: &str, missing_ok: bool) -> Result<BudgetState> {
    let row = client
        .query_opt(
            "SELECT total, spent FROM privpred_budget WHERE model_id = $1",
            &[&model_id],
        )
        .await?;
    match row {
        Some(r) => Ok(BudgetState {
            total: stored_count("total", r.get(0))?,
            spent: stored_count("spent", r.get(1))?,
        }),
        None if missing_ok => Ok(BudgetState { total: 0, spent: 0 }),
        None => Err(AnswerError::Ledger(format!(
            "no budget row for model {model_id}"
        ))),
    }
}

pub(super) async fn read_state(conn: &str, model_id: &str) -> Result<Option<BudgetState>> {
    let client = connect(conn).await?;
    let row = client
        .query_opt(
            "SELECT total, spent FROM privpred_budget WHERE model_id = $1",
            &[&model_id],
        )
        .await;
    match row {
        Ok(Some(r)) => Ok(Some(BudgetState {
            total: stored_count("total", r.get(0))?,
            spent: stored_count("spent", r.get(1))?,
        })),
        Ok(None) => Ok(None),
        Err(e) if e.as_db_error().is_some() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

pub(super) async fn block_writes(conn: &str, model_id: &str) -> Result<()> {
    let client = connect(conn).await?;
    let name = format!("privpred_block_{}", &model_id[..model_id.len().min(16)]);
    client
        .batch_execute(&format!(
            "CREATE OR REPLACE FUNCTION privpred_block_fn() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'ledger is read-only (administrative block)'; END $$; \
             CREATE TRIGGER {name} BEFORE UPDATE ON privpred_budget FOR EACH ROW \
             WHEN (NEW.model_id = '{}') EXECUTE FUNCTION privpred_block_fn();",
            model_id.replace('\'', "''")
        ))
        .await?;
    Ok(())
}

pub(super) async fn create_schema(conn: &str, schema: &str) -> Result<()> {
    if schema.is_empty()
        || !schema
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(AnswerError::config(
            "schema",
            "use letters, digits and _ only",
        ));
    }
    let client = connect(conn).await?;
    client
        .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
        .await?;
    Ok(())
}

/// Every budget record, with the number of stored answers of each model.
pub(super) async fn show(conn: &str) -> Result<Vec<LedgerRecord>> {
    let client = connect(conn).await?;
    if !has_budget_table(&client).await? {
        return Err(AnswerError::Ledger(
            "the postgres ledger holds no privpred_budget table (no ledger was initialised there)"
                .into(),
        ));
    }
    let rows = client
        .query(
            "SELECT b.model_id, b.total, b.spent, to_char(b.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), \
             (SELECT count(*) FROM privpred_answers a WHERE a.model_id = b.model_id) \
             FROM privpred_budget b ORDER BY b.model_id",
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let total = stored_count("total", r.get(1))?;
            let spent = stored_count("spent", r.get(2))?;
            Ok(LedgerRecord {
                model_id: r.get(0),
                total,
                spent,
                remaining: total.saturating_sub(spent),
                created_at: r.get(3),
                stored_answers: stored_count("answers", r.get(4))?,
            })
        })
        .collect()
}

/// SQL text literal (standard-conforming strings).
fn sql_text(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A plain-SQL dump of the ledger (one consistent snapshot: a REPEATABLE READ transaction),
/// restorable with `psql -f`. Restoring never lowers a recorded `spent`.
pub(super) async fn dump_sql(conn: &str) -> Result<String> {
    let mut client = connect(conn).await?;
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    if !has_budget_table(&tx).await? {
        return Err(AnswerError::Ledger(
            "the postgres ledger holds no privpred_budget table (no ledger was initialised there)"
                .into(),
        ));
    }
    let mut out = String::from(
        "-- privpred ledger dump (PostgreSQL); restore with: psql -v ON_ERROR_STOP=1 -f FILE\n\
         -- Restoring never lowers a recorded spent (GREATEST), so a stale dump cannot reset a budget.\n\
         BEGIN;\n",
    );
    out.push_str(SCHEMA.trim());
    out.push('\n');
    let budget = tx
        .query(
            "SELECT model_id, total, spent, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') \
             FROM privpred_budget ORDER BY model_id",
            &[],
        )
        .await?;
    for r in &budget {
        let id: String = r.get(0);
        let t = stored_count("total", r.get(1))?;
        let s = stored_count("spent", r.get(2))?;
        let c: String = r.get(3);
        out.push_str(&format!(
            "INSERT INTO privpred_budget (model_id, total, spent, created_at) VALUES ({}, {t}, {s}, {}) \
             ON CONFLICT (model_id) DO UPDATE SET spent = GREATEST(privpred_budget.spent, EXCLUDED.spent);\n",
            sql_text(&id),
            sql_text(&c)
        ));
    }
    let answers = tx
        .query(
            "SELECT model_id, key, answer FROM privpred_answers ORDER BY model_id, key",
            &[],
        )
        .await?;
    for r in &answers {
        let id: String = r.get(0);
        let key: &[u8] = r.get(1);
        let a: String = r.get(2);
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        out.push_str(&format!(
            "INSERT INTO privpred_answers (model_id, key, answer) VALUES ({}, '\\x{hex}'::bytea, {}) \
             ON CONFLICT DO NOTHING;\n",
            sql_text(&id),
            sql_text(&a)
        ));
    }
    tx.commit().await?;
    out.push_str("COMMIT;\n");
    Ok(out)
}
