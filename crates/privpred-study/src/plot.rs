//! Plots of the study with plotters, in PNG and SVG: accuracy vs the x-axis, one line per
//! method, ±1 std bands, logarithmic axes where the paper's grid is logarithmic, and the
//! non-private accuracy as a dashed reference line. Text is drawn with an embedded copy of
//! DejaVu Sans (see `assets/LICENSE-DejaVu.txt`), so no system fonts are needed.

use crate::error::{Result, StudyError};
use crate::figures::{FigureId, fmt_num};
use crate::summary::Point;
use plotters::coord::Shift;
use plotters::prelude::*;
use privpred_core::{CalibrationMode, Method};
use std::path::{Path, PathBuf};
use std::sync::Once;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

fn register_font() {
    REGISTER.call_once(|| {
        // The embedded font is a valid TTF; a failure would only make text invisible.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// One line of a plot.
#[derive(Debug, Clone)]
pub struct Line {
    /// Legend label.
    pub label: String,
    /// Palette index.
    pub color: usize,
    /// Dashed (the second calibration of an overlay).
    pub dashed: bool,
    /// (x, mean, std) with accuracies as fractions.
    pub points: Vec<(f64, f64, f64)>,
}

/// Everything a plot shows.
#[derive(Debug, Clone)]
pub struct PlotSpec {
    /// Title.
    pub title: String,
    /// x-axis label.
    pub x_label: String,
    /// Logarithmic x-axis.
    pub log_x: bool,
    /// The curves.
    pub lines: Vec<Line>,
    /// The non-private reference (x, accuracy).
    pub reference: Vec<(f64, f64)>,
    /// Vertical marks (x, label): where the recommended method changes (`compare`).
    pub markers: Vec<(f64, String)>,
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// The palette index of a method (the same colour in every plot).
pub fn method_color(m: Method) -> usize {
    Method::ALL.iter().position(|x| *x == m).unwrap_or(7)
}

fn tx(log: bool, x: f64) -> f64 {
    if log { x.log10() } else { x }
}

/// A tick label with at most 4 significant digits (undoes the rounding of 10^log10(x)).
fn tick_label(v: f64) -> String {
    format!("{v:.3e}")
        .parse::<f64>()
        .map_or_else(|_| fmt_num(v), fmt_num)
}

fn ticks(log: bool, lo: f64, hi: f64, grid: &[f64]) -> Vec<f64> {
    if !log {
        return grid.to_vec();
    }
    let mut t = Vec::new();
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let span = b - a;
    for k in a..=b {
        let mults: &[f64] = if span <= 2 { &[1.0, 2.0, 5.0] } else { &[1.0] };
        for &m in mults {
            let v = m * 10f64.powi(k);
            if v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9) {
                t.push(v);
            }
        }
    }
    if t.len() < 2 {
        return grid.to_vec();
    }
    t
}

/// A linear f64 axis whose tick marks are exactly the given key points (plotters'
/// `WithKeyPoints` over f64 lacks a default formatter).
struct KeyAxis {
    lo: f64,
    hi: f64,
    keys: Vec<f64>,
}

impl plotters::coord::ranged1d::Ranged for KeyAxis {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let r = (v - self.lo) / (self.hi - self.lo);
        limit.0 + (r * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.max_num_points() == 0 {
            Vec::new()
        } else {
            self.keys.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// The plot area a spec needs: the transformed x range (`tlo..thi`, padded by `pad` on each
/// side), the x ticks at the grid's key points and the bottom of the y axis (`y0`, in %).
struct Frame {
    tlo: f64,
    thi: f64,
    pad: f64,
    keys: Vec<f64>,
    y0: f64,
}

impl Frame {
    /// The x range of every curve point (1..10 when there is none), ticks from [`ticks`], and
    /// y from the lowest mean − std rounded down to 10 %.
    fn of(spec: &PlotSpec) -> Frame {
        let xs: Vec<f64> = spec
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.0))
            .collect();
        let (mut lo, mut hi) = xs
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            });
        if !lo.is_finite() || !hi.is_finite() {
            lo = 1.0;
            hi = 10.0;
        }
        if hi <= lo {
            hi = lo * 2.0 + 1.0;
        }
        let mut grid: Vec<f64> = xs.clone();
        grid.sort_by(f64::total_cmp);
        grid.dedup();
        let keys: Vec<f64> = ticks(spec.log_x, lo, hi, &grid)
            .into_iter()
            .map(|v| tx(spec.log_x, v))
            .collect();
        let (tlo, thi) = (tx(spec.log_x, lo), tx(spec.log_x, hi));
        let pad = (thi - tlo) * 0.02;
        let ymin = spec
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1 - p.2))
            .fold(1.0f64, f64::min)
            .clamp(0.0, 1.0);
        let y0 = ((ymin * 10.0).floor() / 10.0 * 100.0).max(0.0);
        Frame {
            tlo,
            thi,
            pad,
            keys,
            y0,
        }
    }
}

