//! The fuzz targets: the parsers of every file a user or client hands privpred.

use crate::{Target, scratch_file};
use privpred_data::csvfile::{CsvOptions, LabelColumn, parse_csv};
use privpred_data::{Dataset, DatasetSpec, LoadOptions, Provenance};
use std::path::Path;

/// Every target (name = corpus directory).
pub const TARGETS: &[Target] = &[
    Target {
        name: "idx",
        run: idx,
    },
    Target {
        name: "csv",
        run: csv,
    },
    Target {
        name: "parquet",
        run: parquet,
    },
    Target {
        name: "images-tar",
        run: images_tar,
    },
    Target {
        name: "linear-artifact",
        run: linear_artifact,
    },
    Target {
        name: "nn-artifact",
        run: nn_artifact,
    },
];

fn is_gz(d: &[u8]) -> bool {
    d.starts_with(&[0x1f, 0x8b])
}

/// IDX: the in-memory reader at ranks 1 and 3, and the file readers (plain or gzip).
fn idx(data: &[u8]) {
    let p = Path::new("fuzz");
    let _ = privpred_data::idx::read_idx(data, p, 1, |b| b as u32);
    let _ = privpred_data::idx::read_idx(data, p, 3, |b| b as f32);
    let f = scratch_file(
        if is_gz(data) {
            "x-idx3-ubyte.gz"
        } else {
            "x-idx3-ubyte"
        },
        data,
    );
    let _ = privpred_data::idx::read_images(&f);
    let _ = privpred_data::idx::read_labels(&f);
}

/// CSV: the parser under three option sets, and the loader (class count, hold-out split).
fn csv(data: &[u8]) {
    let p = Path::new("fuzz.csv");
    for opts in [
        CsvOptions::default(),
        CsvOptions {
            label: LabelColumn::First,
            header: Some(true),
            delimiter: b';',
        },
        CsvOptions {
            label: LabelColumn::Name("label".into()),
            header: None,
            delimiter: b',',
        },
    ] {
        let _ = parse_csv(data, p, &opts);
    }
    let f = scratch_file(if is_gz(data) { "d.csv.gz" } else { "d.csv" }, data);
    let _ = privpred_data::load(
        &DatasetSpec::Csv {
            train: f,
            test: None,
        },
        &LoadOptions::default(),
    );
}

/// Parquet: the cell reader (every row), the table reader through a schema (as `train` and
/// `evaluate` read a `parquet:` table) and the schema draft (`data schema`).
fn parquet(data: &[u8]) {
    let f = scratch_file("t.parquet", data);
    let mut rows = 0usize;
    let _ = privpred_data::table::read_parquet_cells(&f, &mut |_, _| {
        rows += 1;
        Ok(())
    });
    let schema = privpred_data::schema::Schema::from_json(
        crate::parquet_seed::PARQUET_SCHEMA,
        Path::new("fuzz.schema.json"),
    )
    .expect("the seed schema");
    let _ = privpred_data::table::read_table(
        &f,
        privpred_data::table::TableFormat::Parquet,
        &schema,
        "fuzz",
    );
    if let Ok((header, cells)) =
        privpred_data::table::read_cells(&f, privpred_data::table::TableFormat::Parquet)
    {
        let _ = privpred_data::schema::draft(&cells, header.as_deref(), None);
    }
}

/// An image set as a `.tar` or `.tar.gz` archive (entry sizes, paths, image headers).
fn images_tar(data: &[u8]) {
    let f = scratch_file(if is_gz(data) { "s.tar.gz" } else { "s.tar" }, data);
    let _ = privpred_data::load(&DatasetSpec::Images(f), &LoadOptions::default());
}

/// Two raw rows of `d` features for the preprocessing (values in 0..1).
fn rows(d: usize, classes: usize) -> Option<Dataset> {
    if d > 1 << 20 {
        return None;
    }
    let f: Vec<f32> = (0..2 * d).map(|i| (i % 7) as f32 / 7.0).collect();
    Dataset::new(d, classes.max(2), f, vec![0, 1], Provenance::default()).ok()
}

/// `data` with its checksum recomputed (if it parses as safetensors with metadata), so that a
/// mutated header reaches the range checks behind the checksum.
fn resummed(data: &[u8]) -> Option<Vec<u8>> {
    use safetensors::SafeTensors;
    let st = SafeTensors::deserialize(data).ok()?;
    let (_, md) = SafeTensors::read_metadata(data).ok()?;
    let mut meta = md.metadata().clone()?;
    let names: Vec<String> = st.names().into_iter().map(String::from).collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = names
        .iter()
        .filter_map(|n| st.tensor(n).ok().map(|v| (n.clone(), v)))
        .collect();
    let dtypes: Vec<String> = views
        .iter()
        .map(|(_, v)| format!("{:?}", v.dtype()))
        .collect();
    let refs: Vec<privpred_data::artifact::TensorRef<'_>> = views
        .iter()
        .zip(&dtypes)
        .map(|((n, v), d)| (n.as_str(), d.as_str(), v.shape(), v.data()))
        .collect();
    let sum = privpred_data::artifact::checksum(&meta, &refs);
    meta.insert(privpred_data::artifact::CHECKSUM_KEY.into(), sum);
    safetensors::serialize(views, Some(meta)).ok()
}

/// A linear model artifact as given and with its checksum recomputed: loaded, and if it
/// loads, used (preprocessing and predictions).
fn linear_artifact(data: &[u8]) {
    linear_artifact_once(data);
    if let Some(r) = resummed(data) {
        linear_artifact_once(&r);
    }
}

fn linear_artifact_once(data: &[u8]) {
    let f = scratch_file("m.safetensors", data);
    let Ok(m) = privpred_linear::artifact::load(&f) else {
        return;
    };
    let prep = &m.preprocessing;
    let Some(ds) = rows(prep.input_dim(), prep.input_classes) else {
        return;
    };
    let Ok(ub) = prep.apply(&ds) else {
        return;
    };
    let ub = ub.inner();
    let q: Vec<&[f32]> = (0..ub.n).map(|i| ub.row(i)).collect();
    let mut rng = <rand_chacha::ChaCha20Rng as rand::SeedableRng>::seed_from_u64(0);
    match &m.model {
        privpred_linear::artifact::StoredModel::Private(p) => {
            let _ = p.try_predict(&q, &mut rng);
        }
        privpred_linear::artifact::StoredModel::NonPrivate(lm) => {
            for r in q {
                if privpred_linear::check_query(r, lm.d).is_ok() {
                    let _ = lm.predict(r);
                }
            }
        }
    }
}

/// A ResNet artifact as given and with its checksum recomputed: loaded, and if it loads,
/// asked one query.
fn nn_artifact(data: &[u8]) {
    nn_artifact_once(data);
    if let Some(r) = resummed(data) {
        nn_artifact_once(&r);
    }
}

fn nn_artifact_once(data: &[u8]) {
    let f = scratch_file("n.safetensors", data);
    let Ok(m) = privpred_nn::artifact::load(&f) else {
        return;
    };
    if m.input_dim() > 1 << 20 {
        return;
    }
    let row = vec![128.0f32; m.input_dim()];
    let mut rng = <rand_chacha::ChaCha20Rng as rand::SeedableRng>::seed_from_u64(0);
    let _ = m.predict(&[&row[..]], &mut rng);
}
