//! Family 8 of the sweep: stores and artifact fields that must be refused as bad input (exit
//! 2): `ledger show|backup` and `odometer show` on a missing file, a directory or a file that
//! is not a store; `train --odometer` on a missing odometer; and artifacts edited in range of
//! their format but out of range of their meaning — a preprocessing scale no f32 holds, zero
//! training rows, a negative PCA variance, a swapped method — each with its checksum
//! recomputed and in the old format without a checksum (which goes through the same checks).

use super::{Expect, Sweep, Tally, run_case, s};
use std::collections::HashMap;

/// A model file (`bytes`) whose payload has `edit` applied to its metadata, the payload's
/// checksum recomputed (`resum`) or removed together with its ledger id, and the file signed
/// again (sealed again when it was) with the sweep's own key set, so that the edit reaches the
/// payload's checks rather than stopping at the signature.
fn edited(bytes: &[u8], edit: &dyn Fn(&mut HashMap<String, String>), resum: bool) -> Vec<u8> {
    let path = std::path::Path::new("sweep-model");
    let parsed = privpred_release::envelope::parse(path, bytes).expect("a base model");
    let kd = privpred_release::KeyDir(
        super::CONFIG_HOME
            .get()
            .expect("the sweep's config directory")
            .join("privpred")
            .join("keys"),
    );
    let signing = privpred_release::SigningKey::read(&kd.signing()).expect("the sweep's key");
    let sealing = privpred_release::SealingKey::read(&kd.sealing()).expect("the sweep's key");
    let payload =
        privpred_release::envelope::unseal(path, &parsed, Some(&sealing)).expect("a base model");
    let header = parsed.header.clone();
    let sealed = header.sealed.is_some();
    let edited = edited_payload(&payload, edit, resum);
    privpred_release::envelope::encode(header, &edited, Some(&signing), sealed.then_some(&sealing))
        .expect("encode")
}

/// `bytes` (a safetensors payload) with `edit` applied to its metadata, then its checksum
/// recomputed (`resum`) or removed together with the ledger id.
fn edited_payload(
    bytes: &[u8],
    edit: &dyn Fn(&mut HashMap<String, String>),
    resum: bool,
) -> Vec<u8> {
    use safetensors::SafeTensors;
    let st = SafeTensors::deserialize(bytes).expect("a base model");
    let (_, md) = SafeTensors::read_metadata(bytes).expect("a base model");
    let mut meta = md.metadata().clone().unwrap_or_default();
    edit(&mut meta);
    meta.remove(privpred_data::artifact::CHECKSUM_KEY);
    let names: Vec<String> = st.names().into_iter().map(String::from).collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = names
        .iter()
        .map(|n| (n.clone(), st.tensor(n).expect("listed")))
        .collect();
    if resum {
        let dtypes: Vec<String> = views
            .iter()
            .map(|(_, v)| format!("{:?}", v.dtype()))
            .collect();
        let refs: Vec<privpred_data::artifact::TensorRef<'_>> = views
            .iter()
            .zip(&dtypes)
            .map(|((n, v), d)| (n.as_str(), d.as_str(), v.shape(), v.data()))
            .collect();
        let sum = privpred_data::artifact::checksum(&meta, &refs);
        meta.insert(privpred_data::artifact::CHECKSUM_KEY.into(), sum);
    } else {
        meta.remove(privpred_data::artifact::LEDGER_ID_KEY);
    }
    safetensors::serialize(views, Some(meta)).expect("serialise")
}

/// Edits the JSON metadata entry `key` with `f`.
fn json_entry(meta: &mut HashMap<String, String>, key: &str, f: &dyn Fn(&mut serde_json::Value)) {
    if let Some(v) = meta.get(key)
        && let Ok(mut j) = serde_json::from_str::<serde_json::Value>(v)
    {
        f(&mut j);
        meta.insert(key.into(), j.to_string());
    }
}

type Edit = Box<dyn Fn(&mut HashMap<String, String>)>;

impl Sweep {
    /// Family 8 (see the module documentation).
    pub(super) fn third_round(&mut self) -> (&'static str, Tally) {
        let mut t = Tally::default();
        let d = self.dir.join("round3");
        std::fs::create_dir_all(&d).unwrap();
        let junk = d.join("junk.sqlite");
        std::fs::write(&junk, &self.csv).unwrap();
        let backup = s(d.join("backup.sqlite"));
        let mut cases: Vec<Vec<String>> = Vec::new();
        for p in [s(d.join("missing.sqlite")), s(&d), s(&junk)] {
            let l = format!("sqlite:{p}");
            cases.push(vec![
                "ledger".into(),
                "show".into(),
                "--ledger".into(),
                l.clone(),
            ]);
            cases.push(
                ["ledger", "backup", "--ledger", &l, "--out", &backup]
                    .map(String::from)
                    .to_vec(),
            );
            cases.push(
                ["odometer", "show", "--odometer", &p]
                    .map(String::from)
                    .to_vec(),
            );
        }
        cases.push(
            [
                "train",
                "model-sensitivity",
                "--dataset",
                &self.ds,
                "--epsilon",
                "1",
                "--odometer",
                &s(d.join("no-odometer.sqlite")),
                "--out",
                &s(d.join("o.safetensors")),
            ]
            .map(String::from)
            .to_vec(),
        );
        // models[2]: model sensitivity; models[3]: non-private with a PCA basis
        let edits: Vec<(usize, Edit)> = vec![
            (
                2,
                Box::new(|m| {
                    json_entry(m, "preprocessing", &|p| p["recipe"]["scale"] = 1e308.into())
                }),
            ),
            (
                3,
                Box::new(|m| {
                    json_entry(m, "preprocessing", &|p| {
                        p["recipe"]["scale"] = 1e-300.into()
                    })
                }),
            ),
            (
                2,
                Box::new(|m| json_entry(m, "preprocessing", &|p| p["train_rows"] = 0.into())),
            ),
            (
                3,
                Box::new(|m| {
                    json_entry(m, "preprocessing", &|p| {
                        p["pca"]["explained_variance"][0] = (-1.0).into()
                    })
                }),
            ),
            (
                2,
                Box::new(|m| {
                    if let Some(v) = m.get_mut("model") {
                        *v = v.replace("\"model-sensitivity\"", "\"loss-perturbation\"");
                    }
                }),
            ),
        ];
        for (k, (base, edit)) in edits.iter().enumerate() {
            for resum in [true, false] {
                let p = d.join(format!("edit{k}-{resum}.safetensors"));
                std::fs::write(&p, edited(&self.models[*base], edit.as_ref(), resum)).unwrap();
                cases.push(
                    ["evaluate", "--model", &s(&p), "--dataset", &self.ds]
                        .map(String::from)
                        .to_vec(),
                );
            }
        }
        for a in &cases {
            run_case(&self.bin, a, self.timeout, Expect::Usage, &mut t);
        }
        (
            "stores and artifact fields (ledger/odometer stores, out-of-range artifact fields, old format)",
            t,
        )
    }
}
