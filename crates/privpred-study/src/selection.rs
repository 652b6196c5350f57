//! How the study's and `compare`'s runs choose λ (or DP-SGD's clip ν), and how every row,
//! summary line and report states that choice and what it cost.
//!
//! - [`Choice::Cv`]: the paper's protocol — the best mean hold-out accuracy of private draws on
//!   a hold-out of the training set, without privacy. Outside the guarantee
//!   ([`privpred_core::SelectionMethod::NonPrivateHoldout`]).
//! - [`Choice::Value`]: a public value chosen without the data; costs nothing.
//! - [`Choice::Private`]: the private split selection of [`privpred_core::tuning`], run with
//!   `privpred_linear::methods::private_split_select` exactly as `privpred train --lambda
//!   private` runs it; inside the stated (ε, δ) by parallel composition; replace-one only.

use privpred_core::defaults;
use privpred_core::{Selection, SelectionMethod};
use serde::{Serialize, Serializer};

/// How one hyper-parameter (λ or ν) is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Choice {
    /// A public value, chosen without the data.
    Value(f64),
    /// λ from [`privpred_core::public_rule`]: a function of N, d, C, ε and B only; costs
    /// nothing (replace-one only, where N is public).
    Rule,
    /// The private split selection (inside the guarantee).
    Private,
    /// The paper's non-private hold-out selection (outside the guarantee).
    Cv,
}

impl Serialize for Choice {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Choice::Value(v) => s.serialize_f64(*v),
            Choice::Rule => s.serialize_str("public-rule"),
            Choice::Private => s.serialize_str("private"),
            Choice::Cv => s.serialize_str("cv"),
        }
    }
}

/// How a run chooses λ and DP-SGD's clip ν (recorded in the manifest's options and the
/// reports' provenance). A figure's fixed λ (fig6a) and subsample-and-aggregate (no λ) are
/// public whatever this says.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SelectionOptions {
    /// The protocol's name: `paper`, `public`, `private` or `custom` (λ and ν chosen apart).
    pub protocol: &'static str,
    /// How λ is chosen.
    pub lambda: Choice,
    /// How ν is chosen.
    pub clip: Choice,
}

impl SelectionOptions {
    /// The paper's protocol (the study's default): both selected on the hold-out, outside the
    /// guarantee.
    pub const PAPER: SelectionOptions = SelectionOptions {
        protocol: "paper",
        lambda: Choice::Cv,
        clip: Choice::Cv,
    };
    /// `train`'s defaults: λ = [`defaults::LINEAR_PUBLIC_LAMBDA`], ν =
    /// [`defaults::LINEAR_DPSGD_CLIP`], chosen without the data.
    pub const PUBLIC: SelectionOptions = SelectionOptions {
        protocol: "public",
        lambda: Choice::Value(defaults::LINEAR_PUBLIC_LAMBDA),
        clip: Choice::Value(defaults::LINEAR_DPSGD_CLIP),
    };
    /// `compare`'s and `train`'s defaults: λ by the public rule and its DP-SGD clip ν =
    /// [`privpred_core::public_rule::DPSGD_CLIP`]; both cost nothing.
    pub const PUBLIC_RULE: SelectionOptions = SelectionOptions {
        protocol: "public-rule",
        lambda: Choice::Rule,
        clip: Choice::Value(privpred_core::public_rule::DPSGD_CLIP),
    };
    /// Both selected by the private split.
    pub const PRIVATE: SelectionOptions = SelectionOptions {
        protocol: "private",
        lambda: Choice::Private,
        clip: Choice::Private,
    };

    /// λ and ν chosen apart (`compare --lambda … --clip …`); named after the protocol they
    /// match, `custom` otherwise.
    pub fn new(lambda: Choice, clip: Choice) -> SelectionOptions {
        [Self::PAPER, Self::PUBLIC, Self::PUBLIC_RULE, Self::PRIVATE]
            .into_iter()
            .find(|p| p.lambda == lambda && p.clip == clip)
            .unwrap_or(SelectionOptions {
                protocol: "custom",
                lambda,
                clip,
            })
    }

