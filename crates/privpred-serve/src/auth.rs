//! Bearer-token access control. Tokens are kept only as SHA-256 hashes and compared in
//! constant time.
//!
//! Tokens file format: one entry per line; blank lines and lines starting with `#` are
//! ignored. A line `sha256:<64 hex digits>` is the hash of a token (the recommended form: the
//! file then holds no secret); any other line is a plaintext token, hashed at load (a warning
//! is printed, since the file then holds secrets at rest). Generate a hash with
//! `printf %s "$TOKEN" | sha256sum`.

use crate::error::{Result, ServeError};
use sha2::{Digest, Sha256};
use std::path::Path;

/// The set of accepted token hashes.
#[derive(Clone)]
pub struct TokenSet {
    hashes: Vec<[u8; 32]>,
    plaintext_entries: usize,
}

impl std::fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenSet({} tokens)", self.hashes.len())
    }
}

impl TokenSet {
    /// Reads a tokens file (see the module docs). Errors name the file and line.
    pub fn load(path: &Path) -> Result<TokenSet> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ServeError::config(format!("--tokens {}", path.display()), e.to_string())
        })?;
        Self::parse(&text).map_err(|e| match e {
            ServeError::Config { message, .. } => {
                ServeError::config(format!("--tokens {}", path.display()), message)
            }
            e => e,
        })
    }

    /// Parses the tokens file format.
    pub fn parse(text: &str) -> Result<TokenSet> {
        let mut hashes = Vec::new();
        let mut plaintext_entries = 0;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(h) = line.strip_prefix("sha256:") {
                let h = h.trim();
                let bytes = parse_hex32(h).ok_or_else(|| {
                    ServeError::config(
                        "tokens file",
                        format!("line {}: sha256: must be followed by 64 hex digits", i + 1),
                    )
                })?;
                hashes.push(bytes);
            } else {
                plaintext_entries += 1;
                hashes.push(Sha256::digest(line.as_bytes()).into());
            }
        }
        if hashes.is_empty() {
            return Err(ServeError::config(
                "tokens file",
                "holds no tokens (one per line, or sha256:<hex>)",
            ));
        }
        Ok(TokenSet {
            hashes,
            plaintext_entries,
        })
    }

    /// Number of accepted tokens.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Whether the set is empty (never, once loaded).
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// How many entries were plaintext tokens (hashed at load).
    pub fn plaintext_entries(&self) -> usize {
        self.plaintext_entries
    }

    /// Checks an `Authorization` header value (`Bearer <token>`), in time independent of
    /// which stored hash (if any) matches.
    pub fn verify_header(&self, header: Option<&str>) -> bool {
        self.identify_header(header).is_some()
    }

    /// Like [`TokenSet::verify_header`], returning the SHA-256 of the accepted token (the
    /// client's identity, e.g. the scope of its answer store), or None if refused.
    pub fn identify_header(&self, header: Option<&str>) -> Option<[u8; 32]> {
        let token = header.and_then(|h| {
            let (scheme, rest) = h.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })?;
        let h: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut ok = 0u8;
        for stored in &self.hashes {
            ok |= ct_eq(stored, &h);
        }
        (ok == 1).then_some(h)
    }
}

/// 1 if equal, 0 otherwise, without data-dependent branches.
fn ct_eq(a: &[u8; 32], b: &[u8; 32]) -> u8 {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    // diff == 0 → 1, else 0, branch-free.
    let d = u16::from(diff);
    (((d.wrapping_sub(1)) >> 8) & 1) as u8
}

fn parse_hex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, chunk) in s.as_bytes().chunks(2).enumerate() {
        let hi = (chunk[0] as char).to_digit(16)?;
        let lo = (chunk[1] as char).to_digit(16)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_and_plain_tokens() {
        let h = crate::model::hex(&Sha256::digest(b"s3cret"));
        let set = TokenSet::parse(&format!("# comment\n\nsha256:{h}\nplain-token\n")).unwrap();
        assert_eq!(set.len(), 2);
        assert_eq!(set.plaintext_entries(), 1);
        assert!(set.verify_header(Some("Bearer s3cret")));
        assert!(set.verify_header(Some("bearer plain-token")));
        assert!(!set.verify_header(Some("Bearer wrong")));
        assert!(!set.verify_header(Some("Basic s3cret")));
        assert!(!set.verify_header(None));
        assert!(TokenSet::parse("sha256:abc\n").is_err());
        assert!(TokenSet::parse("# nothing\n").is_err());
    }

    #[test]
    fn constant_time_eq() {
        assert_eq!(ct_eq(&[3; 32], &[3; 32]), 1);
        let mut b = [3; 32];
        b[31] = 2;
        assert_eq!(ct_eq(&[3; 32], &b), 0);
    }
}
