//! Where the decision changes: the crossovers of the recommended method along one axis of a
//! grid comparison, and the rendering of the whole grid with them.

use super::*;

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
        out.push_str("Cells marked (NO) use the paper's calibration where docs/guarantees.md#errata shows it does not deliver the stated guarantee; they are never recommended.\n");
    }
    out.push_str("Private-prediction methods' guarantees cover B answers; private-training methods' models are private for any number of answers (the same draws at every B).\n");
    out.push_str(&super::selection_note(
        g.cells.iter().flat_map(|c| c.results.iter()),
    ));
    out
}
