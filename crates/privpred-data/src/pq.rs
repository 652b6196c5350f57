//! Reading Parquet tables behind a boundary: the parquet crate panics on some corrupt files
//! (out-of-range bit widths, inconsistent metadata, truncated pages) instead of returning an
//! error. Every call into it goes through `guarded`, which turns a panic into a
//! [`DataError::Format`] naming the file (its message kept quiet: a user sees one error line,
//! never a panic report), after cheap checks of the file's framing that refuse most
//! non-Parquet files before the crate sees them.

use crate::error::{DataError, Result};
use std::cell::Cell;
use std::path::Path;

thread_local! {
    /// Set while this thread runs a guarded call: a panic there is reported as an error.
    static GUARDED: Cell<bool> = const { Cell::new(false) };
}

/// Installs (once) a panic hook that stays quiet for panics inside `guarded` and hands
/// every other panic to the hook that was there before.
fn install_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !GUARDED.with(Cell::get) {
                previous(info);
            }
        }));
    });
}

fn fmt_err(path: &Path, reason: String) -> DataError {
    DataError::Format {
        path: path.to_path_buf(),
        reason,
    }
}

/// Runs one call into the parquet crate; a panic in it becomes an error naming `path`.
pub(crate) fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    install_hook();
    let was = GUARDED.with(|g| g.replace(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(was));
    r.unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "no message".into());
        Err(fmt_err(
            path,
            format!(
                "not a readable Parquet file: it is corrupt (the Parquet reader failed on it: {msg})"
            ),
        ))
    })
}

/// A Parquet file's framing: at least 12 bytes, `PAR1` at both ends, and a footer length
/// that fits in the file.
fn check_framing(path: &Path, f: &mut std::fs::File) -> Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let io = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let len = f.metadata().map_err(io)?.len();
    if len < 12 {
        return Err(fmt_err(
            path,
            format!("not a Parquet file: {len} bytes (a Parquet file holds at least 12)"),
        ));
    }
    let mut head = [0u8; 4];
    f.read_exact(&mut head).map_err(io)?;
    let mut tail = [0u8; 8];
    f.seek(SeekFrom::End(-8)).map_err(io)?;
    f.read_exact(&mut tail).map_err(io)?;
    f.seek(SeekFrom::Start(0)).map_err(io)?;
    if &head != b"PAR1" || &tail[4..] != b"PAR1" {
        return Err(fmt_err(
            path,
            "not a Parquet file (it does not begin and end with the magic bytes PAR1)".into(),
        ));
    }
    let footer = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) as u64;
    if footer > len - 12 {
        return Err(fmt_err(
            path,
            format!(
                "corrupt Parquet file: its footer claims {footer} bytes, the file has room for {} (file of {len} bytes)",
                len - 12
            ),
        ));
    }
    Ok(())
}

/// One Parquet value as the text a CSV would hold (a null is an empty cell, which a schema
/// reports as a missing value).
fn field_text(f: &parquet::record::Field) -> String {
    use parquet::record::Field;
    match f {
        Field::Null => String::new(),
        Field::Str(s) => s.clone(),
        Field::Bool(b) => b.to_string(),
        Field::Byte(v) => v.to_string(),
        Field::Short(v) => v.to_string(),
        Field::Int(v) => v.to_string(),
        Field::Long(v) => v.to_string(),
        Field::UByte(v) => v.to_string(),
        Field::UShort(v) => v.to_string(),
        Field::UInt(v) => v.to_string(),
        Field::ULong(v) => v.to_string(),
        Field::Float(v) => v.to_string(),
        Field::Double(v) => v.to_string(),
        other => other.to_string(),
    }
}

/// Reads every row of a Parquet file as text cells, handing each to `sink` with its position
/// (`row N`); returns the column names. Every call into the parquet crate is `guarded`;
/// `sink` runs outside the boundary.
pub fn read_parquet_cells(
    path: &Path,
    sink: &mut dyn FnMut(&[String], &str) -> Result<()>,
) -> Result<Vec<String>> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let mut f = std::fs::File::open(path).map_err(|source| DataError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    check_framing(path, &mut f)?;
    let bad = |e: parquet::errors::ParquetError| {
        fmt_err(path, format!("not a readable Parquet file ({e})"))
    };
    let reader = guarded(path, || SerializedFileReader::new(f).map_err(bad))?;
    let names: Vec<String> = guarded(path, || {
        Ok(reader
            .metadata()
            .file_metadata()
            .schema_descr()
            .root_schema()
            .get_fields()
            .iter()
            .map(|t| t.name().to_string())
            .collect())
    })?;
    let mut rows = guarded(path, || reader.get_row_iter(None).map_err(bad))?;
    let mut i = 0usize;
    loop {
        let next = guarded(path, || {
            rows.next()
                .map(|row| {
                    row.map(|row| {
                        row.get_column_iter()
                            .map(|(_, f)| field_text(f))
                            .collect::<Vec<String>>()
                    })
                    .map_err(bad)
                })
                .transpose()
        })?;
        let Some(row) = next else { break };
        i += 1;
        sink(&row, &format!("row {i}"))?;
    }
    Ok(names)
}
