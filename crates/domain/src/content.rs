//! Content blocks and their sources: validation of what clients send, per the
//! place the block appears.

use base64::Engine as _;
use serde_json::{Value, json};

use super::fields::{Obj, must_be, tag};
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

/// Media types an image block may carry.
pub const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];
/// Upper bound on one text block, so a single event cannot balloon the log.
pub const MAX_TEXT_CHARS: usize = 1_000_000;

/// Opening tag under which a `system.message`'s text reaches every model, closed by
/// `</system-message>`; models (the scripted one included) tell it from the user's words by it.
pub const SYSTEM_PREFIX: &str = "<system-message>";

fn text_block(at: &str, v: &Value, place: Place) -> Valid<Value> {
    let o = Obj::new(at, v, "a text block", &["type", "text"])?;
    let text = o
        .str("text")?
        .ok_or_else(|| Invalid::new(format!("`{at}.text` is required and must be a string")))?;
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

fn source(at: &str, v: Option<&Value>, document: bool) -> Valid<Value> {
    let Some(v) = v else {
        return Err(Invalid::new(format!("`{at}` is required")));
    };
    let kinds: &[&str] = if document {
        &["base64", "text", "url", "file"]
    } else {
        &["base64", "url", "file"]
    };
    let required = |o: &Obj, key: &str| -> Valid<String> {
        o.str(key)?.map(str::to_string).ok_or_else(|| {
            Invalid::new(format!(
                "`{}` is required and must be a string",
                o.path(key)
            ))
        })
    };
    match tag(at, v, kinds)? {
        "base64" => {
            let o = Obj::new(at, v, "a base64 source", &["type", "media_type", "data"])?;
            let media = required(&o, "media_type")?;
            let ok = if document {
                media == "application/pdf"
            } else {
                IMAGE_TYPES.contains(&media.as_str())
            };
            if !ok {
                let allowed = if document {
                    "application/pdf".to_string()
                } else {
                    IMAGE_TYPES.join(", ")
                };
                return Err(Invalid::new(format!(
                    "`{at}.media_type` must be one of {allowed}"
                )));
            }
            let data = required(&o, "data")?;
            if base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .is_err()
            {
                return Err(Invalid::new(format!("`{at}.data` is not valid base64")));
            }
            Ok(json!({"type": "base64", "media_type": media, "data": data}))
        }
        "text" => {
            let o = Obj::new(
                at,
                v,
                "a plain text source",
                &["type", "media_type", "data"],
            )?;
            if let Some(media) = o.str("media_type")?
                && media != "text/plain"
            {
                return Err(Invalid::new(format!(
                    "`{at}.media_type` must be `text/plain`"
                )));
            }
            let data = required(&o, "data")?;
            Ok(json!({"type": "text", "media_type": "text/plain", "data": data}))
        }
        "url" => {
            let o = Obj::new(at, v, "a URL source", &["type", "url"])?;
            let url = required(&o, "url")?;
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(Invalid::new(format!("`{at}.url` must be an http(s) URL")));
            }
            Ok(json!({"type": "url", "url": url}))
        }
        _ => {
            // Whether the file exists, and fits the block, is the engine's check (it needs
            // the store); see `engine::file_sources`.
            let o = Obj::new(at, v, "a file source", &["type", "file_id"])?;
            let id = required(&o, "file_id")?;
            if id.is_empty() {
                return Err(Invalid::new(format!("`{at}.file_id` must not be empty")));
            }
            Ok(json!({"type": "file", "file_id": id}))
        }
    }
}

fn block(at: &str, v: &Value, place: Place) -> Valid<Value> {
    if !v.is_object() {
        return Err(must_be(at, "a content block object", v));
    }
    let allowed: &[&str] = match place {
        Place::UserMessage => &["text", "image", "document"],
        Place::ToolResult => &["text", "image", "document", "search_result"],
        Place::System => &["text"],
    };
    if v.get("type").and_then(Value::as_str) == Some("redacted") && place == Place::UserMessage {
        return Err(Invalid::new(format!(
            "`{at}`: clients cannot send `redacted` blocks"
        )));
    }
    match tag(at, v, allowed)? {
        "text" => text_block(at, v, place),
        "image" => {
            let o = Obj::new(at, v, "an image block", &["type", "source"])?;
            Ok(
                json!({"type": "image", "source": source(&o.path("source"), o.get("source"), false)?}),
            )
        }
        "document" => {
            let o = Obj::new(
                at,
                v,
                "a document block",
                &["type", "source", "title", "context"],
            )?;
            let mut d = json!({"type": "document", "source": source(&o.path("source"), o.get("source"), true)?});
            for key in ["title", "context"] {
                if let Some(s) = o.str(key)? {
                    d[key] = s.into();
                }
            }
            Ok(d)
        }
        _ => {
            let o = Obj::new(
                at,
                v,
                "a search result block",
                &["type", "source", "title", "content", "citations"],
            )?;
            let required = |key: &str| {
                o.str(key)?.ok_or_else(|| {
                    Invalid::new(format!(
                        "`{}` is required and must be a string",
                        o.path(key)
                    ))
                })
            };
            let src = required("source")?;
            let title = required("title")?;
            let content = o.list("content")?.ok_or_else(|| {
                Invalid::new(format!("`{at}.content` must be a list of text blocks"))
            })?;
            let content = content
                .iter()
                .enumerate()
                .map(|(i, c)| block(&format!("{at}.content[{i}]"), c, Place::System))
                .collect::<Valid<Vec<_>>>()?;
            let enabled = match o.get("citations") {
                None => false,
                Some(c) => Obj::new(&o.path("citations"), c, "a citations setting", &["enabled"])?
                    .bool("enabled")?
                    .unwrap_or(false),
            };
            Ok(
                json!({"type": "search_result", "source": src, "title": title, "content": content, "citations": {"enabled": enabled}}),
            )
        }
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
        let extra = json!([{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]);
        let e = validate("c", Some(&extra), Place::UserMessage, 1, 100).unwrap_err();
        assert_eq!(e.details["field"], "c[0].cache_control");
        let file = json!([{"type":"image","source":{"type":"file","file_id":"file_x"}}]);
        let v = validate("c", Some(&file), Place::UserMessage, 1, 100).unwrap();
        assert_eq!(v[0]["source"], json!({"type":"file","file_id":"file_x"}));
        let no_id = json!([{"type":"document","source":{"type":"file"}}]);
        assert!(validate("c", Some(&no_id), Place::ToolResult, 1, 100).is_err());
    }
}
