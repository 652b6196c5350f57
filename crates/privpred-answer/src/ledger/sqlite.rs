//! SQLite backend: one writer thread owns the connection (WAL, `synchronous=FULL`) and
//! commits groups of requests with `BEGIN IMMEDIATE` (the database-wide write lock, so
//! several processes on one file never overspend either). Before every transaction it checks
//! that the ledger path still names the file it opened (device and inode); at close it
//! checkpoints the write-ahead log into the main file.

use super::{
    BudgetState, Job, Key, SpendOutcome, answer_from_json, answer_json, bare_message, db_count,
    plan, stored_count, take_group,
};
use crate::error::{AnswerError, Result};
use privpred_core::Answer;
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

/// How to create a missing ledger, named in errors.
const INIT_HINT: &str = "pass --init-ledger to create a new budget record (a ledger is never created silently: a fresh ledger would reset the budget)";

fn open(path: &Path, create: bool) -> Result<Connection> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => {}
        // a directory (or another non-file) at the ledger's path is bad input (exit 2)
        Ok(_) => {
            return Err(AnswerError::config(
                "--ledger",
                format!(
                    "sqlite ledger {} is not a regular file (a directory?): give the path of an SQLite ledger file",
                    path.display()
                ),
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {}
        Err(e) => {
            if e.kind() == std::io::ErrorKind::NotFound {
                return Err(AnswerError::config(
                    "--ledger",
                    format!(
                        "sqlite ledger {} does not exist; {INIT_HINT}",
                        path.display()
                    ),
                ));
            }
            return Err(AnswerError::Ledger(format!(
                "sqlite ledger {}: {e}",
                path.display()
            )));
        }
    }
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let conn = Connection::open_with_flags(path, flags).map_err(|e| {
        AnswerError::Ledger(format!("cannot open sqlite ledger {}: {e}", path.display()))
    })?;
    conn.busy_timeout(Duration::from_secs(10))?;
    // the first statement reads the file's header: a file that is not SQLite is bad input
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .map_err(|e| not_sqlite(path, e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(AnswerError::Ledger(format!(
            "sqlite ledger {}: cannot enable WAL mode (got '{mode}')",
            path.display()
        )));
    }
    conn.execute_batch("PRAGMA synchronous=FULL;")?;
    Ok(conn)
}

/// An error of the first statement on a ledger file: "not a database" (a file that is not
/// SQLite, or is encrypted) is a configuration error naming the file; others stay ledger errors.
fn not_sqlite(path: &Path, e: rusqlite::Error) -> AnswerError {
    let e = AnswerError::from(e);
    if bare_message(&e).contains("not a database") {
        AnswerError::config(
            "--ledger",
            format!(
                "{} is not a privpred ledger (not an SQLite database): give the path of the model's SQLite ledger",
                path.display()
            ),
        )
    } else {
        e
    }
}

fn has_budget_table(conn: &Connection) -> Result<bool> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'privpred_budget'",
            [],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Checks (and with `create` makes) the model's record in one write transaction; `carry`
/// raises its `spent` to at least that count, creating a missing record with it.
fn init(
    conn: &mut Connection,
    path: &Path,
    model_id: &str,
    total: u64,
    (create, carry): (bool, Option<u64>),
) -> Result<()> {
    // A write transaction at start-up: a read-only ledger fails here, before serving.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let existing = if has_budget_table(&tx)? {
        tx.query_row(
            "SELECT total, spent FROM privpred_budget WHERE model_id = ?1",
            [model_id],
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
        )
        .optional()?
    } else {
        None
    };
    match (existing, create) {
        (Some((t, s)), true) => {
            return Err(AnswerError::config(
                "--init-ledger",
                format!(
                    "sqlite ledger {} already holds the budget record of model {model_id} ({s} of {t} spent); \
                 --init-ledger only creates a new record and never resets one: drop --init-ledger to serve it",
                    path.display()
                ),
            ));
        }
        (None, false) if carry.is_none() => {
            return Err(AnswerError::config(
                "--ledger",
                format!(
                    "sqlite ledger {} holds no budget record for model {model_id}; {INIT_HINT}",
                    path.display()
                ),
            ));
        }
        (None, _) => {
            tx.execute_batch(SCHEMA)?;
            tx.execute(
                "INSERT INTO privpred_budget (model_id, total, spent) VALUES (?1, ?2, ?3)",
                params![
                    model_id,
                    db_count("the budget B", total)?,
                    db_count("spent", carry.unwrap_or(0).min(total))?
                ],
            )?;
        }
        (Some(_), false) => {}
    }
    let (t, s): (i64, i64) = tx.query_row(
        "SELECT total, spent FROM privpred_budget WHERE model_id = ?1",
        [model_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let t = stored_count("total", t)?;
    let s = stored_count("spent", s)?;
    if s > t {
        return Err(AnswerError::config(
            "--ledger",
            format!(
                "corrupt ledger: {} records {s} answers spent of a budget of {t} for model {model_id} (spent can never exceed the budget: the file was edited)",
                path.display()
            ),
        ));
    }
    if t != total {
        return Err(AnswerError::Ledger(format!(
            "the ledger records a budget of {t} for model {model_id}, the model states {total}: refusing to serve"
        )));
    }
    // Touch the row so that the start-up transaction really writes (fails on a read-only
    // file); a carried count raises `spent`, never lowers it.
    tx.execute(
        "UPDATE privpred_budget SET spent = MAX(spent, ?2) WHERE model_id = ?1",
        params![model_id, db_count("spent", carry.unwrap_or(0).min(total))?],
    )?;
    tx.commit()?;
    if create {
        // The new record goes into the main file at once, not only into the -wal file.
        checkpoint(conn, path)?;
    }
    Ok(())
}

/// `PRAGMA wal_checkpoint(TRUNCATE)`: moves every committed transaction from the -wal file
/// into the main database file and truncates the -wal file.
fn checkpoint(conn: &Connection, path: &Path) -> Result<()> {
    match checkpoint_once(conn)? {
        None => Ok(()),
        Some((done, log)) => Err(AnswerError::Ledger(format!(
            "sqlite ledger {}: the checkpoint could not complete ({}another connection holds the database)",
            path.display(),
            if log >= 0 {
                format!("{done} of {log} log frames copied; ")
            } else {
                String::new()
            }
        ))),
    }
}

/// One `PRAGMA wal_checkpoint(TRUNCATE)`: `None` when it completed, or the frames copied and
/// the frames in the log when another connection blocked it (another process checkpointing
/// the same file, or reading an older snapshot of it).
fn checkpoint_once(conn: &Connection) -> Result<Option<(i64, i64)>> {
    let row = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
        ))
    });
    match row {
        Ok((busy, log, done)) if busy != 0 || (log >= 0 && done < log) => Ok(Some((done, log))),
        Ok(_) => Ok(None),
        Err(rusqlite::Error::SqliteFailure(e, _))
            if matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            Ok(Some((-1, -1)))
        }
        Err(e) => Err(e.into()),
    }
}

