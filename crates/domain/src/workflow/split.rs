//! The `split` step: turning rendered text into a list.

use std::fmt;

use serde_json::Value;

use super::plan::SplitBy;

/// Why `split` with `json` could not make a list; the run ends with `program_error`. The
/// message says what was wrong, never the text itself, which is an agent's work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitError(pub String);

impl fmt::Display for SplitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SplitError {}

/// The items `text` splits into. `lines`: each line trimmed, empty ones dropped. `json`: a
/// JSON array whose items are strings (taken as they are) or other scalars (their JSON text:
/// `3`, `true`, `null`); nested arrays or objects, or text that is not an array, fail.
/// Agents often wrap JSON in a Markdown code fence, so one fence around the whole text is
/// removed first.
pub fn split(text: &str, by: SplitBy) -> Result<Vec<String>, SplitError> {
    match by {
        SplitBy::Lines => Ok(text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()),
        SplitBy::Json => {
            let body = unfence(text.trim());
            let value: Value = serde_json::from_str(body).map_err(|e| {
                SplitError(format!(
                    "split by json: the text is not valid JSON (line {}, column {})",
                    e.line(),
                    e.column()
                ))
            })?;
            let Value::Array(items) = value else {
                return Err(SplitError(
                    "split by json: the text is JSON but not an array".to_string(),
                ));
            };
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| match item {
                    Value::String(s) => Ok(s),
                    Value::Array(_) | Value::Object(_) => Err(SplitError(format!(
                        "split by json: item {} is {}, not a string or scalar",
                        i + 1,
                        if item.is_array() {
                            "an array"
                        } else {
                            "an object"
                        }
                    ))),
                    scalar => Ok(scalar.to_string()),
                })
                .collect()
        }
    }
}

/// The inside of a Markdown code fence that is all of `text`, else `text`.
fn unfence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let Some(inner) = rest.strip_suffix("```") else {
        return text;
    };
    // The opening line may name a language (```json); the body starts on the next line.
    match inner.split_once('\n') {
        Some((lang, body)) if !lang.contains(['[', '{', '"']) => body.trim(),
        _ => inner.trim(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_trimmed_and_blank_ones_dropped() {
        let cases: [(&str, &[&str]); 5] = [
            ("", &[]),
            ("  \n\t\n", &[]),
            ("one", &["one"]),
            ("  a  \n\nb\r\n  c d \n", &["a", "b", "c d"]),
            ("- x\n- y", &["- x", "- y"]),
        ];
        for (text, want) in cases {
            assert_eq!(split(text, SplitBy::Lines).unwrap(), want, "{text:?}");
        }
    }

    #[test]
    fn json_arrays_of_strings_and_scalars() {
        let cases: [(&str, &[&str]); 6] = [
            ("[]", &[]),
            (r#"["a", "b c"]"#, &["a", "b c"]),
            (
                r#" [1, 2.5, true, null, "x"] "#,
                &["1", "2.5", "true", "null", "x"],
            ),
            (r#"[""]"#, &[""]),
            ("```json\n[\"a\", \"b\"]\n```", &["a", "b"]),
            ("```\n[\"a\"]\n```", &["a"]),
        ];
        for (text, want) in cases {
            assert_eq!(split(text, SplitBy::Json).unwrap(), want, "{text:?}");
        }
        assert_eq!(split("```[\"a\"]```", SplitBy::Json).unwrap(), ["a"]);
    }

    #[test]
    fn anything_else_is_refused_without_quoting_the_text() {
        let cases = [
            ("", "not valid JSON"),
            ("secret words", "not valid JSON"),
            ("[1,", "not valid JSON"),
            (r#"{"a": "secret"}"#, "not an array"),
            (r#""secret""#, "not an array"),
            ("3", "not an array"),
            (r#"["a", ["secret"]]"#, "item 2 is an array"),
            (r#"[{"k": "secret"}]"#, "item 1 is an object"),
            ("Here it is: [\"a\"]", "not valid JSON"),
        ];
        for (text, why) in cases {
            let e = split(text, SplitBy::Json).unwrap_err();
            assert!(e.0.contains(why), "{text:?}: {e}");
            assert!(!e.0.contains("secret"), "{e}");
        }
    }
}
