//! The guarantee as a type: what is promised ([`Guarantee`]: (ε, δ), budget, neighbouring
//! relation, calibration mode, and whether it holds, with the reason when it does not) and
//! what is released ([`crate::Mechanism`]), together in a [`Calibration`].
//!
//! A [`Calibration`] serialises exactly as the flat record privpred has always written
//! (`method`, `calibration`, `privacy`, `budget`, `noise`, `neighbours`, `assumptions`,
//! `valid_guarantee`, `notes`, and `rho`, `noise_multiplier`, `epsilon_spent`,
//! `sampling_rate`, `steps`, `certified`, `selection` where present), so artifacts, `train --json`,
//! `GET /v1/model` and result rows are byte-identical and artifacts written by older versions
//! load. Reading checks that the noise is one the method releases.

use crate::error::CoreError;
use crate::mechanism::{Mechanism, RecordExtras};
use crate::privacy::{Budget, Privacy};
use crate::tuning::{Selection, SelectionMethod};
use crate::types::{Assumptions, CalibrationMode, Method, Neighbours, Noise};
use serde::{Deserialize, Serialize};

/// Whether a guarantee holds, with the reasons where it does not (`paper` mode keeps the
/// published rules, some of which do not deliver the stated (ε, δ): docs/guarantees.md#errata).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "validity", rename_all = "kebab-case")]
pub enum Validity {
    /// The mechanism delivers the stated guarantee.
    Valid,
    /// It does not; each reason names the erratum (each is also one of the calibration's
    /// notes, where the writer put it).
    Invalid {
        /// Why, one entry per rule that fails.
        reasons: Vec<String>,
    },
}

impl Validity {
    /// Whether the guarantee holds.
    pub fn is_valid(&self) -> bool {
        matches!(self, Validity::Valid)
    }

    /// The reasons it does not hold (empty when valid).
    pub fn reasons(&self) -> &[String] {
        match self {
            Validity::Valid => &[],
            Validity::Invalid { reasons } => reasons,
        }
    }

    fn add(&mut self, reason: String) {
        match self {
            Validity::Valid => {
                *self = Validity::Invalid {
                    reasons: vec![reason],
                }
            }
            Validity::Invalid { reasons } => reasons.push(reason),
        }
    }
}

/// What a calibration promises.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Guarantee {
    /// The target (ε, δ).
    pub privacy: Privacy,
    /// The budget B the guarantee covers (unlimited for private-training methods).
    pub budget: Budget,
    /// The neighbouring relation the guarantee is stated for.
    pub neighbours: Neighbours,
    /// Which analysis set the noise.
    pub mode: CalibrationMode,
    /// Whether it holds.
    pub validity: Validity,
}

impl Guarantee {
    /// A guarantee that holds (see [`Calibration::invalidate`] for one that does not).
    pub fn valid(
        privacy: Privacy,
        budget: Budget,
        neighbours: Neighbours,
        mode: CalibrationMode,
    ) -> Self {
        Guarantee {
            privacy,
            budget,
            neighbours,
            mode,
            validity: Validity::Valid,
        }
    }
}

/// The certificate a released fit must meet and how the guarantee accounts for it (erratum
/// 4.8; see [`crate::certify`], whose module documentation is the proof).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CertifiedFit {
    /// γ: the bound on ‖∇J(θ̂)‖₂ (f64, on the released iterate) every released fit must meet.
    pub gradient_norm_bound: f64,
    /// μ: the objective's strong-convexity modulus (λ; ρ_eff/N for loss perturbation, which
    /// depends on λ and is filled in at fit time by
    /// [`crate::certify::loss_perturbation_residual`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strong_convexity: Option<f64>,
    /// Output/prediction methods: the exact-minimiser sensitivity Δ = 2K/(Nλ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_sensitivity: Option<f64>,
    /// Output/prediction methods: the sensitivity the noise is calibrated with, Δ + 2γ/λ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensitivity: Option<f64>,
    /// Loss perturbation: the share s of (ε, δ) kept for the residual's output noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual_share: Option<f64>,
}

/// The result of calibrating a method: the guarantee and the mechanism that delivers it.
///
/// The method is not stored beside the mechanism: [`Calibration::method`] is
/// [`Mechanism::method`], so a calibration whose method disagrees with its mechanism cannot be
/// built (every mechanism belongs to exactly one method). The serialised record still writes
/// the `method` key first, byte for byte as before, and reading a record checks that its
/// `noise` is one its `method` releases ([`Mechanism::from_record`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "CalibrationRecord", try_from = "CalibrationRecord")]
pub struct Calibration {
    /// What is promised.
    pub guarantee: Guarantee,
    /// What is released.
    pub mechanism: Mechanism,
    /// The constants used.
    pub assumptions: Assumptions,
    /// Human-readable notes (erratum references, theorem used), in the order written.
    pub notes: Vec<String>,
    /// Certified minimiser (erratum 4.8): the gradient-norm bound γ the released fit must
    /// meet and the sensitivity that includes it (`corrected`/`tight` model sensitivity,
    /// prediction sensitivity and loss perturbation; see [`crate::certify`]).
    pub certified: Option<CertifiedFit>,
    /// How the hyper-parameter (λ or DP-SGD's clip) was chosen and what that cost
    /// ([`crate::tuning`]); `None` in records written before it was recorded.
    pub selection: Option<Selection>,
}

impl Calibration {
    /// A calibration of `mechanism` for `guarantee`, with no notes and no certificate.
    pub fn new(guarantee: Guarantee, mechanism: Mechanism, assumptions: Assumptions) -> Self {
        Calibration {
            guarantee,
            mechanism,
            assumptions,
            notes: Vec::new(),
            certified: None,
            selection: None,
        }
    }

