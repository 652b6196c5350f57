//! Tidy result rows, the run manifest, and the append-only result store that makes runs
//! resumable: each finished unit is appended and flushed at once; finalisation sorts the rows
//! so that the final files do not depend on run order, interruptions or sharding.

use crate::error::{Result, StudyError};
use crate::figures::FigureId;
use crate::units::{Shard, sort_key};
use privpred_core::{CalibrationMode, Method};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// File names inside a results directory.
pub mod files {
    /// The run's configuration.
    pub const MANIFEST: &str = "manifest.json";
    /// Append-only log of finished units (one JSON row per line, in completion order).
    pub const PARTIAL: &str = "results.partial.jsonl";
    /// Final rows, sorted, JSON Lines.
    pub const RESULTS_JSONL: &str = "results.jsonl";
    /// Final rows, sorted, CSV.
    pub const RESULTS_CSV: &str = "results.csv";
    /// Mean ± std per (figure, calibration, line, setting), CSV.
    pub const SUMMARY_CSV: &str = "summary.csv";
    /// The same as Markdown tables.
    pub const SUMMARY_MD: &str = "summary.md";
    /// Wall time of each group (not part of the reproducible results).
    pub const TIMINGS: &str = "timings.jsonl";
}

/// What a runner measures for one repetition of a group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Test accuracy of the private predictor (fraction in [0, 1]).
    pub accuracy: f64,
    /// Test accuracy of the non-private model on the same data (reference line).
    pub nonprivate_accuracy: f64,
    /// Training examples used.
    pub n_train: usize,
    /// Input dimension (bias feature included).
    pub dim: usize,
    /// Number of classes.
    pub classes: usize,
    /// Number of test queries answered.
    pub test_size: usize,
    /// Teachers (subsample-and-aggregate only).
    pub teachers: Option<usize>,
    /// The L2 regularisation used.
    pub lambda: Option<f64>,
    /// How λ was set: `cross-validated`, `fixed`, `none`.
    pub lambda_source: String,
    /// DP-SGD clip value ν.
    pub clip: Option<f64>,
    /// Noise distribution: `l2-laplace`, `gaussian`, `exponential`.
    pub noise: String,
    /// The noise parameter: β (ℓ2-Laplace rate, exponential-mechanism inverse temperature) or σ.
    pub noise_param: f64,
    /// DP-SGD noise multiplier.
    pub noise_multiplier: Option<f64>,
    /// Loss perturbation ρ.
    pub rho: Option<f64>,
    /// Whether the calibration delivers the stated guarantee (false for some `paper` rules).
    pub valid_guarantee: bool,
    /// The bias feature's value v (rows [x·√(1 − v²), v]; 0 = none).
    pub bias: f64,
    /// Private draws averaged per cross-validated value (λ; DP-SGD's ν: 1), None where nothing
    /// was cross-validated (fixed λ, subsample-and-aggregate). Rows written before this column
    /// existed read as None (they used one draw).
    #[serde(default)]
    pub cv_draws: Option<usize>,
    /// SHA-256 of the raw data files.
    pub dataset_checksum: String,
    /// Dataset labels such as `substitute` (`;`-separated).
    pub dataset_labels: String,
    /// Preprocessing steps (`;`-separated).
    pub preprocessing: String,
    /// Steps that look at the private data without privacy accounting (`;`-separated):
    /// cross-validation of λ / ν on a hold-out, PCA fitted on training data, max-norm scaling.
    pub data_dependent_steps: String,
    /// The neighbouring relation of the guarantee (docs/guarantees.md#neighbouring-relations). Rows written before this column
    /// existed read as `replace-one`, but their loss-perturbation and DP-SGD numbers were
    /// add/remove calibrations (erratum 4.7): their manifests lack the relation, so
    /// `--resume` never mixes them with new rows.
    #[serde(default)]
    pub neighbours: privpred_core::Neighbours,
    /// How λ (or DP-SGD's ν) was selected and what that cost: `{method, epsilon, delta,
    /// composition}` as in a trained model's guarantee (`non-private-holdout`: outside the
    /// guarantee). Rows written before this column existed read as None.
    #[serde(default)]
    pub selection: Option<privpred_core::Selection>,
    /// The selection for people ([`crate::selection::label`]), e.g. `non-private-holdout —
    /// outside the guarantee`.
    #[serde(default)]
    pub selection_label: String,
    /// The loss trained: the softmax (the paper's, and rows written before this column
    /// existed) or the sigmoid on two classes (`compare`, as `train`).
    #[serde(default)]
    pub loss: privpred_core::Loss,
}

