//! The error shape everywhere, auth, and workspace isolation.

use serde_json::json;

use crate::backend_tests;
use crate::support::{Backend, Options, TestServer};

backend_tests!(
    errors_have_the_api_shape,
    keys_and_workspaces_isolate,
    limits_answer_clear_errors_and_change_nothing,
    bodies_must_be_objects,
    oversized_and_malformed_heads_get_the_api_shape,
    an_unread_body_closes_the_connection,
);

async fn errors_have_the_api_shape(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    // An id of another kind, pasted where an environment's belongs, is named for what it is.
    let agent = c.agent(json!([])).await;
    let agent_id = agent["id"].as_str().unwrap();
    let wrong = c
        .get(&format!("/v1/environments/{agent_id}"))
        .await
        .err(404);
    assert!(
        wrong.contains(&format!(
            "environment `{agent_id}` not found (`{agent_id}` is an agent id)"
        )),
        "{wrong}"
    );
    // `agent_id` is the natural guess for the session's `agent`.
    let env = c.environment().await;
    let wrong = c
        .post(
            "/v1/sessions",
            json!({"agent_id": agent_id, "environment_id": env["id"]}),
        )
        .await
        .err(400);
    assert!(wrong.contains("did you mean `agent`?"), "{wrong}");
    let missing = c.get("/v1/nothing-here").await.err(404);
    assert!(
        missing.contains("no such route: `GET /v1/nothing-here`"),
        "{missing}"
    );
    let put = c.send(reqwest::Method::PUT, "/v1/agents", None).await;
    // RFC 9110: a 405 lists the methods the route takes.
    let mut allow: Vec<&str> = put.headers["allow"].to_str().unwrap().split(',').collect();
    allow.sort_unstable();
    assert_eq!(allow, ["GET", "HEAD", "POST"], "{:?}", put.headers);
    let put = put.err(405);
    assert!(put.contains("`PUT /v1/agents` is not supported"), "{put}");
    // The message names them too, for a reader without the headers.
    let takes = put.split("this route takes ").nth(1).unwrap_or_default();
    for m in ["GET", "HEAD", "POST"] {
        assert!(takes.contains(m), "{m} in {put}");
    }
    let delete = c
        .send(reqwest::Method::DELETE, "/v1/agents/agent_x", None)
        .await
        .err(405);
    assert!(
        delete.contains("archive it with `POST /v1/agents/agent_x/archive`"),
        "{delete}"
    );
    // The API reference renders from the server's own document, with nothing fetched elsewhere.
    let docs = reqwest::get(format!("{}/docs", s.url)).await.unwrap();
    assert_eq!(docs.status(), 200);
    let page = docs.text().await.unwrap();
    assert!(page.contains(r#"spec-url="/openapi.json""#) && !page.contains("https://"));
    let bundle = reqwest::get(format!("{}/docs/redoc.standalone.js", s.url))
        .await
        .unwrap();
    assert_eq!(bundle.status(), 200);
    assert!(bundle.bytes().await.unwrap().len() > 500_000);
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

/// A body that is not a JSON object is refused, not read as the struct's fields in order
/// (found by the schemathesis run: `[null, null]` cleared an environment's description).
async fn bodies_must_be_objects(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let env = c
        .post(
            "/v1/environments",
            json!({"name": "objects-only", "description": "kept"}),
        )
        .await
        .ok();
    let env_path = format!("/v1/environments/{}", env["id"].as_str().unwrap());
    for body in [
        json!([null, null]),
        json!(["renamed"]),
        json!(1),
        json!(null),
    ] {
        let msg = c.post(&env_path, body).await.err(400);
        assert!(msg.contains("JSON object"), "{msg}");
    }
    let env = c.get(&env_path).await.ok();
    assert_eq!(env["name"], "objects-only");
    assert_eq!(env["description"], "kept");
    let agent = c.agent(json!([])).await;
    let session = c.session(&agent).await;
    let session_id = session["id"].as_str().unwrap();
    for path in [
        format!("/v1/agents/{}", agent["id"].as_str().unwrap()),
        format!("/v1/sessions/{session_id}"),
        format!("/v1/sessions/{session_id}/events"),
        "/v1/agents".to_string(),
    ] {
        c.post(&path, json!([[]])).await.err(400);
    }
    // Leading whitespace and an empty body (read as `{}`) are still fine.
    let raw = reqwest::Client::new()
        .post(format!("{}{env_path}", s.url))
        .header("content-type", "application/json")
        .body(" \n {\"description\": \"still\"}")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 200);
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

mod review_cases {
    //! Inputs that once got through: blank text, bad base64, NUL characters; stream topics
    //! of requests that never became streams.

    use serde_json::json;

    use crate::backend_tests;
    use crate::support::{Backend, TestServer};

    backend_tests!(bad_inputs_are_refused_alike_on_every_store);

    async fn bad_inputs_are_refused_alike_on_every_store(b: Backend) {
        let s = TestServer::start(b).await;
        let c = &s.client;
        let agent = c.agent(json!([])).await;
        let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
        let send = |content: serde_json::Value| {
            let c = c.clone();
            let sid = sid.clone();
            async move {
                c.post(
                    &format!("/v1/sessions/{sid}/events"),
                    json!({"events": [{"type": "user.message", "content": content}]}),
                )
                .await
            }
        };
        send(json!([{"type": "text", "text": "   "}]))
            .await
            .err(400);
        send(json!([{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "not base64!"}}])).await.err(400);
        send(json!([{"type": "text", "text": "nul \u{0000} inside"}]))
            .await
            .err(400);
        c.get("/v1/sessions/abc%00def").await.err(400);
        c.post("/v1/environments", json!({"name": "x\u{0000}y"}))
            .await
            .err(400);
        assert!(c.all_events(&sid).await.is_empty(), "nothing was stored");
        for _ in 0..50 {
            c.get("/v1/sessions/sesn_missing/events/stream")
                .await
                .err(404);
        }
        assert_eq!(
            s.stream_topics(),
            0,
            "refused streams leave no topic behind"
        );
        {
            let _st = crate::support::sse::Stream::open(
                &s.url,
                &format!("/v1/sessions/{sid}/events/stream"),
                None,
                &[],
            )
            .await;
            crate::support::eventually(5, "a topic while streaming", || async {
                (s.stream_topics() == 1).then_some(())
            })
            .await;
        }
        crate::support::eventually(5, "the topic to go with its subscriber", || async {
            (s.stream_topics() == 0).then_some(())
        })
        .await;
    }
}

async fn limits_answer_clear_errors_and_change_nothing(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let agent = c.agent(json!([crate::support::http::weather_tool()])).await;
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    let events = format!("/v1/sessions/{sid}/events");
    let message =
        |text: String| json!({"type": "user.message", "content": [{"type": "text", "text": text}]});
    // A batch of more than 100 events.
    let batch: Vec<_> = (0..101).map(|i| message(format!("m{i}"))).collect();
    let msg = c.post(&events, json!({ "events": batch })).await.err(400);
    assert!(msg.contains("100"), "{msg}");
    // A text block over a million bytes.
    let msg = c
        .post(&events, json!({"events": [message("x".repeat(1_000_001))]}))
        .await
        .err(400);
    assert!(msg.contains("longer than"), "{msg}");
    // More than 1000 content blocks in one event.
    let blocks: Vec<_> = (0..1001)
        .map(|_| json!({"type": "text", "text": "x"}))
        .collect();
    c.post(
        &events,
        json!({"events": [{"type": "user.message", "content": blocks}]}),
    )
    .await
    .err(400);
    // Query limits and cursors.
    c.get(&format!("{events}?limit=1001")).await.err(400);
    c.get(&format!("{events}?page=%%%")).await.err(400);
    c.get("/v1/sessions?limit=101").await.err(400);
    c.get("/v1/sessions?page=bm90LWEtY3Vyc29y").await.err(400);
    // Metadata beyond its limits.
    let keys: serde_json::Map<String, serde_json::Value> =
        (0..17).map(|i| (format!("k{i}"), json!("v"))).collect();
    c.post(
        "/v1/agents",
        json!({"name": "m", "model": "mast-scripted", "metadata": keys}),
    )
    .await
    .err(400);
    // Headers beyond what the server reads.
    let huge = reqwest::Client::new()
        .get(format!("{}/v1/agents", s.url))
        .header("x-padding", "y".repeat(512 * 1024))
        .send()
        .await;
    if let Ok(r) = huge {
        assert_eq!(r.status(), 431);
    }
    // None of that stored anything.
    let log = c.all_events(&sid).await;
    assert!(log.is_empty(), "{log:?}");
    assert_eq!(
        c.get("/v1/agents").await.ok()["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// Sends raw bytes on a fresh connection and reads one whole answer (its head and
/// `content-length` bytes of body). Writing and reading run side by side: the server answers
/// before it has read everything it was sent.
async fn raw_exchange(url: &str, request: &[u8]) -> (String, serde_json::Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("http://");
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut rx, mut tx) = tcp.into_split();
    let request = request.to_vec();
    let writer = tokio::spawn(async move {
        // Fails once the server has answered and closed; that is expected.
        let _ = tx.write_all(&request).await;
        tx
    });
    let read = async {
        let mut out = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            let text = String::from_utf8_lossy(&out).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .and_then(|n| n.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if body.len() >= length {
                    return (head.to_string(), body.to_string());
                }
            }
            match rx.read(&mut buf).await {
                Ok(0) | Err(_) => panic!("the connection ended before a whole answer: {text}"),
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    };
    let (head, body) = tokio::time::timeout(std::time::Duration::from_secs(30), read)
        .await
        .expect("the server answers");
    writer.abort();
    let body = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {head}\n\n{body}"));
    (head, body)
}

async fn oversized_and_malformed_heads_get_the_api_shape(b: Backend) {
    let s = TestServer::start(b).await;
    let long_uri = format!(
        "GET /v1/agents?x={} HTTP/1.1\r\nHost: x\r\n\r\n",
        "a".repeat(70_000)
    );
    // Far past hyper's ~400 KiB read-buffer limit: one read that crosses the limit can
    // still hold the end of a head only slightly over it, which then parses.
    let big_header = format!(
        "GET /v1/agents HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(4_000_000)
    );
    let many_headers = format!(
        "GET /v1/agents HTTP/1.1\r\nHost: x\r\n{}\r\n",
        (0..150)
            .map(|i| format!("X-{i}: a\r\n"))
            .collect::<String>()
    );
    for (request, status, words) in [
        (long_uri.as_str(), 414, "URI is too long"),
        (big_header.as_str(), 431, "headers are too large"),
        (many_headers.as_str(), 431, "headers are too large"),
        ("GARBAGE\r\n\r\n", 400, "could not be parsed"),
    ] {
        let (head, body) = raw_exchange(&s.url, request.as_bytes()).await;
        assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{head}");
        assert!(head.contains("content-type: application/json"), "{head}");
        let rid = body["request_id"].as_str().unwrap();
        assert!(head.contains(&format!("request-id: {rid}")), "{head}");
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(words),
            "{body}"
        );
    }
    // Ordinary requests are untouched.
    s.client.get("/v1/agents").await.ok();
}

/// A request answered before its body was read leaves that body on the connection, which the
/// server then closes; the answer must say so, or a pooling client reuses a dying socket.
async fn an_unread_body_closes_the_connection(b: Backend) {
    let s = TestServer::start(b).await;
    let host = s.url.trim_start_matches("http://");
    let body = format!("{{\"pad\": \"{}\"}}", "a".repeat(200_000));
    let unread = format!(
        "POST /v1/no-such-route HTTP/1.1\r\nHost: {host}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let (head, answer) = raw_exchange(&s.url, unread.as_bytes()).await;
    assert!(head.starts_with("HTTP/1.1 404 "), "{head}");
    assert_eq!(answer["type"], "error");
    assert!(head.contains("connection: close"), "{head}");
    // A body the handler read keeps the connection open for the next request.
    let small = r#"{"name": 5}"#;
    let read = format!(
        "POST /v1/agents HTTP/1.1\r\nHost: {host}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{small}",
        small.len()
    );
    let (head, _) = raw_exchange(&s.url, read.as_bytes()).await;
    assert!(head.starts_with("HTTP/1.1 400 "), "{head}");
    assert!(!head.contains("connection: close"), "{head}");
}
