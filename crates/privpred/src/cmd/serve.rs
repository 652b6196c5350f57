//! `privpred serve`: an HTTP prediction service with an enforced, durable inference budget.
//!
//! The model file is an artifact written by `privpred train` (safetensors with the guarantee
//! and the fitted preprocessing in its header). Queries are preprocessed exactly as the
//! training data was; private-prediction methods spend one budget unit per new answer,
//! recorded in the ledger before the answer is sent, through the answering path of
//! `privpred_answer` (the one `predict` and Python take).
//!
//! Deep models (`privpred-nn` artifacts, with `--features nn`): a DP-SGD ResNet is served
//! with unlimited answers (labels and probabilities), a teacher ensemble with its finite
//! budget B (labels only, one exponential-mechanism draw per answer). Query rows are raw
//! pixels `C×H×W` in 0..255; the model's normalisation is applied inside.
//!
//! Hidden test support: a JSON file with `"privpred_test_fixture": true` is served as the
//! synthetic TEST FIXTURE model of `privpred_serve::model::FixtureModel` (used by the service's
//! integration tests and load benchmark; never a trained model, and labelled as such in
//! `/v1/model` and at start).

use crate::exit::usage;
use anyhow::Context;
use privpred_core::Budget;
use privpred_data::FittedPreprocessing;
use privpred_linear::PrivatePredictor;
use privpred_serve::model::{Answer, FixtureModel, ModelInfo, ServedModel};
use privpred_serve::{ServeConfig, ServeError, TokenSet};
use rand_chacha::ChaCha20Rng;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// Arguments of `privpred serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model file written by `privpred train`.
    #[arg(long, value_name = "FILE")]
    pub model: PathBuf,
    /// Address to listen on (HOST:PORT; port 0 picks a free port). Without --tokens only a
    /// loopback address is accepted.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Budget ledger: `sqlite:PATH`, `postgres://user@host:port/db`, or a libpq string
    /// "host=… port=… user=… dbname=…". Default: `sqlite:<MODEL>.ledger.sqlite` beside the model.
    /// Several replicas sharing one budget must share one PostgreSQL ledger.
    #[arg(long, value_name = "LEDGER")]
    pub ledger: Option<String>,
    /// Bearer tokens file: one per line, `sha256:<hex>` (hash of a token, recommended) or a
    /// plaintext token (hashed at load); `#` comments. Without it, no authentication and
    /// loopback only.
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,
    /// Most rows in one request.
    #[arg(long, value_name = "N", default_value_t = privpred_serve::server::DEFAULT_MAX_BATCH)]
    pub max_batch: usize,
    /// Largest request body in bytes (default: a full batch at 32 bytes per number, or for a
    /// table's model per numeric column, and twice the longest declared category plus 8 per
    /// categorical column, + 64 KiB).
    #[arg(long, value_name = "BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Charge repeated identical queries again instead of returning the stored earlier answer.
    #[arg(long)]
    pub no_answer_store: bool,
    /// Share the answer store across bearer tokens: a query one token asked is answered from
    /// the store for every token (saves budget, but one client learns which rows another
    /// asked and their answers). Default: one store per token.
    #[arg(long, conflicts_with = "no_answer_store")]
    pub share_answer_store: bool,
    /// Create the ledger and this model's budget record. Required the first time; refused if
    /// the ledger already holds the record. Without it a missing ledger (file or record) is an
    /// error, so a deleted ledger can never silently reset the budget.
    #[arg(long)]
    pub init_ledger: bool,
    /// Most simultaneous connections; more are answered 503 and closed.
    #[arg(long, value_name = "N", default_value_t = privpred_serve::server::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Seconds for a request's headers to arrive (slow clients are cut off).
    #[arg(long, value_name = "SECONDS", default_value_t = privpred_serve::server::DEFAULT_HEADER_TIMEOUT.as_secs_f64())]
    pub header_timeout: f64,
    /// Seconds for a request body to arrive (408 after).
    #[arg(long, value_name = "SECONDS", default_value_t = privpred_serve::server::DEFAULT_BODY_TIMEOUT.as_secs_f64())]
    pub body_timeout: f64,
    /// Seconds a connection may sit idle (no request being handled, no byte moving) before
    /// it is closed.
    #[arg(long, value_name = "SECONDS", default_value_t = privpred_serve::server::DEFAULT_IDLE_TIMEOUT.as_secs_f64())]
    pub idle_timeout: f64,
    /// Serve a model whose guarantee is not valid (e.g. `paper` calibration). Refused
    /// without it; with it the banner and every answer say the guarantee does not hold.
    #[arg(long)]
    pub allow_invalid_guarantee: bool,
    /// Which keys are trusted and open sealed models.
    #[command(flatten)]
    pub keys: super::keys::TrustArgs,
}

