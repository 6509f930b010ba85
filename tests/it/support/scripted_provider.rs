//! A model server speaking the Anthropic Messages or the OpenAI chat-completions wire format
//! whose answers come from Mast's scripted model: the engine suite's scripts run unchanged
//! through the real provider clients, streamed live (so `sleep` streams slowly).

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use mast::models::scripted::Scripted;
use mast::models::{Delta, Message, ModelClient, ModelRequest, Role};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

/// Which wire format the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Anthropic,
    OpenAi,
}

/// Starts the server; returns its base URL (OpenAI clients append `/v1`).
pub async fn start(wire: Wire) -> String {
    let app = Router::new()
        .route("/v1/messages", post(anthropic))
        .route("/v1/models", axum::routing::get(models))
        .route("/v1/chat/completions", post(openai))
        .with_state(Arc::new(wire));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    url
}

/// `GET /v1/models`, as the Messages API lists what it serves.
async fn models() -> axum::Json<Value> {
    axum::Json(json!({
        "data": [{"type": "model", "id": "claude-scripted-test", "display_name": "Scripted test model",
                  "created_at": "2026-01-01T00:00:00Z"}],
        "has_more": false, "first_id": "claude-scripted-test", "last_id": "claude-scripted-test"
    }))
}

fn blocks(v: &Value) -> Vec<Value> {
    match v {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(a) => a.clone(),
        _ => vec![],
    }
}

fn push(messages: &mut Vec<Message>, role: Role, content: Vec<Value>) {
    match messages.last_mut() {
        Some(m) if m.role == role => m.content.extend(content),
        _ => messages.push(Message { role, content }),
    }
}

fn from_anthropic(body: &Value) -> ModelRequest {
    let mut messages = Vec::new();
    for m in body["messages"].as_array().unwrap() {
        let role = if m["role"] == "user" {
            Role::User
        } else {
            Role::Assistant
        };
        push(&mut messages, role, blocks(&m["content"]));
    }
    request(
        body,
        body["system"][0]["text"].as_str().map(str::to_string),
        messages,
    )
}

fn from_openai(body: &Value) -> ModelRequest {
    let mut system = None;
    let mut messages = Vec::new();
    for m in body["messages"].as_array().unwrap() {
        match m["role"].as_str().unwrap() {
            "system" => system = m["content"].as_str().map(str::to_string),
            "user" => {
                let content = blocks(&m["content"])
                    .into_iter()
                    .map(|p| {
                        if p["type"] == "image_url" {
                            json!({"type": "image"})
                        } else {
                            p
                        }
                    })
                    .collect();
                push(&mut messages, Role::User, content);
            }
            "tool" => push(
                &mut messages,
                Role::User,
                vec![
                    json!({"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": [{"type": "text", "text": m["content"]}]}),
                ],
            ),
            _ => {
                let mut content = blocks(&m["content"]);
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    let input: Value =
                        serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap();
                    content.push(json!({"type": "tool_use", "id": c["id"], "name": c["function"]["name"], "input": input}));
                }
                push(&mut messages, Role::Assistant, content);
            }
        }
    }
    request(body, system, messages)
}

fn request(body: &Value, system: Option<String>, messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        model: body["model"].as_str().unwrap().to_string(),
        system,
        messages,
        tools: Default::default(),
        max_tokens: 1000,
        effort: None,
        fast: false,
        inference_geo: None,
        sized: Default::default(),
    }
}

fn sse(name: Option<&str>, data: Value) -> Bytes {
    match name {
        Some(n) => Bytes::from(format!("event: {n}\ndata: {data}\n\n")),
        None => Bytes::from(format!("data: {data}\n\n")),
    }
}

fn stream_response(rx: mpsc::UnboundedReceiver<Result<Bytes, Infallible>>) -> Response {
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(UnboundedReceiverStream::new(rx)))
        .unwrap()
}

