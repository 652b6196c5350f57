//! Figure 7 (ResNet-20 on CIFAR-10) as study code: its units answer every (method, ε, B)
//! point from models trained once and cached, and record the data source's checksum. Needs
//! the `nn` feature:
//! `cargo test --release -p privpred-study --features nn --test fig7`.
#![cfg(feature = "nn")]

use privpred_nn::ResNetConfig;
use privpred_nn::artifact;
use privpred_nn::data::{ImageSet, Normalization};
use privpred_nn::train::SgdConfig;
use privpred_study::fig7;

fn cifar_path(test: &str) -> Option<std::path::PathBuf> {
    privpred_data::testdata::cifar10_jpeg_or_skip(&format!("fig7::{test}"))
}

fn random_images(n: usize, size: usize, seed: u64) -> ImageSet {
    ImageSet::synthetic_noise(n, size, 4, seed)
}

#[test]
fn fig7_records_the_sha256_of_its_cifar_source() {
    let Some(path) = cifar_path("fig7_records_the_sha256_of_its_cifar_source") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = fig7::Fig7Config::quick(dir.path().to_path_buf());
    cfg.data_path = path;
    cfg.per_class = Some((2, 1));
    let ctx = fig7::prepare(cfg).unwrap();
    // the published SHA-256 of the tarball (docs/data.md)
    assert_eq!(
        ctx.dataset_checksum(),
        "58c58e3af3ec7ed2054f439f35ad3c83dc1ab019f4af6037f60612ea098c8fa1"
    );
}

#[test]
fn fig7_units_answer_every_point_from_cached_models() {
    use privpred_core::Method;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = fig7::Fig7Config::quick(dir.path().to_path_buf());
    cfg.net = ResNetConfig::tiny(4);
    cfg.teachers = 4;
    let small = SgdConfig {
        epochs: 1.0,
        batch_size: 16,
        lr: 0.05,
        ..SgdConfig::paper_teacher()
    };
    cfg.teacher_sgd = SgdConfig {
        batch_size: 4,
        ..small.clone()
    };
    cfg.dpsgd_sgd = small.clone();
    cfg.reference_sgd = small;
    let mut ctx = fig7::prepare_with(
        cfg,
        random_images(64, 8, 30),
        random_images(20, 8, 31),
        Normalization::generic(3),
    )
    .unwrap();
    assert_eq!(ctx.dataset_checksum(), "");
    ctx.set_dataset_checksum("0123abcd".into());
    let mut calls = 0usize;
    let sa = fig7::run_unit(
        &mut ctx,
        Method::SubsampleAggregate,
        1.0,
        1e-5,
        10,
        5,
        &mut |_, _| calls += 1,
    )
    .unwrap();
    assert_eq!(sa.len(), 5);
    assert!(sa.iter().all(|m| m.teachers == Some(4)
        && m.noise == "exponential"
        && m.valid_guarantee
        && (0.0..=1.0).contains(&m.accuracy)));
    assert!(sa[0].labels.iter().any(|l| l.starts_with("quick")));
    assert!(sa.iter().all(|m| m.dataset_checksum == "0123abcd"));
    let trained = calls;
    assert!(trained > 0);
    // a second budget reuses the vote matrix: no more training
    let sa2 = fig7::run_unit(
        &mut ctx,
        Method::SubsampleAggregate,
        1.0,
        1e-5,
        100,
        2,
        &mut |_, _| calls += 1,
    )
    .unwrap();
    assert_eq!(calls, trained);
    assert!(
        sa2[0].noise_param < sa[0].noise_param,
        "more answers need a smaller β"
    );
    // tight with δ = 0 answers by permute-and-flip over the same votes
    let mode = ctx.cfg.mode;
    ctx.cfg.mode = privpred_core::CalibrationMode::Tight;
    let pf = fig7::run_unit(
        &mut ctx,
        Method::SubsampleAggregate,
        1.0,
        0.0,
        10,
        2,
        &mut |_, _| calls += 1,
    )
    .unwrap();
    ctx.cfg.mode = mode;
    assert_eq!(calls, trained);
    assert!(pf.iter().all(|m| m.noise == "permute-and-flip"
        && m.valid_guarantee
        && (m.noise_param - 0.05).abs() < 1e-15
        && (0.0..=1.0).contains(&m.accuracy)));
    let dp = fig7::run_unit(&mut ctx, Method::DpSgd, 1.0, 1e-5, 10, 2, &mut |_, _| {
        calls += 1
    })
    .unwrap();
    assert!(calls > trained);
    assert!(
        dp.iter().all(|m| m.noise_multiplier.is_some()
            && m.calibration.mechanism.epsilon_spent().unwrap() <= 1.0)
    );
    assert!(dp.iter().all(|m| m.dataset_checksum == "0123abcd"));
    // the DP-SGD model and the teachers are saved as artifacts in the cache
    let saved: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "safetensors"))
        .collect();
    assert_eq!(saved.len(), 2);
    for e in saved {
        artifact::load(&e.path()).unwrap();
    }
    // linear methods are refused with a clear error
    assert!(
        fig7::run_unit(
            &mut ctx,
            Method::ModelSensitivity,
            1.0,
            1e-5,
            10,
            1,
            &mut |_, _| {}
        )
        .is_err()
    );
}

