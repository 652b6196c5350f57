//! The envelope's refusals: every edit, re-padding, duplicate key, foreign signature,
//! missing seal key and version-1 file is refused; a sealed file does not hold θ.

use super::*;
use privpred_core::{Budget, CalibrationMode, Privacy};
use privpred_data::{Dataset, Preprocessing, Provenance};
use privpred_linear::artifact::StoredModel;
use std::path::PathBuf;

fn toy(n: usize, d: usize, c: usize) -> Dataset {
    let mut f = Vec::with_capacity(n * d);
    let mut l = Vec::with_capacity(n);
    for i in 0..n {
        let y = i % c;
        for j in 0..d {
            f.push(((i * 13 + j * 7) % 17) as f32 / 17.0 + if j % c == y { 2.0 } else { 0.0 });
        }
        l.push(y as u32);
    }
    Dataset::new(d, c, f, l, Provenance::default()).unwrap()
}

struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    keys: KeyDir,
    model: StoredModel,
}

fn keys_of(kd: &KeyDir) -> (WriteKeys, Trust) {
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

fn fixture(method: Method, policy: privpred_linear::SeedPolicy) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let keys = KeyDir::create(&dir.path().join("keys")).unwrap();
    let raw = toy(60, 4, 3);
    let fitted = Preprocessing {
        scale: 1.0,
        ..Preprocessing::default()
    }
    .fit(&raw, 0)
    .unwrap();
    let ds = fitted.apply_train(&raw).unwrap();
    let cfg = privpred_core::ParamGuard::check(
        privpred_linear::TrainParams::new(
            method,
            CalibrationMode::Corrected,
            Privacy::new(1.0, 0.0).unwrap(),
            Budget::finite(10).unwrap(),
        )
        .teachers(3)
        .lambda(1e-2)
        .seed_policy(policy),
    )
    .unwrap();
    let mut rng = <rand_chacha::ChaCha20Rng as rand::SeedableRng>::seed_from_u64(1);
    let p = privpred_linear::train_private(&cfg, &ds, &mut rng).unwrap();
    let model = StoredModel::Private(Box::new(p));
    let path = dir.path().join("m.model");
    let extra = match policy {
        privpred_linear::SeedPolicy::Seeded { seed } => serde_json::json!({ "seed": seed }),
        privpred_linear::SeedPolicy::OsRandom => serde_json::Value::Null,
    };
    let (w, _) = keys_of(&keys);
    save_linear(&path, &model, &fitted, extra, None, &w).unwrap();
    Fixture {
        _dir: dir,
        path,
        keys,
        model,
    }
}

fn release() -> Fixture {
    fixture(
        Method::PredictionSensitivity,
        privpred_linear::SeedPolicy::OsRandom,
    )
}

fn reason(r: Result<Released>) -> String {
    r.expect_err("must be refused").to_string()
}

#[test]
fn a_signed_sealed_model_opens_with_its_keys() {
    let f = release();
    let (_, t) = keys_of(&f.keys);
    let r = open_file(&f.path, &t).unwrap();
    assert!(matches!(r.coverage, Coverage::Signed(_)));
    assert!(r.header.sealed.is_some());
    assert_eq!(r.for_release(&f.path).unwrap(), Marks::default());
    let m = r.model.into_linear().unwrap();
    assert_eq!(m.model, f.model);
    assert_eq!(Some(r.header.ledger_id), m.ledger_id);
}

#[test]
fn theta_of_a_sealed_model_is_not_in_the_file() {
    let f = release();
    let bytes = std::fs::read(&f.path).unwrap();
    let p = f.model.private().unwrap();
    let privpred_linear::methods::predictor::PredictorKind::NoisyLogits { model } = &p.kind else {
        panic!("not prediction sensitivity")
    };
    let theta: Vec<u8> = model.theta.iter().flat_map(|x| x.to_le_bytes()).collect();
    assert!(!theta.is_empty());
    // not the weights, nor any 8-byte window of them
    for w in theta.chunks(8).filter(|w| w.iter().any(|&b| b != 0)) {
        assert!(!bytes.windows(8).any(|x| x == w), "a weight is readable");
    }
    // without the sealing key the payload is refused
    let (_, mut t) = keys_of(&f.keys);
    t.sealing = None;
    assert!(reason(open_file(&f.path, &t)).contains("sealing key"));
    // with another sealing key as well
    t.sealing = Some(SealingKey::generate().unwrap());
    assert!(reason(open_file(&f.path, &t)).contains("sealed with the sealing key"));
}

#[test]
fn every_edited_byte_is_refused() {
    let f = release();
    let (_, t) = keys_of(&f.keys);
    let bytes = std::fs::read(&f.path).unwrap();
    let step = (bytes.len() / 97).max(1);
    for i in (0..bytes.len()).step_by(step).chain([bytes.len() - 1]) {
        let mut b = bytes.clone();
        b[i] ^= 0x01;
        assert!(
            open(&f.path, &b, &t).is_err(),
            "byte {i} edited and accepted"
        );
    }
}

