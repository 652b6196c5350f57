//! ResNet models in the envelope: the payload is `privpred-nn`'s artifact bytes (range- and
//! shape-checked by its loader); the guarantee is re-derived from the public parameters
//! here, and the seed policy is the header's typed one, checked against the payload's record.

use crate::envelope::{self, Family, Header, SeedPolicy};
use crate::error::{ReleaseError, Result};
use crate::{WriteKeys, check_header, method_name, must_seal};
use privpred_core::Method;
use privpred_nn::artifact::{ModelKind, NnModel};
use std::path::Path;

/// What training records as `extra.seed` of a deep model trained without a seed.
pub const RELEASE_SEED_NOTE: &str = "OS random (release)";

/// The seed policy a deep model's `extra.seed` records: `{"seed": S}` (an integer) is an
/// experiment seeded with S, [`RELEASE_SEED_NOTE`] a release; anything else is refused.
pub fn nn_seed_policy(m: &NnModel) -> std::result::Result<SeedPolicy, String> {
    if m.header.kind == ModelKind::NonPrivate {
        return Ok(SeedPolicy::NonPrivate);
    }
    let seed = m.extra.get("seed");
    match seed {
        Some(serde_json::Value::String(s)) if s == RELEASE_SEED_NOTE => Ok(SeedPolicy::OsRandom),
        Some(serde_json::Value::Object(o)) if o.len() == 1 => match o.get("seed") {
            Some(v) if v.is_u64() => Ok(SeedPolicy::Seeded {
                seed: v.as_u64().unwrap_or(0),
            }),
            _ => Err(format!(
                "extra.seed: {} is not a seed policy",
                o.get("seed").unwrap_or(&serde_json::Value::Null)
            )),
        },
        Some(v) => Err(format!(
            "extra.seed: {v} is not a seed policy (`{{\"seed\": S}}` for an experiment, \"{RELEASE_SEED_NOTE}\" for a release)"
        )),
        None => Err("extra.seed: missing; a private model must record its seed policy".into()),
    }
}

fn method_of(kind: ModelKind) -> Option<Method> {
    match kind {
        ModelKind::DpSgd => Some(Method::DpSgd),
        ModelKind::Teachers => Some(Method::SubsampleAggregate),
        ModelKind::NonPrivate => None,
    }
}

/// The header of a ResNet model (everything but the payload hash, the seal and the signer).
pub fn resnet_header(path: &Path, m: &NnModel, ledger_id: &str) -> Result<Header> {
    let calibration = match &m.header.calibration {
        Some(c) => serde_json::to_value(c)
            .map_err(|e| ReleaseError::Random(format!("cannot serialise the calibration: {e}")))?,
        None => serde_json::Value::Null,
    };
    Ok(Header {
        format: envelope::FORMAT.into(),
        version: envelope::FORMAT_VERSION,
        family: Family::Resnet,
        method: method_name(method_of(m.header.kind)),
        seed_policy: nn_seed_policy(m).map_err(|e| ReleaseError::format(path, e))?,
        ledger_id: ledger_id.to_string(),
        calibration,
        payload_sha256: String::new(),
        sealed: None,
        signer: None,
    })
}

/// Writes a ResNet model as a signed artifact (a teacher ensemble or a non-private network
/// sealed, [`must_seal`]).
pub fn save_resnet(path: &Path, model: &NnModel, keys: &WriteKeys) -> Result<String> {
    let mut model_with_id;
    let model = match &model.ledger_id {
        Some(_) => model,
        None => {
            model_with_id = model.clone();
            model_with_id.ledger_id =
                Some(privpred_data::artifact::new_ledger_id().map_err(ReleaseError::Random)?);
            &model_with_id
        }
    };
    let id = model.ledger_id.clone().unwrap_or_default();
    let payload = privpred_nn::artifact::encode(path, model)?;
    let sealing = if must_seal(method_of(model.header.kind)) {
        Some(keys.sealing.as_ref().ok_or_else(|| {
            ReleaseError::refused(
                path,
                "this model holds non-private parameters and must be sealed: a sealing key is needed",
            )
        })?)
    } else {
        None
    };
    let header = resnet_header(path, model, &id)?;
    let bytes = envelope::encode(header, &payload, keys.signing.as_ref(), sealing)?;
    crate::write_atomic(path, &bytes)?;
    Ok(id)
}

/// Loads the payload of a ResNet artifact and checks it against its header.
pub(crate) fn open_payload(path: &Path, h: &Header, payload: &[u8]) -> Result<NnModel> {
    let m = privpred_nn::artifact::load_from_bytes(path, payload)?;
    let id = m
        .ledger_id
        .clone()
        .ok_or_else(|| ReleaseError::format(path, "the model records no ledger id"))?;
    check_header(path, h, &resnet_header(path, &m, &id)?)?;
    if must_seal(method_of(m.header.kind)) && h.sealed.is_none() {
        return Err(ReleaseError::format(
            path,
            "holds non-private parameters in the clear (such a model is always sealed)",
        ));
    }
    Ok(m)
}
