//! The sweep driver: runs the units of a shard through a [`Runner`], appending each finished
//! unit to the store, skipping finished units on `--resume`, and finalising sorted result files,
//! the summary and the plots. Also `merge` of shard directories.

use crate::error::{Result, StudyError};
use crate::figures::FigureId;
use crate::progress::{Event, Observer};
use crate::results::{self, Manifest, Measurement, ResultStore, Row, Timing, files};
use crate::summary;
use crate::units::{Group, Shard, groups};
use privpred_core::CalibrationMode;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Time spent by one call of [`Runner::run_group`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GroupTiming {
    /// Seconds training (cross-validation and shared fits included).
    pub train_s: f64,
    /// Seconds answering test queries.
    pub predict_s: f64,
    /// Answers produced.
    pub answers: u64,
}

/// Callback a runner calls once per finished repetition (from any thread).
pub type Done<'a> = dyn Fn(u32, Measurement) -> Result<()> + Sync + 'a;

/// Computes the repetitions of a group. Implementations must make each repetition's
/// measurement a function of (seed, unit id) only — never of run order, threads or which
/// other repetitions run in the same call — so that resumed and sharded runs agree.
pub trait Runner: Sync {
    /// Options that change results (recorded in the manifest).
    fn options(&self) -> serde_json::Value;
    /// The dataset name recorded in rows for a figure.
    fn dataset_name(&self, figure: FigureId) -> String;
    /// Runs `reps` of `group`, calling `done` as each finishes.
    fn run_group(
        &self,
        group: &Group,
        reps: &[u32],
        seed: u64,
        done: &Done<'_>,
    ) -> Result<GroupTiming>;
    /// Called before the first group of each figure (e.g. to announce data loading).
    fn prepare(&self, _figure: FigureId, _observer: &dyn Observer) -> Result<()> {
        Ok(())
    }
    /// A unit that finished before this run (`--resume`): its group, repetition and
    /// measurement, so that the runner can replay it to groups that use the same draws
    /// (another B of a budget axis, `tight` loss perturbation from `corrected`) instead of
    /// computing them again. Default: ignored.
    fn resumed(&self, _group: &Group, _repetition: u32, _m: &Measurement) {}
    /// Why `group`'s method cannot run on this runner's data at all (e.g. more
    /// subsample-and-aggregate teachers than training rows), or `None`: `compare` lists such
    /// a method as not applicable with the reason instead of failing. Default: `None`.
    fn not_applicable(&self, _group: &Group, _seed: u64) -> Result<Option<String>> {
        Ok(None)
    }
    /// The neighbouring relation every method of this runner is calibrated for (docs/guarantees.md#neighbouring-relations: one
    /// study, one relation).
    fn neighbours(&self) -> privpred_core::Neighbours {
        privpred_core::Neighbours::ReplaceOne
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// Figures.
    pub figures: Vec<FigureId>,
    /// Calibration modes.
    pub calibrations: Vec<CalibrationMode>,
    /// Repetitions per setting.
    pub repetitions: u32,
    /// Run seed.
    pub seed: u64,
    /// `--quick`.
    pub quick: bool,
    /// Dataset override.
    pub dataset: Option<String>,
    /// Shard.
    pub shard: Shard,
    /// Continue an interrupted run in `out`.
    pub resume: bool,
    /// Output directory.
    pub out: PathBuf,
}

/// What a sweep did.
#[derive(Debug, Clone)]
pub struct SweepReport {
    /// Units in this shard.
    pub total_units: usize,
    /// Units skipped because they were finished before (resume).
    pub skipped_units: usize,
    /// Units computed now.
    pub computed_units: usize,
    /// Wall seconds.
    pub seconds: f64,
    /// Markdown summary.
    pub summary_md: String,
    /// Plot files written.
    pub plots: Vec<PathBuf>,
}

/// Validates a configuration.
pub fn validate(cfg: &SweepConfig) -> Result<()> {
    if cfg.repetitions == 0 || cfg.repetitions > 100_000 {
        return Err(StudyError::invalid(
            "--repetitions",
            cfg.repetitions,
            "an integer in 1..=100000",
        ));
    }
    if cfg.figures.is_empty() {
        return Err(StudyError::invalid(
            "figure",
            "(none)",
            "at least one figure",
        ));
    }
    if cfg.calibrations.is_empty() {
        return Err(StudyError::invalid(
            "--calibration",
            "(none)",
            "paper, corrected or tight",
        ));
    }
    Ok(())
}

/// The manifest of a configuration run by `runner`.
pub fn manifest(cfg: &SweepConfig, runner: &dyn Runner) -> Manifest {
    let mut figures = cfg.figures.clone();
    figures.sort();
    figures.dedup();
    let mut calibrations = cfg.calibrations.clone();
    calibrations.sort();
    calibrations.dedup();
    Manifest {
        format: Manifest::FORMAT,
        figures,
        calibrations,
        repetitions: cfg.repetitions,
        seed: cfg.seed,
        quick: cfg.quick,
        dataset: cfg.dataset.clone(),
        options: runner.options(),
        shard: cfg.shard,
    }
}

/// Hands each finished unit of a resumed run (`existing`) to the runner ([`Runner::resumed`]),
/// so that it can replay them to the groups that share their draws.
fn hand_finished_units(runner: &dyn Runner, all: &[Group], existing: &[Row], repetitions: u32) {
    let finished: HashMap<&str, &Row> = existing.iter().map(|r| (r.unit_id.as_str(), r)).collect();
    for g in all {
        for rep in 0..repetitions {
            if let Some(row) = finished.get(g.unit_id(rep).as_str()) {
                runner.resumed(g, rep, &row.m);
            }
        }
    }
}

/// Runs a sweep.
pub fn run(cfg: &SweepConfig, runner: &dyn Runner, observer: &dyn Observer) -> Result<SweepReport> {
    validate(cfg)?;
    let start = Instant::now();
    let man = manifest(cfg, runner);
    let (store, existing) = ResultStore::open(&cfg.out, &man, cfg.resume)?;
    let done: BTreeSet<String> = existing.iter().map(|r| r.unit_id.clone()).collect();
    let all = groups(&man.figures, &man.calibrations);
    hand_finished_units(runner, &all, &existing, cfg.repetitions);
    let mine: Vec<&Group> = all
        .iter()
        .enumerate()
        .filter(|(i, _)| cfg.shard.owns(*i))
        .map(|(_, g)| g)
        .collect();
    let total = mine.len() * cfg.repetitions as usize;
    let skipped = mine
        .iter()
        .map(|g| {
            (0..cfg.repetitions)
                .filter(|r| done.contains(&g.unit_id(*r)))
                .count()
        })
        .sum::<usize>();
    observer.on_event(&Event::RunStarted {
        total,
        done: skipped,
    });
    let new_rows = std::sync::Mutex::new(Vec::new());
    let mut prepared: BTreeSet<FigureId> = BTreeSet::new();
    for g in mine {
        let pending: Vec<u32> = (0..cfg.repetitions)
            .filter(|r| !done.contains(&g.unit_id(*r)))
            .collect();
        if pending.is_empty() {
            continue;
        }
        if prepared.insert(g.figure) {
            runner.prepare(g.figure, observer)?;
        }
        observer.on_event(&Event::GroupStarted {
            group: g,
            pending: pending.len(),
        });
        let t0 = Instant::now();
        let dataset = man
            .dataset
            .clone()
            .unwrap_or_else(|| runner.dataset_name(g.figure));
        let def = g.figure.definition();
        let finish = |rep: u32, m: Measurement| -> Result<()> {
            let row = Row {
                unit_id: g.unit_id(rep),
                figure: g.figure,
                calibration: g.calibration,
                method: g.method,
                series: g.series.clone(),
                x_name: def.axis.kind.name().to_string(),
                x: g.x,
                setting_index: g.setting_index,
                repetition: rep,
                epsilon: g.setting.epsilon,
                delta: g.setting.delta,
                budget: g.setting.budget,
                guarantee_budget: if g.method.is_private_training() {
                    "unlimited".into()
                } else {
                    g.setting.budget.to_string()
                },
                dataset: dataset.clone(),
                seed: cfg.seed,
                quick: cfg.quick,
                m,
            };
            store.append(&row)?;
            observer.on_event(&Event::UnitFinished {
                group: g,
                repetition: rep,
                accuracy: row.m.accuracy,
            });
            new_rows.lock().unwrap_or_else(|e| e.into_inner()).push(row);
            Ok(())
        };
        let timing = runner.run_group(g, &pending, cfg.seed, &finish)?;
        let seconds = t0.elapsed().as_secs_f64();
        store.append_timing(&Timing {
            group: g.id(),
            figure: g.figure,
            method: g.method,
            repetitions: pending.len(),
            train_s: timing.train_s,
            predict_s: timing.predict_s,
            answers: timing.answers,
        })?;
        observer.on_event(&Event::GroupFinished { group: g, seconds });
    }
    let mut rows = existing;
    let computed = {
        let n = new_rows.lock().unwrap_or_else(|e| e.into_inner());
        rows.extend(n.iter().cloned());
        n.len()
    };
    observer.on_event(&Event::Message("finalising results, summary and plots"));
    let (summary_md, plots) = finalize(&cfg.out, rows, man.quick)?;
    let seconds = start.elapsed().as_secs_f64();
    observer.on_event(&Event::RunFinished { seconds });
    Ok(SweepReport {
        total_units: total,
        skipped_units: skipped,
        computed_units: computed,
        seconds,
        summary_md,
        plots,
    })
}

/// Sorts rows and writes results (JSONL, CSV), summary (CSV, Markdown) and plots.
pub fn finalize(dir: &Path, rows: Vec<Row>, quick: bool) -> Result<(String, Vec<PathBuf>)> {
    let rows = results::canonical(rows);
    results::write_results(dir, &rows)?;
    let points = summary::summarize(&rows);
    let md = summary::write_summary(dir, &points, quick)?;
    let plots = crate::plot::plot_all(dir, &points, quick)?;
    Ok((md, plots))
}

/// What `merge` found.
#[derive(Debug, Clone)]
pub struct MergeReport {
    /// Rows written.
    pub rows: usize,
    /// Units of the sweep missing from every input (an unfinished or absent shard).
    pub missing_units: usize,
    /// Shards found (index/count).
    pub shards: Vec<Shard>,
    /// Markdown summary.
    pub summary_md: String,
}

/// Merges the result directories of shards of one sweep into `out`: the manifests must
/// describe the same sweep; a unit found twice must have identical rows. The output equals an
/// unsharded run's files when every shard is complete.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<MergeReport> {
    if dirs.is_empty() {
        return Err(StudyError::invalid(
            "DIR",
            "(none)",
            "at least one results directory",
        ));
    }
    let mut man: Option<Manifest> = None;
    let mut shards = Vec::new();
    let mut rows = Vec::new();
    let mut timings = Vec::new();
    for d in dirs {
        let m = Manifest::read(d)?;
        if let Some(first) = &man {
            if !first.same_sweep(&m) {
                return Err(StudyError::Incompatible {
                    path: d.clone(),
                    message: format!(
                        "is a shard of a different sweep than {} (figures, calibrations, repetitions, seed, --quick, dataset and options must match)",
                        dirs[0].display()
                    ),
                });
            }
        } else {
            man = Some(m.clone());
        }
        shards.push(m.shard);
        rows.extend(results::read_dir_rows(d)?);
        timings.extend(results::read_timings(d)?);
    }
    let man =
        man.ok_or_else(|| StudyError::invalid("DIR", "(none)", "at least one results directory"))?;
    // Conflicting duplicates would mean the shards were not computed from the same sweep.
    rows.sort_by(|a, b| a.unit_id.cmp(&b.unit_id));
    for w in rows.windows(2) {
        if w[0].unit_id == w[1].unit_id && w[0] != w[1] {
            return Err(StudyError::Incompatible {
                path: out.to_path_buf(),
                message: format!("unit {} has different results in two inputs", w[0].unit_id),
            });
        }
    }
    let rows = results::canonical(rows);
    let ids: BTreeSet<&str> = rows.iter().map(|r| r.unit_id.as_str()).collect();
    let expected: usize = groups(&man.figures, &man.calibrations).len() * man.repetitions as usize;
    let missing = expected.saturating_sub(ids.len());
    std::fs::create_dir_all(out).map_err(|e| StudyError::io(out, e))?;
    let merged = Manifest {
        shard: Shard::ALL,
        ..man.clone()
    };
    merged.write(out)?;
    let mut tl = String::new();
    for t in &timings {
        if let Ok(s) = serde_json::to_string(t) {
            tl.push_str(&s);
            tl.push('\n');
        }
    }
    results::write_atomic(&out.join(files::TIMINGS), tl.as_bytes())?;
    let n = rows.len();
    let (md, _) = finalize(out, rows, man.quick)?;
    shards.sort_by_key(|s| (s.count, s.index));
    Ok(MergeReport {
        rows: n,
        missing_units: missing,
        shards,
        summary_md: md,
    })
}

/// A runner that draws accuracies from fixed synthetic curves, for tests and demonstrations of
/// the machinery (sharding, resuming, merging, plotting). It never touches data.
pub struct SyntheticRunner {
    /// Fail (as if interrupted) after this many units in total, if set.
    pub fail_after: Option<usize>,
    /// Units computed so far.
    pub counter: std::sync::atomic::AtomicUsize,
}

impl SyntheticRunner {
    /// A runner that never fails.
    pub fn new() -> Self {
        SyntheticRunner {
            fail_after: None,
            counter: Default::default(),
        }
    }
}

impl Default for SyntheticRunner {
    fn default() -> Self {
        Self::new()
    }
}

impl Runner for SyntheticRunner {
    fn options(&self) -> serde_json::Value {
        serde_json::json!({"runner": "synthetic"})
    }

    fn dataset_name(&self, _figure: FigureId) -> String {
        "synthetic".into()
    }

    fn run_group(
        &self,
        group: &Group,
        reps: &[u32],
        seed: u64,
        done: &Done<'_>,
    ) -> Result<GroupTiming> {
        use rand::RngExt;
        use rayon::prelude::*;
        let def = group.figure.definition();
        // Accuracy rises along the grid; methods are offset so that lines are distinct.
        let k = def.axis.grid.len().max(2);
        let frac = (group.setting_index % k) as f64 / (k - 1) as f64;
        let mi = def
            .methods
            .iter()
            .position(|m| *m == group.method)
            .unwrap_or(0) as f64;
        let base = 0.5 + 0.3 * frac + 0.03 * mi;
        reps.par_iter().try_for_each(|&r| {
            let c = self
                .counter
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if self.fail_after.is_some_and(|f| c >= f) {
                return Err(StudyError::Compute {
                    context: group.unit_id(r),
                    message: "simulated interruption".into(),
                });
            }
            let mut rng = crate::units::rng_for(seed, &group.unit_id(r));
            let noise: f64 = rng.random::<f64>() - 0.5;
            done(
                r,
                Measurement {
                    accuracy: (base + 0.02 * noise).clamp(0.0, 1.0),
                    nonprivate_accuracy: 0.92,
                    n_train: 1000,
                    dim: 10,
                    classes: 10,
                    test_size: 100,
                    teachers: None,
                    lambda: None,
                    lambda_source: "none".into(),
                    clip: None,
                    noise: "gaussian".into(),
                    noise_param: 1.0 / group.setting.epsilon,
                    noise_multiplier: None,
                    rho: None,
                    valid_guarantee: true,
                    bias: 0.0,
                    cv_draws: None,
                    dataset_checksum: "synthetic".into(),
                    dataset_labels: "synthetic".into(),
                    preprocessing: String::new(),
                    data_dependent_steps: String::new(),
                    neighbours: privpred_core::Neighbours::ReplaceOne,
                    selection: None,
                    selection_label: String::new(),
                    loss: privpred_core::Loss::Softmax,
                },
            )
        })?;
        Ok(GroupTiming {
            train_s: 0.0,
            predict_s: 0.0,
            answers: 100 * reps.len() as u64,
        })
    }
}
