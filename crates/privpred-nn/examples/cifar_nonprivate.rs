//! Non-private ResNet-20-GN on (a subset of) the CIFAR-10 JPEG copy with a shortened
//! schedule, for CPU accuracy checks. Prints test accuracy after training.
//!
//! `cargo run --release -p privpred-nn --example cifar_nonprivate -- TRAIN_PER_CLASS TEST_PER_CLASS EPOCHS BATCH LR [ARCHIVE]`

use privpred_nn::data::{self, Normalization};
use privpred_nn::train::{self, SgdConfig};
use privpred_nn::{ResNet, ResNetConfig};
use rand::SeedableRng;
use std::path::PathBuf;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    let tr: usize = a.get(1).map_or(Ok(500), |s| s.parse())?;
    let te: usize = a.get(2).map_or(Ok(100), |s| s.parse())?;
    let epochs: f64 = a.get(3).map_or(Ok(10.0), |s| s.parse())?;
    let batch: usize = a.get(4).map_or(Ok(128), |s| s.parse())?;
    let lr: f64 = a.get(5).map_or(Ok(0.1), |s| s.parse())?;
    let path = a
        .get(6)
        .map_or_else(|| PathBuf::from(data::CIFAR10_JPEG_DEFAULT), PathBuf::from);
    let t0 = Instant::now();
    let (train_set, test_set) = data::load_cifar10_jpeg(&path, Some((tr, te)))?;
    println!(
        "{}: {} train / {} test images, read in {:.1} s",
        train_set.source,
        train_set.len(),
        test_set.len(),
        t0.elapsed().as_secs_f64()
    );
    let net = ResNet::new(ResNetConfig::resnet20(10))?;
    let norm = Normalization::cifar10();
    let cfg = SgdConfig {
        epochs,
        batch_size: batch,
        lr,
        ..SgdConfig::paper_teacher()
    };
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(0);
    let t1 = Instant::now();
    let mut last_epoch = 0usize;
    let (mut loss, mut correct, mut seen) = (0.0, 0usize, 0usize);
    let p = train::train_nonprivate(&net, &train_set, &norm, &cfg, None, &mut rng, &mut |pr| {
        loss += pr.batch.loss_sum;
        correct += pr.batch.correct;
        seen += pr.batch.n;
        if pr.epoch.floor() as usize > last_epoch || pr.step == pr.steps {
            last_epoch = pr.epoch.floor() as usize;
            println!(
                "epoch {:.1}: train loss {:.3}, train acc {:.3}, lr {}, {:.1} examples/s",
                pr.epoch,
                loss / seen as f64,
                correct as f64 / seen as f64,
                pr.lr,
                (pr.step * batch) as f64 / t1.elapsed().as_secs_f64()
            );
            (loss, correct, seen) = (0.0, 0, 0);
        }
    })?;
    let acc = train::accuracy(
        &train::predict_labels(&net, &p, &test_set, &norm),
        &test_set.labels,
    );
    println!(
        "test accuracy {acc:.4} ({} test images), training {:.0} s",
        test_set.len(),
        t1.elapsed().as_secs_f64()
    );
    Ok(())
}
