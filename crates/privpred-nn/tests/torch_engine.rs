//! The libtorch engine against the CPU engine (feature `torch`; runs on libtorch's CPU device
//! unless `PRIVPRED_DEVICE` says otherwise): per-example gradients, summed and clipped batch
//! gradients, batch statistics and logits agree on the same parameters and pixels; the joint
//! clipping bound holds per example; DP-SGD and non-private training through the torch engine
//! learn a tiny network.
//!
//! Tolerance: both engines compute in f32 but sum in different orders (libtorch's blocked
//! convolutions and reductions, GroupNorm statistics in f32 against the CPU engine's f64).
//! Rounding of ~1e-7 relative per operation, amplified by GroupNorm's division by the group's
//! standard deviation through up to 19 normalised layers, gives observed relative differences
//! of ~1e-6 (see the messages); the tests allow 1e-4 relative (L2, per example or per sum),
//! which still catches any wrong index, shape, stride or clipping factor (those give O(1)).
#![cfg(feature = "torch")]

mod common;

use privpred_core::{CalibrationMode, Privacy};
use privpred_nn::data::{ImageSet, Normalization};
use privpred_nn::engine::{CpuEngine, GradientEngine, GroupJob};
use privpred_nn::torch::TorchEngine;
use privpred_nn::train::{self, BatchStats, DpSgdConfig, GradMode, Inputs, SgdConfig};
use privpred_nn::{ResNet, ResNetConfig, calib};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// Relative L2 tolerance between the engines (see the module documentation).
const REL_TOL: f64 = 1e-4;

fn engine() -> TorchEngine {
    TorchEngine::from_env().expect("torch engine")
}

fn random_images(n: usize, size: usize, classes: usize, seed: u64) -> ImageSet {
    ImageSet::synthetic_noise(n, size, classes, seed)
}

fn textures(n: usize, seed: u64) -> ImageSet {
    ImageSet::synthetic_textures(n, seed)
}

fn norm2(v: &[f32]) -> f64 {
    v.iter()
        .map(|&x| (x as f64) * (x as f64))
        .sum::<f64>()
        .sqrt()
}

/// ‖a − b‖ / max(‖b‖, floor).
fn rel_diff(a: &[f32], b: &[f32], floor: f64) -> f64 {
    assert_eq!(a.len(), b.len());
    let d = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
        .sum::<f64>()
        .sqrt();
    d / norm2(b).max(floor)
}

fn assert_stats_match(t: &BatchStats, c: &BatchStats, what: &str) {
    assert_eq!(t.n, c.n, "{what}: n");
    assert_eq!(t.correct, c.correct, "{what}: correct");
    assert_eq!(t.clipped, c.clipped, "{what}: clipped");
    let rel = |a: f64, b: f64| (a - b).abs() / b.abs().max(1e-12);
    assert!(
        rel(t.loss_sum, c.loss_sum) <= REL_TOL,
        "{what}: loss sum {} vs {}",
        t.loss_sum,
        c.loss_sum
    );
    assert!(
        rel(t.norm_sum, c.norm_sum) <= REL_TOL || (t.norm_sum == 0.0 && c.norm_sum == 0.0),
        "{what}: norm sum {} vs {}",
        t.norm_sum,
        c.norm_sum
    );
}

