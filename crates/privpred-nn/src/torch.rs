//! The libtorch engine (feature `torch`): ResNet-20-GN forward and exact per-example gradients
//! through [`tch`], on CUDA when a GPU is present and on the CPU otherwise.
//!
//! Only the gradient oracle and the batched forward pass run here; the training loops,
//! sampling, augmentation, noise, optimiser and accounting stay in [`crate::train`] (see
//! [`crate::engine`]). The network is built functionally from the flat parameter vector laid
//! out as [`ResNet::tensors`] (copied to the device on each call, ≈ 1 MB for ResNet-20), with
//! the same operations as [`crate::resnet`]: 3×3 convolutions with padding 1 and no bias,
//! GroupNorm with `min(32, C)` groups (ε = 1e-5, statistics per example), type-A shortcuts
//! (stride-2 subsampling, channels zero-padded equally on both sides), ReLU, global average
//! pooling and a linear layer. Inputs are prepared on the CPU by [`crate::data::prepare_image`] with the
//! same per-example augmentation as the CPU engine, so both engines see identical pixels.
//!
//! **Per-example gradients** (Opacus-style, one batched backward pass, never a loop over
//! examples): the backward pass returns dℓ/dz for every convolution output `z`, dℓ/dy for every
//! GroupNorm output `y` and dℓ/d(logits). Example `b`'s gradients are then
//! - convolution weight: `dz_b (Cout × HW) · unfold(a_b)ᵀ (HW × 9Cin)`, computed as nine batched
//!   matmuls, one per kernel offset, against shifted copies of the input (no `im2col`);
//! - GroupNorm γ, β: `Σ_hw dy_b ⊙ x̂_b` and `Σ_hw dy_b`;
//! - linear weight and bias: `dlogits_b ⊗ pooled_b` and `dlogits_b`.
//!
//! Each example's gradient is clipped on the device (jointly to ν, or each tensor to ν in
//! per-layer mode, with the CPU engine's rounding-down of the factor so that a clipped norm
//! never exceeds ν; norms accumulated in f64 per tensor), the clipped gradients are summed (a
//! `1 × B` by `B × len` product per parameter tensor, never a `B × P` copy) and only
//! the sum and the batch statistics return to the CPU. Summed (non-private) gradients skip the
//! per-example step: one ordinary backward pass to the parameters, with GroupNorm's affine
//! fused into it.
//!
//! **Device passes.** A batch is processed in chunks of at most [`TorchEngine::chunk`]
//! examples ([`default_chunk`]: 256 on the CPU, where it bounds memory; 4,096 on CUDA, so the
//! paper's batch of 600 is one pass — at that size the network is bound by kernel launches).
//! Gradients and batch statistics accumulate on the device; the only waits for the device are
//! the two copies back at the end of the batch.

use crate::data::{ImageSet, Normalization};
use crate::error::{NnError, Result};
use crate::gradient::{
    BatchStats, DEVICE_ENV, GradMode, GradientEngine, Inputs, check_lengths, prepare_batch,
};
use crate::resnet::{ResNet, Shortcut};
use tch::{Device, Kind, TchError, Tensor};

mod group;
pub use group::{CUDA_GROUP_EXAMPLES, GROUP_EXAMPLES_ENV, default_group_examples};

/// GroupNorm ε (PyTorch's default; the CPU engine's [`crate::ops::GN_EPS`]).
const GN_EPS: f64 = crate::ops::GN_EPS as f64;

/// Examples per device pass on the CPU unless [`TorchEngine::with_chunk`] says otherwise:
/// bounds the memory of the per-example gradients (`chunk × P` floats, 280 MB for ResNet-20)
/// and of the activations.
pub const DEFAULT_CHUNK: usize = 256;

/// Examples per device pass on CUDA unless [`TorchEngine::with_chunk`] says otherwise: a
/// whole batch of the paper's 600 (and up to 4,096) in one pass, since a small network at such
/// batches is bound by kernel launches, not memory (per-example gradients of 4,096 examples of
/// ResNet-20 are 4.4 GB, plus ≈ 3 GB of recorded activations, on GPUs of 80 GB and more).
pub const CUDA_CHUNK: usize = 4096;

