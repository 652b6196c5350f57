//! A table handed over column by column (Python's arrays and DataFrames): the encoding of
//! [`Schema::encode_row`], cell for cell, without a text cell per number. A numeric column
//! comes as numbers; any other as its distinct text cells and, per row, the index of its
//! cell, so each distinct cell is encoded once.

use super::{ColumnType, Schema, position_of, show_list};

/// One column of a table, every row's value.
#[derive(Debug, Clone, Copy)]
pub enum ColumnValues<'a> {
    /// Numbers, for a numeric column (NaN: a missing value).
    Numbers(&'a [f64]),
    /// Text cells by index: row i holds `cells[codes[i]]`; a negative code is a missing value
    /// (an empty cell).
    Coded {
        /// The distinct cells.
        cells: &'a [String],
        /// Each row's index into `cells`.
        codes: &'a [i64],
    },
}

impl ColumnValues<'_> {
    fn len(&self) -> usize {
        match self {
            ColumnValues::Numbers(x) => x.len(),
            ColumnValues::Coded { codes, .. } => codes.len(),
        }
    }

    /// Row i's cell as text (a number as its shortest round-trip form).
    fn text(&self, i: usize) -> String {
        match self {
            ColumnValues::Numbers(x) if x[i].is_nan() => String::new(),
            ColumnValues::Numbers(x) => x[i].to_string(),
            ColumnValues::Coded { cells, codes } => usize::try_from(codes[i])
                .ok()
                .and_then(|c| cells.get(c))
                .map_or(String::new(), |c| c.trim().to_string()),
        }
    }
}

/// A column's cells encoded once each: the encoding (or its error) per distinct cell.
type Encoded = Vec<std::result::Result<Vec<f64>, String>>;

/// The encoded rows and, with labels, the class indices; or the first bad row and what is
/// wrong.
pub type EncodedColumns = std::result::Result<(Vec<f32>, Option<Vec<u32>>), (usize, String)>;

