//! Non-private SGD as a run that steps on request ([`SgdRun`]), so that one network's loop and
//! a group of networks trained in lock step ([`train_group_resumable_on`]) take exactly the
//! same steps: the same initialisation, shuffles, augmentation seeds, learning rates and
//! checkpoints, from the same generator.

use super::{
    BatchStats, GradientEngine, ImageSet, Inputs, LoopRng, Momentum, NnError, Normalization,
    Progress, ResNet, Result, Resume, Rng, RngExt, SgdConfig, Trained, check_data, restore, resume,
    shuffle, snapshot,
};
use crate::gradient::GroupJob;

/// The state of one non-private training run between steps.
pub(super) struct SgdRun<'r, R: Rng> {
    /// The parameters after the last step taken.
    pub(super) params: Vec<f32>,
    opt: Momentum,
    perm: Vec<usize>,
    pos: usize,
    rng: LoopRng<'r, R>,
    /// Steps taken.
    pub(super) step: usize,
    /// Steps planned.
    pub(super) steps: usize,
    b: usize,
    n: usize,
    cfg: SgdConfig,
}

impl<'r, R: Rng> SgdRun<'r, R> {
    /// A run on `data` from `init` (or a fresh initialisation drawn from `rng`), continued
    /// from `resume`'s checkpoint when there is one.
    pub(super) fn start(
        net: &ResNet,
        data: &ImageSet,
        cfg: &SgdConfig,
        init: Option<Vec<f32>>,
        rng: &'r mut R,
        resume: Option<&Resume>,
    ) -> Result<Self> {
        cfg.validate()?;
        check_data(net, data)?;
        let n = data.len();
        let b = cfg.batch_size.min(n);
        let steps = ((cfg.epochs * n as f64) / b as f64).ceil() as usize;
        let mut params = match init {
            Some(p) if p.len() == net.num_params() => p,
            Some(p) => {
                return Err(NnError::Shape(format!(
                    "initial parameters have {} values, the network {}",
                    p.len(),
                    net.num_params()
                )));
            }
            None => net.init_params_with(cfg.init, rng),
        };
        let mut velocity = vec![0.0; params.len()];
        let mut perm: Vec<usize> = (0..n).collect();
        let mut pos = n; // forces a shuffle at the first step
        let (first, seed) = restore(
            resume,
            steps,
            &mut params,
            &mut velocity,
            &mut perm,
            &mut pos,
        )?;
        Ok(SgdRun {
            params,
            opt: Momentum { v: velocity },
            perm,
            pos,
            rng: LoopRng::start(rng, resume, seed),
            step: first,
            steps,
            b,
            n,
            cfg: cfg.clone(),
        })
    }

    /// Whether every planned step is taken.
    pub(super) fn finished(&self) -> bool {
        self.step >= self.steps
    }

    /// The next batch (from the shuffled order, reshuffled at the end of each pass) and its
    /// augmentation seed.
    pub(super) fn next_batch(&mut self) -> (Vec<usize>, Option<u64>) {
        let mut batch = Vec::with_capacity(self.b);
        while batch.len() < self.b {
            if self.pos == self.n {
                shuffle(&mut self.perm, &mut self.rng);
                self.pos = 0;
            }
            let take = (self.b - batch.len()).min(self.n - self.pos);
            batch.extend_from_slice(&self.perm[self.pos..self.pos + take]);
            self.pos += take;
        }
        let seed = self.cfg.augment.then(|| self.rng.random::<u64>());
        (batch, seed)
    }

    /// Takes the step with the batch's summed gradient `grad` (scaled here to the mean over
    /// `batch_len` examples); returns the learning rate used.
    pub(super) fn apply(&mut self, grad: &mut [f32], batch_len: usize) -> Result<f64> {
        let inv = 1.0 / batch_len as f32;
        grad.iter_mut().for_each(|g| *g *= inv);
        let lr = self.cfg.lr_at(self.step, self.steps);
        let (mu, wd) = (self.cfg.momentum, self.cfg.weight_decay);
        self.opt.step(&mut self.params, grad, lr, mu, wd)?;
        self.step += 1;
        Ok(lr)
    }

    /// At a segment boundary of `resume`, re-seeds and writes the checkpoint; returns whether
    /// it did.
    pub(super) fn checkpoint(&mut self, resume: Option<&Resume>) -> Result<bool> {
        let (step, steps, pos) = (self.step, self.steps, self.pos);
        let (perm, params, velocity) = (&self.perm, &self.params, &self.opt.v);
        resume::checkpoint_at(resume, &mut self.rng, step, steps, |seed| {
            snapshot(step, steps, seed, pos, perm, params, velocity)
        })
    }

