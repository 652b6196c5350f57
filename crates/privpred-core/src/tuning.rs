//! Hyper-parameter selection inside the guarantee: how a release's λ (or DP-SGD's clip ν) was
//! chosen, what that choice cost ([`Selection`], recorded in every guarantee), and the
//! mathematics of the one private selection privpred runs, the **private split**
//! ([`SplitPlan`], [`select_candidate`]).
//!
//! # The three ways a hyper-parameter is chosen
//! - [`SelectionMethod::Public`]: a value fixed without looking at the data (a default, or
//!   `--lambda VALUE`). It is post-processing of nothing: it costs nothing, `epsilon = 0`,
//!   `delta = 0`.
//! - [`SelectionMethod::PublicRule`]: a value computed by [`crate::public_rule`] from public
//!   quantities only (N under replace-one neighbours, the declared N̂ under add/remove, d, C,
//!   ε, B); like a public value it costs nothing.
//! - [`SelectionMethod::PrivateSplit`]: the private selection below. Its cost is the whole
//!   (ε, δ) of the guarantee, spent on a part of the training set disjoint from the part the
//!   released model is trained on, so by parallel composition the released (ε, δ) is
//!   unchanged (the record says `composition: parallel`).
//! - [`SelectionMethod::NonPrivateHoldout`]: the paper's protocol (the best mean hold-out
//!   accuracy of private draws on a hold-out of the private training set, no noise on the
//!   choice). Its privacy loss is unbounded (`epsilon`/`delta` are `null`) and the guarantee is
//!   marked not valid: the stated (ε, δ) excludes the selection.
//!
//! # The private split (proof)
//! A public uniformly random permutation π of the indices 0..N (drawn independently of the
//! data) cuts the training set D into disjoint parts ([`SplitPlan`]): the final part F
//! (the first `final_n` indices of π), m candidate parts P_1..P_m of equal size and a
//! hold-out H. For the candidate values v_1..v_m of the hyper-parameter:
//! 1. M_i = A_{v_i}(P_i): the method itself, run with v_i on P_i and calibrated for the target
//!    (ε, δ) on |P_i| examples (a private-prediction method is calibrated for a budget of
//!    |H| answers and answers the |H| hold-out queries; a private-training method releases one
//!    model and labels H with it).
//! 2. s_i = the number of hold-out examples M_i labels correctly.
//! 3. i* = permute-and-flip over s at β = ε/2 ([`select_candidate`]).
//! 4. The release is A_{v_{i*}}(F), calibrated for the target (ε, δ) and budget B on |F|
//!    examples.
//!
//! **Claim.** The release (and i*) is (ε, δ)-DP under replace-one neighbours.
//! **Proof.** D and D′ differ at one index j; π does not depend on the data, so j lies in
//! exactly one part and every other part is identical.
//! (a) j ∈ P_i: only M_i's distribution changes and it is (ε, δ)-DP in P_i (the method's own
//! theorem); i* is a function of (M_1, …, M_m, H) with H fixed, and given i* the release
//! depends on F only, which is fixed: the output is post-processing of (M_1, …, M_m), so
//! (ε, δ)-DP.
//! (b) j ∈ H: the M_i are identically distributed. Couple the candidates' randomness (their
//! models and the noise of each answer) between D and D′; then only the answer to and the label
//! of hold-out example j can differ, so each s_i changes by at most 1: the scores have
//! sensitivity Δ = 1 and permute-and-flip at β = ε/(2Δ) is ε-DP for every fixed value of that
//! randomness (McKenna & Sheldon 2020, Theorem 1), hence for their mixture; the release is
//! post-processing: (ε, 0)-DP.
//! (c) j ∈ F: i* has the same distribution under D and D′ and is independent of F; given
//! i* = i the release is the method's (ε, δ)-DP mechanism on F; a mixture with data-
//! independent weights of (ε, δ)-DP mechanisms is (ε, δ)-DP.
//! This is parallel composition (McSherry 2009, "Privacy integrated queries", Theorem 4) with
//! the later stage's parameter chosen by the earlier; steps 1–3 are the private parameter
//! tuning of Chaudhuri, Monteleoni & Sarwate 2011 (JMLR 12, section 6, "Algorithm 3"), with
//! permute-and-flip in place of the exponential mechanism (never worse at the same ε,
//! McKenna & Sheldon 2020, Theorem 2). Under add/remove neighbours the sizes of the parts
//! (which the calibrations use) would depend on N, so the private split is offered for
//! replace-one only ([`Selection::derive`] refuses add-remove).

