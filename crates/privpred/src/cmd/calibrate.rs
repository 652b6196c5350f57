//! `privpred calibrate`: how much noise a method needs for (ε, δ) and a budget B.

use privpred_core::calibrate::{CalibrationRequest, calibrate};
use privpred_core::{
    Budget, Calibration, CalibrationMode, DpSgdSchedule, Loss, Mechanism, Method, Neighbours,
    Privacy, Scores, VectorNoise,
};

/// Arguments of `privpred calibrate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The method to calibrate.
    #[arg(value_enum)]
    pub method: Method,
    /// Privacy loss ε > 0.
    #[arg(long, allow_negative_numbers = true)]
    pub epsilon: f64,
    /// Failure probability δ ∈ [0, 1) (0 = pure ε-DP).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub delta: f64,
    /// Inference budget B ≥ 1 (number of answers; private-prediction methods only).
    #[arg(long)]
    pub budget: Option<u64>,
    /// Training-set size N.
    #[arg(long)]
    pub n: Option<usize>,
    /// L2 regularisation λ > 0.
    #[arg(long, allow_negative_numbers = true)]
    pub lambda: Option<f64>,
    /// Number of classes C.
    #[arg(long, default_value_t = 10)]
    pub classes: usize,
    /// DP-SGD: expected batch size b (Poisson sampling rate q = b/N).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// DP-SGD: epochs (steps = ceil(epochs·N/b)).
    #[arg(long, allow_negative_numbers = true)]
    pub epochs: Option<f64>,
    /// Which analysis sets the noise.
    #[arg(long, value_enum, default_value_t = CalibrationMode::Corrected)]
    pub calibration: CalibrationMode,
    /// The neighbouring relation of the guarantee (docs/guarantees.md#neighbouring-relations): datasets differing in one
    /// replaced example (default) or in one added/removed example.
    #[arg(long, value_enum, default_value_t = Neighbours::ReplaceOne)]
    pub neighbours: Neighbours,
    /// The model's output layer: `softmax` (C outputs, K = √2, L = 1/2) or, for two classes,
    /// `logistic` (one sigmoid output, K = 1, L = 1/4).
    #[arg(long, value_enum, default_value_t = Loss::Softmax)]
    pub loss: Loss,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Builds the core request from the command line (validation happens in core).
fn request(args: &Args) -> anyhow::Result<CalibrationRequest> {
    let privacy = Privacy::new(args.epsilon, args.delta)?;
    let mut req = CalibrationRequest::new(args.method, args.calibration, privacy);
    if let Some(b) = args.budget {
        req.budget = Budget::finite(b)?;
    }
    if args.method.is_private_training() {
        req.budget = Budget::Unlimited;
    }
    req.n = args.n;
    req.lambda = args.lambda;
    req.classes = args.classes;
    req.neighbours = args.neighbours;
    req.loss = args.loss;
    if args.method == Method::DpSgd {
        match (args.batch_size, args.epochs) {
            (Some(b), Some(e)) => {
                req.dp_sgd = Some(DpSgdSchedule {
                    batch_size: b,
                    epochs: e,
                })
            }
            (None, _) => {
                return Err(crate::exit::usage(
                    "invalid batch-size: dp-sgd needs --batch-size b >= 1 (and --n, --epochs)",
                ));
            }
            (_, None) => {
                return Err(crate::exit::usage(
                    "invalid epochs: dp-sgd needs --epochs > 0 (and --n, --batch-size)",
                ));
            }
        }
    }
    Ok(req)
}

/// The `--json` object of a calibration ([`privpred_core::guarantee_json::to_json`], shared with
/// the Python package's `guarantee_`).
pub fn to_json(c: &Calibration) -> serde_json::Value {
    privpred_core::guarantee_json::to_json(c)
}

