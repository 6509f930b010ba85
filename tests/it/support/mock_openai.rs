//! A scripted OpenAI-compatible chat-completions server speaking the real SSE chunk format:
//! split tool-call arguments, parallel calls, the usage chunk, errors and cut streams.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

/// One scripted reply.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Text, finishing with `stop`.
    Text(String),
    /// Reasoning content, then text.
    Reasoning(String, String),
    /// Parallel tool calls `(name, input)`, arguments streamed in pieces.
    Tools(Vec<(String, Value)>),
    /// An HTTP error status.
    Status(u16),
    /// Starts streaming, then drops the connection.
    Cut,
    /// `finish_reason: content_filter`.
    Filtered,
    /// Text cut with `finish_reason: length`.
    Length(String),
}

#[derive(Default)]
struct State_ {
    replies: VecDeque<Reply>,
    requests: Vec<Value>,
}

/// The running mock.
#[derive(Clone)]
pub struct MockOpenAi {
    /// Base URL including `/v1`.
    pub base_url: String,
    state: Arc<Mutex<State_>>,
}

fn chunk(delta: Value, finish: Value) -> Bytes {
    let v = json!({"id":"chatcmpl-m","object":"chat.completion.chunk","created":0,"model":"m",
        "choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
    Bytes::from(format!("data: {v}\n\n"))
}

fn usage() -> Bytes {
    let v = json!({"id":"chatcmpl-m","object":"chat.completion.chunk","choices":[],
        "usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":4}}});
    Bytes::from(format!("data: {v}\n\n"))
}

impl MockOpenAi {
    /// Starts the mock on 127.0.0.1:0.
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(State_::default()));
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.ok() });
        MockOpenAi { base_url, state }
    }

    /// Queues replies (an empty queue answers "ok").
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.lock().unwrap().replies.extend(replies);
    }

    /// Request bodies received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.state.lock().unwrap().requests.clone()
    }
}

async fn handle(State(state): State<Arc<Mutex<State_>>>, body: axum::Json<Value>) -> Response {
    let reply = {
        let mut s = state.lock().unwrap();
        s.requests.push(body.0.clone());
        s.replies.pop_front().unwrap_or(Reply::Text("ok".into()))
    };
    let role = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    let done = Bytes::from("data: [DONE]\n\n");
    let frames: Vec<Bytes> = match reply {
        Reply::Status(status) => {
            let body =
                json!({"error":{"message":format!("mock status {status}"),"type":"server_error"}});
            return (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response();
        }
        Reply::Text(t) => {
            let mut f = vec![role];
            f.extend(
                t.split_inclusive(' ')
                    .map(|w| chunk(json!({"content": w}), Value::Null)),
            );
            f.extend([chunk(json!({}), json!("stop")), usage(), done]);
            f
        }
        Reply::Reasoning(r, t) => vec![
            role,
            chunk(json!({"reasoning_content": r}), Value::Null),
            chunk(json!({"content": t}), Value::Null),
            chunk(json!({}), json!("stop")),
            usage(),
            done,
        ],
        Reply::Tools(calls) => {
            let mut f = vec![role];
            for (i, (name, input)) in calls.iter().enumerate() {
                let args = input.to_string();
                let (a, b) = args.split_at(args.len() / 2);
                f.push(chunk(json!({"tool_calls":[{"index":i,"id":format!("call_{i}"),"type":"function","function":{"name":name,"arguments":""}}]}), Value::Null));
                f.push(chunk(
                    json!({"tool_calls":[{"index":i,"function":{"arguments":a}}]}),
                    Value::Null,
                ));
                f.push(chunk(
                    json!({"tool_calls":[{"index":i,"function":{"arguments":b}}]}),
                    Value::Null,
                ));
            }
            f.extend([chunk(json!({}), json!("tool_calls")), usage(), done]);
            f
        }
        Reply::Cut => vec![role, chunk(json!({"content": "partial"}), Value::Null)],
        Reply::Filtered => vec![
            role,
            chunk(json!({}), json!("content_filter")),
            usage(),
            done,
        ],
        Reply::Length(t) => vec![
            role,
            chunk(json!({"content": t}), Value::Null),
            chunk(json!({}), json!("length")),
            usage(),
            done,
        ],
    };
    let (tx, rx) = mpsc::unbounded_channel::<Result<Bytes, Infallible>>();
    for f in frames {
        let _ = tx.send(Ok(f));
    }
    drop(tx);
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(UnboundedReceiverStream::new(rx)))
        .unwrap()
}
