//! Small filesystem helpers: atomic writes and SHA-256 of files.

use crate::error::{DataError, Result};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// A sibling temporary path of `path` (same directory, so `rename` is atomic).
pub(crate) fn temp_sibling(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nonce: u64 = rand::random();
    path.with_file_name(format!(".{name}.tmp.{}.{nonce:016x}", std::process::id()))
}

/// Writes a file through `f` into a temporary sibling, flushes and syncs it, then renames it
/// over `path`. On any error the temporary file is removed and `path` is untouched.
pub fn write_atomic(
    path: &Path,
    f: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> Result<()> {
    let io = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = temp_sibling(path);
    let res = (|| {
        let file = File::create(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        f(&mut w)?;
        w.flush()?;
        w.get_ref().sync_all()?;
        drop(w);
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    Ok(())
}

/// SHA-256 (hex) of a file's raw bytes.
pub fn sha256_file(path: &Path) -> Result<String> {
    let io = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = File::open(path).map_err(io)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = f.read(&mut buf).map_err(io)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
    }
    Ok(hex(&h.finalize()))
}

/// Lower-case hex of bytes.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 (hex) of bytes.
pub fn sha256_bytes(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// One SHA-256 over several files' names and hashes (`name:hash` lines, in order).
pub fn combine_hashes(hashes: &[(String, String)]) -> String {
    let s: String = hashes.iter().map(|(n, h)| format!("{n}:{h}\n")).collect();
    sha256_bytes(s.as_bytes())
}
