//! The query file of `privpred predict`: CSV rows of raw features or an IDX image file.
//!
//! The input is bounded before it is read: at most [`MAX_QUERY_BYTES`] bytes and
//! [`MAX_QUERY_ROWS`] rows (an IDX header promising more is refused before its payload). A
//! CSV query file has no header unless `--header` says so; then its first non-blank line is
//! the header and is skipped. Every other line is a row of numbers separated by one kind of
//! delimiter (`,`, `;` or tab, the same throughout the file); a line that is not is refused
//! with its line and column, so no row is ever dropped and the answers line up with the
//! input rows.

use crate::exit::usage;
use crate::limits::{MAX_QUERY_BYTES, MAX_QUERY_ROWS};
use std::io::Read;
use std::path::Path;

const DELIMITERS: [(char, &str); 3] = [(',', "comma"), (';', "semicolon"), ('\t', "tab")];

/// Reads the query rows of `path` (each `d` finite values). `header`: the first non-blank
/// line of a CSV file is a header and is skipped.
pub fn read_queries(path: &Path, d: usize, header: bool) -> anyhow::Result<Vec<Vec<f32>>> {
    let bytes = read_bounded(path)?;
    if bytes.len() >= 4 && bytes[0] == 0 && bytes[1] == 0 && bytes[3] >= 1 {
        return read_idx_queries(path, d);
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        usage(format!(
            "{}: neither an IDX file nor UTF-8 CSV text",
            path.display()
        ))
    })?;
    parse_csv_queries(&text, path, d, header)
}

/// Reads the query rows of `path` as text cells, for a model with a schema (its rows hold
/// categories as well as numbers): CSV, comma-separated; `header`: the first non-blank line is
/// skipped. Bounded like [`read_queries`].
pub fn read_query_cells(path: &Path, header: bool) -> anyhow::Result<Vec<Vec<String>>> {
    let bytes = read_bounded(path)?;
    let mut rows = Vec::new();
    // the row limit is checked while reading, before the row past it is kept
    let mut over = false;
    let mut push = |c: &[String], _: &str| -> privpred_data::Result<()> {
        if rows.len() as u64 >= MAX_QUERY_ROWS {
            over = true;
            return Err(privpred_data::DataError::InvalidArgument {
                name: "query rows",
                value: "more".into(),
                expected: format!("at most {MAX_QUERY_ROWS}"),
            });
        }
        rows.push(c.to_vec());
        Ok(())
    };
    let parsed = privpred_data::table::parse_csv_cells(&bytes[..], path, header, &mut push);
    if over {
        return Err(too_many_rows(path, "the file holds more rows".into()));
    }
    parsed.map_err(|e| usage(e.to_string()))?;
    if rows.is_empty() {
        return Err(usage(format!("{}: no query rows", path.display())));
    }
    Ok(rows)
}

