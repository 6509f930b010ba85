//! The vault endpoints on a real server process with debug-level logs: every method, the
//! validation probe against a real token endpoint and stand-in MCP server, `vault_ids` on
//! sessions — and not one secret in any response or log line.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::backend_tests;
use crate::crash::{free_port, wait_up};
use crate::support::{Backend, Client, fresh_postgres_database};
use crate::vaults::{AuthServer, ClientAuth};

backend_tests!(vault_methods_never_show_a_secret_even_in_debug_logs);

const API_KEY: &str = "mast-test-api-key-vaults";

async fn vault_methods_never_show_a_secret_even_in_debug_logs(b: Backend) {
    let dir = tempfile::TempDir::new().unwrap();
    let db = match b {
        Backend::Sqlite => None,
        Backend::Postgres => Some(fresh_postgres_database().await),
    };
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
    .env_remove("MAST_SECRET_KEY")
    .env_remove("MAST_SECRET_KEY_FILE")
    .env("MAST_BOOTSTRAP_API_KEY", API_KEY)
    .env("MAST_ALLOW_PRIVATE_NETWORK", "1")
    .env("MAST_LOG", "debug")
    .env("MAST_DB_MAX_CONNECTIONS", "6")
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(&log_path).unwrap());
    if let Some(url) = &db {
        cmd.env("DATABASE_URL", url);
    }
    let mut child = crate::crash::Reaped(cmd.spawn().expect("mast starts"));
    let c = Client::new(&format!("http://127.0.0.1:{port}")).with_key(API_KEY);
    wait_up(&c).await;
    let server = AuthServer::start(ClientAuth::Basic).await;
    let mcp = format!("{}/mcp", server.url);
    let mut seen = String::new();
    let mut keep = |v: Value| {
        seen.push_str(&v.to_string());
        v
    };

    // Vaults.
    let v = keep(
        c.post(
            "/v1/vaults",
            json!({"display_name": "team", "metadata": {"k": "v"}}),
        )
        .await
        .ok(),
    );
    let vid = v["id"].as_str().unwrap().to_string();
    assert!(vid.starts_with("vlt_"));
    assert_eq!(v["type"], "vault");
    c.post("/v1/vaults", json!({"display_name": ""}))
        .await
        .err(400);
    let v = keep(
        c.post(
            &format!("/v1/vaults/{vid}"),
            json!({"display_name": "team 2", "metadata": {"k": null}}),
        )
        .await
        .ok(),
    );
    assert_eq!(v["display_name"], "team 2");
    assert_eq!(v["metadata"], json!({}));
    keep(c.get(&format!("/v1/vaults/{vid}")).await.ok());
    c.get("/v1/vaults/vlt_nope").await.err(404);

    // An OAuth credential about to expire, and a static one with a token the server refuses.
    let oauth = keep(
        c.post(&format!("/v1/vaults/{vid}/credentials"), json!({"display_name": "o", "auth": {
            "type": "mcp_oauth", "mcp_server_url": mcp, "access_token": "at-0-S3CRET",
            "expires_at": mast::domain::time::format(crate::support::now() + 20_000_000),
            "refresh": {"client_id": "client-1", "refresh_token": "rt-0-S3CRET",
                "token_endpoint": format!("{}/token", server.url),
                "token_endpoint_auth": {"type": "client_secret_basic", "client_secret": "cs-S3CRET"}}}}))
        .await
        .ok(),
    );
    let oid = oauth["id"].as_str().unwrap().to_string();
    assert_eq!(
        oauth["auth"]["refresh"]["token_endpoint_auth"],
        json!({"type": "client_secret_basic"})
    );
    let other_vault = keep(
        c.post("/v1/vaults", json!({"display_name": "other"}))
            .await
            .ok(),
    );
    let ovid = other_vault["id"].as_str().unwrap().to_string();
    let st = keep(
        c.post(
            &format!("/v1/vaults/{ovid}/credentials"),
            json!({"auth": {
            "type": "static_bearer", "mcp_server_url": mcp, "token": "wrong-S3CRET"}}),
        )
        .await
        .ok(),
    );
    let sid = st["id"].as_str().unwrap().to_string();
    // One live credential per server in a vault.
    c.post(
        &format!("/v1/vaults/{ovid}/credentials"),
        json!({"auth": {
        "type": "static_bearer", "mcp_server_url": format!("{mcp}/"), "token": "x-S3CRET"}}),
    )
    .await
    .err(409);

    // Validation: the OAuth one refreshes (expiring), then its server accepts it.
    let r = keep(
        c.post(
            &format!("/v1/vaults/{vid}/credentials/{oid}/mcp_oauth_validate"),
            json!({}),
        )
        .await
        .ok(),
    );
    assert_eq!(r["type"], "vault_credential_validation");
    assert_eq!(r["status"], "valid", "{r}");
    assert_eq!(r["has_refresh_token"], true);
    assert_eq!(r["refresh"]["status"], "succeeded");
    assert_eq!(r["mcp_probe"], Value::Null);
    assert_eq!(server.refreshes(), 1);
    // A stale OAuth token the server refuses (401): refreshed once, then accepted; with a
    // refresh token the endpoint refuses, the verdict is `invalid` with both answers.
    let third_vault = keep(
        c.post("/v1/vaults", json!({"display_name": "third"}))
            .await
            .ok(),
    );
    let tvid = third_vault["id"].as_str().unwrap().to_string();
    let current_rt = server.state.lock().unwrap().refresh_token.clone();
    let oauth_auth = |rt: &str| {
        json!({"auth": {
        "type": "mcp_oauth", "mcp_server_url": mcp, "access_token": "at-0-S3CRET",
        "expires_at": mast::domain::time::format(crate::support::now() + 3_600_000_000),
        "refresh": {"client_id": "client-1", "refresh_token": rt,
            "token_endpoint": format!("{}/token", server.url),
            "token_endpoint_auth": {"type": "client_secret_basic", "client_secret": "cs-S3CRET"}}}})
    };
    let stale = keep(
        c.post(
            &format!("/v1/vaults/{tvid}/credentials"),
            oauth_auth(&current_rt),
        )
        .await
        .ok(),
    );
    let stale_id = stale["id"].as_str().unwrap().to_string();
    let r = keep(
        c.post(
            &format!("/v1/vaults/{tvid}/credentials/{stale_id}/mcp_oauth_validate"),
            json!({}),
        )
        .await
        .ok(),
    );
    assert_eq!(r["status"], "valid", "{r}");
    assert_eq!(r["refresh"]["status"], "succeeded", "{r}");
    assert_eq!(server.refreshes(), 2);
    keep(
        c.post(
            &format!("/v1/vaults/{tvid}/credentials/{stale_id}/archive"),
            json!({}),
        )
        .await
        .ok(),
    );
    let revoked = keep(
        c.post(
            &format!("/v1/vaults/{tvid}/credentials"),
            oauth_auth("rt-revoked-S3CRET"),
        )
        .await
        .ok(),
    );
    let revoked_id = revoked["id"].as_str().unwrap().to_string();
    let r = keep(
        c.post(
            &format!("/v1/vaults/{tvid}/credentials/{revoked_id}/mcp_oauth_validate"),
            json!({}),
        )
        .await
        .ok(),
    );
    assert_eq!(r["status"], "invalid", "{r}");
    assert_eq!(r["refresh"]["status"], "failed", "{r}");
    assert_eq!(r["refresh"]["http_response"]["status_code"], 400, "{r}");
    assert_eq!(r["mcp_probe"]["http_response"]["status_code"], 401, "{r}");
    // The static one is refused; the server's answer (which echoes the token) is scrubbed.
    let r = keep(
        c.post(
            &format!("/v1/vaults/{ovid}/credentials/{sid}/mcp_oauth_validate"),
            json!({}),
        )
        .await
        .ok(),
    );
    assert_eq!(r["status"], "invalid", "{r}");
    assert_eq!(r["mcp_probe"]["method"], "initialize");
    assert_eq!(r["mcp_probe"]["http_response"]["status_code"], 401);
    assert_eq!(r["has_refresh_token"], false);
    // Updated with the token the server now accepts, it is valid.
    let good = server.state.lock().unwrap().access_token.clone();
    keep(
        c.post(
            &format!("/v1/vaults/{ovid}/credentials/{sid}"),
            json!({"auth": {"type": "static_bearer", "token": good}}),
        )
        .await
        .ok(),
    );
    let r = keep(
        c.post(
            &format!("/v1/vaults/{ovid}/credentials/{sid}/mcp_oauth_validate"),
            json!({}),
        )
        .await
        .ok(),
    );
    assert_eq!(r["status"], "valid", "{r}");
    c.post(
        &format!("/v1/vaults/{ovid}/credentials/{sid}"),
        json!({"auth": {"type": "mcp_oauth", "access_token": "y"}}),
    )
    .await
    .err(400);

    // Lists, retrieve, archive, delete.
    let page = keep(
        c.get(&format!("/v1/vaults/{vid}/credentials?limit=1"))
            .await
            .ok(),
    );
    assert_eq!(page["data"].as_array().unwrap().len(), 1);
    keep(
        c.get(&format!("/v1/vaults/{ovid}/credentials/{sid}"))
            .await
            .ok(),
    );
    c.get(&format!("/v1/vaults/{vid}/credentials/{sid}"))
        .await
        .err(404);
    let a = keep(
        c.post(
            &format!("/v1/vaults/{ovid}/credentials/{sid}/archive"),
            json!({}),
        )
        .await
        .ok(),
    );
    assert!(a["archived_at"].is_string());
    c.post(
        &format!("/v1/vaults/{ovid}/credentials/{sid}"),
        json!({"display_name": "n"}),
    )
    .await
    .err(400);
    assert_eq!(
        keep(c.get(&format!("/v1/vaults/{ovid}/credentials")).await.ok())["data"],
        json!([])
    );
    assert_eq!(
        keep(
            c.get(&format!(
                "/v1/vaults/{ovid}/credentials?include_archived=true"
            ))
            .await
            .ok()
        )["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let d = c
        .delete(&format!("/v1/vaults/{ovid}/credentials/{sid}"))
        .await
        .ok();
    assert_eq!(d, json!({"id": sid, "type": "vault_credential_deleted"}));

    // Sessions name vaults that exist and are not archived; the list is echoed, create-only.
    let agent = c.agent(json!([])).await;
    let env = c.environment().await;
    let s = keep(
        c.post(
            "/v1/sessions",
            json!({"agent": agent["id"], "environment_id": env["id"], "vault_ids": [vid, ovid]}),
        )
        .await
        .ok(),
    );
    assert_eq!(s["vault_ids"], json!([vid, ovid]));
    let path = format!("/v1/sessions/{}", s["id"].as_str().unwrap());
    assert_eq!(c.get(&path).await.ok()["vault_ids"], json!([vid, ovid]));
    c.post(&path, json!({"vault_ids": [vid, ovid]})).await.ok();
    c.post(&path, json!({"vault_ids": [vid]})).await.err(400);
    c.post(
        "/v1/sessions",
        json!({"agent": agent["id"], "environment_id": env["id"], "vault_ids": ["vlt_nope"]}),
    )
    .await
    .err(404);
    keep(
        c.post(&format!("/v1/vaults/{ovid}/archive"), json!({}))
            .await
            .ok(),
    );
    let e = c
        .post(
            "/v1/sessions",
            json!({"agent": agent["id"], "environment_id": env["id"], "vault_ids": [ovid]}),
        )
        .await;
    assert_eq!(
        e.body["error"]["details"]["error_code"], "vault_archived",
        "{}",
        e.body
    );
    c.post(
        &format!("/v1/vaults/{ovid}/credentials"),
        json!({"auth": {
        "type": "static_bearer", "mcp_server_url": mcp, "token": "z-S3CRET"}}),
    )
    .await
    .err(400);
    let listed = keep(c.get("/v1/vaults?include_archived=true").await.ok());
    assert_eq!(listed["data"].as_array().unwrap().len(), 3);
    assert_eq!(
        c.get("/v1/vaults").await.ok()["data"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let d = c.delete(&format!("/v1/vaults/{vid}")).await.ok();
    assert_eq!(d, json!({"id": vid, "type": "vault_deleted"}));
    c.get(&format!("/v1/vaults/{vid}/credentials/{oid}"))
        .await
        .err(404);

    child.kill().ok();
    child.wait().ok();
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.lines().count() > 10, "the run logged:\n{log}");
    assert!(
        log.contains("secret.key"),
        "the generated key's location is logged:\n{log}"
    );
    let mut secrets = vec![
        "at-0-S3CRET".to_string(),
        "rt-0-S3CRET".into(),
        "cs-S3CRET".into(),
        "wrong-S3CRET".into(),
        "x-S3CRET".into(),
        "z-S3CRET".into(),
        "rt-revoked-S3CRET".into(),
        "at-2-S3CRET".into(),
        "rt-1-S3CRET".into(),
    ];
    {
        let s = server.state.lock().unwrap();
        secrets.push(s.access_token.clone());
        secrets.push(s.refresh_token.clone());
    }
    secrets.push("at-1-S3CRET".into());
    for secret in &secrets {
        assert!(
            !log.contains(secret.as_str()),
            "a secret is in the logs: {secret}"
        );
        assert!(
            !seen.contains(secret.as_str()),
            "a secret is in a response: {secret}"
        );
    }
    assert!(
        !seen.contains("S3CRET"),
        "a secret is in a response: {seen}"
    );
    assert!(!log.contains("S3CRET"), "a secret is in the logs");
}
