//! The spend mark: a high-water mark of each model's spent budget, kept in a small file
//! outside the ledger (by default beside the model artifact).
//!
//! After every transaction that spends budget, and **before** any of its answers is released,
//! the mark is raised to the ledger's new `spent` (never lowered). When a ledger is opened its
//! `spent` must be at least the mark: a ledger restored from an older backup, re-created after
//! a deletion, or that lost its `-wal` file after a crash records less than was already
//! released, and is refused instead of handing out the difference again.
//!
//! Every value the mark holds was a committed `spent` of the ledger, and `spent` only grows,
//! so the mark never refuses a ledger that went forward; several processes (or replicas
//! sharing a PostgreSQL ledger) may raise one mark.
//!
//! What it cannot see: a mark file deleted, edited or restored together with the ledger, and a
//! copy of the artifact taken to a place that sees neither this mark nor the ledger.

use crate::error::{AnswerError, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The `format` value of a mark file.
const FORMAT: &str = "privpred-spend-mark";

#[derive(Debug, Default, Serialize, Deserialize)]
struct MarkFile {
    format: String,
    /// Highest `spent` released per ledger id.
    spent: BTreeMap<String, u64>,
}

/// A spend-mark file (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendMark {
    path: PathBuf,
}

fn io_err(path: &Path, what: &str) -> impl FnOnce(std::io::Error) -> AnswerError {
    let context = format!("{what} the spend mark {}", path.display());
    move |source| AnswerError::Io { context, source }
}

