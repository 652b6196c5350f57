//! The data owner's privacy odometer: a durable record, per dataset, of the (ε, δ) of every
//! model released from it, and a limit that no further release may pass.
//!
//! Every fit on a dataset is another release of it, whatever the method: a private-training
//! model is (ε, δ)-DP once, a private-prediction model is (ε, δ)-DP for all of its B answers
//! together (its calibration covers the whole budget). The odometer charges each fit that
//! whole guarantee.
//!
//! * **Total: basic composition** (Dwork, McSherry, Nissim & Smith 2006; Dwork & Roth 2014,
//!   Theorem 3.16): k releases that are (εᵢ, δᵢ)-DP on the same dataset are together
//!   (Σεᵢ, Σδᵢ)-DP, also when each release is chosen after seeing the earlier ones. The sums
//!   are taken in the order the fits were recorded, in `f64`, and compared with the limit
//!   exactly (no tolerance: a rounding that lands above the limit refuses the fit).
//! * **Limit first.** A dataset is charged only once its owner has set a limit
//!   (`set_limit`); `reserve` on a dataset without one is refused, and so is any fit whose
//!   charge would take either total past the limit. The odometer (SQLite file or PostgreSQL
//!   tables) is created by `set_limit`, never by `reserve`.
//! * **Reserve before training.** [`reserve`] checks the limit and records the fit as
//!   `reserved` in one write transaction (SQLite `BEGIN IMMEDIATE`, the database-wide write
//!   lock; PostgreSQL `SELECT … FOR UPDATE` on the dataset's limit row), so two fits started
//!   at once can never both pass the limit. A reserved fit counts: a trainer killed after
//!   reserving leaves its charge in place. [`Reservation::confirm`] marks it `released` once
//!   the model is written; [`Reservation::cancel`] frees it only when nothing was released.
//! * **One relation per dataset.** The limit names its neighbouring relation; a fit whose
//!   guarantee is under another relation is refused (the guarantees do not add up).
//! * **Keyed on the data.** The key of a dataset is [`dataset_identity`] (a SHA-256 of its
//!   training rows, independent of their order and file format), or a name the owner gives.
//!   The odometer is the owner's private store, never released.

mod draft;
mod postgres;
mod sqlite;

pub use draft::{DRAFT_METHOD, DraftError, DraftRelease, private_draft};

use crate::ledger::LedgerSpec;
use serde::Serialize;
use sha2::{Digest, Sha256};

/// What went wrong with an odometer operation.
#[derive(Debug, thiserror::Error)]
pub enum OdometerError {
    /// The fit would pass the limit, or the dataset has no limit: nothing was recorded.
    #[error("{0}")]
    Refused(String),
    /// A bad argument or a missing odometer (bad user input).
    #[error("{0}")]
    Usage(String),
    /// The store could not be opened, read or written.
    #[error("odometer store: {0}")]
    Store(String),
}

impl OdometerError {
    /// Whether the error is the user's (a refusal or bad input: exit code 2 at the CLI).
    pub fn is_user_error(&self) -> bool {
        !matches!(self, OdometerError::Store(_))
    }
}

impl From<rusqlite::Error> for OdometerError {
    fn from(e: rusqlite::Error) -> Self {
        OdometerError::Store(e.to_string())
    }
}

impl From<tokio_postgres::Error> for OdometerError {
    fn from(e: tokio_postgres::Error) -> Self {
        OdometerError::Store(match e.as_db_error() {
            Some(db) => db.message().to_string(),
            None => e.to_string(),
        })
    }
}

/// Result of odometer operations.
pub type Result<T> = std::result::Result<T, OdometerError>;

/// Where the odometer lives: an SQLite file (`sqlite:PATH` or a bare path) or PostgreSQL.
pub fn parse_spec(s: &str) -> Result<LedgerSpec> {
    let t = s.trim();
    if t.is_empty() {
        return Err(OdometerError::Usage(
            "invalid odometer '': give an SQLite path (or sqlite:PATH) or a postgres:// URL".into(),
        ));
    }
    if t.starts_with("sqlite:")
        || t.starts_with("postgres")
        || (t.contains('=') && t.split_whitespace().all(|kv| kv.contains('=')))
    {
        return LedgerSpec::parse(t)
            .map_err(|e| OdometerError::Usage(e.to_string().replace("--ledger", "odometer")));
    }
    Ok(LedgerSpec::Sqlite(t.into()))
}

/// Checks a key given by the owner: 1 to 256 printable characters.
pub fn check_key(k: &str) -> Result<()> {
    if k.is_empty() || k.len() > 256 || k.chars().any(char::is_control) {
        return Err(OdometerError::Usage(format!(
            "invalid odometer key {k:?}: must be 1 to 256 printable characters"
        )));
    }
    Ok(())
}

