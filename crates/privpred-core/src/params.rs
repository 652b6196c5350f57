//! Checked parameters in the style of linfa's `ParamGuard`: a builder of hyper-parameters
//! starts from the defaults of [`crate::defaults`], is adjusted with setters, and
//! [`ParamGuard::check`] turns it into the validated parameters a trainer accepts. Invalid
//! values are refused with an error naming the parameter and its valid range.
//!
//! The helpers below are the range checks every builder shares, so the messages read the same
//! everywhere.

use crate::error::{CoreError, Result};

/// A set of parameters that must be validated before use (linfa's `ParamGuard`).
pub trait ParamGuard {
    /// The validated parameters.
    type Checked;
    /// The error of a refused value.
    type Error: std::error::Error;

    /// Validates by reference, returning the validated parameters.
    fn check_ref(&self) -> std::result::Result<&Self::Checked, Self::Error>;

    /// Validates, consuming the builder.
    fn check(self) -> std::result::Result<Self::Checked, Self::Error>;
}

/// `v` must be a finite number > 0.
pub fn positive(name: &'static str, v: f64) -> Result<f64> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(CoreError::invalid(name, v, "must be a finite number > 0"))
    }
}

/// The largest L2 strength λ a private linear method is trained with: 10⁶. With ‖x‖ ≤ 1 the
/// minimiser has ‖θ*‖ ≤ K/λ (λθ* is minus the loss gradient, of norm ≤ K), so above 10⁶ every
/// logit is within about 3·10⁻⁶ of every other for every input: the model is constant, and
/// the f32 training kernel's arithmetic (λ·θ, λ·‖θ‖²) leaves its range well before 10⁵⁰.
pub const MAX_LAMBDA: f64 = 1e6;

/// λ of a method that divides by it: a finite number in (0, [`MAX_LAMBDA`]].
pub fn lambda(v: f64) -> Result<f64> {
    if v.is_finite() && v > 0.0 && v <= MAX_LAMBDA {
        Ok(v)
    } else {
        Err(CoreError::invalid(
            "lambda",
            v,
            format!(
                "must be a finite number in (0, {MAX_LAMBDA:e}] (above it the model is constant: its weights are at most K/lambda)"
            ),
        ))
    }
}

/// `v` must be a finite number ≥ 0.
pub fn non_negative(name: &'static str, v: f64) -> Result<f64> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(CoreError::invalid(name, v, "must be a finite number >= 0"))
    }
}

/// `v` must lie in [0, 1) (a momentum, a hold-out fraction with 0 allowed).
pub fn unit_half_open(name: &'static str, v: f64) -> Result<f64> {
    if (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err(CoreError::invalid(name, v, "must be in [0, 1)"))
    }
}

/// `v` must lie in (0, 1) (a hold-out fraction).
pub fn unit_open(name: &'static str, v: f64) -> Result<f64> {
    if v > 0.0 && v < 1.0 {
        Ok(v)
    } else {
        Err(CoreError::invalid(name, v, "must be in (0, 1)"))
    }
}

/// A count that must be ≥ 1.
pub fn at_least_one(name: &'static str, v: usize) -> Result<usize> {
    if v >= 1 {
        Ok(v)
    } else {
        Err(CoreError::invalid(name, v, "must be >= 1"))
    }
}

/// A count that must lie in 1..=`max` (`what` names the bound, e.g. "the training-set size").
pub fn count_up_to(name: &'static str, v: usize, max: usize, what: &str) -> Result<usize> {
    if (1..=max).contains(&v) {
        Ok(v)
    } else {
        Err(CoreError::invalid(
            name,
            v,
            format!("must be in 1..={max} ({what})"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_name_the_parameter_and_the_range() {
        let e = positive("lambda", 0.0).unwrap_err().to_string();
        assert!(e.contains("lambda") && e.contains("> 0"), "{e}");
        assert!(positive("lambda", f64::NAN).is_err());
        assert!(positive("lambda", f64::INFINITY).is_err());
        assert_eq!(positive("lambda", 1e-4).unwrap(), 1e-4);
        assert_eq!(lambda(MAX_LAMBDA).unwrap(), MAX_LAMBDA);
        let e = lambda(1e50).unwrap_err().to_string();
        assert!(e.contains("1e50") && e.contains("(0, 1e6]"), "{e}");
        assert!(lambda(0.0).is_err() && lambda(f64::NAN).is_err());
        assert!(non_negative("w", -1e-300).is_err());
        assert_eq!(non_negative("w", 0.0).unwrap(), 0.0);
        assert!(unit_half_open("momentum", 1.0).is_err());
        assert!(unit_half_open("momentum", f64::NAN).is_err());
        assert!(unit_open("holdout", 0.0).is_err());
        let e = at_least_one("epochs", 0).unwrap_err().to_string();
        assert!(e.contains("epochs") && e.contains(">= 1"), "{e}");
        let e = count_up_to("teachers", 11, 10, "the training-set size")
            .unwrap_err()
            .to_string();
        assert!(e.contains("teachers") && e.contains("1..=10"), "{e}");
        assert!(count_up_to("teachers", 0, 10, "n").is_err());
        assert_eq!(count_up_to("teachers", 10, 10, "n").unwrap(), 10);
    }
}
