//! ResNet-20 with GroupNorm and type-A shortcuts (He et al. 2016, §4.2; GroupNorm: Wu & He
//! 2018), forward and hand-written backward for **one example at a time**.
//!
//! GroupNorm has no batch statistics, so the network treats each example independently: the
//! backward pass of one example yields that example's exact gradient (for a convolution,
//! `δ_i · unfold(a_i)ᵀ`; for GroupNorm and the linear layer, the direct per-example terms).
//! Batch training runs examples in parallel (rayon) and either sums gradients (non-private) or
//! clips each example's full gradient before summing (DP-SGD, see [`crate::train`]): the
//! per-example gradient costs nothing extra.
//!
//! Parameters live in one flat `Vec<f32>` described by [`TensorInfo`]s with PyTorch-style names
//! (`conv1.weight`, `layer2.0.gn1.weight`, `linear.bias`, ...), convolution weights as
//! `[out, in, 3, 3]`, the linear weight as `[classes, features]`.

use crate::error::{NnError, Result};
use crate::ops;
use rand::Rng;
use rand_distr::{Distribution, Normal, Uniform};
use serde::{Deserialize, Serialize};

/// Architecture of a CIFAR-style ResNet: a 3×3 stem, three stages of basic blocks (the second
/// and third halve the resolution), global average pooling and a linear classifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResNetConfig {
    /// Input channels (3 for CIFAR-10).
    pub in_channels: usize,
    /// Input side length (32 for CIFAR-10).
    pub image_size: usize,
    /// Channel widths of the three stages (16, 32, 64 for ResNet-20).
    pub widths: [usize; 3],
    /// Basic blocks per stage (3 for ResNet-20: 6n + 2 = 20 layers).
    pub blocks_per_stage: usize,
    /// Number of classes.
    pub classes: usize,
}

/// The architecture in words: `3×32×32 input, widths [16, 32, 64], 3 blocks per stage, 10
/// classes`.
impl std::fmt::Display for ResNetConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.image_size;
        write!(
            f,
            "{}×{s}×{s} input, widths {:?}, {} blocks per stage, {} classes",
            self.in_channels, self.widths, self.blocks_per_stage, self.classes
        )
    }
}

impl ResNetConfig {
    /// ResNet-20 for 32×32 RGB inputs (≈ 0.27 M parameters).
    pub fn resnet20(classes: usize) -> Self {
        ResNetConfig {
            in_channels: 3,
            image_size: 32,
            widths: [16, 32, 64],
            blocks_per_stage: 3,
            classes,
        }
    }

    /// A tiny network of the same shape (8×8 inputs, widths 4/8/8, one block per stage) for
    /// tests that must run in seconds.
    pub fn tiny(classes: usize) -> Self {
        ResNetConfig {
            in_channels: 3,
            image_size: 8,
            widths: [4, 8, 8],
            blocks_per_stage: 1,
            classes,
        }
    }

    /// Checks the sizes.
    pub fn validate(&self) -> Result<()> {
        if self.in_channels == 0
            || self.image_size < 2
            || self.blocks_per_stage == 0
            || self.classes < 2
        {
            return Err(NnError::invalid(
                "resnet config",
                self.to_string(),
                "need in_channels ≥ 1, image_size ≥ 2, blocks_per_stage ≥ 1, classes ≥ 2",
            ));
        }
        for i in 0..3 {
            let prev = if i == 0 {
                self.widths[0]
            } else {
                self.widths[i - 1]
            };
            let w = self.widths[i];
            if w == 0 || w < prev || !(w - prev).is_multiple_of(2) {
                return Err(NnError::invalid(
                    "resnet widths",
                    format!("{:?}", self.widths),
                    "must be positive, non-decreasing, with even increments (type-A shortcuts pad channels equally on both sides)",
                ));
            }
        }
        Ok(())
    }
}

/// How [`ResNet::init_params_with`] draws the initial parameters. All use Kaiming-normal
/// convolutions (gain √2), GroupNorm β = 0 and PyTorch's default linear bias.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InitScheme {
    /// The paper's reference code (`akamaster/pytorch_resnet_cifar10` + `nn.GroupNorm`):
    /// Kaiming-normal (fan-in) convolutions and linear weight, every GroupNorm γ = 1.
    #[default]
    Reference,
    /// torchvision's ResNet convention: Kaiming-normal with fan-out (`cout·9`) for the
    /// convolutions, PyTorch's default uniform ±1/√fan-in linear weight, every γ = 1.
    FanOut,
    /// Goyal et al. (2017): the last GroupNorm γ of each residual block is 0 (each block
    /// starts as its shortcut); PyTorch's default uniform ±1/√fan-in linear weight.
    ZeroGamma,
}

