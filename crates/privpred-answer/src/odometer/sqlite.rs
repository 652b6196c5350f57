//! SQLite odometer: one file, WAL, `synchronous=FULL`; every decision inside `BEGIN
//! IMMEDIATE` (the database-wide write lock, across processes).

use super::{Charge, DatasetRecord, Entry, Limit, OdometerError, Result, Totals, decide};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use std::path::Path;
use std::time::Duration;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS privpred_odometer_limit (
    dataset    TEXT PRIMARY KEY,
    epsilon    REAL NOT NULL CHECK (epsilon >= 0),
    delta      REAL NOT NULL CHECK (delta >= 0 AND delta < 1),
    neighbours TEXT NOT NULL,
    set_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE TABLE IF NOT EXISTS privpred_odometer_fit (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset    TEXT NOT NULL REFERENCES privpred_odometer_limit (dataset),
    epsilon    REAL NOT NULL CHECK (epsilon >= 0),
    delta      REAL NOT NULL CHECK (delta >= 0 AND delta <= 1),
    method     TEXT NOT NULL,
    budget     INTEGER,
    neighbours TEXT NOT NULL,
    state      TEXT NOT NULL CHECK (state IN ('reserved', 'released', 'cancelled')),
    note       TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
";

fn open(path: &Path, create: bool) -> Result<Connection> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => {
            return Err(OdometerError::Usage(format!(
                "odometer {} is not a regular file",
                path.display()
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(OdometerError::Usage(format!(
                "odometer {} does not exist: create it by setting a limit (privpred odometer limit); it is never created by a fit",
                path.display()
            )));
        }
        Err(e) => {
            return Err(OdometerError::Store(format!("{}: {e}", path.display())));
        }
    }
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| OdometerError::Store(format!("cannot open {}: {e}", path.display())))?;
    conn.busy_timeout(Duration::from_secs(30))?;
    let checked: std::result::Result<String, _> =
        conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0));
    match checked {
        Ok(m) if m.eq_ignore_ascii_case("wal") => {}
        Ok(m) => {
            return Err(OdometerError::Store(format!(
                "{}: cannot enable WAL mode (got '{m}')",
                path.display()
            )));
        }
        Err(e) => {
            return Err(OdometerError::Usage(format!(
                "odometer {} is not an SQLite database ({e})",
                path.display()
            )));
        }
    }
    conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")?;
    Ok(conn)
}

fn has_schema(c: &Connection) -> Result<bool> {
    Ok(c.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('privpred_odometer_limit', 'privpred_odometer_fit')",
        [],
        |r| r.get::<_, i64>(0),
    )? == 2)
}

fn not_an_odometer(path: &Path) -> OdometerError {
    OdometerError::Usage(format!(
        "{} is not a privpred odometer (no odometer tables): create one by setting a limit (privpred odometer limit)",
        path.display()
    ))
}

fn limit_of(c: &Connection, dataset: &str) -> Result<Option<Limit>> {
    Ok(c.query_row(
        "SELECT epsilon, delta, neighbours FROM privpred_odometer_limit WHERE dataset = ?1",
        [dataset],
        |r| {
            Ok(Limit {
                epsilon: r.get(0)?,
                delta: r.get(1)?,
                neighbours: r.get(2)?,
            })
        },
    )
    .optional()?)
}