/// The key a fit is charged to: the key given, else the key a privately drafted schema's
/// draft was charged to (its `drafted.odometer_key`: the draft and the fits add up against
/// one limit), else `identity()` (the training rows' [`dataset_identity`]).
pub fn fit_key(
    given: Option<&str>,
    schema: Option<&privpred_data::Schema>,
    identity: impl FnOnce() -> String,
) -> Result<String> {
    let drafted = schema.and_then(|s| s.drafted.as_ref()?.odometer_key.as_deref());
    match given.or(drafted) {
        Some(k) => {
            check_key(k)?;
            Ok(k.to_string())
        }
        None => Ok(identity()),
    }
}

/// The identity of a training set: SHA-256 over the row count, the number of features and
/// the sorted SHA-256 digests of its rows (each row: its features as little-endian `f32`,
/// −0 read as +0, then its label as little-endian `u32`). The same rows in any order, read
/// from any file format, have the same identity; any changed, added or removed row changes it.
pub fn dataset_identity(d: usize, features: &[f32], labels: &[u32]) -> String {
    let n = labels.len();
    let mut rows: Vec<[u8; 32]> = Vec::with_capacity(n);
    let mut buf = Vec::with_capacity(4 * d + 4);
    for (i, y) in labels.iter().enumerate() {
        buf.clear();
        for v in &features[i * d..(i + 1) * d] {
            let v = if *v == 0.0 { 0.0f32 } else { *v };
            buf.extend_from_slice(&v.to_le_bytes());
        }
        buf.extend_from_slice(&y.to_le_bytes());
        rows.push(Sha256::digest(&buf).into());
    }
    rows.sort_unstable();
    let mut h = Sha256::new();
    h.update(b"privpred dataset identity v1");
    h.update((n as u64).to_le_bytes());
    h.update((d as u64).to_le_bytes());
    for r in &rows {
        h.update(r);
    }
    let out: [u8; 32] = h.finalize().into();
    format!(
        "sha256:{}",
        out.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// The owner's limit on a dataset's total.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Limit {
    /// The largest total ε.
    pub epsilon: f64,
    /// The largest total δ.
    pub delta: f64,
    /// The neighbouring relation every charged guarantee must be stated under.
    pub neighbours: String,
}

impl Limit {
    /// Checks ε ≥ 0 finite, δ ∈ [0, 1).
    pub fn check(&self) -> Result<()> {
        if !(self.epsilon.is_finite() && self.epsilon >= 0.0) {
            return Err(OdometerError::Usage(format!(
                "invalid limit epsilon = {}: must be a finite number >= 0",
                self.epsilon
            )));
        }
        if !(self.delta.is_finite() && (0.0..1.0).contains(&self.delta)) {
            return Err(OdometerError::Usage(format!(
                "invalid limit delta = {}: must be in [0, 1)",
                self.delta
            )));
        }
        Ok(())
    }
}

/// What one fit costs: the whole guarantee of its release.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Charge {
    /// ε of the release (for budgeted methods: of all B answers).
    pub epsilon: f64,
    /// δ of the release.
    pub delta: f64,
    /// The method's name.
    pub method: String,
    /// The inference budget B (private-prediction methods), else `None`.
    pub budget: Option<u64>,
    /// The neighbouring relation of the guarantee.
    pub neighbours: String,
}

/// One recorded fit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// Sequence number in the store.
    pub id: i64,
    /// What it was charged.
    #[serde(flatten)]
    pub charge: Charge,
    /// `reserved` (training, or a trainer that stopped before confirming: counted),
    /// `released` (the model was written) or `cancelled` (nothing released: not counted).
    pub state: String,
    /// Free text (the output file).
    pub note: String,
    /// When it was recorded (UTC).
    pub created_at: String,
}

/// The total spent on a dataset.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Totals {
    /// Fits counted (reserved or released).
    pub fits: u64,
    /// Σε (basic composition).
    pub epsilon: f64,
    /// Σδ (basic composition).
    pub delta: f64,
}

impl Totals {
    /// Basic composition of the counted entries, in the order recorded.
    pub fn of(entries: &[Entry]) -> Totals {
        let mut t = Totals {
            fits: 0,
            epsilon: 0.0,
            delta: 0.0,
        };
        for e in entries.iter().filter(|e| e.state != "cancelled") {
            t = t.plus(&e.charge);
        }
        t
    }

    /// The total after one more charge.
    pub fn plus(&self, c: &Charge) -> Totals {
        Totals {
            fits: self.fits + 1,
            epsilon: self.epsilon + c.epsilon,
            delta: self.delta + c.delta,
        }
    }
}