impl std::str::FromStr for InitScheme {
    type Err = NnError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "reference" => Ok(InitScheme::Reference),
            "fan-out" => Ok(InitScheme::FanOut),
            "zero-gamma" => Ok(InitScheme::ZeroGamma),
            other => Err(NnError::invalid(
                "init",
                other,
                "must be `reference`, `fan-out` or `zero-gamma`",
            )),
        }
    }
}

/// Number of GroupNorm groups for `c` channels: min(32, c) (docs/study.md).
pub fn gn_groups(c: usize) -> usize {
    let g = c.min(32);
    // groups must divide channels
    (1..=g).rev().find(|d| c.is_multiple_of(*d)).unwrap_or(1)
}

/// One parameter tensor inside the flat parameter vector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorInfo {
    /// PyTorch-style name.
    pub name: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// Offset in the flat vector.
    pub offset: usize,
    /// Number of values.
    pub len: usize,
}

impl TensorInfo {
    /// The index range in the flat vector.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.len
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ConvSpec {
    pub(crate) cin: usize,
    pub(crate) cout: usize,
    pub(crate) stride: usize,
    pub(crate) h: usize,
    pub(crate) w: usize,
    pub(crate) ho: usize,
    pub(crate) wo: usize,
    pub(crate) weight: usize,
    pub(crate) gamma: usize,
    pub(crate) beta: usize,
    pub(crate) groups: usize,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Shortcut {
    Identity,
    TypeA,
}

#[derive(Debug, Clone)]
pub(crate) struct BlockSpec {
    pub(crate) conv1: usize,
    pub(crate) conv2: usize,
    pub(crate) shortcut: Shortcut,
}

/// The network: its architecture and parameter layout (the parameters themselves are a
/// separate flat `&[f32]`).
#[derive(Debug, Clone)]
pub struct ResNet {
    pub(crate) cfg: ResNetConfig,
    pub(crate) tensors: Vec<TensorInfo>,
    pub(crate) convs: Vec<ConvSpec>,
    pub(crate) blocks: Vec<BlockSpec>,
    pub(crate) fc_w: usize,
    pub(crate) fc_b: usize,
    pub(crate) n_params: usize,
}

/// Per-example forward cache and backward scratch, reused across examples by one worker.
#[derive(Debug, Default, Clone)]
pub struct Tape {
    col: Vec<Vec<f32>>,
    xhat: Vec<Vec<f32>>,
    rstd: Vec<Vec<f32>>,
    act: Vec<Vec<f32>>,
    pooled: Vec<f32>,
    logits: Vec<f32>,
    probs: Vec<f32>,
    lse: f64,
    s_z: Vec<f32>,
    s_y: Vec<f32>,
    s_d: Vec<f32>,
    s_dz: Vec<f32>,
    s_dcol: Vec<f32>,
    s_dx: Vec<f32>,
    s_ds: Vec<f32>,
}

impl Tape {
    /// The logits of the last forward pass.
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }
    /// The softmax probabilities of the last forward pass.
    pub fn probs(&self) -> &[f32] {
        &self.probs
    }
    /// Cross-entropy of the last forward pass against `label`.
    pub fn loss(&self, label: u32) -> f64 {
        self.lse - self.logits[label as usize] as f64
    }
}

impl ResNet {
    /// Builds the layout for an architecture.
    pub fn new(cfg: ResNetConfig) -> Result<Self> {
        cfg.validate()?;
        let mut tensors = Vec::new();
        let mut offset = 0usize;
        let mut add = |name: String, shape: Vec<usize>| {
            let len = shape.iter().product();
            tensors.push(TensorInfo {
                name,
                shape,
                offset,
                len,
            });
            offset += len;
            tensors.len() - 1
        };
        let mut convs = Vec::new();
        let mut blocks = Vec::new();
        let mut mk_conv = |add: &mut dyn FnMut(String, Vec<usize>) -> usize,
                           prefix: &str,
                           conv: &str,
                           gn: &str,
                           cin: usize,
                           cout: usize,
                           stride: usize,
                           h: usize| {
            let weight = add(format!("{prefix}{conv}.weight"), vec![cout, cin, 3, 3]);
            let gamma = add(format!("{prefix}{gn}.weight"), vec![cout]);
            let beta = add(format!("{prefix}{gn}.bias"), vec![cout]);
            let ho = ops::conv_out(h, stride);
            convs.push(ConvSpec {
                cin,
                cout,
                stride,
                h,
                w: h,
                ho,
                wo: ho,
                weight,
                gamma,
                beta,
                groups: gn_groups(cout),
            });
            (convs.len() - 1, ho)
        };
        let (_, mut h) = mk_conv(
            &mut add,
            "",
            "conv1",
            "gn1",
            cfg.in_channels,
            cfg.widths[0],
            1,
            cfg.image_size,
        );
        let mut cin = cfg.widths[0];
        for (s, &w) in cfg.widths.iter().enumerate() {
            for b in 0..cfg.blocks_per_stage {
                let stride = if s > 0 && b == 0 { 2 } else { 1 };
                let prefix = format!("layer{}.{}.", s + 1, b);
                let (c1, h1) = mk_conv(&mut add, &prefix, "conv1", "gn1", cin, w, stride, h);
                let (c2, h2) = mk_conv(&mut add, &prefix, "conv2", "gn2", w, w, 1, h1);
                let shortcut = if stride == 1 && cin == w {
                    Shortcut::Identity
                } else {
                    Shortcut::TypeA
                };
                blocks.push(BlockSpec {
                    conv1: c1,
                    conv2: c2,
                    shortcut,
                });
                cin = w;
                h = h2;
            }
        }
        let fc_w = add("linear.weight".into(), vec![cfg.classes, cin]);
        let fc_b = add("linear.bias".into(), vec![cfg.classes]);
        Ok(ResNet {
            cfg,
            tensors,
            convs,
            blocks,
            fc_w,
            fc_b,
            n_params: offset,
        })
    }

