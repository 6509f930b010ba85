//! Health, readiness and Prometheus metrics.

use serde_json::json;
use sqlx::Connection;

use crate::backend_tests;
use crate::support::http::weather_tool;
use crate::support::{Backend, TestServer};

backend_tests!(health_readiness_and_metrics);

async fn raw_sql(s: &TestServer, sql: &str) {
    match &s.database_url {
        Some(url) => {
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            sqlx::query(sql).execute(&mut conn).await.unwrap();
            conn.close().await.ok();
        }
        None => {
            let path = s.data_dir.join("mast.db");
            let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
                .await
                .unwrap();
            sqlx::query(sql).execute(&mut conn).await.unwrap();
            conn.close().await.ok();
        }
    }
}

async fn health_readiness_and_metrics(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    assert_eq!(c.get("/healthz").await.ok()["status"], "ok");
    let ready = c.get("/readyz").await.ok();
    assert_eq!(ready["status"], "ready");

    // A custom-tool round trip, so every kind of measurement has something in it.
    let agent = c.agent(json!([weather_tool()])).await;
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    c.say(
        &sid,
        "call get_weather {\"city\":\"Oslo\"}\n---\nsay {{result}}",
    )
    .await;
    let call = crate::support::eventually(20, "the tool call", || async {
        c.all_events(&sid)
            .await
            .into_iter()
            .find(|e| e["type"] == "agent.custom_tool_use")
            .map(|e| e["id"].clone())
    })
    .await;
    c.send_events(&sid, json!([{"type": "user.custom_tool_result", "custom_tool_use_id": call, "content": [{"type": "text", "text": "snow"}]}]))
        .await;
    crate::support::eventually(20, "the turn to end", || async {
        (c.get(&format!("/v1/sessions/{sid}")).await.ok()["status"] == "idle").then_some(())
    })
    .await;
    c.get("/v1/sessions/sesn_nope").await.err(404);

    let resp = reqwest::get(format!("{}/metrics", s.url)).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = resp.text().await.unwrap();
    for needle in [
        r#"mast_http_requests_total{route="/v1/sessions/{session_id}/events",method="POST",status="200"}"#,
        r#"route="/v1/sessions/{session_id}",method="GET",status="404""#,
        r#"mast_http_request_duration_seconds_bucket{route="/v1/agents",method="POST""#,
        r#"mast_sessions{status="idle"}"#,
        "mast_active_runners",
        "mast_sse_subscribers",
        "mast_work_queue_depth",
        r#"mast_model_request_duration_seconds_bucket{model="mast-scripted",outcome="ok""#,
        r#"mast_model_tokens_total{model="mast-scripted",kind="output"}"#,
        "mast_event_append_duration_seconds_bucket",
    ] {
        assert!(text.contains(needle), "metrics lack {needle}:\n{text}");
    }
    assert!(!text.contains(&sid), "no series per session");

    // A schema behind this binary's migrations is not ready.
    raw_sql(
        &s,
        "DELETE FROM _sqlx_migrations WHERE version = (SELECT MAX(version) FROM _sqlx_migrations)",
    )
    .await;
    let msg = c.get("/readyz").await.err(503);
    assert!(msg.contains("schema"), "{msg}");
    assert_eq!(c.get("/healthz").await.ok()["status"], "ok");
}
