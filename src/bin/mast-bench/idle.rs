//! `idle`: server RSS with K sessions each idle on `requires_action` (a custom tool call
//! awaiting its result).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::api::{Agent, Api, row};
use crate::server::Server;

/// Runs the scenario and prints its row.
pub async fn run(api: &Api, server: &Server, count: usize) {
    let (agent, env) = api.setup(Agent::Plain).await;
    let before = server.rss_mb();
    let made = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (api, agent, env, made) = (api.clone(), agent.clone(), env.clone(), made.clone());
        tasks.push(tokio::spawn(async move {
            while made.fetch_add(1, Ordering::Relaxed) < count as u64 {
                let sid = api.session(&agent, &env).await;
                api.say(&sid, "call get_weather {}").await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    wait_until_none_active(api).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    row(
        &format!("idle: server RSS with {count} sessions idle on requires_action"),
        format!("{:.1} MB (empty server: {before:.1} MB)", server.rss_mb()),
        "< 100 MB",
    );
}

/// Waits until no session is running or rescheduling.
pub async fn wait_until_none_active(api: &Api) {
    loop {
        let r: Value = api
            .request(
                reqwest::Method::GET,
                "/v1/sessions?statuses%5B%5D=running&statuses%5B%5D=rescheduling&limit=1",
            )
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if r["data"].as_array().is_some_and(|a| a.is_empty()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
