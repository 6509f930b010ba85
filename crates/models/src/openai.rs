//! OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp's server, LM Studio)
//! over streaming SSE, mapped to and from the loop's Anthropic-shaped requests and responses.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::http::{parse_data, stream_events};
use super::{
    Delta, DeltaSink, ErrorKind, Message, ModelClient, ModelError, ModelRequest, ModelResponse,
    Role,
};
use mast_domain::session::ModelUsage;

/// Connection settings of one OpenAI-compatible endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Base URL including the version path, e.g. `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub read_timeout: Duration,
}

/// The chat-completions client.
pub struct OpenAiClient {
    http: reqwest::Client,
    config: OpenAiConfig,
}

fn text_of(blocks: &[Value]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b.get("type").and_then(Value::as_str) {
            Some("text") => b.get("text").and_then(Value::as_str).map(str::to_string),
            Some("search_result") => Some(format!(
                "{}\n{}",
                b.get("title").and_then(Value::as_str).unwrap_or(""),
                b.get("content")
                    .and_then(Value::as_array)
                    .map(|c| text_of(c))
                    .unwrap_or_default()
            )),
            Some("document") => match b.pointer("/source/type").and_then(Value::as_str) {
                Some("text") => b
                    .pointer("/source/data")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                _ => Some(
                    "[document omitted: this model endpoint takes text and images only]".into(),
                ),
            },
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn image_part(block: &Value) -> Option<Value> {
    let src = block.get("source")?;
    let url = match src.get("type").and_then(Value::as_str)? {
        "base64" => format!(
            "data:{};base64,{}",
            src.get("media_type")
                .and_then(Value::as_str)
                .unwrap_or("image/png"),
            src.get("data").and_then(Value::as_str).unwrap_or("")
        ),
        "url" => src.get("url").and_then(Value::as_str)?.to_string(),
        _ => return None,
    };
    Some(json!({"type": "image_url", "image_url": {"url": url}}))
}

/// User content as chat content parts (text and images), or a plain string when text only.
fn user_content(blocks: &[Value]) -> Value {
    let has_image = blocks
        .iter()
        .any(|b| b.get("type").and_then(Value::as_str) == Some("image"));
    if !has_image {
        return Value::String(text_of(blocks));
    }
    let parts: Vec<Value> = blocks
        .iter()
        .filter_map(|b| match b.get("type").and_then(Value::as_str) {
            Some("image") => image_part(b),
            _ => {
                let t = text_of(std::slice::from_ref(b));
                (!t.is_empty()).then(|| json!({"type": "text", "text": t}))
            }
        })
        .collect();
    Value::Array(parts)
}

/// Maps the conversation to chat messages: tool results become `tool` messages right after
/// the assistant message that called them; the rest of a user turn follows as a user message.
pub fn chat_messages(system: Option<&str>, messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(s) = system.filter(|s| !s.is_empty()) {
        out.push(json!({"role": "system", "content": s}));
    }
    for m in messages {
        match m.role {
            Role::User => {
                let mut rest = Vec::new();
                for b in &m.content {
                    if b.get("type").and_then(Value::as_str) == Some("tool_result") {
                        let content = match b.get("content") {
                            Some(Value::Array(c)) => text_of(c),
                            Some(Value::String(s)) => s.clone(),
                            _ => String::new(),
                        };
                        let content = if b.get("is_error").and_then(Value::as_bool) == Some(true) {
                            format!("Error: {content}")
                        } else {
                            content
                        };
                        out.push(json!({"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": content}));
                    } else {
                        rest.push(b.clone());
                    }
                }
                if !rest.is_empty() {
                    out.push(json!({"role": "user", "content": user_content(&rest)}));
                }
            }
            Role::Assistant => {
                let text = text_of(&m.content);
                let calls: Vec<Value> = m
                    .content
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                    .map(|b| {
                        json!({"id": b.get("id"), "type": "function", "function": {
                            "name": b.get("name"),
                            "arguments": b.get("input").cloned().unwrap_or_else(|| json!({})).to_string(),
                        }})
                    })
                    .collect();
                let mut msg = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { Value::String(text) }});
                if !calls.is_empty() {
                    msg["tool_calls"] = Value::Array(calls);
                }
                out.push(msg);
            }
        }
    }
    out
}