/// The environment variable that overrides the examples per device pass of
/// [`TorchEngine::from_env`] (a whole number ≥ 1; for measuring, e.g. the CPU's 256 on CUDA).
pub const CHUNK_ENV: &str = "PRIVPRED_TORCH_CHUNK";

/// The default examples per device pass on `device`: [`CUDA_CHUNK`] on CUDA, else
/// [`DEFAULT_CHUNK`].
pub fn default_chunk(device: Device) -> usize {
    match device {
        Device::Cuda(_) => CUDA_CHUNK,
        _ => DEFAULT_CHUNK,
    }
}

/// A whole number ≥ 1 from the environment variable `name`, when it is set and non-empty.
fn env_count(name: &'static str) -> Result<Option<usize>> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => {
            let n = v.trim().parse::<usize>().ok().filter(|&n| n >= 1);
            n.map(Some)
                .ok_or_else(|| NnError::invalid(name, v.trim(), "must be a whole number ≥ 1"))
        }
        _ => Ok(None),
    }
}

/// The libtorch gradient engine. See the [module documentation](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TorchEngine {
    device: Device,
    chunk: usize,
    group_examples: usize,
}

fn engine_err(device: Device, e: TchError) -> NnError {
    NnError::Engine(format!("libtorch on {}: {e}", device_name(device)))
}

/// `cpu`, `cuda:N` or `mps`.
fn device_name(d: Device) -> String {
    match d {
        Device::Cpu => "cpu".into(),
        Device::Cuda(i) => format!("cuda:{i}"),
        Device::Mps => "mps".into(),
        Device::Vulkan => "vulkan".into(),
    }
}

impl TorchEngine {
    /// An engine on `device`; a CUDA device must exist.
    pub fn new(device: Device) -> Result<Self> {
        if let Device::Cuda(i) = device {
            let n = tch::Cuda::device_count();
            if i as i64 >= n {
                return Err(NnError::invalid(
                    "device",
                    device_name(device),
                    format!("libtorch sees {n} CUDA device(s)"),
                ));
            }
        }
        Ok(TorchEngine {
            device,
            chunk: default_chunk(device),
            group_examples: default_group_examples(device),
        })
    }

    /// An engine on the device named by `$PRIVPRED_DEVICE` (see [`TorchEngine::parse_device`]);
    /// unset or empty: the first CUDA device when one is available, else the CPU. The examples
    /// per device pass are `$PRIVPRED_TORCH_CHUNK` when set ([`CHUNK_ENV`]), else the device's
    /// default ([`default_chunk`]).
    pub fn from_env() -> Result<Self> {
        let e = match std::env::var(DEVICE_ENV) {
            Ok(v) if !v.trim().is_empty() => Self::new(Self::parse_device(&v)?)?,
            _ => Self::new(Device::cuda_if_available())?,
        };
        let e = match env_count(CHUNK_ENV)? {
            Some(n) => e.with_chunk(n),
            None => e,
        };
        Ok(match env_count(GROUP_EXAMPLES_ENV)? {
            Some(n) => e.with_group_examples(n),
            None => e,
        })
    }

