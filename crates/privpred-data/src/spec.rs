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
    /// A CSV file (features + label column); optional separate test file (`csv:TRAIN,TEST`).
    Csv {
        /// Training (or whole) file.
        train: PathBuf,
        /// Optional test file; without one a seeded hold-out is the test split.
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
pub const NAMED: [&str; 5] = ["mnist", "fashion-mnist", "cifar10", "mnist1m", "digits"];

impl DatasetSpec {
    /// Parses `mnist`, `fashion-mnist`, `cifar10`, `mnist1m`, `digits`, `csv:PATH[,TEST]`,
    /// `idx:DIR`, `images:PATH`, `cifar-bin:DIR`.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = || {
            DataError::InvalidArgument {
            name: "dataset",
            value: s.to_string(),
            expected: "mnist, fashion-mnist, cifar10, mnist1m, digits, csv:PATH[,TEST_PATH], idx:DIR, images:PATH or cifar-bin:DIR".into(),
        }
        };
        Ok(match s {
            "mnist" => DatasetSpec::Mnist,
            "fashion-mnist" | "fashion_mnist" | "fashionmnist" => DatasetSpec::FashionMnist,
            "cifar10" | "cifar-10" => DatasetSpec::Cifar10,
            "mnist1m" | "mnist-1m" => DatasetSpec::Mnist1m,
            "digits" => DatasetSpec::Digits,
            _ => {
                let (kind, rest) = s.split_once(':').ok_or_else(bad)?;
                if rest.is_empty() {
                    return Err(bad());
                }
                match kind {
                    "csv" => {
                        let whole = PathBuf::from(rest);
                        match rest.split_once(',') {
                            Some((a, b)) if !whole.exists() && !a.is_empty() && !b.is_empty() => {
                                DatasetSpec::Csv {
                                    train: a.into(),
                                    test: Some(b.into()),
                                }
                            }
                            _ => DatasetSpec::Csv {
                                train: whole,
                                test: None,
                            },
                        }
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
            DatasetSpec::Csv { train, test: None } => format!("csv:{}", train.display()),
            DatasetSpec::Csv {
                train,
                test: Some(t),
            } => format!("csv:{},{}", train.display(), t.display()),
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
        )
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
