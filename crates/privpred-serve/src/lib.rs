//! # privpred-serve
//!
//! An HTTP prediction service for private-prediction models with an **enforced, durable
//! inference budget** (docs/guarantees.md#neighbouring-relations: the guarantee covers B answers). See [`ledger`] for the
//! accounting guarantees (recorded before release, no overspend under concurrency or across
//! replicas, fail closed, crash-safe), [`server`] for the API, [`auth`] for bearer tokens.
//! [`odometer`] is the data owner's privacy odometer (a limit per dataset on the total (ε, δ)
//! of the models trained from it), on the same two databases.
//!
//! Endpoints: `POST /v1/predict`, `GET /v1/model`, `GET /healthz`, `GET /metrics`
//! (Prometheus), `GET /openapi.json`.
//!
//! The server is generic over [`ServedModel`]; the `privpred` binary adapts trained linear
//! artifacts to it. [`model::FixtureModel`] is a synthetic TEST FIXTURE for tests and benches.

pub mod auth;
pub mod client;
pub mod error;
pub mod ledger;
pub mod metrics;
pub mod model;
pub mod odometer;
pub mod openapi;
pub mod server;

pub use auth::TokenSet;
pub use error::{Result, ServeError};
pub use ledger::{BudgetState, Ledger, LedgerSpec, SpendMark};
pub use model::{Answer, FixtureModel, FixtureSpec, ModelInfo, ServedModel};
pub use server::{ServeConfig, Server, run_until_signal, shutdown_signal};