    /// Parses `cpu`, `cuda` (the first CUDA device) or `cuda:N`.
    pub fn parse_device(s: &str) -> Result<Device> {
        let s = s.trim();
        let bad = || {
            NnError::invalid(
                "device",
                s,
                format!("{DEVICE_ENV} must be `cpu`, `cuda` or `cuda:N`"),
            )
        };
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            _ => {
                let n = s.strip_prefix("cuda:").ok_or_else(bad)?;
                n.parse::<usize>().map(Device::Cuda).map_err(|_| bad())
            }
        }
    }

    /// The same engine with at most `chunk` (≥ 1) examples per device pass.
    pub fn with_chunk(self, chunk: usize) -> Self {
        TorchEngine {
            chunk: chunk.max(1),
            ..self
        }
    }

    /// The libtorch device.
    pub fn torch_device(&self) -> Device {
        self.device
    }

    /// At most this many examples per device pass.
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// Device passes (forward + backward) for a batch of `batch` examples, in every mode.
    pub fn passes(&self, batch: usize) -> usize {
        batch.div_ceil(self.chunk)
    }

    /// Each example's exact gradient (unclipped), in the order of `idx` (for tests and
    /// audits; the training path never copies them off the device).
    pub fn per_example_gradients(
        &self,
        net: &ResNet,
        params: &[f32],
        inputs: Inputs<'_>,
        idx: &[usize],
    ) -> Result<Vec<Vec<f32>>> {
        check_lengths(net, params, net.num_params())?;
        let p = net.num_params();
        self.checked(net, inputs.data, idx)?;
        let mut all = Vec::with_capacity(idx.len());
        let mut run = || -> std::result::Result<(), TchError> {
            let flat = self.upload_params(params, true)?;
            let views = param_views(net, &flat)?;
            for (c, part) in idx.chunks(self.chunk).enumerate() {
                let (x, y) = self.batch_tensors(net, inputs, part, c * self.chunk)?;
                let pe = per_example(net, &views, &x, &y)?;
                let g = pe.grads()?.f_to_device(Device::Cpu)?.f_contiguous()?;
                let mut buf = vec![0.0f32; part.len() * p];
                g.f_copy_data(&mut buf, part.len() * p)?;
                all.extend(buf.chunks_exact(p).map(|r| r.to_vec()));
            }
            Ok(())
        };
        run().map_err(|e| engine_err(self.device, e))?;
        Ok(all)
    }

    /// Refuses labels outside the network's classes and indices outside the data.
    fn checked(&self, net: &ResNet, data: &ImageSet, idx: &[usize]) -> Result<()> {
        crate::gradient::check_image_shape(net, data)?;
        for &i in idx {
            if i >= data.len() {
                return Err(NnError::Shape(format!(
                    "{}: example index {i} of {} images",
                    data.source,
                    data.len()
                )));
            }
            if data.labels[i] as usize >= net.classes() {
                return Err(NnError::Shape(format!(
                    "{}: label {} of example {i} for a network of {} classes",
                    data.source,
                    data.labels[i],
                    net.classes()
                )));
            }
        }
        Ok(())
    }

    /// The flat parameter vector on the device (a leaf that requires grad when training).
    fn upload_params(&self, params: &[f32], grad: bool) -> std::result::Result<Tensor, TchError> {
        let t = Tensor::f_from_slice(params)?.f_to_device(self.device)?;
        if grad {
            t.f_set_requires_grad(true)
        } else {
            Ok(t)
        }
    }

    /// The prepared (normalised, augmented) images `part` as a `B×C×H×W` tensor on the device,
    /// example `j` of `part` being example `j0 + j` of the batch (its augmentation), and their
    /// labels.
    fn batch_tensors(
        &self,
        net: &ResNet,
        inputs: Inputs<'_>,
        part: &[usize],
        j0: usize,
    ) -> std::result::Result<(Tensor, Tensor), TchError> {
        let d = inputs.data;
        let cfg = net.config();
        let x = prepare_batch(net, inputs, part, j0);
        let b = part.len() as i64;
        let (c, s) = (cfg.in_channels as i64, cfg.image_size as i64);
        let xt = Tensor::f_from_slice(&x)?
            .f_view([b, c, s, s])?
            .f_to_device(self.device)?;
        let labels: Vec<i64> = part.iter().map(|&i| d.labels[i] as i64).collect();
        let yt = Tensor::f_from_slice(&labels)?.f_to_device(self.device)?;
        Ok((xt, yt))
    }

    /// The batch gradient, accumulated on the device over [`TorchEngine::passes`] chunks; the
    /// batch statistics stay on the device too (a 4-vector: loss sum, correct, clipped, norm
    /// sum), so that nothing waits for the device before the one copy back at the end.
    fn batch_gradient_inner(
        &self,
        net: &ResNet,
        params: &[f32],
        inputs: Inputs<'_>,
        idx: &[usize],
        mode: GradMode,
        out: &mut [f32],
    ) -> std::result::Result<BatchStats, TchError> {
        let flat = self.upload_params(params, true)?;
        let views = param_views(net, &flat)?;
        let mut acc: Option<Tensor> = None;
        let mut stats: Option<Tensor> = None;
        for (c, part) in idx.chunks(self.chunk).enumerate() {
            let (x, y) = self.batch_tensors(net, inputs, part, c * self.chunk)?;
            let (grad, st) = match mode {
                GradMode::Sum => {
                    let f = forward(net, &views, &x, false)?;
                    let (losses, correct) = loss_and_correct(&f.logits, &y)?;
                    let loss = losses.f_sum(Kind::Float)?;
                    let wrt: Vec<&Tensor> = views.iter().collect();
                    let g = Tensor::f_run_backward(&[&loss], &wrt, false, false)?;
                    let _ng = tch::no_grad_guard();
                    let flat_g: Vec<Tensor> = g
                        .iter()
                        .map(|t| t.f_reshape([-1]))
                        .collect::<std::result::Result<_, _>>()?;
                    let zero = correct.f_zeros_like()?;
                    let st = Tensor::f_stack(
                        &[
                            losses.f_detach()?.f_sum(Kind::Double)?,
                            correct,
                            zero.shallow_clone(),
                            zero,
                        ],
                        0,
                    )?;
                    (Tensor::f_cat(&flat_g, 0)?, st)
                }
                GradMode::ClipJoint(nu) | GradMode::ClipPerLayer(nu) => {
                    let pe = per_example(net, &views, &x, &y)?;
                    let _ng = tch::no_grad_guard();
                    let (sum, norms, clipped) = if let GradMode::ClipJoint(_) = mode {
                        clip_joint(&pe.parts, nu)?
                    } else {
                        clip_per_layer(&pe.parts, nu)?
                    };
                    let st = Tensor::f_stack(
                        &[
                            pe.loss_sum,
                            pe.correct,
                            clipped.f_to_kind(Kind::Double)?,
                            norms.f_sum(Kind::Double)?,
                        ],
                        0,
                    )?;
                    (sum, st)
                }
            };
            let _ng = tch::no_grad_guard();
            add_into(&mut acc, grad)?;
            add_into(&mut stats, st)?;
        }
        let (Some(acc), Some(stats)) = (acc, stats) else {
            return Ok(BatchStats::default());
        };
        let acc = acc.f_to_device(Device::Cpu)?.f_contiguous()?;
        acc.f_copy_data(out, out.len())?;
        let s = Vec::<f64>::try_from(&stats.f_to_device(Device::Cpu)?)?;
        Ok(BatchStats {
            n: idx.len(),
            loss_sum: s[0],
            correct: s[1].round() as usize,
            clipped: s[2].round() as usize,
            norm_sum: s[3],
        })
    }

    fn predict_inner(
        &self,
        net: &ResNet,
        params: &[f32],
        data: &ImageSet,
        norm: &Normalization,
    ) -> std::result::Result<Vec<Vec<f32>>, TchError> {
        let _ng = tch::no_grad_guard();
        let flat = self.upload_params(params, false)?;
        let views = param_views(net, &flat)?;
        let k = net.classes();
        let all: Vec<usize> = (0..data.len()).collect();
        let inputs = Inputs {
            data,
            norm,
            augment_seed: None,
        };
        let mut rows = Vec::with_capacity(data.len());
        for part in all.chunks(self.chunk.max(512)) {
            let (x, _) = self.batch_tensors(net, inputs, part, 0)?;
            let f = forward(net, &views, &x, false)?;
            let l = f.logits.f_to_device(Device::Cpu)?.f_contiguous()?;
            let mut buf = vec![0.0f32; part.len() * k];
            l.f_copy_data(&mut buf, part.len() * k)?;
            rows.extend(buf.chunks_exact(k).map(|r| r.to_vec()));
        }
        Ok(rows)
    }
}

