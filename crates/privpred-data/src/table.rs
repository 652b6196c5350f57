//! Tables read through a [`Schema`]: CSV (plain or gzip) and Parquet files, every row mapped
//! into the unit ball by the schema's public bounds and categories (see [`crate::schema`]).
//! A row that does not match the schema is refused with an error naming the file, the row and
//! the column. Also the raw reading of a table's cells that drafts a schema.

use crate::dataset::{Dataset, Provenance};
use crate::error::{DataError, Result};
pub use crate::pq::read_parquet_cells;
use crate::schema::Schema;
use crate::spec::DatasetSpec;
use crate::{fsutil, known};
use std::path::Path;

/// A table shipped inside scikit-learn's (or statsmodels') wheel, fetched by `privpred data fetch NAME`, with
/// the schema it is read through by default.
#[derive(Debug, Clone, Copy)]
pub struct NamedTable {
    /// The file's name in the cache directory (as in the wheel).
    pub file: &'static str,
    /// Its path inside the wheel it comes from (scikit-learn 1.9.1's; statsmodels' for `fair`).
    pub member: &'static str,
    /// Its SHA-256, verified when fetched and on every load.
    pub sha256: &'static str,
    /// The default schema (`examples/NAME.schema.json`).
    pub schema: &'static str,
}

/// scikit-learn's breast-cancer table. Its first line is scikit-learn's own (row and
/// column counts, class names) and is skipped.
pub const BREAST_CANCER: NamedTable = NamedTable {
    file: "breast_cancer.csv",
    member: "sklearn/datasets/data/breast_cancer.csv",
    sha256: known::BREAST_CANCER_CSV,
    schema: include_str!("../../../examples/breast-cancer.schema.json"),
};

/// scikit-learn's wine table (first line skipped likewise).
pub const WINE: NamedTable = NamedTable {
    file: "wine_data.csv",
    member: "sklearn/datasets/data/wine_data.csv",
    sha256: known::WINE_CSV,
    schema: include_str!("../../../examples/wine.schema.json"),
};

/// Fair's extramarital-affairs survey as statsmodels ships it, derived by
/// `privpred data fetch fair` into a binary table (label `affairs_any` = `affairs > 0`); its
/// first line (the column names) is skipped. `member` is the source file in the statsmodels
/// wheel; `sha256` pins the derived file.
pub const FAIR: NamedTable = NamedTable {
    file: "fair.csv",
    member: "statsmodels/datasets/fair/fair.csv",
    sha256: known::FAIR_CSV,
    schema: include_str!("../../../examples/fair.schema.json"),
};

/// The named table of a spec, if it is one.
pub fn named_table(spec: &DatasetSpec) -> Option<NamedTable> {
    match spec {
        DatasetSpec::BreastCancer => Some(BREAST_CANCER),
        DatasetSpec::Wine => Some(WINE),
        DatasetSpec::Fair => Some(FAIR),
        _ => None,
    }
}

/// The schema a named table is read through unless another is given.
pub fn default_schema(spec: &DatasetSpec) -> Option<Schema> {
    let t = named_table(spec)?;
    Schema::from_json(
        t.schema,
        Path::new(&format!("examples/{}.schema.json", spec.name())),
    )
    .ok()
}

/// Loads a named table from one directory (`Ok(None)` when its file is not there): the
/// file's SHA-256 verified, its first line (scikit-learn's, or the column names) skipped, every row through
/// `schema` or the table's default schema (the caller splits off the test rows).
pub(crate) fn load_named_table(
    spec: &DatasetSpec,
    dir: &Path,
    schema: Option<&Schema>,
) -> Result<Option<Dataset>> {
    let Some(t) = named_table(spec) else {
        return Ok(None);
    };
    let p = dir.join(t.file);
    if !p.is_file() {
        return Ok(None);
    }
    let bytes = std::fs::read(&p).map_err(|source| DataError::Io {
        path: p.clone(),
        source,
    })?;
    let sha = fsutil::sha256_bytes(&bytes);
    if sha != t.sha256 {
        return Err(DataError::Checksum {
            path: p,
            expected: t.sha256.into(),
            actual: sha,
        });
    }
    let schema = match schema {
        Some(s) => s.clone(),
        None => Schema::from_json(t.schema, Path::new(t.file))?,
    };
    let mut ds = encode_named_rows(&bytes, &p, &schema, &spec.name())?;
    ds.provenance.checksum = Some(sha);
    ds.provenance.verified = true;
    Ok(Some(ds))
}

