//! `compare`: every applicable method at one (ε, δ, B) — or over a grid of ε and B — on one
//! dataset, with a recommendation that says where the decision changes: the practical use of
//! the paper's table 1 and of its central trade-off (private prediction wins for few answers,
//! private training past some budget).

use crate::error::{Result, StudyError};
use crate::figures::{DEFAULT_TEACHERS, FigureId, Setting, fmt_num};
use crate::progress::{Event, Observer};
use crate::results::Measurement;
use crate::summary::mean_std;
use crate::sweep::Runner;
use crate::units::Group;
use privpred_core::{CalibrationMode, Method};
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Instant;

/// One method's result at the setting.
#[derive(Debug, Clone, Serialize)]
pub struct MethodResult {
    /// The method.
    pub method: Method,
    /// Mean test accuracy.
    pub mean: f64,
    /// Standard deviation over repetitions.
    pub std: f64,
    /// One repetition's measurement (parameters, noise).
    pub example: Measurement,
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The setting.
    pub setting: Setting,
    /// Calibration mode.
    pub calibration: CalibrationMode,
    /// The neighbouring relation every method was calibrated for (the runner's).
    pub neighbours: privpred_core::Neighbours,
    /// Results, in the paper's method order.
    pub results: Vec<MethodResult>,
    /// Methods that do not apply, with the reason.
    pub skipped: Vec<(Method, String)>,
    /// Non-private accuracy.
    pub nonprivate: f64,
}

/// Runs every applicable method at `setting` (DP-SGD only when δ > 0): the one-point case of
/// [`compare_grid`] (the same groups, seeds and shared fits).
pub fn compare(
    runner: &dyn Runner,
    setting: Setting,
    calibration: CalibrationMode,
    repetitions: u32,
    seed: u64,
) -> Result<Comparison> {
    let mut g = compare_grid(
        runner,
        &[setting.epsilon],
        setting.delta,
        &[setting.budget],
        setting.teachers,
        calibration,
        repetitions,
        seed,
        &crate::progress::Silent,
    )?;
    g.cells.pop().ok_or_else(|| StudyError::Compute {
        context: "compare".into(),
        message: "no result".into(),
    })
}

/// Default setting for `compare` from (ε, δ, B).
pub fn setting(epsilon: f64, delta: f64, budget: u64) -> Setting {
    Setting {
        epsilon,
        delta,
        budget,
        n: None,
        dim: None,
        classes: None,
        lambda: None,
        teachers: DEFAULT_TEACHERS,
    }
}

/// The accuracy table and a recommendation with its reasons.
pub fn render(c: &Comparison) -> String {
    let s = &c.setting;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Setting: ε = {}, δ = {}, B = {} answers, {} calibration, {} neighbours; non-private accuracy {:.2}%\n",
        s.epsilon,
        s.delta,
        s.budget,
        c.calibration,
        c.neighbours,
        100.0 * c.nonprivate
    );
    out.push_str("| method | kind | accuracy (%) | noise | λ / ν | guarantee covers | valid |\n|---|---|---|---|---|---|---|\n");
    for r in &c.results {
        let m = &r.example;
        let kind = if r.method.is_private_training() {
            "private training"
        } else {
            "private prediction"
        };
        let hp = match (m.lambda, m.clip) {
            (_, Some(nu)) => format!("ν = {nu}"),
            (Some(l), _) => format!("λ = {l} ({})", m.lambda_source),
            _ => format!("T = {}", m.teachers.unwrap_or(0)),
        };
        let _ = writeln!(
            out,
            "| {} | {kind} | {:.2} ± {:.2} | {} {:.4e} | {hp} | {} | {} |",
            r.method,
            100.0 * r.mean,
            100.0 * r.std,
            m.noise,
            m.noise_param,
            if r.method.is_private_training() {
                "any number of answers".to_string()
            } else {
                format!("{} answers", s.budget)
            },
            if m.valid_guarantee {
                "yes"
            } else {
                "NO (paper rule, SPEC §4)"
            }
        );
    }
    for (m, why) in &c.skipped {
        let _ = writeln!(out, "| {m} | – | not applicable: {why} | | | | |");
    }
    out.push('\n');
    out.push_str(&recommend(c));
    out
}