impl GradientEngine for TorchEngine {
    fn name(&self) -> &'static str {
        "torch"
    }

    fn device(&self) -> String {
        match self.device {
            Device::Cpu => format!("cpu ({} threads)", tch::get_num_threads()),
            d => device_name(d),
        }
    }

    fn describe(&self) -> String {
        format!("libtorch (tch 0.24) on {}", self.device())
    }

    fn settings(&self, batch: usize) -> serde_json::Value {
        serde_json::json!({
            "examples_per_device_pass": self.chunk,
            "device_passes_per_batch": self.passes(batch),
            "parameter_upload": "once per batch (the flat vector, one copy)",
            "group_norm": "fused with its affine γ, β (non-private, predictions); x̂ and the output separately (per-example path)",
            "sum_gradient": "with respect to views of the flat parameters, concatenated",
            "device_syncs_per_batch": 2,
            "input_preparation": "on the CPU (rayon), before the batch's device pass",
            "group_examples_per_device_pass": self.group_examples,
            "group": "the members' networks as one: convolutions with one group per member, GroupNorm with the members' groups side by side, a batched linear layer",
        })
    }

    /// On CUDA: at the paper's batch a ResNet-20 step is bound by kernel launches, which one
    /// grouped pass shares among the members. Not on the CPU, where grouped convolutions
    /// measured slower than the members one after another (`nn-train --mode throughput
    /// --teachers 4`, batch 128, 2 threads: 0.6× the examples/s).
    fn groups_together(&self) -> bool {
        matches!(self.device, Device::Cuda(_))
    }

    fn group_gradients(
        &self,
        net: &ResNet,
        jobs: &[crate::gradient::GroupJob<'_>],
        outs: &mut [Vec<f32>],
    ) -> Result<Vec<BatchStats>> {
        self.group_gradients_together(net, jobs, outs)
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
        out.fill(0.0);
        if idx.is_empty() {
            return Ok(BatchStats::default());
        }
        self.checked(net, inputs.data, idx)?;
        self.batch_gradient_inner(net, params, inputs, idx, mode, out)
            .map_err(|e| engine_err(self.device, e))
    }

    fn predict_logits(
        &self,
        net: &ResNet,
        params: &[f32],
        data: &ImageSet,
        norm: &Normalization,
    ) -> Result<Vec<Vec<f32>>> {
        check_lengths(net, params, net.num_params())?;
        if data.is_empty() {
            return Ok(Vec::new());
        }
        self.checked(net, data, &[])?;
        self.predict_inner(net, params, data, norm)
            .map_err(|e| engine_err(self.device, e))
    }
}

