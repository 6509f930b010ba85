//! Multiagent sessions: delegate threads running the same loop as the primary thread, with
//! their own history, tools and permissions; the condensed primary stream; thread endpoints.

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::sse::Stream;
use crate::support::{Backend, Options, TestServer};

backend_tests!(
    a_coordinator_delegates_in_parallel_and_combines,
    follow_ups_continue_a_thread_and_threads_are_listed,
    a_delegates_custom_tool_is_answered_on_the_session,
    delegates_ask_for_their_own_confirmations,
    interrupting_one_thread_or_all,
    a_failing_delegate_does_not_fail_the_coordinator,
    limits_on_threads_and_depth,
    archive_events_stream_and_transcript,
    a_delegates_web_searches_count_in_its_own_usage,
);

/// Creates an agent; returns its id.
async fn agent(s: &TestServer, name: &str, extra: Value) -> String {
    let mut body = json!({"name": name, "model": "mast-scripted"});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    s.client.post("/v1/agents", body).await.ok()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A coordinator over `helpers` (ids), and a session of it with its stream open.
async fn coordinated(s: &TestServer, helpers: &[&str], extra: Value) -> (String, Stream) {
    let roster: Vec<Value> = helpers.iter().map(|h| json!(h)).collect();
    let mut def = json!({"multiagent": {"type": "coordinator", "agents": roster}});
    for (k, v) in extra.as_object().unwrap() {
        def[k] = v.clone();
    }
    let coord = agent(s, "coordinator", def).await;
    let env = s.client.environment().await;
    let sid = s
        .client
        .post(
            "/v1/sessions",
            json!({"agent": coord, "environment_id": env["id"]}),
        )
        .await
        .ok()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let st = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        None,
        &[],
    )
    .await;
    (sid, st)
}

fn send(agent: &str, message: &str) -> String {
    format!(
        "call send_to_agent {}",
        json!({"agent": agent, "message": message})
    )
}

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

async fn final_text(s: &TestServer, sid: &str) -> String {
    let events = s.client.all_events(sid).await;
    of_type(&events, "agent.message")
        .last()
        .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

async fn a_coordinator_delegates_in_parallel_and_combines(b: Backend) {
    let s = TestServer::start(b).await;
    let alpha = agent(&s, "alpha", json!({"system": "You are alpha."})).await;
    let beta = agent(&s, "beta", json!({})).await;
    let (sid, mut st) = coordinated(&s, &[&alpha, &beta], json!({})).await;
    let script = format!(
        "{}\n{}\n---\nsay combined: {{{{result}}}}",
        send("alpha", "say alpha reporting"),
        send("beta", "sleep 200\nsay beta reporting")
    );
    s.client.say(&sid, &script).await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let seen = &st.seen;
    let created = of_type(seen, "session.thread_created");
    assert_eq!(created.len(), 2, "{seen:#?}");
    let names: Vec<&str> = created
        .iter()
        .map(|e| e["agent_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alpha", "beta"]);
    let sent = of_type(seen, "agent.thread_message_sent");
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0]["to_agent_name"], "alpha");
    assert_eq!(sent[0]["content"][0]["text"], "say alpha reporting");
    // Replies come back on the primary stream; the delegates' own messages do not.
    let received = of_type(seen, "agent.thread_message_received");
    assert_eq!(received.len(), 2);
    assert!(received.iter().all(|r| r["from_agent_name"].is_string()));
    let messages = of_type(seen, "agent.message");
    assert_eq!(
        messages.len(),
        1,
        "the primary stream is condensed: {seen:#?}"
    );
    let text = messages[0]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("alpha reporting") && text.contains("beta reporting"),
        "{text}"
    );
    // Delegate status is cross-posted, naming the thread and agent.
    let idles = of_type(seen, "session.thread_status_idle");
    assert_eq!(idles.len(), 2);
    assert!(
        idles
            .iter()
            .all(|e| e["session_thread_id"].is_string() && e["stop_reason"]["type"] == "end_turn")
    );
    // Each thread's own log has its full history.
    let tid = created[0]["session_thread_id"].as_str().unwrap();
    let own = s
        .client
        .get(&format!("/v1/sessions/{sid}/threads/{tid}/events"))
        .await
        .ok();
    let types: Vec<&str> = own["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "session.thread_status_running",
            "agent.thread_message_received",
            "span.model_request_start",
            "agent.message",
            "span.model_request_end",
            "session.thread_status_idle",
            "agent.thread_message_sent",
        ]
    );
    let session = s.client.get(&format!("/v1/sessions/{sid}")).await.ok();
    assert_eq!(session["status"], "idle");
    assert!(session["usage"]["output_tokens"].as_i64().unwrap() > 0);
}

