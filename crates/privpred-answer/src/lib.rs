//! # privpred-answer
//!
//! The one answering path of privpred, between the release crate (`privpred-release`, which
//! writes, verifies and opens model files) and the front ends (`privpred predict`,
//! `privpred serve`, the Python bindings), which all answer through it:
//!
//! * [`Answering::open`]: a model released by `privpred_release::open_file` becomes an
//!   answering model: [`privpred_release::Released::for_release`] decides whether it may
//!   answer (seeded models refused, uncovered files marked), and a model whose answers spend
//!   a finite budget B gets its [`Account`];
//! * [`Account`]: the budget of one model — its identity ([`BudgetIdentity`]: the signed
//!   ledger id and B), its [`ledger`] (by default `sqlite:<MODEL>.ledger.sqlite` beside the
//!   model file) and its spend mark ([`ledger::SpendMark`], by default
//!   `<MODEL>.ledger-mark.json`). [`Account::open`] is the one way a ledger is opened for
//!   answering: one-shot ([`Account::spend_once`], `predict`), long-lived async (`serve`) or
//!   blocking ([`Account::session`], Python);
//! * [`odometer`]: the data owner's privacy odometer, on the same two databases.

pub mod account;
pub mod error;
pub mod ledger;
pub mod odometer;

pub use account::{
    Account, Answering, BudgetIdentity, Session, default_ledger, default_spend_mark, ledger_spec,
    seed_gate,
};
pub use error::{AnswerError, Result};
pub use ledger::{BudgetState, Ledger, LedgerSpec, SpendMark};
