//! Comparisons over a grid of ε and B: the shared fits run once per data configuration, the
//! cheap noise draws per point, with the wall and CPU time of each part.

use super::*;

/// What a grid comparison covers: every (ε, B) of the two axes at one δ, T and calibration,
/// with `repetitions` noise draws per method and point from the experiment seed `seed`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GridRequest<'a> {
    /// The ε axis.
    pub epsilons: &'a [f64],
    /// δ of every point.
    pub delta: f64,
    /// The inference-budget axis B.
    pub budgets: &'a [u64],
    /// Subsample-and-aggregate teachers T.
    pub teachers: usize,
    /// The calibration mode.
    pub calibration: CalibrationMode,
    /// Noise draws per method and point (>= 1).
    pub repetitions: u32,
    /// Experiment seed.
    pub seed: u64,
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
pub fn compare_grid(
    runner: &dyn Runner,
    req: &GridRequest,
    observer: &dyn Observer,
) -> Result<GridComparison> {
    let GridRequest {
        epsilons,
        delta,
        budgets,
        teachers,
        calibration,
        repetitions,
        seed,
    } = *req;
    check_request(req)?;
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
                match run_method(runner, &group, repetitions, seed, observer)? {
                    Outcome::Skipped(why) => skipped.push((method, why)),
                    Outcome::Done(Some(r)) => {
                        nonprivate = r.example.nonprivate_accuracy;
                        results.push(*r);
                    }
                    Outcome::Done(None) => {}
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
            timing.add(j == 0, t0.elapsed().as_secs_f64(), c0);
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

/// The request's ranges: at least one repetition, ε and B, each (ε, δ) and B valid.
fn check_request(req: &GridRequest) -> Result<()> {
    if req.repetitions == 0 {
        return Err(StudyError::invalid("--repetitions", 0, "an integer >= 1"));
    }
    if req.epsilons.is_empty() || req.budgets.is_empty() {
        return Err(StudyError::invalid(
            "--epsilon/--budget",
            "(empty)",
            "at least one value each",
        ));
    }
    for &e in req.epsilons {
        privpred_core::Privacy::new(e, req.delta)?;
    }
    for &b in req.budgets {
        privpred_core::Budget::finite(b)?;
    }
    Ok(())
}

/// What one method gave at one grid point.
enum Outcome {
    /// Its draws summarised (None when the runner measured nothing).
    Done(Option<Box<MethodResult>>),
    /// Not applicable there, with why.
    Skipped(String),
}

/// Runs `repetitions` draws of `group`'s method and summarises them (mean ± std over draws,
/// the first draw as the example), reporting the group's events to `observer`.
fn run_method(
    runner: &dyn Runner,
    group: &Group,
    repetitions: u32,
    seed: u64,
    observer: &dyn Observer,
) -> Result<Outcome> {
    if let Some(why) = runner.not_applicable(group, seed)? {
        return Ok(Outcome::Skipped(why));
    }
    observer.on_event(&Event::GroupStarted {
        group,
        pending: repetitions as usize,
    });
    let g0 = Instant::now();
    let out = Mutex::new(Vec::new());
    let reps: Vec<u32> = (0..repetitions).collect();
    let run = runner.run_group(group, &reps, seed, &|r, m| {
        observer.on_event(&Event::UnitFinished {
            group,
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
            return Ok(Outcome::Skipped(e.to_string()));
        }
        r => r?,
    };
    observer.on_event(&Event::GroupFinished {
        group,
        seconds: g0.elapsed().as_secs_f64(),
    });
    let mut ms = out.into_inner().unwrap_or_else(|e| e.into_inner());
    ms.sort_by_key(|(r, _)| *r);
    let acc: Vec<f64> = ms.iter().map(|(_, m)| m.accuracy).collect();
    let (mean, std) = mean_std(&acc);
    Ok(Outcome::Done(ms.into_iter().next().map(|(_, first)| {
        Box::new(MethodResult {
            method: group.method,
            mean,
            std,
            example: first,
        })
    })))
}

impl GridTiming {
    /// Adds one grid point's wall seconds and the CPU seconds since `cpu0` to the shared-fit
    /// part (`first_budget`) or to the rest of the grid.
    fn add(&mut self, first_budget: bool, wall: f64, cpu0: Option<f64>) {
        let cpu = match (cpu0, process_cpu_seconds()) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        let (w, c) = if first_budget {
            (&mut self.fits_wall_s, &mut self.fits_cpu_s)
        } else {
            (&mut self.grid_wall_s, &mut self.grid_cpu_s)
        };
        *w += wall;
        *c = match (*c, cpu) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    }
}
