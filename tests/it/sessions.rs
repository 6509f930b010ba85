//! `/v1/sessions`: creation forms, updates, the bidirectional list, archive and delete.

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::http::weather_tool;
use crate::support::{Backend, TestServer};

backend_tests!(
    create_forms_and_snapshots,
    update_rules_and_session_updated,
    list_is_bidirectional_with_filters,
    archive_and_delete_rules
);

async fn create_forms_and_snapshots(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let a = c.agent(json!([weather_tool()])).await;
    let aid = a["id"].as_str().unwrap();
    let env = c.environment().await;
    let sess = c.post("/v1/sessions", json!({"agent": aid, "environment_id": env["id"], "title": "Order #1", "metadata": {"k": "v"}})).await.ok();
    assert!(sess["id"].as_str().unwrap().starts_with("sesn_01"));
    assert_eq!(sess["status"], "idle");
    assert_eq!(sess["title"], "Order #1");
    assert_eq!(sess["agent"]["id"], a["id"]);
    assert_eq!(sess["agent"]["tools"], a["tools"]);
    assert_eq!(sess["agent"]["multiagent"], Value::Null);
    assert!(sess["agent"].get("metadata").is_none());
    assert_eq!(sess["usage"]["input_tokens"], 0);
    assert_eq!(sess["stats"]["active_seconds"], 0.0);
    assert_eq!(sess["resources"], json!([]));
    assert_eq!(sess["vault_ids"], json!([]));
    assert_eq!(sess["outcome_evaluations"], json!([]));
    assert_eq!(
        c.get(&format!("/v1/sessions/{}", sess["id"].as_str().unwrap()))
            .await
            .ok()["id"],
        sess["id"]
    );
    // The session keeps its snapshot when the agent changes later; pinned versions work.
    c.post(&format!("/v1/agents/{aid}"), json!({"system": "v2 system"}))
        .await
        .ok();
    let pinned = c.post("/v1/sessions", json!({"agent": {"type": "agent", "id": aid, "version": 1}, "environment_id": env["id"]})).await.ok();
    assert_eq!(pinned["agent"]["version"], 1);
    assert_eq!(pinned["agent"]["system"], Value::Null);
    let latest = c
        .post(
            "/v1/sessions",
            json!({"agent": {"type": "agent", "id": aid}, "environment_id": env["id"]}),
        )
        .await
        .ok();
    assert_eq!(latest["agent"]["system"], "v2 system");
    assert_eq!(
        c.get(&format!("/v1/sessions/{}", sess["id"].as_str().unwrap()))
            .await
            .ok()["agent"]["system"],
        Value::Null
    );
    // Overrides replace fields for this session only.
    let o = c
        .post("/v1/sessions", json!({"agent": {"type": "agent_with_overrides", "id": aid, "system": "override", "tools": [],
            "model": {"id": "mast-scripted", "effort": "low"}}, "environment_id": env["id"]}))
        .await
        .ok();
    assert_eq!(o["agent"]["system"], "override");
    assert_eq!(o["agent"]["tools"], json!([]));
    assert_eq!(
        o["agent"]["model"]["effort"],
        json!({"type": "high"}),
        "effort comes from the agent"
    );
    let r = c.post("/v1/sessions", json!({"agent": {"type": "agent_with_overrides", "id": aid, "model": null}, "environment_id": env["id"]})).await;
    assert_eq!(
        r.body["error"]["details"]["error_code"],
        "agent_model_required"
    );
    r.err(400);
    // References that do not resolve.
    c.post(
        "/v1/sessions",
        json!({"agent": "agent_nope", "environment_id": env["id"]}),
    )
    .await
    .err(404);
    c.post(
        "/v1/sessions",
        json!({"agent": {"type": "agent", "id": aid, "version": 9}, "environment_id": env["id"]}),
    )
    .await
    .err(404);
    c.post(
        "/v1/sessions",
        json!({"agent": aid, "environment_id": "env_nope"}),
    )
    .await
    .err(404);
    // A vault or a file that does not exist is a 404.
    c.post(
        "/v1/sessions",
        json!({"agent": aid, "environment_id": env["id"], "vault_ids": ["vlt_x"]}),
    )
    .await
    .err(404);
    c.post("/v1/sessions", json!({"agent": aid, "environment_id": env["id"], "resources": [{"type": "file", "file_id": "file_x"}]})).await.err(404);
    c.post(
        "/v1/sessions",
        json!({"agent": aid, "environment_id": env["id"], "metadata": {"k": "v".repeat(600)}}),
    )
    .await
    .err(400);
    let many: Vec<Value> = (0..51)
        .map(|_| json!({"type": "user.message", "content": [{"type": "text", "text": "x"}]}))
        .collect();
    c.post(
        "/v1/sessions",
        json!({"agent": aid, "environment_id": env["id"], "initial_events": many}),
    )
    .await
    .err(400);
    // A repository git cannot be asked for safely is refused; the refusal does not echo the
    // token.
    let r = c
        .post("/v1/sessions", json!({"agent": aid, "environment_id": env["id"],
            "resources": [{"type": "github_repository", "url": "ssh://github.com/o/r.git", "authorization_token": "secret"}]}))
        .await;
    assert!(!r.body.to_string().contains("secret"));
    assert!(r.body.to_string().contains("ssh"));
    r.err(400);
}

