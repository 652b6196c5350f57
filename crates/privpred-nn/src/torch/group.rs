//! Several networks of one architecture as one grouped network, for training
//! subsample-and-aggregate's teachers together ([`GradientEngine::group_gradients`]).
//!
//! With T members, each on a batch of the same size b from its own data, the members' inputs
//! are stacked along channels (`b × T·C × H × W`, member-major) and the network is built so
//! that no value of one member ever meets another's:
//! - each 3×3 convolution is one convolution with `groups = T` (weights `T·Cout × Cin × 3 × 3`);
//! - GroupNorm runs with `T · min(32, C)` groups over the member-major channels: a group is a
//!   contiguous run of channels inside one member's block, so its statistics are that member's;
//! - the type-A shortcut pads each member's channels on its own (`b × T × C × H × W`, padded,
//!   reshaped back);
//! - global average pooling, then the linear layer as one batched product over members.
//!
//! The loss is the sum of every member's summed cross-entropy; member k's parameters reach only
//! member k's loss, so one backward pass gives every member's summed gradient. Only the
//! gradients (`T × P`) and the statistics come back to the CPU, in one copy each.
//!
//! [`GradientEngine::group_gradients`]: crate::gradient::GradientEngine::group_gradients

use super::{DEFAULT_CHUNK, GN_EPS, TorchEngine, add_into, engine_err};
use crate::error::Result;
use crate::gradient::{
    BatchStats, GroupJob, check_group, group_gradients_one_by_one, prepare_batch,
};
use crate::resnet::{ResNet, Shortcut};
use tch::{Device, Kind, TchError, Tensor};

/// Examples of all members together per grouped device pass on CUDA unless
/// [`TorchEngine::with_group_examples`] says otherwise: 16 teachers × 600 (the paper's batch)
/// fit in one pass. Non-private passes keep no per-example gradients, only the activations
/// recorded for the backward pass (≈ 3 MB an example for ResNet-20 on 32×32 images: ≈ 30 GB
/// at 9,600 examples, on GPUs of 80 GB and more).
pub const CUDA_GROUP_EXAMPLES: usize = 16_384;

/// The environment variable that overrides the examples per grouped device pass of
/// [`TorchEngine::from_env`] (a whole number ≥ 1).
pub const GROUP_EXAMPLES_ENV: &str = "PRIVPRED_TORCH_GROUP_EXAMPLES";

/// The default examples of all members together per grouped device pass on `device`:
/// [`CUDA_GROUP_EXAMPLES`] on CUDA, else [`DEFAULT_CHUNK`].
pub fn default_group_examples(device: Device) -> usize {
    match device {
        Device::Cuda(_) => CUDA_GROUP_EXAMPLES,
        _ => DEFAULT_CHUNK,
    }
}

impl TorchEngine {
    /// The same engine with at most `examples` (≥ 1) examples of all members together per
    /// device pass of [`GradientEngine::group_gradients`](crate::gradient::GradientEngine::group_gradients).
    pub fn with_group_examples(self, examples: usize) -> Self {
        TorchEngine {
            group_examples: examples.max(1),
            ..self
        }
    }

    /// At most this many examples (all members together) per grouped device pass.
    pub fn group_examples(&self) -> usize {
        self.group_examples
    }

