//! The validated privacy parameters: [`Epsilon`], [`Delta`], the pair [`Privacy`] and the
//! inference [`Budget`]. Each is constructed only through a checked constructor (or serde,
//! which goes through the same constructor), so a value of these types is always in range and
//! nothing downstream re-validates it. ε is range-checked here and nowhere else
//! ([`Epsilon::new`]); lower-level numerical functions that take a raw `f64` ε call it too.
//!
//! Serialised forms are unchanged from the plain-number fields they replace: an [`Epsilon`]
//! or [`Delta`] is a JSON number, a [`Privacy`] is `{"epsilon": …, "delta": …}`, a [`Budget`]
//! is `{"finite": B}` or `"unlimited"`. Reading refuses out-of-range values with the same
//! message as the constructor.

use crate::error::{CoreError, Result};
use serde::{Deserialize, Serialize};
use std::num::NonZeroU64;

/// ε of an (ε, δ) guarantee: a finite number > 0.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Epsilon(f64);

impl Epsilon {
    /// Validates ε ∈ (0, ∞): the one place privpred checks the range of ε.
    pub fn new(epsilon: f64) -> Result<Self> {
        if epsilon.is_finite() && epsilon > 0.0 {
            Ok(Epsilon(epsilon))
        } else {
            Err(CoreError::invalid(
                "epsilon",
                epsilon,
                "must be a finite number > 0",
            ))
        }
    }

    /// ε as a number.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl TryFrom<f64> for Epsilon {
    type Error = CoreError;
    fn try_from(v: f64) -> Result<Self> {
        Epsilon::new(v)
    }
}

impl From<Epsilon> for f64 {
    fn from(e: Epsilon) -> f64 {
        e.0
    }
}

impl std::fmt::Display for Epsilon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// δ of an (ε, δ) guarantee: a number in [0, 1) (0 is pure ε-DP).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Delta(f64);

impl Delta {
    /// δ = 0 (pure ε-DP).
    pub const ZERO: Delta = Delta(0.0);

    /// Validates δ ∈ [0, 1).
    pub fn new(delta: f64) -> Result<Self> {
        if delta.is_finite() && (0.0..1.0).contains(&delta) {
            Ok(Delta(delta))
        } else {
            Err(CoreError::invalid("delta", delta, "must be in [0, 1)"))
        }
    }

    /// δ as a number.
    pub fn get(self) -> f64 {
        self.0
    }

    /// Whether δ = 0.
    pub fn is_zero(self) -> bool {
        self.0 == 0.0
    }
}

impl TryFrom<f64> for Delta {
    type Error = CoreError;
    fn try_from(v: f64) -> Result<Self> {
        Delta::new(v)
    }
}

impl From<Delta> for f64 {
    fn from(d: Delta) -> f64 {
        d.0
    }
}

impl std::fmt::Display for Delta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A validated (ε, δ) pair: ε finite and > 0, δ in [0, 1). Built only by [`Privacy::new`],
/// [`Privacy::pure`], [`Privacy::from_parts`] or deserialisation (which checks both fields).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Privacy {
    epsilon: Epsilon,
    delta: Delta,
}

impl Privacy {
    /// Validates ε ∈ (0, ∞) and δ ∈ [0, 1).
    pub fn new(epsilon: f64, delta: f64) -> Result<Self> {
        Ok(Privacy {
            epsilon: Epsilon::new(epsilon)?,
            delta: Delta::new(delta)?,
        })
    }

    /// The pair of two validated parts.
    pub fn from_parts(epsilon: Epsilon, delta: Delta) -> Self {
        Privacy { epsilon, delta }
    }

    /// Pure ε-DP (δ = 0).
    pub fn pure(epsilon: f64) -> Result<Self> {
        Self::new(epsilon, 0.0)
    }

    /// ε as a number.
    pub fn epsilon(&self) -> f64 {
        self.epsilon.get()
    }

    /// δ as a number.
    pub fn delta(&self) -> f64 {
        self.delta.get()
    }

    /// ε as its validated type.
    pub fn eps(&self) -> Epsilon {
        self.epsilon
    }

    /// δ as its validated type.
    pub fn del(&self) -> Delta {
        self.delta
    }

    /// Whether δ = 0.
    pub fn is_pure(&self) -> bool {
        self.delta.is_zero()
    }

    /// (s·ε, s·δ) for a share s ∈ (0, 1] (e.g. the part of a budget one step of a composition
    /// spends); an error where s·ε underflows to 0.
    pub fn share(&self, s: f64) -> Result<Self> {
        if !(s.is_finite() && s > 0.0 && s <= 1.0) {
            return Err(CoreError::invalid("share", s, "must be in (0, 1]"));
        }
        Privacy::new(s * self.epsilon(), s * self.delta())
    }
}

/// The largest finite budget B: 2⁶³ − 1, the largest count a budget ledger (a signed 64-bit
/// database integer) records.
pub const MAX_BUDGET: u64 = i64::MAX as u64;

/// The inference budget: the number of answers the guarantee covers. A finite budget is at
/// least 1 by construction (`{"finite": 0}` is refused when read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Budget {
    /// B answers (B ≥ 1).
    Finite(NonZeroU64),
    /// Private-training methods: the released model is private, any number of answers.
    Unlimited,
}

/// `B = 50 answers` or `unlimited`.
impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Budget::Finite(b) => write!(f, "B = {b} answers"),
            Budget::Unlimited => f.write_str("unlimited"),
        }
    }
}

impl Budget {
    /// One answer.
    pub const ONE: Budget = Budget::Finite(NonZeroU64::MIN);

