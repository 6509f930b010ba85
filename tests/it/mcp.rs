//! MCP servers the session cannot use: every way a connection fails is a `session.error`
//! naming the server, and the turn goes on without its tools. Real listeners stand in for
//! the servers (a refusing one, a silent one, a closed port); the calls themselves are
//! covered with real MCP servers by the Python SDK suite (tests/sdk/python/test_mcp.py).

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::mock_anthropic::{MockAnthropic, Reply};
use crate::support::sse::Stream;
use crate::support::{Backend, Options, TestServer};

backend_tests!(
    servers_and_toolsets_are_stored_and_updated,
    a_server_demanding_a_token_is_an_authentication_failure,
    unreachable_silent_and_fenced_servers_are_connection_failures,
    limited_networking_needs_allow_mcp_servers,
);

/// A server whose Claude agents talk to `mock`.
async fn server(b: Backend, mock: &MockAnthropic, allow_private_network: bool) -> TestServer {
    let mut s = TestServer::start_with(
        b,
        Options {
            anthropic_base_url: Some(mock.url.clone()),
            allow_private_network,
            ..Options::default()
        },
    )
    .await;
    s.client.model = "claude-opus-4-7".into();
    s
}

/// An agent using `servers` (name, url), each through an `always_allow` toolset.
async fn agent(s: &TestServer, servers: &[(&str, &str)]) -> Value {
    let mcp_servers: Vec<Value> = servers
        .iter()
        .map(|(n, u)| json!({"type": "url", "name": n, "url": u}))
        .collect();
    let tools: Vec<Value> = servers
        .iter()
        .map(|(n, _)| json!({"type": "mcp_toolset", "mcp_server_name": n, "default_config": {"permission_policy": {"type": "always_allow"}}}))
        .collect();
    s.client
        .post(
            "/v1/agents",
            json!({"name": "mcp", "model": s.client.model, "tools": tools, "mcp_servers": mcp_servers}),
        )
        .await
        .ok()
}

/// Runs one turn of a new session of `agent` in `env`; returns its events.
async fn one_turn(s: &TestServer, agent: &Value, env: &Value) -> Vec<Value> {
    let sid = s
        .client
        .post(
            "/v1/sessions",
            json!({"agent": agent["id"], "environment_id": env["id"]}),
        )
        .await
        .ok()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut st = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        s.client.key.as_deref(),
        &[],
    )
    .await;
    s.client.say(&sid, "hello").await;
    let idle = st.until_idle(30).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn", "{:?}", st.seen);
    std::mem::take(&mut st.seen)
}

fn errors(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["type"] == "session.error")
        .map(|e| &e["error"])
        .collect()
}

/// A listener answering every HTTP request with a 401 challenge, as a protected MCP server
/// does to a client without a token.
async fn refusing_server() -> String {
    use axum::http::{StatusCode, header};
    let app = axum::Router::new().fallback(|| async {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer realm=\"mcp\"")],
            "unauthorized",
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    url
}

/// A listener that accepts connections and never answers.
async fn silent_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            held.push(conn);
        }
    });
    url
}

/// A loopback URL nothing listens on.
/// The URL of a port that refuses connections, and the socket that keeps it so: bound but
/// never listening, so no other test's server can take the port while this one runs (a port
/// merely freed could be, and would answer).
fn closed_port() -> (String, tokio::net::TcpSocket) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let url = format!("http://{}/mcp", socket.local_addr().unwrap());
    (url, socket)
}

async fn servers_and_toolsets_are_stored_and_updated(b: Backend) {
    let mock = MockAnthropic::start().await;
    let s = server(b, &mock, true).await;
    let c = &s.client;
    let a = agent(&s, &[("linear", "https://mcp.linear.app/mcp")]).await;
    assert_eq!(
        a["mcp_servers"],
        json!([{"type": "url", "name": "linear", "url": "https://mcp.linear.app/mcp"}])
    );
    assert_eq!(a["tools"][0]["type"], "mcp_toolset");
    // A server without a toolset, or a toolset without its server, is refused.
    let aid = a["id"].as_str().unwrap();
    c.post(&format!("/v1/agents/{aid}"), json!({"tools": []}))
        .await
        .err(400);
    c.post(&format!("/v1/agents/{aid}"), json!({"mcp_servers": []}))
        .await
        .err(400);
    // Both cleared together is fine.
    let cleared = c
        .post(
            &format!("/v1/agents/{aid}"),
            json!({"tools": [], "mcp_servers": null}),
        )
        .await
        .ok();
    assert_eq!(cleared["mcp_servers"], json!([]));

    // A session may swap its servers while idle; the update says so.
    let a = agent(&s, &[("linear", "https://mcp.linear.app/mcp")]).await;
    let sess = c.session(&a).await;
    let sid = sess["id"].as_str().unwrap();
    let updated = c
        .post(
            &format!("/v1/sessions/{sid}"),
            json!({"agent": {
                "mcp_servers": [{"type": "url", "name": "github", "url": "https://api.githubcopilot.com/mcp/"}],
                "tools": [{"type": "mcp_toolset", "mcp_server_name": "github"}]}}),
        )
        .await
        .ok();
    assert_eq!(updated["agent"]["mcp_servers"][0]["name"], "github");
    assert_eq!(
        updated["agent"]["tools"][0]["default_config"]["permission_policy"]["type"],
        "always_ask"
    );
    let events = c.all_events(sid).await;
    let change = events
        .iter()
        .find(|e| e["type"] == "session.updated")
        .expect("session.updated");
    assert_eq!(change["agent"]["mcp_servers"][0]["name"], "github");
    // The agent itself is untouched.
    let again = c
        .get(&format!("/v1/agents/{}", a["id"].as_str().unwrap()))
        .await
        .ok();
    assert_eq!(again["mcp_servers"][0]["name"], "linear");
}

