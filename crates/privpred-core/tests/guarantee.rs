//! The typed guarantee: every calibration's `Calibration` and `Mechanism`
//! round-trip through JSON, the serialised record is the one privpred wrote before the types
//! existed (checked against a copy of the old struct, `OldCalibration` below), and records
//! written by older versions load with the right mechanism and validity.

use privpred_core::calibrate::{CalibrationRequest, calibrate};
use privpred_core::certify::{CertifiedFit, calibrate_certified};
use privpred_core::{
    Assumptions, Budget, Calibration, CalibrationMode, DpSgdSchedule, Mechanism, Method,
    Neighbours, Noise, Privacy, Scores, Validity, VectorNoise,
};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

/// The `Calibration` struct as it was before the typed guarantee (main at 57d4691), with the
/// plain-number `Privacy` and `Budget` of that version: the reference for the wire format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct OldCalibration {
    method: Method,
    calibration: CalibrationMode,
    privacy: OldPrivacy,
    budget: OldBudget,
    noise: Noise,
    #[serde(default)]
    neighbours: Neighbours,
    assumptions: Assumptions,
    valid_guarantee: bool,
    notes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rho: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    noise_multiplier: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    epsilon_spent: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sampling_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    steps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    certified: Option<CertifiedFit>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct OldPrivacy {
    epsilon: f64,
    delta: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum OldBudget {
    Finite(u64),
    Unlimited,
}

const MODES: [CalibrationMode; 3] = [
    CalibrationMode::Paper,
    CalibrationMode::Corrected,
    CalibrationMode::Tight,
];

#[allow(clippy::too_many_arguments)]
fn request(
    method: Method,
    mode: CalibrationMode,
    eps: f64,
    delta: f64,
    b: u64,
    n: usize,
    lambda: f64,
    neighbours: Neighbours,
) -> Option<CalibrationRequest> {
    let mut r = CalibrationRequest::new(method, mode, Privacy::new(eps, delta).ok()?);
    if !method.is_private_training() {
        r.budget = Budget::finite(b).ok()?;
    }
    r.n = Some(n);
    r.lambda = Some(lambda);
    r.neighbours = neighbours;
    // 20 steps at q = 1/20: a quick accountant search
    r.dp_sgd = Some(DpSgdSchedule {
        batch_size: (n / 20).max(1),
        epochs: 1.0,
    });
    Some(r)
}

/// The checks of one calibration: JSON round trip of the calibration and of its mechanism,
/// the old struct reads the record and writes it back byte for byte, and the record reads
/// back into the same typed value.
fn check_round_trip(c: &Calibration) -> Result<(), TestCaseError> {
    prop_assert_eq!(c.mechanism.method(), c.method());
    let s = serde_json::to_string(c).unwrap();
    let back: Calibration = serde_json::from_str(&s).unwrap();
    prop_assert_eq!(&back, c);
    let m = serde_json::to_string(&c.mechanism).unwrap();
    prop_assert_eq!(serde_json::from_str::<Mechanism>(&m).unwrap(), c.mechanism);
    let g = serde_json::to_string(&c.guarantee).unwrap();
    prop_assert_eq!(
        &serde_json::from_str::<privpred_core::Guarantee>(&g).unwrap(),
        &c.guarantee
    );
    let old: OldCalibration = serde_json::from_str(&s).unwrap();
    prop_assert_eq!(serde_json::to_string(&old).unwrap(), s.clone());
    prop_assert_eq!(old.valid_guarantee, c.is_valid());
    prop_assert_eq!(old.noise, c.noise());
    // validity's reasons are notes, in the order written
    for r in c.guarantee.validity.reasons() {
        prop_assert!(c.notes.contains(r));
    }
    prop_assert!(privpred_core::validate::check_calibration(c).is_ok());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Every mechanism `calibrate` (and `calibrate_certified`) builds round-trips through JSON,
    /// and its record is the pre-typed wire format (DP-SGD at a 20-step schedule, which keeps
    /// its accountant search quick).
    #[test]
    fn every_calibrated_mechanism_round_trips_through_json(
        mi in 0usize..5,
        modei in 0usize..3,
        eps in 0.01f64..20.0,
        pure in any::<bool>(),
        delta_exp in -12.0f64..-2.0,
        b in 1u64..2000,
        n in 100usize..100_000,
        lambda in 1e-6f64..1.0,
        add_remove in any::<bool>(),
    ) {
        let delta = if pure { 0.0 } else { 10f64.powf(delta_exp) };
        let rel = if add_remove { Neighbours::AddRemove } else { Neighbours::ReplaceOne };
        let m = Method::ALL[mi];
        let Some(r) = request(m, MODES[modei], eps, delta, b, n, lambda, rel) else {
            return Ok(());
        };
        for c in [calibrate(&r), calibrate_certified(&r)].into_iter().flatten() {
            check_round_trip(&c)?;
        }
    }
}

/// Every variant of every method, at fixed settings (so no variant is left to chance).
#[test]
fn every_variant_is_built_and_round_trips() {
    let mut names = std::collections::BTreeSet::new();
    for m in Method::ALL {
        for mode in MODES {
            for delta in [0.0, 1e-5] {
                let r = request(
                    m,
                    mode,
                    1.0,
                    delta,
                    100,
                    60_000,
                    1e-3,
                    Neighbours::ReplaceOne,
                )
                .unwrap();
                for c in [calibrate(&r), calibrate_certified(&r)]
                    .into_iter()
                    .flatten()
                {
                    check_round_trip(&c).unwrap();
                    names.insert(c.mechanism.name());
                }
            }
        }
    }
    for want in [
        "output-perturbation",
        "objective-perturbation",
        "noisy-sgd",
        "noisy-logits",
        "exponential-over-votes",
        "permute-and-flip-over-votes",
        "permute-and-flip-over-logits",
    ] {
        assert!(names.contains(want), "{want} not built: {names:?}");
    }
}

/// Records with their optional keys absent: DP-SGD without `sampling_rate`/`steps`, loss
/// perturbation without `rho`, an invalid paper record; they load with the mechanism their
/// method and noise name, and write back byte-identically (through the flat struct). A
/// record without its neighbouring relation is refused.
#[test]
fn records_load_with_the_mechanism_they_name() {
    let records = [
        // a DP-SGD record without sampling_rate/steps
        r#"{"method":"dp-sgd","calibration":"corrected","privacy":{"epsilon":1.0,"delta":1e-5},"budget":"unlimited","noise":{"distribution":"gaussian","sigma":1.25},"neighbours":"add-remove","assumptions":{"k":1.4142135623730951,"l":0.5,"classes":10,"n":60000,"lambda":null},"valid_guarantee":true,"notes":["noise multiplier"],"noise_multiplier":1.25,"epsilon_spent":0.98}"#,
        // loss perturbation without rho
        r#"{"method":"loss-perturbation","calibration":"paper","privacy":{"epsilon":2.0,"delta":0.0},"budget":"unlimited","noise":{"distribution":"l2-laplace","beta":0.35},"neighbours":"replace-one","assumptions":{"k":1.4142135623730951,"l":0.5,"classes":10,"n":null,"lambda":null},"valid_guarantee":false,"notes":["x","paper mode under replace-one: ... not a valid guarantee"]}"#,
        // subsample-and-aggregate, the exponential mechanism over votes
        r#"{"method":"subsample-aggregate","calibration":"corrected","privacy":{"epsilon":1.0,"delta":0.0},"budget":{"finite":100},"noise":{"distribution":"exponential","beta":0.005},"neighbours":"replace-one","assumptions":{"k":1.4142135623730951,"l":0.5,"classes":10,"n":null,"lambda":null},"valid_guarantee":true,"notes":[]}"#,
        // an invalid record whose notes name no reason
        r#"{"method":"prediction-sensitivity","calibration":"paper","privacy":{"epsilon":1.0,"delta":1e-5},"budget":{"finite":10},"noise":{"distribution":"gaussian","sigma":3.5},"neighbours":"replace-one","assumptions":{"k":1.4142135623730951,"l":0.5,"classes":10,"n":1000,"lambda":0.01},"valid_guarantee":false,"notes":[]}"#,
    ];
    let c: Vec<Calibration> = records
        .iter()
        .map(|s| serde_json::from_str(s).unwrap_or_else(|e| panic!("{s}: {e}")))
        .collect();
    assert_eq!(
        c[0].mechanism,
        Mechanism::DpSgd {
            noise_multiplier: 1.25,
            sampling_rate: None,
            steps: None,
            epsilon_spent: Some(0.98),
        }
    );
    assert_eq!(c[0].neighbours(), Neighbours::AddRemove);
    let unnamed = records[0].replace(r#""neighbours":"add-remove","#, "");
    assert!(serde_json::from_str::<Calibration>(&unnamed).is_err());
    assert_eq!(
        c[1].mechanism,
        Mechanism::ObjectivePerturbation {
            noise: VectorNoise::L2Laplace { beta: 0.35 },
            rho: None,
        }
    );
    assert_eq!(c[1].mechanism.rho_or(|| 5.0), 5.0);
    assert_eq!(
        c[1].guarantee.validity,
        Validity::Invalid {
            reasons: vec!["paper mode under replace-one: ... not a valid guarantee".into()]
        }
    );
    assert_eq!(
        c[2].mechanism,
        Mechanism::Exponential {
            beta: 0.005,
            over: Scores::Votes
        }
    );
    assert_eq!(c[2].budget().get(), Some(100));
    assert_eq!(
        c[3].guarantee.validity.reasons(),
        [privpred_core::guarantee::UNSTATED_INVALIDITY.to_string()]
    );
    for (s, c) in records.iter().zip(&c) {
        let old: OldCalibration = serde_json::from_str(s).unwrap();
        assert_eq!(
            serde_json::to_string(c).unwrap(),
            serde_json::to_string(&old).unwrap(),
            "{s}"
        );
    }
}

/// Invalid records are refused when read: ε or δ out of range, a zero budget, a noise the
/// method does not release.
#[test]
fn invalid_records_are_refused() {
    let good = r#"{"method":"model-sensitivity","calibration":"corrected","privacy":{"epsilon":1.0,"delta":0.0},"budget":"unlimited","noise":{"distribution":"l2-laplace","beta":2.5},"neighbours":"replace-one","assumptions":{"k":1.4142135623730951,"l":0.5,"classes":10,"n":100,"lambda":0.1},"valid_guarantee":true,"notes":[]}"#;
    let c: Calibration = serde_json::from_str(good).unwrap();
    assert_eq!(
        c.mechanism,
        Mechanism::OutputPerturbation {
            noise: VectorNoise::L2Laplace { beta: 2.5 }
        }
    );
    for (from, to, why) in [
        (
            r#""epsilon":1.0"#,
            r#""epsilon":0.0"#,
            "must be a finite number > 0",
        ),
        (
            r#""epsilon":1.0"#,
            r#""epsilon":-2.0"#,
            "must be a finite number > 0",
        ),
        (r#""delta":0.0"#, r#""delta":1.0"#, "must be in [0, 1)"),
        (r#""delta":0.0"#, r#""delta":-0.1"#, "must be in [0, 1)"),
        (
            r#""distribution":"l2-laplace","beta":2.5"#,
            r#""distribution":"exponential","beta":2.5"#,
            "not the noise model-sensitivity's calibration uses",
        ),
        (
            r#""budget":"unlimited""#,
            r#""budget":{"finite":0}"#,
            "nonzero",
        ),
    ] {
        let bad = good.replace(from, to);
        assert_ne!(bad, good);
        let e = serde_json::from_str::<Calibration>(&bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "{to}: {e}");
    }
}
