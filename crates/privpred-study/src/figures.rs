//! The figures of the study (docs/study.md) as data: dataset, x-axis with its grid, the fixed
//! parameters and the methods of each figure.

use crate::error::{Result, StudyError};
use privpred_core::Method;
use serde::{Deserialize, Serialize};

/// A figure of the paper.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum FigureId {
    /// Accuracy vs ε, B = 100, δ = 0.
    Fig1a,
    /// Accuracy vs ε, B = 100, δ = 1e-5.
    Fig1b,
    /// Accuracy vs B, ε = 1, δ = 0.
    Fig2a,
    /// Accuracy vs B, ε = 1, δ = 1e-5.
    Fig2b,
    /// Accuracy vs δ, ε = 1, B = 100.
    Fig3,
    /// Accuracy vs N on MNIST-1M (substitute), ε = 1, δ = 0, B = 100.
    Fig4,
    /// Accuracy vs D (PCA), ε = 1, δ = 0, B = 100.
    Fig5a,
    /// Accuracy vs C (first C digits), ε = 1, δ = 0, B = 100.
    Fig5b,
    /// Loss perturbation: accuracy vs λ for ε ∈ {0.1, 1, 10}.
    Fig6a,
    /// Subsample-and-aggregate: accuracy vs T for ε ∈ {0.1, 1, 10}.
    Fig6b,
    /// CIFAR-10, ResNet-20: accuracy vs ε, B = 10, δ = 1e-5 (needs `--features nn`).
    Fig7a,
    /// CIFAR-10, ResNet-20: accuracy vs B, ε = 1, δ = 1e-5 (needs `--features nn`).
    Fig7b,
}

impl FigureId {
    /// Every figure, in the paper's order.
    pub const ALL: [FigureId; 12] = [
        FigureId::Fig1a,
        FigureId::Fig1b,
        FigureId::Fig2a,
        FigureId::Fig2b,
        FigureId::Fig3,
        FigureId::Fig4,
        FigureId::Fig5a,
        FigureId::Fig5b,
        FigureId::Fig6a,
        FigureId::Fig6b,
        FigureId::Fig7a,
        FigureId::Fig7b,
    ];

    /// The linear-model figures (everything `reproduce all` runs without the `nn` feature).
    pub const LINEAR: [FigureId; 10] = [
        FigureId::Fig1a,
        FigureId::Fig1b,
        FigureId::Fig2a,
        FigureId::Fig2b,
        FigureId::Fig3,
        FigureId::Fig4,
        FigureId::Fig5a,
        FigureId::Fig5b,
        FigureId::Fig6a,
        FigureId::Fig6b,
    ];

    /// The short name (`fig1a`).
    pub fn name(self) -> &'static str {
        match self {
            FigureId::Fig1a => "fig1a",
            FigureId::Fig1b => "fig1b",
            FigureId::Fig2a => "fig2a",
            FigureId::Fig2b => "fig2b",
            FigureId::Fig3 => "fig3",
            FigureId::Fig4 => "fig4",
            FigureId::Fig5a => "fig5a",
            FigureId::Fig5b => "fig5b",
            FigureId::Fig6a => "fig6a",
            FigureId::Fig6b => "fig6b",
            FigureId::Fig7a => "fig7a",
            FigureId::Fig7b => "fig7b",
        }
    }

    /// Parses `fig1a` etc.
    pub fn parse(s: &str) -> Result<Self> {
        FigureId::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                StudyError::invalid(
                    "figure",
                    s,
                    format!(
                        "one of {}",
                        FigureId::ALL
                            .iter()
                            .map(|f| f.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })
    }

    /// Whether the figure needs the ResNet-20 models of the `nn` feature.
    pub fn needs_nn(self) -> bool {
        matches!(self, FigureId::Fig7a | FigureId::Fig7b)
    }

    /// The figure's definition.
    pub fn definition(self) -> Figure {
        definition(self)
    }
}

impl std::fmt::Display for FigureId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The quantity on a figure's x-axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AxisKind {
    /// Privacy loss ε.
    Epsilon,
    /// Inference budget B.
    Budget,
    /// Privacy failure probability δ.
    Delta,
    /// Training-set size N.
    TrainSize,
    /// Input dimension D after PCA.
    Dimension,
    /// Number of classes C.
    Classes,
    /// L2 regularisation λ.
    Lambda,
    /// Number of teachers T.
    Teachers,
}

