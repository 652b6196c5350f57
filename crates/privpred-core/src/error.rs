//! The one error type of this crate.

/// Errors of the privacy core. Every variant names what is wrong and the valid range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CoreError {
    /// A user-supplied argument is outside its valid range.
    #[error("invalid {name} = {value}: {expected}")]
    InvalidArgument {
        /// The argument's name as the user knows it (e.g. `--epsilon`).
        name: &'static str,
        /// The offending value, formatted.
        value: String,
        /// The valid range, in words.
        expected: String,
    },
    /// The combination of arguments is not supported (e.g. δ > 0 for a δ = 0-only rule).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A numerical procedure failed to reach its tolerance.
    #[error("numerical failure: {0}")]
    Numerical(String),
}

impl CoreError {
    /// Convenience constructor for [`CoreError::InvalidArgument`].
    pub fn invalid(
        name: &'static str,
        value: impl std::fmt::Display,
        expected: impl Into<String>,
    ) -> Self {
        CoreError::InvalidArgument {
            name,
            value: short_number(value.to_string()),
            expected: expected.into(),
        }
    }
}

/// A number in a short form: a decimal with more than 20 characters (how Rust prints 1e-300
/// or 1e300 as a plain decimal) is rewritten in scientific notation (`1e-300`); anything
/// else, numbers included, is returned unchanged.
pub fn short_number(text: String) -> String {
    if text.len() <= 20 {
        return text;
    }
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => format!("{v:e}"),
        _ => text,
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, CoreError>;

/// `v` is a finite number > 0, or an error naming `name` and the valid range.
pub(crate) fn check_scale(name: &'static str, v: f64) -> Result<()> {
    if !(v.is_finite() && v > 0.0) {
        return Err(CoreError::invalid(name, v, "must be a finite number > 0"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_and_huge_values_are_printed_in_a_short_form() {
        let e = CoreError::invalid("epsilon", 1e-300, "must be > 0").to_string();
        assert_eq!(e, "invalid epsilon = 1e-300: must be > 0");
        let e = CoreError::invalid("sigma", 1.5e300, "x").to_string();
        assert!(e.contains("= 1.5e300:"), "{e}");
        assert!(
            CoreError::invalid("b", 0.25, "x")
                .to_string()
                .contains("= 0.25:")
        );
        assert_eq!(
            short_number("not a number at all, long".into()),
            "not a number at all, long"
        );
    }
}
