//! OpenAI-compatible providers: the wire mapping against a scripted chat-completions server,
//! routing configuration, and the models catalog.

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::http::{types, weather_tool};
use crate::support::mock_openai::{MockOpenAi, Reply};
use crate::support::sse::Stream;
use crate::support::{Backend, Options, TestServer};

backend_tests!(
    openai_wire_round_trip,
    openai_errors_retry_cut_and_filter,
    routing_and_models_catalog
);

async fn server(b: Backend, mock: &MockOpenAi) -> TestServer {
    TestServer::start_with(
        b,
        Options {
            openai_base_url: Some(mock.base_url.clone()),
            ..Default::default()
        },
    )
    .await
}

async fn openai_wire_round_trip(b: Backend) {
    let mock = MockOpenAi::start().await;
    mock.push([
        Reply::Reasoning("Considering.".into(), "Hello!".into()),
        Reply::Tools(vec![
            ("get_weather".into(), json!({"city": "Paris"})),
            ("get_weather".into(), json!({"city": "Rome"})),
        ]),
        Reply::Text("Paris sunny, Rome rainy.".into()),
    ]);
    let s = server(b, &mock).await;
    let c = &s.client;
    let agent = c.post("/v1/agents", json!({"name": "o", "model": "oai/gpt-test", "system": "Be brief.", "tools": [weather_tool()]})).await.ok();
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    let mut st = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        None,
        &[],
    )
    .await;
    c.send_events(&sid, json!([{"type": "user.message", "content": [{"type": "text", "text": "hi"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}])).await;
    st.until_idle(10).await;
    assert!(
        st.seen.iter().any(|e| e["type"] == "agent.thinking"),
        "reasoning content becomes agent.thinking"
    );
    let end = st
        .seen
        .iter()
        .find(|e| e["type"] == "span.model_request_end")
        .unwrap();
    assert_eq!(
        end["model_usage"],
        json!({"input_tokens": 16, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 4})
    );
    c.say(&sid, "weather in Paris and Rome?").await;
    let idle = st.until_idle(10).await;
    let ids = idle["stop_reason"]["event_ids"].as_array().unwrap().clone();
    assert_eq!(
        ids.len(),
        2,
        "parallel calls with arguments streamed in pieces"
    );
    let uses: Vec<&Value> = st
        .seen
        .iter()
        .filter(|e| e["type"] == "agent.custom_tool_use")
        .collect();
    assert_eq!(uses[1]["input"], json!({"city": "Rome"}));
    c.send_events(&sid, json!([
        {"type": "user.custom_tool_result", "custom_tool_use_id": ids[0], "content": [{"type": "text", "text": "sunny"}]},
        {"type": "user.custom_tool_result", "custom_tool_use_id": ids[1], "content": [{"type": "text", "text": "rainy"}]}
    ])).await;
    let idle = st.until_idle(10).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let reqs = mock.requests();
    assert_eq!(
        reqs[0]["model"], "gpt-test",
        "the prefix is stripped for the endpoint"
    );
    assert_eq!(reqs[0]["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        reqs[0]["messages"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    assert_eq!(
        reqs[0]["messages"][1]["content"][1]["image_url"]["url"],
        "data:image/png;base64,iVBORw0KGgo="
    );
    assert_eq!(reqs[0]["tools"][0]["function"]["name"], "get_weather");
    let last = reqs[2]["messages"].as_array().unwrap();
    let n = last.len();
    assert_eq!(last[n - 3]["tool_calls"].as_array().unwrap().len(), 2);
    assert_eq!(
        last[n - 2],
        json!({"role": "tool", "tool_call_id": ids[0], "content": "sunny"})
    );
    assert_eq!(
        last[n - 1],
        json!({"role": "tool", "tool_call_id": ids[1], "content": "rainy"})
    );
}

async fn openai_errors_retry_cut_and_filter(b: Backend) {
    let mock = MockOpenAi::start().await;
    let s = server(b, &mock).await;
    let c = &s.client;
    let agent = c
        .post("/v1/agents", json!({"name": "o", "model": "oai/gpt-test"}))
        .await
        .ok();
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    let mut st = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        None,
        &[],
    )
    .await;
    mock.push([
        Reply::Status(429),
        Reply::Cut,
        Reply::Text("finally".into()),
    ]);
    c.say(&sid, "hi").await;
    let idle = st.until_idle(10).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let errors: Vec<&Value> = st
        .seen
        .iter()
        .filter(|e| e["type"] == "session.error")
        .collect();
    assert_eq!(errors[0]["error"]["type"], "model_rate_limited_error");
    assert_eq!(
        errors.len(),
        2,
        "the 429 and the cut stream were both retried"
    );
    assert_eq!(
        st.seen
            .iter()
            .filter(|e| e["type"] == "agent.message")
            .count(),
        1
    );
    mock.push([Reply::Filtered]);
    c.say(&sid, "bad").await;
    assert_eq!(st.until_idle(10).await["stop_reason"]["type"], "refusal");
    mock.push([
        Reply::Length("part one".into()),
        Reply::Text("part two".into()),
    ]);
    c.say(&sid, "long").await;
    assert_eq!(st.until_idle(10).await["stop_reason"]["type"], "end_turn");
    let reqs = mock.requests();
    let last = reqs.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        last,
        json!({"role": "assistant", "content": "part one"}),
        "length continues from the partial answer"
    );
    mock.push([Reply::Status(401)]);
    c.say(&sid, "again").await;
    assert_eq!(
        st.until_idle(10).await["stop_reason"]["type"],
        "retries_exhausted"
    );
    assert!(types(&st.seen).contains(&"session.error".to_string()));
}

