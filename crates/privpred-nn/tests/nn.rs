//! Tests of the deep-model paths on a tiny network and a few hundred images (CPU, seconds):
//! per-example gradients, joint clipping, DP-SGD noise scale, Poisson sampling, teachers'
//! disjoint data, artifacts, and the CIFAR-10 JPEG reader.

use privpred_core::{CalibrationMode, Privacy};
use privpred_nn::artifact::{self, ModelHeader, ModelKind, NnModel};
use privpred_nn::calib;
use privpred_nn::data::{self, ImageSet, Normalization};
use privpred_nn::train::{self, DpSgdConfig, GradMode, Inputs, SgdConfig};
use privpred_nn::{ResNet, ResNetConfig};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use statrs::distribution::{ChiSquared, ContinuousCDF};

mod common;

/// Two-sided false-positive rate of every statistical test here.
const ALPHA: f64 = 1e-6;

fn random_images(n: usize, size: usize, seed: u64) -> ImageSet {
    ImageSet::synthetic_noise(n, size, 4, seed)
}

fn norm2(v: &[f32]) -> f64 {
    v.iter()
        .map(|&x| (x as f64) * (x as f64))
        .sum::<f64>()
        .sqrt()
}

#[test]
fn batched_per_example_gradients_match_single_example_backward_passes() {
    let net = ResNet::new(ResNetConfig::tiny(4)).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let params = net.init_params(&mut rng);
    let data = random_images(24, 8, 2);
    let norm = Normalization::generic(3);
    let idx: Vec<usize> = (0..24).rev().collect();
    let inputs = Inputs {
        data: &data,
        norm: &norm,
        augment_seed: Some(9),
    };
    // single-example backward passes, each with a fresh tape
    let single = train::per_example_gradients(&net, &params, inputs, &idx);
    let norms: Vec<f64> = single.iter().map(|g| norm2(g)).collect();
    // a clip between the smallest and largest norm, so both branches are exercised
    let mut sorted = norms.clone();
    sorted.sort_by(f64::total_cmp);
    let clip = sorted[12];
    for (mode, clip_of) in [
        (GradMode::Sum, None),
        (GradMode::ClipJoint(clip), Some(clip)),
    ] {
        let mut batched = vec![0.0f32; net.num_params()];
        let st = train::batch_gradient(&net, &params, inputs, &idx, mode, &mut batched);
        assert_eq!(st.n, 24);
        let mut expect = vec![0.0f64; net.num_params()];
        for g in &single {
            let f = match clip_of {
                Some(c) => (c / norm2(g)).min(1.0),
                None => 1.0,
            };
            for (e, &v) in expect.iter_mut().zip(g) {
                *e += f * v as f64;
            }
        }
        let diff: f64 = batched
            .iter()
            .zip(&expect)
            .map(|(&a, &b)| (a as f64 - b).powi(2))
            .sum::<f64>()
            .sqrt();
        let scale: f64 = expect.iter().map(|b| b * b).sum::<f64>().sqrt();
        assert!(
            diff <= 1e-4 * scale.max(1.0),
            "{mode:?}: |batched − Σ single| = {diff}, |Σ| = {scale}"
        );
        if let Some(c) = clip_of {
            assert_eq!(st.clipped, norms.iter().filter(|&&n| n > c).count());
        }
    }
}

#[test]
fn joint_clipping_bounds_every_per_example_gradient() {
    let net = ResNet::new(ResNetConfig::tiny(4)).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let params = net.init_params(&mut rng);
    let data = random_images(40, 8, 4);
    let norm = Normalization::generic(3);
    let idx: Vec<usize> = (0..40).collect();
    let grads = train::per_example_gradients(
        &net,
        &params,
        Inputs {
            data: &data,
            norm: &norm,
            augment_seed: None,
        },
        &idx,
    );
    for clip in [1e-3, 0.05, 0.5, 5.0] {
        for g in &grads {
            let mut c = g.clone();
            let (before, scaled) = train::clip_in_place(&mut c, clip);
            let after = norm2(&c);
            assert!(after <= clip, "norm {after} > ν = {clip}");
            if !scaled {
                assert_eq!(&c, g);
                assert!(before <= clip);
            } else {
                // the direction is kept and the norm is ν up to rounding
                assert!(after >= clip * (1.0 - 1e-5), "{after} vs {clip}");
            }
        }
        // the per-layer (paper) rule bounds each tensor by ν but the whole gradient only by √k·ν
        let k = net.tensors().len() as f64;
        for g in &grads {
            let mut c = g.clone();
            for t in net.tensors() {
                train::clip_in_place(&mut c[t.range()], clip);
                assert!(norm2(&c[t.range()]) <= clip);
            }
            assert!(norm2(&c) <= k.sqrt() * clip);
        }
    }
}