    /// The architecture.
    pub fn config(&self) -> &ResNetConfig {
        &self.cfg
    }
    /// Number of parameters.
    pub fn num_params(&self) -> usize {
        self.n_params
    }
    /// The parameter tensors in order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }
    /// Input length `C·H·W`.
    pub fn input_len(&self) -> usize {
        self.cfg.in_channels * self.cfg.image_size * self.cfg.image_size
    }
    /// Number of classes.
    pub fn classes(&self) -> usize {
        self.cfg.classes
    }

    /// A fresh initialisation with the default scheme ([`InitScheme::default`]).
    pub fn init_params(&self, rng: &mut impl Rng) -> Vec<f32> {
        self.init_params_with(InitScheme::default(), rng)
    }

    /// A fresh initialisation with the given scheme (see [`InitScheme`]).
    pub fn init_params_with(&self, scheme: InitScheme, rng: &mut impl Rng) -> Vec<f32> {
        let mut p = vec![0.0f32; self.n_params];
        for c in &self.convs {
            let t = &self.tensors[c.weight];
            // Kaiming-normal, gain √2 (PyTorch's `kaiming_normal_`; fan-in is its default)
            let fan = if scheme == InitScheme::FanOut {
                c.cout * 9
            } else {
                c.cin * 9
            };
            let std = (2.0 / fan as f64).sqrt();
            let nd = Normal::new(0.0, std).expect("finite std");
            for v in &mut p[t.range()] {
                *v = nd.sample(rng) as f32;
            }
            p[self.tensors[c.gamma].range()].fill(1.0);
        }
        let fan_in = self.tensors[self.fc_w].shape[1];
        let bound = 1.0 / (fan_in as f64).sqrt();
        let ud = Uniform::new(-bound, bound).expect("valid range");
        match scheme {
            InitScheme::Reference => {
                let nd = Normal::new(0.0, (2.0 / fan_in as f64).sqrt()).expect("finite std");
                for v in &mut p[self.tensors[self.fc_w].range()] {
                    *v = nd.sample(rng) as f32;
                }
            }
            InitScheme::FanOut => {
                for v in &mut p[self.tensors[self.fc_w].range()] {
                    *v = ud.sample(rng) as f32;
                }
            }
            InitScheme::ZeroGamma => {
                // each block starts as its shortcut (Goyal et al. 2017, §5.1)
                for b in &self.blocks {
                    p[self.tensors[self.convs[b.conv2].gamma].range()].fill(0.0);
                }
                for v in &mut p[self.tensors[self.fc_w].range()] {
                    *v = ud.sample(rng) as f32;
                }
            }
        }
        // the linear bias keeps PyTorch's default, uniform ±1/√fan-in, in both schemes
        for v in &mut p[self.tensors[self.fc_b].range()] {
            *v = ud.sample(rng) as f32;
        }
        p
    }

    fn check(&self, params: &[f32], x: &[f32]) {
        assert_eq!(params.len(), self.n_params, "parameter vector length");
        assert_eq!(x.len(), self.input_len(), "input length");
    }