impl Measurement {
    /// The selection's label, `unrecorded` for rows written before it was recorded.
    pub fn selection_text(&self) -> &str {
        if self.selection_label.is_empty() {
            "unrecorded"
        } else {
            &self.selection_label
        }
    }
}

/// One result row: one method × setting × repetition, with every parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Stable unit id.
    pub unit_id: String,
    /// Figure.
    pub figure: FigureId,
    /// Calibration mode.
    pub calibration: CalibrationMode,
    /// Method.
    pub method: Method,
    /// Line label (method, plus ε for fig6a/b).
    pub series: String,
    /// Name of the x-axis quantity.
    pub x_name: String,
    /// Value on the x-axis.
    pub x: f64,
    /// Index of the setting within the figure.
    pub setting_index: usize,
    /// Repetition number (0-based).
    pub repetition: u32,
    /// ε.
    pub epsilon: f64,
    /// δ.
    pub delta: f64,
    /// Inference budget B of the setting.
    pub budget: u64,
    /// The budget the guarantee covers: B, or `unlimited` for private-training methods.
    pub guarantee_budget: String,
    /// Dataset name.
    pub dataset: String,
    /// Run seed.
    pub seed: u64,
    /// Whether this is a `--quick` run (subsampled data: not the paper's setting).
    pub quick: bool,
    /// Everything the runner measured.
    #[serde(flatten)]
    pub m: Measurement,
}

impl Row {
    /// The canonical sort key.
    pub fn key(&self) -> ((usize, CalibrationMode, usize, usize), u32) {
        (
            sort_key(
                self.figure,
                self.calibration,
                self.method,
                self.setting_index,
            ),
            self.repetition,
        )
    }
}

/// Flat CSV view of a row (the csv crate cannot flatten).
#[derive(Serialize)]
struct CsvRow<'a> {
    unit_id: &'a str,
    figure: FigureId,
    calibration: CalibrationMode,
    method: Method,
    series: &'a str,
    x_name: &'a str,
    x: f64,
    setting_index: usize,
    repetition: u32,
    epsilon: f64,
    delta: f64,
    budget: u64,
    guarantee_budget: &'a str,
    dataset: &'a str,
    seed: u64,
    quick: bool,
    accuracy: f64,
    nonprivate_accuracy: f64,
    n_train: usize,
    dim: usize,
    classes: usize,
    test_size: usize,
    teachers: Option<usize>,
    lambda: Option<f64>,
    lambda_source: &'a str,
    clip: Option<f64>,
    noise: &'a str,
    noise_param: f64,
    noise_multiplier: Option<f64>,
    rho: Option<f64>,
    valid_guarantee: bool,
    bias: f64,
    cv_draws: Option<usize>,
    dataset_checksum: &'a str,
    dataset_labels: &'a str,
    preprocessing: &'a str,
    data_dependent_steps: &'a str,
    selection: Option<privpred_core::SelectionMethod>,
    selection_epsilon: Option<f64>,
    selection_delta: Option<f64>,
    selection_label: &'a str,
    // the last column, as it has been since it was added
    neighbours: privpred_core::Neighbours,
}

