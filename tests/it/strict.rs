//! Requests are never half-understood: unknown keys at any depth are a 400 naming the key
//! (with the key probably meant), features Mast does not have are refused with a stable code,
//! type errors speak API terms, and the same condition gets the same status everywhere.

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::http::{Client, weather_tool};
use crate::support::{Backend, TestServer};

backend_tests!(
    typos_are_refused_at_every_level_and_change_nothing,
    unsupported_features_are_refused_with_a_code,
    defaults_the_sdks_send_are_still_accepted,
    type_errors_speak_api_terms,
    archived_means_400_everywhere,
    action_endpoints_take_no_body,
);

/// A request expected to be refused for an unknown key.
struct Typo {
    path: String,
    body: Value,
    field: &'static str,
    hint: Option<&'static str>,
}

fn typo(path: &str, body: Value, field: &'static str, hint: Option<&'static str>) -> Typo {
    Typo {
        path: path.to_string(),
        body,
        field,
        hint,
    }
}

/// Merges `extra` into the object `base`.
fn with(base: &Value, extra: Value) -> Value {
    let mut out = base.clone();
    for (k, v) in extra.as_object().unwrap() {
        out[k] = v.clone();
    }
    out
}

/// Everything a refused request could have touched, minus what moves with the clock.
async fn snapshot(c: &Client, sid: &str, aid: &str, eid: &str) -> Value {
    let sessions: Vec<Value> = c
        .get("/v1/sessions?include_archived=true&limit=100")
        .await
        .ok()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            json!([
                s["id"],
                s["updated_at"],
                s["title"],
                s["metadata"],
                s["agent"]
            ])
        })
        .collect();
    json!({
        "agents": c.get("/v1/agents?include_archived=true&limit=100").await.ok()["data"],
        "agent_versions": c.get(&format!("/v1/agents/{aid}/versions")).await.ok()["data"],
        "environments": c.get("/v1/environments?include_archived=true&limit=100").await.ok()["data"],
        "environment": c.get(&format!("/v1/environments/{eid}")).await.ok(),
        "sessions": sessions,
        "events": c.all_events(sid).await,
    })
}

async fn expect_typo(c: &Client, t: &Typo) {
    let r = c.post(&t.path, t.body.clone()).await;
    let details = r.body["error"]["details"].clone();
    let kind = r.body["error"]["type"].clone();
    let msg = r.err(400);
    let at = format!("POST {} {}", t.path, t.body);
    assert_eq!(kind, "invalid_request_error", "{at}");
    assert!(
        msg.contains(&format!("`{}`", t.field)),
        "{at}: the message names `{}`: {msg}",
        t.field
    );
    assert!(msg.contains("not a known field"), "{at}: {msg}");
    match t.hint {
        Some(h) => {
            assert!(
                msg.contains(&format!("did you mean `{h}`?")),
                "{at}: suggests `{h}`: {msg}"
            );
            assert_eq!(
                details,
                json!({"error_code": "unknown_field", "field": t.field, "suggestion": h}),
                "{at}"
            );
        }
        None => {
            assert!(!msg.contains("did you mean"), "{at}: {msg}");
            assert_eq!(
                details,
                json!({"error_code": "unknown_field", "field": t.field}),
                "{at}"
            );
        }
    }
}

