//! The SSE endpoint: live-only by default, replay after an event id without gaps or
//! duplicates, previews, deletion, and errors before the stream starts.

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::sse::Stream;
use crate::support::{Backend, TestServer};

backend_tests!(
    live_only_by_default_and_errors_before_streaming,
    replay_after_an_event_while_appending,
    previews_on_request,
    deletion_ends_the_stream,
    a_stalled_client_slows_nothing,
);

async fn live_only_by_default_and_errors_before_streaming(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let agent = c.agent(json!([])).await;
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    c.say(&sid, "hello").await;
    crate::support::eventually(10, "first turn", || async {
        (c.get(&format!("/v1/sessions/{sid}")).await.ok()["status"] == "idle").then_some(())
    })
    .await;
    let mut st = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        None,
        &[],
    )
    .await;
    c.say(&sid, "second").await;
    let first = st.next_event(10).await;
    assert_eq!(
        first["type"], "user.message",
        "no replay of history on connect"
    );
    assert_eq!(first["content"][0]["text"], "second");
    let idle = st.until_idle(10).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    // Errors come as JSON before any SSE.
    c.get("/v1/sessions/sesn_nope/events/stream").await.err(404);
    c.get(&format!(
        "/v1/sessions/{sid}/events/stream?event_deltas%5B%5D=agent.tool_use"
    ))
    .await
    .err(400);
    c.get(&format!("/v1/sessions/{sid}/events/stream?after=sevt_nope"))
        .await
        .err(400);
}

async fn replay_after_an_event_while_appending(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let agent = c.agent(json!([{"type": "custom", "name": "t", "description": "d", "input_schema": {"type": "object"}}])).await;
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    let first = c.say(&sid, "hello").await["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Keep the session busy appending while streams replay from `first`.
    let writer = {
        let c = c.clone();
        let sid = sid.clone();
        tokio::spawn(async move {
            for i in 0..15 {
                c.say(&sid, &format!("message {i}")).await;
                tokio::time::sleep(std::time::Duration::from_millis(15)).await;
            }
        })
    };
    let mut by_header = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        None,
        &[("last-event-id", first.as_str())],
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    let mut by_query = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream?after={first}"),
        None,
        &[],
    )
    .await;
    writer.await.unwrap();
    crate::support::eventually(20, "all turns", || async {
        let log = c.all_events(&sid).await;
        let idle_last = log
            .last()
            .is_some_and(|e| e["type"] == "session.status_idle");
        (idle_last && c.get(&format!("/v1/sessions/{sid}")).await.ok()["status"] == "idle")
            .then_some(())
    })
    .await;
    let log = c.all_events(&sid).await;
    let pos = log.iter().position(|e| e["id"] == first.as_str()).unwrap();
    let expected: Vec<Value> = log[pos + 1..].to_vec();
    for st in [&mut by_header, &mut by_query] {
        let mut got = Vec::new();
        while got.len() < expected.len() {
            got.push(st.next_event(10).await);
        }
        let got_ids: Vec<&Value> = got.iter().map(|e| &e["id"]).collect();
        let want_ids: Vec<&Value> = expected.iter().map(|e| &e["id"]).collect();
        assert_eq!(
            got_ids, want_ids,
            "every event after the given one, once, in order"
        );
    }
}

