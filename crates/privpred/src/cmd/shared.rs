//! Helpers shared by several subcommands (kept here so that no command module imports
//! another: `train` → `train_nn` is the only edge between them).

use crate::exit::usage;
use privpred_study::StudyError;

/// Refuses an `--out` that is a directory or whose directory does not exist (exit 2, before
/// any training).
pub(crate) fn check_out_dir(out: &std::path::Path) -> anyhow::Result<()> {
    if out.is_dir() {
        return Err(usage(format!(
            "invalid out = {}: is a directory; give a file path such as {}",
            out.display(),
            out.join("model.safetensors").display()
        )));
    }
    if let Some(parent) = out.parent()
        && !parent.as_os_str().is_empty()
        && !parent.is_dir()
    {
        return Err(usage(format!(
            "invalid out = {}: directory {} does not exist",
            out.display(),
            parent.display()
        )));
    }
    Ok(())
}

/// A number in a short form: plain decimals between 10⁻⁴ and 10¹⁶ (and 0), scientific
/// notation outside (`1e-300`, not 300 digits).
pub(crate) fn short(v: f64) -> String {
    if v == 0.0 || !v.is_finite() || (1e-4..1e16).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// Prints a trained model's guarantee (or that it has none) for `train`'s summary.
pub(crate) fn print_guarantee(c: Option<&privpred_core::Calibration>) {
    match c {
        Some(c) => {
            println!(
                "guarantee: ({}, {})-DP for {} neighbours, budget {}, calibration {}{}",
                short(c.epsilon()),
                short(c.delta()),
                c.neighbours(),
                c.budget()
                    .get()
                    .map_or("unlimited".to_string(), |b| format!("{b} answers")),
                c.mode().name(),
                if c.is_valid() {
                    ""
                } else {
                    " (NOT a valid guarantee: reproduction only)"
                }
            );
            println!("noise: {}", c.noise());
            if let Some(s) = c.selection {
                println!("hyper-parameter selection: {}", s.describe());
            }
        }
        None => println!("no privacy guarantee (non-private reference model)"),
    }
}

/// Reads `--schema FILE` (a bad file is a usage error naming it and what is wrong).
pub(crate) fn read_schema(
    path: Option<&std::path::Path>,
) -> anyhow::Result<Option<privpred_data::Schema>> {
    path.map(|p| privpred_data::Schema::read(p).map_err(|e| usage(format!("--schema: {e}"))))
        .transpose()
}

/// Maps study errors: user errors exit with code 2.
pub fn study_error(e: StudyError) -> anyhow::Error {
    if e.is_usage() {
        crate::exit::usage(e)
    } else {
        anyhow::Error::new(e)
    }
}

/// The command line that reproduces this run, as a shell would take it.
pub fn command_line() -> String {
    let mut args: Vec<String> = std::env::args().collect();
    if let Some(first) = args.first_mut() {
        *first = "privpred".into();
    }
    privpred_study::report::shell_quote(&args)
}

/// Refuses a training set with fewer than two classes present: a classifier needs two.
pub(crate) fn check_two_classes(train: &privpred_data::Dataset) -> anyhow::Result<()> {
    let present = train.class_counts().iter().filter(|&&c| c > 0).count();
    if present < 2 {
        let only = train.labels.first().copied().unwrap_or(0);
        return Err(usage(format!(
            "{}: every training example has label {only}; a classifier needs examples of at least 2 classes",
            train.provenance.name
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::short;

    #[test]
    fn tiny_and_huge_numbers_are_short() {
        assert_eq!(short(1e-300), "1e-300");
        assert_eq!(short(1e300), "1e300");
        assert_eq!(short(0.5), "0.5");
        assert_eq!(short(1e-5), "1e-5");
        assert_eq!(short(0.0), "0");
        assert_eq!(short(10.0), "10");
    }
}