impl<'a> From<&'a Row> for CsvRow<'a> {
    fn from(r: &'a Row) -> Self {
        CsvRow {
            unit_id: &r.unit_id,
            figure: r.figure,
            calibration: r.calibration,
            method: r.method,
            series: &r.series,
            x_name: &r.x_name,
            x: r.x,
            setting_index: r.setting_index,
            repetition: r.repetition,
            epsilon: r.epsilon,
            delta: r.delta,
            budget: r.budget,
            guarantee_budget: &r.guarantee_budget,
            dataset: &r.dataset,
            seed: r.seed,
            quick: r.quick,
            accuracy: r.m.accuracy,
            nonprivate_accuracy: r.m.nonprivate_accuracy,
            n_train: r.m.n_train,
            dim: r.m.dim,
            classes: r.m.classes,
            test_size: r.m.test_size,
            teachers: r.m.teachers,
            lambda: r.m.lambda,
            lambda_source: &r.m.lambda_source,
            clip: r.m.clip,
            noise: &r.m.noise,
            noise_param: r.m.noise_param,
            noise_multiplier: r.m.noise_multiplier,
            rho: r.m.rho,
            valid_guarantee: r.m.valid_guarantee,
            bias: r.m.bias,
            cv_draws: r.m.cv_draws,
            dataset_checksum: &r.m.dataset_checksum,
            dataset_labels: &r.m.dataset_labels,
            preprocessing: &r.m.preprocessing,
            data_dependent_steps: &r.m.data_dependent_steps,
            selection: r.m.selection.map(|s| s.method),
            selection_epsilon: r.m.selection.and_then(|s| s.epsilon),
            selection_delta: r.m.selection.and_then(|s| s.delta),
            selection_label: r.m.selection_text(),
            neighbours: r.m.neighbours,
        }
    }
}

/// Wall time of one group's computation (kept apart from the rows so that result files are
/// reproducible byte for byte).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Group id.
    pub group: String,
    /// Figure.
    pub figure: FigureId,
    /// Method.
    pub method: Method,
    /// Repetitions computed in this process.
    pub repetitions: usize,
    /// Seconds spent training (including cross-validation and shared fits not cached before).
    pub train_s: f64,
    /// Seconds spent answering test queries, all repetitions together.
    pub predict_s: f64,
    /// Answers produced (test size × repetitions).
    pub answers: u64,
}

/// A run's configuration: runs with the same manifest (ignoring the shard) produce the same
/// rows, so their directories can be resumed and merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// File-format version.
    pub format: u32,
    /// Figures of the run.
    pub figures: Vec<FigureId>,
    /// Calibration modes.
    pub calibrations: Vec<CalibrationMode>,
    /// Repetitions per setting.
    pub repetitions: u32,
    /// Run seed.
    pub seed: u64,
    /// `--quick`.
    pub quick: bool,
    /// Dataset override (None: each figure's default).
    pub dataset: Option<String>,
    /// Runner options that change results (cross-validation draws, subsample sizes, ...).
    pub options: serde_json::Value,
    /// The shard this directory holds.
    pub shard: Shard,
}

impl Manifest {
    /// The current format version.
    pub const FORMAT: u32 = 1;

    /// Whether two manifests describe the same sweep (shards may differ).
    pub fn same_sweep(&self, other: &Manifest) -> bool {
        let strip = |m: &Manifest| Manifest {
            shard: Shard::ALL,
            ..m.clone()
        };
        strip(self) == strip(other)
    }

    /// Reads `DIR/manifest.json`.
    pub fn read(dir: &Path) -> Result<Manifest> {
        let p = dir.join(files::MANIFEST);
        let text = std::fs::read_to_string(&p).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                StudyError::Incompatible {
                    path: dir.to_path_buf(),
                    message:
                        "is not a results directory of `privpred reproduce` (no manifest.json)"
                            .into(),
                }
            } else {
                StudyError::io(&p, e)
            }
        })?;
        serde_json::from_str(&text).map_err(|e| StudyError::Parse {
            path: p,
            line: e.line(),
            message: e.to_string(),
        })
    }

    /// Writes `DIR/manifest.json` atomically.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(|e| StudyError::Compute {
            context: "manifest".into(),
            message: e.to_string(),
        })?;
        write_atomic(&dir.join(files::MANIFEST), format!("{text}\n").as_bytes())
    }
}