#[test]
fn dp_sgd_noise_has_the_accountants_scale() {
    // σ from the accountant for N = 400, b = 40, 2 epochs, ε = 1, δ = 1e-5
    let cal = calib::dpsgd(
        CalibrationMode::Corrected,
        Privacy::new(1.0, 1e-5).unwrap(),
        400,
        40,
        2.0,
        4,
    )
    .unwrap();
    let sigma = cal.mechanism.noise_multiplier().unwrap();
    assert!(cal.is_valid() && cal.mechanism.epsilon_spent().unwrap() <= 1.0 && sigma > 0.5);
    let net = ResNet::new(ResNetConfig::tiny(4)).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let params = net.init_params(&mut rng);
    let data = random_images(8, 8, 6);
    let norm = Normalization::generic(3);
    let clip = 0.3;
    let cfg = DpSgdConfig::corrected(
        SgdConfig {
            batch_size: 40,
            ..SgdConfig::paper_dpsgd()
        },
        clip,
        sigma,
    );
    // empty batch: the update is pure noise / b; Σ (b·u_i / σν)² ~ χ²(P)
    let mut out = vec![0.0f32; net.num_params()];
    let mut noise_rng = ChaCha20Rng::seed_from_u64(7);
    train::dp_gradient(
        &net,
        &params,
        Inputs {
            data: &data,
            norm: &norm,
            augment_seed: None,
        },
        &[],
        &cfg,
        &mut noise_rng,
        &mut out,
    );
    let p = out.len() as f64;
    let s: f64 = out
        .iter()
        .map(|&u| (u as f64 * 40.0 / (sigma * clip)).powi(2))
        .sum();
    let chi = ChiSquared::new(p).unwrap();
    let (lo, hi) = (
        chi.inverse_cdf(ALPHA / 2.0),
        chi.inverse_cdf(1.0 - ALPHA / 2.0),
    );
    assert!(
        lo <= s && s <= hi,
        "Σz² = {s} outside [{lo}, {hi}] for {p} coordinates"
    );
    // and a 10% wrong scale would be caught: the acceptance interval is narrower than ±10%
    assert!(hi / p < 1.21 && lo / p > 0.81);
    // with data: the update minus the clipped sum is the same noise (seeded identically)
    let idx: Vec<usize> = (0..8).collect();
    let mut with_data = vec![0.0f32; net.num_params()];
    let mut r2 = ChaCha20Rng::seed_from_u64(7);
    train::dp_gradient(
        &net,
        &params,
        Inputs {
            data: &data,
            norm: &norm,
            augment_seed: None,
        },
        &idx,
        &cfg,
        &mut r2,
        &mut with_data,
    );
    let mut clipped = vec![0.0f32; net.num_params()];
    train::batch_gradient(
        &net,
        &params,
        Inputs {
            data: &data,
            norm: &norm,
            augment_seed: None,
        },
        &idx,
        GradMode::ClipJoint(clip),
        &mut clipped,
    );
    for ((w, c), n) in with_data.iter().zip(&clipped).zip(&out) {
        assert!((w - c / 40.0 - n).abs() <= 1e-5 * (1.0 + n.abs()));
    }
}