impl SpendMark {
    /// The mark at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SpendMark { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn parse(&self, text: &str) -> Result<MarkFile> {
        if text.trim().is_empty() {
            return Ok(MarkFile::default());
        }
        // a corrupt or foreign file at the mark's path is bad input (exit 2 at the CLI)
        let m: MarkFile = serde_json::from_str(text).map_err(|e| {
            AnswerError::config(
                "spend mark",
                format!(
                    "{} is corrupt ({e}; a mark is {{\"format\": \"{FORMAT}\", \"spent\": {{LEDGER_ID: COUNT}}}} with counts in 0..=18446744073709551615); refusing to answer",
                    self.path.display()
                ),
            )
        })?;
        if m.format != FORMAT {
            return Err(AnswerError::config(
                "spend mark",
                format!(
                    "{} is not a spend mark (format `{}`, expected `{FORMAT}`); refusing to answer",
                    self.path.display(),
                    m.format
                ),
            ));
        }
        Ok(m)
    }

    /// Refuses a directory (or anything but a regular file) at the mark's path: bad input.
    fn check_kind(&self) -> Result<()> {
        match std::fs::metadata(&self.path) {
            Ok(m) if !m.is_file() => Err(AnswerError::config(
                "spend mark",
                format!(
                    "{} is not a regular file (a directory?); the spend mark must be a file, or absent; refusing to answer",
                    self.path.display()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The highest `spent` recorded for `model_id` (0 when the file or the entry is absent).
    pub fn read(&self, model_id: &str) -> Result<u64> {
        self.check_kind()?;
        match std::fs::read_to_string(&self.path) {
            Ok(t) => Ok(self.parse(&t)?.spent.get(model_id).copied().unwrap_or(0)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(io_err(&self.path, "reading")(e)),
        }
    }

    /// Raises the mark of `model_id` to `spent` (a no-op when it is already as high), durably:
    /// under an exclusive lock on the mark file, a temporary file is written, synced and
    /// renamed over it. A waiter whose locked file was renamed away takes the new one.
    pub fn raise(&self, model_id: &str, spent: u64) -> Result<()> {
        self.check_kind()?;
        loop {
            let mut f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&self.path)
                .map_err(io_err(&self.path, "opening"))?;
            f.lock().map_err(io_err(&self.path, "locking"))?;
            if !same_file(&f, &self.path) {
                continue; // renamed over while we waited: lock the new file
            }
            let mut text = String::new();
            f.read_to_string(&mut text)
                .map_err(io_err(&self.path, "reading"))?;
            let mut m = self.parse(&text)?;
            let cur = m.spent.get(model_id).copied().unwrap_or(0);
            if cur >= spent {
                return Ok(());
            }
            m.format = FORMAT.to_string();
            m.spent.insert(model_id.to_string(), spent);
            let json = serde_json::to_vec_pretty(&m).expect("mark serialises");
            return self.replace(&json);
        }
    }

    /// Temporary file beside the mark, synced, renamed over it, directory synced.
    fn replace(&self, bytes: &[u8]) -> Result<()> {
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "mark".into());
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let r = (|| -> std::io::Result<()> {
            let mut t = std::fs::File::create(&tmp)?;
            t.write_all(bytes)?;
            t.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            if let Ok(d) = std::fs::File::open(&dir) {
                let _ = d.sync_all();
            }
            Ok(())
        })();
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r.map_err(io_err(&self.path, "writing"))
    }

    /// Refuses a ledger whose recorded `spent` is below `mark`: it went backwards. The mark
    /// must be read ([`SpendMark::read`]) **before** the ledger's `spent`: every value of the
    /// mark was a committed `spent`, so a mark read first can never exceed a `spent` read
    /// after it, while other processes keep spending (read the other way round, a spend in
    /// between would look like a ledger gone backwards).
    pub fn check(&self, model_id: &str, mark: u64, spent: u64, ledger: &str) -> Result<()> {
        if spent >= mark {
            return Ok(());
        }
        Err(AnswerError::config(
            "--ledger",
            format!(
                "{ledger} records {spent} answers spent for model {model_id}, but {mark} were already released \
                 (spend mark {}): the ledger was restored from an older backup, re-created, or lost its -wal file. \
                 Refusing to answer, since the budget would go backwards. If this is the ledger to keep, raise its \
                 count to the mark with `privpred ledger reconcile`",
                self.path.display()
            ),
        ))
    }
}

#[cfg(unix)]
fn same_file(f: &std::fs::File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (f.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(_f: &std::fs::File, path: &Path) -> bool {
    path.exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_only_rises_and_refuses_a_ledger_below_it() {
        let dir = tempfile::tempdir().unwrap();
        let m = SpendMark::new(dir.path().join("m.ledger-mark.json"));
        assert_eq!(m.read("a").unwrap(), 0);
        m.check("a", m.read("a").unwrap(), 0, "ledger").unwrap();
        m.raise("a", 5).unwrap();
        m.raise("a", 3).unwrap();
        m.raise("b", 7).unwrap();
        assert_eq!(m.read("a").unwrap(), 5);
        assert_eq!(m.read("b").unwrap(), 7);
        let mark = m.read("a").unwrap();
        m.check("a", mark, 5, "ledger").unwrap();
        m.check("a", mark, 9, "ledger").unwrap();
        let e = m.check("a", mark, 0, "ledger").unwrap_err();
        assert!(e.is_config(), "{e}");
        assert!(e.to_string().contains("5 were already released"), "{e}");
        std::fs::write(m.path(), "{").unwrap();
        assert!(m.read("a").is_err(), "a corrupt mark fails closed");
        assert!(m.raise("a", 9).is_err());
        // corrupt, foreign, negative and a directory: configuration errors (bad input)
        for text in [
            "{",
            r#"{"format": "other", "spent": {}}"#,
            r#"{"format": "privpred-spend-mark", "spent": {"a": -1}}"#,
        ] {
            std::fs::write(m.path(), text).unwrap();
            let e = m.read("a").unwrap_err();
            assert!(e.is_config(), "{text}: {e}");
            assert!(m.raise("a", 9).unwrap_err().is_config(), "{text}");
        }
        std::fs::remove_file(m.path()).unwrap();
        std::fs::create_dir(m.path()).unwrap();
        let e = m.read("a").unwrap_err();
        assert!(
            e.is_config() && e.to_string().contains("not a regular file"),
            "{e}"
        );
        assert!(m.raise("a", 9).unwrap_err().is_config());
    }

    #[test]
    fn concurrent_raises_keep_the_highest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mark.json");
        let hs: Vec<_> = (1..=16u64)
            .map(|i| {
                let m = SpendMark::new(path.clone());
                std::thread::spawn(move || m.raise("x", i).unwrap())
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(SpendMark::new(path).read("x").unwrap(), 16);
    }
}