/// Per-example gradients, the three batch-gradient modes, their statistics and the logits of
/// both engines on `net` with `n` images of side `size`, augmentation on; `shift_gn`: with
/// every GroupNorm γ, β moved away from their initial 1 and 0 (by up to ±0.15).
fn engines_agree(net: &ResNet, n: usize, size: usize, chunk: usize, seed: u64, shift_gn: bool) {
    let torch = engine().with_chunk(chunk);
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut params = net.init_params(&mut rng);
    // GroupNorm γ, β away from their initial 1 and 0, so that the fused affine of the summed
    // path and the separate one of the per-example path are both checked
    for t in net.tensors().iter().filter(|_| shift_gn) {
        if t.name.contains("gn") {
            for (k, v) in params[t.range()].iter_mut().enumerate() {
                *v += 0.3 * (((k * 7 + t.offset) % 11) as f32 / 10.0 - 0.5);
            }
        }
    }
    let data = random_images(n, size, net.classes(), seed + 1);
    let norm = Normalization::generic(3);
    let idx: Vec<usize> = (0..n).rev().collect();
    let inputs = Inputs {
        data: &data,
        norm: &norm,
        augment_seed: Some(seed + 2),
    };
    let cpu_pe = train::per_example_gradients(net, &params, inputs, &idx);
    let tch_pe = torch
        .per_example_gradients(net, &params, inputs, &idx)
        .unwrap();
    assert_eq!(tch_pe.len(), n);
    let mut worst = 0.0f64;
    for (k, (t, c)) in tch_pe.iter().zip(&cpu_pe).enumerate() {
        let r = rel_diff(t, c, 1e-6);
        worst = worst.max(r);
        assert!(r <= REL_TOL, "example {k}: relative difference {r:.2e}");
        // per tensor too, so a small tensor cannot hide behind a large one
        for ti in net.tensors() {
            let r = rel_diff(&t[ti.range()], &c[ti.range()], 1e-3 * norm2(c).max(1e-6));
            assert!(
                r <= REL_TOL,
                "example {k}, {}: relative difference {r:.2e}",
                ti.name
            );
        }
    }
    eprintln!("worst per-example relative difference {worst:.2e} ({n} examples)");
    // clip thresholds between the norms, away from any norm so both engines clip the same set
    let mut norms: Vec<f64> = cpu_pe.iter().map(|g| norm2(g)).collect();
    norms.sort_by(f64::total_cmp);
    let mid = (norms[n / 2 - 1] * norms[n / 2]).sqrt();
    let mut layer_norms: Vec<f64> = cpu_pe
        .iter()
        .flat_map(|g| net.tensors().iter().map(move |t| norm2(&g[t.range()])))
        .collect();
    layer_norms.sort_by(f64::total_cmp);
    let lmid = layer_norms[layer_norms.len() / 2];
    let lmid = (lmid * layer_norms[layer_norms.len() / 2 + 1]).sqrt();
    for mode in [
        GradMode::Sum,
        GradMode::ClipJoint(mid),
        GradMode::ClipPerLayer(lmid),
    ] {
        let mut gc = vec![0.0f32; net.num_params()];
        let mut gt = vec![1.0f32; net.num_params()];
        let sc = CpuEngine
            .batch_gradient(net, &params, inputs, &idx, mode, &mut gc)
            .unwrap();
        let st = torch
            .batch_gradient(net, &params, inputs, &idx, mode, &mut gt)
            .unwrap();
        let r = rel_diff(&gt, &gc, 1e-6);
        eprintln!("{mode:?}: relative difference of the sums {r:.2e}");
        assert!(r <= REL_TOL, "{mode:?}: relative difference {r:.2e}");
        assert_stats_match(&st, &sc, &format!("{mode:?}"));
        if matches!(mode, GradMode::ClipJoint(_)) {
            // ν between the norms: both clipping branches run
            assert!(st.clipped > 0 && st.clipped < n, "{mode:?}: {st:?}");
        }
    }
    let lc = CpuEngine
        .predict_logits(net, &params, &data, &norm)
        .unwrap();
    let lt = torch.predict_logits(net, &params, &data, &norm).unwrap();
    assert_eq!(lt.len(), n);
    for (t, c) in lt.iter().zip(&lc) {
        assert!(rel_diff(t, c, 1e-6) <= REL_TOL, "logits {t:?} vs {c:?}");
    }
}

#[test]
fn torch_matches_the_cpu_engine_on_the_tiny_network() {
    let net = ResNet::new(ResNetConfig::tiny(4)).unwrap();
    // chunk 7: several device passes per batch, the last one partial
    engines_agree(&net, 24, 8, 7, 10, true);
}

#[test]
fn torch_matches_the_cpu_engine_on_resnet20() {
    let net = ResNet::new(ResNetConfig::resnet20(10)).unwrap();
    engines_agree(&net, 6, 32, 256, 20, false);
}

