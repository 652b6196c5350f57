//! `privpred account`: the privacy a mechanism spends (DP-SGD).

use privpred_core::Accountant;
use privpred_core::pld::pld_epsilon;
use privpred_core::rdp::rdp_epsilon;
use serde_json::json;

/// Arguments of `privpred account`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to account.
    #[command(subcommand)]
    pub what: What,
}

/// The mechanisms `privpred account` knows.
#[derive(clap::Subcommand, Debug)]
pub enum What {
    /// DP-SGD: the Poisson-subsampled Gaussian mechanism composed over `--steps` steps.
    DpSgd(DpSgdArgs),
}

/// Arguments of `privpred account dp-sgd`.
#[derive(clap::Args, Debug)]
pub struct DpSgdArgs {
    /// Poisson sampling rate q = b/N ∈ (0, 1].
    #[arg(long, allow_negative_numbers = true)]
    pub sampling_rate: f64,
    /// Noise multiplier σ > 0 (noise std = σ × clip norm).
    #[arg(long, allow_negative_numbers = true)]
    pub noise_multiplier: f64,
    /// Number of steps ≥ 1.
    #[arg(long)]
    pub steps: u64,
    /// δ ∈ (0, 1).
    #[arg(long, allow_negative_numbers = true)]
    pub delta: f64,
    /// Which accountant reports ε (`rdp`: Rényi DP, smaller of the classic and improved
    /// conversions; `pld`: privacy-loss distribution).
    #[arg(long, value_enum, default_value_t = Accountant::Rdp)]
    pub accountant: Accountant,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `privpred account`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.what {
        What::DpSgd(a) => dp_sgd(a),
    }
}

fn dp_sgd(a: DpSgdArgs) -> anyhow::Result<()> {
    let (q, s, k, d) = (a.sampling_rate, a.noise_multiplier, a.steps, a.delta);
    if k == 0 {
        return Err(
            privpred_core::CoreError::invalid("steps", 0, "must be an integer >= 1").into(),
        );
    }
    let rdp = rdp_epsilon(q, s, k, d)?;
    let pld = match a.accountant {
        Accountant::Pld | Accountant::Best => Some(pld_epsilon(q, s, k, d)?),
        _ => None,
    };
    let epsilon = match a.accountant {
        Accountant::Rdp => rdp.epsilon,
        Accountant::RdpClassic => rdp.classic,
        Accountant::Pld => pld.unwrap_or(f64::INFINITY),
        Accountant::Best => rdp.epsilon.min(pld.unwrap_or(f64::INFINITY)),
    };
    if a.json {
        let mut v = json!({
            "epsilon": epsilon,
            "accountant": a.accountant.name(),
            "delta": d,
            "sampling_rate": q,
            "noise_multiplier": s,
            "steps": k,
            "epsilon_rdp": rdp.epsilon,
            "epsilon_rdp_classic": rdp.classic,
            "epsilon_rdp_improved": rdp.improved,
            "rdp_order": rdp.order,
        });
        if let Some(p) = pld {
            v.as_object_mut()
                .expect("object")
                .insert("epsilon_pld".into(), json!(p));
        }
        println!("{}", serde_json::to_string(&v)?);
    } else {
        println!(
            "DP-SGD with Poisson sampling rate q = {q}, noise multiplier sigma = {s}, {k} steps is ({epsilon:.4}, {d})-differentially private by the {} accountant.",
            a.accountant.name()
        );
        println!(
            "  RDP (Mironov, Talwar & Zhang 2019): epsilon = {:.4} (classic conversion {:.4}, improved {:.4}, order {}).",
            rdp.epsilon, rdp.classic, rdp.improved, rdp.order
        );
        if let Some(p) = pld {
            println!("  PLD (pessimistic discretisation, FFT composition): epsilon = {p:.4}.");
        }
        println!(
            "  Every number is an upper bound on the privacy loss: smaller is tighter, all are valid."
        );
    }
    Ok(())
}