    /// Validates 1 ≤ B ≤ [`MAX_BUDGET`] (the largest count a budget ledger records, so that
    /// every budget `train` accepts can be served).
    pub fn finite(b: u64) -> Result<Self> {
        if b > MAX_BUDGET {
            return Err(CoreError::invalid(
                "budget",
                b,
                format!(
                    "must be an integer in 1..={MAX_BUDGET} (the largest count a budget ledger records)"
                ),
            ));
        }
        NonZeroU64::new(b)
            .map(Budget::Finite)
            .ok_or_else(|| CoreError::invalid("budget", b, "must be an integer >= 1"))
    }

    /// B as a number (None for unlimited).
    pub fn get(&self) -> Option<u64> {
        match self {
            Budget::Finite(b) => Some(b.get()),
            Budget::Unlimited => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BAD_EPSILON: [f64; 6] = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, -1.0];
    const BAD_DELTA: [f64; 7] = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -1e-300,
        -1.0,
        1.0,
        2.0,
    ];

    #[test]
    fn every_invalid_epsilon_is_refused_naming_its_range() {
        for v in BAD_EPSILON {
            let e = Epsilon::new(v).unwrap_err().to_string();
            assert!(
                e.contains("epsilon") && e.contains("must be a finite number > 0"),
                "{v}: {e}"
            );
            let e = Privacy::new(v, 0.0).unwrap_err().to_string();
            assert!(e.contains("must be a finite number > 0"), "{v}: {e}");
        }
        for v in [f64::MIN_POSITIVE, 1e-300, 0.5, 1.0, 1e300, f64::MAX] {
            assert_eq!(Epsilon::new(v).unwrap().get(), v);
        }
    }

    #[test]
    fn every_invalid_delta_is_refused_naming_its_range() {
        for v in BAD_DELTA {
            let e = Delta::new(v).unwrap_err().to_string();
            assert!(
                e.contains("delta") && e.contains("must be in [0, 1)"),
                "{v}: {e}"
            );
            let e = Privacy::new(1.0, v).unwrap_err().to_string();
            assert!(e.contains("must be in [0, 1)"), "{v}: {e}");
        }
        for v in [0.0, 1e-300, 1e-5, 0.5, 1.0 - f64::EPSILON / 2.0] {
            assert_eq!(Delta::new(v).unwrap().get(), v);
        }
        assert!(Delta::ZERO.is_zero() && Privacy::pure(1.0).unwrap().is_pure());
    }

    #[test]
    fn zero_budget_is_refused() {
        let e = Budget::finite(0).unwrap_err().to_string();
        assert!(e.contains("budget") && e.contains(">= 1"), "{e}");
        assert_eq!(Budget::finite(7).unwrap().get(), Some(7));
        assert_eq!(Budget::finite(MAX_BUDGET).unwrap().get(), Some(MAX_BUDGET));
        let e = Budget::finite(u64::MAX).unwrap_err().to_string();
        assert!(
            e.contains("18446744073709551615") && e.contains("1..=9223372036854775807"),
            "{e}"
        );
        assert_eq!(Budget::ONE.get(), Some(1));
        assert_eq!(Budget::Unlimited.get(), None);
    }

    #[test]
    fn serde_is_the_plain_number_format_and_refuses_invalid_values() {
        let p = Privacy::new(0.25, 1e-5).unwrap();
        let s = serde_json::to_string(&p).unwrap();
        // byte-identical to the plain-f64 record these types replace
        #[derive(Serialize)]
        struct Plain {
            epsilon: f64,
            delta: f64,
        }
        let plain = Plain {
            epsilon: 0.25,
            delta: 1e-5,
        };
        assert_eq!(s, serde_json::to_string(&plain).unwrap());
        assert_eq!(serde_json::from_str::<Privacy>(&s).unwrap(), p);
        assert_eq!(
            serde_json::to_string(&Epsilon::new(2.0).unwrap()).unwrap(),
            "2.0"
        );
        for bad in [
            r#"{"epsilon":0.0,"delta":0.0}"#,
            r#"{"epsilon":-1.0,"delta":0.0}"#,
            r#"{"epsilon":1.0,"delta":1.0}"#,
            r#"{"epsilon":1.0,"delta":-0.5}"#,
            r#"{"epsilon":1.0}"#,
            r#"{"epsilon":"1","delta":0.0}"#,
        ] {
            let e = serde_json::from_str::<Privacy>(bad)
                .unwrap_err()
                .to_string();
            assert!(!e.is_empty(), "{bad}");
        }
        let e = serde_json::from_str::<Epsilon>("0.0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("must be a finite number > 0"), "{e}");
        let e = serde_json::from_str::<Delta>("1.5")
            .unwrap_err()
            .to_string();
        assert!(e.contains("must be in [0, 1)"), "{e}");
        for b in [Budget::finite(10).unwrap(), Budget::Unlimited] {
            let s = serde_json::to_string(&b).unwrap();
            assert_eq!(serde_json::from_str::<Budget>(&s).unwrap(), b);
        }
        assert_eq!(
            serde_json::to_string(&Budget::finite(10).unwrap()).unwrap(),
            r#"{"finite":10}"#
        );
        assert_eq!(
            serde_json::to_string(&Budget::Unlimited).unwrap(),
            r#""unlimited""#
        );
        assert!(serde_json::from_str::<Budget>(r#"{"finite":0}"#).is_err());
    }

    #[test]
    fn share_scales_both_parts() {
        let p = Privacy::new(1.0, 1e-5).unwrap();
        let q = p.share(0.99).unwrap();
        assert_eq!((q.epsilon(), q.delta()), (0.99, 0.99 * 1e-5));
        assert!(p.share(0.0).is_err() && p.share(1.5).is_err() && p.share(f64::NAN).is_err());
    }
}