/// A named table's rows after its first line (scikit-learn's, or the column names) through
/// `schema`. A schema with `"header": true` names the next line its header: it must be the
/// schema's column names (a data row there is refused, never dropped unseen).
fn encode_named_rows(bytes: &[u8], p: &Path, schema: &Schema, name: &str) -> Result<Dataset> {
    let body = bytes
        .iter()
        .position(|&b| b == b'\n')
        .map_or(&bytes[..0], |i| &bytes[i + 1..]);
    encode_rows(p, schema, name, |sink| {
        if let Some(h) = parse_csv_cells(body, p, schema.header, sink)? {
            schema.check_header(&h).map_err(|e| {
                fmt_err(
                    p,
                    format!("line 2 (the schema says `\"header\": true`; the file's first line is skipped): {e}"),
                )
            })?;
        }
        Ok(())
    })
}

/// Refuses a schema given for a dataset that is not a table (`csv:`, `parquet:` or a named
/// table): it would be ignored.
pub(crate) fn check_schema_applies(spec: &DatasetSpec, has_schema: bool) -> Result<()> {
    let table = matches!(
        spec,
        DatasetSpec::Csv { .. }
            | DatasetSpec::Parquet { .. }
            | DatasetSpec::BreastCancer
            | DatasetSpec::Wine
            | DatasetSpec::Fair
    );
    if has_schema && !table {
        return Err(DataError::InvalidArgument {
            name: "schema",
            value: format!("given for dataset {}", spec.name()),
            expected: "a schema only for a table: csv:PATH, parquet:PATH, breast-cancer, wine or fair (csv-pixels:, idx:, images: and the image sets are read without one); drop --schema, or read the file as csv:PATH".into(),
        });
    }
    Ok(())
}

/// A table file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    /// Comma-separated text, plain or gzip.
    Csv,
    /// Apache Parquet.
    Parquet,
}

fn fmt_err(path: &Path, reason: String) -> DataError {
    DataError::Format {
        path: path.to_path_buf(),
        reason,
    }
}

/// Reads a table file through `schema` into a dataset of encoded rows (every row ‖x‖ ≤ 1),
/// its classes the schema's, the schema and the file's SHA-256 recorded in its provenance.
pub fn read_table(
    path: &Path,
    format: TableFormat,
    schema: &Schema,
    name: &str,
) -> Result<Dataset> {
    if !path.is_file() {
        return Err(DataError::NotFound(format!(
            "{}: no such file",
            path.display()
        )));
    }
    let sha = fsutil::sha256_file(path)?;
    let mut ds = encode_rows(path, schema, name, |sink| match format {
        TableFormat::Csv => {
            if let Some(h) = read_csv_cells(path, schema.header, sink)? {
                schema
                    .check_header(&h)
                    .map_err(|e| fmt_err(path, format!("line 1: {e}")))?;
            }
            Ok(())
        }
        TableFormat::Parquet => {
            let names = read_parquet_cells(path, sink)?;
            if schema.header {
                schema
                    .check_header(&names)
                    .map_err(|e| fmt_err(path, format!("Parquet columns: {e}")))?;
            }
            Ok(())
        }
    })?;
    // the file's hash, for the results' provenance and to seed draws by content; a private
    // model's artifact leaves it out (a hash of the caller's own file identifies its content)
    ds.provenance.checksum = Some(sha);
    Ok(ds)
}

/// Runs `read`, which hands every data row to the sink, and encodes the rows through `schema`
/// into a dataset (the first row that does not match is refused, naming it and the column).
fn encode_rows(
    path: &Path,
    schema: &Schema,
    name: &str,
    read: impl FnOnce(&mut dyn FnMut(&[String], &str) -> Result<()>) -> Result<()>,
) -> Result<Dataset> {
    let mut features = Vec::new();
    let mut labels = Vec::new();
    let mut sink = |cells: &[String], row: &str| -> Result<()> {
        let (x, y) = schema.encode_row(cells).map_err(|e| {
            fmt_err(
                path,
                format!("{row}: {e} (the schema does not match the file)"),
            )
        })?;
        features.extend_from_slice(&x);
        labels.push(y);
        Ok(())
    };
    read(&mut sink)?;
    if labels.is_empty() {
        return Err(fmt_err(path, "empty table: no data rows".into()));
    }
    let prov = Provenance {
        name: name.to_string(),
        source: path.display().to_string(),
        steps: vec![schema.describe()],
        feature_shape: vec![schema.feature_dim()],
        class_names: schema.classes().to_vec(),
        schema: Some(schema.clone()),
        ..Default::default()
    };
    Dataset::new(
        schema.feature_dim(),
        schema.classes().len(),
        features,
        labels,
        prov,
    )
}

