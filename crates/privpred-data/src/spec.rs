//! Dataset names: the named real datasets and user paths.

use crate::error::{DataError, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A dataset to load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DatasetSpec {
    /// MNIST (60,000 / 10,000, 28 × 28, exact copy, SHA-256 verified).
    Mnist,
    /// Fashion-MNIST (60,000 / 10,000, 28 × 28).
    FashionMnist,
    /// CIFAR-10: canonical binary batches if present, else the JPEG copy (labelled).
    Cifar10,
    /// The generated InfiMNIST-style substitute for MNIST-1M (train), MNIST test set (test).
    Mnist1m,
    /// scikit-learn's 8 × 8 digits (1,797 rows, no official test split).
    Digits,
    /// scikit-learn's breast-cancer table (569 rows, 30 numeric features, 2 classes), read
    /// through `examples/breast-cancer.schema.json` unless another schema is given.
    BreastCancer,
    /// scikit-learn's wine table (178 rows, 13 numeric features, 3 classes), read through
    /// `examples/wine.schema.json` unless another schema is given.
    Wine,
    /// Fair's extramarital-affairs survey (statsmodels' copy, 6,366 rows; label
    /// `affairs > 0`), read through `examples/fair.schema.json` unless another schema is given.
    Fair,
    /// A CSV file (features + label column); optional separate test file (`csv:TRAIN,TEST`).
    Csv {
        /// Training (or whole) file.
        train: PathBuf,
        /// Optional test file; without one a seeded hold-out is the test split.
        test: Option<PathBuf>,
    },
    /// A CSV file of pixel intensities (0..255; scaled by 1/255 like the image data sets), no
    /// schema: `csv-pixels:PATH[,TEST]`.
    CsvPixels {
        /// Training (or whole) file.
        train: PathBuf,
        /// Optional test file.
        test: Option<PathBuf>,
    },
    /// A Parquet table, read through a schema: `parquet:PATH[,TEST]`.
    Parquet {
        /// Training (or whole) file.
        train: PathBuf,
        /// Optional test file.
        test: Option<PathBuf>,
    },
    /// A directory of IDX files (`train-images-idx3-ubyte[.gz]` etc.).
    Idx(PathBuf),
    /// An image folder `<split>/<class>/*.jpg|png`, a directory or a `.tar[.gz]`.
    Images(PathBuf),
    /// A directory of CIFAR-10 binary batches (`data_batch_1.bin` … `test_batch.bin`).
    CifarBin(PathBuf),
}

/// The named datasets, for help texts.
pub const NAMED: [&str; 8] = [
    "mnist",
    "fashion-mnist",
    "cifar10",
    "mnist1m",
    "digits",
    "breast-cancer",
    "wine",
    "fair",
];

impl DatasetSpec {
    /// Parses `mnist`, `fashion-mnist`, `cifar10`, `mnist1m`, `digits`, `breast-cancer`,
    /// `wine`, `fair`, `csv:PATH[,TEST]`, `parquet:PATH[,TEST]`, `csv-pixels:PATH[,TEST]`,
    /// `idx:DIR`, `images:PATH`, `cifar-bin:DIR`.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = || {
            DataError::InvalidArgument {
            name: "dataset",
            value: s.to_string(),
            expected: "mnist, fashion-mnist, cifar10, mnist1m, digits, breast-cancer, wine, fair, csv:PATH[,TEST_PATH], parquet:PATH[,TEST_PATH], csv-pixels:PATH[,TEST_PATH], idx:DIR, images:PATH or cifar-bin:DIR".into(),
        }
        };
        Ok(match s {
            "mnist" => DatasetSpec::Mnist,
            "fashion-mnist" | "fashion_mnist" | "fashionmnist" => DatasetSpec::FashionMnist,
            "cifar10" | "cifar-10" => DatasetSpec::Cifar10,
            "mnist1m" | "mnist-1m" => DatasetSpec::Mnist1m,
            "digits" => DatasetSpec::Digits,
            "breast-cancer" | "breast_cancer" => DatasetSpec::BreastCancer,
            "wine" => DatasetSpec::Wine,
            "fair" => DatasetSpec::Fair,
            _ => {
                let (kind, rest) = s.split_once(':').ok_or_else(bad)?;
                if rest.is_empty() {
                    return Err(bad());
                }
                match kind {
                    "csv" => {
                        let (train, test) = train_test(rest);
                        DatasetSpec::Csv { train, test }
                    }
                    "csv-pixels" => {
                        let (train, test) = train_test(rest);
                        DatasetSpec::CsvPixels { train, test }
                    }
                    "parquet" => {
                        let (train, test) = train_test(rest);
                        DatasetSpec::Parquet { train, test }
                    }
                    "idx" => DatasetSpec::Idx(rest.into()),
                    "images" => DatasetSpec::Images(rest.into()),
                    "cifar-bin" => DatasetSpec::CifarBin(rest.into()),
                    _ => return Err(bad()),
                }
            }
        })
    }

    /// The canonical name (as accepted by [`DatasetSpec::parse`]).
    pub fn name(&self) -> String {
        match self {
            DatasetSpec::Mnist => "mnist".into(),
            DatasetSpec::FashionMnist => "fashion-mnist".into(),
            DatasetSpec::Cifar10 => "cifar10".into(),
            DatasetSpec::Mnist1m => "mnist1m".into(),
            DatasetSpec::Digits => "digits".into(),
            DatasetSpec::BreastCancer => "breast-cancer".into(),
            DatasetSpec::Wine => "wine".into(),
            DatasetSpec::Fair => "fair".into(),
            DatasetSpec::Csv { train, test } => format!("csv:{}", files(train, test)),
            DatasetSpec::CsvPixels { train, test } => {
                format!("csv-pixels:{}", files(train, test))
            }
            DatasetSpec::Parquet { train, test } => format!("parquet:{}", files(train, test)),
            DatasetSpec::Idx(p) => format!("idx:{}", p.display()),
            DatasetSpec::Images(p) => format!("images:{}", p.display()),
            DatasetSpec::CifarBin(p) => format!("cifar-bin:{}", p.display()),
        }
    }

    /// Whether this is a named dataset with a cache directory.
    pub fn is_named(&self) -> bool {
        matches!(
            self,
            DatasetSpec::Mnist
                | DatasetSpec::FashionMnist
                | DatasetSpec::Cifar10
                | DatasetSpec::Mnist1m
                | DatasetSpec::Digits
                | DatasetSpec::BreastCancer
                | DatasetSpec::Wine
                | DatasetSpec::Fair
        )
    }
}

/// `PATH` or `TRAIN,TEST` (a path that exists with a comma in its name is one file).
fn train_test(rest: &str) -> (PathBuf, Option<PathBuf>) {
    let whole = PathBuf::from(rest);
    match rest.split_once(',') {
        Some((a, b)) if !whole.exists() && !a.is_empty() && !b.is_empty() => {
            (a.into(), Some(b.into()))
        }
        _ => (whole, None),
    }
}

/// `TRAIN` or `TRAIN,TEST` as the spec writes them.
fn files(train: &std::path::Path, test: &Option<PathBuf>) -> String {
    match test {
        None => train.display().to_string(),
        Some(t) => format!("{},{}", train.display(), t.display()),
    }
}

impl std::str::FromStr for DatasetSpec {
    type Err = DataError;
    fn from_str(s: &str) -> Result<Self> {
        DatasetSpec::parse(s)
    }
}

impl std::fmt::Display for DatasetSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}
