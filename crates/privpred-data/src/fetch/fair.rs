//! `privpred data fetch fair`: statsmodels' copy of Fair's extramarital-affairs survey
//! (Fair 1978, *Journal of Political Economy*; 6,366 rows), taken from the statsmodels wheel
//! that `pip download` offers, verified, and installed as a derived binary-label table.
//!
//! The derivation is public and data-independent: the eight survey answers are kept as they
//! are, and the last column, `affairs` (time spent in extramarital affairs), is replaced by
//! `affairs_any` = 1 when `affairs > 0` and 0 otherwise. Both the source file and the derived
//! file are pinned by SHA-256.

use super::lines::verified_text;
use super::{FetchReport, install, scratch};
use crate::error::{DataError, Result};
use crate::{fsutil, known};
use std::path::Path;

/// The pinned statsmodels release whose wheel holds the table.
pub const STATSMODELS_PIN: &str = "statsmodels==0.15.0";

/// The table's path inside the statsmodels wheel.
pub const FAIR_MEMBER: &str = "statsmodels/datasets/fair/fair.csv";

/// The columns of statsmodels' `fair.csv`, in order.
const SOURCE_COLUMNS: [&str; 9] = [
    "rate_marriage",
    "age",
    "yrs_married",
    "children",
    "religious",
    "educ",
    "occupation",
    "occupation_husb",
    "affairs",
];

/// The derived table's label column.
const LABEL: &str = "affairs_any";

/// Derives the installed table from statsmodels' `fair.csv`: a header line of the column
/// names (the label renamed `affairs_any`), then each row's eight survey answers unchanged
/// and `1` when `affairs > 0`, else `0`. Refuses a file whose header or cells differ from
/// statsmodels' layout.
pub fn derive_fair(source: &[u8], path: &Path) -> Result<Vec<u8>> {
    let bad = |reason: String| DataError::Format {
        path: path.to_path_buf(),
        reason,
    };
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(source);
    let header: Vec<String> = rdr
        .headers()
        .map_err(|e| bad(format!("malformed CSV: {e}")))?
        .iter()
        .map(str::to_string)
        .collect();
    if header != SOURCE_COLUMNS {
        return Err(bad(format!(
            "line 1: expected the columns {}, found {}",
            SOURCE_COLUMNS.join(","),
            header.join(",")
        )));
    }
    let mut out = SOURCE_COLUMNS[..8].join(",");
    out.push(',');
    out.push_str(LABEL);
    out.push('\n');
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| bad(format!("data row {}: malformed CSV: {e}", i + 1)))?;
        if rec.len() != SOURCE_COLUMNS.len() {
            return Err(bad(format!(
                "data row {}: {} cells, expected {}",
                i + 1,
                rec.len(),
                SOURCE_COLUMNS.len()
            )));
        }
        let affairs: f64 = rec[8].trim().parse().map_err(|_| {
            bad(format!(
                "data row {}: column `affairs`: {:?} is not a number",
                i + 1,
                &rec[8]
            ))
        })?;
        for cell in rec.iter().take(8) {
            out.push_str(cell);
            out.push(',');
        }
        out.push(if affairs > 0.0 { '1' } else { '0' });
        out.push('\n');
    }
    Ok(out.into_bytes())
}

/// Fetches the fair table into `target`: statsmodels' `fair.csv` from the wheel (or `from`:
/// the wheel, or that CSV itself), its SHA-256 checked, then the derived table written,
/// checked against its own pinned SHA-256 and installed.
pub(super) fn fetch_fair(target: &Path, from: Option<&Path>) -> Result<FetchReport> {
    let tmp = scratch(target)?;
    let stage = tmp.0.join("fair");
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DataError::Io { path, source }
    };
    std::fs::create_dir_all(&stage).map_err(io(&stage))?;
    let (source, origin, method) = match from {
        Some(p) if p.extension().is_some_and(|x| x == "csv") => (
            std::fs::read(p).map_err(io(p))?,
            p.to_path_buf(),
            format!("copied from {}", p.display()),
        ),
        _ => {
            let wheel = super::pinned_wheel(&tmp.0, from, STATSMODELS_PIN, "fair")?;
            let bytes = crate::zip::read_member(&wheel, FAIR_MEMBER)?;
            let name = wheel
                .file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            (bytes, wheel, format!("{FAIR_MEMBER} from {name}"))
        }
    };
    let source = verified_text(source, &origin, known::FAIR_SOURCE_CSV)?;
    let derived = derive_fair(&source, &origin)?;
    let dst = stage.join(crate::table::FAIR.file);
    let dsha = fsutil::sha256_bytes(&derived);
    if dsha != crate::table::FAIR.sha256 {
        return Err(DataError::Checksum {
            path: dst,
            expected: crate::table::FAIR.sha256.into(),
            actual: dsha,
        });
    }
    std::fs::write(&dst, derived).map_err(io(&dst))?;
    install(&stage, target)?;
    Ok(FetchReport {
        dir: target.to_path_buf(),
        method: format!("{method}, label affairs_any = affairs > 0"),
        verified: true,
        files: vec![(crate::table::FAIR.file.into(), dsha)],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivation_keeps_answers_and_thresholds_affairs_at_zero() {
        let src = b"\"rate_marriage\",\"age\",\"yrs_married\",\"children\",\"religious\",\"educ\",\"occupation\",\"occupation_husb\",\"affairs\"\n\
3,32,9,3,3,17,2,5,0.1111111\n5,22,2.5,0,1,16,3,5,0\n4,37,16.5,4,3,16,5,5,0.0\n";
        let out = derive_fair(src, Path::new("fair.csv")).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "rate_marriage,age,yrs_married,children,religious,educ,occupation,occupation_husb,affairs_any\n\
3,32,9,3,3,17,2,5,1\n5,22,2.5,0,1,16,3,5,0\n4,37,16.5,4,3,16,5,5,0\n"
        );
    }

    #[test]
    fn derivation_is_the_same_from_crlf_and_lf_sources() {
        let lf = b"rate_marriage,age,yrs_married,children,religious,educ,occupation,occupation_husb,affairs\n3,32,9,3,3,17,2,5,0.1111111\n5,22,2.5,0,1,16,3,5,0\n";
        let crlf = lf
            .split(|&b| b == b'\n')
            .collect::<Vec<_>>()
            .join(&b"\r\n"[..]);
        assert_eq!(crlf.len(), lf.len() + 3);
        let pinned = fsutil::sha256_bytes(lf);
        let from_crlf = verified_text(crlf, Path::new("w"), &pinned).unwrap();
        assert_eq!(
            derive_fair(&from_crlf, Path::new("w")).unwrap(),
            derive_fair(lf, Path::new("l")).unwrap()
        );
    }

    #[test]
    fn derivation_refuses_another_layout() {
        let e = derive_fair(b"a,b\n1,2\n", Path::new("x.csv")).unwrap_err();
        assert!(e.to_string().contains("expected the columns"), "{e}");
        let src = b"rate_marriage,age,yrs_married,children,religious,educ,occupation,occupation_husb,affairs\n1,2,3,4,5,6,7,8,x\n";
        let e = derive_fair(src, Path::new("x.csv")).unwrap_err();
        assert!(
            e.to_string().contains("data row 1") && e.to_string().contains("affairs"),
            "{e}"
        );
    }
}