    fn conv_gn_forward(&self, j: usize, params: &[f32], x: &[f32], tape: &mut Tape) {
        let c = &self.convs[j];
        ops::im2col(x, c.cin, c.h, c.w, c.stride, &mut tape.col[j]);
        let hw = c.ho * c.wo;
        tape.s_z.clear();
        tape.s_z.resize(c.cout * hw, 0.0);
        ops::matmul(
            (c.cout, hw, c.cin * 9),
            &mut tape.s_z,
            false,
            ops::Operand::plain(&params[self.tensors[c.weight].range()]),
            ops::Operand::plain(&tape.col[j]),
        );
        ops::group_norm_forward(
            &tape.s_z,
            ops::GnShape {
                c: c.cout,
                hw,
                groups: c.groups,
            },
            &params[self.tensors[c.gamma].range()],
            &params[self.tensors[c.beta].range()],
            &mut tape.s_y,
            &mut tape.xhat[j],
            &mut tape.rstd[j],
        );
    }

    /// Forward pass of one example `x` (`C×H×W`, normalised); returns the logits and fills
    /// `tape` for [`ResNet::backward`].
    pub fn forward<'t>(&self, params: &[f32], x: &[f32], tape: &'t mut Tape) -> &'t [f32] {
        self.check(params, x);
        let nc = self.convs.len();
        for v in [&mut tape.col, &mut tape.xhat, &mut tape.rstd, &mut tape.act] {
            v.resize_with(nc, Vec::new);
        }
        // stem
        self.conv_gn_forward(0, params, x, tape);
        let mut a0 = std::mem::take(&mut tape.act[0]);
        a0.clear();
        a0.extend(tape.s_y.iter().map(|v| v.max(0.0)));
        tape.act[0] = a0;
        for b in &self.blocks {
            let xin = std::mem::take(&mut tape.act[b.conv1 - 1]);
            self.conv_gn_forward(b.conv1, params, &xin, tape);
            let mut h1 = std::mem::take(&mut tape.act[b.conv1]);
            h1.clear();
            h1.extend(tape.s_y.iter().map(|v| v.max(0.0)));
            self.conv_gn_forward(b.conv2, params, &h1, tape);
            tape.act[b.conv1] = h1;
            let c1 = &self.convs[b.conv1];
            match b.shortcut {
                Shortcut::Identity => {
                    for (y, xv) in tape.s_y.iter_mut().zip(&xin) {
                        *y += xv;
                    }
                }
                Shortcut::TypeA => {
                    ops::shortcut_a_add(&xin, c1.cin, c1.h, c1.w, c1.cout, &mut tape.s_y)
                }
            }
            tape.act[b.conv1 - 1] = xin;
            let mut o = std::mem::take(&mut tape.act[b.conv2]);
            o.clear();
            o.extend(tape.s_y.iter().map(|v| v.max(0.0)));
            tape.act[b.conv2] = o;
        }
        let last = &self.convs[nc - 1];
        let hw = last.ho * last.wo;
        let a = &tape.act[nc - 1];
        tape.pooled.clear();
        tape.pooled.extend(
            a.chunks_exact(hw)
                .map(|ch| ch.iter().map(|&v| v as f64).sum::<f64>() as f32 / hw as f32),
        );
        let k = self.cfg.classes;
        tape.logits.clear();
        tape.logits
            .extend_from_slice(&params[self.tensors[self.fc_b].range()]);
        ops::matmul(
            (k, 1, last.cout),
            &mut tape.logits,
            true,
            ops::Operand::plain(&params[self.tensors[self.fc_w].range()]),
            ops::Operand::plain(&tape.pooled),
        );
        tape.probs.resize(k, 0.0);
        tape.lse = ops::softmax(&tape.logits, &mut tape.probs);
        &tape.logits
    }

    /// Backward through conv `j` and its GroupNorm given the gradient `tape.s_d` at the GN
    /// output; accumulates parameter gradients into `grad`; leaves dL/d(input) in `tape.s_dx`
    /// when `need_dx`.
    fn conv_gn_backward(
        &self,
        j: usize,
        params: &[f32],
        tape: &mut Tape,
        grad: &mut [f32],
        need_dx: bool,
    ) {
        let c = &self.convs[j];
        let hw = c.ho * c.wo;
        let (g_lo, g_hi) = (self.tensors[c.gamma].range(), self.tensors[c.beta].range());
        // gamma and beta are adjacent tensors: split the grad slice
        debug_assert_eq!(g_lo.end, g_hi.start);
        let (dgamma, dbeta) = grad[g_lo.start..g_hi.end].split_at_mut(c.cout);
        ops::group_norm_backward(
            &tape.s_d,
            (&tape.xhat[j], &tape.rstd[j]),
            ops::GnShape {
                c: c.cout,
                hw,
                groups: c.groups,
            },
            &params[g_lo],
            (dgamma, dbeta),
            &mut tape.s_dz,
        );
        let k = c.cin * 9;
        let wr = self.tensors[c.weight].range();
        // dW (cout×k) += dz (cout×hw) · colᵀ (hw×k): the per-example conv weight gradient
        ops::matmul(
            (c.cout, k, hw),
            &mut grad[wr.clone()],
            true,
            ops::Operand::plain(&tape.s_dz),
            ops::Operand::t(&tape.col[j]),
        );
        if need_dx {
            tape.s_dcol.clear();
            tape.s_dcol.resize(k * hw, 0.0);
            // dcol (k×hw) = Wᵀ (k×cout) · dz (cout×hw)
            ops::matmul(
                (k, hw, c.cout),
                &mut tape.s_dcol,
                false,
                ops::Operand::t(&params[wr]),
                ops::Operand::plain(&tape.s_dz),
            );
            ops::col2im(&tape.s_dcol, c.cin, c.h, c.w, c.stride, &mut tape.s_dx);
        }
    }

    /// Backward pass of the example last run through [`ResNet::forward`] with cross-entropy
    /// loss against `label`: **adds** dℓ/dθ (this example's exact gradient) into `grad`.
    /// Returns the loss.
    pub fn backward(&self, params: &[f32], tape: &mut Tape, label: u32, grad: &mut [f32]) -> f64 {
        assert_eq!(grad.len(), self.n_params, "gradient length");
        let k = self.cfg.classes;
        let label = label as usize;
        assert!(label < k, "label out of range");
        let nc = self.convs.len();
        let mut dlogits = tape.probs.clone();
        dlogits[label] -= 1.0;
        let last = &self.convs[nc - 1];
        let hw = last.ho * last.wo;
        // linear layer
        ops::matmul(
            (k, last.cout, 1),
            &mut grad[self.tensors[self.fc_w].range()],
            true,
            ops::Operand::plain(&dlogits),
            ops::Operand::plain(&tape.pooled),
        );
        for (g, d) in grad[self.tensors[self.fc_b].range()]
            .iter_mut()
            .zip(&dlogits)
        {
            *g += d;
        }
        let mut dpool = vec![0.0f32; last.cout];
        ops::matmul(
            (last.cout, 1, k),
            &mut dpool,
            false,
            ops::Operand::t(&params[self.tensors[self.fc_w].range()]),
            ops::Operand::plain(&dlogits),
        );
        // gradient at the output of the last block (after its ReLU)
        let mut dact = Vec::with_capacity(last.cout * hw);
        for d in &dpool {
            dact.extend(std::iter::repeat_n(d / hw as f32, hw));
        }
        for b in self.blocks.iter().rev() {
            // through the final ReLU of the block
            let o = &tape.act[b.conv2];
            for (d, &v) in dact.iter_mut().zip(o) {
                if v <= 0.0 {
                    *d = 0.0;
                }
            }
            std::mem::swap(&mut tape.s_d, &mut dact); // s_d = dpre; dact free
            tape.s_ds.clone_from(&tape.s_d); // shortcut branch
            self.conv_gn_backward(b.conv2, params, tape, grad, true);
            // through ReLU after conv1
            std::mem::swap(&mut tape.s_d, &mut tape.s_dx);
            let h1 = &tape.act[b.conv1];
            for (d, &v) in tape.s_d.iter_mut().zip(h1) {
                if v <= 0.0 {
                    *d = 0.0;
                }
            }
            self.conv_gn_backward(b.conv1, params, tape, grad, true);
            let c1 = &self.convs[b.conv1];
            match b.shortcut {
                Shortcut::Identity => {
                    for (d, s) in tape.s_dx.iter_mut().zip(&tape.s_ds) {
                        *d += s;
                    }
                }
                Shortcut::TypeA => ops::shortcut_a_backward(
                    &tape.s_ds,
                    c1.cin,
                    c1.h,
                    c1.w,
                    c1.cout,
                    &mut tape.s_dx,
                ),
            }
            std::mem::swap(&mut dact, &mut tape.s_dx);
        }
        // stem ReLU and conv (no input gradient needed)
        for (d, &v) in dact.iter_mut().zip(&tape.act[0]) {
            if v <= 0.0 {
                *d = 0.0;
            }
        }
        std::mem::swap(&mut tape.s_d, &mut dact);
        self.conv_gn_backward(0, params, tape, grad, false);
        tape.loss(label as u32)
    }

    /// Loss and gradient of one example: forward then backward, adding into `grad`.
    pub fn loss_grad(
        &self,
        params: &[f32],
        x: &[f32],
        label: u32,
        tape: &mut Tape,
        grad: &mut [f32],
    ) -> f64 {
        self.forward(params, x, tape);
        self.backward(params, tape, label, grad)
    }

    /// Gradient of the input (for tests of the whole chain): the loss's gradient w.r.t. `x`
    /// is not needed for training and is not computed; see the layer tests instead.
    #[doc(hidden)]
    pub fn conv_count(&self) -> usize {
        self.convs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn resnet20_has_about_027m_parameters() {
        let net = ResNet::new(ResNetConfig::resnet20(10)).unwrap();
        // 0.27 M: convolutions 268,336 + GroupNorm 2·(16·7 + 32·6 + 64·6) + linear 650
        assert_eq!(net.conv_count(), 19);
        let n = net.num_params();
        assert!((265_000..280_000).contains(&n), "{n}");
        assert_eq!(gn_groups(16), 16);
        assert_eq!(gn_groups(64), 32);
    }

    #[test]
    fn gradient_matches_finite_differences_for_every_tensor() {
        // f64 central differences on the f32 network: check every tensor (each layer type)
        let net = ResNet::new(ResNetConfig::tiny(4)).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let mut params = net.init_params(&mut rng);
        // non-trivial GN affine parameters
        for t in net.tensors() {
            if t.name.contains("gn") {
                for v in &mut params[t.range()] {
                    *v += (rng.random::<f32>() - 0.5) * 0.5;
                }
            }
        }
        let x: Vec<f32> = (0..net.input_len())
            .map(|_| rng.random::<f32>() * 2.0 - 1.0)
            .collect();
        let mut tape = Tape::default();
        let mut grad = vec![0.0f32; net.num_params()];
        net.loss_grad(&params, &x, 2, &mut tape, &mut grad);
        let run = |p: &[f32]| {
            let mut t = Tape::default();
            net.forward(p, &x, &mut t);
            let mask: Vec<bool> = t.act.iter().flatten().map(|&v| v > 0.0).collect();
            (t.loss(2), mask)
        };
        // Central differences are exact up to O(h²) only where no ReLU changes state between
        // θ − h and θ + h: use the largest step with identical ReLU patterns, skip the
        // coordinate if even h = 3e-5 crosses a kink (and require that to be rare).
        let (mut checked, mut skipped) = (0, 0);
        for t in net.tensors() {
            for s in 0..4.min(t.len) {
                let i = t.offset + (s * 7919) % t.len;
                let an = grad[i] as f64;
                let mut done = false;
                for h in [1e-3f32, 3e-4, 1e-4, 3e-5] {
                    let mut p = params.clone();
                    p[i] += h;
                    let (lp, mp) = run(&p);
                    p[i] -= 2.0 * h;
                    let (lm, mm) = run(&p);
                    if mp != mm {
                        continue;
                    }
                    let fd = (lp - lm) / (2.0 * h as f64);
                    // f32 rounding of the loss (~1e-7 relative) divided by 2h, plus O(h²)
                    let tol = 1e-7 / h as f64 * 4.0 + 1e-3 + 1e-2 * an.abs();
                    assert!(
                        (fd - an).abs() <= tol,
                        "{} [{}]: analytic {an} vs finite difference {fd} (h = {h})",
                        t.name,
                        i - t.offset
                    );
                    done = true;
                    break;
                }
                checked += 1;
                skipped += (!done) as usize;
            }
        }
        assert!(
            skipped * 4 <= checked,
            "{skipped} of {checked} coordinates sat on ReLU kinks"
        );
    }

    /// The ResNet-20 widths on 8×8 inputs with two blocks per stage: identity and type-A
    /// shortcuts, GroupNorm with one (16, 32 channels) and two (64 channels) channels per group.
    fn wide_small() -> ResNet {
        ResNet::new(ResNetConfig {
            in_channels: 3,
            image_size: 8,
            widths: [16, 32, 64],
            blocks_per_stage: 2,
            classes: 10,
        })
        .unwrap()
    }

    /// An independent, loop-based implementation of the architecture in f64 (direct 3×3
    /// convolution, GroupNorm by definition, `x[:, :, ::2, ::2]` + channel zero-padding for
    /// type A), addressing parameters by their PyTorch names.
    fn reference_logits(net: &ResNet, p: &[f32], x: &[f32]) -> Vec<f64> {
        let t = |n: &str| -> &[f32] {
            let ti = net.tensors().iter().find(|t| t.name == n).unwrap();
            &p[ti.range()]
        };
        let conv = |x: &[f64], cin: usize, h: usize, w: &[f32], cout: usize, stride: usize| {
            let ho = (h - 1) / stride + 1;
            let mut y = vec![0.0; cout * ho * ho];
            for o in 0..cout {
                for i in 0..ho {
                    for j in 0..ho {
                        let mut s = 0.0;
                        for c in 0..cin {
                            for kh in 0..3 {
                                for kw in 0..3 {
                                    let ih = (i * stride + kh) as isize - 1;
                                    let iw = (j * stride + kw) as isize - 1;
                                    if ih < 0 || iw < 0 || ih >= h as isize || iw >= h as isize {
                                        continue;
                                    }
                                    s += w[((o * cin + c) * 3 + kh) * 3 + kw] as f64
                                        * x[(c * h + ih as usize) * h + iw as usize];
                                }
                            }
                        }
                        y[(o * ho + i) * ho + j] = s;
                    }
                }
            }
            (y, ho)
        };
        let gn = |x: &mut [f64], c: usize, hw: usize, ga: &[f32], be: &[f32]| {
            let g = c.min(32);
            let cpg = c / g;
            for gi in 0..g {
                let s = &mut x[gi * cpg * hw..(gi + 1) * cpg * hw];
                let m = s.iter().sum::<f64>() / s.len() as f64;
                let v = s.iter().map(|a| (a - m).powi(2)).sum::<f64>() / s.len() as f64;
                for (k, a) in s.iter_mut().enumerate() {
                    let ch = gi * cpg + k / hw;
                    *a = (*a - m) / (v + 1e-5).sqrt() * ga[ch] as f64 + be[ch] as f64;
                }
            }
        };
        let relu = |v: &mut [f64]| v.iter_mut().for_each(|a| *a = a.max(0.0));
        let cfg = net.config();
        let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let (mut a, mut h) = conv(&x64, 3, cfg.image_size, t("conv1.weight"), cfg.widths[0], 1);
        gn(&mut a, cfg.widths[0], h * h, t("gn1.weight"), t("gn1.bias"));
        relu(&mut a);
        let mut cin = cfg.widths[0];
        for (s, &w) in cfg.widths.iter().enumerate() {
            for b in 0..cfg.blocks_per_stage {
                let stride = if s > 0 && b == 0 { 2 } else { 1 };
                let pre = format!("layer{}.{}.", s + 1, b);
                let n = |k: &str| format!("{pre}{k}");
                let (mut h1, ho) = conv(&a, cin, h, t(&n("conv1.weight")), w, stride);
                gn(&mut h1, w, ho * ho, t(&n("gn1.weight")), t(&n("gn1.bias")));
                relu(&mut h1);
                let (mut h2, _) = conv(&h1, w, ho, t(&n("conv2.weight")), w, 1);
                gn(&mut h2, w, ho * ho, t(&n("gn2.weight")), t(&n("gn2.bias")));
                if stride == 1 && cin == w {
                    h2.iter_mut().zip(&a).for_each(|(o, i)| *o += i);
                } else {
                    let pad = (w - cin) / 2;
                    for c in 0..cin {
                        for i in 0..ho {
                            for j in 0..ho {
                                h2[((c + pad) * ho + i) * ho + j] +=
                                    a[(c * h + stride * i) * h + stride * j];
                            }
                        }
                    }
                }
                relu(&mut h2);
                (a, h, cin) = (h2, ho, w);
            }
        }
        let pooled: Vec<f64> = a
            .chunks(h * h)
            .map(|c| c.iter().sum::<f64>() / (h * h) as f64)
            .collect();
        let (lw, lb) = (t("linear.weight"), t("linear.bias"));
        (0..cfg.classes)
            .map(|k| {
                lb[k] as f64
                    + (0..cin)
                        .map(|j| lw[k * cin + j] as f64 * pooled[j])
                        .sum::<f64>()
            })
            .collect()
    }

    #[test]
    fn forward_matches_an_independent_loop_implementation() {
        for scheme in [InitScheme::Reference, InitScheme::ZeroGamma] {
            let net = wide_small();
            let mut rng = ChaCha20Rng::seed_from_u64(5);
            let mut p = net.init_params_with(scheme, &mut rng);
            for t in net.tensors() {
                if t.name.contains("gn") {
                    for v in &mut p[t.range()] {
                        *v += rng.random::<f32>() - 0.5;
                    }
                }
            }
            let x: Vec<f32> = (0..net.input_len())
                .map(|_| rng.random::<f32>() * 4.0 - 2.0)
                .collect();
            let mut tape = Tape::default();
            let got = net.forward(&p, &x, &mut tape).to_vec();
            let want = reference_logits(&net, &p, &x);
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (*g as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                    "{scheme:?} logit {k}: engine {g} vs reference {w}"
                );
            }
        }
    }

    #[test]
    fn directional_derivatives_match_on_a_resnet20_shaped_network() {
        // every tensor of a network with identity and type-A shortcuts and two channels per
        // GroupNorm group: ∇ℓ·v against (ℓ(θ + hv) − ℓ(θ − hv)) / 2h along a random v
        let net = wide_small();
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let mut p = net.init_params(&mut rng);
        for t in net.tensors() {
            if t.name.contains("gn") {
                for v in &mut p[t.range()] {
                    *v += (rng.random::<f32>() - 0.5) * 0.5;
                }
            }
        }
        let x: Vec<f32> = (0..net.input_len())
            .map(|_| rng.random::<f32>() * 2.0 - 1.0)
            .collect();
        let mut tape = Tape::default();
        let mut g = vec![0.0f32; net.num_params()];
        net.loss_grad(&p, &x, 3, &mut tape, &mut g);
        let run = |q: &[f32]| {
            let mut t = Tape::default();
            net.forward(q, &x, &mut t);
            let mask: Vec<bool> = t.act.iter().flatten().map(|&v| v > 0.0).collect();
            (t.loss(3), mask)
        };
        let (mut bad, mut skipped) = (Vec::new(), 0);
        for t in net.tensors() {
            let v: Vec<f32> = (0..t.len).map(|_| rng.random::<f32>() - 0.5).collect();
            let an: f64 = v
                .iter()
                .zip(&g[t.range()])
                .map(|(a, b)| (*a as f64) * (*b as f64))
                .sum();
            // the largest step whose ±h evaluations share every ReLU state (central
            // differences are exact to O(h²) only there)
            let mut checked = false;
            for h in [1e-3f32, 3e-4, 1e-4, 3e-5] {
                let at = |sign: f32| {
                    let mut q = p.clone();
                    for (i, vi) in t.range().zip(&v) {
                        q[i] += sign * h * vi;
                    }
                    run(&q)
                };
                let ((lp, mp), (lm, mm)) = (at(1.0), at(-1.0));
                if mp != mm {
                    continue;
                }
                let fd = (lp - lm) / (2.0 * h as f64);
                // f32 rounding of the loss divided by 2h, plus O(h²)
                let tol = 4e-7 / h as f64 + 1e-3 + 1e-2 * an.abs();
                if (fd - an).abs() > tol {
                    bad.push(format!(
                        "{}: analytic {an:.6} vs difference {fd:.6} (h = {h})",
                        t.name
                    ));
                }
                checked = true;
                break;
            }
            skipped += (!checked) as usize;
        }
        assert!(
            skipped * 4 <= net.tensors().len(),
            "{skipped} of {} directions crossed ReLU kinks at every step",
            net.tensors().len()
        );
        assert!(bad.is_empty(), "{bad:#?}");
    }

    #[test]
    fn init_schemes_follow_their_definitions() {
        let net = ResNet::new(ResNetConfig::resnet20(10)).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let find = |n: &str| net.tensors().iter().find(|t| t.name == n).unwrap().clone();
        let std = |v: &[f32]| {
            let m = v.iter().map(|&a| a as f64).sum::<f64>() / v.len() as f64;
            (v.iter().map(|&a| (a as f64 - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt()
        };
        let r = net.init_params_with(InitScheme::Reference, &mut rng);
        let z = net.init_params_with(InitScheme::ZeroGamma, &mut rng);
        // Kaiming-normal fan-in: std √(2 / (cin·9)) for a 64→64 convolution
        let c = find("layer3.1.conv1.weight");
        let want = (2.0f64 / (64.0 * 9.0)).sqrt();
        assert!((std(&r[c.range()]) / want - 1.0).abs() < 0.02);
        // reference: every γ = 1; zero-gamma: the block's last γ = 0
        assert!(
            r[find("layer2.1.gn2.weight").range()]
                .iter()
                .all(|&v| v == 1.0)
        );
        assert!(
            z[find("layer2.1.gn2.weight").range()]
                .iter()
                .all(|&v| v == 0.0)
        );
        assert!(
            z[find("layer2.1.gn1.weight").range()]
                .iter()
                .all(|&v| v == 1.0)
        );
        assert!(r[find("gn1.bias").range()].iter().all(|&v| v == 0.0));
        // linear: Kaiming-normal (std √(2/64)) vs uniform ±1/8 (std 1/(8√3))
        let l = find("linear.weight");
        assert!((std(&r[l.range()]) / (2.0f64 / 64.0).sqrt() - 1.0).abs() < 0.15);
        assert!(z[l.range()].iter().all(|v| v.abs() <= 0.125));
        assert_eq!(
            "zero-gamma".parse::<InitScheme>().unwrap(),
            InitScheme::ZeroGamma
        );
        assert!("he".parse::<InitScheme>().is_err());
    }
}