async fn update_rules_and_session_updated(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let a = c.agent(json!([weather_tool()])).await;
    let sess = c.session(&a).await;
    let sid = sess["id"].as_str().unwrap();
    let u = c
        .post(
            &format!("/v1/sessions/{sid}"),
            json!({"title": "t", "metadata": {"a": "1"}}),
        )
        .await
        .ok();
    assert_eq!(u["title"], "t");
    assert_eq!(u["metadata"], json!({"a": "1"}));
    let u = c
        .post(
            &format!("/v1/sessions/{sid}"),
            json!({"title": null, "metadata": {"a": null}}),
        )
        .await
        .ok();
    assert_eq!(u["title"], Value::Null);
    assert_eq!(u["metadata"], json!({}));
    let u = c
        .post(
            &format!("/v1/sessions/{sid}"),
            json!({"agent": {"tools": []}}),
        )
        .await
        .ok();
    assert_eq!(u["agent"]["tools"], json!([]));
    assert_eq!(u["agent"]["version"], a["version"], "no new agent version");
    let updates: Vec<Value> = c
        .all_events(sid)
        .await
        .into_iter()
        .filter(|e| e["type"] == "session.updated")
        .collect();
    assert_eq!(updates.len(), 3);
    assert_eq!(updates[0]["title"], "t");
    assert_eq!(updates[2]["agent"]["tools"], json!([]));
    // A no-op update emits nothing.
    c.post(&format!("/v1/sessions/{sid}"), json!({"title": null}))
        .await
        .ok();
    assert_eq!(c.all_events(sid).await.len(), 3);
    // Vaults are create-only: the current list (`[]`) is fine, another is refused.
    c.post(&format!("/v1/sessions/{sid}"), json!({"vault_ids": []}))
        .await
        .ok();
    assert_eq!(c.all_events(sid).await.len(), 3, "and changes nothing");
    c.post(
        &format!("/v1/sessions/{sid}"),
        json!({"vault_ids": ["vlt_x"]}),
    )
    .await
    .err(400);
    let r = c.post(&format!("/v1/sessions/{sid}"), json!({"budget": {"type": "limit", "max_list_cost": {"amount": "100", "currency": "USD"}}})).await;
    assert_eq!(
        r.body["error"]["details"]["error_code"],
        "budget_create_only"
    );
    c.post(&format!("/v1/sessions/{sid}"), json!({"agent": {"tools": [{"type": "custom", "name": "bad name", "description": "d", "input_schema": {"type": "object"}}]}})).await.err(400);
    // Tools cannot change while the session runs.
    c.say(sid, "sleep 1500\nsay slow").await;
    let r = c
        .post(
            &format!("/v1/sessions/{sid}"),
            json!({"agent": {"tools": []}}),
        )
        .await;
    assert!(r.err(409).contains("running"));
}