/// A timeout flag in seconds: finite, 0.001 to 86400.
fn seconds(flag: &str, v: f64) -> anyhow::Result<std::time::Duration> {
    if !(v.is_finite() && (0.001..=86_400.0).contains(&v)) {
        return Err(usage(format!(
            "{flag} {v}: out of range; use 0.001 to 86400 seconds"
        )));
    }
    Ok(std::time::Duration::from_secs_f64(v))
}

/// A trained linear private predictor adapted to the server.
struct LinearServed {
    info: ModelInfo,
    predictor: PrivatePredictor,
    preprocessing: FittedPreprocessing,
}

impl ServedModel for LinearServed {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn preprocess(&self, raw: &[f32]) -> Result<Vec<f32>, String> {
        self.preprocessing.apply_row(raw).map_err(|e| e.to_string())
    }

    fn takes_cells(&self) -> bool {
        self.preprocessing.schema.is_some()
    }

    fn row_bytes(&self) -> usize {
        match &self.preprocessing.schema {
            Some(s) => s.query_row_bytes(),
            None => self.info.input_dim.saturating_mul(32),
        }
    }

    fn preprocess_cells(&self, raw: &[String]) -> Result<Vec<f32>, String> {
        self.preprocessing
            .encode_query(raw)
            .map_err(|e| e.to_string())
    }

    fn columns(&self) -> Option<Vec<privpred_serve::QueryColumn>> {
        use privpred_data::schema::ColumnType;
        let schema = self.preprocessing.schema.as_ref()?;
        let kind = |k: ColumnType| match k {
            ColumnType::Numeric => "numeric",
            ColumnType::Categorical => "categorical",
            ColumnType::Label | ColumnType::Ignore => "ignore",
        };
        Some(
            schema
                .columns
                .iter()
                .filter(|c| c.kind != ColumnType::Label)
                .map(|c| privpred_serve::QueryColumn {
                    name: c.name.clone(),
                    kind: kind(c.kind).into(),
                })
                .collect(),
        )
    }

    fn answer(
        &self,
        rows: &[Vec<f32>],
        rng: &mut ChaCha20Rng,
    ) -> privpred_serve::Result<Vec<Answer>> {
        let refs: Vec<&[f32]> = rows.iter().map(|r| r.as_slice()).collect();
        let answers = self
            .predictor
            .try_predict(&refs, rng)
            .map_err(|e| ServeError::Model(e.to_string()))?;
        Ok(answers
            .into_iter()
            .map(|a| Answer {
                label: a.label,
                scores: a.scores,
            })
            .collect())
    }
}

/// The served model and the ledger and spend mark it spends (none for a model whose answers
/// spend no budget).
type Loaded = (
    Arc<dyn ServedModel>,
    Option<privpred_answer::LedgerSpec>,
    Option<privpred_answer::SpendMark>,
);

fn load_model(
    path: &std::path::Path,
    keys: &super::keys::TrustArgs,
    ledger: Option<&str>,
) -> anyhow::Result<Loaded> {
    use super::budget::ledger_err;
    let bytes =
        std::fs::read(path).map_err(|e| usage(format!("--model {}: {e}", path.display())))?;
    if FixtureModel::is_fixture(&bytes) {
        let m = FixtureModel::from_bytes(&bytes)
            .map_err(|e| usage(format!("--model {}: {e}", path.display())))?;
        let spec = privpred_answer::ledger_spec(ledger, path).map_err(ledger_err)?;
        let mark = privpred_answer::default_spend_mark(path);
        return Ok((Arc::new(m), Some(spec), Some(mark)));
    }
    let released = keys.open(path)?;
    let answering =
        privpred_answer::Answering::open(path, released, ledger, false).map_err(ledger_err)?;
    super::predict::warn_not_covered("serve", &answering.marks);
    let id = answering.header.ledger_id.clone();
    let marks = answering.marks;
    let model = match answering.model {
        privpred_release::Model::Linear(m) => linear_served(path, *m, marks, id)?,
        #[cfg(feature = "nn")]
        privpred_release::Model::Resnet(m) => nn::served(path, *m, marks, id)?,
    };
    Ok(match answering.account {
        Some(a) => (model, Some(a.ledger), a.mark),
        None => (model, None, None),
    })
}