async fn typos_are_refused_at_every_level_and_change_nothing(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let agent = c.agent(json!([weather_tool()])).await;
    let aid = agent["id"].as_str().unwrap().to_string();
    let env = c.environment().await;
    let eid = env["id"].as_str().unwrap().to_string();
    let sid = c
        .post("/v1/sessions", json!({"agent": aid, "environment_id": eid}))
        .await
        .ok()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // A self-hosted environment with a queued work item, for the work endpoints.
    let workers = c
        .post(
            "/v1/environments",
            json!({"name": "strict-workers", "config": {"type": "self_hosted"}}),
        )
        .await
        .ok();
    let wenv = workers["id"].as_str().unwrap().to_string();
    let key = c
        .post(&format!("/v1/environments/{wenv}/keys"), json!({}))
        .await
        .ok()["key"]
        .as_str()
        .unwrap()
        .to_string();
    c.post(
        "/v1/sessions",
        json!({"agent": aid, "environment_id": wenv}),
    )
    .await
    .ok();
    let item = c
        .with_key(&key)
        .get(&format!("/v1/environments/{wenv}/work/poll"))
        .await
        .ok();
    let work = format!(
        "/v1/environments/{wenv}/work/{}",
        item["id"].as_str().unwrap()
    );
    let before = snapshot(c, &sid, &aid, &eid).await;
    let work_before = c.get(&work).await.ok();

    let agent_body = json!({"name": "a", "model": "mast-scripted"});
    let toolset =
        |extra: Value| json!({"tools": [with(&json!({"type": "agent_toolset_20260401"}), extra)]});
    let config = |c: Value| json!({"type": "agent_toolset_20260401", "configs": [c]});
    let env_body = json!({"name": "never-made"});
    let sess_body = json!({"agent": aid, "environment_id": eid});
    let message = json!({"type": "user.message", "content": [{"type": "text", "text": "hi"}]});
    let events = format!("/v1/sessions/{sid}/events");
    let agent_path = format!("/v1/agents/{aid}");
    let env_path = format!("/v1/environments/{eid}");
    let sess_path = format!("/v1/sessions/{sid}");
    let cases = vec![
        // POST /v1/agents: top level, model, each tool kind and its nested configs, roster, identity.
        typo(
            "/v1/agents",
            with(&agent_body, json!({"sytem": "hi"})),
            "sytem",
            Some("system"),
        ),
        typo(
            "/v1/agents",
            with(&agent_body, json!({"metdata": {}})),
            "metdata",
            Some("metadata"),
        ),
        typo(
            "/v1/agents",
            with(&agent_body, json!({"mcpServers": []})),
            "mcpServers",
            Some("mcp_servers"),
        ),
        typo(
            "/v1/agents",
            with(
                &agent_body,
                json!({"model": {"id": "mast-scripted", "efort": "low"}}),
            ),
            "model.efort",
            Some("effort"),
        ),
        typo(
            "/v1/agents",
            with(
                &agent_body,
                json!({"model": {"id": "mast-scripted", "effort": {"type": "low", "budget": 3}}}),
            ),
            "model.effort.budget",
            None,
        ),
        typo(
            "/v1/agents",
            with(&agent_body, toolset(json!({"default_confg": {}}))),
            "tools[0].default_confg",
            Some("default_config"),
        ),
        typo(
            "/v1/agents",
            with(
                &agent_body,
                toolset(json!({"default_config": {"enabeld": false}})),
            ),
            "tools[0].default_config.enabeld",
            Some("enabled"),
        ),
        typo(
            "/v1/agents",
            with(
                &agent_body,
                toolset(
                    json!({"default_config": {"permission_policy": {"type": "always_ask", "why": "x"}}}),
                ),
            ),
            "tools[0].default_config.permission_policy.why",
            None,
        ),
        typo(
            "/v1/agents",
            with(
                &agent_body,
                json!({"tools": [config(json!({"name": "bash", "permision_policy": {"type": "always_ask"}}))]}),
            ),
            "tools[0].configs[0].permision_policy",
            Some("permission_policy"),
        ),
        typo(
            "/v1/agents",
            with(
                &agent_body,
                json!({"tools": [config(json!({"name": "web_fetch", "allowed_domain": ["a.com"]}))]}),
            ),
            "tools[0].configs[0].allowed_domain",
            Some("allowed_domains"),
        ),
        typo(
            "/v1/agents",
            with(
                &agent_body,
                json!({"tools": [config(json!({"name": "bash", "allowed_domains": ["a.com"]}))]}),
            ),
            "tools[0].configs[0].allowed_domains",
            None,
        ),
        typo(
            "/v1/agents",
            with(
                &agent_body,
                json!({"tools": [{"type": "custom", "name": "t", "description": "d", "input_shema": {"type": "object"}}]}),
            ),
            "tools[0].input_shema",
            Some("input_schema"),
        ),
        typo(
            "/v1/agents",
            with(
                &agent_body,
                json!({"multiagent": {"type": "coordinator", "agents": [{"type": "self"}], "agnets": []}}),
            ),
            "multiagent.agnets",
            Some("agents"),
        ),
        typo(
            "/v1/agents",
            with(
                &agent_body,
                json!({"multiagent": {"type": "coordinator", "agents": [{"type": "agent", "id": aid, "verison": 1}]}}),
            ),
            "multiagent.agents[0].verison",
            Some("version"),
        ),
        typo(
            "/v1/agents",
            with(
                &agent_body,
                json!({"multiagent": {"type": "multiagent_20261001", "subagents": {"type": "enabled", "inline_agent": {"type": "enabled"}}}}),
            ),
            "multiagent.subagents.inline_agent",
            Some("inline_agents"),
        ),
        typo(
            "/v1/agents",
            with(
                &agent_body,
                json!({"multiagent": {"type": "multiagent_20261001", "advisor": {"type": "enabled", "model": "claude-opus-4-7", "modle": "x"}}}),
            ),
            "multiagent.advisor.modle",
            Some("model"),
        ),
        typo(
            "/v1/agents",
            with(
                &agent_body,
                json!({"execution_identity": {"type": "service_account", "role": "x"}}),
            ),
            "execution_identity.role",
            None,
        ),
        // POST /v1/agents/{id}
        typo(&agent_path, json!({"nme": "b"}), "nme", Some("name")),
        typo(
            &agent_path,
            json!({"versoin": 1}),
            "versoin",
            Some("version"),
        ),
        typo(
            &agent_path,
            json!({"model": {"id": "mast-scripted", "sped": "fast"}}),
            "model.sped",
            Some("speed"),
        ),
        typo(
            &agent_path,
            json!({"tools": [with(&weather_tool(), json!({"strict": true}))]}),
            "tools[0].strict",
            None,
        ),
        // POST /v1/environments: a misspelt `networking` first.
        typo(
            "/v1/environments",
            with(
                &env_body,
                json!({"config": {"type": "cloud", "netwrking": {"type": "limited"}}}),
            ),
            "config.netwrking",
            Some("networking"),
        ),
        typo(
            "/v1/environments",
            with(
                &env_body,
                json!({"config": {"type": "cloud", "networking": {"type": "limited", "allowed_host": ["a.com"]}}}),
            ),
            "config.networking.allowed_host",
            Some("allowed_hosts"),
        ),
        typo(
            "/v1/environments",
            with(
                &env_body,
                json!({"config": {"type": "cloud", "networking": {"type": "unrestricted", "allowed_hosts": ["a.com"]}}}),
            ),
            "config.networking.allowed_hosts",
            None,
        ),
        typo(
            "/v1/environments",
            with(
                &env_body,
                json!({"config": {"type": "self_hosted", "networking": {"type": "limited"}}}),
            ),
            "config.networking",
            None,
        ),
        typo(
            "/v1/environments",
            with(
                &env_body,
                json!({"config": {"type": "cloud", "packages": {"pipp": []}}}),
            ),
            "config.packages.pipp",
            Some("pip"),
        ),
        typo(
            "/v1/environments",
            with(&env_body, json!({"descripton": "x"})),
            "descripton",
            Some("description"),
        ),
        // POST /v1/environments/{id}
        typo(
            &env_path,
            json!({"confg": {"type": "cloud"}}),
            "confg",
            Some("config"),
        ),
        typo(
            &env_path,
            json!({"config": {"type": "cloud", "networking": {"type": "limited", "allow_package_manager": true}}}),
            "config.networking.allow_package_manager",
            Some("allow_package_managers"),
        ),
        // POST /v1/sessions: top level, each agent form, overrides, initial events down to blocks.
        typo(
            "/v1/sessions",
            with(&sess_body, json!({"titel": "x"})),
            "titel",
            Some("title"),
        ),
        typo(
            "/v1/sessions",
            json!({"agent": aid, "environment": eid}),
            "environment",
            Some("environment_id"),
        ),
        typo(
            "/v1/sessions",
            with(
                &sess_body,
                json!({"agent": {"type": "agent", "id": aid, "versoin": 1}}),
            ),
            "agent.versoin",
            Some("version"),
        ),
        typo(
            "/v1/sessions",
            with(
                &sess_body,
                json!({"agent": {"type": "agent_with_overrides", "id": aid, "sytem": "x"}}),
            ),
            "agent.sytem",
            Some("system"),
        ),
        typo(
            "/v1/sessions",
            with(
                &sess_body,
                json!({"agent": {"type": "agent_with_overrides", "id": aid, "model": {"id": "mast-scripted", "effrt": "low"}}}),
            ),
            "agent.model.effrt",
            Some("effort"),
        ),
        typo(
            "/v1/sessions",
            with(
                &sess_body,
                json!({"initial_events": [{"type": "user.message", "contnet": []}]}),
            ),
            "initial_events[0].contnet",
            Some("content"),
        ),
        typo(
            "/v1/sessions",
            with(
                &sess_body,
                json!({"initial_events": [{"type": "user.message", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}]}),
            ),
            "initial_events[0].content[0].cache_control",
            None,
        ),
        // POST /v1/sessions/{id}
        typo(&sess_path, json!({"titl": "x"}), "titl", Some("title")),
        typo(
            &sess_path,
            json!({"metadata": {"a": "b"}, "metdata": {}}),
            "metdata",
            Some("metadata"),
        ),
        typo(
            &sess_path,
            json!({"agent": {"tols": []}}),
            "agent.tols",
            Some("tools"),
        ),
        // POST /v1/sessions/{id}/events: each event type, blocks and sources.
        typo(
            &events,
            json!({"event": [message]}),
            "event",
            Some("events"),
        ),
        typo(
            &events,
            json!({"events": [with(&message, json!({"extra": 1}))]}),
            "events[0].extra",
            None,
        ),
        typo(
            &events,
            json!({"events": [{"type": "user.message", "content": [{"type": "text", "txt": "hi"}]}]}),
            "events[0].content[0].txt",
            Some("text"),
        ),
        typo(
            &events,
            json!({"events": [{"type": "user.message", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA==", "url": "https://x"}}]}]}),
            "events[0].content[0].source.url",
            None,
        ),
        typo(
            &events,
            json!({"events": [{"type": "user.message", "content": [{"type": "document", "titel": "t", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}]}]}),
            "events[0].content[0].titel",
            Some("title"),
        ),
        typo(
            &events,
            json!({"events": [{"type": "user.interrupt", "session_thread": "sthr_x"}]}),
            "events[0].session_thread",
            Some("session_thread_id"),
        ),
        typo(
            &events,
            json!({"events": [{"type": "user.tool_confirmation", "tool_use_id": "sevt_x", "result": "deny", "deny_mesage": "no"}]}),
            "events[0].deny_mesage",
            Some("deny_message"),
        ),
        typo(
            &events,
            json!({"events": [{"type": "user.custom_tool_result", "custom_tool_use_id": "sevt_x", "is_eror": true}]}),
            "events[0].is_eror",
            Some("is_error"),
        ),
        typo(
            &events,
            json!({"events": [{"type": "user.tool_result", "tool_use_id": "sevt_x", "content": [{"type": "search_result", "source": "https://x", "title": "t", "content": [], "citation": {"enabled": true}}]}]}),
            "events[0].content[0].citation",
            Some("citations"),
        ),
        typo(
            &events,
            json!({"events": [message, {"type": "system.message", "content": [{"type": "text", "text": "x"}], "contents": []}]}),
            "events[1].contents",
            Some("content"),
        ),
        // The work endpoints.
        typo(
            &work,
            json!({"metadata": {}, "metdata": {}}),
            "metdata",
            Some("metadata"),
        ),
        typo(
            &format!("{work}/stop"),
            json!({"forse": true}),
            "forse",
            Some("force"),
        ),
    ];
    for t in &cases {
        expect_typo(c, t).await;
    }
    assert_eq!(
        snapshot(c, &sid, &aid, &eid).await,
        before,
        "no refused request created or changed anything"
    );
    assert_eq!(c.get(&work).await.ok(), work_before);
}

async fn expect_unsupported(c: &Client, path: &str, body: Value, field: &str, feature: &str) {
    let r = c.post(path, body.clone()).await;
    let details = r.body["error"]["details"].clone();
    let msg = r.err(400);
    let at = format!("POST {path} {body}");
    assert!(msg.contains(&format!("`{field}`")), "{at}: {msg}");
    assert!(msg.contains("not supported by this server"), "{at}: {msg}");
    assert_eq!(
        details,
        json!({"error_code": "unsupported_feature", "field": field, "feature": feature}),
        "{at}: {msg}"
    );
}

async fn unsupported_features_are_refused_with_a_code(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let agent = c.agent(json!([])).await;
    let aid = agent["id"].as_str().unwrap().to_string();
    let env = c.environment().await;
    let eid = env["id"].as_str().unwrap().to_string();
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    let before = snapshot(c, &sid, &aid, &eid).await;

    let a = json!({"name": "a", "model": "mast-scripted"});
    let skill = json!([{"type": "anthropic", "skill_id": "xlsx"}]);
    // Skills need the `read` tool; with it, an Anthropic skill no operator installed is refused.
    let toolset = json!([{"type": "agent_toolset_20260401"}]);
    let web = |c: Value| json!({"tools": [{"type": "agent_toolset_20260401", "configs": [c]}]});
    let sess = json!({"agent": aid, "environment_id": eid});
    let overrides = |extra: Value| {
        with(
            &sess,
            json!({"agent": with(&json!({"type": "agent_with_overrides", "id": aid}), extra)}),
        )
    };
    let agent_path = format!("/v1/agents/{aid}");
    let sess_path = format!("/v1/sessions/{sid}");
    let cases: Vec<(&str, Value, &str, &str)> = vec![
        (
            "/v1/agents",
            with(&a, json!({"skills": skill, "tools": toolset})),
            "skills[0].type",
            "anthropic_skills",
        ),
        (
            "/v1/agents",
            with(
                &a,
                json!({"execution_identity": {"type": "aws_role", "role_arn": "arn:aws:iam::1:role/x"}}),
            ),
            "execution_identity",
            "aws_role",
        ),
        (
            "/v1/agents",
            with(
                &a,
                web(json!({"name": "web_fetch", "url_sources": {"user_input": "all"}})),
            ),
            "tools[0].configs[0].url_sources",
            "url_sources",
        ),
        (
            "/v1/agents",
            with(
                &a,
                web(
                    json!({"name": "web_search", "user_location": {"type": "approximate", "city": "Oslo"}}),
                ),
            ),
            "tools[0].configs[0].user_location",
            "user_location",
        ),
        (
            &agent_path,
            json!({"skills": skill, "tools": toolset}),
            "skills[0].type",
            "anthropic_skills",
        ),
        (
            "/v1/environments",
            json!({"name": "acct", "scope": "account"}),
            "scope",
            "account_scope",
        ),
        (
            "/v1/sessions",
            overrides(json!({"skills": skill})),
            "agent.skills",
            "skills",
        ),
        (
            &sess_path,
            json!({"vault_ids": ["vlt_x"]}),
            "vault_ids",
            "vaults",
        ),
    ];
    for (path, body, field, feature) in cases {
        expect_unsupported(c, path, body, field, feature).await;
    }
    assert_eq!(snapshot(c, &sid, &aid, &eid).await, before);
}

/// Explicit `null`, `[]` and default-valued objects for refused features are still fine: the
/// SDKs (and clients echoing a retrieved object back) send them.
async fn defaults_the_sdks_send_are_still_accepted(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let a = c
        .post("/v1/agents", json!({"name": "a", "model": {"id": "mast-scripted", "effort": null, "speed": null, "inference_geo": null},
            "description": null, "system": null, "mcp_servers": [], "skills": null, "multiagent": null, "metadata": null,
            "execution_identity": {"type": "service_account"},
            "tools": [{"type": "agent_toolset_20260401", "default_config": {"enabled": true, "permission_policy": {"type": "always_allow"}},
                "configs": [{"type": "web_fetch", "name": "web_fetch", "enabled": true, "url_sources": null, "allowed_domains": null, "max_content_tokens": null},
                    {"name": "web_search", "user_location": null, "blocked_domains": ["x.example"]}]}]}))
        .await
        .ok();
    let aid = a["id"].as_str().unwrap();
    assert_eq!(a["mcp_servers"], json!([]));
    assert_eq!(a["skills"], json!([]));
    // An agent's own tools, echoed back, are accepted as they are.
    let same = c
        .post(
            &format!("/v1/agents/{aid}"),
            json!({"tools": a["tools"], "mcp_servers": null, "skills": [], "execution_identity": null}),
        )
        .await
        .ok();
    assert_eq!(same["version"], 1, "nothing changed");
    let m = c
        .post("/v1/agents", json!({"name": "m", "model": "mast-scripted",
            "multiagent": {"type": "multiagent_20261001", "workflows": {"type": "disabled"}, "advisor": null, "subagents": null}}))
        .await
        .ok();
    assert_eq!(m["multiagent"]["workflows"], json!({"type": "disabled"}));
    let m = c
        .post("/v1/agents", json!({"name": "m2", "model": "mast-scripted", "multiagent": {"type": "multiagent_20261001"}}))
        .await
        .ok();
    assert_eq!(
        m["multiagent"]["workflows"],
        json!({"type": "enabled", "inline_agents": {"type": "enabled"}, "predefined_agents": []}),
        "an omitted member takes its default, as upstream"
    );
    let env = c
        .post("/v1/environments", json!({"name": "e", "description": null, "metadata": null, "scope": "organization",
            "config": {"type": "cloud", "networking": {"type": "limited", "allowed_hosts": null, "allow_package_managers": true, "allow_mcp_servers": false},
                "packages": {"type": "packages", "apt": [], "cargo": [], "gem": [], "go": [], "npm": [], "pip": []}}}))
        .await
        .ok();
    let eid = env["id"].as_str().unwrap();
    // A retrieved config sent back unchanged.
    c.post(
        &format!("/v1/environments/{eid}"),
        json!({"config": env["config"]}),
    )
    .await
    .ok();
    let sess = c
        .post("/v1/sessions", json!({"agent": {"type": "agent_with_overrides", "id": aid, "mcp_servers": null, "skills": [], "version": null},
            "environment_id": eid, "vault_ids": [], "resources": [], "budget": null, "initial_events": [], "title": null, "metadata": null}))
        .await
        .ok();
    let sid = sess["id"].as_str().unwrap();
    c.post(
        &format!("/v1/sessions/{sid}"),
        json!({"vault_ids": [], "budget": null, "agent": {"mcp_servers": []}}),
    )
    .await
    .ok();
    c.post(
        &format!("/v1/sessions/{sid}"),
        json!({"vault_ids": null, "agent": null}),
    )
    .await
    .ok();
    c.send_events(
        sid,
        json!([{"type": "user.message", "content": [{"type": "document", "title": null, "context": null,
            "source": {"type": "text", "media_type": "text/plain", "data": "notes"}}]},
            {"type": "user.interrupt", "session_thread_id": null}]),
    )
    .await;
}

/// Asserts a 400 whose message contains each of `words` and none of the Rust-internal tells.
async fn expect_plain(c: &Client, path: &str, body: Value, words: &[&str]) {
    let r = c.post(path, body.clone()).await;
    let msg = r.err(400);
    for w in words {
        assert!(msg.contains(w), "POST {path} {body}: wants `{w}` in: {msg}");
    }
    for tell in [
        "untagged",
        "line 1",
        "column",
        "struct ",
        "enum ",
        "i64",
        "u64",
        "Value",
        "Params",
        "a sequence",
        "a map",
    ] {
        assert!(
            !msg.contains(tell),
            "POST {path} {body}: `{tell}` in: {msg}"
        );
    }
}

async fn type_errors_speak_api_terms(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let agent = c.agent(json!([])).await;
    let aid = agent["id"].as_str().unwrap().to_string();
    let env = c.environment().await;
    let eid = env["id"].as_str().unwrap().to_string();
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    let a = |extra: Value| with(&json!({"name": "a", "model": "mast-scripted"}), extra);
    let cases: Vec<(String, Value, Vec<&str>)> = vec![
        (
            "/v1/agents".into(),
            json!({"name": "a", "model": 5}),
            vec!["`model` must be a model id string or an object with `id`"],
        ),
        (
            "/v1/agents".into(),
            json!({"name": "a", "model": {"effort": "low"}}),
            vec!["`model.id` is required"],
        ),
        (
            "/v1/agents".into(),
            json!({"name": "a", "model": {"id": "mast-scripted", "effort": 3}}),
            vec!["`model.effort`", "low", "max"],
        ),
        (
            "/v1/agents".into(),
            json!({"name": 5, "model": "mast-scripted"}),
            vec!["`name` must be a string"],
        ),
        (
            "/v1/agents".into(),
            json!({"model": "mast-scripted"}),
            vec!["`name` is required"],
        ),
        (
            "/v1/agents".into(),
            a(json!({"tools": "bash"})),
            vec!["`tools` must be a list"],
        ),
        (
            "/v1/agents".into(),
            a(
                json!({"tools": [{"type": "agent_toolset_20260401", "default_config": {"permission_policy": "always_ask"}}]}),
            ),
            vec!["`tools[0].default_config.permission_policy` must be an object"],
        ),
        (
            "/v1/agents".into(),
            a(
                json!({"tools": [{"type": "agent_toolset_20260401", "default_config": {"permission_policy": {"type": "sometimes"}}}]}),
            ),
            vec![
                "`tools[0].default_config.permission_policy.type`",
                "always_allow",
            ],
        ),
        (
            "/v1/agents".into(),
            a(json!({"metadata": {"k": 1}})),
            vec!["`metadata.k` must be a string"],
        ),
        (
            "/v1/agents".into(),
            a(json!({"execution_identity": "service_account"})),
            vec!["`execution_identity` must be an object"],
        ),
        (
            format!("/v1/agents/{aid}"),
            json!({"version": "one"}),
            vec!["`version` must be an integer"],
        ),
        (
            "/v1/environments".into(),
            json!({"name": "e", "scope": "world"}),
            vec!["`scope` must be one of `organization`, `account`"],
        ),
        (
            "/v1/environments".into(),
            json!({"name": "e", "scope": 5}),
            vec!["`scope` must be `organization` or `account` (got an integer)"],
        ),
        (
            "/v1/environments".into(),
            json!({"name": "e", "config": "cloud"}),
            vec!["`config` must be an object"],
        ),
        (
            "/v1/environments".into(),
            json!({"name": "e", "config": {"type": "clod"}}),
            vec!["`config.type` must be one of `cloud`, `self_hosted`"],
        ),
        (
            "/v1/environments".into(),
            json!({"name": "e", "config": {"type": "cloud", "networking": {"type": "limited", "allowed_hosts": "a.com"}}}),
            vec!["`config.networking.allowed_hosts` must be a list of strings"],
        ),
        (
            "/v1/sessions".into(),
            json!({"agent": aid, "environment_id": 5}),
            vec!["`environment_id` must be a string"],
        ),
        (
            "/v1/sessions".into(),
            json!({"agent": 5, "environment_id": eid}),
            vec!["`agent`"],
        ),
        (
            format!("/v1/sessions/{sid}"),
            json!({"title": ["x"]}),
            vec!["`title` must be a string"],
        ),
        (
            format!("/v1/sessions/{sid}/events"),
            json!({"events": {}}),
            vec!["`events` must be a list"],
        ),
        (
            format!("/v1/sessions/{sid}/events"),
            json!({"events": [{"type": "user.interrupt", "session_thread_id": 3}]}),
            vec!["`events[0].session_thread_id` must be a string"],
        ),
    ];
    for (path, body, words) in cases {
        expect_plain(c, &path, body, &words).await;
    }
    // The same key twice is ambiguous: refused, not last-one-wins.
    let raw = reqwest::Client::new()
        .post(format!("{}/v1/agents", s.url))
        .header("content-type", "application/json")
        .body(r#"{"name": "a", "model": "mast-scripted", "tools": [{"type": "custom", "name": "x", "name": "y", "description": "d", "input_schema": {"type": "object"}}]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 400);
    let body: Value = raw.json().await.unwrap();
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("`tools[0].name`") && msg.contains("more than once"),
        "{msg}"
    );
    assert_eq!(
        body["error"]["details"],
        json!({"error_code": "duplicate_field", "field": "tools[0].name"})
    );
    // Errors without a code carry no `details` at all.
    let r = c
        .post("/v1/agents", json!({"name": "", "model": "mast-scripted"}))
        .await;
    assert!(r.body["error"].get("details").is_none(), "{}", r.body);
    r.err(400);
}

/// Asserts a 400 `invalid_request_error` with `error_code` `code`.
async fn expect_archived(r: crate::support::http::Resp, code: &str, what: &str) {
    let details = r.body["error"]["details"].clone();
    let kind = r.body["error"]["type"].clone();
    let msg = r.err(400);
    assert_eq!(kind, "invalid_request_error", "{what}");
    assert_eq!(details, json!({"error_code": code}), "{what}: {msg}");
    assert!(msg.contains("archived"), "{what}: {msg}");
}

async fn archived_means_400_everywhere(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let agent = c.agent(json!([])).await;
    let aid = agent["id"].as_str().unwrap().to_string();
    let env = c.environment().await;
    let eid = env["id"].as_str().unwrap().to_string();
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    let primary = c.get(&format!("/v1/sessions/{sid}/threads")).await.ok()["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let workers = c
        .post(
            "/v1/environments",
            json!({"name": "archived-workers", "config": {"type": "self_hosted"}}),
        )
        .await
        .ok();
    let wid = workers["id"].as_str().unwrap().to_string();

    c.post(&format!("/v1/sessions/{sid}/archive"), json!({}))
        .await
        .ok();
    expect_archived(
        c.post(&format!("/v1/sessions/{sid}"), json!({"title": "x"}))
            .await,
        "session_archived",
        "update an archived session",
    )
    .await;
    expect_archived(
        c.post(
            &format!("/v1/sessions/{sid}/events"),
            json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": "x"}]}]}),
        )
        .await,
        "session_archived",
        "send to an archived session",
    )
    .await;
    expect_archived(
        c.post(
            &format!("/v1/sessions/{sid}/threads/{primary}/archive"),
            json!({}),
        )
        .await,
        "session_archived",
        "archive a thread of an archived session",
    )
    .await;

    c.post(&format!("/v1/agents/{aid}/archive"), json!({}))
        .await
        .ok();
    expect_archived(
        c.post(&format!("/v1/agents/{aid}"), json!({"name": "x"}))
            .await,
        "agent_archived",
        "update an archived agent",
    )
    .await;
    expect_archived(
        c.post("/v1/sessions", json!({"agent": aid, "environment_id": eid}))
            .await,
        "agent_archived",
        "start a session of an archived agent",
    )
    .await;
    expect_archived(
        c.post(
            "/v1/agents",
            json!({"name": "lead", "model": "mast-scripted", "multiagent": {"type": "coordinator", "agents": [aid]}}),
        )
        .await,
        "agent_archived",
        "put an archived agent on a roster",
    )
    .await;

    let live = c.agent(json!([])).await;
    for id in [&eid, &wid] {
        c.post(&format!("/v1/environments/{id}/archive"), json!({}))
            .await
            .ok();
    }
    expect_archived(
        c.post(&format!("/v1/environments/{eid}"), json!({"name": "x"}))
            .await,
        "environment_archived",
        "update an archived environment",
    )
    .await;
    expect_archived(
        c.post(
            "/v1/sessions",
            json!({"agent": live["id"], "environment_id": eid}),
        )
        .await,
        "environment_archived",
        "start a session in an archived environment",
    )
    .await;
    expect_archived(
        c.post(&format!("/v1/environments/{wid}/keys"), json!({}))
            .await,
        "environment_archived",
        "mint a key for an archived environment",
    )
    .await;
}

async fn action_endpoints_take_no_body(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let agent = c.agent(json!([])).await;
    let aid = agent["id"].as_str().unwrap();
    let r = c
        .post(
            &format!("/v1/agents/{aid}/archive"),
            json!({"reason": "done"}),
        )
        .await;
    let details = r.body["error"]["details"].clone();
    let msg = r.err(400);
    assert!(msg.contains("`reason`") && msg.contains("no body"), "{msg}");
    assert_eq!(
        details,
        json!({"error_code": "unknown_field", "field": "reason"})
    );
    assert_eq!(
        c.get(&format!("/v1/agents/{aid}")).await.ok()["archived_at"],
        Value::Null,
        "not archived"
    );
    // `{}` and an empty body are what the SDKs send.
    c.post(&format!("/v1/agents/{aid}/archive"), json!({}))
        .await
        .ok();
}