/// The chart every plot draws on: key-point x axis (transformed), accuracy in % on y.
type Chart<'a, DB> =
    ChartContext<'a, DB, Cartesian2d<KeyAxis, plotters::coord::types::RangedCoordf64>>;

/// The caption's font size: 20, or smaller (not below 11) when the title would be wider than
/// the plot less its margins (fig6b's title is ≈ 1,000 px at 20 on the 960 px plot).
fn caption_size<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, title: &str) -> f64 {
    let room = root.dim_in_pixel().0.saturating_sub(2 * 12 + 8) as f64;
    let mut size = 20.0;
    while size > 11.0 {
        match root.estimate_text_size(title, &("sans-serif", size).into_text_style(root)) {
            Ok((w, _)) if (w as f64) > room => size -= 1.0,
            _ => break,
        }
    }
    size
}

/// Draws the plot: the frame and mesh, each curve ([`draw_line`]), the non-private reference
/// ([`draw_reference`]), the markers ([`draw_markers`]) and the legend in the emptiest corner.
fn render<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    spec: &PlotSpec,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let Frame {
        tlo,
        thi,
        pad,
        keys,
        y0,
    } = Frame::of(spec);
    let mut chart = ChartBuilder::on(root)
        .caption(&spec.title, ("sans-serif", caption_size(root, &spec.title)))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d(
            KeyAxis {
                lo: tlo - pad,
                hi: thi + pad,
                keys,
            },
            y0..100.0,
        )
        .map_err(e)?;
    let log = spec.log_x;
    chart
        .configure_mesh()
        .x_desc(spec.x_label.as_str())
        .y_desc("test accuracy (%)")
        .x_label_formatter(&|v| tick_label(if log { 10f64.powf(*v) } else { *v }))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(e)?;
    for l in &spec.lines {
        draw_line(&mut chart, l, log, y0).map_err(e)?;
    }
    draw_reference(&mut chart, spec, tlo, thi).map_err(e)?;
    draw_markers(&mut chart, spec, y0).map_err(e)?;
    chart
        .configure_series_labels()
        .position(legend_corner(spec, tlo, thi, y0))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.5))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

/// One curve: its ±1 std band (clipped to [y0, 100]), the line (dashed for the second
/// calibration of an overlay) with its legend entry, and a dot per point.
fn draw_line<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    l: &Line,
    log: bool,
    y0: f64,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let c = PALETTE[l.color % PALETTE.len()];
    if l.points.len() >= 2 {
        let mut band: Vec<(f64, f64)> = l
            .points
            .iter()
            .map(|p| (tx(log, p.0), (100.0 * (p.1 + p.2)).min(100.0)))
            .collect();
        band.extend(
            l.points
                .iter()
                .rev()
                .map(|p| (tx(log, p.0), (100.0 * (p.1 - p.2)).max(y0))),
        );
        chart.draw_series(std::iter::once(Polygon::new(band, c.mix(0.15).filled())))?;
    }
    let pts: Vec<(f64, f64)> = l
        .points
        .iter()
        .map(|p| (tx(log, p.0), 100.0 * p.1))
        .collect();
    let style = c.stroke_width(2);
    let anno = if l.dashed {
        chart.draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))?
    } else {
        chart.draw_series(LineSeries::new(pts.clone(), style))?
    };
    let dashed = l.dashed;
    anno.label(l.label.as_str()).legend(move |(x, y)| {
        if dashed {
            PathElement::new(vec![(x, y), (x + 8, y)], c.stroke_width(2))
        } else {
            PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
        }
    });
    chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
    Ok(())
}

/// The non-private reference as a thin dashed black line (a single point spans the whole
/// x range), if the spec has one.
fn draw_reference<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    spec: &PlotSpec,
    tlo: f64,
    thi: f64,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    if spec.reference.is_empty() {
        return Ok(());
    }
    let mut r: Vec<(f64, f64)> = spec
        .reference
        .iter()
        .map(|p| (tx(spec.log_x, p.0), 100.0 * p.1))
        .collect();
    r.sort_by(|a, b| a.0.total_cmp(&b.0));
    if r.len() == 1 {
        r.push((thi, r[0].1));
        r[0].0 = tlo;
    }
    chart
        .draw_series(DashedLineSeries::new(r, 6, 4, BLACK.stroke_width(1)))?
        .label("non-private")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(1)));
    Ok(())
}