fn entries_of(c: &Connection, dataset: &str) -> Result<Vec<Entry>> {
    let mut st = c.prepare(
        "SELECT id, epsilon, delta, method, budget, neighbours, state, note, created_at \
         FROM privpred_odometer_fit WHERE dataset = ?1 ORDER BY id",
    )?;
    let rows = st.query_map([dataset], |r| {
        Ok(Entry {
            id: r.get(0)?,
            charge: Charge {
                epsilon: r.get(1)?,
                delta: r.get(2)?,
                method: r.get(3)?,
                budget: r.get::<_, Option<i64>>(4)?.map(|b| b.max(0) as u64),
                neighbours: r.get(5)?,
            },
            state: r.get(6)?,
            note: r.get(7)?,
            created_at: r.get(8)?,
        })
    })?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

fn record(c: &Connection, dataset: &str, limit: Limit) -> Result<DatasetRecord> {
    let fits = entries_of(c, dataset)?;
    Ok(DatasetRecord {
        dataset: dataset.to_string(),
        limit,
        spent: Totals::of(&fits),
        fits,
    })
}

pub(super) fn set_limit(path: &Path, dataset: &str, limit: &Limit) -> Result<DatasetRecord> {
    let mut c = open(path, true)?;
    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(SCHEMA)?;
    if let Some(old) = limit_of(&tx, dataset)?
        && old.neighbours != limit.neighbours
        && tx.query_row(
            "SELECT count(*) FROM privpred_odometer_fit WHERE dataset = ?1 AND state != 'cancelled'",
            [dataset],
            |r| r.get::<_, i64>(0),
        )? > 0
    {
        return Err(OdometerError::Usage(format!(
            "dataset {dataset} already holds {} fits; its relation cannot change to {}",
            old.neighbours, limit.neighbours
        )));
    }
    tx.execute(
        "INSERT INTO privpred_odometer_limit (dataset, epsilon, delta, neighbours) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (dataset) DO UPDATE SET epsilon = excluded.epsilon, delta = excluded.delta, \
         neighbours = excluded.neighbours, set_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now')",
        params![dataset, limit.epsilon, limit.delta, limit.neighbours],
    )?;
    let r = record(&tx, dataset, limit.clone())?;
    tx.commit()?;
    Ok(r)
}

pub(super) fn show(path: &Path, dataset: Option<&str>) -> Result<Vec<DatasetRecord>> {
    let c = open(path, false)?;
    if !has_schema(&c)? {
        return Err(not_an_odometer(path));
    }
    let mut st =
        c.prepare("SELECT dataset, epsilon, delta, neighbours FROM privpred_odometer_limit ORDER BY set_at, dataset")?;
    let limits: Vec<(String, Limit)> = st
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                Limit {
                    epsilon: r.get(1)?,
                    delta: r.get(2)?,
                    neighbours: r.get(3)?,
                },
            ))
        })?
        .collect::<std::result::Result<_, _>>()?;
    limits
        .into_iter()
        .filter(|(d, _)| dataset.is_none_or(|x| x == d))
        .map(|(d, l)| record(&c, &d, l))
        .collect()
}

pub(super) fn reserve(
    path: &Path,
    dataset: &str,
    charge: &Charge,
) -> Result<(i64, Totals, Totals, Limit)> {
    let mut c = open(path, false)?;
    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
    if !has_schema(&tx)? {
        return Err(not_an_odometer(path));
    }
    let limit = limit_of(&tx, dataset)?;
    let entries = entries_of(&tx, dataset)?;
    let (before, after) = decide(dataset, limit.as_ref(), &entries, charge)?;
    tx.execute(
        "INSERT INTO privpred_odometer_fit (dataset, epsilon, delta, method, budget, neighbours, state) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'reserved')",
        params![
            dataset,
            charge.epsilon,
            charge.delta,
            charge.method,
            charge.budget.map(|b| b.min(i64::MAX as u64) as i64),
            charge.neighbours
        ],
    )?;
    let id = tx.last_insert_rowid();
    tx.commit()?;
    Ok((id, before, after, limit.expect("decided")))
}

pub(super) fn set_state(path: &Path, id: i64, state: &str, note: &str) -> Result<()> {
    let mut c = open(path, false)?;
    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // only a reserved fit changes state: a released one is never cancelled
    let n = tx.execute(
        "UPDATE privpred_odometer_fit SET state = ?2, note = ?3 WHERE id = ?1 AND state = 'reserved'",
        params![id, state, note],
    )?;
    if n != 1 {
        return Err(OdometerError::Store(format!(
            "fit {id} is not reserved (its reservation was released or taken over) in {}",
            path.display()
        )));
    }
    tx.commit()?;
    Ok(())
}