/// The recommendation: the most accurate method with a valid guarantee; a private-training
/// method within one point of it is preferred because it needs no budget accounting.
pub fn recommend(c: &Comparison) -> String {
    let mut valid: Vec<&MethodResult> = c
        .results
        .iter()
        .filter(|r| r.example.valid_guarantee)
        .collect();
    if valid.is_empty() {
        return "No method with a valid guarantee ran at this setting.\n".into();
    }
    valid.sort_by(|a, b| b.mean.total_cmp(&a.mean));
    let best = valid[0];
    let training = valid.iter().find(|r| r.method.is_private_training());
    let mut s = String::new();
    let pick = match training {
        Some(t) if !best.method.is_private_training() && best.mean - t.mean <= 0.01 => {
            let _ = writeln!(
                s,
                "Recommendation: {} ({:.2}%).\nReasons: it is within {:.2} points of the most accurate method ({} at {:.2}%) and, as a private-training method, its released model is private for any number of answers: no inference budget to enforce or to run out of.",
                t.method,
                100.0 * t.mean,
                100.0 * (best.mean - t.mean),
                best.method,
                100.0 * best.mean
            );
            t
        }
        _ => {
            let second = valid.get(1);
            let _ = write!(
                s,
                "Recommendation: {} ({:.2}%).\nReasons: highest mean test accuracy",
                best.method,
                100.0 * best.mean
            );
            if let Some(n) = second {
                let _ = write!(
                    s,
                    ", {:.2} points above {} ({:.2}%)",
                    100.0 * (best.mean - n.mean),
                    n.method,
                    100.0 * n.mean
                );
                let pooled = (best.std.powi(2) + n.std.powi(2)).sqrt();
                if best.mean - n.mean < pooled {
                    s.push_str(" — within one standard deviation, so the two are practically tied");
                }
            }
            s.push('.');
            if best.method.is_private_training() {
                s.push_str(" Its model is private itself: any number of answers.");
            } else {
                let _ = write!(
                    s,
                    " It is a private-prediction method: the guarantee covers only B = {} answers; the serving side must stop (or retrain) when they are spent.",
                    c.setting.budget
                );
            }
            s.push('\n');
            best
        }
    };
    let _ = writeln!(
        s,
        "Accuracy cost of privacy: {:.2} points below the non-private model ({:.2}%).",
        100.0 * (c.nonprivate - pick.mean),
        100.0 * c.nonprivate
    );
    if c.results.iter().any(|r| !r.example.valid_guarantee) {
        s.push_str("Rows marked NO use the paper's calibration where SPEC §4 shows it does not deliver the stated guarantee; they are shown for reference only.\n");
    }
    s.push_str("Note: λ / ν were cross-validated on a hold-out of the training data; the paper ignores the privacy cost of this selection.\n");
    s
}

// ---------------------------------------------------------------------------------------------
// Grids of ε and B
// ---------------------------------------------------------------------------------------------

/// Most points a `--budget` or `--epsilon` grid may have.
pub const MAX_GRID_POINTS: usize = 200;

/// Most points a range `LO..HI:N` may expand to.
const MAX_RANGE_POINTS: usize = 100;

/// The syntax of `--budget` / `--epsilon`, for error messages and help.
pub const GRID_SYNTAX: &str = "a comma-separated list of values and ranges, a range being LO..HI:N (N points from LO to HI inclusive, geometrically spaced), e.g. `1,10,100,1000` or `1..1000:10` or `0.1..10:5,20`";

/// Parses a grid of budgets B: whole numbers in 1..=10^9, ranges rounded to whole answers;
/// sorted, duplicates removed.
pub fn parse_budgets(text: &str) -> Result<Vec<u64>> {
    let v = parse_grid(
        "--budget",
        text,
        1.0,
        1e9,
        "whole numbers of answers in 1..=1000000000",
    )?;
    let mut out: Vec<u64> = Vec::with_capacity(v.len());
    for (x, from_range) in v {
        if !from_range && x.fract() != 0.0 {
            return Err(StudyError::invalid(
                "--budget",
                fmt_num(x),
                "whole numbers of answers in 1..=1000000000",
            ));
        }
        out.push(x.round() as u64);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Parses a grid of privacy losses ε: finite values in (0, 1000]; sorted, duplicates removed.
pub fn parse_epsilons(text: &str) -> Result<Vec<f64>> {
    let mut out: Vec<f64> = parse_grid(
        "--epsilon",
        text,
        f64::MIN_POSITIVE,
        1000.0,
        "ε in (0, 1000]",
    )?
    .into_iter()
    .map(|(x, from_range)| if from_range { round_sig(x, 4) } else { x })
    .collect();
    out.sort_by(f64::total_cmp);
    out.dedup();
    Ok(out)
}

/// Rounds to `digits` significant digits (range points such as 10^0.5 print legibly).
fn round_sig(x: f64, digits: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let k = digits - 1 - x.abs().log10().floor() as i32;
    let f = 10f64.powi(k);
    (x * f).round() / f
}

/// The values of a grid, each flagged when it came from a range.
fn parse_grid(
    flag: &'static str,
    text: &str,
    lo_ok: f64,
    hi_ok: f64,
    what: &str,
) -> Result<Vec<(f64, bool)>> {
    let bad = |item: &str, why: String| StudyError::invalid(flag, item.to_string(), why);
    let num = |item: &str, t: &str| -> Result<f64> {
        let v: f64 = t.trim().parse().map_err(|_| {
            bad(
                item,
                format!("`{}` is not a number; expected {GRID_SYNTAX}", t.trim()),
            )
        })?;
        if !v.is_finite() || v < lo_ok || v > hi_ok {
            return Err(bad(item, format!("{what}; expected {GRID_SYNTAX}")));
        }
        Ok(v)
    };
    let mut out = Vec::new();
    if text.trim().is_empty() {
        return Err(bad(text, format!("at least one value: {GRID_SYNTAX}")));
    }
    for item in text.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(bad(text, format!("an empty item; expected {GRID_SYNTAX}")));
        }
        match item.split_once("..") {
            None => out.push((num(item, item)?, false)),
            Some((lo, rest)) => {
                let (hi, count) = rest.split_once(':').ok_or_else(|| {
                    bad(
                        item,
                        format!(
                            "a range needs its number of points, LO..HI:N; expected {GRID_SYNTAX}"
                        ),
                    )
                })?;
                let (lo, hi) = (num(item, lo)?, num(item, hi)?);
                let n: usize = count.trim().parse().map_err(|_| {
                    bad(
                        item,
                        format!(
                            "N = `{}` is not an integer in 2..={MAX_RANGE_POINTS}",
                            count.trim()
                        ),
                    )
                })?;
                if !(2..=MAX_RANGE_POINTS).contains(&n) {
                    return Err(bad(item, format!("N in 2..={MAX_RANGE_POINTS} points")));
                }
                if lo >= hi {
                    return Err(bad(item, "LO < HI in a range LO..HI:N".into()));
                }
                let (a, b) = (lo.ln(), hi.ln());
                for k in 0..n {
                    let x = if k == 0 {
                        lo
                    } else if k == n - 1 {
                        hi
                    } else {
                        (a + (b - a) * k as f64 / (n - 1) as f64).exp()
                    };
                    out.push((x, true));
                }
            }
        }
        if out.len() > MAX_GRID_POINTS {
            return Err(bad(text, format!("at most {MAX_GRID_POINTS} grid points")));
        }
    }
    Ok(out)
}

