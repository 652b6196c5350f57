//! Table 1 of the paper: how privacy, accuracy and computation move with N, C, D, B, T and λ,
//! derived from the runs and printed beside the paper's.

use crate::figures::FigureId;
use crate::results::{Row, Timing};
use crate::summary::{Point, mean_std};
use privpred_core::Method;
use std::fmt::Write as _;

/// The direction of a curve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trend {
    /// Goes up (↗).
    Up,
    /// Goes down (↘).
    Down,
    /// Goes up then down (∩).
    UpDown,
    /// Goes down then up (∪; absent from the paper's table).
    DownUp,
    /// Unchanged within noise (·).
    Flat,
}

impl Trend {
    /// The symbol used in the paper.
    pub fn symbol(self) -> &'static str {
        match self {
            Trend::Up => "↗",
            Trend::Down => "↘",
            Trend::UpDown => "∩",
            Trend::DownUp => "∪",
            Trend::Flat => "·",
        }
    }
}

/// Classifies a curve given by increasing x: values, their standard errors and a minimum
/// relevant change `min_delta`. A change counts when it exceeds both `min_delta` and twice the
/// combined standard error. ∩ when the maximum is interior and significantly above both ends.
pub fn trend(values: &[f64], std_errors: &[f64], min_delta: f64) -> Trend {
    let n = values.len();
    if n < 2 {
        return Trend::Flat;
    }
    let se = |i: usize| std_errors.get(i).copied().unwrap_or(0.0);
    let sig = |a: usize, b: usize| -> f64 {
        let d = values[b] - values[a];
        let tol = min_delta.max(2.0 * (se(a).powi(2) + se(b).powi(2)).sqrt());
        if d > tol {
            1.0
        } else if d < -tol {
            -1.0
        } else {
            0.0
        }
    };
    let imax = (0..n)
        .max_by(|&a, &b| values[a].total_cmp(&values[b]))
        .unwrap_or(0);
    let imin = (0..n)
        .min_by(|&a, &b| values[a].total_cmp(&values[b]))
        .unwrap_or(0);
    if imax != 0 && imax != n - 1 && sig(0, imax) > 0.0 && sig(n - 1, imax) > 0.0 {
        return Trend::UpDown;
    }
    if imin != 0 && imin != n - 1 && sig(imin, 0) > 0.0 && sig(imin, n - 1) > 0.0 {
        return Trend::DownUp;
    }
    match sig(0, n - 1) {
        s if s > 0.0 => Trend::Up,
        s if s < 0.0 => Trend::Down,
        _ => Trend::Flat,
    }
}

/// The columns of table 1 and the figure each is read from.
pub const COLUMNS: [(&str, FigureId); 6] = [
    ("N", FigureId::Fig4),
    ("C", FigureId::Fig5b),
    ("D", FigureId::Fig5a),
    ("B", FigureId::Fig2a),
    ("T", FigureId::Fig6b),
    ("λ", FigureId::Fig6a),
];

/// The figures table 1 is derived from.
pub fn needed_figures() -> Vec<FigureId> {
    let mut v: Vec<FigureId> = COLUMNS.iter().map(|c| c.1).collect();
    v.sort();
    v
}

/// The paper's table 1 (rows: ε, δ, accuracy, training time, inference time; columns N C D B T λ).
pub const PAPER: [(&str, [&str; 6]); 5] = [
    ("privacy loss ε", ["↘", "↗", "↗", "↗", "↘", "↘"]),
    ("privacy failure δ", ["↘", "·", "·", "↗", "·", "↘"]),
    ("accuracy", ["↗", "↘", "↗", "↘", "∩", "∩"]),
    ("training time", ["↗", "↗", "↗", "·", "↗", "·"]),
    ("inference time", ["·", "↗", "↗", "·", "↗", "·"]),
];

/// Methods whose curve a column reads: B only moves prediction-time methods, T is
/// subsample-and-aggregate's, λ loss perturbation's; N, C, D all methods of the figure.
fn column_methods(col: &str) -> Option<Vec<Method>> {
    match col {
        "B" => Some(vec![
            Method::PredictionSensitivity,
            Method::SubsampleAggregate,
        ]),
        "T" => Some(vec![Method::SubsampleAggregate]),
        "λ" => Some(vec![Method::LossPerturbation]),
        _ => None,
    }
}

