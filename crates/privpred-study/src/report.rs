//! One self-contained HTML report for `privpred compare` and `privpred reproduce`: plots as
//! inline SVG (accuracy with ±1 std bands, the non-private reference, crossovers marked), the
//! tables, every guarantee with its neighbouring relation and calibration, and provenance (the
//! dataset's checksum and the exact command that reproduces the file). No script, no style
//! sheet or font from the network: the file reads the same offline, in any browser, years later.
//!
//! Everything that comes from user input (dataset names, paths, the command line) is
//! HTML-escaped with [`escape`]; plot text is escaped by the SVG backend.

use crate::compare::{self, Decision, GridComparison, MethodResult};
use crate::error::{Result, StudyError};
use crate::figures::{FigureId, Setting, fmt_num};
use crate::plot::{Line, PlotSpec, method_color, plot_specs, svg_string};
use crate::results::{Manifest, Measurement, Row, write_atomic};
use crate::summary::{Point, summarize};
use privpred_core::{Calibration, CalibrationMode, Method};
use privpred_linear::dpsgd::DpSgdConfig;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// Escapes text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The neighbouring relation a calibration's guarantee is stated for (SPEC §1), as the report
/// prints it: the calibration's own `neighbours` field.
pub fn neighbouring_relation(calibration: &Calibration) -> &'static str {
    calibration.neighbours.name()
}

/// Quotes a command line for a POSIX shell (arguments with only safe characters stay bare).
pub fn shell_quote(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Where a report's numbers come from.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Provenance {
    /// The exact command line that reproduces the report (shell-quoted).
    pub command: String,
    /// Dataset name as given.
    pub dataset: String,
    /// SHA-256 of the raw data files.
    pub checksum: String,
    /// Dataset labels (substitute, subsampled, ...).
    pub labels: String,
    /// Preprocessing steps.
    pub preprocessing: String,
    /// Steps that look at the private data without privacy accounting.
    pub data_dependent: String,
    /// The bias feature's value v (rows [x·√(1 − v²), v]; 0 = none), when known.
    pub bias: Option<f64>,
    /// Private draws averaged per cross-validated λ, when known.
    pub cv_draws: Option<usize>,
    /// privpred's version.
    pub version: String,
    /// The run seed.
    pub seed: u64,
    /// `--quick` (subsampled data, few repetitions).
    pub quick: bool,
}

impl Provenance {
    /// Fills the data fields from a measurement.
    pub fn with_measurement(mut self, m: &Measurement) -> Self {
        self.checksum = m.dataset_checksum.clone();
        self.labels = m.dataset_labels.clone();
        self.preprocessing = m.preprocessing.clone();
        self.data_dependent = m.data_dependent_steps.clone();
        self.bias = Some(m.bias);
        self.cv_draws = self.cv_draws.or(m.cv_draws);
        self
    }
}

/// One guarantee as the report states it.
#[derive(Debug, Clone, Serialize)]
pub struct Guarantee {
    /// The method.
    pub method: Method,
    /// ε.
    pub epsilon: f64,
    /// δ.
    pub delta: f64,
    /// The answers it covers (None: any number, a private-training method).
    pub budget: Option<u64>,
    /// Calibration mode.
    pub calibration: CalibrationMode,
    /// Neighbouring relation (see [`neighbouring_relation`]).
    pub neighbouring: String,
    /// Noise distribution.
    pub noise: String,
    /// Its parameter (β or σ).
    pub noise_param: f64,
    /// Whether the calibration delivers the stated guarantee.
    pub valid: bool,
    /// The calibration's notes: formula and theorem used.
    pub notes: Vec<String>,
}

impl Guarantee {
    /// "(ε = 1, δ = 0)-DP for 100 answers".
    pub fn statement(&self) -> String {
        format!(
            "(ε = {}, δ = {})-DP {}",
            fmt_num(self.epsilon),
            fmt_num(self.delta),
            match self.budget {
                Some(1) => "for 1 answer".into(),
                Some(b) => format!("for {b} answers"),
                None => "for any number of answers (the released model is private)".into(),
            }
        )
    }
}