async fn anthropic(State(_): State<Arc<Wire>>, body: axum::Json<Value>) -> Response {
    let req = from_anthropic(&body.0);
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let send = |b: Bytes| {
            let _ = tx.send(Ok(b));
        };
        send(sse(
            Some("message_start"),
            json!({"type":"message_start","message":{"id":"msg_s","type":"message","role":"assistant",
            "content":[],"model":req.model,"stop_reason":null,"usage":{"input_tokens":0,"output_tokens":0}}}),
        ));
        let (dtx, mut drx) = mpsc::unbounded_channel::<Delta>();
        let sink = move |d: Delta| {
            let _ = dtx.send(d);
        };
        let work = tokio::spawn(async move { Scripted.complete(&req, &sink).await });
        let mut index = 0;
        let mut text_open = false;
        while let Some(d) = drx.recv().await {
            match d {
                Delta::ThinkingStarted => {
                    send(sse(
                        Some("content_block_start"),
                        json!({"type":"content_block_start","index":index,"content_block":{"type":"thinking","thinking":""}}),
                    ));
                    send(sse(
                        Some("content_block_delta"),
                        json!({"type":"content_block_delta","index":index,"delta":{"type":"thinking_delta","thinking":"Following the script."}}),
                    ));
                    send(sse(
                        Some("content_block_delta"),
                        json!({"type":"content_block_delta","index":index,"delta":{"type":"signature_delta","signature":"scripted"}}),
                    ));
                    send(sse(
                        Some("content_block_stop"),
                        json!({"type":"content_block_stop","index":index}),
                    ));
                    index += 1;
                }
                Delta::Text { text, .. } => {
                    if !text_open {
                        send(sse(
                            Some("content_block_start"),
                            json!({"type":"content_block_start","index":index,"content_block":{"type":"text","text":""}}),
                        ));
                        text_open = true;
                    }
                    send(sse(
                        Some("content_block_delta"),
                        json!({"type":"content_block_delta","index":index,"delta":{"type":"text_delta","text":text}}),
                    ));
                }
            }
        }
        let resp = work.await.unwrap().unwrap();
        if text_open {
            send(sse(
                Some("content_block_stop"),
                json!({"type":"content_block_stop","index":index}),
            ));
            index += 1;
        }
        for b in resp.content.iter().filter(|b| b["type"] == "tool_use") {
            send(sse(
                Some("content_block_start"),
                json!({"type":"content_block_start","index":index,
                "content_block":{"type":"tool_use","id":b["id"],"name":b["name"],"input":{}}}),
            ));
            send(sse(
                Some("content_block_delta"),
                json!({"type":"content_block_delta","index":index,"delta":{"type":"input_json_delta","partial_json":b["input"].to_string()}}),
            ));
            send(sse(
                Some("content_block_stop"),
                json!({"type":"content_block_stop","index":index}),
            ));
            index += 1;
        }
        send(sse(
            Some("message_delta"),
            json!({"type":"message_delta","delta":{"stop_reason":resp.stop_reason,"stop_details":resp.stop_details},
            "usage":{"input_tokens":resp.usage.input_tokens,"output_tokens":resp.usage.output_tokens}}),
        ));
        send(sse(Some("message_stop"), json!({"type":"message_stop"})));
    });
    stream_response(rx)
}

async fn openai(State(_): State<Arc<Wire>>, body: axum::Json<Value>) -> Response {
    let req = from_openai(&body.0);
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let send = |v: Value| {
            let _ = tx.send(Ok(sse(None, v)));
        };
        let chunk = |delta: Value, finish: Value| json!({"id":"chatcmpl-s","object":"chat.completion.chunk","choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
        send(chunk(json!({"role": "assistant"}), Value::Null));
        let (dtx, mut drx) = mpsc::unbounded_channel::<Delta>();
        let sink = move |d: Delta| {
            let _ = dtx.send(d);
        };
        let work = tokio::spawn(async move { Scripted.complete(&req, &sink).await });
        while let Some(d) = drx.recv().await {
            match d {
                Delta::ThinkingStarted => send(chunk(
                    json!({"reasoning_content": "Following the script."}),
                    Value::Null,
                )),
                Delta::Text { text, .. } => send(chunk(json!({"content": text}), Value::Null)),
            }
        }
        let resp = work.await.unwrap().unwrap();
        for (i, b) in resp
            .content
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .enumerate()
        {
            let args = b["input"].to_string();
            let (a, rest) = args.split_at(args.len() / 2);
            send(chunk(
                json!({"tool_calls":[{"index":i,"id":b["id"],"type":"function","function":{"name":b["name"],"arguments":a}}]}),
                Value::Null,
            ));
            send(chunk(
                json!({"tool_calls":[{"index":i,"function":{"arguments":rest}}]}),
                Value::Null,
            ));
        }
        let finish = match resp.stop_reason.as_str() {
            "tool_use" => "tool_calls",
            "refusal" => "content_filter",
            "max_tokens" => "length",
            _ => "stop",
        };
        send(chunk(json!({}), json!(finish)));
        send(
            json!({"id":"chatcmpl-s","object":"chat.completion.chunk","choices":[],
            "usage":{"prompt_tokens":resp.usage.input_tokens,"completion_tokens":resp.usage.output_tokens,"total_tokens":0}}),
        );
        let _ = tx.send(Ok(Bytes::from("data: [DONE]\n\n")));
    });
    stream_response(rx)
}