/// A derived cell: the per-method trends and the majority.
#[derive(Debug, Clone)]
pub struct Cell {
    /// Majority trend over the methods (ties: the first method's).
    pub overall: Option<Trend>,
    /// (method, trend) pairs.
    pub per_method: Vec<(Method, Trend)>,
}

fn majority(v: &[(Method, Trend)]) -> Option<Trend> {
    let mut best: Option<(Trend, usize)> = None;
    for (_, t) in v {
        let c = v.iter().filter(|(_, u)| u == t).count();
        if best.is_none_or(|(_, bc)| c > bc) {
            best = Some((*t, c));
        }
    }
    best.map(|b| b.0)
}

/// Which ε line of fig6a/b table 1 reads (the paper's main setting ε = 1).
const SERIES_EPSILON: f64 = 1.0;

fn curve_cells<F>(points: &[Point], fig: FigureId, col: &str, value: F, min_delta: f64) -> Cell
where
    F: Fn(&Point) -> Option<(f64, f64)>,
{
    let methods = column_methods(col).unwrap_or_else(|| fig.definition().methods.clone());
    let mut per = Vec::new();
    for m in methods {
        let mut pts: Vec<&Point> = points
            .iter()
            .filter(|p| {
                p.figure == fig
                    && p.method == m
                    && (fig.definition().series_epsilons.is_empty() || p.epsilon == SERIES_EPSILON)
            })
            .collect();
        // One calibration only: the first present.
        if let Some(cal) = pts.first().map(|p| p.calibration) {
            pts.retain(|p| p.calibration == cal);
        }
        pts.sort_by(|a, b| a.x.total_cmp(&b.x));
        let vals: Vec<(f64, f64)> = pts.iter().filter_map(|p| value(p)).collect();
        if vals.len() >= 2 {
            let v: Vec<f64> = vals.iter().map(|a| a.0).collect();
            let s: Vec<f64> = vals.iter().map(|a| a.1).collect();
            per.push((m, trend(&v, &s, min_delta)));
        }
    }
    Cell {
        overall: majority(&per),
        per_method: per,
    }
}

/// Derives the rows of table 1 that the runs can show: privacy loss (from the calibrated noise
/// scale at fixed ε: more noise needed means more privacy loss at fixed noise), accuracy, and
/// training / inference time (from the timing records).
pub fn derive(
    points: &[Point],
    rows: &[Row],
    timings: &[Timing],
) -> Vec<(&'static str, Vec<Cell>)> {
    let acc: Vec<Cell> = COLUMNS
        .iter()
        .map(|(c, f)| {
            curve_cells(
                points,
                *f,
                c,
                |p| Some((p.mean, p.std / (p.n as f64).sqrt())),
                0.005,
            )
        })
        .collect();
    // Noise scale per point: 1/β for rates, σ for Gaussians.
    let noise_points: Vec<Point> = points
        .iter()
        .filter_map(|p| {
            let r = rows.iter().find(|r| {
                r.figure == p.figure
                    && r.calibration == p.calibration
                    && r.method == p.method
                    && r.setting_index == p.setting_index
            })?;
            let scale = match r.m.noise.as_str() {
                "gaussian" => r.m.noise_param,
                _ if r.m.noise_param > 0.0 => 1.0 / r.m.noise_param,
                _ => return None,
            };
            Some(Point {
                mean: scale.ln(),
                std: 0.0,
                ..p.clone()
            })
        })
        .collect();
    let eps: Vec<Cell> = COLUMNS
        .iter()
        .map(|(c, f)| curve_cells(&noise_points, *f, c, |p| Some((p.mean, 0.0)), 0.01))
        .collect();
    let time_points = |predict: bool| -> Vec<Point> {
        points
            .iter()
            .filter_map(|p| {
                let ts: Vec<f64> = timings
                    .iter()
                    .filter(|t| {
                        t.figure == p.figure
                            && t.method == p.method
                            && t.group.contains(&format!("/{:02}:", p.setting_index))
                    })
                    .map(|t| {
                        if predict {
                            t.predict_s / t.answers.max(1) as f64
                        } else {
                            t.train_s
                        }
                    })
                    .collect();
                if ts.is_empty() {
                    return None;
                }
                let (m, _) = mean_std(&ts);
                Some(Point {
                    mean: m.max(1e-9).ln(),
                    std: 0.0,
                    ..p.clone()
                })
            })
            .collect()
    };
    let tp = time_points(false);
    let ip = time_points(true);
    // Timings are noisy: require a 2× change (ln 2) to call a trend.
    let train: Vec<Cell> = COLUMNS
        .iter()
        .map(|(c, f)| curve_cells(&tp, *f, c, |p| Some((p.mean, 0.0)), std::f64::consts::LN_2))
        .collect();
    let infer: Vec<Cell> = COLUMNS
        .iter()
        .map(|(c, f)| curve_cells(&ip, *f, c, |p| Some((p.mean, 0.0)), std::f64::consts::LN_2))
        .collect();
    vec![
        ("privacy loss ε", eps),
        ("accuracy", acc),
        ("training time", train),
        ("inference time", infer),
    ]
}