/// How long closing a ledger retries a checkpoint that other connections block.
const CLOSE_CHECKPOINT_WAIT: Duration = Duration::from_secs(30);

/// The checkpoint at close: [`checkpoint`], retried while other connections block it (several
/// `predict` processes closing the same ledger at once take turns), for at most
/// [`CLOSE_CHECKPOINT_WAIT`]. When it returns `Ok`, the main file alone holds every
/// transaction this connection committed.
fn checkpoint_at_close(conn: &Connection, path: &Path) -> Result<()> {
    let deadline = std::time::Instant::now() + CLOSE_CHECKPOINT_WAIT;
    let mut pause = Duration::from_millis(1);
    while checkpoint_once(conn)?.is_some() {
        if std::time::Instant::now() >= deadline {
            return checkpoint(conn, path);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    Ok(())
}

/// Device and inode of a file (what "the same file" means).
type FileId = (u64, u64);

fn file_id(path: &Path) -> std::io::Result<FileId> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)?;
        Ok((m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        std::fs::metadata(path).map(|_| (0, 0))
    }
}

fn wal_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push("-wal");
    PathBuf::from(s)
}

/// The files the writer opened, to detect a ledger deleted or replaced underneath it.
struct Identity {
    path: PathBuf,
    db: FileId,
    wal: Option<FileId>,
    /// The error already reported in the log (one line per distinct failure).
    reported: Option<String>,
}