/// The guarantee of `method` at `setting`, recalibrated from what the run recorded (N, C, λ)
/// so that the formula and theorem of the calibration can be shown.
pub fn guarantee_of(
    method: Method,
    mode: CalibrationMode,
    setting: &Setting,
    m: &Measurement,
    dpsgd: &DpSgdConfig,
) -> Guarantee {
    let cal = crate::linear::calibrate(&crate::linear::CalibrationInput {
        method,
        mode,
        epsilon: setting.epsilon,
        delta: setting.delta,
        budget: setting.budget,
        n: m.n_train,
        classes: m.classes,
        lambda: m.lambda,
        dpsgd,
        neighbours: m.neighbours,
    });
    let (neighbouring, notes) = match &cal {
        Ok(c) => (neighbouring_relation(c).to_string(), c.notes.clone()),
        Err(e) => (
            "unknown (recalibration failed)".to_string(),
            vec![format!("recalibration failed: {e}")],
        ),
    };
    Guarantee {
        method,
        epsilon: setting.epsilon,
        delta: setting.delta,
        budget: (!method.is_private_training()).then_some(setting.budget),
        calibration: mode,
        neighbouring,
        noise: m.noise.clone(),
        noise_param: m.noise_param,
        valid: m.valid_guarantee,
        notes,
    }
}

/// Every distinct guarantee of a grid comparison: one per (method, ε) for private training,
/// one per (method, ε, B) for private prediction.
pub fn compare_guarantees(g: &GridComparison, dpsgd: &DpSgdConfig) -> Vec<Guarantee> {
    let mut out = Vec::new();
    for (i, _) in g.epsilons.iter().enumerate() {
        for (j, _) in g.budgets.iter().enumerate() {
            let c = g.cell(i, j);
            for r in &c.results {
                if r.method.is_private_training() && j > 0 {
                    continue;
                }
                out.push(guarantee_of(
                    r.method,
                    g.calibration,
                    &c.setting,
                    &r.example,
                    dpsgd,
                ));
            }
        }
    }
    out
}

