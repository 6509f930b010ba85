//! What the logs of a full run may not contain: API keys, environment keys, session tokens,
//! a provider's key or any `Authorization` value — and what JSON log lines must carry.

use std::process::{Command, Stdio};

use base64::Engine;
use serde_json::{Value, json};

use crate::backend_tests;
use crate::crash::{free_port, wait_up};
use crate::support::http::weather_tool;
use crate::support::scripted_provider::{self, Wire};
use crate::support::{Backend, Client, eventually, fresh_postgres_database};

backend_tests!(secrets_stay_out_of_logs_and_events);

const API_KEY: &str = "mast-test-api-key-S3CRET-one";
const PROVIDER_KEY: &str = "sk-ant-S3CRET-two";
const WRONG_KEY: &str = "mast-wrong-key-S3CRET-three";

async fn secrets_stay_out_of_logs_and_events(b: Backend) {
    let dir = tempfile::TempDir::new().unwrap();
    let db = match b {
        Backend::Sqlite => None,
        Backend::Postgres => Some(fresh_postgres_database().await),
    };
    let provider = scripted_provider::start(Wire::Anthropic).await;
    let log_path = dir.path().join("server.log");
    let port = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mast"));
    cmd.args([
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--data-dir",
    ])
    .arg(dir.path().join("data"))
    .env_remove("DATABASE_URL")
    .env("MAST_BOOTSTRAP_API_KEY", API_KEY)
    .env("ANTHROPIC_API_KEY", PROVIDER_KEY)
    .env("ANTHROPIC_BASE_URL", &provider)
    .env("MAST_LOG", "debug")
    .env("MAST_LOG_FORMAT", "json")
    .env("MAST_DB_MAX_CONNECTIONS", "6")
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(&log_path).unwrap());
    if let Some(url) = &db {
        cmd.env("DATABASE_URL", url);
    }
    let mut child = crate::crash::Reaped(cmd.spawn().expect("mast starts"));
    let base = format!("http://127.0.0.1:{port}");
    let c = Client::new(&base).with_key(API_KEY);
    wait_up(&c).await;

    // A Claude-routed turn with a custom tool, authenticated both ways.
    let bearer = reqwest::Client::new();
    let agent: Value = bearer
        .post(format!("{base}/v1/agents"))
        .header("authorization", format!("Bearer {API_KEY}"))
        .json(&json!({"name": "a", "model": "claude-scripted-test", "tools": [weather_tool()]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    c.say(
        &sid,
        "call get_weather {\"city\":\"Oslo\"}\n---\nsay {{result}}",
    )
    .await;
    let call = eventually(20, "the tool call", || async {
        c.all_events(&sid)
            .await
            .into_iter()
            .find(|e| e["type"] == "agent.custom_tool_use")
            .map(|e| e["id"].clone())
    })
    .await;
    c.send_events(&sid, json!([{"type": "user.custom_tool_result", "custom_tool_use_id": call, "content": [{"type": "text", "text": "snow"}]}]))
        .await;
    eventually(20, "the turn to end", || async {
        (c.get(&format!("/v1/sessions/{sid}")).await.ok()["status"] == "idle").then_some(())
    })
    .await;
    Client::new(&base)
        .with_key(WRONG_KEY)
        .get("/v1/agents")
        .await
        .err(401);

    // A worker's credentials: an environment key and the session token of a polled item.
    let env = c
        .post(
            "/v1/environments",
            json!({"name": "workers", "config": {"type": "self_hosted"}}),
        )
        .await
        .ok()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let env_key = c
        .post(&format!("/v1/environments/{env}/keys"), json!({}))
        .await
        .ok()["key"]
        .as_str()
        .unwrap()
        .to_string();
    let worker_agent = c.agent(json!([])).await;
    c.post(
        "/v1/sessions",
        json!({"agent": worker_agent["id"], "environment_id": env}),
    )
    .await
    .ok();
    let item = Client::new(&base)
        .with_key(&env_key)
        .get(&format!("/v1/environments/{env}/work/poll"))
        .await
        .ok();
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(item["secret"].as_str().unwrap().trim_end_matches('='))
        .unwrap();
    let token = serde_json::from_slice::<Value>(&raw).unwrap()["sessions_token"]
        .as_str()
        .unwrap()
        .to_string();
    Client::new(&base)
        .with_key(&env_key)
        .post(
            &format!(
                "/v1/environments/{env}/work/{}/ack",
                item["id"].as_str().unwrap()
            ),
            json!({}),
        )
        .await;
    let worker = Client::new(&base).with_key(&token);
    worker
        .get(&format!(
            "/v1/sessions/{}",
            item["data"]["id"].as_str().unwrap()
        ))
        .await
        .ok();

    let events = serde_json::to_string(&c.all_events(&sid).await).unwrap();
    child.kill().ok();
    child.wait().ok();
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.lines().count() > 10, "the run logged:\n{log}");
    for secret in [API_KEY, PROVIDER_KEY, WRONG_KEY, &env_key, &token] {
        assert!(!log.contains(secret), "a secret is in the logs: {secret}");
        assert!(
            !events.contains(secret),
            "a secret is in the events: {secret}"
        );
    }
    assert!(
        !log.to_ascii_lowercase().contains("bearer "),
        "an Authorization value is in the logs"
    );
    // JSON lines, with the request or session they belong to.
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let within = |field: &str| {
        lines.iter().any(|l| {
            l["span"][field].is_string()
                || l["spans"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|s| s[field].is_string()))
        })
    };
    assert!(within("request_id"), "request lines carry their request id");
    assert!(within("session_id"), "runner lines carry their session id");
    assert!(within("thread_id"), "loop lines carry their thread id");
}