/// Reads every row of a CSV file as text cells, handing each data row to `sink` with its
/// position (`data row N (line L)`); with `header` the first non-blank row is returned instead.
/// Blank lines are skipped; the text must be UTF-8.
pub fn read_csv_cells(
    path: &Path,
    header: bool,
    sink: &mut dyn FnMut(&[String], &str) -> Result<()>,
) -> Result<Option<Vec<String>>> {
    let r = crate::idx::open_maybe_gz(path)?;
    parse_csv_cells(r, path, header, sink)
}

/// [`read_csv_cells`] from a reader; `path` names the source in errors.
pub fn parse_csv_cells<R: std::io::Read>(
    r: R,
    path: &Path,
    header: bool,
    sink: &mut dyn FnMut(&[String], &str) -> Result<()>,
) -> Result<Option<Vec<String>>> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(r);
    let mut rec = csv::StringRecord::new();
    let mut names = None;
    let mut want_header = header;
    let mut n = 0usize;
    let mut cells: Vec<String> = Vec::new();
    loop {
        let more = rdr
            .read_record(&mut rec)
            .map_err(|e| fmt_err(path, format!("malformed CSV or not UTF-8 text: {e}")))?;
        if !more {
            break;
        }
        if rec.len() == 1 && rec.get(0).is_some_and(str::is_empty) {
            continue;
        }
        cells.clear();
        cells.extend(rec.iter().map(str::to_string));
        if want_header {
            want_header = false;
            names = Some(cells.clone());
            continue;
        }
        n += 1;
        let line = rec.position().map_or(0, |p| p.line());
        sink(&cells, &format!("data row {n} (line {line})"))?;
    }
    Ok(names)
}

/// A table's data rows as text cells.
pub type Cells = Vec<Vec<String>>;

/// Reads a table's cells for drafting a schema: the header (for CSV, when every cell of the
/// first row is text that is not a number; Parquet's column names always) and the data rows.
pub fn read_cells(path: &Path, format: TableFormat) -> Result<(Option<Vec<String>>, Cells)> {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut push = |c: &[String], _: &str| -> Result<()> {
        rows.push(c.to_vec());
        Ok(())
    };
    let header = match format {
        TableFormat::Csv => {
            read_csv_cells(path, false, &mut push)?;
            let is_header = rows
                .first()
                .is_some_and(|r| r.iter().all(|c| !c.is_empty() && c.parse::<f64>().is_err()));
            is_header.then(|| rows.remove(0))
        }
        TableFormat::Parquet => Some(read_parquet_cells(path, &mut push)?),
    };
    Ok((header, rows))
}

/// A table file's cells for a private schema draft: its header as the caller declares it
/// ([`crate::schema::declare_header`]; `header = false` is refused for a Parquet file, whose
/// column names are its header) and its rows as text.
pub fn draft_input(path: &Path, header: bool) -> Result<(Option<Vec<String>>, Cells)> {
    let format = format_of(path);
    if !header && format == TableFormat::Parquet {
        return Err(DataError::InvalidArgument {
            name: "--no-header",
            value: "true".into(),
            expected: format!(
                "applies to CSV files only: {} is Parquet, whose column names are its header",
                path.display()
            ),
        });
    }
    let (detected, rows) = read_cells(path, format)?;
    Ok(crate::schema::declare_header(detected, rows, header))
}

/// The format of a table file from its name: `.parquet`/`.pq` is Parquet, anything else CSV.
pub fn format_of(path: &Path) -> TableFormat {
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("parquet") || e.eq_ignore_ascii_case("pq") => {
            TableFormat::Parquet
        }
        _ => TableFormat::Csv,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_tables_header_row_is_checked_against_the_schema() {
        let mk = |header: bool| {
            Schema::from_json(
                &format!(
                    r#"{{"privpred_schema": 1, "header": {header}, "columns": [
                    {{"name": "x", "type": "numeric", "min": 0, "max": 10}},
                    {{"name": "y", "type": "label", "classes": ["0", "1"]}}]}}"#
                ),
                Path::new("s.json"),
            )
            .unwrap()
        };
        let p = Path::new("t.csv");
        let file = b"3,2,a,b\n1,0\n2,1\n3,0\n";
        // without a header every row after the first line is data
        assert_eq!(encode_named_rows(file, p, &mk(false), "t").unwrap().n, 3);
        // with one, the first data row is not the column names: refused, nothing dropped
        let e = encode_named_rows(file, p, &mk(true), "t")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 2") && e.contains("`1`") && e.contains("`x`"),
            "{e}"
        );
        // the column names there are the header
        let named = b"3,2,a,b\nx,y\n1,0\n2,1\n";
        assert_eq!(encode_named_rows(named, p, &mk(true), "t").unwrap().n, 2);
    }
}
