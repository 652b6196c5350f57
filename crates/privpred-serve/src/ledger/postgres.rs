//! PostgreSQL backend, for several replicas sharing one budget. One writer task per server
//! commits groups of requests; replicas serialise on the model's budget row
//! (`SELECT … FOR UPDATE`), and the final `UPDATE … SET spent = spent + k WHERE spent + k <=
//! total RETURNING …` refuses any overspend at the database level.

use super::{BudgetState, Job, Key, SpendOutcome, answer_from_json, answer_json, plan, take_group};
use crate::error::{Result, ServeError};
use crate::model::Answer;
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

async fn init(client: &mut Client, model_id: &str, total: u64) -> Result<()> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .await?;
    tx.batch_execute(SCHEMA).await?;
    tx.execute(
        "INSERT INTO privpred_budget (model_id, total, spent) VALUES ($1, $2, 0) ON CONFLICT (model_id) DO NOTHING",
        &[&model_id, &(total as i64)],
    )
    .await?;
    let row = tx
        .query_one(
            "SELECT total, spent FROM privpred_budget WHERE model_id = $1 FOR UPDATE",
            &[&model_id],
        )
        .await?;
    let t: i64 = row.get(0);
    if t as u64 != total {
        return Err(ServeError::Ledger(format!(
            "the ledger records a budget of {t} for model {model_id}, the model states {total}: refusing to serve"
        )));
    }
    tx.execute(
        "UPDATE privpred_budget SET spent = spent WHERE model_id = $1",
        &[&model_id],
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
    mut rx: mpsc::Receiver<Job>,
) -> Result<()> {
    let mut client = connect(&conn).await?;
    init(&mut client, &model_id, total).await?;
    tokio::spawn(async move {
        let mut client = Some(client);
        while let Some(first) = rx.recv().await {
            let jobs = take_group(first, &mut rx);
            if client.as_ref().is_none_or(|c| c.is_closed()) {
                // Reconnect after a lost connection; while it fails, every request fails closed.
                client = connect(&conn).await.ok();
            }
            match client.as_mut() {
                Some(c) => run_group(c, &model_id, answer_store, jobs).await,
                None => fail_all(jobs, "cannot connect to the postgres ledger"),
            }
        }
    });
    Ok(())
}

fn fail_all(jobs: Vec<Job>, msg: &str) {
    for job in jobs {
        match job {
            Job::Status(r) => {
                let _ = r.send(Err(ServeError::Ledger(msg.into())));
            }
            Job::Spend(_, r) => {
                let _ = r.send(Err(ServeError::Ledger(msg.into())));
            }
        }
    }
}

async fn run_group(client: &mut Client, model_id: &str, answer_store: bool, jobs: Vec<Job>) {
    let mut spends = Vec::new();
    for job in jobs {
        match job {
            Job::Status(reply) => {
                let _ = reply.send(state(client, model_id, false).await);
            }
            Job::Spend(req, reply) => spends.push((req, reply)),
        }
    }
    if spends.is_empty() {
        return;
    }
    let reqs: Vec<_> = spends.iter().map(|(r, _)| r).collect();
    let result: Result<Vec<SpendOutcome>> = async {
        let tx = client.transaction().await?;
        let row = tx
            .query_opt("SELECT total, spent FROM privpred_budget WHERE model_id = $1 FOR UPDATE", &[&model_id])
            .await?
            .ok_or_else(|| ServeError::Ledger(format!("no budget row for model {model_id}")))?;
        let st = BudgetState { total: row.get::<_, i64>(0) as u64, spent: row.get::<_, i64>(1) as u64 };
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
                let key: Key = k.try_into().map_err(|_| ServeError::Ledger("corrupt answer key".into()))?;
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
                    "UPDATE privpred_budget SET spent = spent + $2 WHERE model_id = $1 AND spent + $2 <= total \
                     RETURNING total, spent",
                    &[&model_id, &(p.units as i64)],
                )
                .await?;
            if updated.is_none() {
                return Err(ServeError::Ledger("budget update refused by the ledger".into()));
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
            let msg = e.to_string();
            for (_, reply) in spends {
                let _ = reply.send(Err(ServeError::Ledger(msg.clone())));
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
            total: r.get::<_, i64>(0) as u64,
            spent: r.get::<_, i64>(1) as u64,
        }),
        None if missing_ok => Ok(BudgetState { total: 0, spent: 0 }),
        None => Err(ServeError::Ledger(format!(
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
            total: r.get::<_, i64>(0) as u64,
            spent: r.get::<_, i64>(1) as u64,
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
        return Err(ServeError::config(
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
