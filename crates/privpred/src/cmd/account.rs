//! `privpred account`: the privacy a mechanism spends (DP-SGD).

use privpred_core::pld::pld_epsilon_neighbours;
use privpred_core::rdp::rdp_epsilon;
use privpred_core::{Accountant, Neighbours};
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
    /// Default: `pld` under replace-one neighbours, `rdp` under add-remove. Under replace-one
    /// only `pld` (and `best`, which is then `pld`) applies: the RDP accountants bound
    /// add/remove neighbours.
    #[arg(long, value_enum)]
    pub accountant: Option<Accountant>,
    /// The neighbouring relation (docs/guarantees.md#neighbouring-relations): `add-remove` (the RDP and PLD accountants of the
    /// sampled Gaussian) or `replace-one` (the PLD accountant of the replace-one dominating
    /// pair (1−q)N(0,σ²)+qN(1,σ²) vs (1−q)N(0,σ²)+qN(−1,σ²)).
    #[arg(long, value_enum, default_value_t = Neighbours::ReplaceOne)]
    pub neighbours: Neighbours,
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
    let n = a.neighbours;
    let accountant = a.accountant.unwrap_or(match n {
        Neighbours::ReplaceOne => Accountant::Pld,
        Neighbours::AddRemove => Accountant::Rdp,
    });
    if n == Neighbours::ReplaceOne && matches!(accountant, Accountant::Rdp | Accountant::RdpClassic)
    {
        return Err(crate::exit::usage(
            privpred_core::dpsgd::replace_one_rdp_error(accountant),
        ));
    }
    // The RDP numbers are add/remove bounds: computed and shown only for add-remove.
    let rdp = match n {
        Neighbours::AddRemove => Some(rdp_epsilon(q, s, k, d)?),
        Neighbours::ReplaceOne => {
            privpred_core::rdp::rdp_epsilon(q, s, 1, d)?; // argument validation only
            None
        }
    };
    let pld = match accountant {
        Accountant::Pld | Accountant::Best => Some(pld_epsilon_neighbours(q, s, k, d, n)?),
        _ => None,
    };
    let epsilon = match (accountant, rdp) {
        (Accountant::Rdp, Some(r)) => r.epsilon,
        (Accountant::RdpClassic, Some(r)) => r.classic,
        (Accountant::Best, Some(r)) => r.epsilon.min(pld.unwrap_or(f64::INFINITY)),
        _ => pld.unwrap_or(f64::INFINITY),
    };
    if a.json {
        let mut v = json!({
            "epsilon": epsilon,
            "accountant": accountant.name(),
            "neighbours": n.name(),
            "delta": d,
            "sampling_rate": q,
            "noise_multiplier": s,
            "steps": k,
        });
        if let Some(rdp) = rdp {
            let o = v.as_object_mut().expect("object");
            o.insert("epsilon_rdp".into(), json!(rdp.epsilon));
            o.insert("epsilon_rdp_classic".into(), json!(rdp.classic));
            o.insert("epsilon_rdp_improved".into(), json!(rdp.improved));
            o.insert("rdp_order".into(), json!(rdp.order));
        }
        if let Some(p) = pld {
            v.as_object_mut()
                .expect("object")
                .insert("epsilon_pld".into(), json!(p));
        }
        println!("{}", serde_json::to_string(&v)?);
    } else {
        println!(
            "DP-SGD with Poisson sampling rate q = {q}, noise multiplier sigma = {s}, {k} steps is ({epsilon:.4}, {d})-differentially private for {n} neighbours by the {} accountant.",
            accountant.name()
        );
        if let Some(rdp) = rdp {
            println!(
                "  RDP (Mironov, Talwar & Zhang 2019): epsilon = {:.4} (classic conversion {:.4}, improved {:.4}, order {}).",
                rdp.epsilon, rdp.classic, rdp.improved, rdp.order
            );
        }
        if let Some(p) = pld {
            println!(
                "  PLD ({n} pair, pessimistic discretisation, FFT composition): epsilon = {p:.4}."
            );
        }
        println!(
            "  Every number is an upper bound on the privacy loss: smaller is tighter, all are valid."
        );
    }
    Ok(())
}
