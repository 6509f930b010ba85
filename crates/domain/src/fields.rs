//! Reading request JSON by hand, for the parts of bodies whose shape depends on a `type` tag
//! or on which serde would lose the path: every object goes through [`Obj`], which refuses
//! keys it does not know, and every type error names the path and the shape expected.

use serde_json::{Map, Value};

use super::invalid::{Invalid, Valid, join};

/// How a JSON value is called in messages ("got a string").
pub fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// "`path` must be `expected` (got …)".
pub fn must_be(path: &str, expected: &str, got: &Value) -> Invalid {
    Invalid::new(format!(
        "`{path}` must be {expected} (got {})",
        describe(got)
    ))
}

/// "`path` must be one of `a`, `b` (got `x`)".
pub fn one_of(path: &str, allowed: &[&str], got: &str) -> Invalid {
    Invalid::new(format!(
        "`{path}` must be one of {} (got `{got}`)",
        quoted(allowed)
    ))
}

/// `a`, `b`, `c` with backticks.
pub fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `type` of the tagged object `v` at `at`, checked against `allowed`; read first, since
/// it decides which other keys the object may have.
pub fn tag<'a>(at: &str, v: &'a Value, allowed: &[&str]) -> Valid<&'a str> {
    let Some(o) = v.as_object() else {
        return Err(must_be(at, "an object", v));
    };
    let path = join(at, "type");
    match o.get("type") {
        None | Some(Value::Null) => Err(Invalid::new(format!(
            "`{path}` is required: one of {}",
            quoted(allowed)
        ))),
        Some(Value::String(t)) if allowed.contains(&t.as_str()) => Ok(t.as_str()),
        Some(Value::String(t)) => Err(one_of(&path, allowed, t)),
        Some(other) => Err(must_be(
            &path,
            &format!("one of {}", quoted(allowed)),
            other,
        )),
    }
}

/// Accepts a list field for a feature Mast does not have only when it asks for nothing:
/// absent, `null` or `[]` (what SDKs and echoed objects send). `why` says what is missing.
pub fn nothing_or_unsupported(
    path: &str,
    v: Option<&Value>,
    feature: &str,
    why: &str,
) -> Valid<()> {
    match v {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(a)) if a.is_empty() => Ok(()),
        Some(Value::Array(_)) => Err(Invalid::unsupported(
            path,
            feature,
            &format!("{why}; remove it (or send `[]`)"),
        )),
        Some(other) => Err(must_be(path, "a list", other)),
    }
}

/// An object of a request body at a known path, its keys already checked.
#[derive(Debug, Clone)]
pub struct Obj<'a> {
    at: String,
    map: &'a Map<String, Value>,
}

impl<'a> Obj<'a> {
    /// Reads `v` (at `at`) as `what`, an object with no keys but `known`.
    pub fn new(at: &str, v: &'a Value, what: &str, known: &[&str]) -> Valid<Self> {
        let Some(map) = v.as_object() else {
            return Err(must_be(at, "an object", v));
        };
        if let Some(k) = map.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(Invalid::unknown_field(at, k, what, known));
        }
        Ok(Obj {
            at: at.to_string(),
            map,
        })
    }

    /// This object's path.
    pub fn at(&self) -> &str {
        &self.at
    }

    /// The path of one of its keys.
    pub fn path(&self, key: &str) -> String {
        join(&self.at, key)
    }

    /// The value of `key`; absent and `null` alike are `None`.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// The raw value of `key`, `null` included (for tri-state updates).
    pub fn raw(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    /// An optional string.
    pub fn str(&self, key: &str) -> Valid<Option<&'a str>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(must_be(&self.path(key), "a string", v)),
        }
    }

    /// A required, non-empty string.
    pub fn req_str(&self, key: &str) -> Valid<&'a str> {
        match self.str(key)? {
            None => Err(Invalid::new(format!("`{}` is required", self.path(key)))),
            Some("") => Err(Invalid::new(format!(
                "`{}` must not be empty",
                self.path(key)
            ))),
            Some(s) => Ok(s),
        }
    }

    /// An optional boolean.
    pub fn bool(&self, key: &str) -> Valid<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(must_be(&self.path(key), "a boolean", v)),
        }
    }

    /// An optional integer.
    pub fn int(&self, key: &str) -> Valid<Option<i64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| must_be(&self.path(key), "an integer", v)),
        }
    }

    /// An optional list.
    pub fn list(&self, key: &str) -> Valid<Option<&'a Vec<Value>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(must_be(&self.path(key), "a list", v)),
        }
    }

    /// An optional list of strings.
    pub fn strings(&self, key: &str) -> Valid<Option<Vec<String>>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let bad = || must_be(&self.path(key), "a list of strings", v);
        let list = v.as_array().ok_or_else(bad)?;
        list.iter()
            .enumerate()
            .map(|(i, s)| match s {
                Value::String(s) => Ok(s.clone()),
                other => Err(must_be(
                    &format!("{}[{i}]", self.path(key)),
                    "a string",
                    other,
                )),
            })
            .collect::<Valid<Vec<_>>>()
            .map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_refuse_unknown_keys_and_name_types() {
        let v = json!({"type": "limited", "allowed_host": []});
        let e = Obj::new(
            "config.networking",
            &v,
            "a limited network config",
            &["type", "allowed_hosts"],
        )
        .unwrap_err();
        assert_eq!(e.details["field"], "config.networking.allowed_host");
        assert_eq!(e.details["suggestion"], "allowed_hosts");
        let v = json!({"a": 1, "b": [1], "c": null});
        let o = Obj::new("x", &v, "a thing", &["a", "b", "c"]).unwrap();
        assert_eq!(
            o.str("a").unwrap_err().message,
            "`x.a` must be a string (got an integer)"
        );
        assert_eq!(
            o.strings("b").unwrap_err().message,
            "`x.b[0]` must be a string (got an integer)"
        );
        assert_eq!(o.str("c").unwrap(), None);
        assert_eq!(o.req_str("c").unwrap_err().message, "`x.c` is required");
        assert_eq!(
            tag("t", &json!({"type": "x"}), &["a", "b"])
                .unwrap_err()
                .message,
            "`t.type` must be one of `a`, `b` (got `x`)"
        );
    }
}