async fn a_server_demanding_a_token_is_an_authentication_failure(b: Backend) {
    let mock = MockAnthropic::start().await;
    mock.push([Reply::Text("fine without it".into())]);
    let s = server(b, &mock, true).await;
    let url = refusing_server().await;
    let a = agent(&s, &[("guarded", &url)]).await;
    let env = s.client.environment().await;
    let events = one_turn(&s, &a, &env).await;
    let errs = errors(&events);
    assert_eq!(errs.len(), 1, "{events:?}");
    assert_eq!(errs[0]["type"], "mcp_authentication_failed_error");
    assert_eq!(errs[0]["mcp_server_name"], "guarded");
    assert_eq!(errs[0]["retry_status"]["type"], "retrying");
    // The model was asked without the server's tools, and answered.
    let req = &mock.requests()[0];
    assert!(
        req.get("tools")
            .is_none_or(|t| t.as_array().unwrap().is_empty())
    );
}

async fn unreachable_silent_and_fenced_servers_are_connection_failures(b: Backend) {
    let mock = MockAnthropic::start().await;
    mock.push([Reply::Text("done".into())]);
    let s = server(b, &mock, true).await;
    let ((closed, _kept), silent) = (closed_port(), silent_server().await);
    let a = agent(&s, &[("closed", &closed), ("silent", &silent)]).await;
    let env = s.client.environment().await;
    // Connected in parallel: the silent server costs one connect timeout, not one per server.
    let events = one_turn(&s, &a, &env).await;
    let mut errs: Vec<(String, String)> = errors(&events)
        .iter()
        .map(|e| {
            (
                e["mcp_server_name"].as_str().unwrap().to_string(),
                e["type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    errs.sort();
    assert_eq!(
        errs,
        [
            ("closed".into(), "mcp_connection_failed_error".into()),
            ("silent".into(), "mcp_connection_failed_error".into())
        ]
    );

    // Without MAST_ALLOW_PRIVATE_NETWORK the egress guard refuses loopback servers.
    let mock = MockAnthropic::start().await;
    mock.push([Reply::Text("done".into())]);
    let s = server(b, &mock, false).await;
    let a = agent(&s, &[("local", &refusing_server().await)]).await;
    let env = s.client.environment().await;
    let events = one_turn(&s, &a, &env).await;
    let errs = errors(&events);
    assert_eq!(errs[0]["type"], "mcp_connection_failed_error");
    assert!(
        errs[0]["message"].as_str().unwrap().contains("loopback"),
        "{errs:?}"
    );
}

async fn limited_networking_needs_allow_mcp_servers(b: Backend) {
    let mock = MockAnthropic::start().await;
    mock.push([Reply::Text("done".into()), Reply::Text("done".into())]);
    let s = server(b, &mock, true).await;
    let url = refusing_server().await;
    let a = agent(&s, &[("guarded", &url)]).await;
    let limited = |allow: bool| {
        json!({"name": format!("limited-{allow}-{}", mast::domain::ids::new_secret(6)),
            "config": {"type": "cloud", "networking": {"type": "limited", "allow_mcp_servers": allow}}})
    };
    let closed_env = s.client.post("/v1/environments", limited(false)).await.ok();
    let events = one_turn(&s, &a, &closed_env).await;
    let errs = errors(&events);
    assert_eq!(errs[0]["type"], "mcp_connection_failed_error");
    assert!(
        errs[0]["message"]
            .as_str()
            .unwrap()
            .contains("allow_mcp_servers"),
        "{errs:?}"
    );
    // Allowed: the connection is made (and this server then refuses the missing token).
    let open_env = s.client.post("/v1/environments", limited(true)).await.ok();
    let events = one_turn(&s, &a, &open_env).await;
    assert_eq!(
        errors(&events)[0]["type"],
        "mcp_authentication_failed_error"
    );
}