/// The number of device passes per batch: 256 examples per pass on the CPU (memory), the whole
/// batch of the paper's 600 in one pass on CUDA (launch-bound); an explicit chunk overrides.
#[test]
fn device_passes_per_batch_follow_the_device() {
    use privpred_nn::torch::{CHUNK_ENV, CUDA_CHUNK, DEFAULT_CHUNK, default_chunk};
    use tch::Device;
    let cpu = TorchEngine::new(Device::Cpu).unwrap();
    assert_eq!(cpu.chunk(), DEFAULT_CHUNK);
    assert_eq!(cpu.passes(600), 3);
    assert_eq!(cpu.passes(256), 1);
    assert_eq!(cpu.passes(257), 2);
    assert_eq!(default_chunk(Device::Cuda(0)), CUDA_CHUNK);
    assert_eq!(600usize.div_ceil(default_chunk(Device::Cuda(0))), 1);
    assert_eq!(cpu.with_chunk(600).passes(600), 1);
    assert_eq!(cpu.with_chunk(0).chunk(), 1);
    let e = engine();
    if std::env::var_os(CHUNK_ENV).is_none() {
        assert_eq!(e.chunk(), default_chunk(e.torch_device()));
    }
    let s = e.settings(600);
    assert_eq!(s["device_passes_per_batch"], e.passes(600));
    assert_eq!(s["examples_per_device_pass"], e.chunk());
}

#[test]
fn torch_joint_clipping_bounds_every_example_and_per_layer_every_tensor() {
    let net = ResNet::new(ResNetConfig::tiny(4)).unwrap();
    let torch = engine();
    let mut rng = ChaCha20Rng::seed_from_u64(30);
    let params = net.init_params(&mut rng);
    let data = random_images(12, 8, 4, 31);
    let norm = Normalization::generic(3);
    let inputs = Inputs {
        data: &data,
        norm: &norm,
        augment_seed: Some(32),
    };
    let mut g = vec![0.0f32; net.num_params()];
    for clip in [1e-3, 0.05, 0.5, 5.0] {
        // each example alone: its contribution to the sum is its clipped gradient
        for i in 0..data.len() {
            let st = torch
                .batch_gradient(
                    &net,
                    &params,
                    inputs,
                    &[i],
                    GradMode::ClipJoint(clip),
                    &mut g,
                )
                .unwrap();
            let after = norm2(&g);
            assert!(after <= clip, "example {i}: norm {after} > ν = {clip}");
            assert_eq!(st.clipped == 1, st.norm_sum > clip);
            let st = torch
                .batch_gradient(
                    &net,
                    &params,
                    inputs,
                    &[i],
                    GradMode::ClipPerLayer(clip),
                    &mut g,
                )
                .unwrap();
            for t in net.tensors() {
                let after = norm2(&g[t.range()]);
                assert!(
                    after <= clip,
                    "example {i}, {}: {after} > ν = {clip}",
                    t.name
                );
            }
            assert_eq!(st.n, 1);
        }
        // the sum of b clipped gradients has norm ≤ b·ν
        let idx: Vec<usize> = (0..data.len()).collect();
        torch
            .batch_gradient(
                &net,
                &params,
                inputs,
                &idx,
                GradMode::ClipJoint(clip),
                &mut g,
            )
            .unwrap();
        assert!(norm2(&g) <= clip * idx.len() as f64);
    }
}

#[test]
fn torch_engine_refuses_bad_input_with_errors() {
    let net = ResNet::new(ResNetConfig::tiny(4)).unwrap();
    let torch = engine();
    let params = net.init_params(&mut ChaCha20Rng::seed_from_u64(40));
    let norm = Normalization::generic(3);
    let mut data = random_images(4, 8, 4, 41);
    let mut g = vec![0.0f32; net.num_params()];
    let inputs = Inputs {
        data: &data,
        norm: &norm,
        augment_seed: None,
    };
    let e = torch
        .batch_gradient(&net, &params[1..], inputs, &[0], GradMode::Sum, &mut g)
        .unwrap_err();
    assert!(e.to_string().contains("parameter"), "{e}");
    let e = torch
        .batch_gradient(&net, &params, inputs, &[9], GradMode::Sum, &mut g)
        .unwrap_err();
    assert!(e.to_string().contains("index 9"), "{e}");
    data.labels[0] = 7;
    let inputs = Inputs {
        data: &data,
        norm: &norm,
        augment_seed: None,
    };
    let e = torch
        .batch_gradient(&net, &params, inputs, &[0], GradMode::Sum, &mut g)
        .unwrap_err();
    assert!(e.to_string().contains("label 7"), "{e}");
    assert!(TorchEngine::parse_device("tpu").is_err());
    assert_eq!(
        TorchEngine::parse_device("cuda:1").unwrap(),
        tch::Device::Cuda(1)
    );
    // an empty batch is a zero gradient
    let st = torch
        .batch_gradient(&net, &params, inputs, &[], GradMode::ClipJoint(1.0), &mut g)
        .unwrap();
    assert_eq!(st.n, 0);
    assert!(g.iter().all(|&v| v == 0.0));
}

