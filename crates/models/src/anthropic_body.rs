//! The Messages API request body, serialised straight from a [`ModelRequest`]: the
//! conversation is borrowed, not copied into a JSON tree first, so a request deep into a long
//! session costs its serialisation only. Cache breakpoints go on the system prompt, the last
//! tool and the newest content block (which alone is copied, to carry its breakpoint), so
//! each request reuses the previous one's prefix.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::ModelRequest;
use mast_domain::model_config::EffortLevel;

/// A request body borrowing from its [`ModelRequest`].
#[derive(Serialize)]
pub struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    stream: bool,
    messages: Vec<Message<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<[SystemBlock<'a>; 1]>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<OutputConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    speed: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inference_geo: Option<&'a str>,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: Cow<'a, [Value]>,
}

#[derive(Serialize)]
struct SystemBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    cache_control: Ephemeral,
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Ephemeral>,
}

#[derive(Serialize)]
struct OutputConfig {
    effort: EffortLevel,
}

/// `{"type": "ephemeral"}`: a prompt-cache breakpoint.
#[derive(Serialize)]
struct Ephemeral {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: Ephemeral = Ephemeral { kind: "ephemeral" };

impl<'a> Body<'a> {
    /// The body of `req`.
    pub fn of(req: &'a ModelRequest) -> Self {
        let last = req.messages.len().saturating_sub(1);
        let messages = req
            .messages
            .iter()
            .enumerate()
            .map(|(i, m)| Message {
                role: m.role.as_str(),
                content: if i == last {
                    Cow::Owned(with_breakpoint(&m.content))
                } else {
                    Cow::Borrowed(&m.content)
                },
            })
            .collect();
        let last_tool = req.tools.len().saturating_sub(1);
        Body {
            model: &req.model,
            max_tokens: req.max_tokens,
            stream: true,
            messages,
            system: req.system.as_deref().filter(|s| !s.is_empty()).map(|text| {
                [SystemBlock {
                    kind: "text",
                    text,
                    cache_control: EPHEMERAL,
                }]
            }),
            tools: req
                .tools
                .iter()
                .enumerate()
                .map(|(i, t)| Tool {
                    name: &t.name,
                    description: &t.description,
                    input_schema: &t.input_schema,
                    cache_control: (i == last_tool).then_some(EPHEMERAL),
                })
                .collect(),
            // `high` is every model's default; only send a different level, so models
            // without effort support keep working with the default.
            output_config: req
                .effort
                .filter(|e| *e != EffortLevel::High)
                .map(|effort| OutputConfig { effort }),
            speed: req.fast.then_some("fast"),
            inference_geo: req.inference_geo.as_deref(),
        }
    }
}

/// A copy of `content` whose last block (an object) carries a cache breakpoint.
fn with_breakpoint(content: &[Value]) -> Vec<Value> {
    let mut content = content.to_vec();
    if let Some(o) = content.last_mut().and_then(Value::as_object_mut) {
        o.insert(
            "cache_control".into(),
            serde_json::json!({"type": "ephemeral"}),
        );
    }
    content
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{Message as Msg, Role, ToolDef};

    fn request() -> ModelRequest {
        let text = |t: &str| json!({"type": "text", "text": t});
        let tool = |name: &str| ToolDef {
            name: name.into(),
            description: format!("{name} it"),
            input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        };
        ModelRequest {
            model: "claude-x".into(),
            system: Some("Be brief.".into()),
            messages: vec![
                Msg {
                    role: Role::User,
                    content: vec![text("one")],
                },
                Msg {
                    role: Role::Assistant,
                    content: vec![text("two")],
                },
                Msg {
                    role: Role::User,
                    content: vec![text("three"), text("four")],
                },
            ],
            tools: std::sync::Arc::new(vec![tool("a"), tool("b")]),
            max_tokens: 1000,
            effort: Some(EffortLevel::Low),
            fast: true,
            inference_geo: Some("us".into()),
            sized: Default::default(),
        }
    }

    #[test]
    fn the_body_is_the_messages_api_request_with_its_breakpoints() {
        let req = request();
        let body = serde_json::to_value(Body::of(&req)).unwrap();
        let schema = json!({"type": "object", "properties": {"q": {"type": "string"}}});
        assert_eq!(
            body,
            json!({
                "model": "claude-x",
                "max_tokens": 1000,
                "stream": true,
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "one"}]},
                    {"role": "assistant", "content": [{"type": "text", "text": "two"}]},
                    {"role": "user", "content": [
                        {"type": "text", "text": "three"},
                        {"type": "text", "text": "four", "cache_control": {"type": "ephemeral"}},
                    ]},
                ],
                "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
                "tools": [
                    {"name": "a", "description": "a it", "input_schema": schema},
                    {"name": "b", "description": "b it", "input_schema": schema, "cache_control": {"type": "ephemeral"}},
                ],
                "output_config": {"effort": "low"},
                "speed": "fast",
                "inference_geo": "us",
            })
        );
        // The request itself is left as it was.
        assert!(req.messages[2].content[1].get("cache_control").is_none());
    }

    #[test]
    fn optional_parts_are_left_out() {
        let mut req = request();
        req.system = Some(String::new());
        req.tools = Default::default();
        req.effort = Some(EffortLevel::High);
        req.fast = false;
        req.inference_geo = None;
        req.messages.truncate(1);
        let body = serde_json::to_value(Body::of(&req)).unwrap();
        for absent in ["system", "tools", "output_config", "speed", "inference_geo"] {
            assert!(body.get(absent).is_none(), "{absent} in {body}");
        }
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [
                {"type": "text", "text": "one", "cache_control": {"type": "ephemeral"}},
            ]}])
        );
    }
}
