//! Checks shared by the integration tests of every gradient engine.

use privpred_nn::data::{ImageSet, Normalization};
use privpred_nn::resume::Resume;
use privpred_nn::train::{self, SgdConfig};
use privpred_nn::{GradientEngine, ResNet, ResNetConfig};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// Regression test of the whole training path through `engine` (batching, labels,
/// augmentation off, gradient sign and scale, momentum update): a tiny ResNet trained on 320
/// synthetic texture images for 200 steps of batch 32 with the paper's optimiser and
/// initialisation must reach ≥ 90 % held-out accuracy (chance 25 %), and its training loss
/// must fall by ≥ 20 % within the first 30 steps.
pub fn assert_learns_textures(engine: &dyn GradientEngine) {
    let net = ResNet::new(ResNetConfig::tiny(4)).unwrap();
    let norm = Normalization::generic(3);
    let tr = ImageSet::synthetic_textures(320, 1);
    let te = ImageSet::synthetic_textures(160, 2);
    let cfg = SgdConfig {
        epochs: 20.0,
        batch_size: 32,
        lr: 0.05,
        augment: false,
        ..SgdConfig::paper_teacher()
    };
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let mut losses = Vec::new();
    let on = train::TrainInputs {
        engine,
        net: &net,
        data: &tr,
        norm: &norm,
    };
    let p = train::train_nonprivate_on(on, &cfg, None, &mut rng, &mut |pr| {
        losses.push(pr.batch.loss_sum / pr.batch.n as f64)
    })
    .unwrap();
    assert_eq!(losses.len(), 200);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (first, by30) = (mean(&losses[..5]), mean(&losses[25..30]));
    assert!(by30 < 0.8 * first, "loss {first:.3} → {by30:.3} by step 30");
    let pred = train::predict_labels_on(engine, &net, &p, &te, &norm).unwrap();
    let acc = train::accuracy(&pred, &te.labels);
    assert!(acc >= 0.9, "held-out accuracy {acc}");
}

/// Networks of one architecture, each on its own training set (a group's members).
#[allow(dead_code)]
pub struct Group<'a> {
    /// The architecture.
    pub net: &'a ResNet,
    /// The normalisation.
    pub norm: &'a Normalization,
    /// Member k's training set.
    pub shards: &'a [ImageSet],
    /// Every member's schedule.
    pub sgd: &'a SgdConfig,
}

/// `g`'s members trained in lock step through `engine` ([`train::train_group_resumable_on`]):
/// member k from a generator seeded k, checkpointed to `dir/g{k}.ckpt` every `every` steps,
/// stopping after `deadline`.
#[allow(dead_code)]
pub fn train_group(
    engine: &dyn GradientEngine,
    g: &Group<'_>,
    dir: &std::path::Path,
    every: usize,
    deadline: Option<std::time::Instant>,
    observer: &mut dyn FnMut(usize, &train::Progress),
) -> privpred_nn::Result<Vec<Vec<f32>>> {
    let resumes: Vec<Resume> = (0..g.shards.len())
        .map(|k| Resume::new(dir.join(format!("g{k}.ckpt")), every, deadline).unwrap())
        .collect();
    let mut rngs: Vec<ChaCha20Rng> = (0..g.shards.len() as u64)
        .map(ChaCha20Rng::seed_from_u64)
        .collect();
    let members = rngs
        .iter_mut()
        .zip(g.shards)
        .zip(&resumes)
        .map(|((rng, data), resume)| train::GroupMember {
            data,
            cfg: g.sgd,
            rng,
            resume: Some(resume),
        })
        .collect();
    train::train_group_resumable_on(engine, g.net, g.norm, members, observer)
}

/// Member `k` of [`train_group`] trained alone on the CPU engine (generator seeded `k`,
/// checkpoints every `every` steps in `dir/alone{k}.ckpt`).
#[allow(dead_code)]
pub fn train_alone(g: &Group<'_>, k: usize, dir: &std::path::Path, every: usize) -> Vec<f32> {
    let on = train::TrainInputs {
        engine: &privpred_nn::CpuEngine,
        net: g.net,
        data: &g.shards[k],
        norm: g.norm,
    };
    let r = Resume::new(dir.join(format!("alone{k}.ckpt")), every, None).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(k as u64);
    train::train_nonprivate_resumable_on(on, g.sgd, &mut rng, &r, &mut |_| {}).unwrap()
}
