//! The private split selection of λ or DP-SGD's clip ν for one group (`--selection private`,
//! `compare --lambda private` / `--clip private`): `privpred_linear::methods::
//! private_split_select`, exactly as `privpred train --lambda private` runs it
//! ([`privpred_core::tuning`] states the protocol and its proof), and the release's part of the
//! training set as a data configuration of its own, so that the release's shared fit and
//! scores come from the runner's caches like every other group's.

use super::group::Selected;
use super::{Key, LinearRunner, Prepared, seq};
use crate::error::Result;
use crate::units::{Group, rng_for};
use privpred_core::defaults;
use privpred_core::{Selection, SelectionMethod};
use privpred_linear::dpsgd::CLIP_GRID;
use privpred_linear::methods::{Knob, private_split_select};
use privpred_linear::train::LAMBDA_GRID;
use std::sync::Arc;

impl LinearRunner {
    /// Selects `knob` for `g` by the private split over the grid of docs/study.md (λ:
    /// `LAMBDA_GRID`, ν: `CLIP_GRID`) on the whole training set of `p`, with a generator
    /// seeded by the group's draws id `rid` (the modes and budgets that share draws share the
    /// selection). The other hyper-parameter keeps its public default. Returns the selection
    /// and the release's data: the final part F, keyed apart from `key`.
    pub(crate) fn select_private(
        &self,
        g: &Group,
        key: &Key,
        p: &Prepared,
        seed: u64,
        rid: &str,
        knob: Knob,
    ) -> Result<Selected> {
        let (lambda, clip, grid): (Option<f64>, Option<f64>, &[f64]) = match knob {
            Knob::Lambda => (Some(defaults::LINEAR_PUBLIC_LAMBDA), None, &LAMBDA_GRID),
            Knob::Clip => (None, Some(defaults::LINEAR_DPSGD_CLIP), &CLIP_GRID),
        };
        let cal = self.calibration(g, p, p.train.n, lambda)?;
        let cfg = self.method_config(&cal, lambda, clip, g.setting.teachers)?;
        let mut rng = rng_for(seed, &format!("{rid}/private-split"));
        let s = seq(|| private_split_select(&cfg, &p.train, grid, knob, &mut rng))?;
        let record = Selection::derive(
            SelectionMethod::PrivateSplit,
            cal.privacy(),
            self.opts.neighbours,
        )?;
        let release = Prepared {
            train90: s.final_train.subset(&[]),
            hold: s.final_train.subset(&[]),
            train: s.final_train,
            test: p.test.clone(),
            steps: p.steps.clone(),
            data_dependent: p.data_dependent.clone(),
            checksum: p.checksum.clone(),
            labels: p.labels.clone(),
        };
        let (lambda, clip) = match knob {
            Knob::Lambda => (Some(s.chosen), None),
            Knob::Clip => (None, Some(s.chosen)),
        };
        Ok(Selected {
            lambda,
            clip,
            source: "private-split",
            note: None,
            record,
            release: Some((format!("{key}|private-split:{rid}"), Arc::new(release))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::LinearOptions;
    use super::*;
    use crate::results::Measurement;
    use crate::selection::SelectionOptions;
    use crate::sweep::Runner;
    use privpred_core::tuning::{SELECTION_FRACTION, SplitPlan};
    use privpred_core::{Method, Neighbours};
    use std::sync::Mutex;

    /// One repetition of `method`'s fig1a group (ε = 1) on digits under `selection`.
    fn row(method: Method, selection: SelectionOptions) -> Measurement {
        let mut opts = LinearOptions::new(true);
        opts.dataset = Some("digits".into());
        opts.selection = selection;
        let runner = LinearRunner::new(opts);
        let g = crate::holdout::group(method, 1.0, 0.0, 10, 8);
        let got = Mutex::new(None);
        let done = |_, m: Measurement| {
            *got.lock().unwrap() = Some(m);
            Ok(())
        };
        runner.run_group(&g, &[0], 7, &done).unwrap();
        got.into_inner().unwrap().unwrap()
    }

    /// The private split's record carries the group's (ε, δ) with parallel composition, and
    /// the release is trained on the split's final part (the paper's protocol on all of it).
    #[test]
    fn the_private_split_records_its_cost_and_trains_the_release_on_the_final_part() {
        let paper = row(Method::ModelSensitivity, SelectionOptions::PAPER);
        let s = paper.selection.unwrap();
        assert_eq!(s.method, SelectionMethod::NonPrivateHoldout);
        assert!(!s.is_inside());
        assert_eq!(
            paper.selection_label,
            "non-private-holdout — outside the guarantee"
        );
        let private = row(Method::ModelSensitivity, SelectionOptions::PRIVATE);
        let s = private.selection.unwrap();
        assert_eq!(s.method, SelectionMethod::PrivateSplit);
        assert_eq!((s.epsilon, s.delta), (Some(1.0), Some(0.0)));
        let plan = SplitPlan::new(paper.n_train, LAMBDA_GRID.len(), SELECTION_FRACTION).unwrap();
        assert_eq!(private.n_train, plan.final_n);
        assert!(LAMBDA_GRID.contains(&private.lambda.unwrap()));
        assert_eq!(private.cv_draws, None);
        let public = row(Method::ModelSensitivity, SelectionOptions::PUBLIC);
        assert_eq!(public.selection.unwrap().method, SelectionMethod::Public);
        assert_eq!(public.lambda, Some(defaults::LINEAR_PUBLIC_LAMBDA));
        assert_eq!(public.n_train, paper.n_train);
        // subsample-and-aggregate selects nothing under any protocol
        let saa = row(Method::SubsampleAggregate, SelectionOptions::PRIVATE);
        assert_eq!(saa.selection.unwrap().method, SelectionMethod::Public);
    }

    #[test]
    fn the_private_split_is_refused_under_add_remove() {
        use privpred_core::ParamGuard;
        let e = crate::params::LinearParams::new(true)
            .neighbours(Neighbours::AddRemove)
            .selection(SelectionOptions::PRIVATE)
            .check()
            .unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("replace-one"), "{e}");
        assert!(
            crate::params::LinearParams::new(true)
                .neighbours(Neighbours::AddRemove)
                .selection(SelectionOptions::PUBLIC)
                .check()
                .is_ok()
        );
    }
}
