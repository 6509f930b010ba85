//! The names a plan gives its agents (KEY) and variables (VAR), and cutting display text to a
//! length: rules shared by the reader, the checks and the templates.

use super::limits::IDENTIFIER_CHARS;

/// Names a template provides itself (`{{index}}` in a map, `{{round}}` in a repeat), so no
/// variable may take them.
pub const RESERVED_VARS: [&str; 2] = ["index", "round"];

/// Whether `s` matches `[A-Za-z_][A-Za-z0-9_]{0,63}`.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && s.len() <= IDENTIFIER_CHARS
}

/// Whether `s` may name a variable: an identifier other than a reserved name.
pub fn is_var(s: &str) -> bool {
    is_identifier(s) && !RESERVED_VARS.contains(&s)
}

/// The first `max` characters of `s` (whole characters, never half of one).
pub fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        let long = "a".repeat(64);
        let too_long = "a".repeat(65);
        let cases: [(&str, bool, bool); 12] = [
            ("a", true, true),
            ("_", true, true),
            ("_x9", true, true),
            ("Topic_2", true, true),
            (&long, true, true),
            (&too_long, false, false),
            ("", false, false),
            ("9a", false, false),
            ("a-b", false, false),
            ("é", false, false),
            ("index", true, false),
            ("round", true, false),
        ];
        for (s, ident, var) in cases {
            assert_eq!(is_identifier(s), ident, "{s}");
            assert_eq!(is_var(s), var, "{s}");
        }
    }

    #[test]
    fn cut_counts_characters() {
        assert_eq!(cut("héllo", 2), "hé");
        assert_eq!(cut("hé", 2), "hé");
        assert_eq!(cut("", 3), "");
        assert_eq!(cut("abc", 0), "");
    }
}
