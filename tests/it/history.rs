//! A runner keeps what it knows of a thread's log between wakes (`engine::history`): the
//! model must still see exactly the conversation the log holds — across wakes, replicas,
//! input queued while a call was open and consumed elsewhere, input folded into a running
//! turn, and a restart (which rebuilds every context from the log).
//!
//! The model is Mast's scripted model served over the Anthropic wire, behind a proxy that
//! records every request, so the tests see the exact messages each model request carried.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::http::weather_tool;
use crate::support::sse::Stream;
use crate::support::{Backend, Options, TestServer, scripted_provider};

backend_tests!(the_model_sees_the_log_across_wakes_replicas_and_restarts);

/// A proxy in front of the scripted provider that records each request body.
struct Recorder {
    url: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

async fn forward(resp: reqwest::Response) -> Response {
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Body::from_stream(resp.bytes_stream()))
        .unwrap()
}

impl Recorder {
    async fn start() -> Self {
        let upstream = scripted_provider::start(scripted_provider::Wire::Anthropic).await;
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (up, up2, seen) = (upstream.clone(), upstream, requests.clone());
        let app = Router::new()
            .route(
                "/v1/messages",
                post(move |body: axum::Json<Value>| {
                    let (up, seen) = (up.clone(), seen.clone());
                    async move {
                        seen.lock().unwrap().push(body.0.clone());
                        let resp = reqwest::Client::new()
                            .post(format!("{up}/v1/messages"))
                            .json(&body.0)
                            .send()
                            .await
                            .expect("scripted provider answers");
                        forward(resp).await
                    }
                }),
            )
            .route(
                "/v1/models",
                get(move || {
                    let up = up2.clone();
                    async move {
                        let resp = reqwest::get(format!("{up}/v1/models"))
                            .await
                            .expect("scripted provider answers");
                        forward(resp).await
                    }
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.ok() });
        Recorder { url, requests }
    }

    /// The messages of every request so far, without the prompt-caching marks the client
    /// puts on the newest blocks.
    fn messages(&self) -> Vec<Vec<Value>> {
        let mut all: Vec<Vec<Value>> = self
            .requests
            .lock()
            .unwrap()
            .iter()
            .map(|r| r["messages"].as_array().cloned().unwrap_or_default())
            .collect();
        for m in all.iter_mut().flatten() {
            for b in m["content"].as_array_mut().into_iter().flatten() {
                if let Some(b) = b.as_object_mut() {
                    b.remove("cache_control");
                }
            }
        }
        all
    }
}

async fn stream(s: &TestServer, sid: &str) -> Stream {
    Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        None,
        &[],
    )
    .await
}

/// The id of the custom tool call the session waits on.
fn waited_call(idle: &Value) -> String {
    assert_eq!(idle["stop_reason"]["type"], "requires_action", "{idle}");
    idle["stop_reason"]["event_ids"][0]
        .as_str()
        .unwrap()
        .to_string()
}

async fn answer(s: &TestServer, sid: &str, call: &str, text: &str) {
    s.client
        .send_events(
            sid,
            json!([{"type": "user.custom_tool_result", "custom_tool_use_id": call,
                "content": [{"type": "text", "text": text}]}]),
        )
        .await;
}

/// Every text block of the user's messages.
fn user_texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| match &m["content"] {
            Value::String(s) => vec![s.clone()],
            Value::Array(blocks) => blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str().map(str::to_string))
                .collect(),
            _ => vec![],
        })
        .collect()
}

