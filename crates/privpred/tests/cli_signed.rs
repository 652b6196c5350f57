//! Signed and sealed model files at the command line: `key new`, `train --signing-key`,
//! `predict --trust/--sealing-key/--allow-unsigned`; every forgery of the model store is
//! refused (exit 2, naming the reason): an edited N under another key, a re-padded header,
//! a duplicate key, an unsigned or version-1 file; a sealed file does not hold the payload in
//! the clear.

mod common;

use common::{capture, ok, toy_dataset, train_into};
use serde_json::Value;
use std::path::Path;

fn q(dir: &Path) -> String {
    let p = dir.join("q.csv");
    std::fs::write(&p, "1,2,3,4,5,6,7,8\n8,7,6,5,4,3,2,1\n").unwrap();
    p.to_str().unwrap().to_string()
}

/// Splits a model file into (header JSON bytes, payload as stored, signature).
fn parts(file: &[u8]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let hlen = u32::from_le_bytes(file[12..16].try_into().unwrap()) as usize;
    let h = file[16..16 + hlen].to_vec();
    let plen = u64::from_le_bytes(file[16 + hlen..24 + hlen].try_into().unwrap()) as usize;
    let p = file[24 + hlen..24 + hlen + plen].to_vec();
    (h, p, file[24 + hlen + plen..].to_vec())
}

fn assemble(h: &[u8], p: &[u8], sig: &[u8]) -> Vec<u8> {
    let mut out = b"PPMODEL\0".to_vec();
    out.extend_from_slice(&2u32.to_le_bytes());
    out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    out.extend_from_slice(h);
    out.extend_from_slice(&(p.len() as u64).to_le_bytes());
    out.extend_from_slice(p);
    out.extend_from_slice(sig);
    out
}

#[test]
fn an_owners_key_set_signs_and_only_its_verify_key_is_trusted() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let keys = dir.join("owner");
    let k = keys.to_str().unwrap();
    let out = ok(&["key", "new", "--out", k]);
    assert!(out.contains("verify.pub"), "{out}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for f in ["signing.key", "sealing.key"] {
            let mode = std::fs::metadata(keys.join(f))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{f}");
        }
    }
    // a key is never overwritten
    let (c, _, err) = capture(&["key", "new", "--out", k]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("exists"), "{err}");
    let ds = toy_dataset(dir, 120);
    let signing = keys.join("signing.key");
    let (model, _) = train_into(
        dir,
        "ps",
        "prediction-sensitivity",
        &ds,
        &[
            "--epsilon",
            "1",
            "--budget",
            "10",
            "--lambda",
            "0.01",
            "--signing-key",
            signing.to_str().unwrap(),
        ],
    );
    let m = model.to_str().unwrap();
    let input = q(dir);
    let verify = keys.join("verify.pub");
    let v = verify.to_str().unwrap();
    // the tests' default key does not trust the owner's file
    let (c, _, err) = capture(&["predict", "--model", m, "--input", &input, "--init-ledger"]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("not trusted"), "{err}");
    // the owner's verify key does (its sealing key is next to it)
    let (c, out, err) = capture(&[
        "predict",
        "--model",
        m,
        "--input",
        &input,
        "--init-ledger",
        "--trust",
        v,
        "--json",
    ]);
    assert_eq!(c, 0, "{err}");
    let j: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["answers"].as_array().unwrap().len(), 2);
    assert!(j.get("covered").is_none(), "{j}");
    // without the sealing key a sealed model cannot be opened
    let other = dir.join("other");
    ok(&["key", "new", "--out", other.to_str().unwrap()]);
    let wrong = other.join("sealing.key");
    let (c, _, err) = capture(&[
        "predict",
        "--model",
        m,
        "--input",
        &input,
        "--trust",
        v,
        "--sealing-key",
        wrong.to_str().unwrap(),
    ]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("sealed with the sealing key"), "{err}");
    // the payload is not in the clear: no safetensors header, no metadata
    let file = std::fs::read(&model).unwrap();
    for needle in [&b"__metadata__"[..], b"weights_sha256", b"preprocessing"] {
        assert!(
            !file.windows(needle.len()).any(|w| w == needle),
            "{}",
            String::from_utf8_lossy(needle)
        );
    }
    // --allow-unsigned opens a file of another key, every answer marked
    let (c, out, err) = capture(&[
        "predict",
        "--model",
        m,
        "--input",
        &input,
        "--allow-unsigned",
        "--sealing-key",
        keys.join("sealing.key").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(c, 0, "{err}");
    let j: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["covered"], false, "{j}");
    assert!(j["not_covered"].as_str().unwrap().contains("untrusted key"));
    for a in j["answers"].as_array().unwrap() {
        assert_eq!(a["covered"], false, "{a}");
    }
    assert!(err.contains("not covered"), "{err}");
    // evaluate of the same file: its JSON and its text are marked not covered too
    let sealing = keys.join("sealing.key");
    let s = sealing.to_str().unwrap();
    let (c, out, err) = capture(&[
        "evaluate",
        "--model",
        m,
        "--dataset",
        &ds,
        "--allow-unsigned",
        "--sealing-key",
        s,
        "--json",
    ]);
    assert_eq!(c, 0, "{err}");
    let j: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["covered"], false, "{j}");
    assert!(
        j["not_covered"].as_str().unwrap().contains("untrusted key"),
        "{j}"
    );
    assert!(err.contains("not covered"), "{err}");
    let (c, out, err) = capture(&[
        "evaluate",
        "--model",
        m,
        "--dataset",
        &ds,
        "--allow-unsigned",
        "--sealing-key",
        s,
    ]);
    assert_eq!(c, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("not covered:") && l.contains("untrusted key")),
        "{out}"
    );
    // trusted: no mark
    let (c, out, err) = capture(&[
        "evaluate",
        "--model",
        m,
        "--dataset",
        &ds,
        "--trust",
        v,
        "--json",
    ]);
    assert_eq!(c, 0, "{err}");
    let j: Value = serde_json::from_str(&out).unwrap();
    assert!(
        j.get("covered").is_none() && j.get("not_covered").is_none(),
        "{j}"
    );
}