impl Identity {
    fn capture(path: &Path) -> Result<Identity> {
        let db = file_id(path)
            .map_err(|e| AnswerError::Ledger(format!("sqlite ledger {}: {e}", path.display())))?;
        Ok(Identity {
            path: path.to_path_buf(),
            db,
            wal: file_id(&wal_path(path)).ok(),
            reported: None,
        })
    }

    /// Fails if the ledger path (or its -wal file) is gone or names another file now.
    fn verify(&mut self) -> Result<()> {
        let problem = match file_id(&self.path) {
            Err(e) => Some(format!("cannot be read ({e})")),
            Ok(id) if id != self.db => Some("was replaced by another file".to_string()),
            Ok(_) => match self.wal {
                Some(w) => match file_id(&wal_path(&self.path)) {
                    Err(_) => Some("lost its -wal file (deleted)".to_string()),
                    Ok(id) if id != w => Some("had its -wal file replaced".to_string()),
                    Ok(_) => None,
                },
                None => None,
            },
        };
        match problem {
            None => Ok(()),
            Some(p) => {
                let msg = format!(
                    "sqlite ledger {} {p} since the server opened it: refusing every answer (fail closed); \
                     restore the ledger and restart the server",
                    self.path.display()
                );
                if self.reported.as_deref() != Some(msg.as_str()) {
                    eprintln!("privpred serve: ledger error: {msg}");
                    self.reported = Some(msg.clone());
                }
                Err(AnswerError::Ledger(msg))
            }
        }
    }
}

