//! The gradient oracle: what an engine computes for the training loops — a batch's (clipped)
//! gradient sum and the batched logits ([`GradientEngine`]) — and privpred-nn's own CPU
//! implementation of it ([`batch_gradient`], [`predict_logits`], [`CpuEngine`]).
//!
//! This module sits below the training loops ([`crate::train`]), the engines' factory
//! ([`crate::engine`]) and the libtorch engine (`torch`), so none of them imports another in
//! a circle; `train` and `engine` re-export its items under their old paths.

use crate::data::{Augment, ImageSet, Normalization, prepare_image};
use crate::error::{NnError, Result};
use crate::resnet::{ResNet, Tape};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

/// Environment variable naming the torch engine's device (`cpu`, `cuda`, `cuda:N`); unset:
/// the first CUDA device when one is available, else the CPU.
pub const DEVICE_ENV: &str = "PRIVPRED_DEVICE";

/// What the batch-gradient kernel does with each example's gradient.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GradMode {
    /// Sum the raw gradients.
    Sum,
    /// Clip each example's full gradient to norm ≤ ν, then sum.
    ClipJoint(f64),
    /// Clip each parameter tensor of each example's gradient to ≤ ν, then sum.
    ClipPerLayer(f64),
}

/// Statistics of one batch.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BatchStats {
    /// Examples in the batch.
    pub n: usize,
    /// Sum of losses.
    pub loss_sum: f64,
    /// Correct predictions (training mode: on augmented inputs).
    pub correct: usize,
    /// Examples whose gradient was scaled down by clipping.
    pub clipped: usize,
    /// Sum of the examples' (unclipped) gradient norms (0 for [`GradMode::Sum`]).
    pub norm_sum: f64,
}

impl BatchStats {
    pub(crate) fn merge(mut self, o: BatchStats) -> Self {
        self.n += o.n;
        self.loss_sum += o.loss_sum;
        self.correct += o.correct;
        self.clipped += o.clipped;
        self.norm_sum += o.norm_sum;
        self
    }
}

/// Where the inputs of a batch come from.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The images.
    pub data: &'a ImageSet,
    /// Normalisation.
    pub norm: &'a Normalization,
    /// Seed of the augmentation of this batch (None: no augmentation). Example `j` of the
    /// batch uses a generator seeded by (seed, j), so results do not depend on threads.
    pub augment_seed: Option<u64>,
}

impl Inputs<'_> {
    /// Image `i` of the data, normalised and augmented as example `j` of the batch, into `out`:
    /// every engine prepares its inputs with this, so all see the same pixels.
    pub(crate) fn prepare(&self, i: usize, j: usize, out: &mut Vec<f32>) {
        let d = self.data;
        prepare_image(
            d.image(i),
            d.channels,
            d.height,
            d.width,
            self.norm,
            aug_for(self.augment_seed, j),
            out,
        );
    }
}

/// The prepared images `part` (example `j` of `part` being example `j0 + j` of the batch, for
/// its augmentation), concatenated (`part.len() × input_len` values), prepared in parallel on
/// the CPU: what an engine on another device uploads.
pub fn prepare_batch(net: &ResNet, inputs: Inputs<'_>, part: &[usize], j0: usize) -> Vec<f32> {
    let len = net.input_len();
    let mut x = vec![0.0f32; part.len() * len];
    x.par_chunks_mut(len)
        .zip(part.par_iter().enumerate())
        .for_each_init(Vec::new, |tmp, (dst, (jj, &i))| {
            inputs.prepare(i, j0 + jj, tmp);
            dst.copy_from_slice(tmp);
        });
    x
}