const CSS: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.8em}
.rec{background:#eef6ee;border-left:5px solid #2c7c2c;padding:.6em 1em;margin:1em 0}
.warn{background:#fff4e0;border-left:5px solid #d08000;padding:.6em 1em}
table{border-collapse:collapse;margin:.8em 0;font-size:.92em}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right;vertical-align:top}
th{background:#f3f3f3}td.l,th.l{text-align:left}td.l{overflow-wrap:anywhere}table.prov{width:100%}tr.best td{font-weight:600}
figure{margin:1em 0}figure svg{max-width:100%;height:auto;border:1px solid #ddd}figcaption{font-size:.9em;color:#555}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
details{margin:.6em 0}.small{font-size:.85em;color:#555}";

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"privpred {}\">\n<title>{}</title>\n<style>\n{CSS}\n</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION"),
        escape(title)
    )
}

/// An inline `<svg>` element of a plot (the XML prologue dropped), in a `<figure>`.
fn figure(spec: &PlotSpec, caption: &str, id: &str) -> Result<String> {
    let svg = svg_string(spec, (960, 600))?;
    let start = svg.find("<svg").unwrap_or(0);
    Ok(format!(
        "<figure class=\"plot\" id=\"{}\">\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
        escape(id),
        &svg[start..],
        escape(caption)
    ))
}

fn pct(mean: f64, std: f64) -> String {
    if mean.is_finite() {
        format!("{:.2} ± {:.2}", 100.0 * mean, 100.0 * std)
    } else {
        "–".into()
    }
}

fn provenance_html(p: &Provenance, extra: &[(&str, String)]) -> String {
    let mut s = String::from("<h2>Provenance</h2>\n<table class=\"prov\">\n");
    let mut row = |k: &str, v: &str| {
        let _ = writeln!(
            s,
            "<tr><th class=\"l\">{}</th><td class=\"l\">{}</td></tr>",
            escape(k),
            escape(v)
        );
    };
    row("dataset", &p.dataset);
    row(
        "dataset checksum (SHA-256 of the raw files)",
        if p.checksum.is_empty() {
            "(not recorded)"
        } else {
            &p.checksum
        },
    );
    if !p.labels.is_empty() {
        row("dataset labels", &p.labels);
    }
    row("preprocessing", &p.preprocessing);
    if let Some(b) = p.bias {
        row(
            "bias feature v (rows [x·√(1 − v²), v]; 0 = none)",
            &b.to_string(),
        );
    }
    if let Some(k) = p.cv_draws {
        row(
            "cross-validation: private draws averaged per λ",
            &k.to_string(),
        );
    }
    if !p.data_dependent.is_empty() {
        row(
            "data-dependent steps (privacy cost not accounted)",
            &p.data_dependent,
        );
    }
    row("seed", &p.seed.to_string());
    row(
        "scale",
        if p.quick {
            "--quick: subsampled data, few repetitions (not the paper's setting)"
        } else {
            "full"
        },
    );
    row("privpred version", &p.version);
    for (k, v) in extra {
        row(k, v);
    }
    s.push_str("</table>\n<p>The exact command that reproduces this report (same seed, same numbers):</p>\n");
    let _ = writeln!(s, "<pre id=\"command\">{}</pre>", escape(&p.command));
    s
}

fn guarantees_html(gs: &[Guarantee]) -> String {
    let mut s = String::from(
        "<table class=\"guarantees\">\n<tr><th class=\"l\">method</th><th class=\"l\">guarantee</th><th class=\"l\">neighbouring relation</th><th class=\"l\">calibration</th><th class=\"l\">noise</th><th class=\"l\">valid</th><th class=\"l\">how it is calibrated</th></tr>\n",
    );
    for g in gs {
        let _ = writeln!(
            s,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{} {:.4e}</td><td class=\"l\">{}</td><td class=\"l small\">{}</td></tr>",
            escape(&g.method.to_string()),
            escape(&g.statement()),
            escape(&g.neighbouring),
            escape(&g.calibration.to_string()),
            escape(&g.noise),
            g.noise_param,
            if g.valid {
                "yes"
            } else {
                "NO (paper rule, SPEC §4)"
            },
            g.notes
                .iter()
                .map(|n| escape(n))
                .collect::<Vec<_>>()
                .join("<br>")
        );
    }
    s.push_str("</table>\n");
    s
}

fn decision_markers(d: &Decision) -> Vec<(f64, String)> {
    d.crossovers
        .iter()
        .map(|c| {
            (
                c.at,
                format!(" {} ≈ {}", d.axis.symbol(), compare::fmt_axis(d.axis, c.at)),
            )
        })
        .collect()
}

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
    // plots
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
    if !plots.is_empty() {
        b.push_str("<h2>Accuracy</h2>\n");
        b.push_str(&plots);
    }
    // tables
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
            for m in &methods {
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
        // on a budget axis: where the recommendation changes, per calibration
        let mut decisions: Vec<(CalibrationMode, Decision)> = Vec::new();
        if def.axis.kind == crate::figures::AxisKind::Budget && def.series_epsilons.is_empty() {
            let mut cals: Vec<CalibrationMode> = points
                .iter()
                .filter(|p| p.figure == *fig)
                .map(|p| p.calibration)
                .collect();
            cals.sort();
            cals.dedup();
            for cal in cals {
                if let Some(d) = budget_decision(rows, &points, *fig, cal) {
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
        // guarantees: the first repetition of each (calibration, method, setting)
        let mut gs = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for r in rows.iter().filter(|r| r.figure == *fig) {
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

/// Writes a report atomically (temporary file + rename).
pub fn write_report(path: &Path, html: &str) -> Result<()> {
    if path.as_os_str().is_empty() {
        return Err(StudyError::invalid("--report", "(empty)", "a file path"));
    }
    write_atomic(path, html.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::compare_grid;
    use crate::progress::Silent;
    use crate::sweep::SyntheticRunner;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(
            shell_quote(&[
                "privpred".into(),
                "--dataset".into(),
                "csv:/a b/it's.csv".into()
            ]),
            r"privpred --dataset 'csv:/a b/it'\''s.csv'"
        );
    }

    fn grid() -> GridComparison {
        compare_grid(
            &SyntheticRunner::new(),
            &[0.5, 1.0, 2.0],
            0.0,
            &[1, 10, 100, 1000],
            16,
            CalibrationMode::Corrected,
            3,
            1,
            &Silent,
        )
        .unwrap()
    }

    /// The report is one self-contained page: inline SVG plots, no script, nothing fetched, and
    /// user input (the dataset name, the command) escaped wherever it appears.
    #[test]
    fn compare_report_is_self_contained_and_escaped() {
        let g = grid();
        let evil = "<script>alert(1)</script>\"'&";
        let prov = Provenance {
            command: format!("privpred compare --dataset '{evil}'"),
            dataset: evil.into(),
            checksum: "abc123".into(),
            version: "0.1.0".into(),
            ..Provenance::default()
        };
        let gs = compare_guarantees(&g, &DpSgdConfig::default());
        // private training once per ε, private prediction once per (ε, B)
        assert_eq!(gs.len(), 3 * 2 + 3 * 4 * 2);
        assert!(
            gs.iter()
                .all(|g| g.neighbouring == "replace-one" && !g.notes.is_empty())
        );
        let html = compare_html(&g, &gs, &prov).unwrap();
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(!html.to_lowercase().contains("<script"), "unescaped input");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;"));
        for forbidden in ["src=", "<link", "@import", "url(", "https://", "<iframe"] {
            assert!(!html.contains(forbidden), "{forbidden} in the report");
        }
        // 3 plots against B (one per ε) and 4 against ε (one per B)
        assert_eq!(html.matches("<svg").count(), 7);
        assert_eq!(html.matches("<figure class=\"plot\"").count(), 7);
        for needle in [
            "id=\"recommendation\"",
            "Guarantees",
            "replace-one",
            "abc123",
            "id=\"command\"",
            "cost of privacy",
            "time: shared fits",
        ] {
            assert!(html.contains(needle), "{needle} missing");
        }
    }

    #[test]
    fn study_report_has_every_figure() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = crate::sweep::SweepConfig {
            figures: vec![FigureId::Fig1a, FigureId::Fig2a],
            calibrations: vec![CalibrationMode::Paper, CalibrationMode::Tight],
            repetitions: 2,
            seed: 3,
            quick: true,
            dataset: None,
            shard: crate::units::Shard::ALL,
            resume: false,
            out: dir.path().to_path_buf(),
        };
        crate::sweep::run(&cfg, &SyntheticRunner::new(), &Silent).unwrap();
        let rows = crate::results::canonical(crate::results::read_dir_rows(dir.path()).unwrap());
        let manifest = Manifest::read(dir.path()).unwrap();
        let prov = Provenance {
            command: "privpred reproduce fig1a".into(),
            dataset: "synthetic".into(),
            quick: true,
            ..Provenance::default()
        };
        let html = study_html(&rows, &manifest, &prov, &DpSgdConfig::default()).unwrap();
        // per figure: paper, tight and the overlay
        assert_eq!(html.matches("<svg").count(), 6);
        assert!(html.contains("id=\"fig1a\"") && html.contains("id=\"fig2a\""));
        // fig2a (a budget axis): the recommendation along B, per calibration
        assert_eq!(html.matches("<div class=\"rec\">").count(), 2, "{html}");
        assert!(html.contains("paper calibration. At ε = 1"));
        assert!(html.contains("--quick run"));
        assert!(!html.to_lowercase().contains("<script"));
        assert!(html.contains("replace-one"));
    }
}
