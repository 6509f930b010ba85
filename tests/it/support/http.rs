//! A small JSON HTTP client for tests.

use reqwest::{Method, StatusCode};
use serde_json::Value;

/// Talks to a test server, optionally with an API key.
#[derive(Clone)]
pub struct Client {
    pub base: String,
    pub key: Option<String>,
    /// Model id of agents made by [`Client::agent`].
    pub model: String,
    http: reqwest::Client,
}

/// A response: status, headers and JSON body (Null when empty).
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Resp {
    /// Asserts 200 and returns the body.
    #[track_caller]
    pub fn ok(self) -> Value {
        assert_eq!(self.status, StatusCode::OK, "body: {}", self.body);
        self.body
    }

    /// Asserts an error status with the API's error shape; returns the message.
    #[track_caller]
    pub fn err(self, status: u16) -> String {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.body);
        assert_eq!(self.body["type"], "error", "error shape: {}", self.body);
        assert!(
            self.body["request_id"]
                .as_str()
                .is_some_and(|r| r.starts_with("req_")),
            "request_id: {}",
            self.body
        );
        assert_eq!(
            self.headers.get("request-id").and_then(|v| v.to_str().ok()),
            self.body["request_id"].as_str(),
            "request-id header matches the body"
        );
        self.body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

impl Client {
    /// A client for `base`.
    pub fn new(base: &str) -> Self {
        Client {
            base: base.to_string(),
            key: None,
            model: "mast-scripted".into(),
            http: reqwest::Client::new(),
        }
    }

    /// The same client sending `x-api-key: key`.
    pub fn with_key(&self, key: &str) -> Self {
        Client {
            key: Some(key.to_string()),
            ..self.clone()
        }
    }

    /// Sends a request with an optional JSON body.
    pub async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Resp {
        self.try_send(method, path, body).await.expect("request")
    }

    /// [`Client::send`], with connection failures returned rather than fatal.
    pub async fn try_send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Resp, reqwest::Error> {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(k) = &self.key {
            req = req.header("x-api-key", k);
        }
        req = req
            .header("anthropic-version", "2023-06-01")
            .header("anthropic-beta", "managed-agents-2026-04-01");
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await?;
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        Ok(Resp {
            status,
            headers,
            body,
        })
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(Method::GET, path, None).await
    }

    /// The server's counter or gauge `name` from `/metrics`, summed over its labels (0 when
    /// it has not been recorded yet).
    pub async fn metric(&self, name: &str) -> f64 {
        let text = self
            .http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .filter(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with([' ', '{']))
            })
            .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
            .sum()
    }

    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.send(Method::POST, path, Some(&body)).await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.send(Method::DELETE, path, None).await
    }

    /// Creates an agent with `mast-scripted` and the given tools.
    pub async fn agent(&self, tools: Value) -> Value {
        self.post(
            "/v1/agents",
            serde_json::json!({"name": "test agent", "model": self.model, "tools": tools}),
        )
        .await
        .ok()
    }

    /// Creates an environment with a unique name.
    pub async fn environment(&self) -> Value {
        let name = format!("env-{}", mast::domain::ids::new_secret(8));
        self.post("/v1/environments", serde_json::json!({"name": name}))
            .await
            .ok()
    }

    /// Creates a session for `agent` in a new environment.
    pub async fn session(&self, agent: &Value) -> Value {
        let env = self.environment().await;
        self.post(
            "/v1/sessions",
            serde_json::json!({"agent": agent["id"], "environment_id": env["id"]}),
        )
        .await
        .ok()
    }

    /// Sends events and returns the echoes.
    pub async fn send_events(&self, session: &str, events: Value) -> Value {
        self.post(
            &format!("/v1/sessions/{session}/events"),
            serde_json::json!({"events": events}),
        )
        .await
        .ok()
    }

    /// Sends one user message.
    pub async fn say(&self, session: &str, text: &str) -> Value {
        self.send_events(session, serde_json::json!([{"type": "user.message", "content": [{"type": "text", "text": text}]}])).await
    }

    /// Every event of a session's log, following pages.
    pub async fn all_events(&self, session: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut page: Option<String> = None;
        loop {
            let path = match &page {
                Some(p) => format!("/v1/sessions/{session}/events?limit=1000&page={p}"),
                None => format!("/v1/sessions/{session}/events?limit=1000"),
            };
            let body = self.get(&path).await.ok();
            out.extend(body["data"].as_array().cloned().unwrap_or_default());
            match body["next_page"].as_str() {
                Some(p) => page = Some(p.to_string()),
                None => return out,
            }
        }
    }
}

/// The `custom tool` definition used across tests.
pub fn weather_tool() -> Value {
    serde_json::json!({"type": "custom", "name": "get_weather", "description": "Current weather for a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}})
}

/// Types of a list of events.
pub fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .collect()
}
