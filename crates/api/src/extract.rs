//! Extractors whose rejections are API errors: a JSON body with path-precise messages (and
//! no key unknown or sent twice), no body for action endpoints, and query strings in the
//! SDK's encoding (`types[]=a&types[]=b`, `created_at[gte]=...`).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::error::ApiError;
use mast_domain::fields::{describe, must_be, one_of};
use mast_domain::invalid::{Invalid, join};
use mast_domain::time::{self, Micros};

/// A JSON request body, sent as `Content-Type: application/json`; it must parse, and errors
/// name the offending path.
pub struct Json<T>(pub T);

/// Refuses a body that is not declared JSON (415). A browser sends `text/plain`, form and
/// multipart bodies to another site without asking it first, so a server that read them as
/// JSON could be driven by any web page its user visits. An empty body (an action endpoint's)
/// needs no type.
fn require_json(
    content_type: Option<&axum::http::HeaderValue>,
    body: &[u8],
) -> Result<(), ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    let declared = content_type.and_then(|v| v.to_str().ok()).unwrap_or("");
    let essence = declared
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
    {
        return Ok(());
    }
    let got = if declared.is_empty() {
        "no `Content-Type`".to_string()
    } else {
        format!("`Content-Type: {declared}`")
    };
    Err(ApiError::invalid(format!(
        "request bodies are JSON and must be sent with `Content-Type: application/json`, not {got}"
    ))
    .with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE))
}

/// The error for an upload whose body could not be opened as `multipart/form-data`: 415 when
/// it was not declared as such (see [`require_json`] for why types matter), else 400.
pub fn multipart_refusal(
    rejection: axum::extract::multipart::MultipartRejection,
    expected: &str,
) -> ApiError {
    let error = ApiError::invalid(format!(
        "the body must be multipart/form-data with {expected}: {}",
        rejection.body_text()
    ));
    match rejection {
        axum::extract::multipart::MultipartRejection::InvalidBoundary(_) => {
            error.with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE)
        }
        _ => error,
    }
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = req.headers().get(axum::http::header::CONTENT_TYPE).cloned();
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::too_large("request body is too large")
            } else {
                ApiError::invalid(format!("could not read request body: {e}"))
            }
        })?;
        require_json(content_type.as_ref(), &bytes)?;
        parse_json(&bytes).map(Json)
    }
}

/// Whether JSON text escapes a NUL character (`\u0000` not itself behind a backslash).
fn has_escaped_nul(bytes: &[u8]) -> bool {
    bytes.windows(6).enumerate().any(|(i, w)| {
        w == b"\\u0000" && bytes[..i].iter().rev().take_while(|b| **b == b'\\').count() % 2 == 0
    })
}

/// Reads a request body into a JSON object, refusing what a lenient parser would quietly
/// resolve: an empty body counts as `{}` (action endpoints get `Content-Length: 0`), a body
/// that is not an object, NUL characters (Postgres text cannot hold them, so every store
/// refuses them alike) and keys sent twice in one object.
pub fn read_object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
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
    let duplicate = std::cell::RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = StrictValue {
        at: None,
        duplicate: &duplicate,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    match (value, duplicate.into_inner()) {
        (_, Some(path)) => Err(Invalid::duplicate_field(&path).into()),
        (Ok(Value::Object(map)), None) => Ok(map),
        (Ok(_), None) => Err(ApiError::invalid("request body must be a JSON object")),
        (Err(e), None) => Err(ApiError::invalid(format!(
            "request body is not valid JSON: {e}"
        ))),
    }
}

/// Parses a JSON object body into a request type. Errors name the path in API terms:
/// unknown keys (with the key probably meant), missing fields, and the JSON type expected —
/// never a Rust type or a parser position.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let body = Value::Object(read_object(bytes)?);
    serde_path_to_error::deserialize(&body).map_err(|e| {
        let path = e.path().to_string();
        explain(&path, &e.into_inner().to_string(), &body).into()
    })
}

/// A body for endpoints that take none (`/archive`, `/ack`, …): nothing, or `{}`.
pub struct NoBody;

impl<S: Send + Sync> FromRequest<S> for NoBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = req.headers().get(axum::http::header::CONTENT_TYPE).cloned();
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::invalid(format!("could not read request body: {e}")))?;
        require_json(content_type.as_ref(), &bytes)?;
        let map = read_object(&bytes)?;
        match map.keys().next() {
            None => Ok(NoBody),
            Some(key) => Err(Invalid::with_code(
                "unknown_field",
                format!(
                    "`{key}` is not a known field: this endpoint takes no body (send nothing, or `{{}}`)"
                ),
            )
            .detail("field", key.as_str())
            .into()),
        }
    }
}

/// Where the parse stands: the path of the value being read, as a chain back to the body.
struct Seg<'a> {
    parent: Option<&'a Seg<'a>>,
    key: SegKey<'a>,
}

enum SegKey<'a> {
    Field(&'a str),
    Index(usize),
}