/// The file's bytes, refused beyond [`MAX_QUERY_BYTES`] (checked from the file's size first,
/// and while reading for devices and pipes whose size is unknown).
fn read_bounded(path: &Path) -> anyhow::Result<Vec<u8>> {
    let bad = |e: std::io::Error| usage(format!("{}: {e}", path.display()));
    let f = std::fs::File::open(path).map_err(bad)?;
    let meta = f.metadata().map_err(bad)?;
    if meta.is_dir() {
        return Err(usage(format!(
            "{}: is a directory, not a query file",
            path.display()
        )));
    }
    let too_big = || {
        usage(format!(
            "{}: query input larger than the limit of {MAX_QUERY_BYTES} bytes (privpred::limits::MAX_QUERY_BYTES); split it into smaller files",
            path.display()
        ))
    };
    if meta.is_file() && meta.len() > MAX_QUERY_BYTES {
        return Err(too_big());
    }
    let mut bytes = Vec::new();
    f.take(MAX_QUERY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(bad)?;
    if bytes.len() as u64 > MAX_QUERY_BYTES {
        return Err(too_big());
    }
    Ok(bytes)
}

fn too_many_rows(path: &Path, what: String) -> anyhow::Error {
    usage(format!(
        "{}: {what}, more than the limit of {MAX_QUERY_ROWS} query rows (privpred::limits::MAX_QUERY_ROWS); split it into smaller files",
        path.display()
    ))
}

fn read_idx_queries(path: &Path, d: usize) -> anyhow::Result<Vec<Vec<f32>>> {
    let dims = privpred_data::idx::read_header(path, 3)?;
    if dims[0] as u64 > MAX_QUERY_ROWS {
        return Err(too_many_rows(
            path,
            format!("the IDX header promises {} images", dims[0]),
        ));
    }
    let arr = privpred_data::idx::read_images(path)?;
    let n = arr.dims.first().copied().unwrap_or(0);
    if n == 0 || arr.data.len() != n * d {
        return Err(usage(format!(
            "{}: IDX file holds {} items of {} values; the model expects {d} raw features per query",
            path.display(),
            n,
            arr.data.len().checked_div(n).unwrap_or(0)
        )));
    }
    Ok(arr.data.chunks_exact(d).map(|r| r.to_vec()).collect())
}

/// The one delimiter of a line (`None` for a single value); an error when it mixes kinds.
fn line_delimiter(line: &str) -> Result<Option<(char, &'static str)>, String> {
    let used: Vec<_> = DELIMITERS
        .iter()
        .filter(|(c, _)| line.contains(*c))
        .copied()
        .collect();
    match used[..] {
        [] => Ok(None),
        [one] => Ok(Some(one)),
        _ => Err(format!(
            "mixes delimiters ({}); use one of comma, semicolon or tab throughout",
            used.iter().map(|u| u.1).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Parses CSV query text: see the module documentation for the rules.
fn parse_csv_queries(
    text: &str,
    path: &Path,
    d: usize,
    header: bool,
) -> anyhow::Result<Vec<Vec<f32>>> {
    let at = |ln: usize, what: String| usage(format!("{} line {}: {what}", path.display(), ln + 1));
    let mut rows = Vec::new();
    let mut delim: Option<(char, &str)> = None;
    let mut skip_header = header;
    for (ln, raw) in text.lines().enumerate() {
        let line = raw.trim_matches(|c| c == ' ' || c == '\r');
        if line.is_empty() {
            continue;
        }
        if std::mem::take(&mut skip_header) {
            continue;
        }
        if rows.len() as u64 >= MAX_QUERY_ROWS {
            return Err(too_many_rows(path, "the file holds more rows".into()));
        }
        let this = line_delimiter(line).map_err(|e| at(ln, e))?;
        match (delim, this) {
            (Some(a), Some(b)) if a.0 != b.0 => {
                return Err(at(
                    ln,
                    format!(
                        "separated by {}, earlier rows by {}; use one delimiter throughout",
                        b.1, a.1
                    ),
                ));
            }
            (None, Some(b)) => delim = Some(b),
            _ => {}
        }
        let fields: Vec<&str> = match this {
            Some((c, _)) => line.split(c).map(str::trim).collect(),
            None => vec![line],
        };
        let mut row = Vec::with_capacity(fields.len());
        for (j, f) in fields.iter().enumerate() {
            let col = j + 1;
            if f.is_empty() {
                return Err(at(
                    ln,
                    format!("column {col} is empty (a missing value or a trailing delimiter)"),
                ));
            }
            let v: f32 = f.parse().map_err(|_| {
                let hint = if rows.is_empty() && !header {
                    "; a query file has no header line unless --header is given"
                } else {
                    ""
                };
                at(
                    ln,
                    format!(
                        "column {col} (`{}`) is not a number{hint}",
                        f.escape_debug()
                    ),
                )
            })?;
            if !v.is_finite() {
                return Err(at(
                    ln,
                    format!(
                        "column {col} (`{}`) is not a finite number",
                        f.escape_debug()
                    ),
                ));
            }
            row.push(v);
        }
        if row.len() != d {
            return Err(at(
                ln,
                format!("{} values, the model expects {d} raw features", row.len()),
            ));
        }
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(usage(format!("{}: no query rows", path.display())));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, header: bool) -> Result<Vec<Vec<f32>>, String> {
        parse_csv_queries(text, Path::new("q.csv"), 3, header).map_err(|e| e.to_string())
    }

    #[test]
    fn a_first_row_with_a_typo_is_refused_not_dropped_as_a_header() {
        let e = parse("1,2,x3\n4,5,6\n", false).unwrap_err();
        assert!(
            e.contains("line 1") && e.contains("`x3`") && e.contains("--header"),
            "{e}"
        );
        let e = parse("a,b,c\n4,5,6\n", false).unwrap_err();
        assert!(e.contains("--header"), "{e}");
        assert_eq!(
            parse("a,b,c\n4,5,6\n", true).unwrap(),
            vec![vec![4.0, 5.0, 6.0]]
        );
        // --header skips exactly one line: a second text line is an error.
        assert!(
            parse("a,b,c\nd,e,f\n1,2,3\n", true)
                .unwrap_err()
                .contains("line 2")
        );
    }

    #[test]
    fn a_trailing_comma_names_the_empty_column() {
        let e = parse("1,2,3,\n", false).unwrap_err();
        assert!(
            e.contains("line 1") && e.contains("column 4 is empty"),
            "{e}"
        );
    }

    #[test]
    fn mixed_delimiters_are_refused() {
        let e = parse("1,2;3\n", false).unwrap_err();
        assert!(
            e.contains("mixes delimiters") && e.contains("comma, semicolon"),
            "{e}"
        );
        let e = parse("1,2,3\n4;5;6\n", false).unwrap_err();
        assert!(e.contains("line 2") && e.contains("semicolon"), "{e}");
        assert_eq!(parse("1\t2\t3\n4\t5\t6\n", false).unwrap().len(), 2);
        assert_eq!(
            parse("1;2;3\r\n", false).unwrap(),
            vec![vec![1.0, 2.0, 3.0]]
        );
    }

    #[test]
    fn a_non_finite_value_names_its_column() {
        let e = parse("1,inf,3\n", false).unwrap_err();
        assert!(e.contains("column 2 (`inf`) is not a finite number"), "{e}");
    }

    #[test]
    fn an_unbounded_input_is_refused_at_the_size_limit() {
        let t0 = std::time::Instant::now();
        let e = read_bounded(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("MAX_QUERY_BYTES"), "{e}");
        assert!(t0.elapsed() < std::time::Duration::from_secs(20));
        let e = read_bounded(Path::new("/")).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
    }
}
