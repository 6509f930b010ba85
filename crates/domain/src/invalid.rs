//! The validation failure every domain check returns; the API layer turns it into a 400.
//!
//! A failure with a stable `code` becomes `error.details` = `{"error_code": code, ...details}`
//! on the wire; one without a code has no `details` at all (the SDK reads `details` only to
//! pick an exception subclass by `error_code`).

use std::fmt;

use serde_json::{Map, Value};

/// A request that breaks a rule of the API: a message for the caller and, where the API
/// defines one, an `error_code` (with extra machine-readable keys) for `error.details`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// Human-readable reason, naming the offending field.
    pub message: String,
    /// `error.details.error_code`, when this rule has a stable code.
    pub code: Option<&'static str>,
    /// Further keys of `error.details` (only sent with a code), e.g. `field`.
    pub details: Map<String, Value>,
}

impl Invalid {
    /// A rule violation with no specific error code.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: None,
            details: Map::new(),
        }
    }

    /// A rule violation with a stable error code.
    pub fn with_code(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: Some(code),
            details: Map::new(),
        }
    }

    /// The same failure with one more key in `error.details`.
    pub fn detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details.insert(key.to_string(), value.into());
        self
    }

    /// A key `key` the object at `at` does not have. `what` names that object ("a cloud
    /// environment config"); the closest of `known` is suggested when it is close enough to
    /// be a typo, else every known key is listed.
    pub fn unknown_field(at: &str, key: &str, what: &str, known: &[&str]) -> Self {
        let path = join(at, key);
        let path = path.as_str();
        let base = format!("`{path}` is not a known field of {what}");
        match suggest(key, known) {
            Some(s) => Self::with_code("unknown_field", format!("{base}; did you mean `{s}`?"))
                .detail("field", path)
                .detail("suggestion", s),
            None if known.is_empty() => {
                Self::with_code("unknown_field", format!("{base}: it takes no fields"))
                    .detail("field", path)
            }
            None => {
                let list = known
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                Self::with_code("unknown_field", format!("{base} (known fields: {list})"))
                    .detail("field", path)
            }
        }
    }

    /// A field (or value) asking for something Mast does not do yet: refused rather than
    /// accepted and ignored. `feature` is a stable name for machines; `why` says what is
    /// missing and what to send instead, in a few words.
    pub fn unsupported(path: &str, feature: &str, why: &str) -> Self {
        Self::with_code(
            "unsupported_feature",
            format!("`{path}` is not supported by this server yet: {why}"),
        )
        .detail("field", path)
        .detail("feature", feature)
    }

    /// A key sent twice in one object (JSON parsers disagree on which one wins).
    pub fn duplicate_field(path: &str) -> Self {
        Self::with_code(
            "duplicate_field",
            format!("`{path}` appears more than once; send each field once"),
        )
        .detail("field", path)
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Invalid {}

/// The path of `key` inside the object at `at` (`""` is the body itself).
pub fn join(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_string()
    } else {
        format!("{at}.{key}")
    }
}

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

/// The known key `key` was most likely meant as: the nearest by edit distance (ignoring case,
/// `-` versus `_` and camelCase), if it is within a third of its length (at most 3 edits).
pub fn suggest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    let norm = |s: &str| -> Vec<char> {
        let mut out = Vec::new();
        for (i, c) in s.chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(if c == '-' {
                '_'
            } else {
                c.to_ascii_lowercase()
            });
        }
        out
    };
    let k = norm(key);
    // `agent_id` for `agent` (or `vault_ids` for `vaults`) is a different name for the same
    // thing, however many letters apart: an id suffix too many or too few.
    let bare = |s: &[char]| -> String {
        let s: String = s.iter().collect();
        s.strip_suffix("_ids")
            .map(|b| format!("{b}s"))
            .or_else(|| s.strip_suffix("_id").map(str::to_string))
            .unwrap_or(s)
    };
    if let Some(cand) = known
        .iter()
        .find(|cand| bare(&k) == bare(&norm(cand)) && k != norm(cand))
    {
        return Some(cand);
    }
    known
        .iter()
        .map(|cand| (edit_distance(&k, &norm(cand)), *cand))
        .filter(|(d, cand)| *d <= (cand.chars().count() / 3).clamp(1, 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, cand)| cand)
}

/// Levenshtein distance, with a transposition of neighbours counting as one edit.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let (n, m) = (a.len(), b.len());
    let mut d = vec![vec![0usize; m + 1]; n + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    d[0] = (0..=m).collect();
    for i in 1..=n {
        for j in 1..=m {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[n][m]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_are_close_or_absent() {
        let known = [
            "name",
            "model",
            "system",
            "tools",
            "mcp_servers",
            "metadata",
        ];
        assert_eq!(suggest("sytem", &known), Some("system"));
        assert_eq!(suggest("systme", &known), Some("system"));
        assert_eq!(suggest("mcpServers", &known), Some("mcp_servers"));
        assert_eq!(suggest("Name", &known), Some("name"));
        assert_eq!(suggest("toolz", &known), Some("tools"));
        assert_eq!(suggest("colour", &known), None);
        assert_eq!(suggest("x", &known), None);
        assert_eq!(
            suggest("netwrking", &["type", "networking", "packages"]),
            Some("networking")
        );
        assert_eq!(
            suggest("environment", &["environment_id"]),
            Some("environment_id")
        );
        assert_eq!(
            suggest("agent_id", &["agent", "environment_id"]),
            Some("agent")
        );
        assert_eq!(suggest("vault_ids", &["vaults", "agent"]), Some("vaults"));
        assert_eq!(suggest("agent", &["agent_id"]), Some("agent_id"));
    }

    #[test]
    fn unknown_field_messages() {
        let e = Invalid::unknown_field(
            "config",
            "netwrking",
            "a cloud environment config",
            &["type", "networking"],
        );
        assert_eq!(
            e.message,
            "`config.netwrking` is not a known field of a cloud environment config; did you mean `networking`?"
        );
        assert_eq!(e.code, Some("unknown_field"));
        assert_eq!(e.details["suggestion"], "networking");
        let e = Invalid::unknown_field("tools[0]", "zzz", "a tool", &["type", "name"]);
        assert_eq!(e.details["field"], "tools[0].zzz");
        assert!(
            e.message.ends_with("(known fields: `type`, `name`)"),
            "{}",
            e.message
        );
        assert!(!e.details.contains_key("suggestion"));
    }
}
