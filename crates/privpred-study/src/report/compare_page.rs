//! The HTML report of `privpred compare`: the grid's accuracy plots along each axis with the
//! decision's crossovers marked, the per-point tables, the guarantees and the provenance.

use super::*;

fn method_line(method: Method, pts: Vec<(f64, f64, f64)>) -> Line {
    Line {
        label: method.name().to_string(),
        color: method_color(method),
        dashed: false,
        points: pts,
    }
}

fn result_at(c: &compare::Comparison, m: Method) -> Option<&MethodResult> {
    c.results.iter().find(|r| r.method == m)
}

/// At most `k` indices spread evenly over `0..n` (first and last included).
fn spread(n: usize, k: usize) -> Vec<usize> {
    if n <= k {
        return (0..n).collect();
    }
    let mut v: Vec<usize> = (0..k)
        .map(|i| ((i * (n - 1)) as f64 / (k - 1) as f64).round() as usize)
        .collect();
    v.dedup();
    v
}

/// The HTML report of a grid comparison.
pub fn compare_html(
    g: &GridComparison,
    guarantees: &[Guarantee],
    prov: &Provenance,
) -> Result<String> {
    let methods = g.methods();
    let np = g.nonprivate();
    let mut b = intro_html(g, prov, np);
    let plots = plots_html(g, prov, &methods, np)?;
    if !plots.is_empty() {
        b.push_str("<h2>Accuracy</h2>\n");
        b.push_str(&plots);
    }
    b.push_str(&tables_html(g, &methods));
    let _ = writeln!(
        b,
        "<p class=\"small\" id=\"selection\">{}</p>",
        escape(&compare::selection_note(
            g.cells.iter().flat_map(|c| c.results.iter())
        ))
    );
    if let Some(c) = g.cells.first()
        && !c.skipped.is_empty()
    {
        let _ = writeln!(
            b,
            "<p class=\"small\">Not applicable: {}.</p>",
            escape(
                &c.skipped
                    .iter()
                    .map(|(m, why)| format!("{m}: {why}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        );
    }
    b.push_str("<h2>Guarantees</h2>\n<p class=\"small\">Every guarantee behind the numbers above. Private-prediction methods cover B answers; private-training methods release a private model (the same draws serve every B).</p>\n");
    b.push_str(&guarantees_html(guarantees));
    let t = &g.timing;
    let cpu = |c: Option<f64>| c.map_or("n/a".to_string(), |c| format!("{c:.1} s CPU"));
    b.push_str(&provenance_html(
        prov,
        &[
            (
                "time: shared fits (first B of each ε)",
                format!("{:.1} s wall, {}", t.fits_wall_s, cpu(t.fits_cpu_s)),
            ),
            (
                "time: the rest of the grid",
                format!("{:.1} s wall, {}", t.grid_wall_s, cpu(t.grid_cpu_s)),
            ),
        ],
    ));
    Ok(page(&format!("privpred compare — {}", prov.dataset), &b))
}

/// The title line, the `--quick` warning and the recommendation of a compare report.
fn intro_html(g: &GridComparison, prov: &Provenance, np: f64) -> String {
    let mut b = String::new();
    let _ = writeln!(
        b,
        "<h1>Which private method for {}?</h1>\n<p class=\"small\">privpred compare: every applicable method over ε ∈ {{{}}}, δ = {}, B ∈ {{{}}} answers; {} calibration; {} noise draws per point (mean ± std over draws); non-private accuracy <b>{:.2}%</b>.</p>",
        escape(&prov.dataset),
        escape(
            &g.epsilons
                .iter()
                .map(|e| fmt_num(*e))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        escape(&fmt_num(g.delta)),
        escape(
            &g.budgets
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        escape(&g.calibration.to_string()),
        g.repetitions,
        100.0 * np
    );
    if prov.quick {
        b.push_str("<p class=\"warn\">--quick run: subsampled data and few draws; a first look, not the final answer.</p>\n");
    }
    b.push_str("<h2>Recommendation</h2>\n<div class=\"rec\" id=\"recommendation\">\n");
    for i in 0..g.epsilons.len() {
        let _ = writeln!(b, "<p>{}</p>", escape(&g.decision_over_budget(i).text()));
    }
    if g.epsilons.len() > 1 {
        for line in g.epsilon_summaries() {
            let _ = writeln!(b, "<p>{}</p>", escape(&line));
        }
    }
    if g.epsilons.len() * g.budgets.len() == 1 {
        let _ = writeln!(
            b,
            "<pre>{}</pre>",
            escape(&compare::recommend(g.cell(0, 0)))
        );
    }
    let _ = writeln!(
        b,
        "<p class=\"small\">Recommended: the most accurate method with a valid guarantee; a private-training method within {:.0} point of it is preferred, as its model needs no inference budget. Crossovers are interpolated between grid points on a logarithmic axis.</p>\n</div>",
        100.0 * compare::TRAINING_PREFERENCE
    );
    b
}

/// The accuracy plots of a compare report: against B at each ε (two B or more), against ε at
/// up to six spread B (two ε or more); empty when the grid is a single point.
fn plots_html(
    g: &GridComparison,
    prov: &Provenance,
    methods: &[Method],
    np: f64,
) -> Result<String> {
    let mut plots = String::new();
    let q = if prov.quick { " [--quick]" } else { "" };
    if g.budgets.len() >= 2 {
        for (i, &eps) in g.epsilons.iter().enumerate() {
            let d = g.decision_over_budget(i);
            let lines = methods
                .iter()
                .map(|&m| {
                    let pts = (0..g.budgets.len())
                        .filter_map(|j| {
                            result_at(g.cell(i, j), m).map(|r| (g.budgets[j] as f64, r.mean, r.std))
                        })
                        .collect();
                    method_line(m, pts)
                })
                .collect();
            let spec = PlotSpec {
                title: format!(
                    "{}: accuracy vs B, ε = {}, δ = {}{q}",
                    prov.dataset,
                    fmt_num(eps),
                    fmt_num(g.delta)
                ),
                x_label: "inference budget B (answers)".into(),
                log_x: true,
                lines,
                reference: g.budgets.iter().map(|&x| (x as f64, np)).collect(),
                markers: decision_markers(&d),
            };
            plots.push_str(&figure(
                &spec,
                &format!(
                    "Test accuracy against the inference budget B at ε = {} (±1 std over draws shaded; non-private dashed black; the recommendation changes at the vertical marks).",
                    fmt_num(eps)
                ),
                &format!("plot-budget-{i}"),
            )?);
        }
    }
    if g.epsilons.len() >= 2 {
        for j in spread(g.budgets.len(), 6) {
            let d = g.decision_over_epsilon(j);
            let lines = methods
                .iter()
                .map(|&m| {
                    let pts = (0..g.epsilons.len())
                        .filter_map(|i| {
                            result_at(g.cell(i, j), m).map(|r| (g.epsilons[i], r.mean, r.std))
                        })
                        .collect();
                    method_line(m, pts)
                })
                .collect();
            let spec = PlotSpec {
                title: format!(
                    "{}: accuracy vs ε, B = {}, δ = {}{q}",
                    prov.dataset,
                    g.budgets[j],
                    fmt_num(g.delta)
                ),
                x_label: "privacy loss ε".into(),
                log_x: true,
                lines,
                reference: g.epsilons.iter().map(|&x| (x, np)).collect(),
                markers: decision_markers(&d),
            };
            plots.push_str(&figure(
                &spec,
                &format!(
                    "Test accuracy against ε at B = {} answers (±1 std over draws shaded; non-private dashed black).",
                    g.budgets[j]
                ),
                &format!("plot-epsilon-{j}"),
            )?);
        }
    }
    Ok(plots)
}

/// One table per ε of a compare report: every method's accuracy at each B, the recommended
/// method in bold, and the cost of privacy.
fn tables_html(g: &GridComparison, methods: &[Method]) -> String {
    let mut b = String::new();
    b.push_str("<h2>Table</h2>\n<p class=\"small\">Test accuracy (%), mean ± std over draws; the recommended method in bold; cost of privacy = non-private minus recommended accuracy (points).</p>\n");
    for (i, &eps) in g.epsilons.iter().enumerate() {
        let d = g.decision_over_budget(i);
        let _ = writeln!(
            b,
            "<table class=\"results\">\n<caption>ε = {}, δ = {}</caption>\n<tr><th>B</th>{}<th class=\"l\">recommended</th><th>cost of privacy</th></tr>",
            escape(&fmt_num(eps)),
            escape(&fmt_num(g.delta)),
            methods
                .iter()
                .map(|m| format!("<th>{}</th>", escape(&m.to_string())))
                .collect::<String>()
        );
        for (j, &bud) in g.budgets.iter().enumerate() {
            let c = g.cell(i, j);
            let _ = write!(b, "<tr><td>{bud}</td>");
            for m in methods {
                match result_at(c, *m) {
                    Some(r) => {
                        let bold = d.recommended[j] == Some(*m);
                        let txt = format!(
                            "{}{}",
                            pct(r.mean, r.std),
                            if r.example.valid_guarantee {
                                ""
                            } else {
                                " (NO)"
                            }
                        );
                        if bold {
                            let _ = write!(b, "<td><b>{txt}</b></td>");
                        } else {
                            let _ = write!(b, "<td>{txt}</td>");
                        }
                    }
                    None => b.push_str("<td>–</td>"),
                }
            }
            let _ = writeln!(
                b,
                "<td class=\"l\">{}</td><td>{:.2}</td></tr>",
                escape(&d.recommended[j].map_or("–".into(), |m| m.to_string())),
                100.0 * d.cost[j]
            );
        }
        b.push_str("</table>\n");
    }
    b
}