#[test]
fn poisson_batches_vary_with_mean_qn() {
    let (n, q, draws) = (500usize, 0.1f64, 2000usize);
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let sizes: Vec<f64> = (0..draws)
        .map(|_| train::poisson_batch(n, q, &mut rng).len() as f64)
        .collect();
    let mean = sizes.iter().sum::<f64>() / draws as f64;
    let var = sizes.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (draws - 1) as f64;
    let expect_var = n as f64 * q * (1.0 - q);
    // |mean − qN| ≤ z_{1−α/2}·sd/√draws with z = 4.892 (α = 1e-6)
    assert!(
        (mean - q * n as f64).abs() <= 4.892 * (expect_var / draws as f64).sqrt(),
        "mean {mean}"
    );
    // the variance of Binomial(N, q) (χ² bounds for the sample variance at α = 1e-6)
    let chi = ChiSquared::new((draws - 1) as f64).unwrap();
    let lo = expect_var * chi.inverse_cdf(ALPHA / 2.0) / (draws - 1) as f64;
    let hi = expect_var * chi.inverse_cdf(1.0 - ALPHA / 2.0) / (draws - 1) as f64;
    assert!(
        lo <= var && var <= hi,
        "variance {var} outside [{lo}, {hi}]"
    );
    // members are distinct and in range
    let b = train::poisson_batch(n, q, &mut rng);
    assert!(b.windows(2).all(|w| w[0] < w[1]) && b.iter().all(|&i| i < n));
}

#[test]
fn teachers_train_on_disjoint_slices() {
    let net = ResNet::new(ResNetConfig::tiny(4)).unwrap();
    let data = random_images(70, 8, 12);
    let norm = Normalization::generic(3);
    let mut rng = ChaCha20Rng::seed_from_u64(13);
    let cfg = SgdConfig {
        epochs: 1.0,
        batch_size: 8,
        lr: 0.01,
        ..SgdConfig::paper_teacher()
    };
    let ens = train::train_teachers(&net, &data, &norm, &cfg, 4, &mut rng, &mut |_, _| {}).unwrap();
    assert_eq!(ens.partition.len(), 4);
    assert_eq!(ens.params.len(), 4);
    let mut seen = [false; 70];
    for part in &ens.partition {
        assert_eq!(part.len(), 70 / 4);
        for &i in part {
            assert!(!seen[i], "example {i} in two teachers' slices");
            seen[i] = true;
        }
    }
    assert!(train::partition(3, 4, &mut rng).is_err());
    // the vote matrix of the ensemble sums to T per query
    let preds: Vec<Vec<u32>> = ens
        .params
        .iter()
        .map(|p| train::predict_labels(&net, p, &data, &norm))
        .collect();
    let votes = privpred_nn::teachers::VoteMatrix::from_predictions(&preds, 4).unwrap();
    assert!((0..70).all(|i| votes.votes(i).iter().sum::<u32>() == 4));
    // an engine that asks for its teachers together trains them in lock step: the same
    // partition and the same parameters, bit for bit
    let on = train::TrainInputs {
        engine: &Grouping,
        net: &net,
        data: &data,
        norm: &norm,
    };
    let mut rng = ChaCha20Rng::seed_from_u64(13);
    let together = train::train_teachers_on(on, &cfg, 4, &mut rng, &mut |_, _| {}).unwrap();
    assert_eq!(together.partition, ens.partition);
    assert_eq!(together.params, ens.params);
}

/// The CPU engine, except that it asks for a group's members to train together.
struct Grouping;

impl privpred_nn::GradientEngine for Grouping {
    fn name(&self) -> &'static str {
        "cpu"
    }
    fn device(&self) -> String {
        "cpu".into()
    }
    fn batch_gradient(
        &self,
        net: &ResNet,
        params: &[f32],
        inputs: Inputs<'_>,
        idx: &[usize],
        mode: GradMode,
        out: &mut [f32],
    ) -> privpred_nn::Result<train::BatchStats> {
        privpred_nn::CpuEngine.batch_gradient(net, params, inputs, idx, mode, out)
    }
    fn predict_logits(
        &self,
        net: &ResNet,
        params: &[f32],
        data: &ImageSet,
        norm: &Normalization,
    ) -> privpred_nn::Result<Vec<Vec<f32>>> {
        privpred_nn::CpuEngine.predict_logits(net, params, data, norm)
    }
    fn groups_together(&self) -> bool {
        true
    }
}

