//! Mean ± standard deviation per (figure, calibration, line, setting).

use crate::error::Result;
use crate::figures::{FigureId, fmt_num};
use crate::results::{Row, files, write_atomic};
use privpred_core::{CalibrationMode, Method};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// One point of a curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// Figure.
    pub figure: FigureId,
    /// Calibration mode.
    pub calibration: CalibrationMode,
    /// The neighbouring relation of the guarantees (one per study).
    pub neighbours: privpred_core::Neighbours,
    /// Method.
    pub method: Method,
    /// Line label.
    pub series: String,
    /// Setting index.
    pub setting_index: usize,
    /// x value.
    pub x: f64,
    /// ε of the setting (distinguishes the lines of fig6a/b).
    pub epsilon: f64,
    /// Repetitions.
    pub n: usize,
    /// Mean test accuracy.
    pub mean: f64,
    /// Sample standard deviation (0 for one repetition).
    pub std: f64,
    /// Mean accuracy of the non-private model.
    pub nonprivate: f64,
    /// How λ / ν was selected and what that cost ([`crate::selection::label`]), e.g.
    /// `non-private-holdout — outside the guarantee`.
    pub selection: String,
}

/// Mean and sample standard deviation.
pub fn mean_std(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// Summarises canonically sorted rows into points (in the same order).
pub fn summarize(rows: &[Row]) -> Vec<Point> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let r0 = &rows[i];
        let mut j = i;
        while j < rows.len() && rows[j].key().0 == r0.key().0 {
            j += 1;
        }
        let acc: Vec<f64> = rows[i..j].iter().map(|r| r.m.accuracy).collect();
        let np: Vec<f64> = rows[i..j].iter().map(|r| r.m.nonprivate_accuracy).collect();
        let (mean, std) = mean_std(&acc);
        out.push(Point {
            figure: r0.figure,
            calibration: r0.calibration,
            neighbours: r0.m.neighbours,
            method: r0.method,
            series: r0.series.clone(),
            setting_index: r0.setting_index,
            x: r0.x,
            epsilon: r0.epsilon,
            n: j - i,
            mean,
            std,
            nonprivate: mean_std(&np).0,
            selection: r0.m.selection_text().to_string(),
        });
        i = j;
    }
    out
}

/// Writes `summary.csv` and `summary.md`; returns the Markdown.
pub fn write_summary(dir: &Path, points: &[Point], quick: bool) -> Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for p in points {
        w.serialize(p).map_err(|e| crate::StudyError::Compute {
            context: "summary.csv".into(),
            message: e.to_string(),
        })?;
    }
    let bytes = w.into_inner().map_err(|e| crate::StudyError::Compute {
        context: "summary.csv".into(),
        message: e.to_string(),
    })?;
    write_atomic(&dir.join(files::SUMMARY_CSV), &bytes)?;
    let md = markdown(points, quick);
    write_atomic(&dir.join(files::SUMMARY_MD), md.as_bytes())?;
    Ok(md)
}

/// The `selection: LABEL (lines)` lines of one table, one per distinct label, before its
/// header row (each line ends in a blank line so that the table still parses).
fn selection_lines(pts: &[&Point]) -> String {
    let mut labels: Vec<(&str, Vec<&str>)> = Vec::new();
    for p in pts {
        match labels.iter_mut().find(|(l, _)| *l == p.selection) {
            Some((_, series)) => {
                if !series.contains(&p.series.as_str()) {
                    series.push(&p.series);
                }
            }
            None => labels.push((&p.selection, vec![&p.series])),
        }
    }
    // one line per selection method: a private split's ε, δ follow the setting, so its
    // labels along an ε axis collapse into one line
    let mut lines: Vec<(String, Vec<&str>)> = Vec::new();
    for (label, series) in &labels {
        let method = label.split(" — ").next().unwrap_or(label);
        let several = labels
            .iter()
            .filter(|(l, _)| l.split(" — ").next() == Some(method))
            .count()
            > 1;
        let text = if several {
            format!("{method} — each setting's ε, δ (parallel composition, inside the guarantee)")
        } else {
            label.to_string()
        };
        match lines.iter_mut().find(|(t, _)| *t == text) {
            Some((_, all)) => {
                for x in series {
                    if !all.contains(x) {
                        all.push(x);
                    }
                }
            }
            None => lines.push((text, series.clone())),
        }
    }
    let mut s = String::new();
    for (label, series) in lines {
        let _ = writeln!(s, "selection: {label} ({})\n", series.join(", "));
    }
    s
}

/// Markdown tables: one per (figure, calibration), rows = x, columns = lines, cells mean ± std
/// test accuracy in percent.
pub fn markdown(points: &[Point], quick: bool) -> String {
    let mut md = String::new();
    if quick {
        md.push_str(
            "> **--quick run**: few repetitions on subsampled data; not the paper's setting.\n\n",
        );
    }
    let mut keys: Vec<(FigureId, CalibrationMode)> =
        points.iter().map(|p| (p.figure, p.calibration)).collect();
    keys.dedup();
    for (fig, cal) in keys {
        let pts: Vec<&Point> = points
            .iter()
            .filter(|p| p.figure == fig && p.calibration == cal)
            .collect();
        let def = fig.definition();
        let mut series: Vec<String> = Vec::new();
        for p in &pts {
            if !series.contains(&p.series) {
                series.push(p.series.clone());
            }
        }
        let mut xs: Vec<f64> = Vec::new();
        for p in &pts {
            if !xs.contains(&p.x) {
                xs.push(p.x);
            }
        }
        xs.sort_by(f64::total_cmp);
        let reps = pts.iter().map(|p| p.n).max().unwrap_or(0);
        let _ = writeln!(
            md,
            "### {fig} — {} ({cal} calibration, {} neighbours, {reps} repetitions)\n",
            def.title,
            pts.first()
                .map_or(privpred_core::Neighbours::ReplaceOne, |p| p.neighbours)
        );
        md.push_str(&selection_lines(&pts));
        let _ = write!(md, "| {} |", def.axis.kind.name());
        for s in &series {
            let _ = write!(md, " {s} |");
        }
        md.push_str(" non-private |\n|---|");
        for _ in &series {
            md.push_str("---|");
        }
        md.push_str("---|\n");
        for x in xs {
            let _ = write!(md, "| {} |", fmt_num(x));
            let mut np = f64::NAN;
            for s in &series {
                match pts.iter().find(|p| p.x == x && &p.series == s) {
                    Some(p) => {
                        np = p.nonprivate;
                        let _ = write!(md, " {:.2} ± {:.2} |", 100.0 * p.mean, 100.0 * p.std);
                    }
                    None => md.push_str(" – |"),
                }
            }
            let _ = writeln!(md, " {:.2} |", 100.0 * np);
        }
        md.push('\n');
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_std_known_values() {
        let (m, s) = mean_std(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(m, 2.5);
        assert!((s - 1.2909944487358056).abs() < 1e-15);
        assert_eq!(mean_std(&[0.5]), (0.5, 0.0));
    }
}