    /// Marks the guarantee as not delivered, for `reason` (which is also appended to the
    /// notes, where serialised records keep it).
    pub fn invalidate(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        self.notes.push(reason.clone());
        self.guarantee.validity.add(reason);
    }

    /// Which method: the one that releases through [`Calibration::mechanism`]
    /// ([`Mechanism::method`]), consistent with it by construction.
    pub fn method(&self) -> Method {
        self.mechanism.method()
    }

    /// The target (ε, δ).
    pub fn privacy(&self) -> Privacy {
        self.guarantee.privacy
    }

    /// ε.
    pub fn epsilon(&self) -> f64 {
        self.guarantee.privacy.epsilon()
    }

    /// δ.
    pub fn delta(&self) -> f64 {
        self.guarantee.privacy.delta()
    }

    /// The budget the guarantee covers.
    pub fn budget(&self) -> Budget {
        self.guarantee.budget
    }

    /// The calibration mode.
    pub fn mode(&self) -> CalibrationMode {
        self.guarantee.mode
    }

    /// The neighbouring relation.
    pub fn neighbours(&self) -> Neighbours {
        self.guarantee.neighbours
    }

    /// Whether the guarantee holds.
    pub fn is_valid(&self) -> bool {
        self.guarantee.validity.is_valid()
    }

    /// The noise distribution as recorded ([`Mechanism::noise`]).
    pub fn noise(&self) -> Noise {
        self.mechanism.noise()
    }
}

impl Calibration {
    /// The training-set size this calibration's N-dependent terms use for a fit on `n` rows:
    /// the exact `n` under replace-one (public there: D and D′ have the same size), the
    /// declared public size N̂ the assumptions record under add/remove (where the exact N
    /// differs between D and D ∪ {z} and is private), so that nothing the fit releases or
    /// calibrates depends on the exact N (loss perturbation's ρ_eff = max(ρ, N̂λ) and its
    /// certificate; DP-SGD's rate and steps come from the schedule with N̂).
    pub fn calibration_n(&self, n: usize) -> usize {
        match self.guarantee.neighbours {
            Neighbours::AddRemove => self.assumptions.n.unwrap_or(n),
            Neighbours::ReplaceOne => n,
        }
    }

    /// Records how the hyper-parameter was chosen ([`Selection::derive`]) and, for a
    /// selection outside the guarantee, marks it not valid
    /// ([`crate::tuning::NON_PRIVATE_SELECTION_REASON`],
    /// [`crate::tuning::EXTERNAL_SEARCH_REASON`]).
    pub fn with_selection(mut self, method: SelectionMethod) -> Result<Calibration, CoreError> {
        let s = Selection::derive(method, self.guarantee.privacy, self.guarantee.neighbours)?;
        if !s.is_inside() {
            self.invalidate(match method {
                SelectionMethod::ExternalSearch => crate::tuning::EXTERNAL_SEARCH_REASON,
                _ => crate::tuning::NON_PRIVATE_SELECTION_REASON,
            });
        }
        self.selection = Some(s);
        Ok(self)
    }
}

/// The serialised form of a [`Calibration`]: the flat record of every privpred version (field
/// order and optional keys as they have always been written).
#[derive(Serialize, Deserialize)]
struct CalibrationRecord {
    method: Method,
    calibration: CalibrationMode,
    privacy: Privacy,
    budget: Budget,
    noise: Noise,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    selection: Option<Selection>,
}

/// The fallback reason of a record marked invalid whose notes name none.
pub const UNSTATED_INVALIDITY: &str =
    "recorded as not a valid guarantee (the record's notes give no reason)";

impl From<Calibration> for CalibrationRecord {
    fn from(c: Calibration) -> Self {
        let x = c.mechanism.record_extras();
        CalibrationRecord {
            method: c.method(),
            calibration: c.guarantee.mode,
            privacy: c.guarantee.privacy,
            budget: c.guarantee.budget,
            noise: c.mechanism.noise(),
            neighbours: c.guarantee.neighbours,
            assumptions: c.assumptions,
            valid_guarantee: c.guarantee.validity.is_valid(),
            notes: c.notes,
            rho: x.rho,
            noise_multiplier: x.noise_multiplier,
            epsilon_spent: x.epsilon_spent,
            sampling_rate: x.sampling_rate,
            steps: x.steps,
            certified: c.certified,
            selection: c.selection,
        }
    }
}

impl TryFrom<CalibrationRecord> for Calibration {
    type Error = CoreError;
    fn try_from(r: CalibrationRecord) -> Result<Self, CoreError> {
        let extras = RecordExtras {
            rho: r.rho,
            noise_multiplier: r.noise_multiplier,
            epsilon_spent: r.epsilon_spent,
            sampling_rate: r.sampling_rate,
            steps: r.steps,
        };
        // the record's method selects how its noise is read; the mechanism built belongs to
        // that method (`from_record` maps each method to its own variants only)
        let mechanism = Mechanism::from_record(r.method, r.noise, extras)?;
        debug_assert_eq!(mechanism.method(), r.method);
        let validity = if r.valid_guarantee {
            Validity::Valid
        } else {
            let mut reasons: Vec<String> = r
                .notes
                .iter()
                .filter(|n| n.contains("not a valid"))
                .cloned()
                .collect();
            if reasons.is_empty() {
                reasons.push(UNSTATED_INVALIDITY.into());
            }
            Validity::Invalid { reasons }
        };
        Ok(Calibration {
            guarantee: Guarantee {
                privacy: r.privacy,
                budget: r.budget,
                neighbours: r.neighbours,
                mode: r.calibration,
                validity,
            },
            mechanism,
            assumptions: r.assumptions,
            notes: r.notes,
            certified: r.certified,
            selection: r.selection,
        })
    }
}
