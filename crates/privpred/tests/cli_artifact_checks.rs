//! Model artifacts and ledgers that must be refused as bad input (exit 2), each with the
//! field it names: a preprocessing scale no f32 can hold, zero training rows, a negative PCA
//! variance, a swapped method — in files with the whole-file checksum recomputed, and the
//! same files without a checksum (refused for that); `ledger show`/`backup`
//! on a missing or invalid file; `serve` on a ledger whose spent exceeds its budget; and
//! `GET /v1/model`, which names the ledger's backend but never its path.

mod common;

use common::{capture, code, serve_model, spawn_serve, tamper, toy_dataset, train_into};
use serde_json::Value;
use std::path::Path;

/// Rewrites `path` without its whole-file checksum and ledger id (its weights still match
/// `weights_sha256`).
fn strip_checksum(path: &Path) {
    let (envelope, bytes) = common::open_envelope(path);
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Map<String, Value> =
        serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let meta = header
        .get_mut("__metadata__")
        .unwrap()
        .as_object_mut()
        .unwrap();
    meta.remove("checksum");
    meta.remove("ledger_id");
    let mut h = serde_json::to_vec(&header).unwrap();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(&bytes[8 + n..]);
    std::fs::write(path, common::rewrap(envelope, &out)).unwrap();
}

type MetaEdit = dyn Fn(&mut Value, &mut std::collections::HashMap<String, String>);