async fn list_is_bidirectional_with_filters(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let a1 = c.agent(json!([])).await;
    let a2 = c.agent(json!([])).await;
    let mut ids = Vec::new();
    for i in 0..7 {
        let a = if i % 2 == 0 { &a1 } else { &a2 };
        ids.push(c.session(a).await["id"].as_str().unwrap().to_string());
    }
    let p1 = c.get("/v1/sessions?limit=3").await.ok();
    assert_eq!(p1["prev_page"], Value::Null);
    let got: Vec<&str> = p1["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_str().unwrap())
        .collect();
    assert_eq!(got, vec![ids[6].as_str(), ids[5].as_str(), ids[4].as_str()]);
    let p2 = c
        .get(&format!(
            "/v1/sessions?limit=3&page={}",
            p1["next_page"].as_str().unwrap()
        ))
        .await
        .ok();
    let back = c
        .get(&format!(
            "/v1/sessions?limit=3&page={}",
            p2["prev_page"].as_str().unwrap()
        ))
        .await
        .ok();
    let ids_of = |p: &Value| {
        p["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["id"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids_of(&back), ids_of(&p1));
    let p3 = c
        .get(&format!(
            "/v1/sessions?limit=3&page={}",
            p2["next_page"].as_str().unwrap()
        ))
        .await
        .ok();
    assert_eq!(p3["data"].as_array().unwrap().len(), 1);
    assert_eq!(p3["next_page"], Value::Null);
    let asc = c.get("/v1/sessions?limit=2&order=asc").await.ok();
    assert_eq!(asc["data"][0]["id"], ids[0].as_str());
    c.get(&format!(
        "/v1/sessions?order=asc&page={}",
        p1["next_page"].as_str().unwrap()
    ))
    .await
    .err(400);
    let by_agent = c
        .get(&format!(
            "/v1/sessions?agent_id={}",
            a1["id"].as_str().unwrap()
        ))
        .await
        .ok();
    assert_eq!(by_agent["data"].as_array().unwrap().len(), 4);
    let by_version = c
        .get(&format!(
            "/v1/sessions?agent_id={}&agent_version=2",
            a1["id"].as_str().unwrap()
        ))
        .await
        .ok();
    assert_eq!(by_version["data"], json!([]));
    c.get("/v1/sessions?agent_version=1").await.err(400);
    let idle = c
        .get("/v1/sessions?statuses%5B%5D=idle&statuses%5B%5D=running")
        .await
        .ok();
    assert_eq!(idle["data"].as_array().unwrap().len(), 7);
    assert_eq!(
        c.get("/v1/sessions?statuses%5B%5D=terminated").await.ok()["data"],
        json!([])
    );
    c.get("/v1/sessions?statuses%5B%5D=sleeping").await.err(400);
    let t = c.get(&format!("/v1/sessions/{}", ids[3])).await.ok()["created_at"]
        .as_str()
        .unwrap()
        .to_string();
    let enc = crate::agents::urlencode(&t);
    assert_eq!(
        c.get(&format!("/v1/sessions?limit=100&created_at%5Bgt%5D={enc}"))
            .await
            .ok()["data"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        c.get(&format!("/v1/sessions?limit=100&created_at%5Bgte%5D={enc}"))
            .await
            .ok()["data"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    assert_eq!(
        c.get(&format!("/v1/sessions?limit=100&created_at%5Blt%5D={enc}"))
            .await
            .ok()["data"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    c.post(&format!("/v1/sessions/{}/archive", ids[0]), json!({}))
        .await
        .ok();
    assert_eq!(
        c.get("/v1/sessions?limit=100").await.ok()["data"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
    assert_eq!(
        c.get("/v1/sessions?limit=100&include_archived=true")
            .await
            .ok()["data"]
            .as_array()
            .unwrap()
            .len(),
        7
    );
}

async fn archive_and_delete_rules(b: Backend) {
    let s = TestServer::start(b).await;
    let c = &s.client;
    let a = c.agent(json!([])).await;
    let busy = c.session(&a).await;
    let bid = busy["id"].as_str().unwrap();
    c.say(bid, "sleep 3000\nsay done").await;
    assert!(
        c.post(&format!("/v1/sessions/{bid}/archive"), json!({}))
            .await
            .err(409)
            .contains("running")
    );
    c.delete(&format!("/v1/sessions/{bid}")).await.err(409);
    let sess = c.session(&a).await;
    let sid = sess["id"].as_str().unwrap();
    c.say(sid, "hello").await;
    crate::support::eventually(10, "idle", || async {
        (c.get(&format!("/v1/sessions/{sid}")).await.ok()["status"] == "idle").then_some(())
    })
    .await;
    let archived = c
        .post(&format!("/v1/sessions/{sid}/archive"), json!({}))
        .await
        .ok();
    assert!(archived["archived_at"].is_string());
    assert!(c.post(&format!("/v1/sessions/{sid}/events"), json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": "x"}]}]})).await.err(400).contains("archived"));
    // Archived is a 400 everywhere (as for agents and environments), with its own code.
    let r = c
        .post(&format!("/v1/sessions/{sid}"), json!({"title": "x"}))
        .await;
    assert_eq!(r.body["error"]["details"]["error_code"], "session_archived");
    r.err(400);
    let del = c.delete(&format!("/v1/sessions/{sid}")).await.ok();
    assert_eq!(del, json!({"id": sid, "type": "session_deleted"}));
    c.get(&format!("/v1/sessions/{sid}")).await.err(404);
    c.get(&format!("/v1/sessions/{sid}/events")).await.err(404);
    c.delete(&format!("/v1/sessions/{sid}")).await.err(404);
}