fn split(bytes: &[u8]) -> (Header, Vec<u8>) {
    let hlen = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let h: Header = serde_json::from_slice(&bytes[16..16 + hlen]).unwrap();
    let plen = u64::from_le_bytes(bytes[16 + hlen..24 + hlen].try_into().unwrap()) as usize;
    (h, bytes[24 + hlen..24 + hlen + plen].to_vec())
}

/// Builds an envelope by hand around `header_json` (payload as stored), unsigned.
fn raw_envelope(header_json: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(envelope::MAGIC);
    out.extend_from_slice(&2u32.to_le_bytes());
    out.extend_from_slice(&(header_json.len() as u32).to_le_bytes());
    out.extend_from_slice(header_json);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

fn unsigned_trust(kd: &KeyDir) -> Trust {
    let (_, mut t) = keys_of(kd);
    t.allow_unsigned = true;
    t
}

#[test]
fn a_re_padded_header_is_refused_even_unsigned() {
    let f = release();
    let bytes = std::fs::read(&f.path).unwrap();
    let (mut h, payload) = split(&bytes);
    h.signer = None;
    let json = serde_json::to_vec(&h).unwrap();
    let t = unsigned_trust(&f.keys);
    // the canonical header (re-built unsigned) parses; the same with padding does not
    let canonical = raw_envelope(&json, &payload);
    assert!(envelope::parse(&f.path, &canonical).is_ok());
    let mut padded = json.clone();
    padded.insert(1, b' ');
    let e = reason(open(&f.path, &raw_envelope(&padded, &payload), &t));
    assert!(e.contains("canonical"), "{e}");
    let pretty = serde_json::to_vec_pretty(&h).unwrap();
    let e = reason(open(&f.path, &raw_envelope(&pretty, &payload), &t));
    assert!(e.contains("canonical"), "{e}");
    // padding a signed file breaks its signature
    let (hs, _) = split(&bytes);
    let mut padded = serde_json::to_vec(&hs).unwrap();
    padded.push(b' ');
    let mut signed = raw_envelope(&padded, &payload);
    signed.extend_from_slice(&bytes[bytes.len() - 64..]);
    let (_, t) = keys_of(&f.keys);
    assert!(open(&f.path, &signed, &t).is_err());
}

#[test]
fn duplicate_keys_unknown_fields_and_trailing_bytes_are_refused() {
    let f = release();
    let bytes = std::fs::read(&f.path).unwrap();
    let (mut h, payload) = split(&bytes);
    h.signer = None;
    let t = unsigned_trust(&f.keys);
    let json = String::from_utf8(serde_json::to_vec(&h).unwrap()).unwrap();
    // a forged `method` placed first, the real one after it
    let dup = json.replacen('{', "{\"method\":\"dp-sgd\",", 1);
    let e = reason(open(&f.path, &raw_envelope(dup.as_bytes(), &payload), &t));
    assert!(e.contains("duplicate"), "{e}");
    // a duplicate inside the calibration
    let first = h
        .calibration
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let dup = json.replacen(
        "\"calibration\":{",
        &format!("\"calibration\":{{\"{first}\":null,"),
        1,
    );
    let e = reason(open(&f.path, &raw_envelope(dup.as_bytes(), &payload), &t));
    assert!(e.contains("duplicate"), "{e}");
    let unknown = json.replacen('{', "{\"note\":\"x\",", 1);
    let e = reason(open(
        &f.path,
        &raw_envelope(unknown.as_bytes(), &payload),
        &t,
    ));
    assert!(e.contains("unknown field"), "{e}");
    let mut trailing = bytes.clone();
    trailing.push(0);
    let (_, t) = keys_of(&f.keys);
    let e = reason(open(&f.path, &trailing, &t));
    assert!(e.contains("after the end"), "{e}");
}

#[test]
fn unsigned_and_foreign_signatures_are_refused_unless_opted_in() {
    let f = release();
    let bytes = std::fs::read(&f.path).unwrap();
    // an attacker re-signs the file with their own key
    let (mut h, _) = split(&bytes);
    let m = open_file(&f.path, &keys_of(&f.keys).1)
        .unwrap()
        .model
        .into_linear()
        .unwrap();
    let (payload, _) = privpred_linear::artifact::encode_model_with_id(
        &f.path,
        &m.model,
        &m.preprocessing,
        m.extra.clone(),
        m.ledger_id.as_deref(),
    )
    .unwrap();
    h.sealed = None;
    let sealing = SealingKey::read(&f.keys.sealing()).unwrap();
    let mallory = SigningKey::generate().unwrap();
    let forged = envelope::encode(h.clone(), &payload, Some(&mallory), Some(&sealing)).unwrap();
    let (_, t) = keys_of(&f.keys);
    let e = reason(open(&f.path, &forged, &t));
    assert!(e.contains("not trusted"), "{e}");
    let unsigned = envelope::encode(h, &payload, None, Some(&sealing)).unwrap();
    let e = reason(open(&f.path, &unsigned, &t));
    assert!(e.contains("unsigned"), "{e}");
    // opted in: opened, and every answer is marked
    let t = unsigned_trust(&f.keys);
    let r = open(&f.path, &unsigned, &t).unwrap();
    assert_eq!(
        r.for_release(&f.path).unwrap().not_covered.as_deref(),
        Some("unsigned")
    );
    let r = open(&f.path, &forged, &t).unwrap();
    assert!(
        r.for_release(&f.path)
            .unwrap()
            .not_covered
            .unwrap()
            .contains("untrusted key")
    );
}

#[test]
fn a_relabelled_header_is_refused() {
    let f = release();
    let t = unsigned_trust(&f.keys);
    let m = open_file(&f.path, &t).unwrap().model.into_linear().unwrap();
    let (payload, id) = privpred_linear::artifact::encode_model_with_id(
        &f.path,
        &m.model,
        &m.preprocessing,
        m.extra.clone(),
        m.ledger_id.as_deref(),
    )
    .unwrap();
    let sealing = SealingKey::read(&f.keys.sealing()).unwrap();
    let good = linear_header(&m.model, &id).unwrap();
    type Edit = Box<dyn Fn(&mut Header)>;
    let edits: Vec<Edit> = vec![
        Box::new(|h| h.seed_policy = SeedPolicy::Seeded { seed: 3 }),
        Box::new(|h| h.method = "dp-sgd".into()),
        Box::new(|h| h.ledger_id = "0".repeat(32)),
        Box::new(|h| h.calibration["guarantee"]["privacy"]["epsilon"] = 0.1.into()),
        Box::new(|h| h.family = Family::Resnet),
    ];
    for (i, edit) in edits.iter().enumerate() {
        let mut h = good.clone();
        edit(&mut h);
        let b = envelope::encode(h, &payload, None, Some(&sealing)).unwrap();
        assert!(open(&f.path, &b, &t).is_err(), "edit {i} accepted");
    }
    // a model that must be sealed, stored in the clear
    let b = envelope::encode(good, &payload, None, None).unwrap();
    let e = reason(open(&f.path, &b, &t));
    assert!(e.contains("in the clear"), "{e}");
}

#[test]
fn a_seeded_model_is_refused_for_answering() {
    let f = fixture(
        Method::PredictionSensitivity,
        privpred_linear::SeedPolicy::Seeded { seed: 11 },
    );
    let (_, t) = keys_of(&f.keys);
    let r = open_file(&f.path, &t).unwrap();
    assert_eq!(r.header.seed_policy, SeedPolicy::Seeded { seed: 11 });
    let e = r.for_release(&f.path).unwrap_err().to_string();
    assert!(e.contains("--seed 11"), "{e}");
}

#[test]
fn a_version_1_file_is_refused_by_name() {
    let f = release();
    let t = unsigned_trust(&f.keys);
    let m = open_file(&f.path, &t).unwrap().model.into_linear().unwrap();
    let (payload, _) = privpred_linear::artifact::encode_model_with_id(
        &f.path,
        &m.model,
        &m.preprocessing,
        m.extra.clone(),
        None,
    )
    .unwrap();
    let e = reason(open(&f.path, &payload, &t));
    assert!(e.contains("format version 1"), "{e}");
}

#[test]
fn private_training_models_are_signed_not_sealed() {
    let f = fixture(
        Method::ModelSensitivity,
        privpred_linear::SeedPolicy::OsRandom,
    );
    let (_, t) = keys_of(&f.keys);
    let r = open_file(&f.path, &t).unwrap();
    assert!(r.header.sealed.is_none());
    assert!(matches!(r.coverage, Coverage::Signed(_)));
    // and they need no sealing key to open
    let mut t = t;
    t.sealing = None;
    assert!(open_file(&f.path, &t).is_ok());
}

#[test]
fn key_files_are_strict_and_secret() {
    let dir = tempfile::tempdir().unwrap();
    let kd = KeyDir::create(&dir.path().join("k")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for p in [kd.signing(), kd.sealing()] {
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", p.display());
        }
    }
    // never overwritten
    assert!(KeyDir::create(&kd.0).is_err());
    // a verify key is not a signing key
    assert!(SigningKey::read(&kd.verify()).is_err());
    assert!(SealingKey::read(&kd.signing()).is_err());
    let s = SigningKey::read(&kd.signing()).unwrap();
    assert_eq!(s.verify_key(), VerifyKey::read(&kd.verify()).unwrap());
    // created once, whoever asks first
    let (a, created) = KeyDir::open_or_create(&dir.path().join("d")).unwrap();
    assert!(created);
    let (b, again) = KeyDir::open_or_create(&dir.path().join("d")).unwrap();
    assert!(!again);
    assert_eq!(a, b);
}