/// What the forward pass keeps for the per-example gradients.
struct ConvRecord {
    /// The convolution's input.
    input: Tensor,
    /// Its output (before GroupNorm).
    z: Tensor,
    /// The normalised output x̂ (before γ, β).
    xhat: Tensor,
    /// The GroupNorm output γ·x̂ + β.
    y: Tensor,
}

struct Forward {
    logits: Tensor,
    pooled: Tensor,
    convs: Vec<ConvRecord>,
}

/// Every parameter tensor of `net` as a view of the flat device vector (no copies), in the
/// order of [`ResNet::tensors`]; the views tile the vector, so gradients taken with respect to
/// them, flattened and concatenated, are the gradient of the flat vector (without the
/// zero-fill, copy and accumulation per tensor that a gradient through `narrow` costs).
fn param_views(net: &ResNet, flat: &Tensor) -> std::result::Result<Vec<Tensor>, TchError> {
    let mut next = 0;
    net.tensors
        .iter()
        .map(|info| {
            if info.offset != next {
                return Err(TchError::Kind(format!(
                    "parameter tensor {} at offset {}, expected {next}",
                    info.name, info.offset
                )));
            }
            next += info.len;
            let shape: Vec<i64> = info.shape.iter().map(|&v| v as i64).collect();
            flat.f_narrow(0, info.offset as i64, info.len as i64)?
                .f_view(shape.as_slice())
        })
        .collect()
}

