//! A turn's first model request started by the transaction that accepts its input
//! (`engine::fast_start`) and the runner started from what that transaction committed
//! (`engine::Handoff`): each request is issued once, every span closes, an interrupt that
//! follows the input at once still cuts the request, and a runner that stops before the
//! request leaves it to be issued again.

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::http::{types, weather_tool};
use crate::support::sse::Stream;
use crate::support::{Backend, Options, TestServer, eventually};

backend_tests!(
    each_turn_issues_its_request_once,
    an_interrupt_right_after_the_input_cuts_the_request,
    a_request_started_before_a_stop_is_issued_after_it,
);

const WEATHER: &str = "call get_weather {\"city\":\"Paris\"}\n---\nsay It is {{result}} in Paris.";

async fn stream(s: &TestServer, sid: &str) -> Stream {
    Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        s.client.key.as_deref(),
        &[],
    )
    .await
}

/// Waits until the session's runner is gone, so the next input finds the session as a
/// client would after seeing it idle for a while (and the history cache filled).
async fn runner_gone(s: &TestServer) {
    eventually(10, "the runner to exit", || async {
        (s.active_runners() == 0).then_some(())
    })
    .await;
}

/// Every span of `log` is closed once, by an end naming it; none of them failed.
fn spans_balanced(log: &[Value]) {
    let starts: Vec<&str> = log
        .iter()
        .filter(|e| e["type"] == "span.model_request_start")
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    let ends: Vec<&Value> = log
        .iter()
        .filter(|e| e["type"] == "span.model_request_end")
        .collect();
    let mut closed: Vec<&str> = ends
        .iter()
        .map(|e| e["model_request_start_id"].as_str().unwrap())
        .collect();
    closed.sort();
    let mut opened = starts.clone();
    opened.sort();
    assert_eq!(opened, closed, "each span closed exactly once");
    let ids: std::collections::HashSet<&str> =
        log.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), log.len(), "no duplicated event");
}

/// The events from the last `user.message` or `user.custom_tool_result` on.
fn last_turn(log: &[Value]) -> &[Value] {
    let i = log
        .iter()
        .rposition(|e| e["type"] == "user.message" || e["type"] == "user.custom_tool_result")
        .unwrap();
    &log[i..]
}

/// Plain turns and custom-tool round trips: the events are those of the loop's own path,
/// in its order; from the second turn on the request is started with the input (the span
/// start is stamped by the input's transaction); each request is issued once.
async fn each_turn_issues_its_request_once(b: Backend) {
    // Tests what the caches do, so they are on even in the suite's caches-off pass.
    let s = TestServer::start_tuned(b, Options::default(), |c| c.engine.caches = true).await;
    let c = &s.client;
    let agent = c.agent(json!([weather_tool()])).await;
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    let mut st = stream(&s, &sid).await;
    let plain = [
        "user.message",
        "session.status_running",
        "span.model_request_start",
        "agent.message",
        "span.model_request_end",
        "session.usage",
        "session.status_idle",
    ];
    let tool_call = [
        "user.message",
        "session.status_running",
        "span.model_request_start",
        "agent.custom_tool_use",
        "span.model_request_end",
        "session.usage",
        "session.status_idle",
    ];
    let tool_answer = [
        "user.custom_tool_result",
        "session.status_running",
        "span.model_request_start",
        "agent.message",
        "span.model_request_end",
        "session.usage",
        "session.status_idle",
    ];
    for round in 0..3 {
        st.seen.clear();
        c.say(&sid, &format!("say hello {round}")).await;
        st.until_idle(10).await;
        assert_eq!(types(&st.seen), plain, "plain turn {round}");
        runner_gone(&s).await;

        st.seen.clear();
        c.say(&sid, WEATHER).await;
        let idle = st.until_idle(10).await;
        assert_eq!(types(&st.seen), tool_call, "tool call {round}");
        let call = idle["stop_reason"]["event_ids"][0].as_str().unwrap();
        runner_gone(&s).await;

        st.seen.clear();
        c.send_events(
            &sid,
            json!([{"type": "user.custom_tool_result", "custom_tool_use_id": call,
                    "content": [{"type": "text", "text": format!("sunny {round}")}]}]),
        )
        .await;
        st.until_idle(10).await;
        assert_eq!(types(&st.seen), tool_answer, "tool answer {round}");
        let said = st
            .seen
            .iter()
            .find(|e| e["type"] == "agent.message")
            .unwrap();
        assert_eq!(
            said["content"][0]["text"],
            format!("It is sunny {round} in Paris."),
            "the request saw the result"
        );
        runner_gone(&s).await;
    }
    let log = c.all_events(&sid).await;
    spans_balanced(&log);
    assert!(
        log.iter()
            .filter(|e| e["type"] == "span.model_request_end")
            .all(|e| e["is_error"] == false),
        "no request was closed as failed or re-issued"
    );
    // Every request but the first (the history cache is empty until a loop ends) was
    // started in its input's transaction, which stamped both.
    let starts: Vec<usize> = (0..log.len())
        .filter(|&i| log[i]["type"] == "span.model_request_start")
        .collect();
    assert_eq!(starts.len(), 9);
    let fast = starts
        .iter()
        .filter(|&&i| {
            let input = &log[i - 2];
            assert!(input["type"] == "user.message" || input["type"] == "user.custom_tool_result");
            input["processed_at"] == log[i]["processed_at"]
        })
        .count();
    assert_eq!(
        fast, 8,
        "every request but the first was started with its input"
    );
    assert_eq!(last_turn(&log).len(), tool_answer.len());
}

