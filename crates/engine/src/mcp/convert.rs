//! An MCP tool result's content as the API's content blocks (`agent.mcp_tool_result`):
//! text stays text, images become base64 image blocks, and anything else (audio, embedded
//! resources, links) is passed on as its JSON in a text block, so the model still sees it.

use serde_json::{Value, json};

use mast_domain::content;

/// The content blocks of one MCP result, from its wire JSON (`content` items).
pub fn blocks(items: &[Value]) -> Vec<Value> {
    items.iter().map(block).collect()
}

fn block(item: &Value) -> Value {
    let text = |k: &str| item.get(k).and_then(Value::as_str);
    match text("type") {
        Some("text") => content::text(text("text").unwrap_or_default()),
        Some("image") if text("data").is_some() => json!({
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": text("mimeType").unwrap_or("image/png"),
                "data": text("data").unwrap_or_default(),
            }
        }),
        _ => content::text(item.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_images_and_the_rest() {
        let out = blocks(&[
            json!({"type":"text","text":"hi"}),
            json!({"type":"image","data":"AAAA","mimeType":"image/jpeg"}),
            json!({"type":"resource_link","uri":"file:///x","name":"x"}),
        ]);
        assert_eq!(out[0], json!({"type":"text","text":"hi"}));
        assert_eq!(out[1]["source"]["media_type"], "image/jpeg");
        assert_eq!(out[2]["type"], "text");
        assert!(out[2]["text"].as_str().unwrap().contains("file:///x"));
    }
}