/// Forward pass of a batch; `record` keeps what [`per_example`] needs. Without `record`,
/// GroupNorm and its affine γ, β are one fused operation (one kernel each way on CUDA, where
/// the recorded path needs x̂ and the output separately: three).
fn forward(
    net: &ResNet,
    views: &[Tensor],
    x: &Tensor,
    record: bool,
) -> std::result::Result<Forward, TchError> {
    let mut convs = Vec::new();
    let mut conv_gn = |j: usize, a: &Tensor| -> std::result::Result<Tensor, TchError> {
        let c = &net.convs[j];
        let s = c.stride as i64;
        let z = a.f_conv2d(&views[c.weight], None::<Tensor>, [s, s], [1, 1], [1, 1], 1)?;
        let g = c.groups as i64;
        if !record {
            let (gamma, beta) = (&views[c.gamma], &views[c.beta]);
            return z.f_group_norm(g, Some(gamma), Some(beta), GN_EPS, true);
        }
        let xhat = z.f_group_norm(g, None::<Tensor>, None::<Tensor>, GN_EPS, true)?;
        let cc = c.cout as i64;
        let gamma = views[c.gamma].f_view([1, cc, 1, 1])?;
        let beta = views[c.beta].f_view([1, cc, 1, 1])?;
        let y = xhat.f_mul(&gamma)?.f_add(&beta)?;
        convs.push(ConvRecord {
            input: a.f_detach()?,
            z,
            xhat: xhat.f_detach()?,
            y: y.shallow_clone(),
        });
        Ok(y)
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
                a.f_slice(2, 0, None::<i64>, 2)?
                    .f_slice(3, 0, None::<i64>, 2)?
                    .f_constant_pad_nd([0, 0, 0, 0, pad, pad])?
            }
        };
        a = y2.f_add(&sc)?.f_relu()?;
    }
    let pooled = a.f_mean_dim([2i64, 3].as_slice(), false, Kind::Float)?;
    let logits = pooled.f_linear(&views[net.fc_w], Some(&views[net.fc_b]))?;
    Ok(Forward {
        logits,
        pooled,
        convs,
    })
}

/// Per-example cross-entropy losses (`B`, f32) and the number of correct predictions (a
/// scalar f64 tensor on the device: reading it would wait for the device).
fn loss_and_correct(
    logits: &Tensor,
    y: &Tensor,
) -> std::result::Result<(Tensor, Tensor), TchError> {
    let logp = logits.f_log_softmax(1, Kind::Float)?;
    let losses = logp
        .f_gather(1, &y.f_unsqueeze(1)?, false)?
        .f_squeeze_dim(1)?
        .f_neg()?;
    let correct = {
        let _ng = tch::no_grad_guard();
        logits
            .f_argmax(1, false)?
            .f_eq_tensor(y)?
            .f_sum(Kind::Double)?
    };
    Ok((losses, correct))
}

/// Per-example gradients of a batch.
struct PerExample {
    /// One `B × len` matrix per parameter tensor, in the order of [`ResNet::tensors`] (never
    /// concatenated on the training path: a `B × P` copy is ≈ 280 MB at `B` = 256).
    parts: Vec<Tensor>,
    /// Σ of the losses (scalar f64 on the device).
    loss_sum: Tensor,
    /// Correct predictions (scalar f64 on the device).
    correct: Tensor,
}

impl PerExample {
    /// The whole `B × P` matrix, columns laid out as [`ResNet::tensors`] (tests and audits).
    fn grads(&self) -> std::result::Result<Tensor, TchError> {
        Tensor::f_cat(&self.parts, 1)
    }
}

/// `acc + t`, or `t` when `acc` is empty (sums over device passes and parameter tensors).
fn add_into(acc: &mut Option<Tensor>, t: Tensor) -> std::result::Result<(), TchError> {
    *acc = Some(match acc.take() {
        None => t,
        Some(a) => a.f_add(&t)?,
    });
    Ok(())
}

/// Each row's squared ℓ2 norm (`B`, f64), accumulated in f64.
fn row_sq_norms(part: &Tensor) -> std::result::Result<Tensor, TchError> {
    part.f_norm_scalaropt_dim_dtype(2.0, [1i64].as_slice(), false, Kind::Double)?
        .f_square()
}

