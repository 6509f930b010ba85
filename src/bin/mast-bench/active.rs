//! `active`: N sessions running at once on a slow model (the scripted model's `sleep`), all
//! started together. Reports the server's peak RSS while they run and the delay of their
//! events from `processed_at` to receipt, on the streams of a sample of them (one stream per
//! session for all N would measure the client's 10,000 connections, not the running work).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::api::{Agent, Api, Events, pct, row, wall_us};
use crate::idle::wait_until_none_active;
use crate::server::Server;

/// Runs the scenario and prints its rows.
pub async fn run(api: &Api, server: &Server, count: usize, watched: usize, sleep_ms: u64) {
    let (agent, env) = api.setup(Agent::Plain).await;
    let before = server.rss_mb();
    // Sessions are made first, so the turns start as close together as posting allows.
    let sids = Arc::new(tokio::sync::Mutex::new(Vec::with_capacity(count)));
    let made = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (api, agent, env, made, sids) = (
            api.clone(),
            agent.clone(),
            env.clone(),
            made.clone(),
            sids.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while made.fetch_add(1, Ordering::Relaxed) < count as u64 {
                let sid = api.session(&agent, &env).await;
                sids.lock().await.push(sid);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let sids = Arc::new(std::mem::take(&mut *sids.lock().await));
    let step = (count / watched.max(1)).max(1);
    let mut streams: Vec<Events> = Vec::new();
    for sid in sids.iter().step_by(step).take(watched) {
        streams.push(api.stream(sid).await);
    }
    let script = format!("sleep {sleep_ms}\nsay done");
    let posted = Arc::new(AtomicU64::new(0));
    let started = std::time::Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (api, sids, posted, script) =
            (api.clone(), sids.clone(), posted.clone(), script.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = posted.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(sid) = sids.get(i) else { return };
                api.say(sid, &script).await;
            }
        }));
    }
    // Peak RSS while the turns run.
    let mut peak = server.rss_mb();
    let sampler = async {
        loop {
            peak = peak.max(server.rss_mb());
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    let readers = async {
        let mut delays = Vec::new();
        for rx in streams.iter_mut() {
            loop {
                let (arrived, v) = tokio::time::timeout(Duration::from_secs(600), rx.recv())
                    .await
                    .expect("event")
                    .expect("open");
                if let Some(t) = v["processed_at"]
                    .as_str()
                    .and_then(mast::domain::time::parse)
                {
                    // Streams are drained one after another: the arrival is the time the
                    // stream's reader task stamped, not the time it is drained here.
                    let arrived_us = wall_us() - arrived.elapsed().as_micros() as i64;
                    delays.push((arrived_us - t) as f64 / 1000.0);
                }
                if v["type"] == "session.status_idle" {
                    break;
                }
            }
        }
        delays
    };
    let posting = async {
        for t in tasks {
            t.await.unwrap();
        }
        started.elapsed()
    };
    let (mut delays, posted_in) = tokio::select! {
        _ = sampler => unreachable!(),
        r = async { tokio::join!(readers, posting) } => r,
    };
    wait_until_none_active(api).await;
    let all_in = started.elapsed();
    row(
        &format!("active: {count} sessions running at once (`sleep {sleep_ms}`), server peak RSS"),
        format!(
            "{peak:.1} MB (before: {before:.1} MB; all posted in {:.1} s, all idle after {:.1} s)",
            posted_in.as_secs_f64(),
            all_in.as_secs_f64()
        ),
        "≤ 1 GB",
    );
    row(
        &format!(
            "active: delay from `processed_at` to receipt ({} streams)",
            streams.len()
        ),
        format!(
            "p50 {:.1} ms, p99 {:.1} ms ({} deliveries)",
            pct(&mut delays, 0.5),
            pct(&mut delays, 0.99),
            delays.len()
        ),
        "p99 ≤ 250 ms",
    );
}