fn render(seg: Option<&Seg>) -> String {
    let mut parts = Vec::new();
    let mut cur = seg;
    while let Some(s) = cur {
        parts.push(s);
        cur = s.parent;
    }
    let mut out = String::new();
    for s in parts.into_iter().rev() {
        match s.key {
            SegKey::Field(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            SegKey::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Builds a [`Value`] like serde_json does, but stops at the first key an object repeats
/// (recording its path), where serde_json would keep the last value silently.
struct StrictValue<'a, 'p> {
    at: Option<&'a Seg<'a>>,
    duplicate: &'p std::cell::RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for StrictValue<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        loop {
            let seg = Seg {
                parent: self.at,
                key: SegKey::Index(out.len()),
            };
            let item = StrictValue {
                at: Some(&seg),
                duplicate: self.duplicate,
            };
            match seq.next_element_seed(item)? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let seg = Seg {
                parent: self.at,
                key: SegKey::Field(&key),
            };
            if out.contains_key(&key) {
                *self.duplicate.borrow_mut() = Some(render(Some(&seg)));
                return Err(serde::de::Error::custom("duplicate key"));
            }
            let v = map.next_value_seed(StrictValue {
                at: Some(&seg),
                duplicate: self.duplicate,
            })?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// Says what a serde error means in API terms. Only the top-level request structs are read
/// with serde (their structured fields are `Value`s read by hand), so the cases are few:
/// unknown and missing keys, a value of the wrong JSON type, an enum value out of range.
fn explain(path: &str, msg: &str, body: &Value) -> Invalid {
    let at = if path == "." { "" } else { path };
    let ticked: Vec<&str> = msg.split('`').skip(1).step_by(2).collect();
    if let Some(rest) = msg.strip_prefix("unknown field ") {
        // `at` is the unknown key itself; serde lists the known ones after "expected".
        let key = ticked.first().copied().unwrap_or(rest);
        let parent = at.strip_suffix(key).unwrap_or("").trim_end_matches('.');
        let what = if parent.is_empty() {
            "the request body".to_string()
        } else {
            format!("`{parent}`")
        };
        return Invalid::unknown_field(parent, key, &what, &ticked[1..]);
    }
    if msg.starts_with("missing field ") {
        let key = ticked.first().copied().unwrap_or("?");
        return Invalid::new(format!("`{}` is required", join(at, key)));
    }
    if msg.starts_with("unknown variant ") {
        let got = ticked.first().copied().unwrap_or("?");
        return one_of(at, &ticked[1..], got);
    }
    let got = body.pointer(&pointer(at)).unwrap_or(&Value::Null);
    let expected = msg.split_once(", expected ").map_or("", |(_, e)| e);
    match (msg.starts_with("invalid value: "), wanted(expected)) {
        (true, Some("an integer")) => Invalid::new(format!("`{at}` is out of range")),
        (_, Some(w)) => must_be(at, w, got),
        (_, None) => Invalid::new(format!("`{at}` has the wrong type (got {})", describe(got))),
    }
}

/// A serde "expected …" in API terms, for the types request structs are made of.
fn wanted(expected: &str) -> Option<&'static str> {
    Some(match expected {
        "a string" => "a string",
        "a boolean" => "a boolean",
        "a sequence" => "a list",
        "a map" => "an object",
        "i8" | "i16" | "i32" | "i64" | "u8" | "u16" | "u32" | "u64" | "usize" | "isize" => {
            "an integer"
        }
        "f32" | "f64" => "a number",
        // The `expecting` texts of the request structs ("an agent object").
        e if e.ends_with(" object") || e.starts_with("an object") => "an object",
        _ => return None,
    })
}

/// A JSON pointer for a serde path (`a.b[0]` → `/a/b/0`).
fn pointer(path: &str) -> String {
    let mut out = String::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let mut pieces = part.split('[');
        if let Some(key) = pieces.next()
            && !key.is_empty()
        {
            out.push('/');
            out.push_str(&key.replace('~', "~0").replace('/', "~1"));
        }
        for idx in pieces {
            out.push('/');
            out.push_str(idx.trim_end_matches(']'));
        }
    }
    out
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

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        name: String,
        #[serde(default)]
        count: Option<i64>,
        #[serde(default)]
        tags: Option<Vec<String>>,
        #[serde(default)]
        scope: Option<Scope>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Scope {
        Organization,
        Account,
    }

    fn message(body: &str) -> String {
        parse_json::<Body>(body.as_bytes()).unwrap_err().message
    }

    #[test]
    fn serde_errors_in_api_terms() {
        assert_eq!(
            message(r#"{"name":"a","cuont":1}"#),
            "`cuont` is not a known field of the request body; did you mean `count`?"
        );
        assert_eq!(message("{}"), "`name` is required");
        assert_eq!(
            message(r#"{"name":5}"#),
            "`name` must be a string (got an integer)"
        );
        assert_eq!(
            message(r#"{"name":"a","count":"x"}"#),
            "`count` must be an integer (got a string)"
        );
        assert_eq!(
            message(r#"{"name":"a","tags":[1]}"#),
            "`tags[0]` must be a string (got an integer)"
        );
        assert_eq!(
            message(r#"{"name":"a","tags":{}}"#),
            "`tags` must be a list (got an object)"
        );
        assert_eq!(
            message(r#"{"name":"a","scope":"world"}"#),
            "`scope` must be one of `organization`, `account` (got `world`)"
        );
        assert_eq!(
            message(r#"{"name":"a","scope":5}"#),
            "`scope` has the wrong type (got an integer)"
        );
        assert_eq!(
            message(r#"{"name":"a","count":1.5}"#),
            "`count` must be an integer (got a number)"
        );
        assert_eq!(
            message(r#"{"name":"a","count":18446744073709551615}"#),
            "`count` is out of range"
        );
        assert_eq!(
            message(r#"{"name":"a","tags":["x"],"tags":[]}"#),
            "`tags` appears more than once; send each field once"
        );
        assert_eq!(
            message(r#"{"name":"a","x":{"y":[{"z":1,"z":2}]}}"#),
            "`x.y[0].z` appears more than once; send each field once"
        );
        assert!(message(r#"{"name": "#).starts_with("request body is not valid JSON"));
        assert_eq!(message("[1]"), "request body must be a JSON object");
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
