//! Why a plan is refused, and which of the two refusals it is: the engine reports a plan over
//! a size limit as `unknown_error` and any other broken rule as `program_error`, and gives the
//! agent the full message either way.

use std::fmt;

use crate::invalid::Invalid;

/// Which family of rules a refused plan broke; decides the `error.type` a client sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Over one of the server's size limits (bytes, phases, steps, nesting, agent
    /// definitions, literal `over` items).
    SizeLimit,
    /// Any other rule of the plan format: shape, names, references, variable order.
    Program,
}

impl ErrorKind {
    /// The `error.type` a refused start or failed run carries for this kind.
    pub fn error_type(self) -> &'static str {
        match self {
            ErrorKind::SizeLimit => "unknown_error",
            ErrorKind::Program => "program_error",
        }
    }
}

/// A plan refused before a run exists: the kind, the JSON path of the offending member
/// (`""` is the plan itself), and the validation failure the API layer already knows how
/// to answer with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError {
    /// Size limit or other rule.
    pub kind: ErrorKind,
    /// Where in the plan, e.g. `phases[1].steps[0].map.over`.
    pub path: String,
    /// The message (naming the path) and any error code, as every domain check reports.
    pub invalid: Invalid,
}

impl PlanError {
    /// A broken rule of the plan format at `path`.
    pub fn program(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Program,
            path: path.into(),
            invalid: Invalid::new(message),
        }
    }

    /// A size limit passed at `path`.
    pub fn size_limit(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::SizeLimit,
            path: path.into(),
            invalid: Invalid::new(message),
        }
    }

    /// Wraps a failure of the shared field readers, which name the path in their message
    /// and, for an unknown key, in `details.field`.
    pub(crate) fn from_invalid(at: &str, invalid: Invalid) -> Self {
        let path = invalid
            .details
            .get("field")
            .and_then(|f| f.as_str())
            .unwrap_or(at)
            .to_string();
        Self {
            kind: ErrorKind::Program,
            path,
            invalid,
        }
    }

    /// The `error.type` for this refusal.
    pub fn error_type(&self) -> &'static str {
        self.kind.error_type()
    }

    /// The full reason, for the agent that wrote the plan.
    pub fn message(&self) -> &str {
        &self.invalid.message
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.invalid.message)
    }
}

impl std::error::Error for PlanError {}

impl From<PlanError> for Invalid {
    fn from(e: PlanError) -> Self {
        e.invalid
    }
}

/// Shorthand for results of reading and checking plans.
pub type PlanResult<T> = Result<T, PlanError>;

/// How a path is named in a message: the root has no path of its own.
pub(crate) fn show(path: &str) -> String {
    if path.is_empty() {
        "the plan".to_string()
    } else {
        format!("`{path}`")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_the_error_types_clients_see() {
        let cases = [
            (ErrorKind::SizeLimit, "unknown_error"),
            (ErrorKind::Program, "program_error"),
        ];
        for (kind, ty) in cases {
            assert_eq!(kind.error_type(), ty);
        }
        let e = PlanError::size_limit("phases", "too many");
        assert_eq!(
            (e.error_type(), e.path.as_str()),
            ("unknown_error", "phases")
        );
        let e = PlanError::program("agents.a", "bad");
        assert_eq!(e.error_type(), "program_error");
        let invalid: Invalid = e.into();
        assert_eq!(invalid.message, "bad");
    }

    #[test]
    fn field_reader_failures_keep_the_deepest_path() {
        let unknown = Invalid::unknown_field("phases[0]", "stpes", "a phase", &["steps"]);
        assert_eq!(
            PlanError::from_invalid("phases[0]", unknown).path,
            "phases[0].stpes"
        );
        let plain = Invalid::new("`x` must be a string");
        assert_eq!(PlanError::from_invalid("x", plain).path, "x");
        assert_eq!(show(""), "the plan");
        assert_eq!(show("a.b"), "`a.b`");
    }
}
