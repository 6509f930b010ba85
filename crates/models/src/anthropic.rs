//! The Anthropic Messages API over streaming SSE, configured like the official SDKs
//! (`ANTHROPIC_API_KEY` / `ANTHROPIC_AUTH_TOKEN`, `ANTHROPIC_BASE_URL`).

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::anthropic_body::Body;
use super::http::{parse_data, stream_events};
use super::{Delta, DeltaSink, ErrorKind, ModelClient, ModelError, ModelRequest, ModelResponse};
use mast_domain::session::ModelUsage;

/// Connection settings for the Messages API.
#[derive(Debug, Clone)]
pub struct AnthropicConfig {
    pub base_url: String,
    pub api_key: Option<String>,
    pub auth_token: Option<String>,
    /// Longest silence tolerated on a stream before it counts as a dropped connection.
    pub read_timeout: Duration,
}

impl AnthropicConfig {
    /// Whether the base URL points somewhere other than Anthropic (a proxy or gateway that may
    /// need no key).
    pub fn base_url_is_custom(&self) -> bool {
        self.base_url.trim_end_matches('/') != "https://api.anthropic.com"
    }

    /// Reads the same environment variables as the official SDKs, each overridden by its
    /// `MAST_`-prefixed twin: a shell that points the SDK at Mast (`ANTHROPIC_BASE_URL`) can
    /// still point Mast at Anthropic.
    pub fn from_env() -> Self {
        let var = |name: &str| {
            std::env::var(format!("MAST_{name}"))
                .ok()
                .filter(|v| !v.is_empty())
                .or_else(|| std::env::var(name).ok().filter(|v| !v.is_empty()))
        };
        AnthropicConfig {
            base_url: var("ANTHROPIC_BASE_URL")
                .unwrap_or_else(|| "https://api.anthropic.com".into()),
            api_key: var("ANTHROPIC_API_KEY"),
            auth_token: var("ANTHROPIC_AUTH_TOKEN"),
            read_timeout: Duration::from_secs(300),
        }
    }
}

/// The Messages API client.
pub struct AnthropicClient {
    http: reqwest::Client,
    config: AnthropicConfig,
}

impl AnthropicClient {
    /// The endpoint this client talks to.
    pub fn base_url(&self) -> &str {
        &self.config.base_url
    }

    /// Builds a client; the HTTP connection pool is shared by every session.
    pub fn new(config: AnthropicConfig) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(config.read_timeout)
            .build()
            .expect("http client");
        AnthropicClient { http, config }
    }
}

/// Accumulates a streamed message.
#[derive(Default)]
struct Accumulator {
    blocks: BTreeMap<u64, Map<String, Value>>,
    partial_json: BTreeMap<u64, String>,
    text_index: BTreeMap<u64, usize>,
    stop_reason: Option<String>,
    stop_details: Option<Value>,
    usage: ModelUsage,
    done: bool,
}

impl Accumulator {
    fn usage_from(&mut self, u: &Value) {
        let get = |k: &str| u.get(k).and_then(Value::as_i64);
        if let Some(v) = get("input_tokens") {
            self.usage.input_tokens = v;
        }
        if let Some(v) = get("output_tokens") {
            self.usage.output_tokens = v;
        }
        if let Some(v) = get("cache_creation_input_tokens") {
            self.usage.cache_creation_input_tokens = v;
        }
        if let Some(v) = get("cache_read_input_tokens") {
            self.usage.cache_read_input_tokens = v;
        }
        // The split by cache lifetime, priced apart (5-minute writes are the rest).
        if let Some(v) = u
            .pointer("/cache_creation/ephemeral_1h_input_tokens")
            .and_then(Value::as_i64)
        {
            self.usage.ephemeral_1h_input_tokens = v;
        }
    }

