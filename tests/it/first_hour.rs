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
    // A route that does not exist is logged too, by the path asked for.
    c.get("/v1/nothing-here").await.err(404);
    // A browser opening the server's address is sent to the console; an API client is not.
    let page = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("http://127.0.0.1:{port}/"))
        .header("accept", "text/html,application/xhtml+xml")
        .send()
        .await
        .unwrap();
    assert!(page.status().is_redirection(), "{}", page.status());
    assert_eq!(page.headers()["location"], "/console/");
    c.get("/").await.err(404);
    let data = std::path::absolute(dir.path().join("data")).unwrap();
    let wanted = [
        format!("http://127.0.0.1:{port}"),
        format!("SQLite, {}", data.join("mast.db").display()),
        "claude-… off: set ANTHROPIC_API_KEY".to_string(),
        format!("http://127.0.0.1:{port}/docs"),
        format!("http://127.0.0.1:{port}/metrics"),
        format!("http://127.0.0.1:{port}/console"),
        "POST /v1/agents 200".to_string(),
        "GET /v1/nothing-here 404".to_string(),
        format!("session created session_id={sid}"),
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
    // One concise line per request: the latency rounded, the status said once.
    let line = text
        .lines()
        .find(|l| l.contains("POST /v1/agents 200"))
        .unwrap();
    assert!(!line.contains("status="), "{line}");
    let ms = line.split("latency_ms=").nth(1).unwrap().trim();
    assert!(ms.split('.').nth(1).is_none_or(|d| d.len() <= 1), "{line}");
}

#[test]
fn configuration_mistakes_say_what_to_fix() {
    let err = refused(&[("MAST_LOG", "info,[")], "127.0.0.1:0");
    assert!(
        err.contains("MAST_LOG=\"info,[\" is not a log filter"),
        "{err}"
    );
    // A word that is no level would be read as a target and silence every line.
    let err = refused(&[("MAST_LOG", "verbose")], "127.0.0.1:0");
    assert!(err.contains("`verbose` is not a log level"), "{err}");
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

#[test]
fn an_unreachable_postgres_is_named() {
    // Nothing listens on a port just freed.
    let port = free_port();
    let url = format!("postgres://mast@127.0.0.1:{port}/mast");
    let err = refused(&[("DATABASE_URL", url.as_str())], "127.0.0.1:0");
    assert!(
        err.contains(&format!(
            "cannot reach Postgres at 127.0.0.1:{port}: connection refused"
        )),
        "{err}"
    );
}

#[test]
#[ignore = "Postgres: run with --include-ignored and MAST_TEST_DATABASE_URL"]
fn a_missing_postgres_database_says_how_to_create_it() {
    let admin = crate::support::postgres_admin_url()
        .expect("this case needs MAST_TEST_DATABASE_URL; scripts/test sets one up");
    let (base, _) = admin.rsplit_once('/').unwrap();
    let url = format!("{base}/mast_no_such_database");
    let err = refused(&[("DATABASE_URL", url.as_str())], "127.0.0.1:0");
    assert!(
        err.contains("the database `mast_no_such_database` does not exist")
            && err.contains("createdb -h"),
        "{err}"
    );
    // Said once, not repeated down an error chain.
    assert_eq!(err.matches("does not exist").count(), 1, "{err}");
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
