//! The client side: HTTP calls and SSE streams against the server, the agents the scenarios
//! use, and the figures' arithmetic and printing.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use mast::models::sse::SseDecoder;
use serde_json::{Value, json};
use tokio::sync::mpsc;

const TOOL: &str =
    r#"{"type":"custom","name":"get_weather","description":"d","input_schema":{"type":"object"}}"#;

/// A session's events as they arrive, with their arrival time.
pub type Events = mpsc::UnboundedReceiver<(Instant, Value)>;

/// Which agent a scenario runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// No system prompt, one small custom tool.
    Plain,
    /// A 20 KB system prompt and 10 custom tools with real-sized schemas (one of them
    /// `get_weather`, which the tool round trips call).
    Realistic,
}

impl Agent {
    fn body(self) -> Value {
        match self {
            Agent::Plain => {
                json!({"name": "bench", "model": "mast-scripted", "tools": [serde_json::from_str::<Value>(TOOL).unwrap()]})
            }
            Agent::Realistic => {
                let line = "You are a careful assistant working in a customer's repository. \
                    Read before you write, explain what you change, and keep answers short.\n";
                let system = line.repeat(20 * 1024 / line.len() + 1);
                let tools: Vec<Value> = (0..10)
                    .map(|i| {
                        let name = if i == 0 { "get_weather".to_string() } else { format!("tool_{i}") };
                        json!({"type": "custom", "name": name,
                            "description": format!("Tool number {i}: looks things up in the customer's systems and returns what it found, as JSON, with sources."),
                            "input_schema": {"type": "object", "properties": {
                                "query": {"type": "string", "description": "What to look for."},
                                "limit": {"type": "integer", "description": "At most this many results."},
                                "since": {"type": "string", "description": "Only results after this RFC 3339 time."},
                                "fields": {"type": "array", "items": {"type": "string"}, "description": "Fields to return."}
                            }, "required": ["query"]}})
                    })
                    .collect();
                json!({"name": "bench-realistic", "model": "mast-scripted", "system": system, "tools": tools})
            }
        }
    }
}

/// A client of one server.
#[derive(Clone)]
pub struct Api {
    /// The shared HTTP client (one connection pool).
    pub http: reqwest::Client,
    /// The server's base URL.
    pub base: String,
    /// The server's API key, sent with every request (the floor server has none).
    pub key: Option<String>,
}

impl Api {
    /// The client of `server`, on the shared `http` client.
    pub fn of(http: &reqwest::Client, server: &crate::server::Server) -> Api {
        Api {
            http: http.clone(),
            base: server.base.clone(),
            key: server.key.clone(),
        }
    }

    /// A request to `path`, with the API key.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.http.request(method, format!("{}{path}", self.base));
        match &self.key {
            Some(key) => r.header("x-api-key", key),
            None => r,
        }
    }

    /// POSTs `body` as JSON; panics unless the answer is a success.
    pub async fn post(&self, path: &str, body: Value) -> Value {
        let r = self
            .request(reqwest::Method::POST, path)
            .json(&body)
            .send()
            .await
            .expect("request");
        let status = r.status();
        let v: Value = r.json().await.expect("json");
        assert!(status.is_success(), "{path}: {status} {v}");
        v
    }

    /// Creates a session of `agent` in `env`; returns its id.
    pub async fn session(&self, agent: &str, env: &str) -> String {
        self.post(
            "/v1/sessions",
            json!({"agent": agent, "environment_id": env}),
        )
        .await["id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Sends one `user.message`.
    pub async fn say(&self, sid: &str, text: &str) {
        self.post(&format!("/v1/sessions/{sid}/events"), json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": text}]}]})).await;
    }

    /// Answers custom tool call `id` with `ok`.
    pub async fn answer(&self, sid: &str, id: &str) {
        self.post(
            &format!("/v1/sessions/{sid}/events"),
            json!({"events": [{"type": "user.custom_tool_result", "custom_tool_use_id": id, "content": [{"type": "text", "text": "ok"}]}]}),
        )
        .await;
    }

    /// Creates an agent of `kind` and an environment; returns their ids.
    pub async fn setup(&self, kind: Agent) -> (String, String) {
        let agent = self.post("/v1/agents", kind.body()).await;
        let env = self
            .post(
                "/v1/environments",
                json!({"name": format!("bench-{}", mast::domain::ids::new_secret(6))}),
            )
            .await;
        (
            agent["id"].as_str().unwrap().to_string(),
            env["id"].as_str().unwrap().to_string(),
        )
    }

    /// Opens a session stream; events arrive on the returned channel with their arrival time.
    pub async fn stream(&self, sid: &str) -> Events {
        let resp = self
            .request(
                reqwest::Method::GET,
                &format!("/v1/sessions/{sid}/events/stream"),
            )
            .send()
            .await
            .expect("stream");
        assert!(resp.status().is_success());
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut dec = SseDecoder::default();
            let mut body = resp.bytes_stream();
            while let Some(Ok(chunk)) = body.next().await {
                let now = Instant::now();
                for ev in dec.feed(&chunk) {
                    if ev.event.as_deref().is_none_or(|e| e == "ping") {
                        continue;
                    }
                    let Ok(v) = serde_json::from_str::<Value>(&ev.data) else {
                        continue;
                    };
                    if tx.send((now, v)).is_err() {
                        return;
                    }
                }
            }
        });
        rx
    }

    /// One plain turn: message posted → idle seen. Returns its latency in ms.
    pub async fn plain_turn(&self, sid: &str, rx: &mut Events, n: &mut u64) -> f64 {
        let t0 = Instant::now();
        self.say(sid, "hello").await;
        let (t1, _) = until_idle(rx, n).await;
        (t1 - t0).as_secs_f64() * 1000.0
    }

    /// One custom-tool round trip: message → requires_action → result → end_turn. Returns
    /// its latency in ms.
    pub async fn tool_round_trip(&self, sid: &str, rx: &mut Events, n: &mut u64) -> f64 {
        let t0 = Instant::now();
        self.say(sid, "call get_weather {}\n---\nsay {{result}}")
            .await;
        let (_, idle) = until_idle(rx, n).await;
        self.answer(sid, idle["stop_reason"]["event_ids"][0].as_str().unwrap())
            .await;
        let (t1, _) = until_idle(rx, n).await;
        (t1 - t0).as_secs_f64() * 1000.0
    }
}

/// Reads events until the session idles; counts every event in `events`.
pub async fn until_idle(rx: &mut Events, events: &mut u64) -> (Instant, Value) {
    loop {
        let (t, v) = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("idle in time")
            .expect("stream open");
        *events += 1;
        if v["type"] == "session.status_idle" {
            return (t, v);
        }
    }
}

/// The `p` quantile (0..=1) of `samples`.
pub fn pct(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i]
}

/// Microseconds since the epoch, as `processed_at` is stamped.
pub fn wall_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// Prints one row of the results table: what was measured, the figure, and its target or
/// floor.
pub fn row(scenario: &str, result: String, target: &str) {
    println!("| {scenario} | {result} | {target} |");
}
