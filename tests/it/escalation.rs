//! Permission escalation through delegation and through `auto`: a delegate the model defines
//! never holds more than its coordinator, and `auto` does not read secrets or wander outside
//! the workspace without asking.

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::sse::Stream;
use crate::support::{Backend, TestServer};
use crate::toolset::{call, results, session, steps, toolset, turn};

backend_tests!(
    inline_delegates_inherit_an_always_ask_policy_by_default,
    inline_delegates_inherit_an_always_ask_policy_when_enabled_explicitly,
    self_as_a_delegate_keeps_the_sessions_policy,
    inline_delegates_get_no_tools_their_coordinator_lacks,
    auto_denies_secrets_and_asks_outside_known_places,
);

const ALWAYS_ASK: &str = "always_ask";

/// A coordinator agent (its name is `coordinator`) and a session of it with its stream open;
/// `agent_tools` are the stored tools, `session_tools` an `agent_with_overrides` replacement.
async fn coordinator(
    s: &TestServer,
    multiagent: Value,
    agent_tools: Value,
    session_tools: Option<Value>,
) -> (String, Stream) {
    let agent = s
        .client
        .post(
            "/v1/agents",
            json!({"name": "coordinator", "model": "mast-scripted", "tools": agent_tools,
                "multiagent": multiagent}),
        )
        .await
        .ok();
    let selection = match session_tools {
        Some(tools) => {
            json!({"type": "agent_with_overrides", "id": agent["id"], "tools": tools})
        }
        None => agent["id"].clone(),
    };
    let env = s.client.environment().await;
    let sid = s
        .client
        .post(
            "/v1/sessions",
            json!({"agent": selection, "environment_id": env["id"]}),
        )
        .await
        .ok()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let st = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        None,
        &[],
    )
    .await;
    (sid, st)
}

/// The inline agent of the reported attack: the built-in toolset with its defaults.
fn helper() -> Value {
    json!({"name": "helper", "tools": [{"type": "agent_toolset_20260401"}]})
}

fn send(agent: Value, task: &str) -> String {
    call("send_to_agent", json!({"agent": agent, "message": task}))
}

/// The delegate's task: a bash call that leaves a trace if it runs.
const TASK: &str = "call bash {\"command\": \"touch pwned\"}\n---\nsay delegate finished";

fn tool_uses(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "agent.tool_use")
        .cloned()
        .collect()
}

/// The delegate thread's own events, and the thread.
async fn thread_of(s: &TestServer, sid: &str, agent_name: &str) -> (Value, Vec<Value>) {
    let threads = s
        .client
        .get(&format!("/v1/sessions/{sid}/threads"))
        .await
        .ok();
    let thread = threads["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["parent_thread_id"].is_string() && t["agent"]["name"] == agent_name)
        .unwrap_or_else(|| panic!("no `{agent_name}` thread: {threads:#}"))
        .clone();
    let events = s
        .client
        .get(&format!(
            "/v1/sessions/{sid}/threads/{}/events?limit=1000",
            thread["id"].as_str().unwrap()
        ))
        .await
        .ok()["data"]
        .as_array()
        .unwrap()
        .clone();
    (thread, events)
}

fn pwned(s: &TestServer, sid: &str) -> bool {
    s.data_dir
        .join("workspaces")
        .join(sid)
        .join("pwned")
        .exists()
}

/// The reported attack: the coordinator's own bash is asked and denied, then an inline agent
/// with the default toolset tries the same. Its bash must be asked too, and never run.
async fn the_reported_attack(s: &TestServer, multiagent: Value) {
    let (sid, mut st) = coordinator(s, multiagent, toolset(json!([]), ALWAYS_ASK), None).await;
    let script = format!(
        "{}\n---\n{}\n---\nsay {{{{result}}}}",
        call("bash", json!({"command": "touch pwned"})),
        send(helper(), TASK)
    );
    s.client.say(&sid, &script).await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "requires_action");
    let own = idle["stop_reason"]["event_ids"][0].clone();
    s.client
        .send_events(
            &sid,
            json!([{"type": "user.tool_confirmation", "tool_use_id": own, "result": "deny"}]),
        )
        .await;
    let idle = st.until_idle(60).await;
    let (thread, events) = thread_of(s, &sid, "helper").await;
    let uses = tool_uses(&events);
    assert_eq!(uses.len(), 1, "{events:#?}");
    assert_eq!(
        (&uses[0]["evaluated_permission"], &uses[0]["evaluation"]),
        (&json!("ask"), &json!({"type": "always_ask"})),
        "the delegate's bash must be asked like its coordinator's"
    );
    assert_eq!(idle["stop_reason"]["type"], "requires_action", "{idle}");
    assert_eq!(idle["stop_reason"]["event_ids"], json!([uses[0]["id"]]));
    assert!(!pwned(s, &sid), "the delegate's bash ran before an answer");
    // The thread's agent shows the policy enforced, not the one the model asked for.
    let configs = thread["agent"]["tools"][0]["configs"].as_array().unwrap();
    let bash = configs.iter().find(|c| c["name"] == "bash").unwrap();
    assert_eq!(bash["permission_policy"], json!({"type": "always_ask"}));
    s.client
        .send_events(
            &sid,
            json!([{"type": "user.tool_confirmation", "tool_use_id": uses[0]["id"], "result": "deny"}]),
        )
        .await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    assert!(!pwned(s, &sid));
}

