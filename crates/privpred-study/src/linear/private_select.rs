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