async fn the_model_sees_the_log_across_wakes_replicas_and_restarts(backend: Backend) {
    let rec = Recorder::start().await;
    let opts = Options {
        anthropic_base_url: Some(rec.url.clone()),
        ..Options::default()
    };
    let mut a = TestServer::start_with(backend, opts).await;
    a.client.model = "claude-scripted-test".into();
    // On Postgres a second replica takes every other turn; on SQLite one server does all.
    let mut b = match backend {
        Backend::Postgres => Some(TestServer::boot(a.config.clone(), backend).await),
        Backend::Sqlite => None,
    };
    let bash = json!({"type": "agent_toolset_20260401",
        "configs": [{"name": "bash", "permission_policy": {"type": "always_allow"}}]});
    let agent = a.client.agent(json!([weather_tool(), bash])).await;
    let sid = a.client.session(&agent).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut st = stream(&a, &sid).await;
    let pick = |i: usize| -> &TestServer {
        match (&b, i % 2) {
            (Some(b), 1) => b,
            _ => &a,
        }
    };
    let tool = "call get_weather {\"city\":\"Oslo\"}\n---\nsay Oslo: {{result}}";

    // Plain turns and a tool round trip, alternating replicas.
    pick(0).client.say(&sid, "first words").await;
    st.until_idle(20).await;
    pick(1).client.say(&sid, tool).await;
    let call = waited_call(&st.until_idle(20).await);
    answer(pick(0), &sid, &call, "rain").await;
    assert_eq!(st.until_idle(20).await["stop_reason"]["type"], "end_turn");

    // Input sent while a tool runs is queued. The runner sees it queued after the tool and
    // idles on the other call of the same response; the replica that takes that call's
    // answer consumes the input with it.
    let both = "call bash {\"command\":\"sleep 1\"}\ncall get_weather {\"city\":\"Rome\"}\n---\nsay {{result}}";
    pick(0).client.say(&sid, both).await;
    st.until(20, |e| e["type"] == "agent.tool_use").await;
    pick(0).client.say(&sid, "queued while running").await;
    let call = waited_call(&st.until_idle(20).await);
    answer(pick(1), &sid, &call, "sun").await;
    assert_eq!(st.until_idle(20).await["stop_reason"]["type"], "end_turn");
    pick(0).client.say(&sid, "after the queue").await;
    st.until_idle(20).await;

    // Input sent while a plain answer streams is folded into the same turn.
    pick(1).client.say(&sid, "sleep 600\nsay slowly").await;
    st.until(20, |e| e["type"] == "span.model_request_start")
        .await;
    pick(1).client.say(&sid, "folded in").await;
    st.until(20, |e| {
        e["type"] == "agent.message" && e["content"][0]["text"] == "You said: folded in"
    })
    .await;
    st.until_idle(20).await;
    pick(0).client.say(&sid, "back on the first").await;
    st.until_idle(20).await;
    pick(1).client.say(&sid, "and the second").await;
    st.until_idle(20).await;

    // A restart forgets every runner's copy: the next turn's context comes from the log.
    if let Some(b) = b.as_mut() {
        b.stop().await;
    }
    drop(b);
    a.stop().await;
    let a2 = TestServer::boot(a.config.clone(), backend).await;
    let mut st = stream(&a2, &sid).await;
    a2.client.say(&sid, "after the restart").await;
    st.until_idle(20).await;

    let requests = rec.messages();
    let last = requests.last().expect("requests were made");
    for (i, r) in requests.iter().enumerate() {
        assert!(
            last.starts_with(r),
            "request {i} is not what the log holds:\n{}\nvs the rebuilt context\n{}",
            serde_json::to_string_pretty(r).unwrap(),
            serde_json::to_string_pretty(last).unwrap()
        );
    }
    let texts = user_texts(last);
    for said in [
        "first words",
        tool,
        both,
        "queued while running",
        "after the queue",
        "folded in",
        "back on the first",
        "and the second",
        "after the restart",
    ] {
        assert_eq!(
            texts.iter().filter(|t| *t == said).count(),
            1,
            "`{said}` is in the context once: {texts:?}"
        );
    }
    // The queued input follows the answer of the call it waited behind: the first user
    // message holding it comes after the one holding the tool's result (`sun`).
    let message_with = |pred: &dyn Fn(&Value) -> bool| {
        last.iter()
            .position(|m| {
                m["role"] == "user"
                    && m["content"]
                        .as_array()
                        .is_some_and(|blocks| blocks.iter().any(pred))
            })
            .expect("a user message holds it")
    };
    let answered = message_with(&|b| b["type"] == "tool_result" && b.to_string().contains("sun"));
    let queued = message_with(&|b| b["text"] == "queued while running");
    assert!(
        answered <= queued,
        "the queued input comes after the tool result it waited behind"
    );
    let at = |t: &str| texts.iter().position(|x| x == t).unwrap();
    assert!(at("queued while running") < at("after the queue"));
}