impl AxisKind {
    /// The column name in result files.
    pub fn name(self) -> &'static str {
        match self {
            AxisKind::Epsilon => "epsilon",
            AxisKind::Budget => "budget",
            AxisKind::Delta => "delta",
            AxisKind::TrainSize => "n",
            AxisKind::Dimension => "d",
            AxisKind::Classes => "c",
            AxisKind::Lambda => "lambda",
            AxisKind::Teachers => "teachers",
        }
    }

    /// The axis label on plots.
    pub fn label(self) -> &'static str {
        match self {
            AxisKind::Epsilon => "privacy loss ε",
            AxisKind::Budget => "inference budget B",
            AxisKind::Delta => "privacy failure probability δ",
            AxisKind::TrainSize => "training examples N",
            AxisKind::Dimension => "input dimensions D (PCA)",
            AxisKind::Classes => "classes C",
            AxisKind::Lambda => "L2 regularisation λ",
            AxisKind::Teachers => "teachers T",
        }
    }
}

/// A figure's x-axis: what varies, over which grid, on which scale.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Axis {
    /// The varied quantity.
    pub kind: AxisKind,
    /// The grid, increasing.
    pub grid: Vec<f64>,
    /// Whether the paper plots it on a logarithmic scale.
    pub log: bool,
}

/// One point of a sweep: every parameter a unit's computation depends on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Setting {
    /// Privacy loss ε.
    pub epsilon: f64,
    /// Privacy failure probability δ (0 = pure DP).
    pub delta: f64,
    /// Inference budget B (the guarantee of private-training methods holds for any B).
    pub budget: u64,
    /// Training-set size (None: the whole training set).
    pub n: Option<usize>,
    /// PCA dimension (None: raw pixels).
    pub dim: Option<usize>,
    /// Number of classes: the first C digits (None: all).
    pub classes: Option<usize>,
    /// Fixed L2 regularisation (None: cross-validated as docs/study.md says).
    pub lambda: Option<f64>,
    /// Number of teachers of subsample-and-aggregate.
    pub teachers: usize,
}

/// A figure of the study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// Which figure.
    pub id: FigureId,
    /// The default dataset (`mnist`, `mnist1m`, `cifar10`).
    pub dataset: &'static str,
    /// The x-axis.
    pub axis: Axis,
    /// The parameters held fixed (the varied one is overwritten per grid point).
    pub fixed: Setting,
    /// Methods, one line each.
    pub methods: Vec<Method>,
    /// Several privacy levels as separate lines (fig6a/b), else empty.
    pub series_epsilons: Vec<f64>,
    /// One-line description for plot titles.
    pub title: &'static str,
}

/// The ten-point grid of λ used for cross-validation and fig6a (docs/study.md).
pub const LAMBDA_GRID: [f64; 10] = [1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 1e-1, 5e-1];

/// The DP-SGD clip-value grid for cross-validation (docs/study.md).
pub const CLIP_GRID: [f64; 10] = [5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 1e-1, 2e-1, 5e-1];

/// Default number of subsample-and-aggregate teachers for linear models (docs/study.md).
pub const DEFAULT_TEACHERS: usize = privpred_core::defaults::LINEAR_TEACHERS;

const ALL_BUT_DPSGD: [Method; 4] = [
    Method::ModelSensitivity,
    Method::LossPerturbation,
    Method::PredictionSensitivity,
    Method::SubsampleAggregate,
];