/// Wall and CPU time of a grid comparison, split into the shared fits and the cheap draws.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GridTiming {
    /// Wall seconds of the first budget of every ε: data loading, cross-validation, every
    /// shared fit (θ*(λ), teachers, loss perturbation's and DP-SGD's per-draw fits) and the
    /// first draws.
    pub fits_wall_s: f64,
    /// CPU seconds (all threads) of the same phase (Linux; `None` elsewhere).
    pub fits_cpu_s: Option<f64>,
    /// Wall seconds of every other grid point: noise draws on the shared fits.
    pub grid_wall_s: f64,
    /// CPU seconds of the grid evaluation.
    pub grid_cpu_s: Option<f64>,
}

/// CPU seconds (user + system, all threads) of this process so far, from `/proc/self/stat`.
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // fields after the parenthesised command name; utime and stime are fields 14 and 15
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    // clock ticks per second: 100 on every Linux platform Rust supports
    Some((utime + stime) / 100.0)
}

/// Every applicable method over a grid of ε × B at one δ.
#[derive(Debug, Clone, Serialize)]
pub struct GridComparison {
    /// Calibration mode.
    pub calibration: CalibrationMode,
    /// δ.
    pub delta: f64,
    /// The ε grid, increasing.
    pub epsilons: Vec<f64>,
    /// The B grid, increasing.
    pub budgets: Vec<u64>,
    /// Repetitions (noise draws) per method and point.
    pub repetitions: u32,
    /// One comparison per (ε, B), ε-major: `cells[i * budgets.len() + j]`.
    pub cells: Vec<Comparison>,
    /// Time of the fits and of the grid evaluation.
    pub timing: GridTiming,
}

impl GridComparison {
    /// The comparison at (ε index, B index).
    pub fn cell(&self, i: usize, j: usize) -> &Comparison {
        &self.cells[i * self.budgets.len() + j]
    }

    /// The non-private accuracy (the same fit at every point).
    pub fn nonprivate(&self) -> f64 {
        self.cells.first().map_or(f64::NAN, |c| c.nonprivate)
    }

    /// The methods that ran, in the paper's order.
    pub fn methods(&self) -> Vec<Method> {
        Method::ALL
            .into_iter()
            .filter(|m| {
                self.cells
                    .iter()
                    .any(|c| c.results.iter().any(|r| r.method == *m))
            })
            .collect()
    }

    /// The recommendation along B at each ε (index into `epsilons`).
    pub fn decision_over_budget(&self, i: usize) -> Decision {
        let cells: Vec<&Comparison> = (0..self.budgets.len()).map(|j| self.cell(i, j)).collect();
        let xs: Vec<f64> = self.budgets.iter().map(|&b| b as f64).collect();
        decide(Axis::Budget, self.epsilons[i], &xs, &cells)
    }

    /// The recommendation along ε at every B, in words: budgets where one method wins at every
    /// ε are merged into one line ("At B = 1–18 answers: subsample-aggregate at every ε of the
    /// grid"), the others get [`Decision::text`].
    pub fn epsilon_summaries(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut run: Option<(Method, u64, u64)> = None;
        let flush = |run: &mut Option<(Method, u64, u64)>, out: &mut Vec<String>| {
            if let Some((m, a, b)) = run.take() {
                let range = if a == b {
                    format!("B = {a} answer{}", if a == 1 { "" } else { "s" })
                } else {
                    format!("B = {a}–{b} answers")
                };
                out.push(format!(
                    "At {range}: {m} at every ε of the grid ({}–{}).",
                    fmt_num(self.epsilons.first().copied().unwrap_or(f64::NAN)),
                    fmt_num(self.epsilons.last().copied().unwrap_or(f64::NAN)),
                ));
            }
        };
        for j in 0..self.budgets.len() {
            let d = self.decision_over_epsilon(j);
            let first = d.recommended.first().copied().flatten();
            let uniform = d.recommended.iter().all(|m| *m == first);
            match (uniform, first) {
                (true, Some(m)) => match &mut run {
                    Some((rm, _, b)) if *rm == m => *b = self.budgets[j],
                    _ => {
                        flush(&mut run, &mut out);
                        run = Some((m, self.budgets[j], self.budgets[j]));
                    }
                },
                _ => {
                    flush(&mut run, &mut out);
                    out.push(d.text());
                }
            }
        }
        flush(&mut run, &mut out);
        out
    }

    /// The recommendation along ε at each B (index into `budgets`).
    pub fn decision_over_epsilon(&self, j: usize) -> Decision {
        let cells: Vec<&Comparison> = (0..self.epsilons.len()).map(|i| self.cell(i, j)).collect();
        decide(
            Axis::Epsilon,
            self.budgets[j] as f64,
            &self.epsilons,
            &cells,
        )
    }
}