#[test]
fn dp_sgd_and_nonprivate_training_run_and_artifacts_round_trip() {
    let net = ResNet::new(ResNetConfig::tiny(4)).unwrap();
    let data = random_images(64, 8, 14);
    let norm = Normalization::generic(3);
    let mut rng = ChaCha20Rng::seed_from_u64(15);
    let cal = calib::dpsgd(
        CalibrationMode::Corrected,
        Privacy::new(2.0, 1e-5).unwrap(),
        64,
        16,
        2.0,
        4,
    )
    .unwrap();
    let sgd = SgdConfig {
        epochs: 2.0,
        batch_size: 16,
        lr: 0.05,
        weight_decay: 0.0,
        ..SgdConfig::paper_dpsgd()
    };
    let cfg = DpSgdConfig::corrected(sgd.clone(), 1.0, cal.mechanism.noise_multiplier().unwrap());
    let mut steps = 0;
    let mut sizes = Vec::new();
    let p = train::train_dpsgd(&net, &data, &norm, &cfg, &mut rng, &mut |pr| {
        steps = pr.step;
        sizes.push(pr.batch.n);
    })
    .unwrap();
    assert_eq!(steps, cfg.steps(64));
    assert!(
        sizes.iter().any(|&s| s != sizes[0]),
        "Poisson batch sizes should vary: {sizes:?}"
    );
    assert!(p.iter().all(|v| v.is_finite()));
    // paper mode: fixed batch sizes
    let mut psizes = Vec::new();
    train::train_dpsgd(
        &net,
        &data,
        &norm,
        &DpSgdConfig::paper(sgd, 1.0, 1.0),
        &mut rng,
        &mut |pr| psizes.push(pr.batch.n),
    )
    .unwrap();
    assert!(psizes.iter().all(|&s| s == 16));
    assert!(!DpSgdConfig::paper(SgdConfig::paper_dpsgd(), 1.0, 1.0).valid_guarantee());

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    let model = NnModel::new(
        ModelHeader {
            kind: ModelKind::DpSgd,
            config: *net.config(),
            normalization: norm.clone(),
            calibration: Some(cal),
            training: Some(privpred_nn::calib::PublicTraining {
                n: 64,
                dp_sgd: Some(privpred_core::DpSgdSchedule {
                    batch_size: 16,
                    epochs: 2.0,
                }),
                teachers: None,
            }),
            seed_policy: Some(privpred_core::SeedPolicy::Seeded { seed: 15 }),
            members: 1,
            class_names: None,
            data_source: data.source.clone(),
        },
        vec![p.clone()],
        serde_json::json!({"test": true}),
    )
    .unwrap();
    artifact::save(&path, &model).unwrap();
    let back = artifact::load(&path).unwrap();
    assert_eq!(back, model);
    let rows: Vec<Vec<f32>> = (0..5)
        .map(|i| data.image(i).iter().map(|&v| v as f32).collect())
        .collect();
    let refs: Vec<&[f32]> = rows.iter().map(|r| r.as_slice()).collect();
    let a = back.predict(&refs, &mut rng).unwrap();
    let direct = train::predict_labels(&net, &p, &data.subset(&[0, 1, 2, 3, 4]), &norm);
    assert_eq!(a.iter().map(|x| x.label).collect::<Vec<_>>(), direct);
    // bad input is an error naming the problem, not a panic
    let short = [1.0f32; 3];
    assert!(
        back.predict(&[&short[..]], &mut rng)
            .unwrap_err()
            .to_string()
            .contains("raw pixels")
    );
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    assert!(
        artifact::load(&path)
            .unwrap_err()
            .to_string()
            .contains("SHA-256")
    );

    // a teacher ensemble answers through the exponential mechanism
    let sa = calib::subsample_aggregate(
        CalibrationMode::Corrected,
        Privacy::new(1.0, 1e-5).unwrap(),
        10,
        4,
    )
    .unwrap();
    let ens = NnModel::new(
        ModelHeader {
            kind: ModelKind::Teachers,
            config: *net.config(),
            normalization: norm,
            calibration: Some(sa),
            training: Some(privpred_nn::calib::PublicTraining {
                n: 64,
                dp_sgd: None,
                teachers: Some(2),
            }),
            seed_policy: Some(privpred_core::SeedPolicy::Seeded { seed: 15 }),
            members: 2,
            class_names: None,
            data_source: data.source.clone(),
        },
        vec![p.clone(), p],
        serde_json::Value::Null,
    )
    .unwrap();
    artifact::save(&path, &ens).unwrap();
    let ans = artifact::load(&path)
        .unwrap()
        .predict(&refs, &mut rng)
        .unwrap();
    assert!(ans.iter().all(|a| a.scores.is_none() && a.label < 4));
}