use crate::error::{CoreError, Result};
use crate::privacy::Privacy;
use crate::select::sample_permute_and_flip;
use crate::types::Neighbours;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// How a release's hyper-parameter (λ, or DP-SGD's clip ν) was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SelectionMethod {
    /// Fixed without the data: costs nothing.
    #[default]
    Public,
    /// Computed by [`crate::public_rule`] from public quantities only (N under replace-one,
    /// the declared N̂ under add/remove, d, C, ε, B): costs nothing.
    PublicRule,
    /// The private split of this module: inside the guarantee by parallel composition.
    PrivateSplit,
    /// The paper's non-private hold-out selection: outside the guarantee.
    NonPrivateHoldout,
    /// A selection made around privpred on the same private data (a scikit-learn search or
    /// cross-validation that fitted the estimator several times): outside the guarantee.
    ExternalSearch,
}

impl SelectionMethod {
    /// The kebab-case name used in records and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SelectionMethod::Public => "public",
            SelectionMethod::PublicRule => "public-rule",
            SelectionMethod::PrivateSplit => "private-split",
            SelectionMethod::NonPrivateHoldout => "non-private-holdout",
            SelectionMethod::ExternalSearch => "external-search",
        }
    }
}

impl std::fmt::Display for SelectionMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The record of a guarantee's hyper-parameter selection: `{method, epsilon, delta,
/// composition}`. `epsilon`/`delta` are the privacy loss of the selection step (`null`:
/// unbounded, outside the guarantee); `composition` says how it enters the stated (ε, δ).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// How the value was chosen.
    pub method: SelectionMethod,
    /// ε of the selection step (0 for a public value; `None` = unbounded).
    pub epsilon: Option<f64>,
    /// δ of the selection step (0 for a public value; `None` = unbounded).
    pub delta: Option<f64>,
    /// How the selection's loss enters the guarantee: `none` (public), `parallel` (the
    /// private split: disjoint parts, the stated (ε, δ) unchanged) or `outside` (not covered).
    pub composition: Composition,
}

/// How a selection's privacy loss enters the stated guarantee.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Composition {
    /// Nothing to compose: the value is public.
    None,
    /// Parallel composition over disjoint parts of the training set (the stated (ε, δ)).
    Parallel,
    /// Not covered by the stated guarantee.
    Outside,
}

/// The validity reason of a guarantee chosen by a search around privpred
/// ([`SelectionMethod::ExternalSearch`]; it contains "not a valid", as
/// [`NON_PRIVATE_SELECTION_REASON`]).
pub const EXTERNAL_SEARCH_REASON: &str = "not a valid guarantee for the release: it was chosen by a search or cross-validation outside privpred that fitted the estimator several times on the same private data, and those fits' privacy loss is outside the stated (epsilon, delta)";

/// The validity reason of a guarantee whose hyper-parameter was selected without privacy (it
/// contains "not a valid", which is how a serialised record's reasons are read back).
pub const NON_PRIVATE_SELECTION_REASON: &str = "not a valid guarantee for the release: its hyper-parameter was selected on a hold-out of the private training data without privacy (the paper's protocol), and that selection's privacy loss is outside the stated (epsilon, delta)";