async fn inline_delegates_inherit_an_always_ask_policy_by_default(b: Backend) {
    let s = TestServer::start(b).await;
    the_reported_attack(&s, json!({"type": "multiagent_20261001"})).await;
}

async fn inline_delegates_inherit_an_always_ask_policy_when_enabled_explicitly(b: Backend) {
    let s = TestServer::start(b).await;
    the_reported_attack(
        &s,
        json!({"type": "multiagent_20261001", "subagents": {"type": "enabled",
            "inline_agents": {"type": "enabled"}}}),
    )
    .await;
}

/// `self` runs the coordinator's definition as the session has it — overrides included — so
/// it is no way around a policy the session set; and an inline agent cannot reach it.
async fn self_as_a_delegate_keeps_the_sessions_policy(b: Backend) {
    let s = TestServer::start(b).await;
    let multiagent = json!({"type": "multiagent_20261001", "subagents": {"type": "enabled",
        "predefined_agents": [{"type": "self"}]}});
    // The agent as stored allows everything; this session asks for every call.
    let (sid, mut st) = coordinator(
        &s,
        multiagent,
        toolset(json!([]), "always_allow"),
        Some(toolset(json!([]), ALWAYS_ASK)),
    )
    .await;
    let script = format!(
        "{}\n---\nsay {{{{result}}}}",
        send(json!("coordinator"), TASK)
    );
    s.client.say(&sid, &script).await;
    let idle = st.until_idle(60).await;
    let (thread, events) = thread_of(&s, &sid, "coordinator").await;
    let uses = tool_uses(&events);
    assert_eq!(uses.len(), 1, "{events:#?}");
    assert_eq!(uses[0]["evaluated_permission"], "ask", "{:#}", uses[0]);
    assert_eq!(idle["stop_reason"]["type"], "requires_action", "{idle}");
    assert!(!pwned(&s, &sid));
    assert!(thread["agent"].get("multiagent").is_none());
    assert_eq!(
        thread["agent"]["tools"][0]["default_config"]["permission_policy"],
        json!({"type": "always_ask"}),
        "the thread shows the session's tools, not the stored ones"
    );
    s.client
        .send_events(
            &sid,
            json!([{"type": "user.tool_confirmation", "tool_use_id": uses[0]["id"], "result": "deny"}]),
        )
        .await;
    assert_eq!(st.until_idle(60).await["stop_reason"]["type"], "end_turn");
    // An inline agent has no delegation tools of its own, so it cannot reach `self` (or
    // anyone) to widen what it was given.
    st.seen.clear();
    let nested = format!(
        "{}\n---\nsay {{{{result}}}}",
        send(json!("coordinator"), TASK)
    );
    let script = format!("{}\n---\nsay {{{{result}}}}", send(helper(), &nested));
    s.client.say(&sid, &script).await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let (_, events) = thread_of(&s, &sid, "helper").await;
    let refused = results(&events);
    assert!(
        refused[0].1 && refused[0].0.contains("no tool named `send_to_agent`"),
        "{refused:?}"
    );
    assert!(!pwned(&s, &sid));
}