async fn routing_and_models_catalog(b: Backend) {
    let mock = MockOpenAi::start().await;
    let s = server(b, &mock).await;
    let c = &s.client;
    let r = c
        .post("/v1/agents", json!({"name": "x", "model": "gpt-4o"}))
        .await;
    // The provider serves `oai/…` ids: the message says so, and where providers come from.
    let e = r.err(400);
    assert!(
        e.contains("no model provider serves `gpt-4o` (did you mean `oai/gpt-4o`?)")
            && e.contains("`oai/…` via `test-openai`")
            && e.contains("MAST_PROVIDERS"),
        "{e}"
    );
    let a = c
        .post("/v1/agents", json!({"name": "x", "model": "oai/anything"}))
        .await
        .ok();
    c.post(
        &format!("/v1/agents/{}", a["id"].as_str().unwrap()),
        json!({"model": "nope-model"}),
    )
    .await
    .err(400);
    let env = c.environment().await;
    let r = c.post("/v1/sessions", json!({"agent": {"type": "agent_with_overrides", "id": a["id"], "model": "unknown"}, "environment_id": env["id"]})).await;
    r.err(400);
    let page = c.get("/v1/models?limit=2").await.ok();
    assert_eq!(page["data"].as_array().unwrap().len(), 2);
    assert_eq!(page["has_more"], true);
    assert_eq!(page["first_id"], "mast-scripted");
    assert_eq!(page["data"][0]["type"], "model");
    let next = c
        .get(&format!(
            "/v1/models?limit=100&after_id={}",
            page["last_id"].as_str().unwrap()
        ))
        .await
        .ok();
    assert_eq!(next["has_more"], false);
    let all: Vec<String> = c.get("/v1/models?limit=1000").await.ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    assert!(all.contains(&"claude-opus-4-7".to_string()));
    let before = c
        .get(&format!("/v1/models?before_id={}", all[3]))
        .await
        .ok();
    assert_eq!(before["data"].as_array().unwrap().len(), 3);
    c.get("/v1/models?after_id=nope").await.err(400);
    assert_eq!(
        c.get("/v1/models/claude-opus-4-7").await.ok()["display_name"],
        "Claude Opus 4.7"
    );
    assert_eq!(
        c.get("/v1/models/oai/anything").await.ok()["id"],
        "oai/anything"
    );
    c.get("/v1/models/gpt-4o").await.err(404);
}