/// The vertical markers (where `compare`'s recommendation changes): a dashed grey line from
/// y0 to 100 % with its label near the top.
fn draw_markers<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    spec: &PlotSpec,
    y0: f64,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    for (x, label) in &spec.markers {
        let t = tx(spec.log_x, *x);
        if !t.is_finite() {
            continue;
        }
        chart.draw_series(DashedLineSeries::new(
            vec![(t, y0), (t, 100.0)],
            4,
            4,
            RGBColor(90, 90, 90).stroke_width(2),
        ))?;
        chart.draw_series(std::iter::once(Text::new(
            label.clone(),
            (t, 100.0 - (100.0 - y0) * 0.04),
            ("sans-serif", 14).into_font().color(&BLACK),
        )))?;
    }
    Ok(())
}

/// The corner of the plot area with the fewest curve points (and reference points) in it.
fn legend_corner(spec: &PlotSpec, tlo: f64, thi: f64, y0: f64) -> SeriesLabelPosition {
    let log = spec.log_x;
    let norm = |x: f64, y: f64| {
        (
            (tx(log, x) - tlo) / (thi - tlo).max(1e-12),
            (100.0 * y - y0) / (100.0 - y0).max(1e-12),
        )
    };
    let mut pts: Vec<(f64, f64)> = spec
        .lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| norm(p.0, p.1)))
        .collect();
    pts.extend(spec.reference.iter().map(|p| norm(p.0, p.1)));
    let corners = [
        (SeriesLabelPosition::LowerRight, 0.6, 1.0, 0.0, 0.45),
        (SeriesLabelPosition::UpperLeft, 0.0, 0.4, 0.55, 1.0),
        (SeriesLabelPosition::LowerLeft, 0.0, 0.4, 0.0, 0.45),
        (SeriesLabelPosition::UpperRight, 0.6, 1.0, 0.55, 1.0),
    ];
    let mut best = (usize::MAX, SeriesLabelPosition::LowerRight);
    for (pos, x0, x1, ya, yb) in corners {
        let c = pts
            .iter()
            .filter(|(x, y)| *x >= x0 && *x <= x1 && *y >= ya && *y <= yb)
            .count();
        if c < best.0 {
            best = (c, pos);
        }
    }
    best.1
}

/// Renders a plot as an SVG document in memory (for inline use in an HTML report).
pub fn svg_string(spec: &PlotSpec, size: (u32, u32)) -> Result<String> {
    register_font();
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        render(&root, spec).map_err(|m| StudyError::Plot {
            path: PathBuf::from("<inline svg>"),
            message: m,
        })?;
    }
    Ok(out)
}

/// Renders a plot to `stem.png` and `stem.svg`; returns both paths.
pub fn write_plot(stem: &Path, spec: &PlotSpec) -> Result<Vec<PathBuf>> {
    register_font();
    let png = stem.with_extension("png");
    let svg = stem.with_extension("svg");
    for (path, is_png) in [(&png, true), (&svg, false)] {
        let tmp = path.with_extension(if is_png { "tmp.png" } else { "tmp.svg" });
        let res = if is_png {
            let root = BitMapBackend::new(&tmp, (960, 620)).into_drawing_area();
            render(&root, spec)
        } else {
            let root = SVGBackend::new(&tmp, (960, 620)).into_drawing_area();
            render(&root, spec)
        };
        res.map_err(|m| StudyError::Plot {
            path: path.clone(),
            message: m,
        })?;
        std::fs::rename(&tmp, path).map_err(|e| StudyError::io(path, e))?;
    }
    Ok(vec![png, svg])
}

fn lines_for(points: &[&Point], dashed: bool, suffix: &str, by_series: bool) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    let mut series: Vec<(String, Method)> = Vec::new();
    for p in points {
        if !series.iter().any(|s| s.0 == p.series) {
            series.push((p.series.clone(), p.method));
        }
    }
    for (i, (s, m)) in series.iter().enumerate() {
        let mut pts: Vec<(f64, f64, f64)> = points
            .iter()
            .filter(|p| &p.series == s)
            .map(|p| (p.x, p.mean, p.std))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        out.push(Line {
            label: format!("{s}{suffix}"),
            color: if by_series { i } else { method_color(*m) },
            dashed,
            points: pts,
        });
    }
    out
}

fn reference(points: &[&Point]) -> Vec<(f64, f64)> {
    let mut xs: Vec<f64> = points.iter().map(|p| p.x).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let vals: Vec<(f64, f64)> = xs
        .iter()
        .filter_map(|&x| {
            let v: Vec<f64> = points
                .iter()
                .filter(|p| p.x == x && p.nonprivate.is_finite())
                .map(|p| p.nonprivate)
                .collect();
            (!v.is_empty()).then(|| (x, v.iter().sum::<f64>() / v.len() as f64))
        })
        .collect();
    vals
}