async fn follow_ups_continue_a_thread_and_threads_are_listed(b: Backend) {
    let s = TestServer::start(b).await;
    let alpha = agent(&s, "alpha", json!({})).await;
    let (sid, mut st) = coordinated(&s, &[&alpha], json!({})).await;
    s.client
        .say(
            &sid,
            &format!(
                "{}\n---\nsay {{{{result}}}}",
                send("alpha", "say first answer")
            ),
        )
        .await;
    st.until_idle(60).await;
    let threads = s
        .client
        .get(&format!("/v1/sessions/{sid}/threads"))
        .await
        .ok();
    let data = threads["data"].as_array().unwrap();
    assert_eq!(data.len(), 2, "{threads}");
    assert!(data[0]["parent_thread_id"].is_null());
    assert_eq!(data[0]["status"], "idle");
    let child = &data[1];
    assert_eq!(child["type"], "session_thread");
    assert_eq!(child["agent"]["name"], "alpha");
    assert_eq!(child["parent_thread_id"], data[0]["id"]);
    assert_eq!(child["status"], "idle");
    assert!(child["usage"]["output_tokens"].as_i64().unwrap() > 0);
    assert!(child["agent"].get("multiagent").is_none());
    let tid = child["id"].as_str().unwrap().to_string();
    // A follow-up continues the same thread's history.
    st.seen.clear();
    let follow = format!(
        "call send_to_agent {}\n---\nsay {{{{result}}}}",
        json!({"thread_id": tid, "message": "say second answer"})
    );
    s.client.say(&sid, &follow).await;
    st.until_idle(60).await;
    assert!(of_type(&st.seen, "session.thread_created").is_empty());
    assert_eq!(final_text(&s, &sid).await, "second answer");
    let own = s
        .client
        .get(&format!("/v1/sessions/{sid}/threads/{tid}/events"))
        .await
        .ok();
    let received = own["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "agent.thread_message_received")
        .count();
    assert_eq!(received, 2, "both tasks are in the thread's history");
    let filtered = s
        .client
        .get(&format!("/v1/sessions/{sid}/threads?statuses[]=running"))
        .await
        .ok();
    assert_eq!(filtered["data"].as_array().unwrap().len(), 0);
    s.client
        .get(&format!("/v1/sessions/{sid}/threads?statuses[]=sleeping"))
        .await
        .err(400);
    s.client
        .get(&format!(
            "/v1/sessions/{sid}/threads/sthr_011CZnope0000000000000"
        ))
        .await
        .err(404);
}

async fn a_delegates_custom_tool_is_answered_on_the_session(b: Backend) {
    let s = TestServer::start(b).await;
    let weather = agent(
        &s,
        "weather",
        json!({"tools": [crate::support::http::weather_tool()]}),
    )
    .await;
    let (sid, mut st) = coordinated(&s, &[&weather], json!({})).await;
    let task = "call get_weather {\"city\": \"Paris\"}\n---\nsay forecast: {{result}}";
    s.client
        .say(
            &sid,
            &format!("{}\n---\nsay {{{{result}}}}", send("weather", task)),
        )
        .await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "requires_action");
    let uses = of_type(&st.seen, "agent.custom_tool_use");
    assert_eq!(uses.len(), 1, "the blocking call is cross-posted");
    let call = uses[0].clone();
    assert!(call["session_thread_id"].is_string());
    assert_eq!(idle["stop_reason"]["event_ids"], json!([call["id"]]));
    let blocked = of_type(&st.seen, "session.thread_status_idle");
    assert_eq!(blocked[0]["stop_reason"]["type"], "requires_action");
    let sent = s
        .client
        .send_events(
            &sid,
            json!([{"type": "user.custom_tool_result", "custom_tool_use_id": call["id"],
                "content": [{"type": "text", "text": "sunny"}]}]),
        )
        .await;
    assert_eq!(
        sent["data"][0]["session_thread_id"],
        call["session_thread_id"]
    );
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    assert_eq!(final_text(&s, &sid).await, "forecast: sunny");
}