    /// [`GradientEngine::group_gradients`](crate::gradient::GradientEngine::group_gradients):
    /// two or more jobs with batches of one size run as one grouped network; anything else
    /// one job after another.
    pub(super) fn group_gradients_together(
        &self,
        net: &ResNet,
        jobs: &[GroupJob<'_>],
        outs: &mut [Vec<f32>],
    ) -> Result<Vec<BatchStats>> {
        check_group(net, jobs, outs)?;
        let b = jobs.first().map_or(0, |j| j.idx.len());
        if jobs.len() < 2 || b == 0 || jobs.iter().any(|j| j.idx.len() != b) {
            return group_gradients_one_by_one(self, net, jobs, outs);
        }
        for j in jobs {
            self.checked(net, j.inputs.data, j.idx)?;
        }
        self.group_inner(net, jobs, outs)
            .map_err(|e| engine_err(self.device, e))
    }

    /// Device passes of a grouped step of `members` networks on batches of `batch` examples.
    pub fn group_passes(&self, members: usize, batch: usize) -> usize {
        batch.div_ceil(self.group_per_member(members))
    }

    /// Examples of each member per grouped device pass.
    fn group_per_member(&self, members: usize) -> usize {
        (self.group_examples / members.max(1)).max(1)
    }

    fn group_inner(
        &self,
        net: &ResNet,
        jobs: &[GroupJob<'_>],
        outs: &mut [Vec<f32>],
    ) -> std::result::Result<Vec<BatchStats>, TchError> {
        let t = jobs.len();
        let b = jobs[0].idx.len();
        let leaves = self.group_leaves(net, jobs)?;
        let wrt: Vec<&Tensor> = leaves.iter().collect();
        let mut acc: Option<Tensor> = None;
        let mut stats: Option<Tensor> = None;
        let step = self.group_per_member(t);
        for s in (0..b).step_by(step) {
            let e = (s + step).min(b);
            let (x, y) = self.group_batch(net, jobs, s, e)?;
            let logits = group_forward(net, &leaves, &x, t as i64)?;
            let losses = logits
                .f_log_softmax(2, Kind::Float)?
                .f_gather(2, &y.f_unsqueeze(2)?, false)?
                .f_squeeze_dim(2)?
                .f_neg()?;
            let loss = losses.f_sum(Kind::Float)?;
            let g = Tensor::f_run_backward(&[&loss], &wrt, false, false)?;
            let _ng = tch::no_grad_guard();
            let flat: Vec<Tensor> = g
                .iter()
                .map(|p| p.f_reshape([t as i64, -1]))
                .collect::<std::result::Result<_, _>>()?;
            let grad = Tensor::f_cat(&flat, 1)?;
            let correct = logits
                .f_argmax(2, false)?
                .f_eq_tensor(&y)?
                .f_sum_dim_intlist([1i64].as_slice(), false, Kind::Double)?;
            let loss_sums =
                losses
                    .f_detach()?
                    .f_sum_dim_intlist([1i64].as_slice(), false, Kind::Double)?;
            let st = Tensor::f_stack(&[loss_sums, correct], 1)?;
            add_into(&mut acc, grad)?;
            add_into(&mut stats, st)?;
        }
        let (Some(acc), Some(stats)) = (acc, stats) else {
            return Err(TchError::Kind("a grouped step without examples".into()));
        };
        let p = net.num_params();
        let acc = acc.f_to_device(Device::Cpu)?.f_contiguous()?;
        let mut buf = vec![0.0f32; t * p];
        acc.f_copy_data(&mut buf, t * p)?;
        for (out, g) in outs.iter_mut().zip(buf.chunks_exact(p)) {
            out.copy_from_slice(g);
        }
        let st = Vec::<f64>::try_from(&stats.f_to_device(Device::Cpu)?.f_reshape([-1])?)?;
        Ok(st
            .chunks_exact(2)
            .map(|r| BatchStats {
                n: b,
                loss_sum: r[0],
                correct: r[1].round() as usize,
                clipped: 0,
                norm_sum: 0.0,
            })
            .collect())
    }

    /// Every parameter tensor of every member as one leaf `T × shape` on the device, in the
    /// order of [`ResNet::tensors`] (the members' flat vectors go up in one copy).
    fn group_leaves(
        &self,
        net: &ResNet,
        jobs: &[GroupJob<'_>],
    ) -> std::result::Result<Vec<Tensor>, TchError> {
        let t = jobs.len() as i64;
        let p = net.num_params();
        let mut all = Vec::with_capacity(jobs.len() * p);
        jobs.iter().for_each(|j| all.extend_from_slice(j.params));
        let flat = Tensor::f_from_slice(&all)?
            .f_view([t, p as i64])?
            .f_to_device(self.device)?;
        net.tensors
            .iter()
            .map(|info| {
                let mut shape = vec![t];
                shape.extend(info.shape.iter().map(|&v| v as i64));
                flat.f_narrow(1, info.offset as i64, info.len as i64)?
                    .f_contiguous()?
                    .f_view(shape.as_slice())?
                    .f_set_requires_grad(true)
            })
            .collect()
    }

    /// Examples `s..e` of every member's batch, prepared on the CPU (member k's example j
    /// augmented as example j of its batch), as `(e−s) × T·C × H × W` member-major on the
    /// device, and their labels `T × (e−s)`.
    fn group_batch(
        &self,
        net: &ResNet,
        jobs: &[GroupJob<'_>],
        s: usize,
        e: usize,
    ) -> std::result::Result<(Tensor, Tensor), TchError> {
        let cfg = net.config();
        let (t, bc) = (jobs.len() as i64, (e - s) as i64);
        let (c, size) = (cfg.in_channels as i64, cfg.image_size as i64);
        let mut x = Vec::with_capacity(jobs.len() * (e - s) * net.input_len());
        let mut labels = Vec::with_capacity(jobs.len() * (e - s));
        for j in jobs {
            x.extend(prepare_batch(net, j.inputs, &j.idx[s..e], s));
            let d = j.inputs.data;
            labels.extend(j.idx[s..e].iter().map(|&i| d.labels[i] as i64));
        }
        let xt = Tensor::f_from_slice(&x)?
            .f_view([t, bc, c, size, size])?
            .f_to_device(self.device)?
            .f_permute([1i64, 0, 2, 3, 4].as_slice())?
            .f_reshape([bc, t * c, size, size])?;
        let yt = Tensor::f_from_slice(&labels)?
            .f_view([t, bc])?
            .f_to_device(self.device)?;
        Ok((xt, yt))
    }
}

/// The grouped network's logits, `T × b × classes`, for member-major inputs `x`
/// (`b × T·C × H × W`); the same operations as the single network's forward pass.
fn group_forward(
    net: &ResNet,
    leaves: &[Tensor],
    x: &Tensor,
    t: i64,
) -> std::result::Result<Tensor, TchError> {
    let conv_gn = |j: usize, a: &Tensor| -> std::result::Result<Tensor, TchError> {
        let c = &net.convs[j];
        let s = c.stride as i64;
        let w = &leaves[c.weight];
        let k = w.size();
        let w = w.f_reshape([t * k[1], k[2], k[3], k[4]])?;
        let z = a.f_conv2d(&w, None::<Tensor>, [s, s], [1, 1], [1, 1], t)?;
        let gamma = leaves[c.gamma].f_reshape([-1])?;
        let beta = leaves[c.beta].f_reshape([-1])?;
        z.f_group_norm(t * c.groups as i64, Some(&gamma), Some(&beta), GN_EPS, true)
    };
    let mut a = conv_gn(0, x)?.f_relu()?;
    for b in &net.blocks {
        let h1 = conv_gn(b.conv1, &a)?.f_relu()?;
        let y2 = conv_gn(b.conv2, &h1)?;
        let sc = match b.shortcut {
            Shortcut::Identity => a.shallow_clone(),
            Shortcut::TypeA => {
                let c1 = &net.convs[b.conv1];
                let pad = ((c1.cout - c1.cin) / 2) as i64;
                let sub = a
                    .f_slice(2, 0, None::<i64>, 2)?
                    .f_slice(3, 0, None::<i64>, 2)?;
                let z = sub.size();
                sub.f_reshape([z[0], t, c1.cin as i64, z[2], z[3]])?
                    .f_constant_pad_nd([0, 0, 0, 0, pad, pad])?
                    .f_reshape([z[0], t * c1.cout as i64, z[2], z[3]])?
            }
        };
        a = y2.f_add(&sc)?.f_relu()?;
    }
    let pooled = a.f_mean_dim([2i64, 3].as_slice(), false, Kind::Float)?;
    let bsz = pooled.size()[0];
    let pooled = pooled.f_reshape([bsz, t, -1])?.f_transpose(0, 1)?;
    let logits = pooled.f_matmul(&leaves[net.fc_w].f_transpose(1, 2)?)?;
    logits.f_add(&leaves[net.fc_b].f_unsqueeze(1)?)
}
