//! Logistic-regression models in the envelope: the payload is `privpred-linear`'s artifact
//! bytes, whose loader re-derives the guarantee from the public parameters.

use crate::envelope::{self, Family, Header, SeedPolicy};
use crate::error::{ReleaseError, Result};
use crate::{WriteKeys, check_header, method_name, must_seal};
use privpred_data::preprocess::FittedPreprocessing;
use privpred_linear::artifact::{self, LoadedModel, StoredModel};
use std::path::Path;

fn seed_policy(model: &StoredModel) -> SeedPolicy {
    match model.private().map(|p| p.seed_policy) {
        None => SeedPolicy::NonPrivate,
        Some(privpred_linear::SeedPolicy::OsRandom) => SeedPolicy::OsRandom,
        Some(privpred_linear::SeedPolicy::Seeded { seed }) => SeedPolicy::Seeded { seed },
    }
}

/// The header of a linear model (everything but the payload hash, the seal and the signer).
pub fn linear_header(model: &StoredModel, ledger_id: &str) -> Result<Header> {
    let private = model.private();
    let calibration = match private {
        Some(p) => serde_json::to_value(&p.calibration)
            .map_err(|e| ReleaseError::Random(format!("cannot serialise the calibration: {e}")))?,
        None => serde_json::Value::Null,
    };
    Ok(Header {
        format: envelope::FORMAT.into(),
        version: envelope::FORMAT_VERSION,
        family: Family::Linear,
        method: method_name(private.map(|p| p.method())),
        seed_policy: seed_policy(model),
        ledger_id: ledger_id.to_string(),
        calibration,
        payload_sha256: String::new(),
        sealed: None,
        signer: None,
    })
}

/// Writes a linear model as a signed artifact (sealed when it holds non-private
/// parameters, [`must_seal`]) under `ledger_id` (`None`: a fresh one, a new budget
/// identity); returns the ledger id written.
pub fn save_linear(
    path: &Path,
    model: &StoredModel,
    preprocessing: &FittedPreprocessing,
    extra: serde_json::Value,
    ledger_id: Option<&str>,
    keys: &WriteKeys,
) -> Result<String> {
    let (payload, id) =
        artifact::encode_model_with_id(path, model, preprocessing, extra, ledger_id)?;
    let sealing = if must_seal(model.private().map(|p| p.method())) {
        Some(keys.sealing.as_ref().ok_or_else(|| {
            ReleaseError::refused(
                path,
                "this model holds non-private parameters and must be sealed: a sealing key is needed",
            )
        })?)
    } else {
        None
    };
    let header = linear_header(model, &id)?;
    let bytes = envelope::encode(header, &payload, keys.signing.as_ref(), sealing)?;
    crate::write_atomic(path, &bytes)?;
    Ok(id)
}

/// Loads the payload of a linear artifact and checks it against its header.
pub(crate) fn open_payload(path: &Path, h: &Header, payload: &[u8]) -> Result<LoadedModel> {
    let m = artifact::load_from_bytes(path, payload)?;
    let id = m
        .ledger_id
        .clone()
        .ok_or_else(|| ReleaseError::format(path, "the model records no ledger id"))?;
    check_header(path, h, &linear_header(&m.model, &id)?)?;
    if must_seal(m.private().map(|p| p.method())) && h.sealed.is_none() {
        return Err(ReleaseError::format(
            path,
            "holds non-private parameters in the clear (such a model is always sealed)",
        ));
    }
    Ok(m)
}
