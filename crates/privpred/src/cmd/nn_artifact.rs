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

/// The experiment seed of a private deep model trained with `--seed` (recorded in its extra
/// metadata as `"seed": {"seed": S}`): an experiment, not a private release (erratum 4.9).
#[cfg(feature = "nn")]
pub fn experiment_seed(m: &privpred_nn::artifact::NnModel) -> Option<u64> {
    if m.header.kind == privpred_nn::artifact::ModelKind::NonPrivate {
        return None;
    }
    m.extra.get("seed")?.get("seed")?.as_u64()
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