impl Selection {
    /// The selection record of `method` for a guarantee of `privacy` under `neighbours`: its
    /// cost as this module's proof states it. Errors for the private split under add/remove
    /// neighbours (no analysis).
    pub fn derive(
        method: SelectionMethod,
        privacy: Privacy,
        neighbours: Neighbours,
    ) -> Result<Selection> {
        Ok(match method {
            SelectionMethod::Public | SelectionMethod::PublicRule => Selection {
                method,
                epsilon: Some(0.0),
                delta: Some(0.0),
                composition: Composition::None,
            },
            SelectionMethod::PrivateSplit => {
                if neighbours != Neighbours::ReplaceOne {
                    return Err(CoreError::Unsupported(
                        "the private split selection is analysed for replace-one neighbours only (its parts' sizes would depend on N under add-remove); give a public value (--lambda VALUE / --clip VALUE) or use --neighbours replace-one".into(),
                    ));
                }
                Selection {
                    method,
                    epsilon: Some(privacy.epsilon()),
                    delta: Some(privacy.delta()),
                    composition: Composition::Parallel,
                }
            }
            SelectionMethod::NonPrivateHoldout | SelectionMethod::ExternalSearch => Selection {
                method,
                epsilon: None,
                delta: None,
                composition: Composition::Outside,
            },
        })
    }

    /// Whether the selection is covered by the stated guarantee.
    pub fn is_inside(&self) -> bool {
        self.composition != Composition::Outside
    }

    /// One line for people: what the selection cost.
    pub fn describe(&self) -> String {
        match self.method {
            SelectionMethod::Public => {
                "public value chosen without the data (costs nothing: epsilon = 0, delta = 0)"
                    .into()
            }
            SelectionMethod::PublicRule => {
                "public rule: a function of N, d, C, epsilon and B only, no row read (costs nothing: epsilon = 0, delta = 0)"
                    .into()
            }
            SelectionMethod::PrivateSplit => format!(
                "private split selection (epsilon = {}, delta = {} on a disjoint part of the training set; parallel composition: inside the stated guarantee)",
                self.epsilon.unwrap_or(f64::NAN),
                self.delta.unwrap_or(f64::NAN)
            ),
            SelectionMethod::NonPrivateHoldout => {
                "non-private hold-out selection (the paper's protocol): OUTSIDE the stated guarantee, its privacy loss is unbounded".into()
            }
            SelectionMethod::ExternalSearch => {
                "chosen by a search or cross-validation outside privpred on the same private data: OUTSIDE the stated guarantee, its privacy loss is unbounded".into()
            }
        }
    }
}

/// The privacy note every model file states about its hyper-parameter selection (one
/// function for every family): what the recorded `selection` was and what it cost — a public
/// value, the public rule with its formula (`rule`: the formula with its inputs, when the
/// caller has them), the private split with the (ε, δ) it was charged, the non-private
/// hold-out or an external search outside the guarantee. `None`: a model without a guarantee.
pub fn selection_note(selection: Option<&Selection>, rule: Option<&str>) -> String {
    match selection {
        None => "hyper-parameter selection: none recorded (a model without a guarantee, or values the caller chose)".into(),
        Some(s) => {
            let mut note = format!("hyper-parameter selection ({}): {}", s.method, s.describe());
            if let (SelectionMethod::PublicRule, Some(f)) = (s.method, rule) {
                note.push_str(&format!("; the rule: {f}"));
            }
            note
        }
    }
}

/// The fraction of the training set the private split spends on the selection (candidate
/// parts and hold-out); the release is trained on the rest. A fixed public constant.
pub const SELECTION_FRACTION: f64 = 0.2;

/// The fewest examples a part of the private split may hold.
pub const MIN_PART: usize = 2;

