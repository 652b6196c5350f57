//! Checks shared by the integration tests of every gradient engine.

use privpred_nn::data::{ImageSet, Normalization};
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
