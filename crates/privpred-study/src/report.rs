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
mod compare_page;
mod study_page;

pub use compare_page::compare_html;
pub use study_page::study_html;

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

/// The neighbouring relation a calibration's guarantee is stated for (docs/guarantees.md#neighbouring-relations), as the report
/// prints it: the calibration's own `neighbours` field.
pub fn neighbouring_relation(calibration: &Calibration) -> &'static str {
    calibration.neighbours().name()
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
    /// How λ and DP-SGD's ν were selected, when known
    /// ([`crate::selection::SelectionOptions::describe`]).
    pub selection: Option<String>,
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
    /// How λ / ν was selected and what that cost ([`crate::selection::label`]).
    pub selection: String,
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
        loss: m.loss,
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
        selection: m.selection_text().to_string(),
    }
}

/// Every distinct guarantee of a grid comparison: one per (method, ε) for private training,
/// one per (method, ε, B) for private prediction. `dpsgd` gives DP-SGD's schedule at a
/// setting's ε.
pub fn compare_guarantees(
    g: &GridComparison,
    dpsgd: &dyn Fn(f64) -> DpSgdConfig,
) -> Vec<Guarantee> {
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
                    &dpsgd(c.setting.epsilon),
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
    if let Some(sel) = &p.selection {
        row("selection of λ / ν", sel);
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
        "<table class=\"guarantees\">\n<tr><th class=\"l\">method</th><th class=\"l\">guarantee</th><th class=\"l\">neighbouring relation</th><th class=\"l\">calibration</th><th class=\"l\">noise</th><th class=\"l\">valid</th><th class=\"l\">selection of λ / ν</th><th class=\"l\">how it is calibrated</th></tr>\n",
    );
    for g in gs {
        let _ = writeln!(
            s,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{} {:.4e}</td><td class=\"l\">{}</td><td class=\"l\">selection: {}</td><td class=\"l small\">{}</td></tr>",
            escape(&g.method.to_string()),
            escape(&g.statement()),
            escape(&g.neighbouring),
            escape(&g.calibration.to_string()),
            escape(&g.noise),
            g.noise_param,
            if g.valid {
                "yes"
            } else {
                "NO (paper rule, see docs/guarantees.md#errata)"
            },
            escape(&g.selection),
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
    use crate::compare::{GridRequest, compare_grid};
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
            &GridRequest {
                epsilons: &[0.5, 1.0, 2.0],
                delta: 0.0,
                budgets: &[1, 10, 100, 1000],
                teachers: 16,
                calibration: CalibrationMode::Corrected,
                repetitions: 3,
                seed: 1,
            },
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
        let gs = compare_guarantees(&g, &|_| DpSgdConfig::default());
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