    /// The progress record of the step just taken.
    pub(super) fn progress(&self, lr: f64, batch: BatchStats) -> Progress {
        Progress {
            step: self.step,
            steps: self.steps,
            epoch: self.step as f64 * self.b as f64 / self.n as f64,
            lr,
            batch,
        }
    }

    /// The parameters and the steps taken of the planned.
    pub(super) fn into_trained(self) -> Trained {
        Trained {
            params: self.params,
            steps_done: self.step,
            steps_planned: self.steps,
        }
    }
}

/// One network of [`train_group_resumable_on`]: its training set (e.g. a teacher's shard), its
/// configuration, its generator (initialisation, shuffles, augmentation) and its checkpoint.
pub struct GroupMember<'a, R: Rng> {
    /// The training set.
    pub data: &'a ImageSet,
    /// Its schedule.
    pub cfg: &'a SgdConfig,
    /// Its generator.
    pub rng: &'a mut R,
    /// Its checkpoint file, segment length and deadline (`None`: no checkpoints, no stop).
    pub resume: Option<&'a Resume>,
}

/// Trains several networks of the architecture `net` non-privately in lock step. Each member
/// takes exactly the steps that [`super::train_nonprivate_resumable_on`] takes for it alone
/// (its own initialisation, shuffles, augmentation and checkpoints, from its own generator);
/// only the gradients of a step come from one [`GradientEngine::group_gradients`] call over
/// the members still training, so an engine that computes a group in one pass (libtorch on a
/// GPU) runs every member's batch at once. Members may start from checkpoints at different
/// steps. At the first step after the deadline at which a member writes its checkpoint, the
/// group stops with [`NnError::Stopped`], after every member at a boundary has written its
/// own. `observer` gets (member index, progress). Returns each member's parameters.
pub fn train_group_resumable_on<R: Rng>(
    engine: &dyn GradientEngine,
    net: &ResNet,
    norm: &Normalization,
    members: Vec<GroupMember<'_, R>>,
    observer: &mut dyn FnMut(usize, &Progress),
) -> Result<Vec<Vec<f32>>> {
    let mut runs = Vec::with_capacity(members.len());
    let mut sources = Vec::with_capacity(members.len());
    for m in members {
        runs.push(SgdRun::start(net, m.data, m.cfg, None, m.rng, m.resume)?);
        sources.push((m.data, m.resume));
    }
    let mut grads = vec![vec![0.0f32; net.num_params()]; runs.len()];
    loop {
        let active: Vec<usize> = (0..runs.len()).filter(|&k| !runs[k].finished()).collect();
        if active.is_empty() {
            break;
        }
        let batches: Vec<(Vec<usize>, Option<u64>)> =
            active.iter().map(|&k| runs[k].next_batch()).collect();
        let outs = &mut grads[..active.len()];
        let stats = {
            let jobs: Vec<GroupJob<'_>> = active
                .iter()
                .zip(&batches)
                .map(|(&k, (idx, seed))| GroupJob {
                    params: &runs[k].params,
                    inputs: Inputs {
                        data: sources[k].0,
                        norm,
                        augment_seed: *seed,
                    },
                    idx,
                })
                .collect();
            engine.group_gradients(net, &jobs, outs)?
        };
        let mut stop = None;
        for (j, &k) in active.iter().enumerate() {
            let lr = runs[k].apply(&mut outs[j], batches[j].0.len())?;
            let resume = sources[k].1;
            if runs[k].checkpoint(resume)? && resume.is_some_and(Resume::expired) {
                stop = Some(k);
            }
            observer(k, &runs[k].progress(lr, stats[j]));
        }
        if let Some(k) = stop {
            resume::stop_if_expired(sources[k].1, runs[k].step, runs[k].steps)?;
        }
    }
    Ok(runs.into_iter().map(|r| r.params).collect())
}

/// Trains `members` in lock step ([`train_group_resumable_on`]) when `together`, else one
/// after another (each a group of one, which takes the same steps). `finished` gets each
/// member's index and parameters: as soon as that member is done when one after another (so a
/// caller can cache it before the next starts), after the whole group when together.
pub fn train_members_on<R: Rng>(
    engine: &dyn GradientEngine,
    net: &ResNet,
    norm: &Normalization,
    members: Vec<GroupMember<'_, R>>,
    together: bool,
    finished: &mut dyn FnMut(usize, Vec<f32>) -> Result<()>,
    observer: &mut dyn FnMut(usize, &Progress),
) -> Result<()> {
    if together {
        let params = train_group_resumable_on(engine, net, norm, members, observer)?;
        return params
            .into_iter()
            .enumerate()
            .try_for_each(|(k, p)| finished(k, p));
    }
    for (k, m) in members.into_iter().enumerate() {
        let mut one =
            train_group_resumable_on(engine, net, norm, vec![m], &mut |_, p| observer(k, p))?;
        finished(k, one.pop().expect("one member, one result"))?;
    }
    Ok(())
}
