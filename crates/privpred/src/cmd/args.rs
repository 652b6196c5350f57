//! Typed argument values and value parsers shared by the subcommands: clap checks them while
//! parsing, so a bad value exits 2 with the valid range before any work.

use privpred_data::UnitBall;

/// How `--lambda` and `--clip` are set: a public value, the private selection, or the paper's
/// non-private hold-out selection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueOrCv {
    /// A finite value > 0, chosen without the data (costs nothing).
    Value(f64),
    /// `private`: the private split selection over the grid (inside the guarantee).
    Private,
    /// `cv`: the paper's selection on a hold-out of the private data, without privacy (outside
    /// the guarantee: the guarantee is marked not valid).
    Cv,
}

impl ValueOrCv {
    /// The value, or `None` for a selection.
    pub fn value(self) -> Option<f64> {
        match self {
            ValueOrCv::Value(v) => Some(v),
            ValueOrCv::Private | ValueOrCv::Cv => None,
        }
    }
}

/// clap value parser for [`ValueOrCv`]: "a finite number > 0, `private` or `cv`".
pub fn positive_or_cv(s: &str) -> Result<ValueOrCv, String> {
    match s {
        "cv" => return Ok(ValueOrCv::Cv),
        "private" => return Ok(ValueOrCv::Private),
        _ => {}
    }
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(ValueOrCv::Value(v)),
        _ => Err("must be a finite number > 0 (a public value, costs nothing), `private` (private selection inside the guarantee) or `cv` (non-private hold-out selection, outside the guarantee)".into()),
    }
}

/// The declared class set of `--classes`: a count C (labels 0..C-1) or, for an image folder,
/// the class names (label i = the i-th name).
#[derive(Debug, Clone, PartialEq)]
pub enum ClassesArg {
    /// C classes, labels 0..C-1.
    Count(usize),
    /// Named classes (an image folder's class folders), in label order.
    Names(Vec<String>),
}

impl ClassesArg {
    /// The number of classes declared.
    pub fn count(&self) -> usize {
        match self {
            ClassesArg::Count(c) => *c,
            ClassesArg::Names(n) => n.len(),
        }
    }

    /// The count, for a data set's load options (`None` for names).
    pub fn as_count(&self) -> Option<usize> {
        match self {
            ClassesArg::Count(c) => Some(*c),
            ClassesArg::Names(_) => None,
        }
    }

    /// The names, for an image folder's load options (`None` for a count).
    pub fn names(&self) -> Option<Vec<String>> {
        match self {
            ClassesArg::Count(_) => None,
            ClassesArg::Names(n) => Some(n.clone()),
        }
    }
}

/// clap value parser for [`ClassesArg`]: an integer C >= 2, or at least two distinct non-empty
/// comma-separated names.
pub fn classes(s: &str) -> Result<ClassesArg, String> {
    if let Ok(c) = s.parse::<usize>() {
        return Ok(ClassesArg::Count(c));
    }
    let names: Vec<String> = s.split(',').map(str::to_string).collect();
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    if names.len() < 2 || names.iter().any(String::is_empty) || sorted.len() != names.len() {
        return Err("must be the number of classes C (labels 0..C-1) or, for an image folder, at least two distinct comma-separated class names".into());
    }
    Ok(ClassesArg::Names(names))
}

/// clap value parser for the unit-ball rule: `normalize`, `clip:R` (R > 0) or `max-norm`.
pub fn unit_ball(s: &str) -> Result<UnitBall, String> {
    s.parse()
        .map_err(|e: privpred_data::DataError| e.to_string())
}

/// The model `train` fits.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelArg {
    /// Multinomial logistic regression (every method).
    Linear,
    /// The paper's ResNet-20 with GroupNorm (build with `--features nn`).
    Resnet20,
    /// Widths 4/8/8, one block per stage: for tests and quick checks (`--features nn`).
    ResnetTiny,
}

impl ModelArg {
    /// The name as the CLI spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelArg::Linear => "linear",
            ModelArg::Resnet20 => "resnet20",
            ModelArg::ResnetTiny => "resnet-tiny",
        }
    }
}

/// The ResNet training engine.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineArg {
    /// privpred-nn's own CPU engine.
    Cpu,
    /// libtorch (build with `--features torch`): CUDA when present, CPU otherwise.
    Torch,
}

impl EngineArg {
    /// The name as the CLI spells it.
    #[cfg_attr(not(feature = "nn"), allow(dead_code))]
    pub fn as_str(self) -> &'static str {
        match self {
            EngineArg::Cpu => "cpu",
            EngineArg::Torch => "torch",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positive_or_cv_takes_cv_and_positive_finite_numbers_only() {
        assert_eq!(positive_or_cv("cv"), Ok(ValueOrCv::Cv));
        assert_eq!(positive_or_cv("private"), Ok(ValueOrCv::Private));
        assert_eq!(positive_or_cv("1e-3"), Ok(ValueOrCv::Value(1e-3)));
        for bad in ["0", "-0", "-1", "nan", "inf", "", "CV", "1e400", "Private"] {
            let e = positive_or_cv(bad).unwrap_err();
            assert!(
                e.contains("> 0") && e.contains("cv") && e.contains("private"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn classes_is_a_count_or_distinct_names() {
        assert_eq!(classes("3"), Ok(ClassesArg::Count(3)));
        assert_eq!(
            classes("cat,dog"),
            Ok(ClassesArg::Names(vec!["cat".into(), "dog".into()]))
        );
        for bad in ["cat", "cat,cat", "cat,", ",", "-1"] {
            assert!(classes(bad).unwrap_err().contains("class names"), "{bad}");
        }
    }

    #[test]
    fn unit_ball_parses_the_three_rules_and_names_them_when_wrong() {
        assert_eq!(unit_ball("normalize"), Ok(UnitBall::Normalize));
        assert_eq!(unit_ball("max-norm"), Ok(UnitBall::MaxNorm));
        assert_eq!(unit_ball("clip:2"), Ok(UnitBall::Clip { radius: 2.0 }));
        let e = unit_ball("clip:0").unwrap_err();
        assert!(e.contains("normalize") && e.contains("max-norm"), "{e}");
    }
}