/// Writes `{fig}-{calibration}.{png,svg}` for every (figure, calibration) in `points`, and
/// `{fig}-paper-vs-tight.{png,svg}` where both modes are present.
pub fn plot_all(dir: &Path, points: &[Point], quick: bool) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for (stem, spec) in plot_specs(points, quick) {
        out.extend(write_plot(&dir.join(stem), &spec)?);
    }
    Ok(out)
}

/// The plots of [`plot_all`] as (file stem, spec), in the same order: one per (figure,
/// calibration) and a paper-vs-tight overlay where both modes are present.
pub fn plot_specs(points: &[Point], quick: bool) -> Vec<(String, PlotSpec)> {
    let mut out = Vec::new();
    let q = if quick {
        " [--quick: subsampled, few repetitions]"
    } else {
        ""
    };
    let mut figs: Vec<FigureId> = points.iter().map(|p| p.figure).collect();
    figs.dedup();
    for fig in figs {
        let def = fig.definition();
        let by_series = !def.series_epsilons.is_empty();
        let mut cals: Vec<CalibrationMode> = points
            .iter()
            .filter(|p| p.figure == fig)
            .map(|p| p.calibration)
            .collect();
        cals.sort();
        cals.dedup();
        for &cal in &cals {
            let pts: Vec<&Point> = points
                .iter()
                .filter(|p| p.figure == fig && p.calibration == cal)
                .collect();
            let spec = PlotSpec {
                title: format!(
                    "{fig}: {} — {cal} calibration, {} neighbours{q}",
                    def.title,
                    pts.first()
                        .map_or(privpred_core::Neighbours::ReplaceOne, |p| p.neighbours)
                ),
                x_label: def.axis.kind.label().to_string(),
                log_x: def.axis.log,
                lines: lines_for(&pts, false, "", by_series),
                reference: reference(&pts),
                markers: Vec::new(),
            };
            out.push((format!("{fig}-{cal}"), spec));
        }
        if cals.contains(&CalibrationMode::Paper) && cals.contains(&CalibrationMode::Tight) {
            let paper: Vec<&Point> = points
                .iter()
                .filter(|p| p.figure == fig && p.calibration == CalibrationMode::Paper)
                .collect();
            let tight: Vec<&Point> = points
                .iter()
                .filter(|p| p.figure == fig && p.calibration == CalibrationMode::Tight)
                .collect();
            let mut lines = lines_for(&paper, false, " (paper)", by_series);
            lines.extend(lines_for(&tight, true, " (tight)", by_series));
            let spec = PlotSpec {
                title: format!(
                    "{fig}: {} — paper (solid) vs tight (dashed), {} neighbours{q}",
                    def.title,
                    paper
                        .first()
                        .map_or(privpred_core::Neighbours::ReplaceOne, |p| p.neighbours)
                ),
                x_label: def.axis.kind.label().to_string(),
                log_x: def.axis.log,
                lines,
                reference: reference(&paper),
                markers: Vec::new(),
            };
            out.push((format!("{fig}-paper-vs-tight"), spec));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A title that fits keeps the 20 px caption; fig6b's, ≈ 1,000 px at 20 px on the 960 px
    /// plot, is set smaller until it fits inside the margins (it was cut at both ends).
    #[test]
    fn long_titles_shrink_to_fit_the_plot() {
        register_font();
        let mut out = String::new();
        let root = SVGBackend::with_string(&mut out, (960, 620)).into_drawing_area();
        let short = "fig1a: MNIST, B = 100, δ = 0 — paper (solid) vs tight (dashed), replace-one neighbours";
        let long = "fig6b: MNIST, subsample-and-aggregate, δ = 0, B = 100 — paper (solid) vs tight (dashed), replace-one neighbours";
        assert_eq!(caption_size(&root, short), 20.0);
        let at20 = root
            .estimate_text_size(long, &("sans-serif", 20.0).into_text_style(&root))
            .unwrap()
            .0;
        assert!(
            at20 > 960 - 32,
            "the long title fits at 20 px ({at20}): test is vacuous"
        );
        let s = caption_size(&root, long);
        assert!((11.0..20.0).contains(&s), "{s}");
        let w = root
            .estimate_text_size(long, &("sans-serif", s).into_text_style(&root))
            .unwrap()
            .0;
        assert!(w <= 960 - 32, "{w} px at {s}");
    }
}