/// Runs every applicable method at every (ε, B) of the grid, with the study's sharing: the data,
/// the cross-validation and every non-private fit θ*(λ) and teacher ensemble are computed once
/// (the runner caches them by data configuration and λ / T), and each private-training method's
/// draws once per ε — its released model does not depend on B, so the groups run on the
/// budget axis of fig2a/fig2b and every further B replays them. Prediction-time methods redraw
/// their noise at each B on the shared logits and votes.
#[allow(clippy::too_many_arguments)]
pub fn compare_grid(
    runner: &dyn Runner,
    epsilons: &[f64],
    delta: f64,
    budgets: &[u64],
    teachers: usize,
    calibration: CalibrationMode,
    repetitions: u32,
    seed: u64,
    observer: &dyn Observer,
) -> Result<GridComparison> {
    if repetitions == 0 {
        return Err(StudyError::invalid("--repetitions", 0, "an integer >= 1"));
    }
    if epsilons.is_empty() || budgets.is_empty() {
        return Err(StudyError::invalid(
            "--epsilon/--budget",
            "(empty)",
            "at least one value each",
        ));
    }
    for &e in epsilons {
        privpred_core::Privacy::new(e, delta)?;
    }
    for &b in budgets {
        privpred_core::Budget::finite(b)?;
    }
    // the budget axis: a private-training method's draws are seeded without B (linear::rng_id)
    let figure = if delta > 0.0 {
        FigureId::Fig2b
    } else {
        FigureId::Fig2a
    };
    let methods: Vec<Method> = Method::ALL
        .into_iter()
        .filter(|m| *m != Method::DpSgd || delta > 0.0)
        .collect();
    let total = epsilons.len() * budgets.len() * methods.len() * repetitions as usize;
    let start = Instant::now();
    observer.on_event(&Event::RunStarted { total, done: 0 });
    let mut timing = GridTiming {
        fits_cpu_s: Some(0.0),
        grid_cpu_s: Some(0.0),
        ..GridTiming::default()
    };
    let mut cells = Vec::with_capacity(epsilons.len() * budgets.len());
    for (i, &epsilon) in epsilons.iter().enumerate() {
        for (j, &budget) in budgets.iter().enumerate() {
            let t0 = Instant::now();
            let c0 = process_cpu_seconds();
            let mut setting = setting(epsilon, delta, budget);
            setting.teachers = teachers;
            let mut results = Vec::new();
            let mut skipped = Vec::new();
            let mut nonprivate = f64::NAN;
            for method in Method::ALL {
                if !methods.contains(&method) {
                    skipped.push((
                        method,
                        "needs δ > 0 (its accounting is (ε, δ) only)".to_string(),
                    ));
                    continue;
                }
                if let Err(e) = privpred_core::check_relation(method, runner.neighbours()) {
                    skipped.push((method, e.to_string()));
                    continue;
                }
                let group = Group {
                    figure,
                    calibration,
                    method,
                    setting_index: i * budgets.len() + j,
                    setting,
                    x: budget as f64,
                    series: format!("compare/{}", method.name()),
                };
                observer.on_event(&Event::GroupStarted {
                    group: &group,
                    pending: repetitions as usize,
                });
                let g0 = Instant::now();
                let out = Mutex::new(Vec::new());
                let reps: Vec<u32> = (0..repetitions).collect();
                let run = runner.run_group(&group, &reps, seed, &|r, m| {
                    observer.on_event(&Event::UnitFinished {
                        group: &group,
                        repetition: r,
                        accuracy: m.accuracy,
                    });
                    out.lock().unwrap_or_else(|e| e.into_inner()).push((r, m));
                    Ok(())
                });
                match run {
                    // Under add-remove a method can lack an analysis at this setting (loss
                    // perturbation when its N·λ floor is active): listed as not applicable,
                    // with why.
                    Err(e) if runner.neighbours() == privpred_core::Neighbours::AddRemove => {
                        skipped.push((method, e.to_string()));
                        continue;
                    }
                    r => r?,
                };
                observer.on_event(&Event::GroupFinished {
                    group: &group,
                    seconds: g0.elapsed().as_secs_f64(),
                });
                let mut ms = out.into_inner().unwrap_or_else(|e| e.into_inner());
                ms.sort_by_key(|(r, _)| *r);
                let acc: Vec<f64> = ms.iter().map(|(_, m)| m.accuracy).collect();
                let (mean, std) = mean_std(&acc);
                if let Some((_, first)) = ms.into_iter().next() {
                    nonprivate = first.nonprivate_accuracy;
                    results.push(MethodResult {
                        method,
                        mean,
                        std,
                        example: first,
                    });
                }
            }
            cells.push(Comparison {
                setting,
                calibration,
                neighbours: runner.neighbours(),
                results,
                skipped,
                nonprivate,
            });
            let wall = t0.elapsed().as_secs_f64();
            let cpu = match (c0, process_cpu_seconds()) {
                (Some(a), Some(b)) => Some(b - a),
                _ => None,
            };
            let (w, c) = if j == 0 {
                (&mut timing.fits_wall_s, &mut timing.fits_cpu_s)
            } else {
                (&mut timing.grid_wall_s, &mut timing.grid_cpu_s)
            };
            *w += wall;
            *c = match (*c, cpu) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
        }
    }
    observer.on_event(&Event::RunFinished {
        seconds: start.elapsed().as_secs_f64(),
    });
    Ok(GridComparison {
        calibration,
        delta,
        epsilons: epsilons.to_vec(),
        budgets: budgets.to_vec(),
        repetitions,
        cells,
        timing,
    })
}

