//! PostgreSQL odometer: trainers on several machines share one; each decision takes the
//! dataset's limit row `FOR UPDATE`, so concurrent reservations on one dataset serialise.

use super::{Charge, DatasetRecord, Entry, Limit, OdometerError, Result, Totals, decide};
use tokio_postgres::{Client, GenericClient, NoTls};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS privpred_odometer_limit (
    dataset    TEXT PRIMARY KEY,
    epsilon    DOUBLE PRECISION NOT NULL CHECK (epsilon >= 0),
    delta      DOUBLE PRECISION NOT NULL CHECK (delta >= 0 AND delta < 1),
    neighbours TEXT NOT NULL,
    set_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS privpred_odometer_fit (
    id         BIGSERIAL PRIMARY KEY,
    dataset    TEXT NOT NULL REFERENCES privpred_odometer_limit (dataset),
    epsilon    DOUBLE PRECISION NOT NULL CHECK (epsilon >= 0),
    delta      DOUBLE PRECISION NOT NULL CHECK (delta >= 0 AND delta <= 1),
    method     TEXT NOT NULL,
    budget     BIGINT,
    neighbours TEXT NOT NULL,
    state      TEXT NOT NULL CHECK (state IN ('reserved', 'released', 'cancelled')),
    note       TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
";

/// The advisory lock that serialises schema creation (`CREATE TABLE IF NOT EXISTS` is not
/// safe against itself in PostgreSQL).
const SCHEMA_LOCK: i64 = 0x7072_6976_6f64_6f6d;

const SELECT_FIT: &str = "SELECT id, epsilon, delta, method, budget, neighbours, state, note, \
     to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') \
     FROM privpred_odometer_fit WHERE dataset = $1 ORDER BY id";

async fn connect(conn: &str) -> Result<Client> {
    let (client, connection) = tokio_postgres::connect(conn, NoTls)
        .await
        .map_err(|e| OdometerError::Store(format!("cannot connect to the odometer: {e}")))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client.batch_execute("SET synchronous_commit = on").await?;
    Ok(client)
}

async fn has_schema(c: &impl GenericClient) -> Result<bool> {
    let row = c
        .query_one(
            "SELECT to_regclass('privpred_odometer_limit') IS NOT NULL AND to_regclass('privpred_odometer_fit') IS NOT NULL",
            &[],
        )
        .await?;
    Ok(row.get(0))
}

fn not_an_odometer() -> OdometerError {
    OdometerError::Usage(
        "the PostgreSQL database holds no privpred odometer: create one by setting a limit (privpred odometer limit); it is never created by a fit"
            .into(),
    )
}

async fn entries_of(c: &impl GenericClient, dataset: &str) -> Result<Vec<Entry>> {
    let rows = c.query(SELECT_FIT, &[&dataset]).await?;
    Ok(rows
        .iter()
        .map(|r| Entry {
            id: r.get(0),
            charge: Charge {
                epsilon: r.get(1),
                delta: r.get(2),
                method: r.get(3),
                budget: r.get::<_, Option<i64>>(4).map(|b| b.max(0) as u64),
                neighbours: r.get(5),
            },
            state: r.get(6),
            note: r.get(7),
            created_at: r.get(8),
        })
        .collect())
}

fn limit_row(r: &tokio_postgres::Row) -> Limit {
    Limit {
        epsilon: r.get(0),
        delta: r.get(1),
        neighbours: r.get(2),
    }
}

pub(super) async fn set_limit(conn: &str, dataset: &str, limit: &Limit) -> Result<DatasetRecord> {
    let mut client = connect(conn).await?;
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .await?;
    tx.batch_execute(SCHEMA).await?;
    let old = tx
        .query_opt(
            "SELECT epsilon, delta, neighbours FROM privpred_odometer_limit WHERE dataset = $1 FOR UPDATE",
            &[&dataset],
        )
        .await?
        .map(|r| limit_row(&r));
    let fits = entries_of(&tx, dataset).await?;
    if let Some(old) = old
        && old.neighbours != limit.neighbours
        && fits.iter().any(|e| e.state != "cancelled")
    {
        return Err(OdometerError::Usage(format!(
            "dataset {dataset} already holds {} fits; its relation cannot change to {}",
            old.neighbours, limit.neighbours
        )));
    }
    tx.execute(
        "INSERT INTO privpred_odometer_limit (dataset, epsilon, delta, neighbours) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (dataset) DO UPDATE SET epsilon = excluded.epsilon, delta = excluded.delta, \
         neighbours = excluded.neighbours, set_at = now()",
        &[&dataset, &limit.epsilon, &limit.delta, &limit.neighbours],
    )
    .await?;
    tx.commit().await?;
    Ok(DatasetRecord {
        dataset: dataset.to_string(),
        limit: limit.clone(),
        spent: Totals::of(&fits),
        fits,
    })
}

pub(super) async fn show(conn: &str, dataset: Option<&str>) -> Result<Vec<DatasetRecord>> {
    let client = connect(conn).await?;
    if !has_schema(&client).await? {
        return Err(not_an_odometer());
    }
    let rows = client
        .query(
            "SELECT epsilon, delta, neighbours, dataset FROM privpred_odometer_limit ORDER BY set_at, dataset",
            &[],
        )
        .await?;
    let mut out = Vec::new();
    for r in rows {
        let d: String = r.get(3);
        if dataset.is_some_and(|x| x != d) {
            continue;
        }
        let fits = entries_of(&client, &d).await?;
        out.push(DatasetRecord {
            limit: limit_row(&r),
            spent: Totals::of(&fits),
            dataset: d,
            fits,
        });
    }
    Ok(out)
}

pub(super) async fn reserve(
    conn: &str,
    dataset: &str,
    charge: &Charge,
) -> Result<(i64, Totals, Totals, Limit)> {
    let mut client = connect(conn).await?;
    if !has_schema(&client).await? {
        return Err(not_an_odometer());
    }
    let tx = client.transaction().await?;
    // the dataset's limit row is the lock every reservation on the dataset takes
    let limit = tx
        .query_opt(
            "SELECT epsilon, delta, neighbours FROM privpred_odometer_limit WHERE dataset = $1 FOR UPDATE",
            &[&dataset],
        )
        .await?
        .map(|r| limit_row(&r));
    let entries = entries_of(&tx, dataset).await?;
    let (before, after) = decide(dataset, limit.as_ref(), &entries, charge)?;
    let budget = charge.budget.map(|b| b.min(i64::MAX as u64) as i64);
    let row = tx
        .query_one(
            "INSERT INTO privpred_odometer_fit (dataset, epsilon, delta, method, budget, neighbours, state) \
             VALUES ($1, $2, $3, $4, $5, $6, 'reserved') RETURNING id",
            &[
                &dataset,
                &charge.epsilon,
                &charge.delta,
                &charge.method,
                &budget,
                &charge.neighbours,
            ],
        )
        .await?;
    tx.commit().await?;
    Ok((row.get(0), before, after, limit.expect("decided")))
}

pub(super) async fn set_state(conn: &str, id: i64, state: &str, note: &str) -> Result<()> {
    let client = connect(conn).await?;
    let n = client
        .execute(
            "UPDATE privpred_odometer_fit SET state = $2, note = $3 WHERE id = $1 AND state = 'reserved'",
            &[&id, &state, &note],
        )
        .await?;
    if n != 1 {
        return Err(OdometerError::Store(format!(
            "fit {id} is not reserved (its reservation was released or taken over)"
        )));
    }
    Ok(())
}

pub(super) async fn create_schema(conn: &str, schema: &str) -> Result<()> {
    if schema.is_empty()
        || !schema
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(OdometerError::Usage(
            "invalid schema: use letters, digits and _ only".into(),
        ));
    }
    let client = connect(conn).await?;
    client
        .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
        .await?;
    Ok(())
}