/// Every example's exact gradient with one backward pass (see the module documentation).
fn per_example(
    net: &ResNet,
    views: &[Tensor],
    x: &Tensor,
    y: &Tensor,
) -> std::result::Result<PerExample, TchError> {
    let f = forward(net, views, x, true)?;
    let (losses, correct) = loss_and_correct(&f.logits, y)?;
    let loss = losses.f_sum(Kind::Float)?;
    let mut wrt: Vec<&Tensor> = Vec::with_capacity(2 * f.convs.len() + 1);
    wrt.extend(f.convs.iter().map(|r| &r.z));
    wrt.extend(f.convs.iter().map(|r| &r.y));
    wrt.push(&f.logits);
    let g = Tensor::f_run_backward(&[&loss], &wrt, false, false)?;
    let _ng = tch::no_grad_guard();
    let nc = f.convs.len();
    let b = x.size()[0];
    let mut per_tensor: Vec<Option<Tensor>> = (0..net.tensors.len()).map(|_| None).collect();
    for (j, (rec, c)) in f.convs.iter().zip(&net.convs).enumerate() {
        let (dz, dy) = (&g[j], &g[nc + j]);
        let dw = conv_weight_per_example(&rec.input, dz, c.stride as i64, c.ho, c.wo)?;
        let dgamma =
            dy.f_mul(&rec.xhat)?
                .f_sum_dim_intlist([2i64, 3].as_slice(), false, Kind::Float)?;
        let dbeta = dy.f_sum_dim_intlist([2i64, 3].as_slice(), false, Kind::Float)?;
        per_tensor[c.weight] = Some(dw);
        per_tensor[c.gamma] = Some(dgamma);
        per_tensor[c.beta] = Some(dbeta);
    }
    let dlogits = &g[2 * nc];
    let dfw = dlogits
        .f_unsqueeze(2)?
        .f_mul(&f.pooled.f_detach()?.f_unsqueeze(1)?)?
        .f_reshape([b, -1])?;
    per_tensor[net.fc_w] = Some(dfw);
    per_tensor[net.fc_b] = Some(dlogits.shallow_clone());
    let parts: Vec<Tensor> = per_tensor
        .into_iter()
        .enumerate()
        .map(|(t, g)| {
            g.ok_or_else(|| {
                TchError::Kind(format!(
                    "no per-example gradient for tensor {}",
                    net.tensors[t].name
                ))
            })
        })
        .collect::<std::result::Result<_, _>>()?;
    let loss_sum = losses.f_detach()?.f_sum(Kind::Double)?;
    Ok(PerExample {
        parts,
        loss_sum,
        correct,
    })
}

/// Each example's gradient of a 3×3 convolution weight (padding 1, stride `s`, no bias) from
/// its input `a` (`B × Cin × H × W`) and output gradient `dz` (`B × Cout × ho × wo`), as
/// `B × (Cout·Cin·9)` with columns ordered (cout, cin, kh, kw) like the weight.
///
/// For each of the nine kernel offsets, `dz_b (Cout × HW)` times the input shifted by that
/// offset and subsampled by `s` (`HW × Cin`): nine batched matmuls over strided copies of the
/// padded input. The same sums as `dz_b · unfold(a_b)ᵀ`, without libtorch's `im2col`, which on
/// the CPU took ~2/3 of a DP-SGD step at batch 600 (measured: 1.2 of 2.6 s per 256 examples).
fn conv_weight_per_example(
    a: &Tensor,
    dz: &Tensor,
    s: i64,
    ho: usize,
    wo: usize,
) -> std::result::Result<Tensor, TchError> {
    let size = a.size();
    let (b, cin) = (size[0], size[1]);
    let (ho, wo) = (ho as i64, wo as i64);
    let cout = dz.size()[1];
    let ap = a.f_constant_pad_nd([1, 1, 1, 1])?;
    let dz3 = dz.f_reshape([b, cout, ho * wo])?;
    let mut taps = Vec::with_capacity(9);
    for kh in 0..3i64 {
        for kw in 0..3i64 {
            let shifted = ap
                .f_slice(2, kh, kh + s * (ho - 1) + 1, s)?
                .f_slice(3, kw, kw + s * (wo - 1) + 1, s)?
                .f_reshape([b, cin, ho * wo])?;
            taps.push(dz3.f_bmm(&shifted.f_transpose(1, 2)?)?);
        }
    }
    // taps[k]: B × Cout × Cin for offset k = 3·kh + kw → B × Cout × Cin × 9
    Tensor::f_stack(&taps, 3)?.f_reshape([b, -1])
}