/// Writes a file through a temporary file in the same directory and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(|e| StudyError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| StudyError::io(path, e))
}

/// Reads rows from a JSON Lines file. A last line without its newline is the trace of an
/// interrupted write and is ignored (with `tolerate_torn_tail`); any other bad line is an error.
pub fn read_rows(path: &Path, tolerate_torn_tail: bool) -> Result<Vec<Row>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StudyError::io(path, e)),
    };
    let complete = if tolerate_torn_tail {
        &text[..text.rfind('\n').map_or(0, |i| i + 1)]
    } else {
        &text[..]
    };
    let mut rows = Vec::new();
    for (i, line) in complete.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let row: Row = serde_json::from_str(line).map_err(|e| StudyError::Parse {
            path: path.to_path_buf(),
            line: i + 1,
            message: e.to_string(),
        })?;
        rows.push(row);
    }
    Ok(rows)
}

/// The append-only store of one results directory.
pub struct ResultStore {
    dir: PathBuf,
    partial: Mutex<File>,
    timings: Mutex<File>,
}

impl ResultStore {
    /// Opens `dir` for the run described by `manifest`. Without `resume` the directory must not
    /// hold results of a run yet; with `resume` its manifest must describe the same sweep and
    /// shard. Returns the store and the rows already finished.
    pub fn open(dir: &Path, manifest: &Manifest, resume: bool) -> Result<(ResultStore, Vec<Row>)> {
        std::fs::create_dir_all(dir).map_err(|e| StudyError::io(dir, e))?;
        let partial_path = dir.join(files::PARTIAL);
        let has_manifest = dir.join(files::MANIFEST).exists();
        let mut rows = Vec::new();
        if has_manifest {
            let old = Manifest::read(dir)?;
            if !resume {
                if partial_path.exists() || dir.join(files::RESULTS_JSONL).exists() {
                    return Err(StudyError::Incompatible {
                        path: dir.to_path_buf(),
                        message: "already holds results of a run; pass --resume to continue it, or choose another --out".into(),
                    });
                }
            } else if old != *manifest {
                return Err(StudyError::Incompatible {
                    path: dir.to_path_buf(),
                    message: format!(
                        "--resume needs the same figures, calibrations, repetitions, seed, --quick, dataset, options and shard as the interrupted run (it had {})",
                        serde_json::to_string(&old).unwrap_or_default()
                    ),
                });
            } else {
                rows = read_rows(&partial_path, true)?;
                // Cut a torn last line so that appends start on a fresh line.
                truncate_torn_tail(&partial_path)?;
            }
        } else if resume && partial_path.exists() {
            return Err(StudyError::Incompatible {
                path: dir.to_path_buf(),
                message: "has partial results but no manifest.json; cannot resume".into(),
            });
        }
        if !resume {
            for f in [files::PARTIAL, files::TIMINGS] {
                let p = dir.join(f);
                if p.exists() {
                    std::fs::remove_file(&p).map_err(|e| StudyError::io(&p, e))?;
                }
            }
        }
        manifest.write(dir)?;
        let open = |p: PathBuf| -> Result<File> {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&p)
                .map_err(|e| StudyError::io(&p, e))
        };
        let store = ResultStore {
            dir: dir.to_path_buf(),
            partial: Mutex::new(open(partial_path)?),
            timings: Mutex::new(open(dir.join(files::TIMINGS))?),
        };
        // Keep the first copy of each unit (a duplicate can only be identical).
        let mut seen = BTreeSet::new();
        rows.retain(|r| seen.insert(r.unit_id.clone()));
        Ok((store, rows))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends one finished unit and flushes it to the file.
    pub fn append(&self, row: &Row) -> Result<()> {
        let mut line = serde_json::to_string(row).map_err(|e| StudyError::Compute {
            context: row.unit_id.clone(),
            message: e.to_string(),
        })?;
        line.push('\n');
        let p = self.dir.join(files::PARTIAL);
        let mut f = self.partial.lock().unwrap_or_else(|e| e.into_inner());
        f.write_all(line.as_bytes())
            .map_err(|e| StudyError::io(&p, e))?;
        f.flush().map_err(|e| StudyError::io(&p, e))
    }

