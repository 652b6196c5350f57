//! ResNet models through the one loader: an honest DP-SGD network and a teacher ensemble
//! round-trip; a payload whose guarantee was edited consistently with its header (N, ε, σ,
//! T), even signed by the trusted key, is refused by the guarantee re-derived from the
//! public parameters; a seeded model relabelled as a release is refused. Tiny synthetic
//! networks: no data set is read.

use super::*;
use privpred_core::{CalibrationMode, DpSgdSchedule, Privacy};
use privpred_nn::artifact::{ModelHeader, ModelKind, NnModel};
use privpred_nn::calib::{self, PublicTraining};
use privpred_nn::{ResNet, ResNetConfig};

fn keys(kd: &KeyDir) -> (WriteKeys, Trust) {
    let w = WriteKeys {
        signing: Some(SigningKey::read(&kd.signing()).unwrap()),
        sealing: Some(SealingKey::read(&kd.sealing()).unwrap()),
    };
    let t = Trust {
        keys: vec![VerifyKey::read(&kd.verify()).unwrap()],
        sealing: Some(SealingKey::read(&kd.sealing()).unwrap()),
        allow_unsigned: false,
    };
    (w, t)
}

fn weights(cfg: ResNetConfig, k: usize) -> Vec<Vec<f32>> {
    let net = ResNet::new(cfg).unwrap();
    (0..k)
        .map(|j| {
            (0..net.num_params())
                .map(|i| ((i * 7919 + 13 * j) % 101) as f32 / 101.0 - 0.5)
                .collect()
        })
        .collect()
}

/// A DP-SGD network (N = 200, b = 20, 2 epochs, ε = 1, δ = 1e-5) trained as `train` does.
fn dpsgd(policy: privpred_core::SeedPolicy) -> NnModel {
    let cfg = ResNetConfig::tiny(4);
    let training = PublicTraining {
        n: 200,
        dp_sgd: Some(DpSgdSchedule {
            batch_size: 20,
            epochs: 2.0,
        }),
        teachers: None,
    };
    let req = calib::GuaranteeRequest {
        mode: CalibrationMode::Corrected,
        privacy: Privacy::new(1.0, 1e-5).unwrap(),
        budget: 1,
        neighbours: privpred_core::Neighbours::ReplaceOne,
        classes: 4,
    };
    let cal = calib::guarantee(Method::DpSgd, &req, &training).unwrap();
    model(ModelKind::DpSgd, cal, training, policy, weights(cfg, 1))
}

/// A 3-teacher ensemble (N = 90, ε = 1, B = 10).
fn teachers() -> NnModel {
    let cfg = ResNetConfig::tiny(4);
    let training = PublicTraining {
        n: 90,
        dp_sgd: None,
        teachers: Some(3),
    };
    let req = calib::GuaranteeRequest {
        mode: CalibrationMode::Corrected,
        privacy: Privacy::new(1.0, 0.0).unwrap(),
        budget: 10,
        neighbours: privpred_core::Neighbours::ReplaceOne,
        classes: 4,
    };
    let cal = calib::guarantee(Method::SubsampleAggregate, &req, &training).unwrap();
    let policy = privpred_core::SeedPolicy::OsRandom;
    model(ModelKind::Teachers, cal, training, policy, weights(cfg, 3))
}

fn model(
    kind: ModelKind,
    cal: privpred_core::Calibration,
    training: PublicTraining,
    policy: privpred_core::SeedPolicy,
    members: Vec<Vec<f32>>,
) -> NnModel {
    NnModel::new(
        ModelHeader {
            kind,
            config: ResNetConfig::tiny(4),
            normalization: privpred_nn::data::Normalization::cifar10(),
            calibration: Some(cal),
            training: Some(training),
            seed_policy: Some(policy),
            members: members.len(),
            class_names: None,
            data_source: "synthetic".into(),
        },
        members,
        serde_json::Value::Null,
    )
    .unwrap()
}

/// The file of `m` as privpred writes it, the header built from the payload, signed with
/// `w`'s key: what an edit consistent between the header and the payload looks like.
fn file_of(path: &Path, m: &NnModel, w: &WriteKeys) -> Vec<u8> {
    let payload = privpred_nn::artifact::encode(path, m).unwrap();
    let header = resnet_header(m, m.ledger_id.as_deref().unwrap()).unwrap();
    let sealing = must_seal(Some(m.header.calibration.as_ref().unwrap().method()))
        .then(|| w.sealing.as_ref().unwrap());
    envelope::encode(header, &payload, w.signing.as_ref(), sealing).unwrap()
}

fn resnet(r: Released) -> NnModel {
    match r.model {
        Model::Resnet(m) => *m,
        Model::Linear(_) => panic!("not a ResNet"),
    }
}

#[test]
fn honest_resnet_artifacts_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let kd = KeyDir::create(&dir.path().join("k")).unwrap();
    let (w, t) = keys(&kd);
    for m in [dpsgd(privpred_core::SeedPolicy::OsRandom), teachers()] {
        let path = dir.path().join("m.model");
        let id = save_resnet(&path, &m, &w).unwrap();
        let r = open_file(&path, &t).unwrap();
        assert!(matches!(r.coverage, Coverage::Signed(_)));
        assert_eq!(r.header.seed_policy, SeedPolicy::OsRandom);
        assert_eq!(r.header.sealed.is_some(), m.spends_budget());
        assert_eq!(r.for_release(&path).unwrap(), Marks::default());
        assert_eq!(r.header.ledger_id, id);
        assert_eq!(resnet(r), m);
    }
}