/// A private-training method within this many accuracy points (as a fraction) of the most
/// accurate method is recommended instead: its model needs no inference budget.
pub const TRAINING_PREFERENCE: f64 = 0.01;

/// The recommendation's score: mean accuracy, plus [`TRAINING_PREFERENCE`] for a
/// private-training method (ties go to private training).
fn score(r: &MethodResult) -> f64 {
    r.mean
        + if r.method.is_private_training() {
            TRAINING_PREFERENCE
        } else {
            0.0
        }
}

/// The recommended method at one point: the highest [`score`] among the methods with a valid
/// guarantee — the same pick as [`recommend`].
pub fn recommended(c: &Comparison) -> Option<&MethodResult> {
    c.results
        .iter()
        .filter(|r| r.example.valid_guarantee && r.mean.is_finite())
        .fold(None, |best: Option<&MethodResult>, r| match best {
            Some(b)
                if score(b) > score(r)
                    || (score(b) == score(r) && b.method.is_private_training()) =>
            {
                Some(b)
            }
            _ => Some(r),
        })
}

/// The axis a decision runs along.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Axis {
    /// Inference budget B (at a fixed ε).
    Budget,
    /// Privacy loss ε (at a fixed B).
    Epsilon,
}

impl Axis {
    /// `B` or `ε`.
    pub fn symbol(self) -> &'static str {
        match self {
            Axis::Budget => "B",
            Axis::Epsilon => "ε",
        }
    }
}

/// Where the recommended method changes between two neighbouring grid points.
#[derive(Debug, Clone, Serialize)]
pub struct Crossover {
    /// The method recommended below the crossover.
    pub from: Method,
    /// The method recommended above it.
    pub to: Method,
    /// The crossover: where the two methods' scores meet, linearly interpolated on the
    /// logarithm of the axis between the grid points `lo` and `hi`.
    pub at: f64,
    /// The grid point below.
    pub lo: f64,
    /// The grid point above.
    pub hi: f64,
    /// Accuracy of `from` minus accuracy of `to` at `lo` and at `hi` (fractions).
    pub gap: (f64, f64),
    /// Pooled standard deviation over draws of that difference at `lo` and at `hi`.
    pub gap_std: (f64, f64),
}

/// The recommendation along one axis of the grid.
#[derive(Debug, Clone, Serialize)]
pub struct Decision {
    /// The varied quantity.
    pub axis: Axis,
    /// The fixed one: ε on a budget axis, B on an ε axis.
    pub fixed: f64,
    /// The grid points.
    pub xs: Vec<f64>,
    /// The recommended method at each point (None: no method with a valid guarantee).
    pub recommended: Vec<Option<Method>>,
    /// Its mean ± std accuracy at each point (NaN where none).
    pub accuracy: Vec<(f64, f64)>,
    /// Its accuracy cost of privacy at each point: non-private minus recommended (fraction).
    pub cost: Vec<f64>,
    /// The points where the recommendation changes.
    pub crossovers: Vec<Crossover>,
}

fn result_of(c: &Comparison, m: Method) -> Option<&MethodResult> {
    c.results.iter().find(|r| r.method == m)
}

/// Finds the recommendation at each point and where it changes.
pub fn decide(axis: Axis, fixed: f64, xs: &[f64], cells: &[&Comparison]) -> Decision {
    let rec: Vec<Option<&MethodResult>> = cells.iter().map(|c| recommended(c)).collect();
    let mut crossovers = Vec::new();
    for k in 0..xs.len().saturating_sub(1) {
        let (Some(a), Some(b)) = (rec[k], rec[k + 1]) else {
            continue;
        };
        if a.method == b.method {
            continue;
        }
        let (x0, x1) = (xs[k], xs[k + 1]);
        let gap = |c: &Comparison| -> Option<(f64, f64, f64)> {
            let f = result_of(c, a.method)?;
            let t = result_of(c, b.method)?;
            Some((
                score(f) - score(t),
                f.mean - t.mean,
                (f.std.powi(2) + t.std.powi(2)).sqrt(),
            ))
        };
        let (g0, g1) = (gap(cells[k]), gap(cells[k + 1]));
        let t = match (g0, g1) {
            (Some((s0, ..)), Some((s1, ..))) if s0 - s1 > 0.0 => (s0 / (s0 - s1)).clamp(0.0, 1.0),
            _ => 0.5,
        };
        let at = (x0.ln() + t * (x1.ln() - x0.ln())).exp();
        crossovers.push(Crossover {
            from: a.method,
            to: b.method,
            at,
            lo: x0,
            hi: x1,
            gap: (g0.map_or(f64::NAN, |g| g.1), g1.map_or(f64::NAN, |g| g.1)),
            gap_std: (g0.map_or(f64::NAN, |g| g.2), g1.map_or(f64::NAN, |g| g.2)),
        });
    }
    Decision {
        axis,
        fixed,
        xs: xs.to_vec(),
        recommended: rec.iter().map(|r| r.map(|r| r.method)).collect(),
        accuracy: rec
            .iter()
            .map(|r| r.map_or((f64::NAN, f64::NAN), |r| (r.mean, r.std)))
            .collect(),
        cost: rec
            .iter()
            .zip(cells)
            .map(|(r, c)| r.map_or(f64::NAN, |r| c.nonprivate - r.mean))
            .collect(),
        crossovers,
    }
}

