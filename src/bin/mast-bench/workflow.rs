//! `workflow` (run alone, on a server of its own): one run of N agents
//! (a `map` of N items, at most 64 working at once) on the scripted model — its wall time
//! from the start to `workflow_run.status_ended`, and the server's CPU and RSS growth per
//! agent — then K sessions each left idle with an open run paused by an interrupt: their
//! RSS, and the server's CPU while they sit (an idle session costs nothing, run or not).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::api::{Api, Events, row};
use crate::idle::wait_until_none_active;
use crate::server::Server;

/// An agent with workflows enabled, and an environment; their ids.
async fn setup(api: &Api) -> (String, String) {
    let agent = api
        .post(
            "/v1/agents",
            json!({"name": "bench-lead", "model": "mast-scripted",
                   "multiagent": {"type": "multiagent_20261001", "subagents": {"type": "disabled"},
                                  "workflows": {"type": "enabled"}}}),
        )
        .await;
    let env = api
        .post(
            "/v1/environments",
            json!({"name": format!("bench-wf-{}", mast::domain::ids::new_secret(6))}),
        )
        .await;
    (
        agent["id"].as_str().unwrap().to_string(),
        env["id"].as_str().unwrap().to_string(),
    )
}

fn start(plan: &Value) -> String {
    format!("call ant__start_workflow_run {plan}\n---\nsay started")
}

/// Reads events until one of `kind` arrives.
async fn until(rx: &mut Events, kind: &str) -> (Instant, Value) {
    loop {
        let (t, v) = tokio::time::timeout(Duration::from_secs(600), rx.recv())
            .await
            .expect("in time")
            .expect("stream open");
        if v["type"] == kind {
            return (t, v);
        }
    }
}

/// Runs the scenario and prints its rows.
pub async fn run(api: &Api, server: &Server, agents: usize, paused: usize) {
    let (agent, env) = setup(api).await;
    let items: Vec<String> = (1..=agents).map(|i| format!("item {i}")).collect();
    let plan = json!({"agents": {"r": {"system": "Read one item."}}, "inputs": {"items": items},
        "phases": [{"name": "All", "steps": [{"map": {"over": "items", "as": "it", "use": "r",
            "prompt": "say {{it}} done", "save": "out", "max_parallel": 64}}]}],
        "result": "{{out.count}}"});
    let sid = api.session(&agent, &env).await;
    let mut rx = api.stream(&sid).await;
    let (rss, cpu) = (server.rss_mb(), server.cpu_ms());
    let t0 = Instant::now();
    api.say(&sid, &start(&plan)).await;
    let (t1, ended) = until(&mut rx, "workflow_run.status_ended").await;
    assert_eq!(ended["result"]["type"], "completed", "{ended}");
    let wall = (t1 - t0).as_secs_f64();
    let (rss_after, cpu_used) = (server.rss_mb(), server.cpu_ms() - cpu);
    row(
        &format!("workflow: one run of {agents} agents (max_parallel 64), start → status_ended"),
        format!(
            "{wall:.2} s; server CPU {:.2} ms per agent; RSS +{:.2} MB ({:.1} KB per agent)",
            cpu_used / agents as f64,
            rss_after - rss,
            (rss_after - rss) * 1024.0 / agents as f64
        ),
        "—",
    );
    wait_until_none_active(api).await;

    // Sessions idle with an open run paused by an interrupt.
    let slow = json!({"agents": {"w": {"system": "Work slowly."}},
        "phases": [{"name": "Slow", "steps": [{"agent": {"use": "w", "prompt": "sleep 600000\nsay done"}}]}]});
    let before = server.rss_mb();
    for _ in 0..paused {
        let sid = api.session(&agent, &env).await;
        let mut rx = api.stream(&sid).await;
        api.say(&sid, &start(&slow)).await;
        until(&mut rx, "session.thread_created").await;
        api.post(
            &format!("/v1/sessions/{sid}/events"),
            json!({"events": [{"type": "user.interrupt"}]}),
        )
        .await;
        until(&mut rx, "session.status_idle").await;
    }
    wait_until_none_active(api).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cpu = server.cpu_ms();
    tokio::time::sleep(Duration::from_secs(10)).await;
    row(
        &format!("workflow: {paused} sessions idle, each with an open run paused by an interrupt"),
        format!(
            "RSS +{:.1} MB ({:.1} KB per session); server CPU over 10 s of idling {:.1} ms",
            server.rss_mb() - before,
            (server.rss_mb() - before) * 1024.0 / paused as f64,
            server.cpu_ms() - cpu
        ),
        "idle costs nothing",
    );
}
