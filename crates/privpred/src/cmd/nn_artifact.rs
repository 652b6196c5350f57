//! Recognising `privpred-nn` artifacts (ResNet models: a DP-SGD network, a teacher ensemble
//! or a non-private network) so that `evaluate`, `predict` and `serve` route them to the
//! deep-model code when the binary is built with `--features nn`, and say how to get it when
//! it is not. Detection reads only the safetensors header (no deep-model code needed).

use crate::exit::usage;
use std::path::Path;

/// The `format` value in the safetensors metadata of a deep-model artifact.
pub const NN_FORMAT: &str = "privpred-nn";

/// Whether `path` is a safetensors file whose metadata says `format = privpred-nn`.
/// Unreadable or foreign files are not (their own loader reports what is wrong).
pub fn is_nn_artifact(path: &Path) -> bool {
    privpred_data::artifact::read_header_metadata(path)
        .is_some_and(|m| m.get("format").is_some_and(|f| f == NN_FORMAT))
}

/// The exit-2 error of a build without the `nn` feature given a deep-model artifact.
#[cfg_attr(feature = "nn", allow(dead_code))]
pub fn needs_nn_feature(path: &Path) -> anyhow::Error {
    usage(format!(
        "{} is a privpred-nn (ResNet) model; this privpred was built without deep-model support — rebuild with `cargo build --release -p privpred --features nn`",
        path.display()
    ))
}

/// Maps a deep-model error to the CLI's exit codes: bad arguments, shapes, files and data
/// are the user's (exit 2); a diverged training run or an engine failure (e.g. libtorch out of
/// device memory) is not (exit 1).
#[cfg(feature = "nn")]
pub fn nn_err(e: privpred_nn::NnError) -> anyhow::Error {
    use privpred_nn::NnError;
    match e {
        NnError::Diverged(_) | NnError::Engine(_) | NnError::Stopped(_) => anyhow::Error::new(e),
        _ => usage(e),
    }
}

/// Loads a deep-model artifact (exit 2 with the file named when it is not a valid one).
#[cfg(feature = "nn")]
pub fn load(path: &Path) -> anyhow::Result<privpred_nn::artifact::NnModel> {
    privpred_nn::artifact::load(path).map_err(|e| usage(format!("--model: {e}")))
}

/// What `train` records as `extra.seed` of a deep model trained without `--seed`.
#[cfg_attr(not(feature = "nn"), allow(dead_code))]
pub const RELEASE_SEED_NOTE: &str = "OS random (release)";

/// The seed policy of a private deep model, from the one field that records it, `extra.seed`:
/// `{"seed": S}` (an integer) is an experiment seeded with S, [`RELEASE_SEED_NOTE`] a release;
/// anything else (missing, `3.0`, `"3"`, `{"seed": "3"}`) is refused naming the field, so that
/// no edit of it can pass an experiment off as a release.
#[cfg_attr(not(feature = "nn"), allow(dead_code))]
pub fn seed_policy_of(extra: &serde_json::Value) -> Result<Option<u64>, String> {
    let seed = extra.get("seed");
    match seed {
        Some(serde_json::Value::String(s)) if s == RELEASE_SEED_NOTE => Ok(None),
        Some(serde_json::Value::Object(o)) if o.len() == 1 => match o.get("seed") {
            Some(v) if v.is_u64() => Ok(v.as_u64()),
            _ => Err(format!(
                "extra.seed: {} is not a seed policy",
                seed.unwrap()
            )),
        },
        Some(v) => Err(format!(
            "extra.seed: {v} is not a seed policy (`{{\"seed\": S}}` for an experiment, \"{RELEASE_SEED_NOTE}\" for a release)"
        )),
        None => Err("extra.seed: missing; a private model must record its seed policy".into()),
    }
}

/// The experiment seed of a private deep model trained with `--seed` (recorded in its extra
/// metadata as `"seed": {"seed": S}`): an experiment, not a private release (erratum 4.9).
/// An unreadable or missing `extra.seed` is refused ([`seed_policy_of`]).
#[cfg(feature = "nn")]
pub fn experiment_seed(
    path: &Path,
    m: &privpred_nn::artifact::NnModel,
) -> anyhow::Result<Option<u64>> {
    if m.header.kind == privpred_nn::artifact::ModelKind::NonPrivate {
        return Ok(None);
    }
    seed_policy_of(&m.extra).map_err(|e| usage(format!("--model {}: {e}", path.display())))
}

/// The method name of a deep model as the CLI and the service print it.
#[cfg(feature = "nn")]
pub fn kind_name(m: &privpred_nn::artifact::NnModel) -> &'static str {
    use privpred_nn::artifact::ModelKind;
    match m.header.kind {
        ModelKind::DpSgd => "dp-sgd",
        ModelKind::Teachers => "subsample-aggregate",
        ModelKind::NonPrivate => "non-private",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_policy_is_read_strictly() {
        use serde_json::json;
        assert_eq!(seed_policy_of(&json!({"seed": {"seed": 3}})), Ok(Some(3)));
        assert_eq!(
            seed_policy_of(&json!({"seed": RELEASE_SEED_NOTE})),
            Ok(None)
        );
        for bad in [
            json!({}),
            json!({"seed": 3.0}),
            json!({"seed": "3"}),
            json!({"seed": 3}),
            json!({"seed": {"seed": 3.0}}),
            json!({"seed": {"seed": "3"}}),
            json!({"seed": null}),
        ] {
            let e = seed_policy_of(&bad).expect_err(&bad.to_string());
            assert!(e.starts_with("extra.seed"), "{e}");
        }
    }

    #[test]
    fn detects_the_format_key_only() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, meta: &str| {
            let header = format!(
                r#"{{"__metadata__":{meta},"w":{{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}}}"#
            );
            let mut b = (header.len() as u64).to_le_bytes().to_vec();
            b.extend_from_slice(header.as_bytes());
            b.extend_from_slice(&[0, 0, 0, 0]);
            let p = dir.path().join(name);
            std::fs::write(&p, b).unwrap();
            p
        };
        assert!(is_nn_artifact(&write("nn", r#"{"format":"privpred-nn"}"#)));
        assert!(!is_nn_artifact(&write(
            "lin",
            r#"{"format":"privpred-linear"}"#
        )));
        assert!(!is_nn_artifact(&write("none", "{}")));
        let junk = dir.path().join("junk");
        std::fs::write(&junk, b"\xff\xff\xff\xff\xff\xff\xff\xffxx").unwrap();
        assert!(!is_nn_artifact(&junk));
        assert!(!is_nn_artifact(&dir.path().join("missing")));
    }
}