/// The sizes of the private split's parts for N examples and m candidates (see the module
/// documentation): the final part F, m candidate parts of `part_n` each and the hold-out H
/// (the remainder). Public: a function of N, m and the fraction only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitPlan {
    /// |F|: the examples the release is trained on.
    pub final_n: usize,
    /// |P_i|: the examples of each candidate part.
    pub part_n: usize,
    /// m: the number of candidates.
    pub candidates: usize,
    /// |H|: the hold-out the candidates are scored on.
    pub holdout_n: usize,
}

impl SplitPlan {
    /// The plan for `n` examples, `candidates` values and a selection `fraction` in (0, 1):
    /// the selection gets ⌊fraction·N⌋ examples, cut into m + 1 equal parts (the hold-out
    /// takes the remainder); errors when a part would hold fewer than [`MIN_PART`] examples.
    pub fn new(n: usize, candidates: usize, fraction: f64) -> Result<SplitPlan> {
        if !(fraction.is_finite() && fraction > 0.0 && fraction < 1.0) {
            return Err(CoreError::invalid(
                "selection fraction",
                fraction,
                "must be in (0, 1)",
            ));
        }
        if candidates == 0 {
            return Err(CoreError::invalid(
                "candidates",
                0,
                "the private selection needs at least one candidate value",
            ));
        }
        let sel = (fraction * n as f64).floor() as usize;
        let part_n = sel / (candidates + 1);
        let holdout_n = sel - part_n * candidates;
        let final_n = n - sel;
        if part_n < MIN_PART || final_n < MIN_PART {
            return Err(CoreError::invalid(
                "n",
                n,
                format!(
                    "the private selection over {candidates} values needs at least {} training examples ({} % of them cut into {} parts of >= {MIN_PART}); give a public value instead (--lambda VALUE / --clip VALUE)",
                    ((MIN_PART * (candidates + 1)) as f64 / fraction).ceil(),
                    fraction * 100.0,
                    candidates + 1
                ),
            ));
        }
        Ok(SplitPlan {
            final_n,
            part_n,
            candidates,
            holdout_n,
        })
    }

    /// The index ranges, into a permutation of 0..N, of the final part, of candidate part
    /// `i` (0-based) and of the hold-out: disjoint and covering 0..N.
    pub fn final_range(&self) -> std::ops::Range<usize> {
        0..self.final_n
    }

    /// See [`SplitPlan::final_range`].
    pub fn part_range(&self, i: usize) -> std::ops::Range<usize> {
        let start = self.final_n + i * self.part_n;
        start..start + self.part_n
    }

    /// See [`SplitPlan::final_range`].
    pub fn holdout_range(&self) -> std::ops::Range<usize> {
        let start = self.final_n + self.candidates * self.part_n;
        start..start + self.holdout_n
    }
}

/// The permute-and-flip parameter for hold-out correct counts: the counts have sensitivity 1
/// under replace-one (one hold-out example is right or wrong for every candidate), so
/// β = ε/(2·1) (McKenna & Sheldon 2020, Theorem 1).
pub fn holdout_beta(epsilon: f64) -> f64 {
    epsilon / 2.0
}