fn linear_served(
    path: &std::path::Path,
    loaded: privpred_linear::artifact::LoadedModel,
    marks: privpred_release::Marks,
    model_id: String,
) -> anyhow::Result<Arc<dyn ServedModel>> {
    let predictor = loaded.private().cloned().ok_or_else(|| {
        usage(format!(
            "--model {}: holds a non-private baseline model, which has no privacy guarantee; serve a private model",
            path.display()
        ))
    })?;
    let cal = predictor.calibration.clone();
    let budget = if cal.method().is_private_training() {
        Budget::Unlimited
    } else {
        match cal.budget() {
            Budget::Finite(b) => Budget::Finite(b),
            Budget::Unlimited => {
                return Err(usage(format!(
                    "--model {}: a {} model must state a finite budget B",
                    path.display(),
                    cal.method()
                )));
            }
        }
    };
    if predictor.input_dim() != loaded.preprocessing.output_dim() {
        return Err(usage(format!(
            "--model {}: the model takes {} features but its preprocessing yields {}",
            path.display(),
            predictor.input_dim(),
            loaded.preprocessing.output_dim()
        )));
    }
    let info = ModelInfo {
        model_id,
        method: cal.method(),
        budget,
        input_dim: match &loaded.preprocessing.schema {
            Some(s) => s.columns.len() - 1,
            None => loaded.preprocessing.input_dim(),
        },
        classes: predictor.classes(),
        // selections (subsample-and-aggregate; prediction sensitivity's label-only tight
        // mechanism) release the label only
        releases_scores: privpred_release::releases_scores(Some(cal.method()))
            && !cal.mechanism.is_selection(),
        preprocessing: loaded.preprocessing.steps(),
        test_fixture: false,
        not_covered: marks.not_covered,
        guarantee: cal,
    };
    Ok(Arc::new(LinearServed {
        info,
        predictor,
        preprocessing: loaded.preprocessing,
    }))
}

/// Runs `privpred serve`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.max_body_bytes == Some(0) {
        return Err(usage(
            "invalid max-body-bytes = 0: must be at least 1 (no request body would fit)",
        ));
    }
    let (model, ledger, spend_mark) = load_model(&args.model, &args.keys, args.ledger.as_deref())?;
    let tokens = match &args.tokens {
        Some(p) => Some(TokenSet::load(p).map_err(usage)?),
        None => None,
    };
    let mut cfg = ServeConfig::new(args.listen.clone());
    cfg.ledger = ledger;
    cfg.tokens = tokens;
    cfg.max_batch = args.max_batch;
    cfg.max_body_bytes = args.max_body_bytes;
    cfg.answer_store = !args.no_answer_store;
    cfg.share_answer_store = args.share_answer_store;
    cfg.init_ledger = args.init_ledger;
    cfg.spend_mark = spend_mark;
    cfg.allow_invalid_guarantee = args.allow_invalid_guarantee;
    cfg.limits.max_connections = args.max_connections;
    cfg.limits.header_timeout = seconds("--header-timeout", args.header_timeout)?;
    cfg.limits.body_timeout = seconds("--body-timeout", args.body_timeout)?;
    cfg.limits.idle_timeout = seconds("--idle-timeout", args.idle_timeout)?;
    let info = model.info().clone();
    privpred_serve::run_until_signal(model, cfg, |addr, notes| {
        eprintln!(
            "privpred serve: model {} ({}, {}, ε = {}, δ = {}{})",
            args.model.display(),
            info.method,
            info.guarantee.mode(),
            super::shared::short(info.guarantee.epsilon()),
            super::shared::short(info.guarantee.delta()),
            if info.guarantee.is_valid() {
                ""
            } else {
                "; guarantee NOT valid"
            }
        );
        for n in notes {
            eprintln!("privpred serve: {n}");
        }
        // The one line on stdout: scripts and tests read the bound address from it.
        println!("listening on http://{addr}");
        let _ = std::io::stdout().flush();
    })
    .map_err(|e| {
        if e.is_config() {
            usage(e)
        } else {
            anyhow::Error::new(e)
        }
    })
    .context("privpred serve")?;
    eprintln!("privpred serve: shut down cleanly");
    Ok(())
}

