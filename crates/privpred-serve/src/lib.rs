//! # privpred-serve
//!
//! An HTTP prediction service for private-prediction models with an **enforced, durable
//! inference budget** (docs/guarantees.md#neighbouring-relations: the guarantee covers B answers). It is HTTP
//! only: the budget is spent through the answering path of `privpred-answer` (its ledger
//! module states the accounting guarantees: recorded before release, no overspend under
//! concurrency or across replicas, fail closed, crash-safe). See [`server`] for the API,
//! [`auth`] for bearer tokens.
//!
//! Endpoints: `POST /v1/predict`, `GET /v1/model`, `GET /healthz`, `GET /metrics`
//! (Prometheus), `GET /openapi.json`.
//!
//! The server is generic over [`ServedModel`]; the `privpred` binary adapts trained linear
//! artifacts to it. [`model::FixtureModel`] is a synthetic TEST FIXTURE for tests and benches.

pub mod auth;
pub mod client;
pub mod error;
pub mod metrics;
pub mod model;
pub mod openapi;
pub mod server;

pub use auth::TokenSet;
pub use error::{Result, ServeError};
pub use model::{Answer, FixtureModel, FixtureSpec, ModelInfo, QueryColumn, ServedModel};
pub use server::{ServeConfig, Server, run_until_signal, shutdown_signal};