impl Schema {
    /// The encoded rows (row-major, [`Schema::feature_dim`] values each) of a table given as
    /// its feature columns (every declared column but the label, in order), and the class
    /// index of each row when `labels` is given. `Err` holds the first bad row and what is
    /// wrong, worded as [`Schema::encode_row`] words it.
    pub fn encode_columns(
        &self,
        columns: &[ColumnValues<'_>],
        labels: Option<ColumnValues<'_>>,
    ) -> EncodedColumns {
        let features: Vec<_> = self
            .columns
            .iter()
            .filter(|c| c.kind != ColumnType::Label)
            .collect();
        if columns.len() != features.len() {
            return Err((
                0,
                format!(
                    "{} columns, the schema declares {} besides the label",
                    columns.len(),
                    features.len()
                ),
            ));
        }
        let n = labels.map_or_else(|| columns.first().map_or(0, |c| c.len()), |l| l.len());
        if let Some(bad) = columns.iter().position(|c| c.len() != n) {
            return Err((
                0,
                format!(
                    "column `{}` has {} values, the others {n}",
                    features[bad].name,
                    columns[bad].len()
                ),
            ));
        }
        // each distinct text cell of each column, encoded once
        let once: Vec<Option<Encoded>> = features
            .iter()
            .zip(columns)
            .map(|(c, v)| match v {
                ColumnValues::Coded { cells, .. } => Some(
                    cells
                        .iter()
                        .map(|cell| {
                            let mut seg = Vec::new();
                            c.encode(cell.trim(), &self.map, &mut seg).map(|_| seg)
                        })
                        .collect(),
                ),
                ColumnValues::Numbers(_) => None,
            })
            .collect();
        let mut out = Vec::with_capacity(n * self.feature_dim());
        let mut v = Vec::with_capacity(self.feature_dim());
        for i in 0..n {
            v.clear();
            for ((c, values), once) in features.iter().zip(columns).zip(&once) {
                let got = match (values, once) {
                    (ColumnValues::Coded { codes, .. }, Some(enc)) => {
                        match usize::try_from(codes[i]).ok().and_then(|k| enc.get(k)) {
                            Some(Ok(seg)) => {
                                v.extend_from_slice(seg);
                                Ok(())
                            }
                            Some(Err(e)) => Err(e.clone()),
                            // a missing value: what an empty cell gives
                            None => c.encode("", &self.map, &mut v),
                        }
                    }
                    (ColumnValues::Numbers(x), _) if c.kind == ColumnType::Numeric => {
                        if x[i].is_finite() {
                            c.encode_number(x[i], &self.map, &mut v)
                        } else {
                            c.encode(&values.text(i), &self.map, &mut v)
                        }
                    }
                    _ => c.encode(&values.text(i), &self.map, &mut v),
                };
                got.map_err(|e| (i, e))?;
            }
            out.extend(self.finish(&v));
        }
        let classes = match labels {
            None => None,
            Some(l) => Some(self.label_indices(l)?),
        };
        Ok((out, classes))
    }

    /// Each row's class index (the label cell's position among the declared classes).
    fn label_indices(
        &self,
        labels: ColumnValues<'_>,
    ) -> std::result::Result<Vec<u32>, (usize, String)> {
        let c = &self.columns[self.label_index()];
        let classes = c.classes.as_deref().unwrap_or_default();
        let bad = |i: usize, cell: &str| {
            (
                i,
                format!(
                    "column `{}`: label `{}` is not one of the declared classes ({})",
                    c.name,
                    cell.escape_debug(),
                    show_list(classes)
                ),
            )
        };
        let mut y = Vec::with_capacity(labels.len());
        match labels {
            ColumnValues::Coded { cells, codes } => {
                let pos: Vec<Option<usize>> = cells
                    .iter()
                    .map(|s| position_of(classes, s.trim()))
                    .collect();
                for (i, &k) in codes.iter().enumerate() {
                    match usize::try_from(k)
                        .ok()
                        .and_then(|k| pos.get(k).copied().flatten())
                    {
                        Some(p) => y.push(p as u32),
                        None => return Err(bad(i, &labels.text(i))),
                    }
                }
            }
            ColumnValues::Numbers(_) => {
                for i in 0..labels.len() {
                    let t = labels.text(i);
                    let p = position_of(classes, &t).ok_or_else(|| bad(i, &t))?;
                    y.push(p as u32);
                }
            }
        }
        Ok(y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &str = r#"{"privpred_schema": 1, "header": false, "columns": [
     {"name": "age", "type": "numeric", "min": 0, "max": 100, "out_of_bounds": "clip"},
     {"name": "colour", "type": "categorical", "categories": ["red", "blue"], "unknown": "other"},
     {"name": "id", "type": "ignore"},
     {"name": "income", "type": "numeric", "min": 0, "max": 10},
     {"name": "y", "type": "label", "classes": ["no", "yes"]}]}"#;

    fn schema() -> Schema {
        Schema::from_json(SCHEMA, std::path::Path::new("t.schema.json")).unwrap()
    }

    #[test]
    fn columns_encode_as_the_rows_do() {
        let s = schema();
        let ages = [3.0, 250.0, 41.5, 0.0];
        let colours: Vec<String> = ["red", " blue", "green"].map(String::from).to_vec();
        let colour_codes = [0, 1, 2, 0];
        let ids: Vec<String> = vec!["x".into()];
        let id_codes = [0, 0, -1, 0];
        let incomes = [1.0, 2.5, 10.0, 7.0];
        let labels: Vec<String> = ["no", "yes"].map(String::from).to_vec();
        let label_codes = [1, 0, 0, 1];
        let cols = [
            ColumnValues::Numbers(&ages),
            ColumnValues::Coded {
                cells: &colours,
                codes: &colour_codes,
            },
            ColumnValues::Coded {
                cells: &ids,
                codes: &id_codes,
            },
            ColumnValues::Numbers(&incomes),
        ];
        let y = ColumnValues::Coded {
            cells: &labels,
            codes: &label_codes,
        };
        let (x, classes) = s.encode_columns(&cols, Some(y)).unwrap();
        let d = s.feature_dim();
        assert_eq!(x.len(), 4 * d);
        let mut want_y = Vec::new();
        for i in 0..4 {
            let id = if id_codes[i] < 0 { "" } else { "x" };
            let row = [
                ages[i].to_string(),
                colours[colour_codes[i] as usize].clone(),
                id.to_string(),
                incomes[i].to_string(),
                labels[label_codes[i] as usize].clone(),
            ];
            let (r, c) = s.encode_row(&row).unwrap();
            assert_eq!(&x[i * d..(i + 1) * d], &r[..], "row {i}");
            want_y.push(c);
        }
        assert_eq!(classes, Some(want_y));
    }

    #[test]
    fn a_bad_cell_names_its_row_as_the_row_path_does() {
        let s = schema();
        let ok = ["red".to_string()];
        let codes = [0, 0, 0];
        let ids = ["".to_string()];
        let colour = ColumnValues::Coded {
            cells: &ok,
            codes: &codes,
        };
        let id = ColumnValues::Coded {
            cells: &ids,
            codes: &codes,
        };
        let ages = [1.0, 2.0, 3.0];
        for (income, row, what) in [
            ([1.0, 11.0, 2.0], 1, "outside the declared bounds"),
            ([1.0, 2.0, f64::NAN], 2, "missing value"),
            ([f64::INFINITY, 2.0, 2.0], 0, "not a finite number"),
        ] {
            let cols = [
                ColumnValues::Numbers(&ages),
                colour,
                id,
                ColumnValues::Numbers(&income),
            ];
            let (i, e) = s.encode_columns(&cols, None).unwrap_err();
            assert_eq!(i, row, "{e}");
            assert!(e.contains(what) && e.contains("income"), "{e}");
        }
        let cols = [
            ColumnValues::Numbers(&ages),
            colour,
            id,
            ColumnValues::Numbers(&ages),
        ];
        let labels = ["no".to_string(), "maybe".to_string()];
        let lc = [0, 0, 1];
        let y = ColumnValues::Coded {
            cells: &labels,
            codes: &lc,
        };
        let (i, e) = s.encode_columns(&cols, Some(y)).unwrap_err();
        assert_eq!(i, 2);
        assert!(
            e.contains("`maybe` is not one of the declared classes"),
            "{e}"
        );
        let (_, e) = s.encode_columns(&cols[..3], None).unwrap_err();
        assert!(e.contains("3 columns"), "{e}");
    }
}