#[test]
fn a_tiny_resnet_learns_textures_through_the_torch_engine() {
    // the CPU engine's learning check (tests/nn.rs), through the torch engine
    common::assert_learns_textures(&engine());
}

#[test]
fn dp_sgd_through_the_torch_engine_learns_textures() {
    // corrected DP-SGD (joint clipping, Poisson sampling, σ from the accountant at ε = 8) on
    // the textures: well above chance (25 %) on held-out images (measured 0.61 on libtorch CPU)
    let torch = engine();
    let net = ResNet::new(ResNetConfig::tiny(4)).unwrap();
    let norm = Normalization::generic(3);
    let (tr, te) = (textures(640, 5), textures(160, 6));
    let sgd = SgdConfig {
        epochs: 15.0,
        batch_size: 64,
        lr: 0.1,
        augment: false,
        ..SgdConfig::paper_dpsgd()
    };
    let cal = calib::dpsgd(
        CalibrationMode::Corrected,
        Privacy::new(8.0, 1e-5).unwrap(),
        tr.len(),
        sgd.batch_size,
        sgd.epochs,
        4,
    )
    .unwrap();
    let sigma = cal.mechanism.noise_multiplier().unwrap();
    let cfg = DpSgdConfig::corrected(sgd, 1.0, sigma);
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let mut sizes = Vec::new();
    let mut clipped = 0usize;
    let on = train::TrainInputs {
        engine: &torch,
        net: &net,
        data: &tr,
        norm: &norm,
    };
    let p = train::train_dpsgd_on(on, &cfg, &mut rng, &mut |pr| {
        sizes.push(pr.batch.n);
        clipped += pr.batch.clipped;
    })
    .unwrap();
    assert_eq!(sizes.len(), cfg.steps(tr.len()));
    assert!(sizes.iter().any(|&s| s != sizes[0]), "Poisson sizes vary");
    assert!(clipped > 0, "ν = 1 clips some gradients");
    let pred = train::predict_labels_on(&torch, &net, &p, &te, &norm).unwrap();
    let acc = train::accuracy(&pred, &te.labels);
    eprintln!("DP-SGD (σ = {sigma:.3}) through torch: held-out accuracy {acc:.3}");
    assert!(
        acc >= 0.45,
        "held-out accuracy {acc} (σ = {sigma}; chance 0.25)"
    );
}

/// Regression test of the link step (build.rs): with the linker's default `--as-needed`, a
/// binary built against a CUDA libtorch did not load `libtorch_cuda.so`, so libtorch saw no
/// GPU even on a GPU machine. Whenever the libtorch this test runs with ships a CUDA backend,
/// the backend must be mapped into the process.
#[cfg(target_os = "linux")]
#[test]
fn the_cuda_backend_of_libtorch_is_loaded_whenever_libtorch_has_one() {
    let _ = engine(); // libtorch is in use
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
    let mapped: Vec<&str> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .collect();
    let cpu = mapped
        .iter()
        .find(|p| p.ends_with("/libtorch_cpu.so"))
        .expect("libtorch_cpu.so is mapped");
    let dir = std::path::Path::new(cpu).parent().expect("a directory");
    if dir.join("libtorch_cuda.so").exists() {
        assert!(
            mapped.iter().any(|p| p.ends_with("/libtorch_cuda.so")),
            "{} has libtorch_cuda.so but this process did not load it (the link step dropped \
             it: see crates/privpred-nn/build.rs)",
            dir.display()
        );
    }
}

