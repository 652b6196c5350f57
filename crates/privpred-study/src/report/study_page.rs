//! The HTML report of `privpred reproduce`: every figure of a study directory with its
//! budget decision, point tables, guarantees and provenance.

use super::*;

/// The HTML report of a `reproduce` run: per figure, its plots, its table and its guarantees
/// (one per calibration, method and setting), then the run's provenance.
pub fn study_html(
    rows: &[Row],
    manifest: &Manifest,
    prov: &Provenance,
    dpsgd: &DpSgdConfig,
) -> Result<String> {
    let points = summarize(rows);
    let mut b = String::new();
    let figs: Vec<FigureId> = {
        let mut f: Vec<FigureId> = points.iter().map(|p| p.figure).collect();
        f.dedup();
        f
    };
    let _ = writeln!(
        b,
        "<h1>privpred reproduce: {}</h1>\n<p class=\"small\">{} repetitions per setting; calibration {}; mean ± std over repetitions.</p>",
        escape(&figs.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")),
        manifest.repetitions,
        escape(
            &manifest
                .calibrations
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    );
    if prov.quick {
        b.push_str("<p class=\"warn\">--quick run: subsampled data and few repetitions; not the paper's setting.</p>\n");
    }
    b.push_str("<ul>\n");
    for f in &figs {
        let _ = writeln!(
            b,
            "<li><a href=\"#{0}\">{0}</a>: {1}</li>",
            f.name(),
            escape(f.definition().title)
        );
    }
    b.push_str("</ul>\n");
    let specs = plot_specs(&points, prov.quick);
    for fig in &figs {
        let def = fig.definition();
        let _ = writeln!(
            b,
            "<h2 id=\"{}\">{}: {}</h2>",
            fig.name(),
            fig.name(),
            escape(def.title)
        );
        let decisions = budget_decisions(&mut b, rows, &points, *fig);
        for (stem, spec) in specs.iter().filter(|(s, _)| {
            s.strip_prefix(fig.name())
                .is_some_and(|r| r.starts_with('-'))
        }) {
            let mut spec = spec.clone();
            if let Some((_, d)) = decisions
                .iter()
                .find(|(c, _)| *stem == format!("{fig}-{c}"))
            {
                spec.markers = decision_markers(d);
            }
            let spec = &spec;
            b.push_str(&figure(
                spec,
                &format!("{stem}: ±1 std over repetitions shaded; non-private dashed black."),
                &format!("plot-{stem}"),
            )?);
        }
        let pts: Vec<&Point> = points.iter().filter(|p| p.figure == *fig).collect();
        b.push_str(&points_table(&pts, def.axis.kind.name()));
        let gs = figure_guarantees(rows, *fig, dpsgd);
        let _ = writeln!(
            b,
            "<details><summary>Guarantees of {} ({} rows)</summary>\n{}</details>",
            fig.name(),
            gs.len(),
            guarantees_html(&gs)
        );
    }
    let mut p = prov.clone();
    if let Some(r) = rows.first() {
        p = p.with_measurement(&r.m);
    }
    b.push_str(&provenance_html(
        &p,
        &[
            (
                "runner options",
                serde_json::to_string(&manifest.options).unwrap_or_default(),
            ),
            ("datasets (checksums)", {
                let mut v: Vec<String> = rows
                    .iter()
                    .map(|r| format!("{}: {}", r.dataset, r.m.dataset_checksum))
                    .collect();
                v.sort();
                v.dedup();
                v.join("; ")
            }),
        ],
    ));
    Ok(page("privpred reproduce", &b))
}

/// The guarantees behind a figure's rows: the first repetition of each (calibration, method,
/// setting).
fn figure_guarantees(rows: &[Row], fig: FigureId, dpsgd: &DpSgdConfig) -> Vec<Guarantee> {
    let mut gs = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for r in rows.iter().filter(|r| r.figure == fig) {
        let key = (r.calibration, r.method, r.setting_index);
        if !seen.insert(key) {
            continue;
        }
        let s = Setting {
            epsilon: r.epsilon,
            delta: r.delta,
            budget: r.budget,
            n: None,
            dim: None,
            classes: None,
            lambda: r.m.lambda,
            teachers: r.m.teachers.unwrap_or(0),
        };
        gs.push(guarantee_of(r.method, r.calibration, &s, &r.m, dpsgd));
    }
    gs
}

/// On a budget axis: where the recommendation changes, per calibration — written to `b` as one
/// box each, and returned to mark the plots.
fn budget_decisions(
    b: &mut String,
    rows: &[Row],
    points: &[Point],
    fig: FigureId,
) -> Vec<(CalibrationMode, Decision)> {
    let def = fig.definition();
    let mut decisions: Vec<(CalibrationMode, Decision)> = Vec::new();
    if def.axis.kind == crate::figures::AxisKind::Budget && def.series_epsilons.is_empty() {
        let mut cals: Vec<CalibrationMode> = points
            .iter()
            .filter(|p| p.figure == fig)
            .map(|p| p.calibration)
            .collect();
        cals.sort();
        cals.dedup();
        for cal in cals {
            if let Some(d) = budget_decision(rows, points, fig, cal) {
                let _ = writeln!(
                    b,
                    "<div class=\"rec\"><p>{} calibration. {}</p></div>",
                    escape(&cal.to_string()),
                    escape(&d.text())
                );
                decisions.push((cal, d));
            }
        }
    }
    decisions
}

/// The recommendation along B of one (budget-axis figure, calibration) of a study run.
fn budget_decision(
    rows: &[Row],
    points: &[Point],
    fig: FigureId,
    cal: CalibrationMode,
) -> Option<Decision> {
    let pts: Vec<&Point> = points
        .iter()
        .filter(|p| p.figure == fig && p.calibration == cal)
        .collect();
    let mut idx: Vec<(usize, f64)> = Vec::new();
    for p in &pts {
        if !idx.iter().any(|x| x.0 == p.setting_index) {
            idx.push((p.setting_index, p.x));
        }
    }
    idx.sort_by(|a, b| a.1.total_cmp(&b.1));
    if idx.len() < 2 {
        return None;
    }
    let mut cells = Vec::new();
    for &(si, _) in &idx {
        let mut results = Vec::new();
        let mut setting = None;
        let mut nonprivate = f64::NAN;
        for p in pts.iter().filter(|p| p.setting_index == si) {
            let row = rows.iter().find(|r| {
                r.figure == fig
                    && r.calibration == cal
                    && r.method == p.method
                    && r.setting_index == si
            })?;
            setting.get_or_insert(Setting {
                epsilon: row.epsilon,
                delta: row.delta,
                budget: row.budget,
                n: None,
                dim: None,
                classes: None,
                lambda: None,
                teachers: row.m.teachers.unwrap_or(0),
            });
            nonprivate = p.nonprivate;
            results.push(MethodResult {
                method: p.method,
                mean: p.mean,
                std: p.std,
                example: row.m.clone(),
            });
        }
        let neighbours = results
            .first()
            .map(|r| r.example.neighbours)
            .unwrap_or_default();
        cells.push(compare::Comparison {
            setting: setting?,
            calibration: cal,
            neighbours,
            results,
            skipped: Vec::new(),
            nonprivate,
        });
    }
    let refs: Vec<&compare::Comparison> = cells.iter().collect();
    let xs: Vec<f64> = idx.iter().map(|x| x.1).collect();
    Some(compare::decide(
        compare::Axis::Budget,
        cells[0].setting.epsilon,
        &xs,
        &refs,
    ))
}

fn points_table(pts: &[&Point], x_name: &str) -> String {
    let mut cal_series: Vec<(CalibrationMode, String)> = Vec::new();
    let mut xs: Vec<(usize, f64)> = Vec::new();
    for p in pts {
        if !cal_series.contains(&(p.calibration, p.series.clone())) {
            cal_series.push((p.calibration, p.series.clone()));
        }
        if !xs.iter().any(|x| x.0 == p.setting_index) {
            xs.push((p.setting_index, p.x));
        }
    }
    xs.sort_by_key(|x| x.0);
    let mut s = format!(
        "<table class=\"results\">\n<tr><th>{}</th>{}<th>non-private</th></tr>\n",
        escape(x_name),
        cal_series
            .iter()
            .map(|(c, l)| format!("<th>{} ({})</th>", escape(l), escape(&c.to_string())))
            .collect::<String>()
    );
    // how each line's λ / ν was selected, and what that cost
    s.push_str("<tr class=\"selection\"><th>selection</th>");
    for (c, l) in &cal_series {
        let label = pts
            .iter()
            .find(|p| p.calibration == *c && &p.series == l)
            .map_or("", |p| p.selection.as_str());
        let _ = write!(s, "<td class=\"l small\">selection: {}</td>", escape(label));
    }
    s.push_str("<td></td></tr>\n");
    for (idx, x) in xs {
        let _ = write!(s, "<tr><td>{}</td>", escape(&fmt_num(x)));
        let mut np = f64::NAN;
        for (c, l) in &cal_series {
            match pts
                .iter()
                .find(|p| p.setting_index == idx && p.calibration == *c && &p.series == l)
            {
                Some(p) => {
                    np = p.nonprivate;
                    let _ = write!(s, "<td>{}</td>", pct(p.mean, p.std));
                }
                None => s.push_str("<td>–</td>"),
            }
        }
        let _ = writeln!(s, "<td>{}</td></tr>", pct(np, 0.0).replace(" ± 0.00", ""));
    }
    s.push_str("</table>\n");
    s
}
