//! `/v1/agents`: round trips, versions, optimistic concurrency, archive, lists, validation.

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::{Backend, TestServer};

backend_tests!(
    create_resolves_all_tool_kinds,
    versions_and_optimistic_concurrency,
    archive_and_list_filters,
    list_pages_without_trailing_cursor,
    validation_errors_for_each_limit,
    reserved_tool_names_are_refused_on_update,
    multiagent_rosters_are_resolved_and_checked,
);

/// Every tool kind Mast runs.
fn all_tools() -> Value {
    json!([
        {"type": "agent_toolset_20260401", "configs": [{"name": "bash", "permission_policy": {"type": "always_ask"}}, {"name": "web_fetch", "enabled": false}]},
        {"type": "custom", "name": "get_weather", "description": "d", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
        {"type": "mcp_toolset", "mcp_server_name": "linear", "configs": [{"name": "create_issue", "permission_policy": {"type": "always_allow"}}]}
    ])
}

/// The server `all_tools`' MCP toolset names.
fn all_servers() -> Value {
    json!([{"type": "url", "name": "linear", "url": "https://mcp.linear.app/mcp"}])
}

async fn create_resolves_all_tool_kinds(b: Backend) {
    let s = TestServer::start(b).await;
    let a = s
        .client
        .post(
            "/v1/agents",
            json!({"name": "Weather bot", "model": "claude-opus-4-7", "system": "sys", "tools": all_tools(),
                "mcp_servers": all_servers(), "metadata": {"team": "infra"}}),
        )
        .await
        .ok();
    assert!(a["id"].as_str().unwrap().starts_with("agent_01"));
    assert_eq!(a["type"], "agent");
    assert_eq!(a["version"], 1);
    assert_eq!(
        a["model"],
        json!({"id": "claude-opus-4-7", "effort": {"type": "high"}, "speed": "standard", "inference_geo": null})
    );
    assert_eq!(
        a["tools"][0]["default_config"],
        json!({"enabled": true, "permission_policy": {"type": "always_allow"}})
    );
    assert_eq!(
        a["tools"][0]["configs"][0],
        json!({"type": "bash", "name": "bash", "enabled": true, "permission_policy": {"type": "always_ask"}})
    );
    assert_eq!(a["tools"][0]["configs"][1]["enabled"], false);
    assert_eq!(a["tools"][1]["name"], "get_weather");
    // MCP toolsets default to `always_ask`; per-tool configs inherit what they do not set.
    assert_eq!(
        a["tools"][2],
        json!({"type": "mcp_toolset", "mcp_server_name": "linear",
            "default_config": {"enabled": true, "permission_policy": {"type": "always_ask"}},
            "configs": [{"name": "create_issue", "enabled": true, "permission_policy": {"type": "always_allow"}}]})
    );
    assert_eq!(a["mcp_servers"], all_servers());
    assert_eq!(a["execution_identity"], json!({"type": "service_account"}));
    assert_eq!(a["multiagent"], Value::Null);
    assert_eq!(a["archived_at"], Value::Null);
    let got = s
        .client
        .get(&format!("/v1/agents/{}", a["id"].as_str().unwrap()))
        .await
        .ok();
    assert_eq!(got, a);
}

async fn versions_and_optimistic_concurrency(b: Backend) {
    let s = TestServer::start(b).await;
    let a = s
        .client
        .post(
            "/v1/agents",
            json!({"name": "a", "model": "mast-scripted", "metadata": {"k": "v"}}),
        )
        .await
        .ok();
    let id = a["id"].as_str().unwrap();
    let v2 = s
        .client
        .post(
            &format!("/v1/agents/{id}"),
            json!({"version": 1, "system": "new", "metadata": {"k": null, "n": "1"}}),
        )
        .await
        .ok();
    assert_eq!(v2["version"], 2);
    assert_eq!(v2["system"], "new");
    assert_eq!(v2["metadata"], json!({"n": "1"}));
    assert_eq!(v2["created_at"], a["created_at"]);
    // Stale version: 409, and the SDK is told not to retry.
    let r = s
        .client
        .post(
            &format!("/v1/agents/{id}"),
            json!({"version": 1, "name": "x"}),
        )
        .await;
    assert_eq!(r.headers.get("x-should-retry").unwrap(), "false");
    assert!(r.err(409).contains("version 2"));
    // A no-op update does not bump the version.
    let same = s
        .client
        .post(&format!("/v1/agents/{id}"), json!({"system": "new"}))
        .await
        .ok();
    assert_eq!(same["version"], 2);
    // Clearing with null and "".
    let v3 = s
        .client
        .post(
            &format!("/v1/agents/{id}"),
            json!({"system": null, "description": ""}),
        )
        .await
        .ok();
    assert_eq!(v3["version"], 3);
    assert_eq!(v3["system"], Value::Null);
    // Old versions stay retrievable; versions list newest first.
    let v1 = s
        .client
        .get(&format!("/v1/agents/{id}?version=1"))
        .await
        .ok();
    assert_eq!(v1["version"], 1);
    assert_eq!(v1["metadata"], json!({"k": "v"}));
    s.client
        .get(&format!("/v1/agents/{id}?version=9"))
        .await
        .err(404);
    let list = s
        .client
        .get(&format!("/v1/agents/{id}/versions"))
        .await
        .ok();
    let versions: Vec<i64> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["version"].as_i64().unwrap())
        .collect();
    assert_eq!(versions, vec![3, 2, 1]);
    assert_eq!(list["next_page"], Value::Null);
    // name and model cannot be cleared.
    s.client
        .post(&format!("/v1/agents/{id}"), json!({"name": null}))
        .await
        .err(400);
    s.client
        .post(&format!("/v1/agents/{id}"), json!({"model": null}))
        .await
        .err(400);
    s.client
        .get("/v1/agents/agent_nope/versions")
        .await
        .err(404);
}

