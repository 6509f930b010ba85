//! Extractors whose rejections are API errors: a JSON body with path-precise messages, and
//! query strings in the SDK's encoding (`types[]=a&types[]=b`, `created_at[gte]=...`).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use crate::domain::time::{self, Micros};

/// A JSON request body. Content type is not enforced (curl users often omit it); the body must
/// parse, and errors name the offending path.
pub struct Json<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::too_large("request body is too large")
            } else {
                ApiError::invalid(format!("could not read request body: {e}"))
            }
        })?;
        parse_json(&bytes).map(Json)
    }
}

/// Whether JSON text escapes a NUL character (`\u0000` not itself behind a backslash).
fn has_escaped_nul(bytes: &[u8]) -> bool {
    bytes.windows(6).enumerate().any(|(i, w)| {
        w == b"\\u0000" && bytes[..i].iter().rev().take_while(|b| **b == b'\\').count() % 2 == 0
    })
}

/// Parses a JSON object body; an empty body counts as `{}` (action endpoints get
/// `Content-Length: 0`).
/// NUL characters are refused on every store alike (Postgres text cannot hold them).
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        bytes
    };
    // Every request body is an object; serde would otherwise read a struct from an array of
    // its fields in declaration order (`[null, null]` as an update clearing a description).
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::invalid("request body must be a JSON object"));
    }
    if has_escaped_nul(bytes) {
        return Err(ApiError::invalid(
            "request body must not contain NUL (\\u0000) characters",
        ));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::invalid(format!("request body is not valid JSON: {inner}"))
        } else if path == "." {
            ApiError::invalid(format!("invalid request body: {inner}"))
        } else {
            ApiError::invalid(format!("invalid request body at `{path}`: {inner}"))
        }
    })
}

/// The raw query string as ordered key/value pairs.
#[derive(Debug, Clone, Default)]
pub struct QueryParams(Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(QueryParams::parse(parts.uri.query().unwrap_or("")))
    }
}

impl QueryParams {
    /// Parses a URL query string.
    pub fn parse(q: &str) -> Self {
        QueryParams(form_urlencoded::parse(q.as_bytes()).into_owned().collect())
    }

    /// The last value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of an array parameter, sent as `key[]=v` (or `key=v`) repeated.
    pub fn all(&self, key: &str) -> Vec<String> {
        let bracketed = format!("{key}[]");
        self.0
            .iter()
            .filter(|(k, _)| k == key || *k == bracketed)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// An integer parameter within `min..=max`.
    pub fn int(&self, key: &str, min: i64, max: i64) -> Result<Option<i64>, ApiError> {
        let Some(raw) = self.get(key) else {
            return Ok(None);
        };
        match raw.trim().parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(ApiError::invalid(format!(
                "`{key}` must be an integer between {min} and {max}"
            ))),
        }
    }

    /// A boolean parameter (`true`/`false`).
    pub fn bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some("true") | Some("True") | Some("1") => Ok(Some(true)),
            Some("false") | Some("False") | Some("0") => Ok(Some(false)),
            Some(_) => Err(ApiError::invalid(format!(
                "`{key}` must be `true` or `false`"
            ))),
        }
    }

    /// An RFC 3339 timestamp parameter.
    pub fn time(&self, key: &str) -> Result<Option<Micros>, ApiError> {
        let Some(raw) = self.get(key) else {
            return Ok(None);
        };
        time::parse(raw)
            .map(Some)
            .ok_or_else(|| ApiError::invalid(format!("`{key}` must be an RFC 3339 timestamp")))
    }

    /// `limit`, defaulted and bounded.
    pub fn limit(&self, default: i64, max: i64) -> Result<i64, ApiError> {
        Ok(self.int("limit", 1, max)?.unwrap_or(default))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_escapes() {
        assert!(has_escaped_nul(br#"{"a":"x\u0000"}"#));
        assert!(
            !has_escaped_nul(br#"{"a":"x\\u0000"}"#),
            "an escaped backslash then text"
        );
        assert!(has_escaped_nul(br#"{"a":"\\\u0000"}"#));
        assert!(!has_escaped_nul(br#"{"a":"u0000"}"#));
    }

    #[test]
    fn sdk_encoding() {
        let q = QueryParams::parse(
            "types%5B%5D=a&types%5B%5D=b&created_at%5Bgte%5D=2026-01-01T00%3A00%3A00%2B00%3A00&limit=5",
        );
        assert_eq!(q.all("types"), vec!["a", "b"]);
        assert!(q.time("created_at[gte]").unwrap().is_some());
        assert_eq!(q.limit(20, 100).unwrap(), 5);
        assert!(QueryParams::parse("limit=0").limit(20, 100).is_err());
        assert!(QueryParams::parse("limit=101").limit(20, 100).is_err());
    }
}
