//! `throughput`: N sessions doing plain turns concurrently; turns/s and events/s, and the
//! events/s as a share of the store's floor measured just before.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::api::{Agent, Api, row, until_idle};

/// Runs the scenario; returns the events/s.
pub async fn run(apis: &[Api], sessions: usize, seconds: u64) -> f64 {
    let (agent, env) = apis[0].setup(Agent::Plain).await;
    let turns = Arc::new(AtomicU64::new(0));
    let events = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for i in 0..sessions {
        let (api, watch, agent, env, turns, events) = (
            apis[i % apis.len()].clone(),
            apis[(i + 1) % apis.len()].clone(),
            agent.clone(),
            env.clone(),
            turns.clone(),
            events.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let sid = api.session(&agent, &env).await;
            let mut rx = watch.stream(&sid).await;
            let mut n = 0;
            while Instant::now() < deadline {
                api.say(&sid, "hello").await;
                until_idle(&mut rx, &mut n).await;
                turns.fetch_add(1, Ordering::Relaxed);
            }
            events.fetch_add(n, Ordering::Relaxed);
        }));
    }
    let started = Instant::now();
    for t in tasks {
        t.await.unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    let (t, e) = (
        turns.load(Ordering::Relaxed) as f64,
        events.load(Ordering::Relaxed) as f64,
    );
    row(
        &format!("throughput: {sessions} concurrent sessions, {seconds} s"),
        format!("{:.0} turns/s, {:.0} events/s", t / secs, e / secs),
        "—",
    );
    e / secs
}

/// Prints the floor and Mast's events/s as a share of it.
/// `store` says how the floor was measured (connections, SQLite's `synchronous`).
pub fn share(backend: &str, floor: f64, store: &str, events: f64) {
    row(
        &format!("store floor: single-row JSON inserts, one commit each, {store}"),
        format!("{floor:.0} inserts/s"),
        "(floor)",
    );
    let target = if backend == "postgres" {
        "≥ 30 %"
    } else {
        "—"
    };
    row(
        "throughput events/s as a share of the floor",
        format!("{:.1} %", 100.0 * events / floor),
        target,
    );
}