/// A dataset's record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatasetRecord {
    /// The dataset's key.
    pub dataset: String,
    /// The owner's limit.
    pub limit: Limit,
    /// The total by basic composition.
    pub spent: Totals,
    /// Every recorded fit, oldest first.
    pub fits: Vec<Entry>,
}

/// The decision on a charge, made inside the reserving transaction.
pub(crate) fn decide(
    dataset: &str,
    limit: Option<&Limit>,
    entries: &[Entry],
    charge: &Charge,
) -> Result<(Totals, Totals)> {
    let Some(limit) = limit else {
        return Err(OdometerError::Refused(format!(
            "the odometer has no limit for dataset {dataset}: set one first (privpred odometer limit), a fit is charged only against a limit its owner set"
        )));
    };
    if charge.neighbours != limit.neighbours {
        return Err(OdometerError::Refused(format!(
            "the odometer of dataset {dataset} adds up {} guarantees; this fit's guarantee is {} (the two do not compose): train with --neighbours {}",
            limit.neighbours, charge.neighbours, limit.neighbours
        )));
    }
    let finite = charge.epsilon.is_finite()
        && charge.epsilon >= 0.0
        && charge.delta.is_finite()
        && (0.0..=1.0).contains(&charge.delta);
    if !finite {
        return Err(OdometerError::Refused(format!(
            "a {} fit has no finite guarantee (epsilon = {}, delta = {}): it would pass any limit of dataset {dataset}",
            charge.method, charge.epsilon, charge.delta
        )));
    }
    let before = Totals::of(entries);
    let after = before.plus(charge);
    if after.epsilon > limit.epsilon || after.delta > limit.delta {
        return Err(OdometerError::Refused(format!(
            "refused by the privacy odometer of dataset {dataset}: {} fit(s) spent epsilon = {}, delta = {}; this fit ({}) would cost epsilon = {}, delta = {}, for a total of epsilon = {}, delta = {} (basic composition), past the limit epsilon = {}, delta = {}",
            before.fits,
            short(before.epsilon),
            short(before.delta),
            charge.method,
            short(charge.epsilon),
            short(charge.delta),
            short(after.epsilon),
            short(after.delta),
            short(limit.epsilon),
            short(limit.delta)
        )));
    }
    Ok((before, after))
}

/// A number in a short form: up to 6 significant digits, exponent form outside
/// [1e-4, 1e6).
pub fn short(v: f64) -> String {
    fn trim(s: &str) -> &str {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.')
        } else {
            s
        }
    }
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    if (1e-4..1e6).contains(&v.abs()) {
        let prec = (5 - v.abs().log10().floor() as i64).max(0) as usize;
        trim(&format!("{v:.prec$}")).to_string()
    } else {
        let s = format!("{v:.5e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        format!("{}e{e}", trim(m))
    }
}

/// A fit recorded as `reserved`; [`Reservation::confirm`] or [`Reservation::cancel`] it.
#[derive(Debug)]
pub struct Reservation {
    spec: LedgerSpec,
    /// The entry's id.
    pub id: i64,
    /// The dataset's key.
    pub dataset: String,
    /// The total before this fit.
    pub before: Totals,
    /// The total with this fit.
    pub after: Totals,
    /// The limit it was checked against.
    pub limit: Limit,
}

impl Reservation {
    /// The odometer the fit is recorded in.
    pub fn spec(&self) -> &LedgerSpec {
        &self.spec
    }

    /// Marks the fit `released` (its model was written), noting `note` (the output file).
    pub fn confirm(&self, note: &str) -> Result<()> {
        self.set_state("released", note)
    }

    /// Marks the fit `cancelled` (nothing was released, so nothing is charged).
    pub fn cancel(&self) -> Result<()> {
        self.set_state("cancelled", "")
    }

    fn set_state(&self, state: &str, note: &str) -> Result<()> {
        match &self.spec {
            LedgerSpec::Sqlite(p) => sqlite::set_state(p, self.id, state, note),
            LedgerSpec::Postgres(c) => rt()?.block_on(postgres::set_state(c, self.id, state, note)),
        }
    }
}

fn rt() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| OdometerError::Store(format!("cannot start the async runtime: {e}")))
}

/// Sets (or changes) the limit of `dataset`, creating the odometer if it does not exist.
pub fn set_limit(spec: &LedgerSpec, dataset: &str, limit: &Limit) -> Result<DatasetRecord> {
    limit.check()?;
    match spec {
        LedgerSpec::Sqlite(p) => sqlite::set_limit(p, dataset, limit),
        LedgerSpec::Postgres(c) => rt()?.block_on(postgres::set_limit(c, dataset, limit)),
    }
}