async fn archive_and_list_filters(b: Backend) {
    let s = TestServer::start(b).await;
    let a = s
        .client
        .post("/v1/agents", json!({"name": "a", "model": "mast-scripted"}))
        .await
        .ok();
    let keep = s
        .client
        .post("/v1/agents", json!({"name": "b", "model": "mast-scripted"}))
        .await
        .ok();
    let id = a["id"].as_str().unwrap();
    let archived = s
        .client
        .post(&format!("/v1/agents/{id}/archive"), json!({}))
        .await
        .ok();
    assert!(archived["archived_at"].is_string());
    // Archive is read-only and permanent: a bad request, as for every archived resource.
    let r = s
        .client
        .post(&format!("/v1/agents/{id}"), json!({"name": "z"}))
        .await;
    assert_eq!(r.body["error"]["details"]["error_code"], "agent_archived");
    r.err(400);
    let again = s
        .client
        .post(&format!("/v1/agents/{id}/archive"), json!({}))
        .await
        .ok();
    assert_eq!(again["archived_at"], archived["archived_at"]);
    let list = s.client.get("/v1/agents").await.ok();
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    assert_eq!(list["data"][0]["id"], keep["id"]);
    let all = s.client.get("/v1/agents?include_archived=true").await.ok();
    assert_eq!(all["data"].as_array().unwrap().len(), 2);
    let created = keep["created_at"].as_str().unwrap();
    let q = format!(
        "/v1/agents?include_archived=true&created_at%5Bgte%5D={}",
        urlencode(created)
    );
    assert_eq!(
        s.client.get(&q).await.ok()["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let q = format!(
        "/v1/agents?include_archived=true&created_at%5Blte%5D={}",
        urlencode(a["created_at"].as_str().unwrap())
    );
    assert_eq!(s.client.get(&q).await.ok()["data"][0]["id"], a["id"]);
    s.client
        .get("/v1/agents?created_at%5Bgte%5D=yesterday")
        .await
        .err(400);
    // Archived agents cannot start sessions.
    let env = s.client.environment().await;
    let msg = s
        .client
        .post(
            "/v1/sessions",
            json!({"agent": id, "environment_id": env["id"]}),
        )
        .await
        .err(400);
    assert!(msg.contains("archived"), "{msg}");
}

pub fn urlencode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

async fn list_pages_without_trailing_cursor(b: Backend) {
    let s = TestServer::start(b).await;
    let mut ids = Vec::new();
    for i in 0..25 {
        ids.push(
            s.client
                .post(
                    "/v1/agents",
                    json!({"name": format!("a{i}"), "model": "mast-scripted"}),
                )
                .await
                .ok()["id"]
                .clone(),
        );
    }
    ids.reverse();
    let mut seen = Vec::new();
    let mut page: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &page {
            Some(p) => format!("/v1/agents?limit=10&page={p}"),
            None => "/v1/agents?limit=10".to_string(),
        };
        let body = s.client.get(&path).await.ok();
        pages += 1;
        assert!(
            body.get("prev_page").is_none(),
            "only the sessions list is bidirectional"
        );
        seen.extend(
            body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["id"].clone()),
        );
        match body["next_page"].as_str() {
            Some(p) => page = Some(p.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ids, "newest first, each exactly once");
    s.client.get("/v1/agents?page=not-a-cursor").await.err(400);
    s.client.get("/v1/agents?limit=101").await.err(400);
    s.client.get("/v1/agents?limit=0").await.err(400);
    // Exactly one full page: no cursor pointing at nothing.
    let body = s.client.get("/v1/agents?limit=25").await.ok();
    assert_eq!(body["next_page"], Value::Null);
}

async fn reserved_tool_names_are_refused_on_update(b: Backend) {
    let s = TestServer::start(b).await;
    let custom = |name: &str| json!({"type": "custom", "name": name, "description": "d", "input_schema": {"type": "object"}});
    // Only the prefix is reserved.
    let ok = s
        .client
        .post(
            "/v1/agents",
            json!({"name": "a", "model": "mast-scripted", "tools": [custom("ant_ok")]}),
        )
        .await
        .ok();
    let aid = ok["id"].as_str().unwrap();
    let e = s
        .client
        .post(
            &format!("/v1/agents/{aid}"),
            json!({"version": 1, "tools": [custom("ant_ok"), custom("ant__x")]}),
        )
        .await
        .err(400);
    assert!(e.contains("`tools[1].name`: custom tool `ant__x`"), "{e}");
    let now = s.client.get(&format!("/v1/agents/{aid}")).await.ok();
    assert_eq!(
        (now["version"].as_i64(), now["tools"][0]["name"].as_str()),
        (Some(1), Some("ant_ok"))
    );
}

async fn validation_errors_for_each_limit(b: Backend) {
    let s = TestServer::start(b).await;
    let bad = |body: Value| {
        let c = s.client.clone();
        async move { c.post("/v1/agents", body).await.err(400) }
    };
    let custom = |name: &str| json!({"type": "custom", "name": name, "description": "d", "input_schema": {"type": "object"}});
    bad(json!({"model": "mast-scripted"})).await;
    bad(json!({"name": "", "model": "mast-scripted"})).await;
    bad(json!({"name": "x".repeat(257), "model": "mast-scripted"})).await;
    bad(json!({"name": "a", "model": "mast-scripted", "description": "d".repeat(2049)})).await;
    bad(json!({"name": "a", "model": "mast-scripted", "system": "s".repeat(100_001)})).await;
    bad(json!({"name": "a", "model": "unknown-model"})).await;
    bad(json!({"name": "a", "model": {"id": "mast-scripted", "effort": "extreme"}})).await;
    let many: Vec<Value> = (0..257).map(|i| custom(&format!("t{i}"))).collect();
    assert!(
        bad(json!({"name": "a", "model": "mast-scripted", "tools": many}))
            .await
            .contains("256")
    );
    bad(json!({"name": "a", "model": "mast-scripted", "tools": [custom("has space")]})).await;
    bad(json!({"name": "a", "model": "mast-scripted", "tools": [custom(&"n".repeat(129))]})).await;
    bad(json!({"name": "a", "model": "mast-scripted", "tools": [custom("dup"), custom("dup")]}))
        .await;
    bad(json!({"name": "a", "model": "mast-scripted", "tools": [{"type": "custom", "name": "x", "description": "d", "input_schema": {"type": "array"}}]})).await;
    // The platform's own tool prefixes are reserved, on create and on update alike.
    for reserved in ["ant__start_workflow_run", "mcp__linear__list"] {
        let e =
            bad(json!({"name": "a", "model": "mast-scripted", "tools": [custom(reserved)]})).await;
        assert!(
            e.contains(&format!("custom tool `{reserved}`")) && e.contains("reserved"),
            "{e}"
        );
    }
    let domains: Vec<String> = (0..65).map(|i| format!("d{i}.com")).collect();
    bad(json!({"name": "a", "model": "mast-scripted", "tools": [{"type": "agent_toolset_20260401", "configs": [{"name": "web_fetch", "allowed_domains": domains}]}]})).await;
    bad(json!({"name": "a", "model": "mast-scripted", "tools": [{"type": "agent_toolset_20260401", "configs": [{"name": "nope"}]}]})).await;
    // MCP servers and their toolsets match one to one; skills are refused (see `strict.rs`).
    let linear = json!([{"type": "url", "name": "linear", "url": "https://mcp.linear.app/mcp"}]);
    let toolset = json!({"type": "mcp_toolset", "mcp_server_name": "linear"});
    bad(json!({"name": "a", "model": "mast-scripted", "mcp_servers": linear})).await;
    bad(json!({"name": "a", "model": "mast-scripted", "tools": [toolset]})).await;
    bad(json!({"name": "a", "model": "mast-scripted", "tools": [toolset, toolset], "mcp_servers": linear})).await;
    bad(
        json!({"name": "a", "model": "mast-scripted", "tools": [toolset],
        "mcp_servers": [{"type": "url", "name": "linear", "url": "not a url"}]}),
    )
    .await;
    // Metadata limits carry the upstream error code.
    let meta: serde_json::Map<String, Value> =
        (0..17).map(|i| (format!("k{i}"), json!("v"))).collect();
    for m in [
        Value::Object(meta),
        json!({"k".repeat(65): "v"}),
        json!({"k": "v".repeat(513)}),
    ] {
        let r = s
            .client
            .post(
                "/v1/agents",
                json!({"name": "a", "model": "mast-scripted", "metadata": m}),
            )
            .await;
        assert_eq!(r.body["error"]["details"]["error_code"], "invalid_metadata");
        r.err(400);
    }
    // Nothing was half-written.
    assert_eq!(
        s.client.get("/v1/agents?include_archived=true").await.ok()["data"],
        json!([])
    );
    // Anthropic's own skills are refused even with `read` enabled: Mast cannot ship them.
    let r = s
        .client
        .post("/v1/agents", json!({"name": "a", "model": "mast-scripted", "tools": [{"type": "agent_toolset_20260401"}], "skills": [{"type": "anthropic", "skill_id": "xlsx"}]}))
        .await;
    assert_eq!(
        r.body["error"]["details"]["error_code"],
        "unsupported_feature"
    );
    r.err(400);
}

async fn multiagent_rosters_are_resolved_and_checked(b: Backend) {
    let s = TestServer::start(b).await;
    let helper = s
        .client
        .post(
            "/v1/agents",
            json!({"name": "helper", "model": "mast-scripted"}),
        )
        .await
        .ok();
    let hid = helper["id"].as_str().unwrap();
    let coord = s
        .client
        .post("/v1/agents", json!({"name": "lead", "model": "mast-scripted",
            "multiagent": {"type": "coordinator", "agents": [{"type": "advisor", "model": "claude-opus-4-7"}, hid, {"type": "self"}]}}))
        .await
        .ok();
    let cid = coord["id"].as_str().unwrap();
    assert_eq!(
        coord["multiagent"]["agents"],
        json!([
            {"type": "agent", "id": hid, "version": 1},
            {"type": "agent", "id": cid, "version": 1},
            {"type": "advisor", "model": "claude-opus-4-7"}
        ])
    );
    // A roster agent may not have its own roster (depth 1).
    let r = s.client.post("/v1/agents", json!({"name": "x", "model": "mast-scripted", "multiagent": {"type": "coordinator", "agents": [cid]}})).await;
    assert!(r.err(400).contains("one level"));
    s.client.post("/v1/agents", json!({"name": "x", "model": "mast-scripted", "multiagent": {"type": "coordinator", "agents": ["agent_missing"]}})).await.err(400);
    // multiagent_20261001 defaults and the update merge rule.
    let v = s
        .client
        .post("/v1/agents", json!({"name": "m", "model": "mast-scripted", "multiagent": {"type": "multiagent_20261001", "subagents": {"type": "enabled", "predefined_agents": [hid]}}}))
        .await
        .ok();
    assert_eq!(v["multiagent"]["advisor"], json!({"type": "disabled"}));
    assert_eq!(
        v["multiagent"]["workflows"],
        json!({"type": "enabled", "inline_agents": {"type": "enabled"}, "predefined_agents": []}),
        "an omitted member takes its default, as upstream"
    );
    let vid = v["id"].as_str().unwrap();
    let v2 = s
        .client
        .post(&format!("/v1/agents/{vid}"), json!({"multiagent": {"type": "multiagent_20261001", "subagents": {"type": "enabled", "inline_agents": {"type": "disabled"}}}}))
        .await
        .ok();
    assert_eq!(
        v2["multiagent"]["subagents"]["predefined_agents"],
        json!([{"type": "agent", "id": hid, "version": 1}])
    );
    assert_eq!(
        v2["multiagent"]["subagents"]["inline_agents"],
        json!({"type": "disabled"})
    );
    // Sessions carry full snapshots of the roster.
    let env = s.client.environment().await;
    let sess = s
        .client
        .post(
            "/v1/sessions",
            json!({"agent": cid, "environment_id": env["id"]}),
        )
        .await
        .ok();
    assert_eq!(sess["agent"]["multiagent"]["agents"][0]["name"], "helper");
    assert_eq!(sess["agent"]["multiagent"]["agents"][0]["tools"], json!([]));
    // Archived roster agents are refused.
    s.client
        .post(&format!("/v1/agents/{hid}/archive"), json!({}))
        .await
        .ok();
    s.client.post("/v1/agents", json!({"name": "y", "model": "mast-scripted", "multiagent": {"type": "coordinator", "agents": [hid]}})).await.err(400);
}
