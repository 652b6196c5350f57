//! Text files pinned by SHA-256 whose copies differ only in line endings: the wheels that
//! carry them are built per platform, and the Windows wheels (statsmodels 0.15.0's
//! `fair.csv`, scikit-learn 1.9.1's `breast_cancer.csv` and `wine_data.csv`) write their
//! lines with CRLF where the others write LF. The pinned checksum stays the guarantee: a copy
//! is accepted when its bytes, or its bytes with every CRLF written as LF, have it, and what
//! is installed is then exactly the pinned bytes.

use crate::error::{DataError, Result};
use crate::fsutil;
use std::path::Path;

/// The line endings of `bytes` written as LF: every CRLF pair becomes a single LF; a lone CR
/// stays.
fn lf_line_endings(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for (i, &b) in bytes.iter().enumerate() {
        if !(b == b'\r' && bytes.get(i + 1) == Some(&b'\n')) {
            out.push(b);
        }
    }
    out
}

/// Checks a text file against its pinned SHA-256 `pinned` and returns the bytes the checksum
/// covers: `source` itself when it has the checksum, else its LF form when that has it (a
/// copy with CRLF line endings); any other file is refused with a checksum error naming
/// `origin`, the pinned value and the file's own.
pub(crate) fn verified_text(source: Vec<u8>, origin: &Path, pinned: &str) -> Result<Vec<u8>> {
    let sha = fsutil::sha256_bytes(&source);
    if sha == pinned {
        return Ok(source);
    }
    let lf = lf_line_endings(&source);
    if lf.len() != source.len() && fsutil::sha256_bytes(&lf) == pinned {
        return Ok(lf);
    }
    Err(DataError::Checksum {
        path: origin.to_path_buf(),
        expected: pinned.into(),
        actual: sha,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::known;

    #[test]
    fn crlf_line_endings_become_lf_and_nothing_else_changes() {
        assert_eq!(lf_line_endings(b"a,b\r\n1,2\r\n"), b"a,b\n1,2\n");
        // a lone CR, a lone LF and a CR before a CRLF stay as they are
        assert_eq!(lf_line_endings(b"a\rb\nc\r\r\n"), b"a\rb\nc\r\n");
        assert_eq!(lf_line_endings(b""), b"");
    }

    #[test]
    fn a_file_is_accepted_when_it_or_its_lf_form_has_the_pinned_checksum() {
        let origin = Path::new("t.csv");
        let lf = b"\"a\",\"b\"\n1,2\n3,4.5\n".to_vec();
        let pinned = fsutil::sha256_bytes(&lf);
        let crlf = b"\"a\",\"b\"\r\n1,2\r\n3,4.5\r\n".to_vec();
        // both forms pass and yield exactly the pinned bytes
        assert_eq!(verified_text(lf.clone(), origin, &pinned).unwrap(), lf);
        assert_eq!(verified_text(crlf, origin, &pinned).unwrap(), lf);
        // any other change is refused, naming the pinned checksum: a changed cell in
        // either form, a line ending dropped, a trailing CR, an extra line, nothing
        let refused = [
            b"\"a\",\"b\"\n1,2\n3,4.6\n".to_vec(),
            b"\"a\",\"b\"\r\n1,2\r\n3,4.6\r\n".to_vec(),
            b"\"a\",\"b\"\n1,2\n3,4.5".to_vec(),
            b"\"a\",\"b\"\r\n1,2\r\n3,4.5\r\n\r".to_vec(),
            b"\"a\",\"b\"\r\n1,2\r\n3,4.5\r\n\r\n".to_vec(),
            Vec::new(),
        ];
        for bytes in refused {
            let e = verified_text(bytes, origin, &pinned).unwrap_err();
            assert!(e.to_string().contains(&pinned), "{e}");
        }
        // the real pins: a file that is not the pinned table is refused
        for real in [
            known::FAIR_SOURCE_CSV,
            known::BREAST_CANCER_CSV,
            known::WINE_CSV,
        ] {
            assert!(verified_text(lf.clone(), origin, real).is_err());
        }
    }

    /// The real tables end to end: a CRLF copy of each cached scikit-learn table (what the
    /// Windows wheels hold) goes through the fetch and installs as exactly the pinned file;
    /// the same copy with one byte changed is refused.
    #[test]
    fn a_crlf_copy_of_a_scikit_learn_table_installs_as_the_pinned_file() {
        for (name, t) in [
            ("breast-cancer", crate::table::BREAST_CANCER),
            ("wine", crate::table::WINE),
        ] {
            let cached = crate::read::cache_dir(name)
                .map(|d| d.join(t.file))
                .filter(|p| p.is_file());
            let what = format!("the {name} table (privpred data fetch {name})");
            let test = "a_crlf_copy_of_a_scikit_learn_table_installs_as_the_pinned_file";
            let Some(path) = crate::testdata::or_skip(cached, test, &what) else {
                continue;
            };
            let lf = std::fs::read(&path).unwrap();
            assert_eq!(fsutil::sha256_bytes(&lf), t.sha256);
            let crlf: Vec<u8> = lf
                .split(|&b| b == b'\n')
                .collect::<Vec<_>>()
                .join(&b"\r\n"[..]);
            let dir = tempfile::tempdir().unwrap();
            let src = dir.path().join(t.file);
            std::fs::write(&src, &crlf).unwrap();
            let target = dir.path().join("installed");
            let r = super::super::fetch_sklearn_table(&target, Some(&src), name, t).unwrap();
            assert_eq!(r.files, vec![(t.file.to_string(), t.sha256.to_string())]);
            assert_eq!(std::fs::read(target.join(t.file)).unwrap(), lf);
            let mut bad = crlf;
            let at = bad.len() / 2;
            bad[at] ^= 1;
            std::fs::write(&src, &bad).unwrap();
            let other = dir.path().join("refused");
            let e = super::super::fetch_sklearn_table(&other, Some(&src), name, t).unwrap_err();
            assert!(e.to_string().contains(t.sha256), "{e}");
            assert!(!other.exists(), "nothing installed after a refusal");
        }
    }
}