/// A short human-readable explanation of a calibration.
pub fn to_text(c: &Calibration) -> String {
    let mut s = String::new();
    let budget = match c.budget().get() {
        Some(b) => format!("a budget of B = {b} answers"),
        None => "any number of answers (the released model itself is private)".to_string(),
    };
    s.push_str(&format!(
        "{} ({} calibration): ({}, {})-differential privacy for {}, {} neighbours.\n",
        c.method(),
        c.mode(),
        super::shared::short(c.epsilon()),
        super::shared::short(c.delta()),
        budget,
        c.neighbours()
    ));
    let what = match c.method() {
        Method::ModelSensitivity => "added once to the trained weights θ",
        Method::LossPerturbation => "the random linear term b added to the training objective",
        Method::DpSgd => "added to the sum of clipped per-example gradients at every step",
        Method::PredictionSensitivity => "added to the logits of every answer",
        Method::SubsampleAggregate => "the temperature of the vote over the teachers",
    };
    match c.mechanism {
        Mechanism::OutputPerturbation { noise }
        | Mechanism::ObjectivePerturbation { noise, .. }
        | Mechanism::NoisyLogits { noise } => match noise {
            VectorNoise::L2Laplace { beta } => s.push_str(&format!(
                "Noise: l2-Laplace with beta = {beta:.6e} (density ∝ exp(-beta·‖b‖), mean norm = dimension/beta), {what}.\n"
            )),
            VectorNoise::Gaussian { sigma } => s.push_str(&format!(
                "Noise: Gaussian with std sigma = {sigma:.6e} per coordinate, {what}.\n"
            )),
            VectorNoise::DiscreteGaussian { sigma, rounding } => s.push_str(&format!(
                "Noise: discrete Gaussian with scale sigma = {sigma:.6e} per coordinate on a power-of-two grid (step g the largest power of two with g·√dimension <= {rounding:.6e}; values rounded to the grid, exact sampler), {what}.\n"
            )),
            VectorNoise::DiscreteL2Laplace { beta, rounding } => s.push_str(&format!(
                "Noise: l2-Laplace with beta = {beta:.6e} on a power-of-two grid (P(point) ∝ exp(-beta·‖offset‖); step g the largest power of two with g·√dimension <= {rounding:.6e}; values rounded to the grid, exact sampler, the l1 law of the same budget above {} coordinates), {what}.\n",
                privpred_core::lattice::LATTICE_L2_MAX_DIM
            )),
        },
        Mechanism::DpSgd { noise_multiplier: m, .. } => s.push_str(&format!(
            "Noise: Gaussian with noise multiplier sigma = {m:.4} (std = sigma × clip norm per coordinate), {what}.\n"
        )),
        Mechanism::Exponential { beta, over: Scores::Logits } => s.push_str(&format!(
            "Mechanism: exponential mechanism over the logits, P(class) ∝ exp(beta·logit) with beta = {beta:.6e}; only the label is released.\n"
        )),
        Mechanism::Exponential { beta, over: Scores::Votes } => s.push_str(&format!(
            "Noise: exponential mechanism, P(class) ∝ exp(beta·votes) with beta = {beta:.6e}, {what}.\n"
        )),
        Mechanism::PermuteAndFlip { beta, over } => s.push_str(&format!(
            "Mechanism: permute-and-flip (McKenna & Sheldon 2020) over the {}: classes in a random order, each returned with probability exp(beta·(score − max)), beta = {beta:.6e}; only the label is released.\n",
            match over { Scores::Votes => "teachers' votes", Scores::Logits => "logits" }
        )),
    }
    if let Some(r) = c.mechanism.rho() {
        s.push_str(&format!(
            "Regulariser: rho = 2LC/eps = {r:.6e} (the objective uses max(rho, N·lambda)).\n"
        ));
    }
    if let (Some(e), Some(q), Some(k)) = (
        c.mechanism.epsilon_spent(),
        c.mechanism.sampling_rate(),
        c.mechanism.steps(),
    ) {
        s.push_str(&format!(
            "Accounting: {k} steps at sampling rate q = {q:.6} spend epsilon = {e:.4} ≤ target.\n"
        ));
    }
    if !c.is_valid() {
        s.push_str("WARNING: paper mode reproduces the published rule, which does NOT deliver this guarantee (docs/guarantees.md#errata). Use --calibration corrected for deployment.\n");
    }
    for n in &c.notes {
        s.push_str(&format!("  - {n}\n"));
    }
    s
}

/// Runs `privpred calibrate`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let req = request(&args)?;
    let c = calibrate(&req)?;
    if args.json {
        println!("{}", serde_json::to_string(&to_json(&c))?);
    } else {
        print!("{}", to_text(&c));
    }
    Ok(())
}
