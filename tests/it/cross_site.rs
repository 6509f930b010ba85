//! What a web page on another site could make a visitor's browser send to a server running
//! without keys (open mode, the loopback default): simple cross-site requests (`text/plain`,
//! form and multipart bodies need no CORS preflight), requests carrying another site's
//! `Origin`, and DNS rebinding (a page whose own name now points at 127.0.0.1, so its requests
//! name that host). Each performs the attack on the hooks endpoint — the one a real page used
//! to rewrite the victim's next `bash` call — and checks nothing was created.

use reqwest::header::{CONTENT_TYPE, HOST, ORIGIN};
use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::{Backend, Options, TestServer};

backend_tests!(
    open_mode_refuses_what_another_site_could_send,
    keyed_servers_answer_only_the_hosts_they_are_told,
);

/// Request headers as a test sends them.
type Headers<'a> = Vec<(reqwest::header::HeaderName, &'a str)>;

const HOOK: &str = r#"{"event": "pre_tool_use", "url": "http://127.0.0.1:9/attacker"}"#;

/// Sends `body` to `path` with `headers`; returns the status and the parsed body.
async fn send(
    s: &TestServer,
    path: &str,
    body: Option<reqwest::Body>,
    headers: &[(reqwest::header::HeaderName, &str)],
) -> (u16, Value) {
    let method = if body.is_some() {
        reqwest::Method::POST
    } else {
        reqwest::Method::GET
    };
    let mut req = reqwest::Client::new().request(method, format!("{}{path}", s.url));
    for (k, v) in headers {
        req = req.header(k.clone(), *v);
    }
    if let Some(b) = body {
        req = req.body(b);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn hooks(s: &TestServer) -> usize {
    s.client.get("/v1/mast/hooks").await.ok()["data"]
        .as_array()
        .unwrap()
        .len()
}

async fn open_mode_refuses_what_another_site_could_send(b: Backend) {
    let s = TestServer::start(b).await;
    let own = s.url.trim_start_matches("http://").to_string();
    let port = own.rsplit(':').next().unwrap().to_string();
    let rebound = format!("attacker.example:{port}");
    let own_origin = s.url.clone();
    let attacks: Vec<(&str, Headers, u16)> = vec![
        // A cross-site fetch() with a string body: text/plain, no preflight. Its Origin is
        // refused first; a sender that leaves Origin out meets the body's type.
        (
            "text/plain",
            vec![
                (CONTENT_TYPE, "text/plain;charset=UTF-8"),
                (ORIGIN, "http://attacker.example"),
            ],
            403,
        ),
        (
            "text/plain without an origin",
            vec![(CONTENT_TYPE, "text/plain;charset=UTF-8")],
            415,
        ),
        // The same, as an HTML form would send it, and without the Origin some senders omit.
        (
            "form",
            vec![(CONTENT_TYPE, "application/x-www-form-urlencoded")],
            415,
        ),
        ("no content type", vec![], 415),
        // JSON, but from another site's page (a preflight the server never answers would
        // stop a browser; a plugin or an old browser may not ask).
        (
            "foreign origin",
            vec![
                (CONTENT_TYPE, "application/json"),
                (ORIGIN, "http://attacker.example"),
            ],
            403,
        ),
        (
            "null origin",
            vec![(CONTENT_TYPE, "application/json"), (ORIGIN, "null")],
            403,
        ),
        // DNS rebinding: same-origin to the browser, but the Host is the attacker's name.
        (
            "rebound host",
            vec![(CONTENT_TYPE, "application/json"), (HOST, rebound.as_str())],
            403,
        ),
        (
            "rebound host and origin",
            vec![
                (CONTENT_TYPE, "application/json"),
                (HOST, rebound.as_str()),
                (ORIGIN, "http://attacker.example"),
            ],
            403,
        ),
    ];
    for (what, headers, status) in attacks {
        let (got, body) = send(&s, "/v1/mast/hooks", Some(HOOK.into()), &headers).await;
        assert_eq!(got, status, "{what}: {body}");
        assert_eq!(
            body["type"], "error",
            "{what}: the API's error shape: {body}"
        );
        assert!(body["error"]["message"].is_string(), "{what}: {body}");
    }
    // A rebound page cannot read either.
    let (got, _) = send(&s, "/v1/mast/hooks", None, &[(HOST, rebound.as_str())]).await;
    assert_eq!(got, 403);
    // An upload is multipart only where uploads take it, and from this server's pages only.
    const BOUNDARY: &str = "mastboundary";
    let upload = || {
        reqwest::Body::from(format!(
            "--{BOUNDARY}\r\ncontent-disposition: form-data; name=\"file\"; filename=\"x.txt\"\r\n\
             content-type: text/plain\r\n\r\nx\r\n--{BOUNDARY}--\r\n"
        ))
    };
    let multipart = format!("multipart/form-data; boundary={BOUNDARY}");
    let (got, _) = send(
        &s,
        "/v1/files",
        Some(upload()),
        &[
            (CONTENT_TYPE, multipart.as_str()),
            (ORIGIN, "http://attacker.example"),
        ],
    )
    .await;
    assert_eq!(got, 403);
    let (got, _) = send(
        &s,
        "/v1/files",
        Some(HOOK.into()),
        &[(CONTENT_TYPE, "application/json")],
    )
    .await;
    assert_eq!(got, 415, "an upload is multipart/form-data");
    assert_eq!(hooks(&s).await, 0, "nothing was created");

    // What the server's own clients send still works: the console (same origin), the SDKs
    // and curl (no Origin), by any loopback name, and action endpoints with no body at all.
    let localhost = format!("localhost:{port}");
    for headers in [
        vec![
            (CONTENT_TYPE, "application/json"),
            (ORIGIN, own_origin.as_str()),
        ],
        vec![(CONTENT_TYPE, "application/json; charset=utf-8")],
        vec![
            (CONTENT_TYPE, "application/json"),
            (HOST, localhost.as_str()),
        ],
    ] {
        let (got, body) = send(&s, "/v1/mast/hooks", Some(HOOK.into()), &headers).await;
        assert_eq!(got, 200, "{body}");
    }
    assert_eq!(hooks(&s).await, 3);
    let agent = s.client.agent(json!([])).await;
    let (got, body) = send(
        &s,
        &format!("/v1/agents/{}/archive", agent["id"].as_str().unwrap()),
        Some(reqwest::Body::from("")),
        &[],
    )
    .await;
    assert_eq!(got, 200, "an empty body needs no type: {body}");
    let (got, body) = send(
        &s,
        "/v1/files",
        Some(upload()),
        &[
            (CONTENT_TYPE, multipart.as_str()),
            (ORIGIN, own_origin.as_str()),
        ],
    )
    .await;
    assert_eq!(got, 200, "{body}");
}

async fn keyed_servers_answer_only_the_hosts_they_are_told(b: Backend) {
    let key = format!("mast_sk_{}", mast::domain::ids::new_secret(32));
    let opts = Options {
        api_key: Some(key.clone()),
        ..Default::default()
    };
    let s = TestServer::start_tuned(b, opts, |c| {
        c.allowed_hosts = vec!["mast.example.com".into()];
    })
    .await;
    let port = s.url.rsplit(':').next().unwrap().to_string();
    let named = format!("mast.example.com:{port}");
    let other = format!("other.example.com:{port}");
    let ok = [
        (CONTENT_TYPE, "application/json"),
        (
            reqwest::header::HeaderName::from_static("x-api-key"),
            key.as_str(),
        ),
    ];
    let mut headers = ok.to_vec();
    headers.push((HOST, named.as_str()));
    let (got, body) = send(&s, "/v1/mast/hooks", Some(HOOK.into()), &headers).await;
    assert_eq!(got, 200, "a listed name: {body}");
    let mut headers = ok.to_vec();
    headers.push((HOST, other.as_str()));
    let (got, body) = send(&s, "/v1/mast/hooks", Some(HOOK.into()), &headers).await;
    assert_eq!(got, 403, "another name: {body}");
    // Loopback still answers, by address or name (the operator on the machine, a CLI set to
    // http://localhost), and the probes answer any host.
    let (got, _) = send(&s, "/v1/mast/hooks", Some(HOOK.into()), &ok).await;
    assert_eq!(got, 200);
    let localhost = format!("localhost:{port}");
    let mut headers = ok.to_vec();
    headers.push((HOST, localhost.as_str()));
    let (got, body) = send(&s, "/v1/mast/hooks", Some(HOOK.into()), &headers).await;
    assert_eq!(got, 200, "{body}");
    let (got, _) = send(&s, "/healthz", None, &[(HOST, other.as_str())]).await;
    assert_eq!(got, 200);
    // With a key, another site's Origin changes nothing: a page cannot attach the key.
    let mut headers = ok.to_vec();
    headers.push((ORIGIN, "http://attacker.example"));
    let (got, _) = send(&s, "/v1/mast/hooks", Some(HOOK.into()), &headers).await;
    assert_eq!(got, 200);
    // Bodies are JSON in every mode.
    let mut headers = vec![ok[1].clone()];
    headers.push((CONTENT_TYPE, "text/plain"));
    let (got, _) = send(&s, "/v1/mast/hooks", Some(HOOK.into()), &headers).await;
    assert_eq!(got, 415);
}