    /// Whether either hyper-parameter uses the private split (refused under add-remove).
    pub fn uses_private_split(&self) -> bool {
        self.lambda == Choice::Private || self.clip == Choice::Private
    }

    /// One line for the provenance: the protocol and what each choice costs.
    pub fn describe(&self) -> String {
        let one = |c: Choice| match c {
            Choice::Value(v) => format!("public value {v} (costs nothing)"),
            Choice::Rule => "public rule from N, d, C, ε and B (costs nothing)".into(),
            Choice::Private => "private split (inside the guarantee)".into(),
            Choice::Cv => "non-private hold-out selection (outside the guarantee)".into(),
        };
        format!(
            "{}: λ {}; DP-SGD clip ν {}",
            self.protocol,
            one(self.lambda),
            one(self.clip)
        )
    }
}

impl Default for SelectionOptions {
    fn default() -> Self {
        Self::PAPER
    }
}

/// The record of a value chosen without the data (a figure's fixed λ, subsample-and-aggregate's
/// T, a public default): costs nothing.
pub fn public() -> Selection {
    Selection {
        method: SelectionMethod::Public,
        epsilon: Some(0.0),
        delta: Some(0.0),
        composition: privpred_core::tuning::Composition::None,
    }
}

/// The record of a λ computed by the public rule from public quantities: costs nothing.
pub fn public_rule() -> Selection {
    Selection {
        method: SelectionMethod::PublicRule,
        ..public()
    }
}

/// The label of a selection record in rows, summaries and reports:
/// `non-private-holdout — outside the guarantee`, `public — costs nothing` or
/// `private-split — ε = 1, δ = 0 (parallel composition, inside the guarantee)`.
pub fn label(s: &Selection) -> String {
    match s.method {
        SelectionMethod::NonPrivateHoldout => "non-private-holdout — outside the guarantee".into(),
        SelectionMethod::ExternalSearch => "external-search — outside the guarantee".into(),
        SelectionMethod::Public => "public — costs nothing".into(),
        SelectionMethod::PublicRule => "public-rule — costs nothing".into(),
        SelectionMethod::PrivateSplit => format!(
            "private-split — ε = {}, δ = {} (parallel composition, inside the guarantee)",
            crate::figures::fmt_num(s.epsilon.unwrap_or(f64::NAN)),
            crate::figures::fmt_num(s.delta.unwrap_or(f64::NAN))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use privpred_core::{Neighbours, Privacy};

    #[test]
    fn labels_say_what_each_selection_costs() {
        let p = Privacy::new(1.0, 1e-5).unwrap();
        let d = |m| Selection::derive(m, p, Neighbours::ReplaceOne).unwrap();
        assert_eq!(
            label(&d(SelectionMethod::NonPrivateHoldout)),
            "non-private-holdout — outside the guarantee"
        );
        assert_eq!(label(&d(SelectionMethod::Public)), "public — costs nothing");
        let s = label(&d(SelectionMethod::PrivateSplit));
        assert!(s.starts_with("private-split — ε = 1, δ = 1e-5"), "{s}");
        assert!(s.contains("inside the guarantee"), "{s}");
    }

    #[test]
    fn options_name_their_protocol_and_serialise_their_choices() {
        assert_eq!(
            SelectionOptions::new(Choice::Cv, Choice::Cv).protocol,
            "paper"
        );
        let public = SelectionOptions::new(
            Choice::Value(defaults::LINEAR_PUBLIC_LAMBDA),
            Choice::Value(defaults::LINEAR_DPSGD_CLIP),
        );
        assert_eq!(public, SelectionOptions::PUBLIC);
        let custom = SelectionOptions::new(Choice::Value(0.5), Choice::Private);
        assert_eq!(custom.protocol, "custom");
        assert!(custom.uses_private_split() && !SelectionOptions::PAPER.uses_private_split());
        assert_eq!(
            serde_json::to_value(custom).unwrap(),
            serde_json::json!({"protocol": "custom", "lambda": 0.5, "clip": "private"})
        );
    }
}