/// Serving a deep-model artifact.
#[cfg(feature = "nn")]
mod nn {
    use crate::exit::usage;
    use privpred_core::{Budget, Method};
    use privpred_nn::artifact::{ModelKind, NnModel};
    use privpred_serve::ServeError;
    use privpred_serve::model::{Answer, ModelInfo, ServedModel};
    use rand_chacha::ChaCha20Rng;
    use std::path::Path;
    use std::sync::Arc;

    struct NnServed {
        info: ModelInfo,
        model: NnModel,
    }

    impl ServedModel for NnServed {
        fn info(&self) -> &ModelInfo {
            &self.info
        }

        fn preprocess(&self, raw: &[f32]) -> Result<Vec<f32>, String> {
            // raw pixels are the model's input; the normalisation runs inside the model
            self.model.check_rows(&[raw]).map_err(|e| e.to_string())?;
            Ok(raw.to_vec())
        }

        fn answer(
            &self,
            rows: &[Vec<f32>],
            rng: &mut ChaCha20Rng,
        ) -> privpred_serve::Result<Vec<Answer>> {
            let refs: Vec<&[f32]> = rows.iter().map(|r| r.as_slice()).collect();
            Ok(self
                .model
                .predict(&refs, rng)
                .map_err(|e| ServeError::Model(e.to_string()))?
                .into_iter()
                .map(|a| Answer {
                    label: a.label,
                    scores: a.scores,
                })
                .collect())
        }
    }

    pub fn served(
        path: &Path,
        model: NnModel,
        marks: privpred_release::Marks,
        model_id: String,
    ) -> anyhow::Result<Arc<dyn ServedModel>> {
        let h = &model.header;
        let (method, budget) = match h.kind {
            ModelKind::NonPrivate => {
                return Err(usage(format!(
                    "--model {}: holds a non-private ResNet, which has no privacy guarantee; serve a private model",
                    path.display()
                )));
            }
            ModelKind::DpSgd => (Method::DpSgd, Budget::Unlimited),
            ModelKind::Teachers => {
                let b = h
                    .calibration
                    .as_ref()
                    .and_then(|c| c.budget().get())
                    .ok_or_else(|| {
                        usage(format!(
                            "--model {}: a subsample-and-aggregate ensemble must state a finite budget B",
                            path.display()
                        ))
                    })?;
                let b = Budget::finite(b).map_err(|e| usage(e.to_string()))?;
                (Method::SubsampleAggregate, b)
            }
        };
        let guarantee = h.calibration.clone().ok_or_else(|| {
            usage(format!(
                "--model {}: a private model without its calibration",
                path.display()
            ))
        })?;
        let n = &h.normalization;
        let c = h.config;
        let info = ModelInfo {
            model_id,
            method,
            guarantee,
            budget,
            input_dim: model.input_dim(),
            classes: model.classes(),
            releases_scores: privpred_release::releases_scores(Some(method)),
            preprocessing: vec![
                format!(
                    "raw pixels {}×{}×{} (channel-major, 0..255)",
                    c.in_channels, c.image_size, c.image_size
                ),
                format!(
                    "per-channel normalisation: mean {:?}, std {:?} (of pixel/255)",
                    n.mean, n.std
                ),
                format!(
                    "ResNet ({} networks, widths {:?}, {} blocks per stage)",
                    h.members, c.widths, c.blocks_per_stage
                ),
            ],
            test_fixture: false,
            not_covered: marks.not_covered,
        };
        Ok(Arc::new(NnServed { info, model }))
    }
}
