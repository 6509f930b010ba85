//! `/v1/environments`: defaults, unique names, update rules, archive, delete.

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::{Backend, TestServer};

backend_tests!(
    environment_lifecycle,
    environment_update_rules,
    an_environment_in_use_is_not_deleted
);

async fn environment_lifecycle(b: Backend) {
    let s = TestServer::start(b).await;
    let e = s
        .client
        .post(
            "/v1/environments",
            json!({"name": "python-dev", "metadata": {"a": "1"}}),
        )
        .await
        .ok();
    let id = e["id"].as_str().unwrap();
    assert!(id.starts_with("env_01"));
    assert_eq!(
        e["config"],
        json!({"type": "cloud", "networking": {"type": "unrestricted"},
        "packages": {"type": "packages", "apt": [], "cargo": [], "gem": [], "go": [], "npm": [], "pip": []}})
    );
    assert_eq!(e["scope"], "organization");
    assert_eq!(
        s.client.get(&format!("/v1/environments/{id}")).await.ok(),
        e
    );
    let r = s
        .client
        .post("/v1/environments", json!({"name": "python-dev"}))
        .await;
    assert_eq!(r.headers.get("x-should-retry").unwrap(), "false");
    r.err(409);
    let sh = s
        .client
        .post(
            "/v1/environments",
            json!({"name": "workers", "config": {"type": "self_hosted"}}),
        )
        .await
        .ok();
    assert_eq!(sh["config"], json!({"type": "self_hosted"}));
    let list = s.client.get("/v1/environments?limit=1").await.ok();
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    let next = list["next_page"].as_str().unwrap();
    let page2 = s
        .client
        .get(&format!("/v1/environments?limit=1&page={next}"))
        .await
        .ok();
    assert_eq!(page2["data"][0]["id"], e["id"]);
    assert_eq!(page2["next_page"], Value::Null);

    let archived = s
        .client
        .post(&format!("/v1/environments/{id}/archive"), json!({}))
        .await
        .ok();
    assert!(archived["archived_at"].is_string());
    let r = s
        .client
        .post(&format!("/v1/environments/{id}"), json!({"name": "n"}))
        .await;
    assert_eq!(
        r.body["error"]["details"]["error_code"],
        "environment_archived"
    );
    r.err(400);
    assert_eq!(
        s.client.get("/v1/environments").await.ok()["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        s.client
            .get("/v1/environments?include_archived=true")
            .await
            .ok()["data"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let agent = s.client.agent(json!([])).await;
    let r = s
        .client
        .post(
            "/v1/sessions",
            json!({"agent": agent["id"], "environment_id": id}),
        )
        .await;
    assert_eq!(
        r.body["error"]["details"]["error_code"],
        "environment_archived"
    );

    let del = s
        .client
        .delete(&format!("/v1/environments/{id}"))
        .await
        .ok();
    assert_eq!(del, json!({"id": id, "type": "environment_deleted"}));
    s.client
        .get(&format!("/v1/environments/{id}"))
        .await
        .err(404);
    s.client
        .delete(&format!("/v1/environments/{id}"))
        .await
        .err(404);
    // The name is free again.
    s.client
        .post("/v1/environments", json!({"name": "python-dev"}))
        .await
        .ok();
}

async fn environment_update_rules(b: Backend) {
    let s = TestServer::start(b).await;
    let e = s
        .client
        .post("/v1/environments", json!({"name": "e", "description": "d", "metadata": {"a": "1", "b": "2"},
            "config": {"type": "cloud", "networking": {"type": "limited", "allowed_hosts": ["api.example.com"]}}}))
        .await
        .ok();
    let id = e["id"].as_str().unwrap();
    assert_eq!(
        e["config"]["networking"],
        json!({"type": "limited", "allowed_hosts": ["api.example.com"], "allow_package_managers": false, "allow_mcp_servers": false})
    );
    // Packages under `limited` networking need the package registries allowed (and a refused
    // update changes nothing).
    let u = s
        .client
        .post(
            &format!("/v1/environments/{id}"),
            json!({"description": "", "config": {"type": "cloud", "packages": {"pip": ["pandas==2.2.0"]}}}),
        )
        .await;
    assert!(
        u.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("allow_package_managers"),
        "{}",
        u.body
    );
    u.err(400);
    // Omitted cloud fields keep their stored values; "" and null delete metadata keys.
    let u = s
        .client
        .post(
            &format!("/v1/environments/{id}"),
            json!({"description": "", "metadata": {"a": "", "b": null, "c": "3"},
            "config": {"type": "cloud", "packages": {"pip": []}}}),
        )
        .await
        .ok();
    assert_eq!(u["description"], "");
    assert_eq!(u["metadata"], json!({"c": "3"}));
    assert_eq!(u["config"]["packages"]["pip"], json!([]));
    assert_eq!(u["config"]["networking"], e["config"]["networking"]);
    let r = s
        .client
        .post(
            &format!("/v1/environments/{id}"),
            json!({"config": {"type": "self_hosted"}}),
        )
        .await;
    assert_eq!(
        r.body["error"]["details"]["error_code"],
        "invalid_config_type_change"
    );
    r.err(400);
    let other = s
        .client
        .post("/v1/environments", json!({"name": "other"}))
        .await
        .ok();
    s.client
        .post(
            &format!("/v1/environments/{}", other["id"].as_str().unwrap()),
            json!({"name": "e"}),
        )
        .await
        .err(409);
    s.client.post("/v1/environments", json!({"name": "bad", "config": {"type": "cloud", "networking": {"type": "limited", "allowed_hosts": ["not a host"]}}})).await.err(400);
    s.client
        .post(
            "/v1/environments",
            json!({"name": "bad", "config": {"type": "nope"}}),
        )
        .await
        .err(400);
}

async fn an_environment_in_use_is_not_deleted(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let env = c
        .post("/v1/environments", json!({"name": "busy"}))
        .await
        .ok();
    let env_id = env["id"].as_str().unwrap().to_string();
    let agent = c.agent(json!([])).await;
    let sid = c
        .post(
            "/v1/sessions",
            json!({"agent": agent["id"], "environment_id": env_id}),
        )
        .await
        .ok()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let err = c
        .delete(&format!("/v1/environments/{env_id}"))
        .await
        .err(409);
    assert!(
        err.contains("used by 1 session that is not archived") && err.contains(&sid),
        "{err}"
    );
    c.get(&format!("/v1/environments/{env_id}")).await.ok();
    c.post(&format!("/v1/sessions/{sid}/archive"), json!({}))
        .await
        .ok();
    c.delete(&format!("/v1/environments/{env_id}")).await.ok();
    c.get(&format!("/v1/environments/{env_id}")).await.err(404);
}
