//! A private schema draft charged to the data's privacy odometer: the one path of
//! `privpred data schema --epsilon` and of the Python bindings' `draft_schema`.
//!
//! Every check that can refuse the draft is made before anything is charged: its parameters
//! and the table's shape ([`PrivateDraft::plan`]), the odometer's arguments (a key is
//! required: a table's default key is the identity of its rows read through its schema, which
//! is what is being drafted) and a seed with an odometer (a seeded draft's noise can be
//! regenerated from the seed: an experiment, not a release the odometer can add up). The
//! draft's whole (ε, δ) is then reserved against the key's limit, the schema drafted with the
//! OS-seeded generator (or the experiment seed), the key recorded in its `drafted`, and the
//! charge confirmed before the schema is returned. A draft that fails after reading the data
//! keeps its charge (no refund: the failure is itself an outcome of the data).

use super::{Charge, OdometerError, Reservation, check_key, parse_spec, reserve};
use privpred_core::Neighbours;
use privpred_data::DataError;
use privpred_data::schema::{DraftPlan, PrivateDraft, Schema};

/// The method a draft's charge is recorded under in the odometer.
pub const DRAFT_METHOD: &str = "schema-draft";

/// Why a private draft was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum DraftError {
    /// A bad parameter, or a table that does not fit the declarations: nothing charged.
    #[error("{0}")]
    Invalid(DataError),
    /// A bad combination of the odometer's arguments or the seed: nothing charged.
    #[error("{0}")]
    Usage(String),
    /// The odometer refused the charge (nothing recorded: no limit, or past it) or failed.
    #[error("{0}")]
    Odometer(OdometerError),
    /// The draft failed after reading the data; with `charged`, its charge stays counted.
    #[error("{error}")]
    Failed {
        /// What went wrong.
        error: DataError,
        /// Whether the draft had been charged to an odometer (the charge stays).
        charged: bool,
    },
    /// The operating system's generator failed: nothing charged, nothing drafted.
    #[error("{0}")]
    Noise(privpred_core::CoreError),
}

impl DraftError {
    /// Whether the error is the caller's (bad input or a refusal: exit code 2 at the CLI).
    pub fn is_user_error(&self) -> bool {
        match self {
            DraftError::Odometer(e) => e.is_user_error(),
            DraftError::Noise(_) => false,
            _ => true,
        }
    }
}

/// A released private draft.
#[derive(Debug)]
pub struct DraftRelease {
    /// The drafted schema (its `drafted` records the cost, and the odometer key).
    pub schema: Schema,
    /// The checked draft (its budget split in words: [`DraftPlan::describe`]).
    pub plan: DraftPlan,
}