async fn delegates_ask_for_their_own_confirmations(b: Backend) {
    let s = TestServer::start(b).await;
    let toolset = json!([{"type": "agent_toolset_20260401",
        "default_config": {"permission_policy": {"type": "always_ask"}}}]);
    let reader = agent(&s, "reader", json!({"tools": toolset.clone()})).await;
    let (sid, mut st) = coordinated(&s, &[&reader], json!({"tools": toolset})).await;
    // The coordinator's own read is confirmed; the delegate's must be confirmed again.
    let task = "call glob {\"pattern\": \"*\"}\n---\nsay delegate globbed";
    let script = format!(
        "call glob {{\"pattern\": \"*\"}}\n---\n{}\n---\nsay {{{{result}}}}",
        send("reader", task)
    );
    s.client.say(&sid, &script).await;
    let idle = st.until_idle(60).await;
    let first = idle["stop_reason"]["event_ids"][0].clone();
    s.client
        .send_events(
            &sid,
            json!([{"type": "user.tool_confirmation", "tool_use_id": first, "result": "allow"}]),
        )
        .await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "requires_action");
    let asks: Vec<&Value> = of_type(&st.seen, "agent.tool_use")
        .into_iter()
        .filter(|e| e["evaluated_permission"] == "ask")
        .collect();
    assert_eq!(asks.len(), 2, "{:#?}", st.seen);
    assert!(asks[1]["session_thread_id"].is_string());
    assert_eq!(idle["stop_reason"]["event_ids"], json!([asks[1]["id"]]));
    s.client
        .send_events(&sid, json!([{"type": "user.tool_confirmation", "tool_use_id": asks[1]["id"], "result": "allow"}]))
        .await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    assert_eq!(final_text(&s, &sid).await, "delegate globbed");
}

async fn interrupting_one_thread_or_all(b: Backend) {
    let s = TestServer::start(b).await;
    let slow = agent(&s, "slow", json!({})).await;
    let quick = agent(&s, "quick", json!({})).await;
    let (sid, mut st) = coordinated(&s, &[&slow, &quick], json!({})).await;
    let script = format!(
        "{}\n{}\n---\nsay after: {{{{result}}}}",
        send("slow", "sleep 20000\nsay too late"),
        send("quick", "sleep 300\nsay quick done")
    );
    s.client.say(&sid, &script).await;
    let created = st
        .until(30, |e| {
            e["type"] == "session.thread_created" && e["agent_name"] == "slow"
        })
        .await;
    let slow_thread = created["session_thread_id"].clone();
    // Interrupt just the slow delegate: the coordinator carries on with an error result.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    s.client
        .send_events(
            &sid,
            json!([{"type": "user.interrupt", "session_thread_id": slow_thread}]),
        )
        .await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let text = final_text(&s, &sid).await;
    assert!(
        text.contains("quick done") && text.contains("interrupted"),
        "{text}"
    );
    assert!(!text.contains("too late"));
    // Interrupt everything: the delegates and the coordinator stop, without sampling.
    st.seen.clear();
    let script = format!(
        "{}\n---\nsay should not be said",
        send("quick", "sleep 20000\nsay never")
    );
    s.client.say(&sid, &script).await;
    st.until(30, |e| e["type"] == "session.thread_status_running")
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    s.client
        .send_events(&sid, json!([{"type": "user.interrupt"}]))
        .await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    assert!(
        of_type(&st.seen, "agent.message").is_empty(),
        "{:#?}",
        st.seen
    );
    let threads = s
        .client
        .get(&format!("/v1/sessions/{sid}/threads"))
        .await
        .ok();
    assert!(
        threads["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"] == "idle"),
        "{threads}"
    );
}