/// `evaluate` on `src` edited by `edit`, once with the checksum recomputed (exit 2 naming
/// `needle`) and once without a checksum (exit 2 naming the missing checksum).
fn refused_in_both_formats(src: &Path, ds: &str, what: &str, edit: &MetaEdit, needle: &str) {
    let dir = src.parent().unwrap();
    let bad = dir.join(format!("bad-{}.safetensors", what.replace(' ', "-")));
    tamper(src, &bad, |model, _, meta| edit(model, meta));
    for old_format in [false, true] {
        if old_format {
            strip_checksum(&bad);
        }
        let (c, err) = code(&[
            "evaluate",
            "--model",
            bad.to_str().unwrap(),
            "--dataset",
            ds,
        ]);
        assert_eq!(c, 2, "{what} (old format: {old_format}): {err}");
        let expected = if old_format {
            "`checksum` missing"
        } else {
            needle
        };
        assert!(
            err.contains(expected),
            "{what} (old format: {old_format}): {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// Edits the `preprocessing` metadata entry (JSON) with `f`.
fn prep(meta: &mut std::collections::HashMap<String, String>, f: impl Fn(&mut Value)) {
    let mut p: Value = serde_json::from_str(&meta["preprocessing"]).unwrap();
    f(&mut p);
    meta.insert("preprocessing".into(), p.to_string());
}

/// Replaces every string equal to `from` in `v` by `to`.
fn swap_strings(v: &mut Value, from: &str, to: &str) {
    match v {
        Value::String(s) if s == from => *s = to.to_string(),
        Value::Array(a) => a.iter_mut().for_each(|x| swap_strings(x, from, to)),
        Value::Object(o) => o.values_mut().for_each(|x| swap_strings(x, from, to)),
        _ => {}
    }
}

#[test]
fn out_of_range_artifacts_are_refused_with_or_without_the_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let ds = toy_dataset(dir.path(), 300);
    let (ms, _) = train_into(
        dir.path(),
        "ms",
        "model-sensitivity",
        &ds,
        &["--epsilon", "1", "--lambda", "1e-2"],
    );
    // a payload without its checksum and ledger id, even signed, is refused
    let old = dir.path().join("old.safetensors");
    std::fs::copy(&ms, &old).unwrap();
    strip_checksum(&old);
    let (c, _, e) = capture(&[
        "evaluate",
        "--model",
        old.to_str().unwrap(),
        "--dataset",
        &ds,
    ]);
    assert_eq!(c, 2, "{e}");
    assert!(e.contains("`checksum` missing"), "{e}");

    refused_in_both_formats(
        &ms,
        &ds,
        "scale 1e308",
        &|_, meta| prep(meta, |p| p["recipe"]["scale"] = 1e308.into()),
        "scale",
    );
    refused_in_both_formats(
        &ms,
        &ds,
        "train rows 0",
        &|_, meta| prep(meta, |p| p["train_rows"] = 0.into()),
        "train_rows",
    );
    refused_in_both_formats(
        &ms,
        &ds,
        "swapped method",
        &|model, _| swap_strings(model, "model-sensitivity", "loss-perturbation"),
        "the artifact was edited",
    );
    // a non-private model may keep its PCA basis with its variances: a negative one is refused
    let (np, _) = train_into(
        dir.path(),
        "np",
        "non-private",
        &ds,
        &["--pca", "3", "--lambda", "1e-2"],
    );
    refused_in_both_formats(
        &np,
        &ds,
        "negative pca variance",
        &|_, meta| prep(meta, |p| p["pca"]["explained_variance"][1] = (-0.5).into()),
        "PCA variance = -0.5",
    );
}

/// `ledger show` and `ledger backup` on a missing file, a directory or a file that is not a
/// ledger: exit 2 (a bad file, not an internal failure) with the reason.
#[test]
fn ledger_show_and_backup_refuse_missing_or_invalid_files_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.sqlite");
    std::fs::write(&junk, vec![b'x'; 4096]).unwrap();
    let empty_db = dir.path().join("other.sqlite");
    rusqlite::Connection::open(&empty_db)
        .unwrap()
        .execute_batch("CREATE TABLE t (x INTEGER);")
        .unwrap();
    let out = dir.path().join("backup.sqlite");
    for (file, needle) in [
        (dir.path().join("missing.sqlite"), "does not exist"),
        (dir.path().to_path_buf(), "not a regular file"),
        (junk, "not an SQLite database"),
        (empty_db, "not a privpred ledger"),
    ] {
        let l = format!("sqlite:{}", file.display());
        for args in [
            vec!["ledger", "show", "--ledger", &l],
            vec![
                "ledger",
                "backup",
                "--ledger",
                &l,
                "--out",
                out.to_str().unwrap(),
            ],
        ] {
            let (c, err) = code(&args);
            assert_eq!(c, 2, "{args:?}: {err}");
            assert!(err.contains(needle), "{args:?}: {err}");
            assert!(!out.exists(), "{args:?} wrote a backup");
        }
    }
}

/// A ledger edited so that its spent exceeds its budget is refused by `serve` and `predict`
/// (exit 2); `/v1/model` shows the backend of a good ledger, never its path.
#[test]
fn serve_refuses_an_overspent_ledger_and_never_shows_the_ledger_path() {
    let dir = tempfile::tempdir().unwrap();
    let ds = toy_dataset(dir.path(), 300);
    let (m, _) = train_into(
        dir.path(),
        "ps",
        "prediction-sensitivity",
        &ds,
        &["--epsilon", "1", "--budget", "10", "--lambda", "1e-2"],
    );
    let ledger = format!("{}.ledger.sqlite", m.display());
    {
        let s = serve_model(&m, &["--init-ledger"]);
        let mut c = privpred_serve::client::Client::new(s.addr, None);
        let r = c.get("/v1/model").unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let v: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(v["ledger"], "sqlite", "{v}");
        let dir_text = dir.path().display().to_string();
        assert!(!r.body.contains(&dir_text), "{}", r.body);
        assert!(!r.body.contains("ledger.sqlite"), "{}", r.body);
    }
    // edit the file past its CHECK constraint: spent 11 of 10
    let conn = rusqlite::Connection::open(&ledger).unwrap();
    conn.execute_batch(
        "PRAGMA ignore_check_constraints = ON; UPDATE privpred_budget SET spent = total + 1;",
    )
    .unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(conn);
    let (c, err) = match spawn_serve(&["--model", m.to_str().unwrap(), "--listen", "127.0.0.1:0"]) {
        Ok(_) => panic!("serve started on a ledger whose spent exceeds its budget"),
        Err(e) => e,
    };
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("11 answers spent of a budget of 10"), "{err}");
    let q = dir.path().join("q.csv");
    std::fs::write(&q, "1,2,3,4,5,6,7,8\n").unwrap();
    let (c, err) = code(&[
        "predict",
        "--model",
        m.to_str().unwrap(),
        "--input",
        q.to_str().unwrap(),
    ]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("corrupt ledger"), "{err}");
}
