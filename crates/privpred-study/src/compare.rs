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
mod decide;
mod grid;
mod grid_syntax;

use grid_syntax::round_sig;

pub use decide::{Axis, Crossover, Decision, decide, fmt_axis, render_grid};
pub use grid::{GridComparison, GridRequest, GridTiming, compare_grid, process_cpu_seconds};
pub use grid_syntax::{GRID_SYNTAX, MAX_GRID_POINTS, parse_budgets, parse_epsilons};

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
        &GridRequest {
            epsilons: &[setting.epsilon],
            delta: setting.delta,
            budgets: &[setting.budget],
            teachers: setting.teachers,
            calibration,
            repetitions,
            seed,
        },
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
    out.push_str("| method | kind | accuracy (%) | noise | λ / ν | selection | guarantee covers | valid |\n|---|---|---|---|---|---|---|---|\n");
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
            "| {} | {kind} | {:.2} ± {:.2} | {} {:.4e} | {hp} | {} | {} | {} |",
            r.method,
            100.0 * r.mean,
            100.0 * r.std,
            m.noise,
            m.noise_param,
            m.selection_text(),
            if r.method.is_private_training() {
                "any number of answers".to_string()
            } else {
                format!("{} answers", s.budget)
            },
            if m.valid_guarantee {
                "yes"
            } else {
                "NO (paper rule, see docs/guarantees.md#errata)"
            }
        );
    }
    for (m, why) in &c.skipped {
        let _ = writeln!(out, "| {m} | – | not applicable: {why} | | | | | |");
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
        s.push_str("Rows marked NO use the paper's calibration where docs/guarantees.md#errata shows it does not deliver the stated guarantee; they are shown for reference only.\n");
    }
    s.push_str(&selection_note(c.results.iter()));
    s
}

/// What the selection of λ / ν cost, per method (the `selection` of its rows), and a warning
/// when a selection is outside the guarantee.
pub fn selection_note<'a>(results: impl Iterator<Item = &'a MethodResult>) -> String {
    let mut per: Vec<(Method, String, bool)> = Vec::new();
    for r in results {
        if !per.iter().any(|(m, _, _)| *m == r.method) {
            let outside = r.example.selection.is_some_and(|s| !s.is_inside());
            per.push((r.method, r.example.selection_text().to_string(), outside));
        }
    }
    let mut s = String::from("Selection of λ / ν: ");
    s.push_str(
        &per.iter()
            .map(|(m, l, _)| format!("{m}: {l}"))
            .collect::<Vec<_>>()
            .join("; "),
    );
    s.push_str(".\n");
    if per.iter().any(|(_, _, o)| *o) {
        s.push_str("Rows whose selection is non-private-holdout chose λ / ν on a hold-out of the private training data without privacy: that choice is outside the stated guarantee (use a public value or `private`).\n");
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Grids of ε and B
// ---------------------------------------------------------------------------------------------

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

/// The recommended method at one point: the highest `score` among the methods with a valid
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
                selection: None,
                selection_label: String::new(),
                loss: privpred_core::Loss::Softmax,
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
            &GridRequest {
                epsilons: &[0.5, 1.0],
                delta: 0.0,
                budgets: &[1, 10, 100],
                teachers: DEFAULT_TEACHERS,
                calibration: CalibrationMode::Corrected,
                repetitions: 3,
                seed: 7,
            },
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
            &GridRequest {
                epsilons: &[1.0],
                delta: 0.0,
                budgets: &[1],
                teachers: 1,
                calibration: CalibrationMode::Corrected,
                repetitions: 0,
                seed: 7,
            },
            &crate::progress::Silent,
        )
        .unwrap_err();
        assert!(err.to_string().contains("--repetitions"));
    }
}