/// The CIFAR-10 JPEG copy through the normal resolution order (`$PRIVPRED_DATA_DIR`, the
/// cache, `shared/data` beside the repository); `None`, after one printed skip line, when it
/// is absent (a failure with `PRIVPRED_REQUIRE_DATA=1`).
fn cifar_path(test: &str) -> Option<std::path::PathBuf> {
    privpred_data::testdata::cifar10_jpeg_or_skip(&format!("nn::{test}"))
}

#[test]
fn cifar10_jpeg_subset_trains_a_small_resnet() {
    let Some(path) = cifar_path("cifar10_jpeg_subset_trains_a_small_resnet") else {
        return;
    };
    let (train_set, test_set) = data::load_cifar10_jpeg(&path, Some((30, 10))).unwrap();
    assert_eq!((train_set.len(), test_set.len()), (300, 100));
    assert_eq!(train_set.source, data::CIFAR10_JPEG_LABEL);
    for c in 0..10 {
        assert_eq!(train_set.labels.iter().filter(|&&y| y == c).count(), 30);
    }
    // a small ResNet on real 32×32 images: the training loss must fall
    let cfg = ResNetConfig {
        in_channels: 3,
        image_size: 32,
        widths: [8, 16, 16],
        blocks_per_stage: 1,
        classes: 10,
    };
    let net = ResNet::new(cfg).unwrap();
    let norm = Normalization::cifar10();
    let mut rng = ChaCha20Rng::seed_from_u64(21);
    let init = net.init_params(&mut rng);
    let loss = |p: &[f32]| {
        let mut g = vec![0.0f32; net.num_params()];
        let idx: Vec<usize> = (0..train_set.len()).collect();
        train::batch_gradient(
            &net,
            p,
            Inputs {
                data: &train_set,
                norm: &norm,
                augment_seed: None,
            },
            &idx,
            GradMode::Sum,
            &mut g,
        )
        .loss_sum
            / idx.len() as f64
    };
    let before = loss(&init);
    let sgd = SgdConfig {
        epochs: 12.0,
        batch_size: 10,
        lr: 0.05,
        lr_drops: 1,
        augment: false,
        ..SgdConfig::paper_teacher()
    };
    let p = train::train_nonprivate(
        &net,
        &train_set,
        &norm,
        &sgd,
        Some(init),
        &mut rng,
        &mut |_| {},
    )
    .unwrap();
    let after = loss(&p);
    // a smoke test of the real-data path (the loss must fall); learning speed on CIFAR is
    // reported by the example `cifar_nonprivate`, not asserted here
    assert!(after < 0.96 * before, "training loss {before} → {after}");
}

#[test]
fn cifar10_jpeg_labels_match_their_images() {
    // A label/image misalignment in the reader would put any classifier at chance: the
    // nearest class mean of raw pixels (no learning) reaches ≈ 28 % on this subset.
    let Some(path) = cifar_path("cifar10_jpeg_labels_match_their_images") else {
        return;
    };
    let (tr, te) = data::load_cifar10_jpeg(&path, Some((100, 50))).unwrap();
    let l = tr.image_len();
    let mut cent = vec![vec![0.0f64; l]; 10];
    for i in 0..tr.len() {
        for (c, &v) in cent[tr.labels[i] as usize].iter_mut().zip(tr.image(i)) {
            *c += v as f64 / 100.0;
        }
    }
    let correct = (0..te.len())
        .filter(|&i| {
            let d = |y: usize| -> f64 {
                cent[y]
                    .iter()
                    .zip(te.image(i))
                    .map(|(c, &v)| (c - v as f64).powi(2))
                    .sum()
            };
            let best = (0..10).min_by(|&a, &b| d(a).total_cmp(&d(b))).unwrap();
            best as u32 == te.labels[i]
        })
        .count();
    let acc = correct as f64 / te.len() as f64;
    assert!(acc > 0.2, "nearest class mean accuracy {acc} (chance 0.1)");
}

