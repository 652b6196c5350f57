//! What the CLI adds to `privpred-nn` models (a DP-SGD network, a teacher ensemble or a
//! non-private network), which are written and opened through `privpred_release` like every
//! model: the exit codes of deep-model errors and the method names it prints.

/// Maps a deep-model error to the CLI's exit codes: bad arguments, shapes, files and data
/// are the user's (exit 2); a diverged training run or an engine failure (e.g. libtorch out of
/// device memory) is not (exit 1).
#[cfg(feature = "nn")]
pub fn nn_err(e: privpred_nn::NnError) -> anyhow::Error {
    use privpred_nn::NnError;
    match e {
        NnError::Diverged(_) | NnError::Engine(_) | NnError::Stopped(_) => anyhow::Error::new(e),
        _ => crate::exit::usage(e),
    }
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