    /// Appends one timing record.
    pub fn append_timing(&self, t: &Timing) -> Result<()> {
        let mut line = serde_json::to_string(t).map_err(|e| StudyError::Compute {
            context: t.group.clone(),
            message: e.to_string(),
        })?;
        line.push('\n');
        let p = self.dir.join(files::TIMINGS);
        let mut f = self.timings.lock().unwrap_or_else(|e| e.into_inner());
        f.write_all(line.as_bytes())
            .map_err(|e| StudyError::io(&p, e))?;
        f.flush().map_err(|e| StudyError::io(&p, e))
    }
}

fn truncate_torn_tail(path: &Path) -> Result<()> {
    let Ok(bytes) = std::fs::read(path) else {
        return Ok(());
    };
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        return Ok(());
    }
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| StudyError::io(path, e))?;
    f.set_len(keep as u64).map_err(|e| StudyError::io(path, e))
}

/// Sorts rows canonically and removes duplicate units (keeping the first).
pub fn canonical(mut rows: Vec<Row>) -> Vec<Row> {
    rows.sort_by(|a, b| {
        a.key()
            .cmp(&b.key())
            .then_with(|| a.unit_id.cmp(&b.unit_id))
    });
    rows.dedup_by(|a, b| a.unit_id == b.unit_id);
    rows
}

/// Writes `results.jsonl` and `results.csv` (sorted rows) atomically.
pub fn write_results(dir: &Path, rows: &[Row]) -> Result<()> {
    let mut jsonl = String::new();
    for r in rows {
        let line = serde_json::to_string(r).map_err(|e| StudyError::Compute {
            context: r.unit_id.clone(),
            message: e.to_string(),
        })?;
        jsonl.push_str(&line);
        jsonl.push('\n');
    }
    write_atomic(&dir.join(files::RESULTS_JSONL), jsonl.as_bytes())?;
    let csv_path = dir.join(files::RESULTS_CSV);
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.serialize(CsvRow::from(r))
            .map_err(|e| StudyError::Compute {
                context: r.unit_id.clone(),
                message: e.to_string(),
            })?;
    }
    let bytes = w.into_inner().map_err(|e| StudyError::Compute {
        context: "csv".into(),
        message: e.to_string(),
    })?;
    write_atomic(&csv_path, &bytes)
}

/// Reads the rows of a results directory: the final `results.jsonl` merged with the partial log
/// (an interrupted or unfinished shard has only the latter).
pub fn read_dir_rows(dir: &Path) -> Result<Vec<Row>> {
    let mut rows = read_rows(&dir.join(files::RESULTS_JSONL), false)?;
    rows.extend(read_rows(&dir.join(files::PARTIAL), true)?);
    Ok(canonical(rows))
}

/// Reads the timing records of a directory (missing file: none).
pub fn read_timings(dir: &Path) -> Result<Vec<Timing>> {
    let p = dir.join(files::TIMINGS);
    let f = match File::open(&p) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StudyError::io(&p, e)),
    };
    let mut out = Vec::new();
    for line in BufReader::new(f).lines() {
        let line = line.map_err(|e| StudyError::io(&p, e))?;
        if let Ok(t) = serde_json::from_str(&line) {
            out.push(t);
        }
    }
    Ok(out)
}