async fn a_failing_delegate_does_not_fail_the_coordinator(b: Backend) {
    let s = TestServer::start_with(
        b,
        Options {
            max_requests_per_turn: 3,
            ..Default::default()
        },
    )
    .await;
    let looper = agent(&s, "looper", json!({})).await;
    let (sid, mut st) = coordinated(&s, &[&looper], json!({})).await;
    // The delegate keeps calling a tool it does not have until its turn's limit.
    let task = "call nothing {}\n---\ncall nothing {}\n---\ncall nothing {}\n---\ncall nothing {}";
    s.client
        .say(
            &sid,
            &format!(
                "{}\n---\nsay the delegate said: {{{{result}}}}",
                send("looper", task)
            ),
        )
        .await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let text = final_text(&s, &sid).await;
    assert!(text.contains("failed"), "{text}");
    let terminated = of_type(&st.seen, "session.thread_status_terminated");
    assert_eq!(terminated.len(), 1);
    let threads = s
        .client
        .get(&format!("/v1/sessions/{sid}/threads?statuses[]=terminated"))
        .await
        .ok();
    assert_eq!(threads["data"].as_array().unwrap().len(), 1);
    // The filter applies before paging: a one-row page skips the idle primary thread and
    // still finds the terminated delegate, with no page after it.
    let page = s
        .client
        .get(&format!(
            "/v1/sessions/{sid}/threads?statuses[]=terminated&limit=1"
        ))
        .await
        .ok();
    let data = page["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "{page}");
    assert_eq!(data[0]["status"], "terminated");
    assert!(page["next_page"].is_null(), "{page}");
}

async fn limits_on_threads_and_depth(b: Backend) {
    let s = TestServer::start(b).await;
    // A delegate cannot delegate: it has no delegation tools.
    let nested = agent(&s, "nested", json!({})).await;
    let (sid, mut st) = coordinated(&s, &[&nested], json!({})).await;
    let task = format!("{}\n---\nsay {{{{result}}}}", send("nested", "say deeper"));
    s.client
        .say(
            &sid,
            &format!("{}\n---\nsay {{{{result}}}}", send("nested", &task)),
        )
        .await;
    st.until_idle(60).await;
    let text = final_text(&s, &sid).await;
    assert!(text.contains("no tool named `send_to_agent`"), "{text}");
    // 25 open delegate threads at most.
    st.seen.clear();
    let calls: Vec<String> = (0..26)
        .map(|i| send("nested", &format!("say n{i}")))
        .collect();
    s.client
        .say(
            &sid,
            &format!("{}\n---\nsay {{{{result}}}}", calls.join("\n")),
        )
        .await;
    let idle = st.until_idle(120).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    // One thread existed already: 24 more fit, the rest are refused.
    let created = of_type(&st.seen, "session.thread_created").len();
    assert_eq!(created, 24);
    let text = final_text(&s, &sid).await;
    assert!(text.contains("25 open delegate threads"), "{text}");
}

async fn archive_events_stream_and_transcript(b: Backend) {
    let s = TestServer::start(b).await;
    let alpha = agent(&s, "alpha", json!({})).await;
    let (sid, mut st) = coordinated(&s, &[&alpha], json!({})).await;
    s.client
        .say(
            &sid,
            &format!(
                "{}\n---\nsay {{{{result}}}}",
                send("alpha", "say archived soon")
            ),
        )
        .await;
    st.until_idle(60).await;
    let threads = s
        .client
        .get(&format!("/v1/sessions/{sid}/threads"))
        .await
        .ok();
    let primary = threads["data"][0]["id"].as_str().unwrap().to_string();
    let tid = threads["data"][1]["id"].as_str().unwrap().to_string();
    // The thread's own stream replays its history with `after`.
    let mut thread_stream = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/threads/{tid}/stream"),
        None,
        &[("last-event-id", "")],
    )
    .await;
    s.client
        .post(
            &format!("/v1/sessions/{sid}/threads/{primary}/archive"),
            json!({}),
        )
        .await
        .err(400);
    let archived = s
        .client
        .post(
            &format!("/v1/sessions/{sid}/threads/{tid}/archive"),
            json!({}),
        )
        .await
        .ok();
    assert_eq!(archived["status"], "terminated");
    assert!(archived["archived_at"].is_string());
    let ended = thread_stream
        .until(10, |e| e["type"] == "session.thread_status_terminated")
        .await;
    assert_eq!(ended["session_thread_id"], tid.as_str());
    // Archived threads cannot be continued.
    st.seen.clear();
    let follow = format!(
        "call send_to_agent {}\n---\nsay {{{{result}}}}",
        json!({"thread_id": tid, "message": "say again"})
    );
    s.client.say(&sid, &follow).await;
    st.until_idle(60).await;
    assert!(final_text(&s, &sid).await.contains("has ended"));
    // The transcript holds every thread's events with their lineage.
    let resp = reqwest::get(format!("{}/v1/sessions/{sid}/transcript", s.url))
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "application/x-ndjson"
    );
    let text = resp.text().await.unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let child_lines: Vec<&Value> = lines
        .iter()
        .filter(|l| l["thread_id"] == tid.as_str())
        .collect();
    assert!(child_lines.iter().any(|l| l["type"] == "agent.message"));
    assert!(
        child_lines
            .iter()
            .all(|l| l["parent_thread_id"] == primary.as_str())
    );
    assert!(
        child_lines
            .iter()
            .all(|l| l["spawning_event_id"].is_string())
    );
    assert!(
        lines
            .iter()
            .any(|l| l["thread_id"] == primary.as_str() && l["parent_thread_id"].is_null())
    );
}