/// An interrupt sent right after the input (while the runner may still be starting from the
/// handoff, or already waiting on the model) cuts the request: the turn ends at once, the
/// span is closed, the model's answer never arrives.
async fn an_interrupt_right_after_the_input_cuts_the_request(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let agent = c.agent(json!([])).await;
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    let mut st = stream(&s, &sid).await;
    c.say(&sid, "say warm-up").await;
    st.until_idle(10).await;
    for round in 0..5 {
        runner_gone(&s).await;
        st.seen.clear();
        c.say(&sid, &format!("sleep 60000\nsay too late {round}"))
            .await;
        c.send_events(&sid, json!([{"type": "user.interrupt"}]))
            .await;
        let idle = st.until_idle(10).await;
        assert_eq!(idle["stop_reason"]["type"], "end_turn", "round {round}");
        assert!(
            !st.seen.iter().any(|e| e["type"] == "agent.message"),
            "round {round}: the request was cut"
        );
    }
    let log = c.all_events(&sid).await;
    spans_balanced(&log);
    assert_eq!(
        log.iter().filter(|e| e["type"] == "agent.message").count(),
        1,
        "only the warm-up answered"
    );
    // The session works normally afterwards.
    c.say(&sid, "say after").await;
    st.until_idle(10).await;
    spans_balanced(&c.all_events(&sid).await);
}

/// A server stopped while a turn's request (started with its input) is under way: the next
/// server finds the span open with nobody to issue it, closes it and issues it again, once.
async fn a_request_started_before_a_stop_is_issued_after_it(b: Backend) {
    let mut s = TestServer::start(b).await;
    let c = s.client.clone();
    let agent = c.agent(json!([])).await;
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    let mut st = stream(&s, &sid).await;
    c.say(&sid, "say first").await;
    st.until_idle(10).await;
    runner_gone(&s).await;
    c.say(&sid, "sleep 3000\nsay survived").await;
    st.until(10, |e| e["type"] == "span.model_request_start")
        .await;
    drop(st);
    let config = s.config.clone();
    s.stop().await;
    let s2 = TestServer::boot(config, b).await;
    let c2 = s2.client.clone();
    let log = eventually(20, "the turn to finish after the restart", || async {
        let log = c2.all_events(&sid).await;
        (log.iter()
            .filter(|e| e["type"] == "session.status_idle")
            .count()
            == 2)
            .then_some(log)
    })
    .await;
    spans_balanced(&log);
    let said: Vec<&Value> = log
        .iter()
        .filter(|e| e["type"] == "agent.message")
        .collect();
    assert_eq!(said.len(), 2, "the second request answered once");
    assert_eq!(said[1]["content"][0]["text"], "survived");
    drop(s);
}
