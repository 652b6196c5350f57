//! ResNet models in the envelope: the payload is `privpred-nn`'s artifact bytes, whose loader
//! range- and shape-checks them and re-derives the guarantee from the recorded public
//! parameters (`privpred_nn::calib::rederive`, the rule training calibrates with); the seed
//! policy is the payload's typed one, and the header must equal what the payload records.

use crate::envelope::{self, Family, Header, SeedPolicy};
use crate::error::{ReleaseError, Result};
use crate::{WriteKeys, check_header, method_name, must_seal};
use privpred_core::Method;
use privpred_nn::artifact::{ModelKind, NnModel};
use std::path::Path;

/// The envelope's seed policy of a deep model: the typed one its payload records
/// ([`privpred_nn::artifact::ModelHeader::seed_policy`]); a non-private network has none.
pub fn nn_seed_policy(m: &NnModel) -> SeedPolicy {
    match m.header.seed_policy {
        None => SeedPolicy::NonPrivate,
        Some(privpred_core::SeedPolicy::OsRandom) => SeedPolicy::OsRandom,
        Some(privpred_core::SeedPolicy::Seeded { seed }) => SeedPolicy::Seeded { seed },
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
pub fn resnet_header(m: &NnModel, ledger_id: &str) -> Result<Header> {
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
        seed_policy: nn_seed_policy(m),
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
    let header = resnet_header(model, &id)?;
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
    check_header(path, h, &resnet_header(&m, &id)?)?;
    if must_seal(method_of(m.header.kind)) && h.sealed.is_none() {
        return Err(ReleaseError::format(
            path,
            "holds non-private parameters in the clear (such a model is always sealed)",
        ));
    }
    Ok(m)
}