/// An attacker with write access to the model store: every forgery is refused, exit 2.
#[test]
fn forgeries_of_the_model_store_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let ds = toy_dataset(dir, 120);
    let (model, _) = train_into(
        dir,
        "ps",
        "prediction-sensitivity",
        &ds,
        &["--epsilon", "1", "--budget", "10", "--lambda", "0.01"],
    );
    let input = q(dir);
    let file = std::fs::read(&model).unwrap();
    let (h, p, sig) = parts(&file);
    let bad = dir.join("bad.safetensors");
    let b = bad.to_str().unwrap();
    let refused = |bytes: &[u8], needle: &str| {
        std::fs::write(&bad, bytes).unwrap();
        for args in [
            vec!["predict", "--model", b, "--input", &input, "--init-ledger"],
            vec!["evaluate", "--model", b, "--dataset", &ds],
        ] {
            let (c, _, err) = capture(&args);
            assert_eq!(c, 2, "{needle}: {args:?}: {err}");
            assert!(err.contains(needle), "{needle}: {err}");
        }
    };
    // the payload (whatever an attacker edited in it: N, ε, the selection record) wrapped
    // again and signed with another key
    let (header, payload) = common::open_envelope(&model);
    let mallory = privpred_release::SigningKey::generate().unwrap();
    let (_, sealing) = common::test_keys();
    let forged = privpred_release::envelope::encode(
        header.clone(),
        &payload,
        Some(&mallory),
        Some(&sealing),
    )
    .unwrap();
    refused(&forged, "not trusted");
    // ... or unsigned
    let unsigned =
        privpred_release::envelope::encode(header, &payload, None, Some(&sealing)).unwrap();
    refused(&unsigned, "unsigned");
    // a re-padded header (the same fields, one space more), the signature kept
    let mut padded = h.clone();
    padded.insert(1, b' ');
    refused(&assemble(&padded, &p, &sig), "canonical");
    // a duplicate key placed first (a forged `ledger_id`), the signature kept
    let text = String::from_utf8(h.clone()).unwrap();
    let dup = text.replacen('{', &format!("{{\"ledger_id\":\"{}\",", "1".repeat(32)), 1);
    refused(&assemble(dup.as_bytes(), &p, &sig), "duplicate key");
    // ε relabelled in the public header: same length, still canonical; the signature sees it
    let relabelled = text.replacen("\"epsilon\":1.0", "\"epsilon\":9.0", 1);
    assert_ne!(relabelled, text);
    refused(&assemble(relabelled.as_bytes(), &p, &sig), "signature");
    // trailing bytes
    let mut trailing = file.clone();
    trailing.extend_from_slice(b"\n");
    refused(&trailing, "after the end");
    // a version-1 file (the bare payload)
    refused(&common::payload(&model), "format version 1");
    // the untouched file still answers
    let m = model.to_str().unwrap();
    let (c, _, err) = capture(&["predict", "--model", m, "--input", &input, "--init-ledger"]);
    assert_eq!(c, 0, "{err}");
}

/// A seeded model's typed seed policy is in the signed header: predict refuses it, and a
/// header relabelled as a release is refused even when the relabelled file is signed.
#[test]
fn a_seeded_model_cannot_be_relabelled_a_release() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let ds = toy_dataset(dir, 120);
    let (model, _) = train_into(
        dir,
        "seeded",
        "prediction-sensitivity",
        &ds,
        &[
            "--epsilon",
            "1",
            "--budget",
            "10",
            "--lambda",
            "0.01",
            "--seed",
            "11",
        ],
    );
    let input = q(dir);
    let m = model.to_str().unwrap();
    let (c, _, err) = capture(&["predict", "--model", m, "--input", &input, "--init-ledger"]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("--seed 11"), "{err}");
    let (mut header, payload) = common::open_envelope(&model);
    assert_eq!(
        header.seed_policy,
        privpred_release::SeedPolicy::Seeded { seed: 11 }
    );
    header.seed_policy = privpred_release::SeedPolicy::OsRandom;
    let bad = dir.join("relabelled.safetensors");
    std::fs::write(&bad, common::rewrap(header, &payload)).unwrap();
    let (c, _, err) = capture(&[
        "predict",
        "--model",
        bad.to_str().unwrap(),
        "--input",
        &input,
        "--init-ledger",
    ]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("does not match the model"), "{err}");
}