#[test]
fn consistent_edits_of_a_resnet_guarantee_are_refused_even_signed() {
    let dir = tempfile::tempdir().unwrap();
    let kd = KeyDir::create(&dir.path().join("k")).unwrap();
    let (w, t) = keys(&kd);
    let path = dir.path().join("m.model");
    type Edit = Box<dyn Fn(&mut ModelHeader)>;
    let cal = |h: &mut ModelHeader| -> serde_json::Value {
        serde_json::to_value(h.calibration.as_ref().unwrap()).unwrap()
    };
    let put = |h: &mut ModelHeader, v: serde_json::Value| {
        h.calibration = Some(serde_json::from_value(v).unwrap());
    };
    let d = dpsgd(privpred_core::SeedPolicy::OsRandom);
    let s = teachers();
    let cases: Vec<(&str, &NnModel, Edit, &str)> = vec![
        (
            "N 200 → 20000 (the record's N as well)",
            &d,
            Box::new(move |h| {
                h.training.as_mut().unwrap().n = 20_000;
                let mut v = cal(h);
                v["assumptions"]["n"] = 20_000.into();
                put(h, v);
            }),
            "`noise.sigma`",
        ),
        (
            "ε 1 → 0.1 with the trained σ",
            &d,
            Box::new(move |h| {
                let mut v = cal(h);
                v["privacy"]["epsilon"] = 0.1.into();
                put(h, v);
            }),
            "`noise.sigma`",
        ),
        (
            "σ / 10 (noise multiplier as well)",
            &d,
            Box::new(move |h| {
                let mut v = cal(h);
                let sigma = v["noise"]["sigma"].as_f64().unwrap() / 10.0;
                v["noise"]["sigma"] = sigma.into();
                v["noise_multiplier"] = sigma.into();
                put(h, v);
            }),
            "`noise.sigma`",
        ),
        (
            "teachers' ε 1 → 0.1 with the trained β",
            &s,
            Box::new(move |h| {
                let mut v = cal(h);
                v["privacy"]["epsilon"] = 0.1.into();
                put(h, v);
            }),
            "`noise.beta`",
        ),
        (
            "T 3 → 30",
            &s,
            Box::new(|h| h.training.as_mut().unwrap().teachers = Some(30)),
            "training.teachers",
        ),
    ];
    for (what, m, edit, needle) in &cases {
        let mut e = (*m).clone();
        edit(&mut e.header);
        let bytes = file_of(&path, &e, &w);
        let err = open(&path, &bytes, &t).expect_err(what).to_string();
        assert!(err.contains(needle), "{what}: {err}");
        assert!(
            err.contains("gives") || needle.starts_with("training"),
            "{what}: {err}"
        );
    }
    // control: the same route without an edit opens
    for m in [&d, &s] {
        assert!(open(&path, &file_of(&path, m, &w), &t).is_ok());
    }
}

#[test]
fn a_seeded_resnet_relabelled_as_a_release_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let kd = KeyDir::create(&dir.path().join("k")).unwrap();
    let (w, t) = keys(&kd);
    let path = dir.path().join("m.model");
    let seeded = dpsgd(privpred_core::SeedPolicy::Seeded { seed: 7 });
    save_resnet(&path, &seeded, &w).unwrap();
    let r = open_file(&path, &t).unwrap();
    assert_eq!(r.header.seed_policy, SeedPolicy::Seeded { seed: 7 });
    let e = r.for_release(&path).unwrap_err().to_string();
    assert!(e.contains("--seed 7"), "{e}");
    // the envelope's header relabelled alone: it differs from the payload's record
    let payload = privpred_nn::artifact::encode(&path, &seeded).unwrap();
    let mut h = resnet_header(&seeded, seeded.ledger_id.as_deref().unwrap()).unwrap();
    h.seed_policy = SeedPolicy::OsRandom;
    let b = envelope::encode(h, &payload, w.signing.as_ref(), None).unwrap();
    let e = open(&path, &b, &t).unwrap_err().to_string();
    assert!(e.contains("does not match"), "{e}");
    // payload and header relabelled together: only a key other than the owner's can sign
    // it, and that file is refused as not trusted
    let mut relabelled = seeded.clone();
    relabelled.header.seed_policy = Some(privpred_core::SeedPolicy::OsRandom);
    let mallory = WriteKeys {
        signing: Some(SigningKey::generate().unwrap()),
        sealing: None,
    };
    let e = open(&path, &file_of(&path, &relabelled, &mallory), &t)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not trusted"), "{e}");
    // a seed policy missing from the payload is refused by name
    let mut none = seeded.clone();
    none.header.seed_policy = None;
    let payload = privpred_nn::artifact::encode(&path, &none).unwrap();
    let h = resnet_header(&seeded, seeded.ledger_id.as_deref().unwrap()).unwrap();
    let b = envelope::encode(h, &payload, w.signing.as_ref(), None).unwrap();
    let e = open(&path, &b, &t).unwrap_err().to_string();
    assert!(e.contains("seed_policy"), "{e}");
}
