//! A newcomer's first hour: the banner and logs of the real binary, configuration mistakes
//! answered with what to fix, and model ids checked against what the provider offers.

use std::process::{Command, Stdio};

use serde_json::json;

use crate::backend_tests;
use crate::crash::{Reaped, free_port, wait_up};
use crate::support::scripted_provider::{self, Wire};
use crate::support::sse::Stream;
use crate::support::{Backend, Client, ModelRoute, Options, TestServer};

backend_tests!(
    claude_ids_are_checked_against_the_provider,
    provider_errors_keep_their_cause
);

/// `mast serve` on a free port with `envs`, its stderr in a file; the caller waits for it.
fn serve(dir: &std::path::Path, port: u16, envs: &[(&str, &str)]) -> (Reaped, std::path::PathBuf) {
    let log = dir.join("server.log");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mast"));
    cmd.args(["serve", "--listen", &port.to_string(), "--data-dir"])
        .arg(dir.join("data"))
        .env_remove("DATABASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .env_remove("MAST_LOG_FORMAT")
        .env("MAST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    (Reaped(cmd.spawn().expect("mast starts")), log)
}

/// Runs `mast serve` expecting it to refuse to start; returns what it said.
fn refused(envs: &[(&str, &str)], listen: &str) -> String {
    let dir = tempfile::TempDir::new().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mast"));
    cmd.args(["serve", "--listen", listen, "--data-dir"])
        .arg(dir.path())
        .env_remove("DATABASE_URL")
        .env_remove("ANTHROPIC_BASE_URL")
        .env_remove("MAST_ANTHROPIC_BASE_URL");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(!out.status.success(), "it started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn the_banner_and_the_log_say_what_happens() {
    let dir = tempfile::TempDir::new().unwrap();
    let port = free_port();
    let (_server, log) = serve(dir.path(), port, &[]);
    let c = Client::new(&format!("http://127.0.0.1:{port}"));
    wait_up(&c).await;
    let agent = c.agent(json!([])).await;
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    let mut st = Stream::open(
        &c.base,
        &format!("/v1/sessions/{sid}/events/stream"),
        None,
        &[],
    )
    .await;
    c.say(&sid, "say hello").await;
    st.until_idle(20).await;
    let data = std::path::absolute(dir.path().join("data")).unwrap();
    let wanted = [
        format!("http://127.0.0.1:{port}"),
        format!("SQLite, {}", data.join("mast.db").display()),
        "claude-… off: set ANTHROPIC_API_KEY".to_string(),
        format!("http://127.0.0.1:{port}/docs"),
        format!("http://127.0.0.1:{port}/metrics"),
        "POST /v1/agents 200".to_string(),
        "POST /v1/sessions/{session_id}/events 200".to_string(),
        "session is running".to_string(),
        "session is idle (end_turn)".to_string(),
    ];
    // Log lines are written as they happen, the last ones a moment after the stream's.
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    let seen = crate::support::try_eventually(10, || async {
        let text = read();
        wanted.iter().all(|w| text.contains(w)).then_some(text)
    })
    .await;
    let text = seen.unwrap_or_else(read);
    for expected in &wanted {
        assert!(text.contains(expected), "`{expected}` in:\n{text}");
    }
    assert!(
        !text.contains('\u{1b}'),
        "no ANSI codes off a terminal:\n{text}"
    );
    assert!(!text.contains("INSERT INTO"), "no SQL at info:\n{text}");
}

#[test]
fn configuration_mistakes_say_what_to_fix() {
    let err = refused(&[("MAST_LOG", "info,[")], "127.0.0.1:0");
    assert!(
        err.contains("MAST_LOG=\"info,[\" is not a log filter"),
        "{err}"
    );
    let err = refused(&[("MAST_LOG_FORMAT", "xml")], "127.0.0.1:0");
    assert!(
        err.contains("MAST_LOG_FORMAT=\"xml\" must be `text` or `json`"),
        "{err}"
    );
    let err = refused(&[], "here:there");
    assert!(err.contains("is not HOST:PORT or a port"), "{err}");
    // A port in use names the address.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let err = refused(&[("MAST_LOG", "error")], &addr);
    assert!(
        err.contains(&format!(
            "cannot listen on {addr}: the address is already in use"
        )),
        "{err}"
    );
    drop(taken);
    // The SDK's variable, left set in the shell, pointing the server at itself.
    let port = free_port();
    let own = format!("http://127.0.0.1:{port}");
    let err = refused(&[("ANTHROPIC_BASE_URL", own.as_str())], &port.to_string());
    assert!(
        err.contains("points at this server itself") && err.contains("MAST_ANTHROPIC_BASE_URL"),
        "{err}"
    );
}

#[tokio::test]
async fn the_servers_own_provider_settings_come_first() {
    let dir = tempfile::TempDir::new().unwrap();
    let port = free_port();
    let provider = scripted_provider::start(Wire::Anthropic).await;
    let own = format!("http://127.0.0.1:{port}");
    let (_server, log) = serve(
        dir.path(),
        port,
        &[
            ("ANTHROPIC_BASE_URL", own.as_str()),
            ("MAST_ANTHROPIC_BASE_URL", provider.as_str()),
            ("MAST_ANTHROPIC_API_KEY", "test"),
        ],
    );
    let c = Client::new(&own);
    wait_up(&c).await;
    let agent = c
        .post(
            "/v1/agents",
            json!({"name": "a", "model": "claude-scripted-test"}),
        )
        .await
        .ok();
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    let mut st = Stream::open(
        &own,
        &format!("/v1/sessions/{sid}/events/stream"),
        None,
        &[],
    )
    .await;
    c.say(&sid, "say through the provider").await;
    st.until_idle(20).await;
    assert!(st.seen.iter().any(|e| e["type"] == "agent.message"));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains(&format!("Anthropic Messages API at {provider}")),
        "{text}"
    );
}

async fn claude_ids_are_checked_against_the_provider(b: Backend) {
    // A provider that lists its models: only those are accepted.
    let s = TestServer::start_routed(b, ModelRoute::AnthropicWire).await;
    s.client
        .post(
            "/v1/agents",
            json!({"name": "a", "model": "claude-scripted-test"}),
        )
        .await
        .ok();
    let err = s
        .client
        .post(
            "/v1/agents",
            json!({"name": "b", "model": "claude-scripted-tset"}),
        )
        .await
        .err(400);
    assert!(
        err.contains("`claude-scripted-tset` is not a model the Anthropic API")
            && err.contains("offers claude-scripted-test"),
        "{err}"
    );
    // One whose list cannot be read: the Claude models Mast knows, and nothing else.
    let s = TestServer::start(b).await;
    s.client
        .post(
            "/v1/agents",
            json!({"name": "a", "model": "claude-opus-4-7"}),
        )
        .await
        .ok();
    let err = s
        .client
        .post(
            "/v1/agents",
            json!({"name": "b", "model": "claude-opus-9-9"}),
        )
        .await
        .err(400);
    assert!(
        err.contains("not a Claude model Mast knows") && err.contains("could not be read"),
        "{err}"
    );
}

async fn provider_errors_keep_their_cause(b: Backend) {
    // The test servers' Anthropic endpoint is a closed port.
    let s = TestServer::start_with(
        b,
        Options {
            max_retries: 0,
            ..Default::default()
        },
    )
    .await;
    let agent = s
        .client
        .post(
            "/v1/agents",
            json!({"name": "a", "model": "claude-opus-4-7"}),
        )
        .await
        .ok();
    let sid = s.client.session(&agent).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut st = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        None,
        &[],
    )
    .await;
    s.client.say(&sid, "hello").await;
    st.until_idle(30).await;
    let error = st
        .seen
        .iter()
        .find(|e| e["type"] == "session.error")
        .expect("a session.error");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("127.0.0.1:9") && message.to_lowercase().contains("connection refused"),
        "{error}"
    );
}