/// The CPU engine's clipping factor, `(ν / ‖g‖)·(1 − 4ε_f32)` where `‖g‖ > ν`, else 1, from
/// norms in f64 (`B`); returns (factors as f32, mask of clipped examples).
fn clip_factors(norms: &Tensor, nu: f64) -> std::result::Result<(Tensor, Tensor), TchError> {
    let mask = norms.f_gt(nu)?;
    let ratio = norms
        .f_reciprocal()?
        .f_mul_scalar(nu)?
        .f_to_kind(Kind::Float)?
        .f_mul_scalar(1.0 - 4.0 * f32::EPSILON as f64)?;
    let ones = ratio.f_ones_like()?;
    Ok((ratio.f_where_self(&mask, &ones)?, mask))
}

/// The clipped sum `Σ_b factor_b · g_b` of per-tensor parts (`B × len` each) with per-row
/// factors (`B`, f32): one `1 × B` by `B × len` product per tensor, concatenated (`P`).
fn weighted_sum(parts: &[Tensor], factors: &[Tensor]) -> std::result::Result<Tensor, TchError> {
    let sums = parts
        .iter()
        .zip(factors)
        .map(|(g, f)| f.f_unsqueeze(0)?.f_matmul(g)?.f_squeeze_dim(0))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Tensor::f_cat(&sums, 0)
}

/// Joint clipping to ν of each example's gradient, given as per-tensor parts (`B × len`
/// each, the rows of the `B × P` matrix split by columns), and their sum; returns (sum `P`,
/// the unclipped norms `B`, the number clipped as a scalar), all on the device.
fn clip_joint(
    parts: &[Tensor],
    nu: f64,
) -> std::result::Result<(Tensor, Tensor, Tensor), TchError> {
    let mut sq: Option<Tensor> = None;
    for g in parts {
        let s = row_sq_norms(g)?;
        add_into(&mut sq, s)?;
    }
    let Some(sq) = sq else {
        return Err(TchError::Kind("a network without parameter tensors".into()));
    };
    let norms = sq.f_sqrt()?;
    let (factor, mask) = clip_factors(&norms, nu)?;
    let factors: Vec<Tensor> = parts.iter().map(|_| factor.shallow_clone()).collect();
    let sum = weighted_sum(parts, &factors)?;
    Ok((sum, norms, mask.f_sum(Kind::Int64)?))
}

/// Per-tensor clipping to ν of each example's gradient parts (`B × len` each) and their sum;
/// returns (sum `P`, each example's unclipped full norm, the number with any tensor clipped),
/// all on the device.
fn clip_per_layer(
    parts: &[Tensor],
    nu: f64,
) -> std::result::Result<(Tensor, Tensor, Tensor), TchError> {
    let mut factors = Vec::with_capacity(parts.len());
    let mut sq_total: Option<Tensor> = None;
    let mut any: Option<Tensor> = None;
    for g in parts {
        let sq = row_sq_norms(g)?;
        let (factor, mask) = clip_factors(&sq.f_sqrt()?, nu)?;
        factors.push(factor);
        add_into(&mut sq_total, sq)?;
        any = Some(match any {
            None => mask,
            Some(m) => m.f_logical_or(&mask)?,
        });
    }
    let (Some(sq_total), Some(any)) = (sq_total, any) else {
        return Err(TchError::Kind("a network without parameter tensors".into()));
    };
    let sum = weighted_sum(parts, &factors)?;
    Ok((sum, sq_total.f_sqrt()?, any.f_sum(Kind::Int64)?))
}