/// Drafts the table (`header`, `rows`: as [`PrivateDraft::plan`] takes them) privately with
/// `opts`, charged to the privacy odometer `odometer` (an SQLite path or a PostgreSQL URL)
/// under `odometer_key` before the schema is returned; `on_charged` is told the charge once it
/// is reserved (before the data is read), `note` is recorded with the confirmed charge.
/// Without an odometer the draft is not charged anywhere; it is still drawn from the
/// OS-seeded generator unless `opts.seed` makes it an experiment.
pub fn private_draft(
    opts: &PrivateDraft,
    header: Option<&[String]>,
    rows: &[Vec<String>],
    odometer: Option<&str>,
    odometer_key: Option<&str>,
    note: &str,
    on_charged: impl FnOnce(&Charge, &Reservation),
) -> Result<DraftRelease, DraftError> {
    let plan = opts.plan(header, rows).map_err(DraftError::Invalid)?;
    let target = match (odometer, odometer_key) {
        (None, None) => None,
        (None, Some(k)) => {
            return Err(DraftError::Usage(format!(
                "invalid --odometer-key = {k:?}: given without --odometer; give the odometer the key's limit is kept in, or no key"
            )));
        }
        (Some(_), None) => {
            return Err(DraftError::Usage(
                "invalid --odometer-key = (none): required with --odometer: a table's default key is the identity of its rows as read through its schema, which is what is being drafted; give the key whose limit the data owner set, and train with the same key".into(),
            ));
        }
        (Some(_), Some(_)) if opts.seed.is_some() => {
            return Err(DraftError::Usage(format!(
                "--seed {} is refused with --odometer: a seeded draft's noise can be regenerated from the seed, it is not a release the odometer can add up; draft without --seed",
                opts.seed.unwrap_or_default()
            )));
        }
        (Some(url), Some(key)) => {
            let spec = parse_spec(url).map_err(DraftError::Odometer)?;
            check_key(key).map_err(DraftError::Odometer)?;
            Some((spec, key.to_string()))
        }
    };
    let mut rng = match opts.seed {
        Some(s) => privpred_core::noise::seeded_rng(s),
        None => privpred_core::noise::release_rng().map_err(DraftError::Noise)?,
    };
    let (epsilon, delta) = plan.cost();
    let reservation = match &target {
        None => None,
        Some((spec, key)) => {
            let charge = Charge {
                epsilon,
                delta,
                method: DRAFT_METHOD.into(),
                budget: None,
                neighbours: Neighbours::ReplaceOne.name().to_string(),
            };
            let r = reserve(spec, key, &charge).map_err(DraftError::Odometer)?;
            on_charged(&charge, &r);
            Some(r)
        }
    };
    let mut schema = plan
        .draft(rows, &mut rng)
        .map_err(|error| DraftError::Failed {
            error,
            charged: reservation.is_some(),
        })?;
    // the key the draft was charged to: a fit on the drafted schema with the odometer charges
    // it too
    if let (Some((_, key)), Some(d)) = (&target, schema.drafted.as_mut()) {
        d.odometer_key = Some(key.clone());
    }
    if let Some(r) = reservation {
        r.confirm(note).map_err(DraftError::Odometer)?;
    }
    Ok(DraftRelease { schema, plan })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> (Vec<String>, Vec<Vec<String>>) {
        let header = ["x", "c", "y"].map(String::from).to_vec();
        let rows = (0..400)
            .map(|i| {
                vec![
                    (i % 50).to_string(),
                    ["a", "b"][i % 2].to_string(),
                    ["p", "q"][(i / 2) % 2].to_string(),
                ]
            })
            .collect();
        (header, rows)
    }

    fn opts(seed: Option<u64>) -> PrivateDraft {
        PrivateDraft {
            epsilon: 20.0,
            delta: Some(1e-6),
            quantile: 0.01,
            label: None,
            categorical: vec!["c".into()],
            ignore: vec![],
            seed,
        }
    }

    #[test]
    fn the_odometer_arguments_are_checked_before_any_charge() {
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().join("odo.sqlite");
        let url = url.to_str().unwrap();
        let (h, rows) = table();
        let run = |o: &PrivateDraft, odo: Option<&str>, key: Option<&str>| {
            private_draft(o, Some(&h), &rows, odo, key, "test", |_, _| {
                panic!("charged")
            })
        };
        for (o, odo, key, needle) in [
            (opts(Some(3)), Some(url), Some("k"), "--seed 3 is refused"),
            (
                opts(None),
                Some(url),
                None,
                "invalid --odometer-key = (none)",
            ),
            (opts(None), None, Some("k"), "given without --odometer"),
        ] {
            let e = run(&o, odo, key).unwrap_err();
            assert!(matches!(e, DraftError::Usage(_)), "{e}");
            assert!(e.to_string().contains(needle), "{e}");
        }
        // a key without a limit: refused by the odometer, nothing created
        let e = run(&opts(None), Some(url), Some("k")).unwrap_err();
        assert!(
            matches!(e, DraftError::Odometer(_)) && e.is_user_error(),
            "{e}"
        );
        // bad parameters first, before the odometer is looked at
        let mut bad = opts(None);
        bad.epsilon = 0.0;
        let e = run(&bad, Some(url), Some("k")).unwrap_err();
        assert!(e.to_string().contains("--epsilon = 0"), "{e}");
    }

    #[test]
    fn a_draft_is_charged_its_cost_and_records_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().join("odo.sqlite");
        let url = url.to_str().unwrap();
        let spec = parse_spec(url).unwrap();
        let limit = super::super::Limit {
            epsilon: 30.0,
            delta: 1e-5,
            neighbours: Neighbours::ReplaceOne.name().to_string(),
        };
        super::super::set_limit(&spec, "k", &limit).unwrap();
        let (h, rows) = table();
        let draft = |on_charge: &mut dyn FnMut(&Charge, &Reservation)| {
            private_draft(
                &opts(None),
                Some(&h),
                &rows,
                Some(url),
                Some("k"),
                "t",
                |c, r| on_charge(c, r),
            )
        };
        let mut seen = None;
        let r = draft(&mut |c, _| {
            seen = Some((c.epsilon, c.delta, c.method.clone()));
        })
        .unwrap();
        assert_eq!(seen, Some((20.0, 1e-6, DRAFT_METHOD.to_string())));
        let d = r.schema.drafted.as_ref().unwrap();
        assert_eq!((d.epsilon, d.delta), (20.0, 1e-6));
        assert_eq!(d.odometer_key.as_deref(), Some("k"));
        let rec = super::super::show(&spec, Some("k")).unwrap();
        assert_eq!(rec[0].spent.fits, 1);
        assert_eq!((rec[0].spent.epsilon, rec[0].spent.delta), (20.0, 1e-6));
        // past the limit: refused before anything is drafted
        let e = draft(&mut |_, _| {}).unwrap_err();
        assert!(e.to_string().contains("past the limit"), "{e}");
    }
}