fn base(epsilon: f64, delta: f64, budget: u64) -> Setting {
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

/// The definition of figure `id`, built by the function of its family.
fn definition(id: FigureId) -> Figure {
    match id {
        FigureId::Fig1a | FigureId::Fig1b => epsilon_figure(id),
        FigureId::Fig2a | FigureId::Fig2b => budget_figure(id),
        FigureId::Fig3 | FigureId::Fig4 | FigureId::Fig5a | FigureId::Fig5b => problem_figure(id),
        FigureId::Fig6a | FigureId::Fig6b => hyperparameter_figure(id),
        FigureId::Fig7a | FigureId::Fig7b => cifar_figure(id),
    }
}

/// A figure on one x-axis with one line per method and no ε series.
fn line_figure(
    id: FigureId,
    dataset: &'static str,
    axis: Axis,
    fixed: Setting,
    methods: Vec<Method>,
    title: &'static str,
) -> Figure {
    Figure {
        id,
        dataset,
        axis,
        fixed,
        methods,
        series_epsilons: vec![],
        title,
    }
}

/// Figure 1, accuracy against ε on MNIST at B = 100: (a) δ = 0 on a log grid from 0.01 to 10
/// without DP-SGD, (b) δ = 1e-5 on a linear grid from 0.05 to 1 with every method.
fn epsilon_figure(id: FigureId) -> Figure {
    let axis = |grid: Vec<f64>, log| Axis {
        kind: AxisKind::Epsilon,
        grid,
        log,
    };
    if id == FigureId::Fig1a {
        line_figure(
            id,
            "mnist",
            axis(vec![0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1., 2., 5., 10.], true),
            base(1., 0., 100),
            ALL_BUT_DPSGD.to_vec(),
            "MNIST, B = 100, δ = 0",
        )
    } else {
        line_figure(
            id,
            "mnist",
            axis(
                vec![0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
                false,
            ),
            base(1., 1e-5, 100),
            Method::ALL.to_vec(),
            "MNIST, B = 100, δ = 1e-5",
        )
    }
}

/// Figure 2, accuracy against the inference budget B (1 to 1000, log axis) on MNIST at ε = 1:
/// (a) δ = 0 without DP-SGD, (b) δ = 1e-5 with every method.
fn budget_figure(id: FigureId) -> Figure {
    let axis = Axis {
        kind: AxisKind::Budget,
        grid: vec![
            1., 2., 5., 10., 20., 30., 40., 50., 75., 100., 150., 200., 250., 300., 400., 500.,
            750., 1000.,
        ],
        log: true,
    };
    if id == FigureId::Fig2a {
        line_figure(
            id,
            "mnist",
            axis,
            base(1., 0., 100),
            ALL_BUT_DPSGD.to_vec(),
            "MNIST, ε = 1, δ = 0",
        )
    } else {
        line_figure(
            id,
            "mnist",
            axis,
            base(1., 1e-5, 100),
            Method::ALL.to_vec(),
            "MNIST, ε = 1, δ = 1e-5",
        )
    }
}

/// Figures 3–5, accuracy against a property of the problem at ε = 1, B = 100: δ (fig3, every
/// method), the training-set size on MNIST-1M (fig4), the PCA dimension (fig5a) and the number
/// of classes (fig5b), the last three at δ = 0 without DP-SGD.
fn problem_figure(id: FigureId) -> Figure {
    if id == FigureId::Fig3 {
        let axis = Axis {
            kind: AxisKind::Delta,
            grid: (2..=10).rev().map(|k| 10f64.powi(-k)).collect(),
            log: true,
        };
        let title = "MNIST, ε = 1, B = 100";
        return line_figure(
            id,
            "mnist",
            axis,
            base(1., 1e-5, 100),
            Method::ALL.to_vec(),
            title,
        );
    }
    let (dataset, kind, grid, log, title): (_, _, Vec<f64>, _, _) = match id {
        FigureId::Fig4 => (
            "mnist1m",
            AxisKind::TrainSize,
            vec![1e3, 3e3, 1e4, 3e4, 1e5, 3e5, 1e6],
            true,
            "MNIST-1M (InfiMNIST-style substitute), ε = 1, δ = 0, B = 100",
        ),
        FigureId::Fig5a => (
            "mnist",
            AxisKind::Dimension,
            vec![10., 20., 50., 100., 200., 400., 784.],
            true,
            "MNIST (PCA), ε = 1, δ = 0, B = 100",
        ),
        // Fig5b (the only other figure of this family)
        _ => (
            "mnist",
            AxisKind::Classes,
            (2..=10).map(f64::from).collect(),
            false,
            "MNIST (first C digits), ε = 1, δ = 0, B = 100",
        ),
    };
    let axis = Axis { kind, grid, log };
    line_figure(
        id,
        dataset,
        axis,
        base(1., 0., 100),
        ALL_BUT_DPSGD.to_vec(),
        title,
    )
}

/// Figure 6, accuracy against a method's hyper-parameter on MNIST at δ = 0, B = 100, one line
/// per ε ∈ {0.1, 1, 10}: (a) loss perturbation's λ over [`LAMBDA_GRID`], (b) the number of
/// subsample-and-aggregate teachers, 2 to 2048.
fn hyperparameter_figure(id: FigureId) -> Figure {
    let (axis, method, title) = if id == FigureId::Fig6a {
        (
            Axis {
                kind: AxisKind::Lambda,
                grid: LAMBDA_GRID.to_vec(),
                log: true,
            },
            Method::LossPerturbation,
            "MNIST, loss perturbation, δ = 0, B = 100",
        )
    } else {
        (
            Axis {
                kind: AxisKind::Teachers,
                grid: (1..=11).map(|k| f64::from(1u32 << k)).collect(),
                log: true,
            },
            Method::SubsampleAggregate,
            "MNIST, subsample-and-aggregate, δ = 0, B = 100",
        )
    };
    Figure {
        series_epsilons: vec![0.1, 1., 10.],
        ..line_figure(id, "mnist", axis, base(1., 0., 100), vec![method], title)
    }
}

/// Figure 7, the ResNet-20 on the CIFAR-10 JPEG copy, DP-SGD against 16 teachers at
/// δ = 1e-5: (a) against ε at B = 10, (b) against B at ε = 1.
fn cifar_figure(id: FigureId) -> Figure {
    let (axis, title) = if id == FigureId::Fig7a {
        (
            Axis {
                kind: AxisKind::Epsilon,
                grid: vec![0.1, 0.2, 0.5, 1., 2., 5.],
                log: true,
            },
            "CIFAR-10 (JPEG copy), ResNet-20, B = 10, δ = 1e-5",
        )
    } else {
        (
            Axis {
                kind: AxisKind::Budget,
                grid: vec![1., 2., 5., 10., 20., 50., 100.],
                log: true,
            },
            "CIFAR-10 (JPEG copy), ResNet-20, ε = 1, δ = 1e-5",
        )
    };
    let fixed = Setting {
        teachers: 16,
        ..base(1., 1e-5, 10)
    };
    let methods = vec![Method::DpSgd, Method::SubsampleAggregate];
    line_figure(id, "cifar10", axis, fixed, methods, title)
}

impl Figure {
    /// The figure's settings in order: for each series ε (or the single fixed ε), each grid point.
    pub fn settings(&self) -> Vec<Setting> {
        let eps: Vec<f64> = if self.series_epsilons.is_empty() {
            vec![self.fixed.epsilon]
        } else {
            self.series_epsilons.clone()
        };
        let mut out = Vec::with_capacity(eps.len() * self.axis.grid.len());
        for &e in &eps {
            for &x in &self.axis.grid {
                let mut s = Setting {
                    epsilon: e,
                    ..self.fixed
                };
                match self.axis.kind {
                    AxisKind::Epsilon => s.epsilon = x,
                    AxisKind::Budget => s.budget = x as u64,
                    AxisKind::Delta => s.delta = x,
                    AxisKind::TrainSize => s.n = Some(x as usize),
                    AxisKind::Dimension => s.dim = Some(x as usize),
                    AxisKind::Classes => s.classes = Some(x as usize),
                    AxisKind::Lambda => s.lambda = Some(x),
                    AxisKind::Teachers => s.teachers = x as usize,
                }
                out.push(s);
            }
        }
        out
    }

    /// The x value of a setting on this figure's axis.
    pub fn x_of(&self, s: &Setting) -> f64 {
        match self.axis.kind {
            AxisKind::Epsilon => s.epsilon,
            AxisKind::Budget => s.budget as f64,
            AxisKind::Delta => s.delta,
            AxisKind::TrainSize => s.n.map_or(f64::NAN, |v| v as f64),
            AxisKind::Dimension => s.dim.map_or(f64::NAN, |v| v as f64),
            AxisKind::Classes => s.classes.map_or(f64::NAN, |v| v as f64),
            AxisKind::Lambda => s.lambda.unwrap_or(f64::NAN),
            AxisKind::Teachers => s.teachers as f64,
        }
    }

    /// The label of the line a (method, setting) belongs to: the method, plus ε where the
    /// figure draws several privacy levels.
    pub fn series_label(&self, method: Method, s: &Setting) -> String {
        if self.series_epsilons.is_empty() {
            method.name().to_string()
        } else {
            format!("{} ε={}", method.name(), fmt_num(s.epsilon))
        }
    }
}

/// Shortest round-trip formatting of a number for ids and labels (`0.01`, `1e-5`, `100`).
pub fn fmt_num(v: f64) -> String {
    if v != 0.0 && (v.abs() < 1e-3 || v.abs() >= 1e7) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_match_spec_sizes() {
        let sizes: Vec<(FigureId, usize)> = FigureId::ALL
            .iter()
            .map(|f| (*f, f.definition().settings().len()))
            .collect();
        let want = [
            (FigureId::Fig1a, 10),
            (FigureId::Fig1b, 11),
            (FigureId::Fig2a, 18),
            (FigureId::Fig2b, 18),
            (FigureId::Fig3, 9),
            (FigureId::Fig4, 7),
            (FigureId::Fig5a, 7),
            (FigureId::Fig5b, 9),
            (FigureId::Fig6a, 30),
            (FigureId::Fig6b, 33),
            (FigureId::Fig7a, 6),
            (FigureId::Fig7b, 7),
        ];
        assert_eq!(sizes, want);
        let f3 = FigureId::Fig3.definition();
        assert_eq!(f3.axis.grid.first().copied(), Some(1e-10));
        assert_eq!(f3.axis.grid.last().copied(), Some(1e-2));
        let f6b = FigureId::Fig6b.definition();
        assert_eq!(f6b.axis.grid.last().copied(), Some(2048.0));
    }

    #[test]
    fn parse_roundtrip() {
        for f in FigureId::ALL {
            assert_eq!(FigureId::parse(f.name()).unwrap(), f);
        }
        assert!(FigureId::parse("fig9").is_err());
    }

    #[test]
    fn number_format() {
        assert_eq!(fmt_num(1e-5), "1e-5");
        assert_eq!(fmt_num(0.01), "0.01");
        assert_eq!(fmt_num(100.0), "100");
    }
}
