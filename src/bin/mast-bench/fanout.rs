//! `fanout`: S subscribers on one session; delay from each event's `processed_at` (set when
//! it is committed) to its arrival at each subscriber.

use std::time::Duration;

use crate::api::{Agent, Api, pct, row, wall_us};

/// Runs the scenario and prints its row.
pub async fn run(api: &Api, subscribers: usize) {
    let (agent, env) = api.setup(Agent::Plain).await;
    let sid = api.session(&agent, &env).await;
    let mut streams = Vec::new();
    for _ in 0..subscribers {
        streams.push(api.stream(&sid).await);
    }
    let mut delays = Vec::new();
    for _ in 0..10 {
        api.say(&sid, "hello").await;
        for rx in streams.iter_mut() {
            loop {
                let (_, v) = tokio::time::timeout(Duration::from_secs(60), rx.recv())
                    .await
                    .expect("event")
                    .expect("open");
                if let Some(t) = v["processed_at"]
                    .as_str()
                    .and_then(mast::domain::time::parse)
                {
                    delays.push((wall_us() - t) as f64 / 1000.0);
                }
                if v["type"] == "session.status_idle" {
                    break;
                }
            }
        }
    }
    // Arrival is stamped when this reader drains the channel, so these are upper bounds.
    row(
        &format!(
            "fan-out: {subscribers} subscribers on one session, delay from `processed_at` to receipt"
        ),
        format!(
            "p50 {:.1} ms, p99 {:.1} ms ({} deliveries)",
            pct(&mut delays, 0.5),
            pct(&mut delays, 0.99),
            delays.len()
        ),
        "p99 < 100 ms",
    );
}