/// A value on an axis for prose: B with two significant digits (whole answers), ε with two.
pub fn fmt_axis(axis: Axis, v: f64) -> String {
    match axis {
        Axis::Budget if v >= 10.0 => format!("{}", round_sig(v, 2).round() as u64),
        Axis::Budget => format!("{}", round_sig(v, 2)),
        Axis::Epsilon => fmt_num(round_sig(v, 2)),
    }
}

impl Decision {
    /// The recommendation in words: "up to B ≈ 35 answers, subsample-and-aggregate; beyond,
    /// loss perturbation", with how each crossover was found and its uncertainty.
    pub fn text(&self) -> String {
        let sym = self.axis.symbol();
        let unit = if self.axis == Axis::Budget {
            " answers"
        } else {
            ""
        };
        let head = match self.axis {
            Axis::Budget => format!("At ε = {}", fmt_num(self.fixed)),
            Axis::Epsilon if self.fixed == 1.0 => "At B = 1 answer".to_string(),
            Axis::Epsilon => format!("At B = {} answers", fmt_num(self.fixed)),
        };
        let name = |m: Option<Method>| {
            m.map_or("no method with a valid guarantee".to_string(), |m| {
                m.to_string()
            })
        };
        // runs of the same recommendation
        let mut runs: Vec<(Option<Method>, usize, usize)> = Vec::new();
        for (k, m) in self.recommended.iter().enumerate() {
            match runs.last_mut() {
                Some(r) if r.0 == *m => r.2 = k,
                _ => runs.push((*m, k, k)),
            }
        }
        let at = |k: usize| -> String {
            // the crossover between grid points k and k + 1
            self.crossovers
                .iter()
                .find(|c| c.lo == self.xs[k])
                .map_or_else(
                    || format!("{}–{}", fmt_num(self.xs[k]), fmt_num(self.xs[k + 1])),
                    |c| fmt_axis(self.axis, c.at),
                )
        };
        let lead = |g: f64| if g < 0.0 { "trails by" } else { "leads by" };
        let mut s = String::new();
        if runs.len() <= 1 {
            let m = runs.first().and_then(|r| r.0);
            let _ = write!(
                s,
                "{head}: {} at every {sym} of the grid ({}–{}{unit}).",
                name(m),
                fmt_num(self.xs.first().copied().unwrap_or(f64::NAN)),
                fmt_num(self.xs.last().copied().unwrap_or(f64::NAN)),
            );
        } else {
            let _ = write!(s, "{head}: ");
            let n = runs.len();
            for (r, &(m, _, end)) in runs.iter().enumerate() {
                if r == 0 {
                    let _ = write!(s, "up to {sym} ≈ {}{unit}, {}", at(end), name(m));
                } else if r + 1 == n {
                    let _ = write!(s, "; beyond, {}.", name(m));
                } else {
                    let _ = write!(
                        s,
                        "; from {sym} ≈ {} to {sym} ≈ {}, {}",
                        at(runs[r - 1].2),
                        at(end),
                        name(m)
                    );
                }
            }
        }
        for c in &self.crossovers {
            let _ = write!(
                s,
                " The switch from {} to {} is interpolated on log {sym} between the grid points {sym} = {} and {sym} = {}: {} {} {:.1} ± {:.1} points at {sym} = {} and {} {:.1} ± {:.1} at {sym} = {} (± pooled std over draws{}).",
                c.from,
                c.to,
                fmt_num(c.lo),
                fmt_num(c.hi),
                c.from,
                lead(c.gap.0),
                100.0 * c.gap.0.abs(),
                100.0 * c.gap_std.0,
                fmt_num(c.lo),
                lead(c.gap.1),
                100.0 * c.gap.1.abs(),
                100.0 * c.gap_std.1,
                fmt_num(c.hi),
                if c.from.is_private_training() != c.to.is_private_training() {
                    format!(
                        "; a private-training method within {:.0} point of the best is preferred, as it needs no budget",
                        100.0 * TRAINING_PREFERENCE
                    )
                } else {
                    String::new()
                }
            );
            let close = (c.gap.0.abs() < c.gap_std.0) || (c.gap.1.abs() < c.gap_std.1);
            if close {
                s.push_str(" The difference is within one standard deviation at a neighbouring grid point, so the exact crossing is uncertain; add repetitions or grid points there to sharpen it.");
            }
        }
        s
    }
}