    fn on_event(
        &mut self,
        name: &str,
        data: &Value,
        deltas: DeltaSink<'_>,
    ) -> Result<(), ModelError> {
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        match name {
            "message_start" => {
                if let Some(u) = data.pointer("/message/usage") {
                    self.usage_from(u);
                }
            }
            "content_block_start" => {
                let block = data
                    .get("content_block")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let n = self.text_index.len();
                        self.text_index.insert(index, n);
                        let initial = block.get("text").and_then(Value::as_str).unwrap_or("");
                        if !initial.is_empty() {
                            deltas(Delta::Text {
                                index: n,
                                text: initial.to_string(),
                            });
                        }
                    }
                    Some("thinking") | Some("redacted_thinking") => deltas(Delta::ThinkingStarted),
                    _ => {}
                }
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let delta = data.get("delta").cloned().unwrap_or(Value::Null);
                let block = self.blocks.entry(index).or_default();
                let append = |block: &mut Map<String, Value>, key: &str, s: &str| {
                    let cur = block
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    block.insert(key.into(), Value::String(cur + s));
                };
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let t = delta.get("text").and_then(Value::as_str).unwrap_or("");
                        append(block, "text", t);
                        if let Some(n) = self.text_index.get(&index) {
                            deltas(Delta::Text {
                                index: *n,
                                text: t.to_string(),
                            });
                        }
                    }
                    Some("thinking_delta") => append(
                        block,
                        "thinking",
                        delta.get("thinking").and_then(Value::as_str).unwrap_or(""),
                    ),
                    Some("signature_delta") => {
                        block.insert(
                            "signature".into(),
                            delta.get("signature").cloned().unwrap_or(Value::Null),
                        );
                    }
                    Some("input_json_delta") => {
                        let p = delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        self.partial_json.entry(index).or_default().push_str(p);
                    }
                    Some("citations_delta") => {
                        let c = delta.get("citation").cloned().unwrap_or(Value::Null);
                        let list = block
                            .entry("citations")
                            .or_insert_with(|| Value::Array(vec![]));
                        if let Some(a) = list.as_array_mut() {
                            a.push(c);
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(json) = self.partial_json.remove(&index)
                    && let Some(block) = self.blocks.get_mut(&index)
                {
                    let input = if json.trim().is_empty() {
                        json!({})
                    } else {
                        serde_json::from_str(&json).map_err(|e| {
                            ModelError::transient(
                                ErrorKind::RequestFailed,
                                format!("model sent malformed tool input: {e}"),
                            )
                        })?
                    };
                    block.insert("input".into(), input);
                }
            }
            "message_delta" => {
                if let Some(r) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(r.to_string());
                }
                if let Some(d) = data.pointer("/delta/stop_details").filter(|d| !d.is_null()) {
                    self.stop_details = Some(d.clone());
                }
                if let Some(u) = data.get("usage") {
                    self.usage_from(u);
                }
            }
            "message_stop" => self.done = true,
            "error" => {
                let kind = data
                    .pointer("/error/type")
                    .and_then(Value::as_str)
                    .unwrap_or("api_error");
                let message = data
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("stream error")
                    .to_string();
                return Err(match kind {
                    "overloaded_error" => ModelError::transient(ErrorKind::Overloaded, message),
                    "rate_limit_error" => ModelError::transient(ErrorKind::RateLimited, message),
                    "api_error" | "timeout_error" => {
                        ModelError::transient(ErrorKind::RequestFailed, message)
                    }
                    _ => ModelError::fatal(ErrorKind::RequestFailed, message),
                });
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(mut self) -> Result<ModelResponse, ModelError> {
        if !self.done {
            return Err(ModelError::transient(
                ErrorKind::RequestFailed,
                "model stream ended before the message was complete",
            ));
        }
        // A tool_use whose input never completed (cut by max_tokens) keeps what was parsed.
        for (index, json) in std::mem::take(&mut self.partial_json) {
            if let (Some(block), Ok(v)) = (
                self.blocks.get_mut(&index),
                serde_json::from_str::<Value>(&json),
            ) {
                block.insert("input".into(), v);
            }
        }
        Ok(ModelResponse {
            content: self.blocks.into_values().map(Value::Object).collect(),
            stop_reason: self.stop_reason.unwrap_or_else(|| "end_turn".into()),
            stop_details: self.stop_details,
            usage: self.usage,
        })
    }
}

impl AnthropicClient {
    /// A request to `path` with the version and credential headers every call carries.
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let url = format!("{}{path}", self.config.base_url.trim_end_matches('/'));
        let mut http = self
            .http
            .request(method, url)
            .header("anthropic-version", "2023-06-01");
        if let Some(k) = &self.config.api_key {
            http = http.header("x-api-key", k);
        } else if let Some(t) = &self.config.auth_token {
            http = http.bearer_auth(t);
        }
        http
    }

    /// The model ids the endpoint offers (`GET /v1/models`, every page), or why they could not
    /// be read.
    pub async fn list_models(&self) -> Result<Vec<String>, String> {
        let mut ids = Vec::new();
        let mut after: Option<String> = None;
        // A bound on pages, against an endpoint whose cursor never ends.
        for _ in 0..20 {
            let mut req = self
                .request(reqwest::Method::GET, "/v1/models")
                .query(&[("limit", "1000")])
                .timeout(Duration::from_secs(5));
            if let Some(a) = &after {
                req = req.query(&[("after_id", a)]);
            }
            let resp = req.send().await.map_err(|e| super::http::describe(&e))?;
            let status = resp.status();
            let url = resp.url().clone();
            if !status.is_success() {
                return Err(format!("HTTP {} from {url}", status.as_u16()));
            }
            let page: Value = resp
                .json()
                .await
                .map_err(|e| format!("{url} did not answer a model list: {e}"))?;
            let data = page["data"]
                .as_array()
                .ok_or_else(|| format!("{url} did not answer a model list"))?;
            ids.extend(
                data.iter()
                    .filter_map(|m| m["id"].as_str().map(str::to_string)),
            );
            match (page["has_more"].as_bool(), page["last_id"].as_str()) {
                (Some(true), Some(last)) => after = Some(last.to_string()),
                _ => return Ok(ids),
            }
        }
        Ok(ids)
    }
}

#[async_trait]
impl ModelClient for AnthropicClient {
    async fn complete(
        &self,
        req: &ModelRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let mut http = self.request(reqwest::Method::POST, "/v1/messages");
        if req.fast {
            http = http.header("anthropic-beta", "fast-mode-2026-02-01");
        }
        let body = Body::of(req);
        tracing::debug!(body = %serde_json::to_string(&body).unwrap_or_default(), "anthropic request");
        let mut acc = Accumulator::default();
        stream_events(http, &body, |ev| {
            let name = ev.event.unwrap_or_default();
            if name == "ping" || ev.data.is_empty() {
                return Ok(());
            }
            let data = parse_data(&ev.data)?;
            let name = if name.is_empty() {
                data.get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            } else {
                name
            };
            acc.on_event(&name, &data, deltas)
        })
        .await?;
        let response = acc.finish()?;
        tracing::debug!(stop_reason = %response.stop_reason, blocks = response.content.len(), "anthropic response");
        Ok(response)
    }
}