#[test]
fn fig7_refuses_bad_schedules_and_teacher_counts_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let base = || {
        let mut cfg = fig7::Fig7Config::quick(dir.path().to_path_buf());
        cfg.net = ResNetConfig::tiny(4);
        cfg.teachers = 4;
        cfg
    };
    let prep = |cfg| {
        fig7::prepare_with(
            cfg,
            random_images(16, 8, 40),
            random_images(4, 8, 41),
            Normalization::generic(3),
        )
        .map(|_| ())
        .expect_err("must be refused")
        .to_string()
    };
    let mut cfg = base();
    cfg.teachers = 17;
    let e = prep(cfg);
    assert!(e.contains("teachers") && e.contains("1..=16"), "{e}");
    let mut cfg = base();
    cfg.dpsgd_sgd.lr = 0.0;
    let e = prep(cfg);
    assert!(e.contains("lr") && e.contains("> 0"), "{e}");
    let mut cfg = base();
    cfg.teacher_sgd.epochs = f64::NAN;
    let e = prep(cfg);
    assert!(e.contains("epochs"), "{e}");
    let mut cfg = base();
    cfg.clip = 0.0;
    let e = prep(cfg);
    assert!(e.contains("clip") && e.contains("> 0"), "{e}");
}

/// The teachers trained together in lock step, stopped at every epoch boundary and continued,
/// end exactly where the teachers trained one after another end: the same vote matrix and the
/// same cached parameters (CPU engine, bit for bit).
#[test]
fn fig7_teachers_together_equal_teachers_one_by_one() {
    let context = |dir: &std::path::Path| {
        let mut cfg = fig7::Fig7Config::quick(dir.to_path_buf());
        cfg.net = ResNetConfig::tiny(4);
        cfg.teachers = 4;
        cfg.teacher_sgd = SgdConfig {
            epochs: 3.0,
            batch_size: 4,
            lr: 0.05,
            ..SgdConfig::paper_teacher()
        };
        fig7::prepare_with(
            cfg,
            random_images(64, 8, 40),
            random_images(20, 8, 41),
            Normalization::generic(3),
        )
        .unwrap()
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut one = context(a.path());
    one.set_teachers_together(Some(false));
    let votes_one = one.vote_matrix(&mut |_, _| {}).unwrap().clone();
    let mut stops = 0;
    let votes_together = loop {
        let mut ctx = context(b.path());
        ctx.set_teachers_together(Some(true));
        ctx.set_deadline(Some(std::time::Instant::now()));
        let mut tags = std::collections::BTreeSet::new();
        match ctx.vote_matrix(&mut |tag, _| {
            tags.insert(tag.to_string());
        }) {
            Ok(v) => break v.clone(),
            Err(privpred_nn::NnError::Stopped(_)) => {
                stops += 1;
                assert_eq!(
                    tags.len(),
                    4,
                    "every teacher steps in each segment: {tags:?}"
                );
            }
            Err(e) => panic!("{e}"),
        }
        assert!(stops < 10, "the teachers never finished");
    };
    // 16 examples a teacher, batch 4: 4 steps an epoch, 3 epochs, a stop at 2 boundaries
    assert_eq!(stops, 2);
    assert_eq!(votes_together, votes_one);
    let params = |d: &std::path::Path| {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "params"))
            .map(|e| (e.file_name(), std::fs::read(e.path()).unwrap()))
            .collect();
        v.sort();
        v
    };
    let (pa, pb) = (params(a.path()), params(b.path()));
    assert_eq!(pa.len(), 4);
    assert_eq!(pa, pb, "cached teacher parameters differ");
}
