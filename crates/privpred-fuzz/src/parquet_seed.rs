//! The small valid Parquet table the Parquet seeds, target and sweep start from.

/// A small Parquet table as pandas writes one (one row group): `x` (DOUBLE), `colour`
/// (UTF8 text: red, green, blue), `z` (OPTIONAL DOUBLE, null in every fifth row when
/// `nulls`) and `label` (INT32, 0 or 1, linear in x), `n` rows, snappy-compressed or not.
pub fn parquet_table(n: usize, snappy: bool, nulls: bool) -> Vec<u8> {
    use parquet::basic::Compression;
    use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int32Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use std::sync::Arc;
    let schema = Arc::new(
        parquet::schema::parser::parse_message_type(
            "message t { REQUIRED DOUBLE x; REQUIRED BYTE_ARRAY colour (UTF8); OPTIONAL DOUBLE z; REQUIRED INT32 label; }",
        )
        .unwrap(),
    );
    let compression = if snappy {
        Compression::SNAPPY
    } else {
        Compression::UNCOMPRESSED
    };
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(compression)
            .build(),
    );
    let mut w = SerializedFileWriter::new(Vec::new(), schema, props).unwrap();
    let mut rg = w.next_row_group().unwrap();
    let x: Vec<f64> = (0..n).map(|i| (i * 37 % 100) as f64).collect();
    let mut k = 0;
    while let Some(mut col) = rg.next_column().unwrap() {
        match k {
            0 => {
                col.typed::<DoubleType>()
                    .write_batch(&x, None, None)
                    .unwrap();
            }
            1 => {
                let v: Vec<ByteArray> = (0..n)
                    .map(|i| ByteArray::from(["red", "green", "blue"][i % 3]))
                    .collect();
                col.typed::<ByteArrayType>()
                    .write_batch(&v, None, None)
                    .unwrap();
            }
            2 => {
                let def: Vec<i16> = (0..n).map(|i| i16::from(!(nulls && i % 5 == 4))).collect();
                let v: Vec<f64> = (0..n)
                    .filter(|&i| def[i] == 1)
                    .map(|i| (i % 10) as f64 / 10.0)
                    .collect();
                col.typed::<DoubleType>()
                    .write_batch(&v, Some(&def), None)
                    .unwrap();
            }
            _ => {
                let v: Vec<i32> = x.iter().map(|&v| i32::from(v >= 50.0)).collect();
                col.typed::<Int32Type>()
                    .write_batch(&v, None, None)
                    .unwrap();
            }
        }
        col.close().unwrap();
        k += 1;
    }
    rg.close().unwrap();
    w.into_inner().unwrap()
}

/// The schema of [`parquet_table`] (`header`: its column names are checked).
pub const PARQUET_SCHEMA: &str = r#"{"privpred_schema": 1, "header": true, "columns": [
 {"name": "x", "type": "numeric", "min": 0, "max": 100},
 {"name": "colour", "type": "categorical", "categories": ["red", "green", "blue"]},
 {"name": "z", "type": "numeric", "min": 0, "max": 1},
 {"name": "label", "type": "label", "classes": ["0", "1"]}]}"#;