#[test]
fn cifar10_jpeg_source_checksum() {
    let Some(path) = cifar_path("cifar10_jpeg_source_checksum") else {
        return;
    };
    // the tarball: its SHA-256 as published with the copy (docs/data.md)
    assert_eq!(
        data::source_sha256(&path).unwrap(),
        "58c58e3af3ec7ed2054f439f35ad3c83dc1ab019f4af6037f60612ea098c8fa1"
    );
}

#[test]
fn dataset_source_checksums() {
    // a folder: independent of where it lives, sensitive to names and contents
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for d in [a.path(), b.path()] {
        std::fs::create_dir_all(d.join("train/cat")).unwrap();
        std::fs::write(d.join("train/cat/0.jpg"), b"x").unwrap();
        std::fs::write(d.join("train/cat/1.jpg"), b"y").unwrap();
    }
    let ha = data::source_sha256(a.path()).unwrap();
    assert_eq!(ha, data::source_sha256(b.path()).unwrap());
    std::fs::write(b.path().join("train/cat/1.jpg"), b"z").unwrap();
    assert_ne!(ha, data::source_sha256(b.path()).unwrap());
    std::fs::rename(
        a.path().join("train/cat/1.jpg"),
        a.path().join("train/cat/2.jpg"),
    )
    .unwrap();
    assert_ne!(ha, data::source_sha256(a.path()).unwrap());
    assert!(data::source_sha256(&a.path().join("missing")).is_err());
}

#[test]
fn a_tiny_resnet_learns_textures_well_above_chance() {
    common::assert_learns_textures(&privpred_nn::CpuEngine);
}

#[test]
fn cifar10_binary_batches_load_as_image_sets() {
    // the canonical layout `privpred data fetch cifar10` installs: 5 training batches and a
    // test batch of (label byte, 3×32×32 channel-major bytes) records
    let dir = tempfile::tempdir().unwrap();
    let b = dir.path().join("cifar-10-batches-bin");
    std::fs::create_dir_all(&b).unwrap();
    let record = |label: u8, fill: u8| -> Vec<u8> {
        let mut r = vec![label];
        r.extend((0..3072).map(|j| if j < 1024 { fill } else { 7 }));
        r
    };
    for k in 1..=5u8 {
        let bytes: Vec<u8> = (0..4u8).flat_map(|i| record(i % 2, 10 * k + i)).collect();
        std::fs::write(b.join(format!("data_batch_{k}.bin")), bytes).unwrap();
    }
    let test: Vec<u8> = (0..3u8).flat_map(|i| record(i, 200)).collect();
    std::fs::write(b.join("test_batch.bin"), test).unwrap();
    let (tr, te) = data::load_cifar10(dir.path(), None).unwrap();
    assert_eq!((tr.len(), te.len()), (20, 3));
    assert_eq!(
        (tr.channels, tr.height, tr.width, tr.classes),
        (3, 32, 32, 10)
    );
    assert_eq!(tr.source, data::CIFAR10_BINARY_LABEL);
    // channel-major: the red plane of the first record is its fill value, the rest 7
    assert_eq!(tr.labels[..4], [0, 1, 0, 1]);
    assert!(tr.image(1)[..1024].iter().all(|&v| v == 11));
    assert!(tr.image(1)[1024..].iter().all(|&v| v == 7));
    assert_eq!(te.labels, vec![0, 1, 2]);
    let (tr, te) = data::load_cifar10(&b, Some((1, 1))).unwrap();
    assert_eq!((tr.len(), te.len()), (2, 3));
}