/// The records of every dataset (or of `dataset` only).
pub fn show(spec: &LedgerSpec, dataset: Option<&str>) -> Result<Vec<DatasetRecord>> {
    match spec {
        LedgerSpec::Sqlite(p) => sqlite::show(p, dataset),
        LedgerSpec::Postgres(c) => rt()?.block_on(postgres::show(c, dataset)),
    }
}

/// Checks `charge` against the limit of `dataset` and records it as `reserved`, in one write
/// transaction; refused (nothing recorded) when there is no limit or it would be passed.
pub fn reserve(spec: &LedgerSpec, dataset: &str, charge: &Charge) -> Result<Reservation> {
    let (id, before, after, limit) = match spec {
        LedgerSpec::Sqlite(p) => sqlite::reserve(p, dataset, charge)?,
        LedgerSpec::Postgres(c) => rt()?.block_on(postgres::reserve(c, dataset, charge))?,
    };
    Ok(Reservation {
        spec: spec.clone(),
        id,
        dataset: dataset.to_string(),
        before,
        after,
        limit,
    })
}

/// Creates a PostgreSQL schema (for isolated tests); no-op for SQLite.
pub fn create_test_schema(spec: &LedgerSpec, schema: &str) -> Result<()> {
    match spec {
        LedgerSpec::Sqlite(_) => Ok(()),
        LedgerSpec::Postgres(c) => rt()?.block_on(postgres::create_schema(c, schema)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn charge(e: f64, d: f64) -> Charge {
        Charge {
            epsilon: e,
            delta: d,
            method: "model-sensitivity".into(),
            budget: None,
            neighbours: "replace-one".into(),
        }
    }

    #[test]
    fn identity_ignores_row_order_and_sees_every_change() {
        let f = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let a = dataset_identity(2, &f, &[0, 1, 0]);
        let b = dataset_identity(2, &[5.0, 6.0, 1.0, 2.0, 3.0, 4.0], &[0, 0, 1]);
        assert_eq!(a, b);
        assert_ne!(a, dataset_identity(2, &f, &[0, 1, 1]));
        assert_ne!(a, dataset_identity(3, &f, &[0, 1]));
        assert_ne!(a, dataset_identity(2, &f[..4], &[0, 1]));
        let mut g = f;
        g[5] = 6.000001;
        assert_ne!(a, dataset_identity(2, &g, &[0, 1, 0]));
        // -0 and +0 are the same number
        assert_eq!(
            dataset_identity(1, &[0.0], &[1]),
            dataset_identity(1, &[-0.0], &[1])
        );
    }

    #[test]
    fn basic_composition_refuses_exactly_past_the_limit() {
        let limit = Limit {
            epsilon: 1.0,
            delta: 1e-5,
            neighbours: "replace-one".into(),
        };
        let mut entries = Vec::new();
        for i in 0..4 {
            let (_, after) = decide("d", Some(&limit), &entries, &charge(0.25, 2.5e-6)).unwrap();
            assert_eq!(after.fits, i + 1);
            entries.push(Entry {
                id: i as i64,
                charge: charge(0.25, 2.5e-6),
                state: if i == 0 { "reserved" } else { "released" }.into(),
                note: String::new(),
                created_at: String::new(),
            });
        }
        // 4 × 0.25 = 1 exactly: the limit is reached, the next fit (any ε > 0) is refused
        let e = decide("d", Some(&limit), &entries, &charge(1e-9, 0.0)).unwrap_err();
        assert!(matches!(e, OdometerError::Refused(_)));
        assert!(e.to_string().contains("4 fit(s) spent epsilon = 1"), "{e}");
        // ε = 0 and δ = 0 fit still passes; a cancelled fit is not counted
        decide("d", Some(&limit), &entries, &charge(0.0, 0.0)).unwrap();
        entries[0].state = "cancelled".into();
        decide("d", Some(&limit), &entries, &charge(0.25, 2.5e-6)).unwrap();
        // δ alone past the limit
        assert!(decide("d", Some(&limit), &entries, &charge(0.0, 2.6e-6)).is_err());
        // no limit, another relation, no finite guarantee
        assert!(decide("d", None, &[], &charge(0.1, 0.0)).is_err());
        let mut c = charge(0.1, 0.0);
        c.neighbours = "add-remove".into();
        assert!(decide("d", Some(&limit), &[], &c).is_err());
        assert!(decide("d", Some(&limit), &[], &charge(f64::INFINITY, 0.0)).is_err());
    }

    #[test]
    fn short_numbers() {
        assert_eq!(short(1.0), "1");
        assert_eq!(short(0.25), "0.25");
        assert_eq!(short(1e-5), "1e-5");
        assert_eq!(short(1.5e-7), "1.5e-7");
        assert_eq!(short(123456789.0), "1.23457e8");
        assert_eq!(short(0.1 + 0.2), "0.3");
    }
}