/// Renders the derived table beside the paper's, with the per-method detail.
pub fn render(derived: &[(&'static str, Vec<Cell>)]) -> String {
    let mut s = String::new();
    s.push_str("Table 1: effect of N, C, D, B, T, λ — derived (this run) vs paper\n");
    s.push_str("↗ up, ↘ down, ∩ up then down, ∪ down then up, · unchanged, ? no data\n\n");
    let _ = write!(s, "| property |");
    for (c, _) in COLUMNS {
        let _ = write!(s, " {c} derived | {c} paper |");
    }
    s.push_str("\n|---|");
    for _ in COLUMNS {
        s.push_str("---|---|");
    }
    s.push('\n');
    for (name, paper) in PAPER {
        let _ = write!(s, "| {name} |");
        let d = derived.iter().find(|(n, _)| *n == name);
        for (i, p) in paper.iter().enumerate() {
            let sym = d
                .and_then(|(_, cells)| cells.get(i))
                .and_then(|c| c.overall)
                .map_or(if d.is_some() { "?" } else { "n/d" }, |t| t.symbol());
            let _ = write!(s, " {sym} | {p} |");
        }
        s.push('\n');
    }
    s.push_str(
        "\nn/d: not derived from runs (δ at fixed noise needs an accounting sweep). Per method:\n",
    );
    for (name, cells) in derived {
        for (i, c) in cells.iter().enumerate() {
            if c.per_method.is_empty() {
                continue;
            }
            let detail: Vec<String> = c
                .per_method
                .iter()
                .map(|(m, t)| format!("{m} {}", t.symbol()))
                .collect();
            let _ = writeln!(s, "- {name}, {}: {}", COLUMNS[i].0, detail.join(", "));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_curves() {
        let se = [0.001; 6];
        assert_eq!(
            trend(&[0.1, 0.3, 0.5, 0.7, 0.8, 0.9], &se, 0.005),
            Trend::Up
        );
        assert_eq!(
            trend(&[0.9, 0.8, 0.6, 0.5, 0.3, 0.2], &se, 0.005),
            Trend::Down
        );
        assert_eq!(
            trend(&[0.5, 0.7, 0.9, 0.85, 0.6, 0.4], &se, 0.005),
            Trend::UpDown
        );
        assert_eq!(
            trend(&[0.9, 0.5, 0.3, 0.5, 0.9, 0.9], &se, 0.005),
            Trend::DownUp
        );
        assert_eq!(
            trend(&[0.5, 0.501, 0.499, 0.5, 0.502, 0.5], &se, 0.005),
            Trend::Flat
        );
        // Within noise: a big standard error hides a change.
        assert_eq!(trend(&[0.5, 0.6], &[0.1, 0.1], 0.005), Trend::Flat);
        // A saturating curve whose max is interior but within noise of the end is ↗.
        assert_eq!(trend(&[0.2, 0.6, 0.9, 0.902, 0.901], &se, 0.005), Trend::Up);
    }

    #[test]
    fn paper_table_shape() {
        assert_eq!(PAPER[2].1, ["↗", "↘", "↗", "↘", "∩", "∩"]);
    }
}