async fn previews_on_request(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let agent = c.agent(json!([])).await;
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    let mut st = Stream::open(&s.url, &format!("/v1/sessions/{sid}/events/stream?event_deltas%5B%5D=agent.message&event_deltas%5B%5D=agent.thinking"), None, &[]).await;
    let mut plain = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        None,
        &[],
    )
    .await;
    c.say(&sid, "think\nsleep 200\nsay one two three").await;
    let mut frames = Vec::new();
    loop {
        let (name, data) = st.next_frame(10).await.unwrap();
        let done = name == "session.status_idle";
        frames.push((name, data));
        if done {
            break;
        }
    }
    let names: Vec<&str> = frames.iter().map(|(n, _)| n.as_str()).collect();
    let msg = frames
        .iter()
        .find(|(n, _)| n == "agent.message")
        .unwrap()
        .1
        .clone();
    let start = frames
        .iter()
        .find(|(n, d)| n == "event_start" && d["event"]["type"] == "agent.message")
        .unwrap()
        .1
        .clone();
    assert_eq!(
        start["event"]["id"], msg["id"],
        "the preview announces the buffered event's id"
    );
    assert!(start.get("id").is_none() && start.get("processed_at").is_none());
    let deltas: String = frames
        .iter()
        .filter(|(n, _)| n == "event_delta")
        .map(|(_, d)| {
            assert_eq!(d["event_id"], msg["id"]);
            assert_eq!(d["delta"]["type"], "content_delta");
            d["delta"]["content"]["text"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(deltas, "one two three");
    let think_start = names.iter().position(|n| *n == "event_start").unwrap();
    let span_start = names
        .iter()
        .position(|n| *n == "span.model_request_start")
        .unwrap();
    let msg_pos = names.iter().position(|n| *n == "agent.message").unwrap();
    assert!(span_start < think_start && think_start < msg_pos);
    assert!(
        frames
            .iter()
            .any(|(n, d)| n == "event_start" && d["event"]["type"] == "agent.thinking")
    );
    // Previews are never persisted nor sent to connections that did not ask.
    plain.until_idle(10).await;
    assert!(
        !plain
            .seen
            .iter()
            .any(|e| e["type"] == "event_delta" || e["type"] == "event_start")
    );
    assert!(
        !c.all_events(&sid)
            .await
            .iter()
            .any(|e| e["type"] == "event_delta")
    );
}

async fn deletion_ends_the_stream(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let agent = c.agent(json!([])).await;
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    let mut st = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        None,
        &[],
    )
    .await;
    c.delete(&format!("/v1/sessions/{sid}")).await.ok();
    let last = st.next_event(10).await;
    assert_eq!(last["type"], "session.deleted");
    assert!(
        st.next_frame(3).await.is_none(),
        "the stream closes after session.deleted"
    );
}

async fn a_stalled_client_slows_nothing(b: Backend) {
    use tokio::io::AsyncWriteExt;
    let s = TestServer::start(b).await;
    let c = &s.client;
    let agent = c.agent(json!([])).await;
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    // A subscriber that never reads, with a tiny receive window: the server's writes to it
    // block as soon as the kernel buffers fill.
    let addr: std::net::SocketAddr = s.url.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket.connect(addr).await.unwrap();
    stalled
        .write_all(format!("GET /v1/sessions/{sid}/events/stream HTTP/1.1\r\nHost: x\r\nanthropic-version: 2023-06-01\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut fast = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        None,
        &[],
    )
    .await;
    crate::support::eventually(10, "both subscribers", || async {
        (s.stream_topics() == 1).then_some(())
    })
    .await;
    // Far more than the stalled socket can hold, and more events than a subscriber may fall
    // behind before it is dropped to the store.
    let big = "x".repeat(60_000);
    for i in 0..60 {
        c.say(&sid, &format!("say {i} {big}")).await;
        let idle = fast.until_idle(20).await;
        assert_eq!(idle["stop_reason"]["type"], "end_turn");
    }
    let said: Vec<&Value> = fast
        .seen
        .iter()
        .filter(|e| e["type"] == "agent.message")
        .collect();
    assert_eq!(said.len(), 60, "the reading subscriber got every turn");
    assert_eq!(
        c.get(&format!("/v1/sessions/{sid}")).await.ok()["status"],
        "idle"
    );
    drop(stalled);
    drop(fast);
    crate::support::eventually(40, "both subscriptions to go away", || async {
        (s.stream_topics() == 0).then_some(())
    })
    .await;
}