/// Runs `train` with a checkpoint file and an already-passed deadline until it finishes: every
/// call stops at the first segment boundary, so the run is cut into as many pieces as it has
/// segments. Returns the parameters and the number of calls.
fn train_in_pieces(
    dir: &std::path::Path,
    every: usize,
    train: &mut dyn FnMut(&privpred_nn::resume::Resume) -> privpred_nn::Result<Vec<f32>>,
) -> (Vec<f32>, usize) {
    let ckpt = dir.join("run.ckpt");
    let past = std::time::Instant::now();
    let mut calls = 0;
    loop {
        calls += 1;
        assert!(calls < 1000, "the run never finished");
        let r = privpred_nn::resume::Resume::new(&ckpt, every, Some(past)).unwrap();
        match train(&r) {
            Ok(p) => return (p, calls),
            Err(privpred_nn::NnError::Stopped(m)) => assert!(m.contains("step"), "{m}"),
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn a_stopped_and_resumed_training_equals_the_uninterrupted_one() {
    use privpred_nn::resume::Resume;
    let net = ResNet::new(ResNetConfig::tiny(4)).unwrap();
    let data = random_images(40, 8, 2);
    let norm = Normalization::generic(3);
    let on = train::TrainInputs {
        engine: &privpred_nn::CpuEngine,
        net: &net,
        data: &data,
        norm: &norm,
    };
    let sgd = SgdConfig {
        epochs: 3.0,
        batch_size: 8,
        lr: 0.05,
        ..SgdConfig::paper_teacher()
    };
    // non-private (shuffled batches, augmentation): 15 steps in segments of 4
    let dir = tempfile::tempdir().unwrap();
    let whole = {
        let r = Resume::new(dir.path().join("whole.ckpt"), 4, None).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        train::train_nonprivate_resumable_on(on, &sgd, &mut rng, &r, &mut |_| {}).unwrap()
    };
    let (pieces, calls) = train_in_pieces(dir.path(), 4, &mut |r| {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        train::train_nonprivate_resumable_on(on, &sgd, &mut rng, r, &mut |_| {})
    });
    assert_eq!(calls, 4, "15 steps in segments of 4 stop 3 times");
    assert_eq!(whole, pieces, "non-private: resumed run differs");

    // DP-SGD (Poisson sampling, noise): bit-identical too
    let dcfg = DpSgdConfig::corrected(sgd.clone(), 1.0, 1.1);
    let dir = tempfile::tempdir().unwrap();
    let whole = {
        let r = Resume::new(dir.path().join("whole.ckpt"), 3, None).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(6);
        train::train_dpsgd_resumable_on(on, &dcfg, &mut rng, &r, &mut |_| {}).unwrap()
    };
    let (pieces, calls) = train_in_pieces(dir.path(), 3, &mut |r| {
        let mut rng = ChaCha20Rng::seed_from_u64(6);
        train::train_dpsgd_resumable_on(on, &dcfg, &mut rng, r, &mut |_| {})
    });
    assert!(calls > 2, "{calls}");
    assert_eq!(whole, pieces, "DP-SGD: resumed run differs");
    // a checkpoint of another run is refused, naming the file
    let r = Resume::new(dir.path().join("run.ckpt"), 3, None).unwrap();
    let other = SgdConfig {
        epochs: 4.0,
        ..sgd.clone()
    };
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let e = train::train_dpsgd_resumable_on(
        on,
        &DpSgdConfig::corrected(other, 1.0, 1.1),
        &mut rng,
        &r,
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("run.ckpt"), "{e}");
}

/// The prepared GPU run (scripts/gpu_fig7_run.sh) parses and passes `nn-train` only options
/// that exist.
#[test]
fn the_prepared_gpu_run_passes_nn_train_options_that_exist() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = root.join("scripts/gpu_fig7_run.sh");
    let o = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(root.join("benches/resnet20_gn_reference.py").is_file());
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_nn-train"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for opt in [
        "--mode",
        "--engine",
        "--data",
        "--batch",
        "--steps",
        "--out",
        "--teachers",
    ] {
        assert!(text.contains(opt), "{opt} not in the script");
        assert!(help.contains(opt), "{opt} not in nn-train --help");
    }
}

/// Teachers trained in lock step ([`train::train_group_resumable_on`]) take exactly the steps
/// each takes alone: bit-identical parameters with the CPU engine, also when the group is
/// stopped at every segment boundary and continued from its checkpoints, and when the members
/// start from checkpoints at different steps.
#[test]
fn teachers_in_lock_step_equal_teachers_trained_one_by_one() {
    use privpred_nn::resume::Resume;
    let net = ResNet::new(ResNetConfig::tiny(4)).unwrap();
    let norm = Normalization::generic(3);
    let shards: Vec<ImageSet> = (0..3).map(|k| random_images(20, 8, 30 + k)).collect();
    let sgd = SgdConfig {
        epochs: 2.0,
        batch_size: 6,
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
    let alone: Vec<Vec<f32>> = (0..3)
        .map(|k| common::train_alone(&g, k, dir.path(), 3))
        .collect();
    // the group, in one go or stopped at every boundary (deadline already passed)
    let group = |deadline: Option<std::time::Instant>, steps: &mut Vec<(usize, usize)>| {
        common::train_group(
            &privpred_nn::CpuEngine,
            &g,
            dir.path(),
            3,
            deadline,
            &mut |k, p| steps.push((k, p.step)),
        )
    };
    let mut seen = Vec::new();
    let whole = group(None, &mut seen).unwrap();
    assert_eq!(whole, alone, "lock step differs from one by one");
    // 20 examples, batch 6, 2 epochs: 7 steps each, every member observed at every step
    assert_eq!(seen.len(), 21);
    assert!(seen.iter().take(3).all(|&(_, s)| s == 1), "{seen:?}");
    for k in 0..3 {
        std::fs::remove_file(dir.path().join(format!("g{k}.ckpt"))).ok();
    }
    let mut calls = 0;
    let pieces = loop {
        calls += 1;
        assert!(calls < 100, "the group never finished");
        match group(Some(std::time::Instant::now()), &mut Vec::new()) {
            Ok(p) => break p,
            Err(privpred_nn::NnError::Stopped(m)) => assert!(m.contains("step"), "{m}"),
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(calls, 3, "7 steps in segments of 3 stop twice");
    assert_eq!(pieces, alone, "a stopped and continued group differs");
    // members at different steps: member 1 alone to its first boundary, then all together
    for k in 0..3 {
        std::fs::remove_file(dir.path().join(format!("g{k}.ckpt"))).ok();
    }
    {
        let on = train::TrainInputs {
            engine: &privpred_nn::CpuEngine,
            net: &net,
            data: &shards[1],
            norm: &norm,
        };
        let past = std::time::Instant::now();
        let r = Resume::new(dir.path().join("g1.ckpt"), 3, Some(past)).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let e = train::train_nonprivate_resumable_on(on, &sgd, &mut rng, &r, &mut |_| {});
        assert!(matches!(e, Err(privpred_nn::NnError::Stopped(_))));
    }
    let mut seen = Vec::new();
    assert_eq!(
        group(None, &mut seen).unwrap(),
        alone,
        "members at different steps"
    );
    assert_eq!(seen.iter().filter(|&&(k, _)| k == 1).count(), 4);
}

/// `nn-train --mode throughput` on a few CIFAR-10 images writes the teachers' measurement that
/// the prepared GPU run reads to choose between teachers together and one after another, and
/// the script's own reading of it answers 0 or 1.
#[test]
fn the_throughput_report_gives_the_gpu_run_its_teacher_choice() {
    let Some(cifar) = cifar_path("the_throughput_report_gives_the_gpu_run_its_teacher_choice")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tp.json");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_nn-train"))
        .args([
            "--mode",
            "throughput",
            "--engine",
            "cpu",
            "--per-class",
            "4,1",
        ])
        .args([
            "--batch",
            "8",
            "--steps",
            "1",
            "--teachers",
            "2",
            "--threads",
            "2",
        ])
        .arg("--data")
        .arg(&cifar)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let t = &report["teachers"];
    assert_eq!(t["teachers"], 2);
    assert_eq!(t["batch_per_teacher"], 8);
    assert_eq!(
        t["groups_together"], false,
        "the CPU engine computes a group one by one"
    );
    assert!(t["together_speedup"].as_f64().unwrap() > 0.0, "{t}");
    // the script's own line that reads it
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = std::fs::read_to_string(root.join("scripts/gpu_fig7_run.sh")).unwrap();
    let line = script
        .lines()
        .find(|l| l.contains("together=$(python3 -c '"))
        .expect("the script reads the teachers' measurement");
    let prog = line
        .split("-c '")
        .nth(1)
        .unwrap()
        .split('\'')
        .next()
        .unwrap();
    let o = std::process::Command::new("python3")
        .arg("-c")
        .arg(prog)
        .arg(&out)
        .output()
        .expect("python3 runs");
    let answer = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(
        answer == "0" || answer == "1",
        "{answer:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}
