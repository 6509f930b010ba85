//! Content blocks and their sources (API.md §4.4): validation of what clients send, per the
//! place the block appears.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::invalid::{Invalid, Valid};

/// Where a content list appears; decides which block types are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// `user.message.content`: text, image, document.
    UserMessage,
    /// Tool results (custom, self-hosted): text, image, document, search_result.
    ToolResult,
    /// `system.message.content`: text only.
    System,
}

const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];
/// Upper bound on one text block, so a single event cannot balloon the log.
pub const MAX_TEXT_CHARS: usize = 1_000_000;

fn field<'a>(o: &'a Map<String, Value>, at: &str, key: &str) -> Valid<&'a str> {
    o.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| Invalid::new(format!("`{at}.{key}` is required and must be a string")))
}

fn text_block(at: &str, o: &Map<String, Value>, place: Place) -> Valid<Value> {
    let text = field(o, at, "text")?;
    // Models reject blank text blocks, and one in the log would fail every later turn.
    if place != Place::ToolResult && text.trim().is_empty() {
        return Err(Invalid::new(format!("`{at}.text` must not be empty")));
    }
    if text.len() > MAX_TEXT_CHARS {
        return Err(Invalid::new(format!(
            "`{at}.text` is longer than {MAX_TEXT_CHARS} bytes"
        )));
    }
    Ok(json!({"type": "text", "text": text}))
}

fn source(at: &str, o: &Map<String, Value>, document: bool) -> Valid<Value> {
    let s = o
        .get("source")
        .and_then(Value::as_object)
        .ok_or_else(|| Invalid::new(format!("`{at}.source` is required")))?;
    let sat = format!("{at}.source");
    match s.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let media = field(s, &sat, "media_type")?;
            let ok = if document {
                media == "application/pdf"
            } else {
                IMAGE_TYPES.contains(&media)
            };
            if !ok {
                let allowed = if document {
                    "application/pdf".to_string()
                } else {
                    IMAGE_TYPES.join(", ")
                };
                return Err(Invalid::new(format!(
                    "`{sat}.media_type` must be one of {allowed}"
                )));
            }
            let data = field(s, &sat, "data")?;
            if base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .is_err()
            {
                return Err(Invalid::new(format!("`{sat}.data` is not valid base64")));
            }
            Ok(json!({"type": "base64", "media_type": media, "data": data}))
        }
        Some("text") if document => {
            let data = field(s, &sat, "data")?;
            Ok(json!({"type": "text", "media_type": "text/plain", "data": data}))
        }
        Some("url") => {
            let url = field(s, &sat, "url")?;
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(Invalid::new(format!("`{sat}.url` must be an http(s) URL")));
            }
            Ok(json!({"type": "url", "url": url}))
        }
        Some("file") => Err(Invalid::new(format!(
            "`{sat}`: file sources need the Files API, which this server does not provide; send base64 or url"
        ))),
        _ => Err(Invalid::new(format!(
            "`{sat}.type` must be one of base64, {}url",
            if document { "text, " } else { "" }
        ))),
    }
}

fn block(at: &str, v: &Value, place: Place) -> Valid<Value> {
    let o = v
        .as_object()
        .ok_or_else(|| Invalid::new(format!("`{at}` must be a content block object")))?;
    let kind = o.get("type").and_then(Value::as_str).unwrap_or("");
    let allowed: &[&str] = match place {
        Place::UserMessage => &["text", "image", "document"],
        Place::ToolResult => &["text", "image", "document", "search_result"],
        Place::System => &["text"],
    };
    if kind == "redacted" && place == Place::UserMessage {
        return Err(Invalid::new(format!(
            "`{at}`: clients cannot send `redacted` blocks"
        )));
    }
    if !allowed.contains(&kind) {
        return Err(Invalid::new(format!(
            "`{at}.type` must be one of {} (got `{kind}`)",
            allowed.join(", ")
        )));
    }
    match kind {
        "text" => text_block(at, o, place),
        "image" => Ok(json!({"type": "image", "source": source(at, o, false)?})),
        "document" => {
            let mut d = json!({"type": "document", "source": source(at, o, true)?});
            for key in ["title", "context"] {
                match o.get(key) {
                    None | Some(Value::Null) => {}
                    Some(Value::String(s)) => d[key] = s.clone().into(),
                    Some(_) => return Err(Invalid::new(format!("`{at}.{key}` must be a string"))),
                }
            }
            Ok(d)
        }
        "search_result" => {
            let src = field(o, at, "source")?;
            let title = field(o, at, "title")?;
            let content = o.get("content").and_then(Value::as_array).ok_or_else(|| {
                Invalid::new(format!("`{at}.content` must be a list of text blocks"))
            })?;
            let content = content
                .iter()
                .enumerate()
                .map(|(i, c)| block(&format!("{at}.content[{i}]"), c, Place::System))
                .collect::<Valid<Vec<_>>>()?;
            let enabled = o
                .get("citations")
                .and_then(|c| c.get("enabled"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            Ok(
                json!({"type": "search_result", "source": src, "title": title, "content": content, "citations": {"enabled": enabled}}),
            )
        }
        _ => unreachable!("checked against the allowed list"),
    }
}

/// Validates a content list for `place` and returns it normalised (known keys only).
/// `min` is the least number of blocks accepted.
pub fn validate(
    at: &str,
    v: Option<&Value>,
    place: Place,
    min: usize,
    max: usize,
) -> Valid<Vec<Value>> {
    let list = match v {
        None | Some(Value::Null) if min == 0 => return Ok(vec![]),
        Some(Value::Array(a)) => a,
        _ => {
            return Err(Invalid::new(format!(
                "`{at}` must be a list of content blocks"
            )));
        }
    };
    if list.len() < min || list.len() > max {
        return Err(Invalid::new(format!(
            "`{at}` must have between {min} and {max} blocks (got {})",
            list.len()
        )));
    }
    list.iter()
        .enumerate()
        .map(|(i, b)| block(&format!("{at}[{i}]"), b, place))
        .collect()
}

/// A single text block.
pub fn text(s: impl Into<String>) -> Value {
    json!({"type": "text", "text": s.into()})
}

/// The plain text of a content list (text blocks joined by newlines).
pub fn plain_text(blocks: &[Value]) -> String {
    blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_place_rules() {
        let img = json!([{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]);
        assert!(validate("c", Some(&img), Place::UserMessage, 1, 100).is_ok());
        assert!(validate("c", Some(&img), Place::System, 1, 100).is_err());
        let red = json!([{"type":"redacted"}]);
        assert!(validate("c", Some(&red), Place::UserMessage, 1, 100).is_err());
        assert!(validate("c", Some(&json!([])), Place::UserMessage, 1, 100).is_err());
        let sr = json!([{"type":"search_result","source":"https://x","title":"t","content":[{"type":"text","text":"a"}]}]);
        let v = validate("c", Some(&sr), Place::ToolResult, 0, 100).unwrap();
        assert_eq!(v[0]["citations"], json!({"enabled": false}));
        assert!(
            validate("c", None, Place::ToolResult, 0, 100)
                .unwrap()
                .is_empty()
        );
        let bad = json!([{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"AA=="}}]);
        assert!(validate("c", Some(&bad), Place::UserMessage, 1, 100).is_err());
    }
}
