//! The validation failure every domain check returns; the API layer turns it into a 400.

use std::fmt;

/// A request that breaks a rule of the API: a message for the caller and, where the API
/// defines one, an `error_code` for `error.details`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// Human-readable reason, naming the offending field.
    pub message: String,
    /// Upstream `error.details.error_code`, when one exists for this rule.
    pub code: Option<&'static str>,
}

impl Invalid {
    /// A rule violation with no specific error code.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: None,
        }
    }

    /// A rule violation with an upstream error code.
    pub fn with_code(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: Some(code),
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Invalid {}

/// Shorthand for results of validation.
pub type Valid<T> = Result<T, Invalid>;

/// Fails unless `s` has between `min` and `max` characters.
pub fn check_len(field: &str, s: &str, min: usize, max: usize) -> Valid<()> {
    let n = s.chars().count();
    if n < min {
        if min == 1 {
            return Err(Invalid::new(format!("`{field}` must not be empty")));
        }
        return Err(Invalid::new(format!(
            "`{field}` must be at least {min} characters"
        )));
    }
    if n > max {
        return Err(Invalid::new(format!(
            "`{field}` must be at most {max} characters (got {n})"
        )));
    }
    Ok(())
}