/// Tools the coordinator does not have are not the model's to hand out: no built-in toolset,
/// no custom tool it lacks, nothing enabled that it disabled, and domain lists only narrow.
async fn inline_delegates_get_no_tools_their_coordinator_lacks(b: Backend) {
    let s = TestServer::start(b).await;
    let weather = crate::support::http::weather_tool();
    let (sid, mut st) = coordinator(
        &s,
        json!({"type": "multiagent_20261001"}),
        json!([weather]),
        None,
    )
    .await;
    let deploy = json!({"type": "custom", "name": "deploy", "description": "Deploys.",
        "input_schema": {"type": "object"}});
    let agent =
        json!({"name": "helper", "tools": [{"type": "agent_toolset_20260401"}, weather, deploy]});
    let script = format!("{}\n---\nsay {{{{result}}}}", send(agent, TASK));
    s.client.say(&sid, &script).await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let (thread, events) = thread_of(&s, &sid, "helper").await;
    let names: Vec<&str> = thread["agent"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap_or(t["type"].as_str().unwrap()))
        .collect();
    assert_eq!(names, ["get_weather"], "{thread:#}");
    let uses = tool_uses(&events);
    assert_eq!(uses[0]["evaluated_permission"], "deny");
    assert!(
        results(&events)[0].0.contains("no tool named `bash`"),
        "{events:#?}"
    );
    assert!(!pwned(&s, &sid));

    // A coordinator that disabled bash and limited web_fetch to one domain.
    let configs = json!([
        {"name": "bash", "enabled": false},
        {"name": "web_fetch", "allowed_domains": ["docs.rs"]},
        {"name": "read", "permission_policy": {"type": "auto"}},
    ]);
    let (sid, mut st) = coordinator(
        &s,
        json!({"type": "multiagent_20261001"}),
        toolset(configs, "always_allow"),
        None,
    )
    .await;
    let agent = json!({"name": "fetcher", "tools": [{"type": "agent_toolset_20260401",
        "default_config": {"permission_policy": {"type": "always_allow"}},
        "configs": [{"name": "bash", "enabled": true},
                    {"name": "web_fetch", "allowed_domains": ["example.com", "api.docs.rs"]}]}]});
    let script = format!("{}\n---\nsay {{{{result}}}}", send(agent, TASK));
    s.client.say(&sid, &script).await;
    let idle = st.until_idle(60).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let (thread, events) = thread_of(&s, &sid, "fetcher").await;
    let configs = thread["agent"]["tools"][0]["configs"].as_array().unwrap();
    let config = |name: &str| configs.iter().find(|c| c["name"] == name).unwrap().clone();
    assert_eq!(config("bash")["enabled"], false);
    assert_eq!(
        config("web_fetch")["allowed_domains"],
        json!(["api.docs.rs"])
    );
    assert_eq!(config("read")["permission_policy"], json!({"type": "auto"}));
    let uses = tool_uses(&events);
    assert_eq!(uses[0]["evaluated_permission"], "deny");
    assert!(results(&events)[0].0.contains("disabled"), "{events:#?}");
    assert!(!pwned(&s, &sid));
}

/// `auto` denies the well-known secrets wherever they are and asks before reading or listing
/// anything outside the workspace, /tmp and the read-only system directories.
async fn auto_denies_secrets_and_asks_outside_known_places(b: Backend) {
    let s = TestServer::start(b).await;
    let mut sess = session(&s, toolset(json!([]), "auto"), None).await;
    let evaluation = |verdict: &str| match verdict {
        "allow" => json!({"type": "auto", "evaluated_permission": {"type": "allow"}}),
        "ask" => {
            json!({"type": "auto", "evaluated_permission": {"type": "ask", "reason_code": "indeterminate"}})
        }
        _ => {
            json!({"type": "auto", "evaluated_permission": {"type": "deny", "reason_code": "high_risk"}})
        }
    };
    let cases = [
        (
            "bash",
            json!({"command": "echo SECRET=1 > .env && ls /workspace"}),
            "allow",
        ),
        ("bash", json!({"command": "cat .env"}), "allow"),
        ("read", json!({"file_path": "/workspace/.env"}), "allow"),
        (
            "bash",
            json!({"command": "head -c 16 /usr/bin/env | wc -c"}),
            "allow",
        ),
        ("bash", json!({"command": "cat /etc/os-release"}), "allow"),
        (
            "bash",
            json!({"command": "cat /etc/ssh/ssh_host_ed25519_key"}),
            "deny",
        ),
        ("bash", json!({"command": "cat ~/.pgpass"}), "deny"),
        (
            "bash",
            json!({"command": "ls /var/run/secrets/kubernetes.io"}),
            "deny",
        ),
        (
            "bash",
            json!({"command": "cat ~/.config/gcloud/credentials.db"}),
            "deny",
        ),
        ("bash", json!({"command": "cat /srv/app/.env"}), "deny"),
        ("read", json!({"file_path": "/root/.npmrc"}), "deny"),
        ("bash", json!({"command": "ls /home"}), "ask"),
        ("bash", json!({"command": "cat ~/.bash_history"}), "ask"),
        ("bash", json!({"command": "grep -r password /srv"}), "ask"),
        ("read", json!({"file_path": "/proc/self/status"}), "ask"),
        ("glob", json!({"pattern": "*", "path": "/home"}), "ask"),
        (
            "grep",
            json!({"pattern": "token", "path": "/var/lib"}),
            "ask",
        ),
    ];
    for (tool, input, verdict) in cases {
        sess.st.seen.clear();
        let idle = turn(&s, &mut sess, &steps(&[call(tool, input.clone())])).await;
        let uses = tool_uses(&sess.st.seen);
        assert_eq!(
            uses[0]["evaluation"],
            evaluation(verdict),
            "{tool} {input} should be {verdict}"
        );
        if verdict == "ask" {
            assert_eq!(idle["stop_reason"]["type"], "requires_action");
            s.client
                .send_events(&sess.id, json!([{"type": "user.tool_confirmation", "tool_use_id": uses[0]["id"], "result": "deny"}]))
                .await;
            sess.st.until_idle(30).await;
        } else {
            assert_eq!(idle["stop_reason"]["type"], "end_turn", "{tool} {input}");
        }
    }
}