async fn a_delegates_web_searches_count_in_its_own_usage(b: Backend) {
    let app = axum::Router::new().route(
        "/search",
        axum::routing::get(|| async {
            axum::Json(json!({"results": [
                {"url": "https://docs.rs/tokio", "title": "tokio docs", "content": "An async runtime"}]}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    let s = TestServer::start_with(
        b,
        Options {
            web_search_url: Some(format!("{base}/search")),
            ..Default::default()
        },
    )
    .await;
    let tools = json!([{"type": "agent_toolset_20260401",
        "default_config": {"permission_policy": {"type": "always_allow"}}}]);
    let searcher = agent(&s, "searcher", json!({"tools": tools})).await;
    let (sid, mut st) = coordinated(&s, &[&searcher], json!({})).await;
    let task = "call web_search {\"query\": \"tokio\"}\n---\ncall web_search {\"query\": \"axum\"}\n---\nsay searched";
    s.client
        .say(
            &sid,
            &format!("{}\n---\nsay {{{{result}}}}", send("searcher", task)),
        )
        .await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let threads = s
        .client
        .get(&format!("/v1/sessions/{sid}/threads"))
        .await
        .ok();
    let delegate = threads["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["parent_thread_id"].is_string())
        .expect("the delegate's thread")
        .clone();
    assert_eq!(
        delegate["usage"]["server_tool_use"]["web_search_requests"], 2,
        "{delegate:#}"
    );
    let session = s.client.get(&format!("/v1/sessions/{sid}")).await.ok();
    assert_eq!(
        session["usage"]["server_tool_use"]["web_search_requests"], 2,
        "the session (and so the primary thread, which shows it) counts every thread's searches"
    );
}