/// The augmentation of example `j` of a batch whose augmentation seed is `seed` (identity
/// when `None`).
fn aug_for(seed: Option<u64>, j: usize) -> Augment {
    match seed {
        None => Augment::default(),
        Some(s) => {
            let mut r =
                ChaCha20Rng::seed_from_u64(s ^ (j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            Augment::sample(&mut r, 4)
        }
    }
}

/// Scales `g` so that its norm is at most `clip`; returns (norm before, whether scaled).
pub fn clip_in_place(g: &mut [f32], clip: f64) -> (f64, bool) {
    let norm = g
        .iter()
        .map(|&v| (v as f64) * (v as f64))
        .sum::<f64>()
        .sqrt();
    if norm > clip {
        // round the factor down so the clipped norm never exceeds ν in f32
        let f = (clip / norm) as f32 * (1.0 - 4.0 * f32::EPSILON);
        for v in g.iter_mut() {
            *v *= f;
        }
        (norm, true)
    } else {
        (norm, false)
    }
}

/// Σ over the batch `idx` of each example's gradient (raw or clipped per `mode`), written into
/// `out` (overwritten). Runs in parallel over contiguous chunks of the batch.
pub fn batch_gradient(
    net: &ResNet,
    params: &[f32],
    inputs: Inputs<'_>,
    idx: &[usize],
    mode: GradMode,
    out: &mut [f32],
) -> BatchStats {
    let p = net.num_params();
    assert_eq!(out.len(), p);
    out.fill(0.0);
    if idx.is_empty() {
        return BatchStats::default();
    }
    let workers = rayon::current_num_threads().max(1).min(idx.len());
    let chunk = idx.len().div_ceil(workers);
    let d = inputs.data;
    let partials: Vec<(Vec<f32>, BatchStats)> = idx
        .par_chunks(chunk)
        .enumerate()
        .map(|(ci, part)| {
            let mut acc = vec![0.0f32; p];
            let mut gi = if mode == GradMode::Sum {
                Vec::new()
            } else {
                vec![0.0f32; p]
            };
            let mut tape = Tape::default();
            let mut x = Vec::new();
            let mut st = BatchStats::default();
            for (jj, &i) in part.iter().enumerate() {
                let j = ci * chunk + jj;
                inputs.prepare(i, j, &mut x);
                let y = d.labels[i];
                net.forward(params, &x, &mut tape);
                let pred = argmax(tape.logits());
                st.correct += (pred == y as usize) as usize;
                st.n += 1;
                match mode {
                    GradMode::Sum => st.loss_sum += net.backward(params, &mut tape, y, &mut acc),
                    GradMode::ClipJoint(c) => {
                        gi.fill(0.0);
                        st.loss_sum += net.backward(params, &mut tape, y, &mut gi);
                        let (nrm, clipped) = clip_in_place(&mut gi, c);
                        st.norm_sum += nrm;
                        st.clipped += clipped as usize;
                        for (a, g) in acc.iter_mut().zip(&gi) {
                            *a += g;
                        }
                    }
                    GradMode::ClipPerLayer(c) => {
                        gi.fill(0.0);
                        st.loss_sum += net.backward(params, &mut tape, y, &mut gi);
                        let mut any = false;
                        let mut sq = 0.0;
                        for t in net.tensors() {
                            let (nrm, clipped) = clip_in_place(&mut gi[t.range()], c);
                            sq += nrm * nrm;
                            any |= clipped;
                        }
                        st.norm_sum += sq.sqrt();
                        st.clipped += any as usize;
                        for (a, g) in acc.iter_mut().zip(&gi) {
                            *a += g;
                        }
                    }
                }
            }
            (acc, st)
        })
        .collect();
    let mut stats = BatchStats::default();
    for (acc, st) in partials {
        for (o, a) in out.iter_mut().zip(&acc) {
            *o += a;
        }
        stats = stats.merge(st);
    }
    stats
}

/// Each example's exact gradient (unclipped), in the order of `idx` (for tests and audits).
pub fn per_example_gradients(
    net: &ResNet,
    params: &[f32],
    inputs: Inputs<'_>,
    idx: &[usize],
) -> Vec<Vec<f32>> {
    idx.par_iter()
        .enumerate()
        .map(|(j, &i)| {
            let mut x = Vec::new();
            inputs.prepare(i, j, &mut x);
            let mut g = vec![0.0f32; net.num_params()];
            net.loss_grad(
                params,
                &x,
                inputs.data.labels[i],
                &mut Tape::default(),
                &mut g,
            );
            g
        })
        .collect()
}

fn argmax(v: &[f32]) -> usize {
    let mut b = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[b] {
            b = i;
        }
    }
    b
}

/// Logits of every image (no augmentation), in parallel.
pub fn predict_logits(
    net: &ResNet,
    params: &[f32],
    data: &ImageSet,
    norm: &Normalization,
) -> Vec<Vec<f32>> {
    (0..data.len())
        .into_par_iter()
        .map_init(
            || (Tape::default(), Vec::new()),
            |(tape, x), i| {
                prepare_image(
                    data.image(i),
                    data.channels,
                    data.height,
                    data.width,
                    norm,
                    Augment::default(),
                    x,
                );
                net.forward(params, x, tape).to_vec()
            },
        )
        .collect()
}

/// Predicted labels of every image.
pub fn predict_labels(
    net: &ResNet,
    params: &[f32],
    data: &ImageSet,
    norm: &Normalization,
) -> Vec<u32> {
    predict_logits(net, params, data, norm)
        .iter()
        .map(|l| argmax(l) as u32)
        .collect()
}

/// Predicted labels of every image, with the logits from `engine`.
pub fn predict_labels_on(
    engine: &dyn GradientEngine,
    net: &ResNet,
    params: &[f32],
    data: &ImageSet,
    norm: &Normalization,
) -> Result<Vec<u32>> {
    Ok(engine
        .predict_logits(net, params, data, norm)?
        .iter()
        .map(|l| argmax(l) as u32)
        .collect())
}

/// Fraction of `pred` equal to the labels of `data`.
pub fn accuracy(pred: &[u32], labels: &[u32]) -> f64 {
    let c = pred.iter().zip(labels).filter(|(a, b)| a == b).count();
    c as f64 / labels.len().max(1) as f64
}

/// The images' channels and size are what the network takes (every engine checks this).
pub(crate) fn check_image_shape(net: &ResNet, data: &ImageSet) -> Result<()> {
    let c = net.config();
    if data.channels != c.in_channels || data.height != c.image_size || data.width != c.image_size {
        return Err(NnError::Shape(format!(
            "{}: images are {}×{}×{}, the network expects {}×{}×{}",
            data.source,
            data.channels,
            data.height,
            data.width,
            c.in_channels,
            c.image_size,
            c.image_size
        )));
    }
    Ok(())
}

/// Computes batch gradients and logits of a [`ResNet`] for the training loops.
///
/// Implementations must give, up to floating-point rounding, what the reference
/// [`batch_gradient`] gives: the sum over the batch of each example's exact
/// cross-entropy gradient, raw or clipped per example as `mode` says, with the same
/// [`BatchStats`]. Privacy rests on the clipping: whatever the engine, each example's
/// contribution to `out` must have norm ≤ ν under [`GradMode::ClipJoint`] (ν per tensor under
/// [`GradMode::ClipPerLayer`]).
pub trait GradientEngine: Send + Sync {
    /// The engine's name: `cpu` or `torch`.
    fn name(&self) -> &'static str;

    /// Where it computes, for provenance (e.g. `cpu`, `cuda:0 (NVIDIA H100 80GB HBM3)`).
    fn device(&self) -> String;

    /// `name` and `device` in one line, e.g. `torch on cuda:0`.
    fn describe(&self) -> String {
        format!("{} on {}", self.name(), self.device())
    }

    /// Σ over the batch `idx` of each example's gradient (raw or clipped per `mode`), written
    /// into `out` (overwritten, length [`ResNet::num_params`]). Example `j` of the batch is
    /// augmented with the generator of `(inputs.augment_seed, j)`, as in
    /// [`batch_gradient`].
    fn batch_gradient(
        &self,
        net: &ResNet,
        params: &[f32],
        inputs: Inputs<'_>,
        idx: &[usize],
        mode: GradMode,
        out: &mut [f32],
    ) -> Result<BatchStats>;

    /// The settings that bear on the engine's speed, for throughput reports (e.g. examples per
    /// device pass); `null` when it has none.
    fn settings(&self, batch: usize) -> serde_json::Value {
        let _ = batch;
        serde_json::Value::Null
    }

    /// Logits of every image of `data` (no augmentation), one row per image.
    fn predict_logits(
        &self,
        net: &ResNet,
        params: &[f32],
        data: &ImageSet,
        norm: &Normalization,
    ) -> Result<Vec<Vec<f32>>>;

    /// The summed (non-private, [`GradMode::Sum`]) gradients of several networks of the same
    /// architecture at once, one per job (e.g. the teachers of subsample-and-aggregate, each
    /// on a batch of its own shard): `outs[k]` (overwritten, length [`ResNet::num_params`]) and
    /// the returned statistics are what [`GradientEngine::batch_gradient`] gives for job `k`
    /// alone. The default computes the jobs one after another ([`group_gradients_one_by_one`]);
    /// an engine may compute them in one device pass.
    fn group_gradients(
        &self,
        net: &ResNet,
        jobs: &[GroupJob<'_>],
        outs: &mut [Vec<f32>],
    ) -> Result<Vec<BatchStats>> {
        group_gradients_one_by_one(self, net, jobs, outs)
    }

    /// Whether [`GradientEngine::group_gradients`] computes its jobs together (one pass for
    /// all of them) rather than one after another, so that training several networks in lock
    /// step can pay.
    fn groups_together(&self) -> bool {
        false
    }
}

/// One network's share of [`GradientEngine::group_gradients`]: its parameters and its batch.
#[derive(Debug, Clone, Copy)]
pub struct GroupJob<'a> {
    /// The network's flat parameters.
    pub params: &'a [f32],
    /// Where its batch comes from (its own data and augmentation seed).
    pub inputs: Inputs<'a>,
    /// The batch: indices into `inputs.data`.
    pub idx: &'a [usize],
}

/// [`GradientEngine::group_gradients`] as one [`GradientEngine::batch_gradient`] per job.
pub fn group_gradients_one_by_one<E: GradientEngine + ?Sized>(
    engine: &E,
    net: &ResNet,
    jobs: &[GroupJob<'_>],
    outs: &mut [Vec<f32>],
) -> Result<Vec<BatchStats>> {
    check_group(net, jobs, outs)?;
    jobs.iter()
        .zip(outs.iter_mut())
        .map(|(j, out)| engine.batch_gradient(net, j.params, j.inputs, j.idx, GradMode::Sum, out))
        .collect()
}

/// One output per job, each of the network's length.
pub(crate) fn check_group(net: &ResNet, jobs: &[GroupJob<'_>], outs: &[Vec<f32>]) -> Result<()> {
    if jobs.len() != outs.len() {
        return Err(NnError::Shape(format!(
            "{} gradient jobs and {} outputs",
            jobs.len(),
            outs.len()
        )));
    }
    jobs.iter()
        .zip(outs)
        .try_for_each(|(j, o)| check_lengths(net, j.params, o.len()))
}

/// privpred-nn's own CPU engine: [`batch_gradient`] and [`predict_logits`]
/// (bit-identical to calling them directly).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuEngine;

impl GradientEngine for CpuEngine {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn device(&self) -> String {
        format!("cpu ({} threads)", rayon::current_num_threads())
    }

    fn describe(&self) -> String {
        format!("privpred-nn cpu ({} threads)", rayon::current_num_threads())
    }

    fn batch_gradient(
        &self,
        net: &ResNet,
        params: &[f32],
        inputs: Inputs<'_>,
        idx: &[usize],
        mode: GradMode,
        out: &mut [f32],
    ) -> Result<BatchStats> {
        check_lengths(net, params, out.len())?;
        Ok(batch_gradient(net, params, inputs, idx, mode, out))
    }

    fn predict_logits(
        &self,
        net: &ResNet,
        params: &[f32],
        data: &ImageSet,
        norm: &Normalization,
    ) -> Result<Vec<Vec<f32>>> {
        check_lengths(net, params, net.num_params())?;
        Ok(predict_logits(net, params, data, norm))
    }
}

/// Checks the parameter and gradient lengths against the network (shared by the engines).
pub(crate) fn check_lengths(net: &ResNet, params: &[f32], out_len: usize) -> Result<()> {
    if params.len() != net.num_params() || out_len != net.num_params() {
        return Err(NnError::Shape(format!(
            "parameter vector of {} values and gradient buffer of {} for a network of {} parameters",
            params.len(),
            out_len,
            net.num_params()
        )));
    }
    Ok(())
}