/// Each member's summed gradient and statistics from one grouped pass equal the CPU engine's
/// for that member alone: `t` members, each with its own parameters (GroupNorm γ, β moved off
/// 1 and 0), its own images and augmentation, batches of `b`; `group_examples` bounds the
/// examples of all members per device pass.
fn group_agrees(net: &ResNet, t: usize, b: usize, size: usize, group_examples: usize, seed: u64) {
    let torch = engine().with_group_examples(group_examples);
    let norm = Normalization::generic(3);
    let sets: Vec<ImageSet> = (0..t)
        .map(|k| random_images(b + 3, size, net.classes(), seed + 10 * k as u64))
        .collect();
    let params: Vec<Vec<f32>> = (0..t)
        .map(|k| {
            let mut p = net.init_params(&mut ChaCha20Rng::seed_from_u64(seed + k as u64));
            for ti in net.tensors().iter().filter(|ti| ti.name.contains("gn")) {
                for (i, v) in p[ti.range()].iter_mut().enumerate() {
                    *v += 0.3 * (((i * 7 + k + ti.offset) % 11) as f32 / 10.0 - 0.5);
                }
            }
            p
        })
        .collect();
    let idx: Vec<Vec<usize>> = (0..t)
        .map(|k| (0..b).map(|i| (i * (k + 2) + k) % (b + 3)).collect())
        .collect();
    let jobs: Vec<GroupJob<'_>> = (0..t)
        .map(|k| GroupJob {
            params: &params[k],
            inputs: Inputs {
                data: &sets[k],
                norm: &norm,
                augment_seed: Some(seed + 100 + k as u64),
            },
            idx: &idx[k],
        })
        .collect();
    let mut outs = vec![vec![1.0f32; net.num_params()]; t];
    let stats = torch.group_gradients(net, &jobs, &mut outs).unwrap();
    assert_eq!(stats.len(), t);
    let mut worst = 0.0f64;
    for (k, j) in jobs.iter().enumerate() {
        let mut gc = vec![0.0f32; net.num_params()];
        let sc = CpuEngine
            .batch_gradient(net, j.params, j.inputs, j.idx, GradMode::Sum, &mut gc)
            .unwrap();
        let r = rel_diff(&outs[k], &gc, 1e-6);
        worst = worst.max(r);
        assert!(r <= REL_TOL, "member {k}: relative difference {r:.2e}");
        for ti in net.tensors() {
            let r = rel_diff(&outs[k][ti.range()], &gc[ti.range()], 1e-3 * norm2(&gc));
            assert!(r <= REL_TOL, "member {k}, {}: {r:.2e}", ti.name);
        }
        assert_stats_match(&stats[k], &sc, &format!("member {k}"));
    }
    eprintln!(
        "grouped ({t} members × {b}, {} device passes): worst relative difference {worst:.2e}",
        torch.group_passes(t, b)
    );
}

#[test]
fn grouped_members_match_the_cpu_engine_member_by_member() {
    let tiny = ResNet::new(ResNetConfig::tiny(4)).unwrap();
    // one pass, then 2 examples of each of 3 members per pass (the last pass partial)
    group_agrees(&tiny, 3, 7, 8, 4096, 1);
    group_agrees(&tiny, 3, 7, 8, 6, 2);
    let r20 = ResNet::new(ResNetConfig::resnet20(10)).unwrap();
    group_agrees(&r20, 2, 3, 32, 4096, 3);
    assert_eq!(
        engine().groups_together(),
        matches!(engine().torch_device(), tch::Device::Cuda(_))
    );
}