/// The grid's tables and recommendations as Markdown for the terminal.
pub fn render_grid(g: &GridComparison) -> String {
    let methods = g.methods();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Grid: ε ∈ {{{}}}, δ = {}, B ∈ {{{}}} answers, {} calibration, {} draws per point; non-private accuracy {:.2}%\n",
        g.epsilons
            .iter()
            .map(|e| fmt_num(*e))
            .collect::<Vec<_>>()
            .join(", "),
        fmt_num(g.delta),
        g.budgets
            .iter()
            .map(|b| b.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        g.calibration,
        g.repetitions,
        100.0 * g.nonprivate()
    );
    for (i, &eps) in g.epsilons.iter().enumerate() {
        let d = g.decision_over_budget(i);
        let _ = writeln!(
            out,
            "ε = {}: test accuracy (%), mean ± std over draws\n",
            fmt_num(eps)
        );
        out.push_str("| B |");
        for m in &methods {
            let _ = write!(out, " {m} |");
        }
        out.push_str(" recommended | cost of privacy (points) |\n|---|");
        for _ in &methods {
            out.push_str("---|");
        }
        out.push_str("---|---|\n");
        for (j, &b) in g.budgets.iter().enumerate() {
            let c = g.cell(i, j);
            let _ = write!(out, "| {b} |");
            for m in &methods {
                match result_of(c, *m) {
                    Some(r) => {
                        let _ = write!(
                            out,
                            " {:.2} ± {:.2}{} |",
                            100.0 * r.mean,
                            100.0 * r.std,
                            if r.example.valid_guarantee {
                                ""
                            } else {
                                " (NO)"
                            }
                        );
                    }
                    None => out.push_str(" – |"),
                }
            }
            let _ = writeln!(
                out,
                " {} | {:.2} |",
                d.recommended[j].map_or("–".to_string(), |m| m.to_string()),
                100.0 * d.cost[j]
            );
        }
        let _ = writeln!(out, "\n{}\n", d.text());
    }
    if g.epsilons.len() > 1 {
        for line in g.epsilon_summaries() {
            let _ = writeln!(out, "{line}");
        }
        out.push('\n');
    }
    let skipped: Vec<String> = g
        .cells
        .first()
        .map(|c| {
            c.skipped
                .iter()
                .map(|(m, why)| format!("{m}: {why}"))
                .collect()
        })
        .unwrap_or_default();
    if !skipped.is_empty() {
        let _ = writeln!(out, "Not applicable: {}.", skipped.join("; "));
    }
    if g.cells
        .iter()
        .any(|c| c.results.iter().any(|r| !r.example.valid_guarantee))
    {
        out.push_str("Cells marked (NO) use the paper's calibration where SPEC §4 shows it does not deliver the stated guarantee; they are never recommended.\n");
    }
    out.push_str("Private-prediction methods' guarantees cover B answers; private-training methods' models are private for any number of answers (the same draws at every B). λ / ν were cross-validated on a hold-out of the training data; the paper ignores the privacy cost of this selection.\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_parse_lists_and_ranges() {
        assert_eq!(
            parse_budgets("1,10,100,1000").unwrap(),
            vec![1, 10, 100, 1000]
        );
        assert_eq!(parse_budgets(" 100 ").unwrap(), vec![100]);
        // sorted, deduplicated
        assert_eq!(parse_budgets("100,1,100").unwrap(), vec![1, 100]);
        assert_eq!(parse_budgets("1..1000:4").unwrap(), vec![1, 10, 100, 1000]);
        // range points are rounded to whole answers; duplicates after rounding are removed
        assert_eq!(parse_budgets("1..2:5").unwrap(), vec![1, 2]);
        assert_eq!(parse_budgets("1..100:3,5").unwrap(), vec![1, 5, 10, 100]);
        assert_eq!(parse_epsilons("1").unwrap(), vec![1.0]);
        assert_eq!(parse_epsilons("0.1..10:3").unwrap(), vec![0.1, 1.0, 10.0]);
        assert_eq!(parse_epsilons("2,0.5").unwrap(), vec![0.5, 2.0]);
        // 10^(1/2) to 4 significant digits
        assert_eq!(parse_epsilons("1..10:3").unwrap(), vec![1.0, 3.162, 10.0]);
    }

    #[test]
    fn bad_grids_name_the_flag_and_the_syntax() {
        for (text, needle) in [
            ("", "at least one value"),
            ("1,,2", "empty item"),
            ("abc", "not a number"),
            ("0", "1..=1000000000"),
            ("2.5", "whole numbers"),
            ("1..100", "LO..HI:N"),
            ("100..1:3", "LO < HI"),
            ("1..100:1", "2..=100"),
            ("1..100:x", "not an integer"),
            ("1..100:1000", "2..=100"),
            ("inf", "1..=1000000000"),
        ] {
            let e = parse_budgets(text).unwrap_err();
            assert!(e.is_usage(), "{text}: {e}");
            let msg = e.to_string();
            assert!(msg.contains("--budget"), "{text}: {msg}");
            assert!(msg.contains(needle), "{text}: {msg}");
        }
        for text in ["0", "-1", "NaN", "1e9", "0..1:3"] {
            let e = parse_epsilons(text).unwrap_err().to_string();
            assert!(e.contains("--epsilon"), "{text}: {e}");
        }
        let many = (1..=201)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",");
        assert!(
            parse_budgets(&many)
                .unwrap_err()
                .to_string()
                .contains("at most 200")
        );
    }

    fn result(method: Method, mean: f64, std: f64) -> MethodResult {
        MethodResult {
            method,
            mean,
            std,
            example: Measurement {
                accuracy: mean,
                nonprivate_accuracy: 0.9,
                n_train: 100,
                dim: 10,
                classes: 10,
                test_size: 10,
                teachers: None,
                lambda: None,
                lambda_source: String::new(),
                clip: None,
                noise: "l2-laplace".into(),
                noise_param: 1.0,
                noise_multiplier: None,
                rho: None,
                valid_guarantee: true,
                bias: 0.0,
                cv_draws: None,
                dataset_checksum: String::new(),
                dataset_labels: String::new(),
                preprocessing: String::new(),
                data_dependent_steps: String::new(),
                neighbours: privpred_core::Neighbours::ReplaceOne,
            },
        }
    }

    fn cell(budget: u64, rs: Vec<MethodResult>) -> Comparison {
        Comparison {
            setting: setting(1.0, 0.0, budget),
            calibration: CalibrationMode::Corrected,
            neighbours: privpred_core::Neighbours::ReplaceOne,
            results: rs,
            skipped: Vec::new(),
            nonprivate: 0.9,
        }
    }

    /// Subsample-and-aggregate falls with B, loss perturbation is flat: the crossover is where
    /// the lines meet (with the 1-point preference for private training), interpolated on log B.
    #[test]
    fn crossover_is_interpolated_on_log_budget() {
        let sa = Method::SubsampleAggregate;
        let lp = Method::LossPerturbation;
        let cells = [
            cell(10, vec![result(lp, 0.60, 0.02), result(sa, 0.80, 0.01)]),
            cell(100, vec![result(lp, 0.60, 0.02), result(sa, 0.71, 0.01)]),
            cell(1000, vec![result(lp, 0.60, 0.02), result(sa, 0.41, 0.01)]),
        ];
        let refs: Vec<&Comparison> = cells.iter().collect();
        let d = decide(Axis::Budget, 1.0, &[10.0, 100.0, 1000.0], &refs);
        assert_eq!(d.recommended, vec![Some(sa), Some(sa), Some(lp)]);
        assert_eq!(d.crossovers.len(), 1);
        let c = &d.crossovers[0];
        assert_eq!((c.from, c.to, c.lo, c.hi), (sa, lp, 100.0, 1000.0));
        // score gap 0.71 - 0.61 = 0.10 at B = 100, 0.41 - 0.61 = -0.20 at B = 1000: t = 1/3
        let want = 10f64.powf(2.0 + 1.0 / 3.0);
        assert!((c.at - want).abs() < 1e-9 * want, "{}", c.at);
        assert!((c.gap.0 - 0.11).abs() < 1e-12 && (c.gap.1 + 0.19).abs() < 1e-12);
        assert!((c.gap_std.0 - 0.05f64.sqrt() * 0.1).abs() < 1e-12);
        // cost of privacy against the non-private 90 %
        assert!((d.cost[0] - 0.10).abs() < 1e-12 && (d.cost[2] - 0.30).abs() < 1e-12);
        let t = d.text();
        assert!(
            t.starts_with(
                "At ε = 1: up to B ≈ 220 answers, subsample-aggregate; beyond, loss-perturbation."
            ),
            "{t}"
        );
        assert!(
            t.contains("between the grid points B = 100 and B = 1000"),
            "{t}"
        );
        assert!(t.contains("leads by 11.0 ± 2.2 points at B = 100"), "{t}");
        assert!(t.contains("trails by 19.0 ± 2.2 at B = 1000"), "{t}");
    }

    #[test]
    fn recommendation_matches_the_single_point_rule() {
        let sa = Method::SubsampleAggregate;
        let lp = Method::LossPerturbation;
        let ps = Method::PredictionSensitivity;
        // a private-training method within one point wins
        let c = cell(10, vec![result(lp, 0.795, 0.0), result(sa, 0.80, 0.0)]);
        assert_eq!(recommended(&c).map(|r| r.method), Some(lp));
        assert!(recommend(&c).starts_with("Recommendation: loss-perturbation"));
        // more than one point behind: the prediction method
        let c = cell(
            10,
            vec![
                result(lp, 0.78, 0.0),
                result(sa, 0.80, 0.0),
                result(ps, 0.5, 0.0),
            ],
        );
        assert_eq!(recommended(&c).map(|r| r.method), Some(sa));
        assert!(recommend(&c).starts_with("Recommendation: subsample-aggregate"));
        // invalid guarantees are never recommended
        let mut bad = result(sa, 0.99, 0.0);
        bad.example.valid_guarantee = false;
        let c = cell(10, vec![result(lp, 0.5, 0.0), bad]);
        assert_eq!(recommended(&c).map(|r| r.method), Some(lp));
        // one method everywhere: no crossover, said so
        let cells = [
            cell(1, vec![result(lp, 0.6, 0.0)]),
            cell(2, vec![result(lp, 0.6, 0.0)]),
        ];
        let refs: Vec<&Comparison> = cells.iter().collect();
        let d = decide(Axis::Budget, 1.0, &[1.0, 2.0], &refs);
        assert!(d.crossovers.is_empty());
        assert_eq!(
            d.text(),
            "At ε = 1: loss-perturbation at every B of the grid (1–2 answers)."
        );
    }

    #[test]
    fn grid_runs_every_method_and_shares_private_training_draws() {
        let runner = crate::sweep::SyntheticRunner::new();
        let g = compare_grid(
            &runner,
            &[0.5, 1.0],
            0.0,
            &[1, 10, 100],
            DEFAULT_TEACHERS,
            CalibrationMode::Corrected,
            3,
            7,
            &crate::progress::Silent,
        )
        .unwrap();
        assert_eq!(g.cells.len(), 6);
        assert_eq!(g.methods().len(), 4, "no DP-SGD at δ = 0");
        for c in &g.cells {
            assert_eq!(c.skipped.len(), 1);
        }
        assert_eq!(g.cell(1, 2).setting.epsilon, 1.0);
        assert_eq!(g.cell(1, 2).setting.budget, 100);
        let text = render_grid(&g);
        assert!(
            text.contains("ε = 0.5") && text.contains("at every ε of the grid (0.5–1)"),
            "{text}"
        );
        let err = compare_grid(
            &runner,
            &[1.0],
            0.0,
            &[1],
            1,
            CalibrationMode::Corrected,
            0,
            7,
            &crate::progress::Silent,
        )
        .unwrap_err();
        assert!(err.to_string().contains("--repetitions"));
    }
}