impl OpenAiClient {
    /// Builds a client for one endpoint.
    pub fn new(config: OpenAiConfig) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(config.read_timeout)
            .build()
            .expect("http client");
        OpenAiClient { http, config }
    }

    fn body(&self, req: &ModelRequest) -> Value {
        let mut body = json!({
            "model": req.model,
            "messages": chat_messages(req.system.as_deref(), &req.messages),
            "max_tokens": req.max_tokens,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if !req.tools.is_empty() {
            body["tools"] = Value::Array(
                req.tools
                    .iter()
                    .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}))
                    .collect(),
            );
        }
        body
    }
}

#[derive(Default)]
struct ToolCall {
    id: String,
    name: String,
    arguments: String,
}

/// Accumulates streamed chunks.
#[derive(Default)]
struct Accumulator {
    text: String,
    reasoning: String,
    calls: BTreeMap<u64, ToolCall>,
    finish: Option<String>,
    usage: ModelUsage,
}

impl Accumulator {
    fn on_chunk(&mut self, chunk: &Value, deltas: DeltaSink<'_>) -> Result<(), ModelError> {
        if let Some(err) = chunk.get("error") {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("model stream error")
                .to_string();
            return Err(ModelError::transient(ErrorKind::RequestFailed, message));
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            let get = |p: &str| u.pointer(p).and_then(Value::as_i64).unwrap_or(0);
            let cached = get("/prompt_tokens_details/cached_tokens");
            self.usage.input_tokens = (get("/prompt_tokens") - cached).max(0);
            self.usage.cache_read_input_tokens = cached;
            self.usage.output_tokens = get("/completion_tokens");
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(());
        };
        let delta = choice.get("delta").cloned().unwrap_or(Value::Null);
        let reasoning = delta
            .get("reasoning_content")
            .or_else(|| delta.get("reasoning"))
            .and_then(Value::as_str)
            .unwrap_or("");
        if !reasoning.is_empty() {
            if self.reasoning.is_empty() {
                deltas(Delta::ThinkingStarted);
            }
            self.reasoning.push_str(reasoning);
        }
        if let Some(t) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            self.text.push_str(t);
            deltas(Delta::Text {
                index: 0,
                text: t.to_string(),
            });
        }
        for tc in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = tc
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(self.calls.len() as u64);
            let call = self.calls.entry(index).or_default();
            if let Some(id) = tc
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                call.id = id.to_string();
            }
            if let Some(name) = tc
                .pointer("/function/name")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                call.name.push_str(name);
            }
            if let Some(args) = tc.pointer("/function/arguments").and_then(Value::as_str) {
                call.arguments.push_str(args);
            }
        }
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(f.to_string());
        }
        Ok(())
    }

    fn finish(self) -> Result<ModelResponse, ModelError> {
        let Some(finish) = self.finish else {
            return Err(ModelError::transient(
                ErrorKind::RequestFailed,
                "model stream ended before a finish_reason",
            ));
        };
        let mut content = Vec::new();
        if !self.reasoning.is_empty() {
            content.push(json!({"type": "thinking", "thinking": self.reasoning, "signature": ""}));
        }
        if !self.text.is_empty() {
            content.push(json!({"type": "text", "text": self.text}));
        }
        let truncated = finish == "length";
        for (i, call) in self.calls.into_values().enumerate() {
            let input: Value = if call.arguments.trim().is_empty() {
                json!({})
            } else {
                match serde_json::from_str(&call.arguments) {
                    Ok(v) => v,
                    // Cut short by the token limit: the continuation calls it again.
                    Err(_) if truncated => continue,
                    Err(e) => {
                        return Err(ModelError::transient(
                            ErrorKind::RequestFailed,
                            format!("model sent malformed arguments for `{}`: {e}", call.name),
                        ));
                    }
                }
            };
            let id = if call.id.is_empty() {
                format!("call_{i}")
            } else {
                call.id
            };
            content.push(json!({"type": "tool_use", "id": id, "name": call.name, "input": input}));
        }
        let has_calls = content.iter().any(|b| b["type"] == "tool_use");
        let stop_reason = match finish.as_str() {
            _ if has_calls && !truncated => "tool_use",
            "tool_calls" | "function_call" => "tool_use",
            "length" => "max_tokens",
            "content_filter" => "refusal",
            _ => "end_turn",
        };
        let stop_details = (stop_reason == "refusal").then(|| {
            json!({"type": "refusal", "category": null, "explanation": "The model endpoint filtered the response (content_filter)."})
        });
        Ok(ModelResponse {
            content,
            stop_reason: stop_reason.to_string(),
            stop_details,
            usage: self.usage,
        })
    }
}