/// Step 3 of the private split: the index of the selected candidate, by permute-and-flip
/// over the candidates' hold-out correct counts at β = [`holdout_beta`]`(epsilon)`; ε-DP in the
/// hold-out (see the module documentation).
pub fn select_candidate<R: Rng + ?Sized>(
    rng: &mut R,
    correct: &[u64],
    epsilon: f64,
) -> Result<usize> {
    if !(epsilon.is_finite() && epsilon > 0.0) {
        return Err(CoreError::invalid(
            "epsilon",
            epsilon,
            "must be a finite number > 0",
        ));
    }
    let q: Vec<f64> = correct.iter().map(|&c| c as f64).collect();
    sample_permute_and_flip(rng, &q, holdout_beta(epsilon))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selection_note_states_what_each_selection_cost() {
        let p = Privacy::new(1.0, 1e-5).unwrap();
        let note = |m: SelectionMethod, rule: Option<&str>| {
            let s = Selection::derive(m, p, Neighbours::ReplaceOne).unwrap();
            selection_note(Some(&s), rule)
        };
        let public = note(SelectionMethod::Public, None);
        assert!(
            public.contains("public value") && public.contains("costs nothing"),
            "{public}"
        );
        let rule = note(SelectionMethod::PublicRule, Some("λ = 0.3·√(d·C/(N·ε))"));
        assert!(
            rule.contains("public rule") && rule.contains("λ = 0.3·√(d·C/(N·ε))"),
            "{rule}"
        );
        let private = note(SelectionMethod::PrivateSplit, None);
        assert!(
            private.contains("private split") && private.contains("epsilon = 1"),
            "{private}"
        );
        assert!(private.contains("inside the stated guarantee"), "{private}");
        let holdout = note(SelectionMethod::NonPrivateHoldout, None);
        assert!(
            holdout.contains("hold-out") && holdout.contains("OUTSIDE"),
            "{holdout}"
        );
        let ext = note(SelectionMethod::ExternalSearch, None);
        assert!(
            ext.contains("outside privpred") && ext.contains("OUTSIDE"),
            "{ext}"
        );
        for n in [&public, &rule, &private, &holdout, &ext] {
            assert!(!n.contains("ignored"), "{n}");
        }
        assert!(selection_note(None, None).contains("none recorded"));
    }
    use crate::select::permute_and_flip_probabilities;
    use crate::types::CalibrationMode;

    fn derive(m: SelectionMethod, neighbours: Neighbours) -> Result<Selection> {
        Selection::derive(m, Privacy::new(1.0, 1e-5).unwrap(), neighbours)
    }

    #[test]
    fn a_public_value_costs_nothing_and_the_split_costs_the_stated_guarantee_in_parallel() {
        let g = Neighbours::ReplaceOne;
        let p = derive(SelectionMethod::Public, g).unwrap();
        assert_eq!((p.epsilon, p.delta), (Some(0.0), Some(0.0)));
        assert_eq!(p.composition, Composition::None);
        let s = derive(SelectionMethod::PrivateSplit, g).unwrap();
        assert_eq!((s.epsilon, s.delta), (Some(1.0), Some(1e-5)));
        assert_eq!(s.composition, Composition::Parallel);
        let o = derive(SelectionMethod::NonPrivateHoldout, g).unwrap();
        assert_eq!((o.epsilon, o.delta, o.is_inside()), (None, None, false));
        let e = derive(SelectionMethod::PrivateSplit, Neighbours::AddRemove).unwrap_err();
        assert!(e.to_string().contains("replace-one"), "{e}");
    }

    #[test]
    fn the_record_serialises_as_method_epsilon_delta_composition() {
        let g = Neighbours::ReplaceOne;
        let s = derive(SelectionMethod::NonPrivateHoldout, g).unwrap();
        assert_eq!(
            serde_json::to_value(s).unwrap(),
            serde_json::json!({"method": "non-private-holdout", "epsilon": null, "delta": null, "composition": "outside"})
        );
        let p = derive(SelectionMethod::Public, g).unwrap();
        assert_eq!(
            serde_json::to_value(p).unwrap(),
            serde_json::json!({"method": "public", "epsilon": 0.0, "delta": 0.0, "composition": "none"})
        );
    }

    #[test]
    fn the_split_partitions_every_index_exactly_once() {
        for (n, m) in [(60_000, 10), (1_000, 10), (40, 2), (100, 1)] {
            let p = SplitPlan::new(n, m, SELECTION_FRACTION).unwrap();
            let mut seen = vec![0u8; n];
            let ranges = std::iter::once(p.final_range())
                .chain((0..m).map(|i| p.part_range(i)))
                .chain(std::iter::once(p.holdout_range()));
            for r in ranges {
                for i in r {
                    seen[i] += 1;
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "n = {n}, m = {m}");
            assert!(p.part_n >= MIN_PART && p.holdout_n >= p.part_n);
        }
        // MNIST's 60,000 digits over the 10-value grid: 12,000 for the selection
        let p = SplitPlan::new(60_000, 10, 0.2).unwrap();
        assert_eq!((p.final_n, p.part_n, p.holdout_n), (48_000, 1_090, 1_100));
        let e = SplitPlan::new(50, 10, 0.2).unwrap_err().to_string();
        assert!(e.contains("--lambda VALUE"), "{e}");
    }

    /// Golden value from the closed form of permute-and-flip with two candidates (McKenna &
    /// Sheldon 2020, section 3): the worse one, d counts behind, is returned with probability
    /// exp(−β·d)/2. At ε = 1 (β = 1/2) and d = 2: e⁻¹/2 = 0.18393972058572117.
    #[test]
    fn the_selection_matches_the_two_candidate_closed_form() {
        let p = permute_and_flip_probabilities(&[10.0, 8.0], holdout_beta(1.0)).unwrap();
        assert!((p[1] - 0.183_939_720_585_721_17).abs() < 1e-12, "{p:?}");
        // and the sampler draws it: 200,000 draws, 6-sigma band
        let mut rng = crate::noise::seeded_rng(7);
        let n = 200_000;
        let hits = (0..n)
            .filter(|_| select_candidate(&mut rng, &[10, 8], 1.0).unwrap() == 1)
            .count() as f64;
        let sd = (n as f64 * p[1] * (1.0 - p[1])).sqrt();
        assert!((hits - n as f64 * p[1]).abs() < 6.0 * sd, "{hits}");
    }

    /// The privacy of step 3, exactly: for hold-out counts moved by at most 1 each (every
    /// replace-one neighbour), every candidate's probability ratio is ≤ e^ε; at twice the β
    /// (noise calibrated for a monotone score) the worst pair exceeds e^ε.
    #[test]
    fn the_selection_is_epsilon_dp_for_neighbouring_counts_and_not_with_half_the_noise() {
        let eps = 1.0;
        let base = [40.0, 39.0, 37.0, 30.0];
        let mut worst: f64 = 0.0;
        let mut worst_doubled: f64 = 0.0;
        for mask in 0..3usize.pow(base.len() as u32) {
            let mut d = base;
            let mut m = mask;
            for v in d.iter_mut() {
                *v += (m % 3) as f64 - 1.0;
                m /= 3;
            }
            for (beta, w) in [
                (holdout_beta(eps), &mut worst),
                (2.0 * holdout_beta(eps), &mut worst_doubled),
            ] {
                let p = permute_and_flip_probabilities(&base, beta).unwrap();
                let q = permute_and_flip_probabilities(&d, beta).unwrap();
                for (a, b) in p.iter().zip(&q) {
                    *w = w.max((a / b).ln().abs());
                }
            }
        }
        assert!(worst <= eps + 1e-12, "{worst}");
        assert!(worst_doubled > eps * 1.2, "{worst_doubled}");
    }

    #[test]
    fn a_non_private_selection_invalidates_the_guarantee() {
        let c = crate::calibrate(&crate::CalibrationRequest {
            n: Some(1000),
            lambda: Some(0.01),
            ..crate::CalibrationRequest::new(
                crate::Method::ModelSensitivity,
                CalibrationMode::Corrected,
                Privacy::new(1.0, 0.0).unwrap(),
            )
        })
        .unwrap();
        assert!(c.is_valid());
        let public = c.clone().with_selection(SelectionMethod::Public).unwrap();
        assert!(public.is_valid());
        let outside = c
            .with_selection(SelectionMethod::NonPrivateHoldout)
            .unwrap();
        assert!(!outside.is_valid());
        // the reason survives a round trip through the record
        let back: crate::Calibration =
            serde_json::from_value(serde_json::to_value(&outside).unwrap()).unwrap();
        assert_eq!(back, outside);
        assert!(back.guarantee.validity.reasons()[0].contains("hyper-parameter"));
    }
}
