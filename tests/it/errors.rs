//! The error shape everywhere, auth, and workspace isolation.

use serde_json::json;

use crate::backend_tests;
use crate::support::{Backend, Options, TestServer};

backend_tests!(errors_have_the_api_shape, keys_and_workspaces_isolate);

async fn errors_have_the_api_shape(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    assert!(
        c.get("/v1/nothing-here")
            .await
            .err(404)
            .contains("no such route")
    );
    c.send(reqwest::Method::PUT, "/v1/agents", None)
        .await
        .err(405);
    c.post("/v1/agents", json!("not an object")).await.err(400);
    let r = c.get("/v1/agents/agent_missing").await;
    assert_eq!(r.body["error"]["type"], "not_found_error");
    r.err(404);
    // Malformed JSON.
    let raw = reqwest::Client::new()
        .post(format!("{}/v1/agents", s.url))
        .header("content-type", "application/json")
        .body("{\"name\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 400);
    let body: serde_json::Value = raw.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    // Bodies over 32 MB.
    let big = "x".repeat(33 * 1024 * 1024);
    let raw = reqwest::Client::new()
        .post(format!("{}/v1/agents", s.url))
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 413);
    let body: serde_json::Value = raw.json().await.unwrap();
    assert_eq!(body["type"], "error");
    // Action endpoints accept an empty body that claims JSON, as the SDK sends.
    let a = c.agent(json!([])).await;
    let raw = reqwest::Client::new()
        .post(format!(
            "{}/v1/agents/{}/archive",
            s.url,
            a["id"].as_str().unwrap()
        ))
        .header("content-type", "application/json")
        .header("content-length", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 200);
    // Any anthropic-version and several betas are accepted; the OpenAPI document is served.
    let raw = reqwest::Client::new()
        .get(format!("{}/v1/agents", s.url))
        .header("anthropic-version", "2026-10-21")
        .header(
            "anthropic-beta",
            "a-beta,managed-agents-2026-04-01, another",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 200);
    assert!(
        c.get("/openapi.json").await.ok()["openapi"]
            .as_str()
            .unwrap()
            .starts_with("3.1")
    );
}

async fn keys_and_workspaces_isolate(b: Backend) {
    let s = TestServer::start_with(
        b,
        Options {
            api_key: Some("boot-key-1".into()),
            ..Default::default()
        },
    )
    .await;
    let anon = crate::support::Client::new(&s.url);
    assert!(
        anon.get("/v1/agents")
            .await
            .err(401)
            .contains("missing API key")
    );
    anon.with_key("wrong").get("/v1/agents").await.err(401);
    // Bearer works as well as x-api-key.
    let raw = reqwest::Client::new()
        .get(format!("{}/v1/agents", s.url))
        .bearer_auth("boot-key-1")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 200);
    // A key of another workspace sees none of the first workspace's objects.
    let store = mast::open_store(&crate::support::test_config(
        s.data_dir.clone(),
        s.database_url.clone(),
        &Options::default(),
    ))
    .await
    .unwrap();
    let other_key = mast::create_api_key(store.as_ref(), "other").await.unwrap();
    let other = anon.with_key(&other_key);
    let agent = s.client.agent(json!([])).await;
    let sess = s.client.session(&agent).await;
    let aid = agent["id"].as_str().unwrap();
    let sid = sess["id"].as_str().unwrap();
    other.get(&format!("/v1/agents/{aid}")).await.err(404);
    other
        .post(&format!("/v1/agents/{aid}"), json!({"name": "stolen"}))
        .await
        .err(404);
    other.get(&format!("/v1/sessions/{sid}")).await.err(404);
    other
        .get(&format!("/v1/sessions/{sid}/events"))
        .await
        .err(404);
    other
        .post(
            &format!("/v1/sessions/{sid}/events"),
            json!({"events": [{"type": "user.interrupt"}]}),
        )
        .await
        .err(404);
    other.delete(&format!("/v1/sessions/{sid}")).await.err(404);
    assert_eq!(other.get("/v1/agents").await.ok()["data"], json!([]));
    assert_eq!(other.get("/v1/sessions").await.ok()["data"], json!([]));
    let env = s.client.environment().await;
    other
        .post(
            "/v1/sessions",
            json!({"agent": aid, "environment_id": env["id"]}),
        )
        .await
        .err(404);
    // Keys are stored hashed only.
    if b == Backend::Sqlite {
        for file in ["mast.db", "mast.db-wal"] {
            let db = std::fs::read(s.data_dir.join(file)).unwrap_or_default();
            let text = String::from_utf8_lossy(&db);
            assert!(
                !text.contains(&other_key) && !text.contains("boot-key-1"),
                "no plaintext key at rest in {file}"
            );
        }
    }
}
