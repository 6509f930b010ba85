//! `session.usage` while a session works: at the end of each turn, and periodically during a
//! long one (`MAST_USAGE_INTERVAL_MS`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::{Backend, Options, TestServer};
use crate::toolset::{call, session, steps, toolset, turn};

backend_tests!(
    a_long_turn_reports_its_usage_as_it_goes,
    a_short_turn_reports_once_at_its_end,
);

fn usage_reports(seen: &[Value]) -> Vec<&Value> {
    seen.iter()
        .filter(|e| e["type"] == "session.usage")
        .collect()
}

async fn a_long_turn_reports_its_usage_as_it_goes(b: Backend) {
    let s = TestServer::start_with(
        b,
        Options {
            usage_interval: Duration::from_millis(1),
            ..Default::default()
        },
    )
    .await;
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    let script = steps(&[
        call("bash", json!({"command": "sleep 0.01"})),
        call("bash", json!({"command": "sleep 0.01"})),
    ]);
    let idle = turn(&s, &mut sess, &script).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let seen = &sess.st.seen;
    let reports = usage_reports(seen);
    // One after each of the two responses that asked for a tool, one at the end of the turn.
    assert_eq!(reports.len(), 3, "{seen:#?}");
    let outputs: Vec<i64> = reports
        .iter()
        .map(|r| r["usage"]["output_tokens"].as_i64().unwrap())
        .collect();
    assert!(
        outputs.windows(2).all(|w| w[0] < w[1]),
        "each report counts the requests before it: {outputs:?}"
    );
    // Each mid-turn report follows the model request it counts.
    for r in &reports[..2] {
        let at = seen.iter().position(|e| e["id"] == r["id"]).unwrap();
        assert_eq!(seen[at - 1]["type"], "span.model_request_end", "{seen:#?}");
    }
    let last = reports[2];
    let session = s
        .client
        .get(&format!("/v1/sessions/{}", sess.id))
        .await
        .ok();
    assert_eq!(
        last["usage"]["output_tokens"],
        session["usage"]["output_tokens"]
    );
}

async fn a_short_turn_reports_once_at_its_end(b: Backend) {
    let s = TestServer::start(b).await;
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    let script = steps(&[call("bash", json!({"command": "true"}))]);
    turn(&s, &mut sess, &script).await;
    let seen = &sess.st.seen;
    assert_eq!(usage_reports(seen).len(), 1, "{seen:#?}");
    let at = seen
        .iter()
        .position(|e| e["type"] == "session.usage")
        .unwrap();
    assert_eq!(seen[at + 1]["type"], "session.status_idle");
}
