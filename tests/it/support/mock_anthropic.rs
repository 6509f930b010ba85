//! A scripted Messages API server speaking the real streaming wire format, so the real
//! Anthropic client code is what the tests exercise. Replies are queued per test; every
//! request body is recorded.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    /// A text answer ending the turn.
    Text(String),
    /// Optional text, then tool calls `(name, input)`.
    Tools(Option<String>, Vec<(String, Value)>),
    /// A thinking block then text.
    Thinking(String),
    /// An HTTP error with this status and error type.
    Status(u16, &'static str),
    /// Text streamed in `chunks` pieces, `delay_ms` apart.
    Slow {
        text: String,
        chunks: usize,
        delay_ms: u64,
    },
    /// Starts streaming, then drops the connection.
    Cut,
    /// A 200 event stream of frames that are not the Messages API's.
    Garbage,
    /// Response headers, then the connection drops before any frame.
    Reset,
    /// A `message_start`, then silence on an open connection for two minutes.
    Stall,
    /// A refusal.
    Refusal,
    /// Text cut by `max_tokens`.
    MaxTokens(String),
}

#[derive(Default)]
struct MockState {
    replies: VecDeque<Reply>,
    requests: Vec<Value>,
}

/// The running mock.
#[derive(Clone)]
pub struct MockAnthropic {
    pub url: String,
    state: Arc<Mutex<MockState>>,
}

fn frame(name: &str, data: Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

fn start_frames() -> Vec<Bytes> {
    vec![frame(
        "message_start",
        json!({"type":"message_start","message":{"id":"msg_mock","type":"message","role":"assistant","content":[],
            "model":"claude-mock","stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1,
            "cache_creation_input_tokens":3,"cache_read_input_tokens":5}}}),
    )]
}

fn text_frames(index: usize, pieces: &[String]) -> Vec<Bytes> {
    let mut out = vec![frame(
        "content_block_start",
        json!({"type":"content_block_start","index":index,"content_block":{"type":"text","text":""}}),
    )];
    for p in pieces {
        out.push(frame("content_block_delta", json!({"type":"content_block_delta","index":index,"delta":{"type":"text_delta","text":p}})));
    }
    out.push(frame(
        "content_block_stop",
        json!({"type":"content_block_stop","index":index}),
    ));
    out
}

fn end_frames(stop: &str) -> Vec<Bytes> {
    vec![
        frame(
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":stop,"stop_sequence":null},"usage":{"output_tokens":7}}),
        ),
        frame("message_stop", json!({"type":"message_stop"})),
    ]
}

fn split(text: &str) -> Vec<String> {
    text.split_inclusive(' ').map(str::to_string).collect()
}

impl MockAnthropic {
    /// Starts the mock on 127.0.0.1:0.
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(MockState::default()));
        let app = Router::new()
            .route("/v1/messages", post(messages))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.ok() });
        MockAnthropic { url, state }
    }

    /// Queues replies, served in order (an empty queue answers "ok").
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.lock().unwrap().replies.extend(replies);
    }

    /// Request bodies received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.state.lock().unwrap().requests.clone()
    }
}

async fn messages(State(state): State<Arc<Mutex<MockState>>>, body: axum::Json<Value>) -> Response {
    let reply = {
        let mut s = state.lock().unwrap();
        s.requests.push(body.0.clone());
        s.replies.pop_front().unwrap_or(Reply::Text("ok".into()))
    };
    let (stall, reset) = (matches!(reply, Reply::Stall), matches!(reply, Reply::Reset));
    let (frames, delay): (Vec<Bytes>, Duration) = match reply {
        Reply::Status(status, kind) => {
            let body =
                json!({"type":"error","error":{"type":kind,"message":format!("mock {kind}")}});
            return (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response();
        }
        Reply::Text(t) => (
            [
                start_frames(),
                text_frames(0, &split(&t)),
                end_frames("end_turn"),
            ]
            .concat(),
            Duration::ZERO,
        ),
        Reply::MaxTokens(t) => (
            [
                start_frames(),
                text_frames(0, &split(&t)),
                end_frames("max_tokens"),
            ]
            .concat(),
            Duration::ZERO,
        ),
        Reply::Refusal => (
            [start_frames(), end_frames("refusal")].concat(),
            Duration::ZERO,
        ),
        Reply::Thinking(t) => {
            let mut f = start_frames();
            f.push(frame("content_block_start", json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}})));
            f.push(frame("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}})));
            f.push(frame("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig123"}})));
            f.push(frame(
                "content_block_stop",
                json!({"type":"content_block_stop","index":0}),
            ));
            f.extend(text_frames(1, &split(&t)));
            f.extend(end_frames("end_turn"));
            (f, Duration::ZERO)
        }
        Reply::Tools(text, calls) => {
            let mut f = start_frames();
            let mut index = 0;
            if let Some(t) = text {
                f.extend(text_frames(0, &split(&t)));
                index = 1;
            }
            for (i, (name, input)) in calls.iter().enumerate() {
                let idx = index + i;
                f.push(frame("content_block_start", json!({"type":"content_block_start","index":idx,
                    "content_block":{"type":"tool_use","id":format!("toolu_mock_{idx}"),"name":name,"input":{}}})));
                let s = input.to_string();
                let (a, b) = s.split_at(s.len() / 2);
                for piece in [a, b] {
                    f.push(frame("content_block_delta", json!({"type":"content_block_delta","index":idx,"delta":{"type":"input_json_delta","partial_json":piece}})));
                }
                f.push(frame(
                    "content_block_stop",
                    json!({"type":"content_block_stop","index":idx}),
                ));
            }
            f.extend(end_frames("tool_use"));
            (f, Duration::ZERO)
        }
        Reply::Slow {
            text,
            chunks,
            delay_ms,
        } => {
            let words = split(&text);
            let per = words.len().div_ceil(chunks.max(1)).max(1);
            let pieces: Vec<String> = words.chunks(per).map(|c| c.concat()).collect();
            (
                [
                    start_frames(),
                    text_frames(0, &pieces),
                    end_frames("end_turn"),
                ]
                .concat(),
                Duration::from_millis(delay_ms),
            )
        }
        Reply::Garbage => (
            vec![
                Bytes::from_static(b"event: message_start\ndata: {not json at all\n\n"),
                Bytes::from_static(b"data: \x01\x02 definitely-not-sse\n\n"),
                Bytes::from_static(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"),
            ],
            Duration::ZERO,
        ),
        Reply::Reset => (vec![], Duration::ZERO),
        Reply::Stall => (start_frames(), Duration::ZERO),
        Reply::Cut => {
            let mut f = start_frames();
            f.push(frame("content_block_start", json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})));
            f.push(frame("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"partial"}})));
            (f, Duration::ZERO)
        }
    };
    let (tx, rx) = mpsc::unbounded_channel::<Result<Bytes, std::io::Error>>();
    tokio::spawn(async move {
        if reset {
            let _ = tx.send(Err(std::io::Error::other("reset")));
            return;
        }
        for f in frames {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if tx.send(Ok(f)).is_err() {
                return;
            }
        }
        if stall {
            tokio::time::sleep(Duration::from_secs(120)).await;
            drop(tx);
        }
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(UnboundedReceiverStream::new(rx)))
        .unwrap()
}