#[async_trait]
impl ModelClient for OpenAiClient {
    async fn complete(
        &self,
        req: &ModelRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let url = format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        );
        let body = self.body(req);
        tracing::debug!(url = %url, body = %body, "openai-compatible request");
        let mut http = self.http.post(&url);
        if let Some(k) = &self.config.api_key {
            http = http.bearer_auth(k);
        }
        let mut acc = Accumulator::default();
        stream_events(http, &body, |ev| {
            // `[DONE]` only confirms what `finish_reason` already said.
            match ev.data.trim() {
                "" | "[DONE]" => Ok(()),
                data => acc.on_chunk(&parse_data(data)?, deltas),
            }
        })
        .await?;
        let response = acc.finish()?;
        tracing::debug!(stop_reason = %response.stop_reason, blocks = response.content.len(), "openai-compatible response");
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_tool_results_and_images() {
        let msgs = vec![
            Message {
                role: Role::User,
                content: vec![
                    json!({"type":"text","text":"look"}),
                    json!({"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAA"}}),
                ],
            },
            Message {
                role: Role::Assistant,
                content: vec![
                    json!({"type":"text","text":"calling"}),
                    json!({"type":"tool_use","id":"t1","name":"f","input":{"a":1}}),
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    json!({"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"out"}],"is_error":true}),
                    json!({"type":"text","text":"more"}),
                ],
            },
        ];
        let out = chat_messages(Some("sys"), &msgs);
        assert_eq!(out[0], json!({"role":"system","content":"sys"}));
        assert_eq!(
            out[1]["content"][1]["image_url"]["url"],
            "data:image/png;base64,AAA"
        );
        assert_eq!(
            out[2]["tool_calls"][0]["function"]["arguments"],
            "{\"a\":1}"
        );
        assert_eq!(
            out[3],
            json!({"role":"tool","tool_call_id":"t1","content":"Error: out"})
        );
        assert_eq!(out[4], json!({"role":"user","content":"more"}));
    }

    #[test]
    fn accumulates_split_parallel_calls_and_usage() {
        let none = |_: Delta| {};
        let mut acc = Accumulator::default();
        for c in [
            json!({"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"hm"}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\""}}]}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":": 1}"}}]}}]}),
            json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
            json!({"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":3}}}),
        ] {
            acc.on_chunk(&c, &none).unwrap();
        }
        let r = acc.finish().unwrap();
        assert_eq!(r.stop_reason, "tool_use");
        assert_eq!(r.content[0]["type"], "thinking");
        assert_eq!(
            r.content[1],
            json!({"type":"tool_use","id":"c1","name":"f","input":{"x":1}})
        );
        assert_eq!(r.content[2]["name"], "g");
        assert_eq!(r.usage.input_tokens, 7);
        assert_eq!(r.usage.cache_read_input_tokens, 3);
        assert_eq!(r.usage.output_tokens, 4);
    }
}