#[test]
fn a_group_of_one_or_of_unequal_batches_runs_one_by_one() {
    let net = ResNet::new(ResNetConfig::tiny(4)).unwrap();
    let data = random_images(9, 8, 4, 5);
    let norm = Normalization::generic(3);
    let p = net.init_params(&mut ChaCha20Rng::seed_from_u64(5));
    let inputs = Inputs {
        data: &data,
        norm: &norm,
        augment_seed: None,
    };
    let (a, b): (Vec<usize>, Vec<usize>) = ((0..5).collect(), (2..9).collect());
    let jobs = [
        GroupJob {
            params: &p,
            inputs,
            idx: &a,
        },
        GroupJob {
            params: &p,
            inputs,
            idx: &b,
        },
    ];
    let mut outs = vec![vec![0.0f32; net.num_params()]; 2];
    let st = engine().group_gradients(&net, &jobs, &mut outs).unwrap();
    for (k, j) in jobs.iter().enumerate() {
        let mut gc = vec![0.0f32; net.num_params()];
        let sc = CpuEngine
            .batch_gradient(&net, &p, inputs, j.idx, GradMode::Sum, &mut gc)
            .unwrap();
        assert!(rel_diff(&outs[k], &gc, 1e-6) <= REL_TOL);
        assert_stats_match(&st[k], &sc, &format!("job {k}"));
    }
    // a mismatched output count is an error, not a panic
    let mut short = vec![vec![0.0f32; net.num_params()]];
    let e = engine()
        .group_gradients(&net, &jobs, &mut short)
        .unwrap_err();
    assert!(
        e.to_string().contains("2 gradient jobs and 1 outputs"),
        "{e}"
    );
}

/// Teachers trained together through the grouped engine end where teachers trained one by
/// one through the CPU engine end (same shards, seeds and steps), up to the engines' rounding
/// carried through the steps.
#[test]
fn teachers_trained_together_on_torch_match_the_cpu_engine_one_by_one() {
    let net = ResNet::new(ResNetConfig::tiny(4)).unwrap();
    let norm = Normalization::generic(3);
    let shards: Vec<ImageSet> = (0..3).map(|k| textures(24, 40 + k)).collect();
    let sgd = SgdConfig {
        epochs: 2.0,
        batch_size: 8,
        lr: 0.05,
        ..SgdConfig::paper_teacher()
    };
    let dir = tempfile::tempdir().unwrap();
    let g = common::Group {
        net: &net,
        norm: &norm,
        shards: &shards,
        sgd: &sgd,
    };
    let together = common::train_group(&engine(), &g, dir.path(), 4, None, &mut |_, _| {}).unwrap();
    for (k, member) in together.iter().enumerate() {
        let alone = common::train_alone(&g, k, dir.path(), 4);
        let d = rel_diff(member, &alone, 1e-6);
        eprintln!("teacher {k}: together (torch) vs alone (cpu) relative difference {d:.2e}");
        assert!(d <= 1e-3, "teacher {k}: relative difference {d:.2e}");
    }
}

/// Subsample-and-aggregate's guarantee rests on each example reaching one teacher's vote
/// only: in the grouped network, member 0's gradient and statistics must not move at all when
/// another member's images, labels and parameters are replaced (any channel, group or row
/// shared across members would move them).
#[test]
fn a_grouped_member_sees_nothing_of_the_other_members() {
    let net = ResNet::new(ResNetConfig::tiny(4)).unwrap();
    let norm = Normalization::generic(3);
    let torch = engine();
    let grads = |other_seed: u64| {
        let sets = [
            random_images(8, 8, 4, 1),
            random_images(8, 8, 4, other_seed),
        ];
        let params = [
            net.init_params(&mut ChaCha20Rng::seed_from_u64(1)),
            net.init_params(&mut ChaCha20Rng::seed_from_u64(other_seed)),
        ];
        let idx: Vec<usize> = (0..6).collect();
        let jobs: Vec<GroupJob<'_>> = (0..2)
            .map(|k| GroupJob {
                params: &params[k],
                inputs: Inputs {
                    data: &sets[k],
                    norm: &norm,
                    augment_seed: Some(7 + k as u64),
                },
                idx: &idx,
            })
            .collect();
        let mut outs = vec![vec![0.0f32; net.num_params()]; 2];
        let st = torch.group_gradients(&net, &jobs, &mut outs).unwrap();
        (outs, st)
    };
    let (a, sa) = grads(2);
    let (b, sb) = grads(3);
    assert_ne!(a[1], b[1], "the other member's gradient changed");
    assert_eq!(a[0], b[0], "member 0's gradient depends on member 1");
    assert_eq!(sa[0], sb[0], "member 0's statistics depend on member 1");
}