pub(super) async fn start(
    path: PathBuf,
    model_id: String,
    total: u64,
    answer_store: bool,
    (create, carry): (bool, Option<u64>),
    mut rx: mpsc::Receiver<Job>,
) -> Result<()> {
    let (ready_tx, ready_rx) = oneshot::channel::<Result<()>>();
    std::thread::Builder::new()
        .name("privpred-ledger".into())
        .spawn(move || {
            let opened = open(&path, create || carry.is_some()).and_then(|mut c| {
                init(&mut c, &path, &model_id, total, (create, carry))?;
                let id = Identity::capture(&path)?;
                Ok((c, id))
            });
            let (mut conn, mut identity) = match opened {
                Ok(x) => {
                    let _ = ready_tx.send(Ok(()));
                    x
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            while let Some(first) = rx.blocking_recv() {
                let jobs = take_group(first, &mut rx);
                if run_group(&mut conn, &mut identity, &model_id, answer_store, jobs) {
                    break;
                }
            }
        })
        .map_err(|e| AnswerError::Io {
            context: "spawning the ledger thread".into(),
            source: e,
        })?;
    ready_rx
        .await
        .map_err(|_| AnswerError::Ledger("ledger thread failed to start".into()))?
}

/// A real write transaction on the model's record (a health check).
fn probe(conn: &mut Connection, identity: &mut Identity, model_id: &str) -> Result<BudgetState> {
    identity.verify()?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let n = tx.execute(
        "UPDATE privpred_budget SET spent = spent WHERE model_id = ?1",
        [model_id],
    )?;
    if n != 1 {
        return Err(AnswerError::Ledger(format!(
            "no budget row for model {model_id}"
        )));
    }
    let st = state(&tx, model_id)?;
    tx.commit()?;
    Ok(st)
}

/// Runs one group; returns true when the writer should stop (a `Close` was handled).
fn run_group(
    conn: &mut Connection,
    identity: &mut Identity,
    model_id: &str,
    answer_store: bool,
    jobs: Vec<Job>,
) -> bool {
    let mut spends = Vec::new();
    let mut close = None;
    for job in jobs {
        match job {
            Job::Status(reply) => {
                let _ = reply.send(state(conn, model_id));
            }
            Job::Probe(reply) => {
                let _ = reply.send(probe(conn, identity, model_id));
            }
            Job::Spend(req, reply) => spends.push((req, reply)),
            Job::Close(reply) => close = Some(reply),
        }
    }
    if !spends.is_empty() {
        spend_group(conn, identity, model_id, answer_store, spends);
    }
    match close {
        Some(reply) => {
            let r = identity
                .verify()
                .and_then(|_| checkpoint_at_close(conn, &identity.path));
            let _ = reply.send(r);
            true
        }
        None => false,
    }
}

type SpendJob = (super::SpendRequest, oneshot::Sender<Result<SpendOutcome>>);

fn spend_group(
    conn: &mut Connection,
    identity: &mut Identity,
    model_id: &str,
    answer_store: bool,
    spends: Vec<SpendJob>,
) {
    let reqs: Vec<_> = spends.iter().map(|(r, _)| r).collect();
    let result = (|| -> Result<Vec<SpendOutcome>> {
        identity.verify()?;
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
                "UPDATE privpred_budget SET spent = spent + ?2 WHERE model_id = ?1 AND spent <= total - ?2",
                params![model_id, db_count("units", p.units)?],
            )?;
            if n != 1 {
                return Err(AnswerError::Ledger(
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
            let msg = bare_message(&e);
            for (_, reply) in spends {
                let _ = reply.send(Err(AnswerError::Ledger(msg.clone())));
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
        .ok_or_else(|| AnswerError::Ledger(format!("no budget row for model {model_id}")))?;
    Ok(BudgetState {
        total: stored_count("total", t)?,
        spent: stored_count("spent", s)?,
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
    let conn = open(path, false)?;
    let name = format!("privpred_block_{}", &model_id[..model_id.len().min(16)]);
    conn.execute_batch(&format!(
        "CREATE TRIGGER IF NOT EXISTS {name} BEFORE UPDATE ON privpred_budget WHEN NEW.model_id = '{}' \
         BEGIN SELECT RAISE(ABORT, 'ledger is read-only (administrative block)'); END;",
        model_id.replace('\'', "''")
    ))?;
    Ok(())
}

fn open_existing_read_only(path: &Path) -> Result<Connection> {
    // a missing, non-regular or invalid file is bad input (exit 2 at the CLI), not a failure
    if !path.is_file() {
        return Err(AnswerError::config(
            "--ledger",
            format!(
                "sqlite ledger {} does not exist (or is not a regular file)",
                path.display()
            ),
        ));
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| {
        AnswerError::config(
            "--ledger",
            format!("cannot open sqlite ledger {}: {e}", path.display()),
        )
    })?;
    conn.busy_timeout(Duration::from_secs(10))?;
    match has_budget_table(&conn) {
        Ok(true) => Ok(conn),
        Ok(false) => Err(AnswerError::config(
            "--ledger",
            format!(
                "{} holds no privpred_budget table: not a privpred ledger",
                path.display()
            ),
        )),
        Err(e) if bare_message(&e).contains("not a database") => Err(AnswerError::config(
            "--ledger",
            format!(
                "{} is not a privpred ledger (not an SQLite database)",
                path.display()
            ),
        )),
        Err(e) => Err(e),
    }
}

/// Every budget record, with the number of stored answers of each model.
pub(super) fn show(path: &Path) -> Result<Vec<super::LedgerRecord>> {
    let conn = open_existing_read_only(path)?;
    let mut stmt = conn.prepare(
        "SELECT b.model_id, b.total, b.spent, b.created_at, \
         (SELECT count(*) FROM privpred_answers a WHERE a.model_id = b.model_id) \
         FROM privpred_budget b ORDER BY b.model_id",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, i64>(4)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (model_id, t, s, created_at, n) = row?;
        let total = stored_count("total", t)?;
        let spent = stored_count("spent", s)?;
        out.push(super::LedgerRecord {
            model_id,
            total,
            spent,
            remaining: total.saturating_sub(spent),
            created_at,
            stored_answers: stored_count("answers", n)?,
        });
    }
    Ok(out)
}

/// Copies the ledger with the SQLite online backup API (a consistent snapshot even while a
/// server writes it) into a temporary file beside `out`, checks the copy (`PRAGMA
/// integrity_check`, the budget table present), makes it self-contained (rollback journal,
/// no -wal file), syncs it and renames it to `out`.
pub(super) fn backup(path: &Path, out: &Path) -> Result<usize> {
    let src = open_existing_read_only(path)?;
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = out
        .file_name()
        .ok_or_else(|| AnswerError::config("--out", "names no file"))?
        .to_string_lossy()
        .into_owned();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let result = (|| -> Result<usize> {
        {
            let mut dst = Connection::open(&tmp).map_err(|e| {
                AnswerError::Ledger(format!("cannot create {}: {e}", tmp.display()))
            })?;
            let b = rusqlite::backup::Backup::new(&src, &mut dst)?;
            b.run_to_completion(256, Duration::from_millis(5), None)?;
        }
        let dst = Connection::open(&tmp)?;
        dst.query_row("PRAGMA journal_mode=DELETE", [], |r| r.get::<_, String>(0))?;
        let check: String = dst.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
        if check != "ok" {
            return Err(AnswerError::Ledger(format!(
                "the backup copy fails SQLite's integrity check: {check}"
            )));
        }
        if !has_budget_table(&dst)? {
            return Err(AnswerError::Ledger(
                "the backup copy holds no budget table".into(),
            ));
        }
        let n: i64 = dst.query_row("SELECT count(*) FROM privpred_budget", [], |r| r.get(0))?;
        drop(dst);
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(|e| AnswerError::Io {
                context: format!("syncing {}", tmp.display()),
                source: e,
            })?;
        std::fs::rename(&tmp, out).map_err(|e| AnswerError::Io {
            context: format!("renaming the backup to {}", out.display()),
            source: e,
        })?;
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(n.max(0) as usize)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Another connection's checkpoint holds the checkpoint lock while it waits for a reader
    /// of an older snapshot: a checkpoint of this connection then fails at once (whatever its
    /// busy timeout), and the checkpoint at close waits its turn instead, returning only once
    /// the main file alone holds this connection's write.
    #[test]
    fn the_close_checkpoint_waits_its_turn_behind_another_checkpointer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.sqlite");
        let conn = open(&path, true).unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")
            .unwrap();
        checkpoint(&conn, &path).unwrap();
        let reader = open(&path, false).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let seen: i64 = reader
            .query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(seen, 1);
        conn.execute("INSERT INTO t VALUES (2)", []).unwrap();
        // another process's close: its checkpoint waits for the reader, holding the lock
        let other_path = path.clone();
        let other = std::thread::spawn(move || {
            let c = open(&other_path, false).unwrap();
            let _ = checkpoint_once(&c);
        });
        std::thread::sleep(Duration::from_millis(300));
        let t0 = std::time::Instant::now();
        let e = checkpoint(&conn, &path).unwrap_err().to_string();
        assert!(e.contains("another connection"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            reader.execute_batch("COMMIT").unwrap();
        });
        checkpoint_at_close(&conn, &path).unwrap();
        release.join().unwrap();
        other.join().unwrap();
        let copy = dir.path().join("copy.sqlite");
        std::fs::copy(&path, &copy).unwrap();
        let n: i64 = Connection::open(&copy)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 2, "the main file alone misses the write");
    }
}
