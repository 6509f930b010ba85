//! `compaction` (run alone: its server gives the scripted model a small context window):
//! what a turn that compacts the context costs beside one that does not, in the same
//! session. Each turn sends about 1.8 KB, which the scripted model echoes, so a compaction
//! comes every few turns; the scripted summary is instant, so the figures are Mast's own
//! cost (choosing the cut, rendering the history, the extra span and boundary commits, the
//! fold), not a provider's summarisation latency.

use std::time::{Duration, Instant};

use crate::api::{Agent, Api, Events, pct, row};
use crate::server::Server;

/// The scripted model's context window on the scenario's server, in tokens.
pub const WINDOW: u64 = 4_000;

/// The server environment the scenario needs.
pub fn server_env() -> Vec<(&'static str, String)> {
    vec![(
        "MAST_CONTEXT_WINDOWS",
        format!("{{\"mast-scripted\": {WINDOW}}}"),
    )]
}

/// Reads events until the session idles: when it idled, and whether the turn compacted.
async fn until_idle(rx: &mut Events) -> (Instant, bool) {
    let mut compacted = false;
    loop {
        let (t, v) = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("idle in time")
            .expect("stream open");
        compacted |= v["type"] == "agent.thread_context_compacted";
        if v["type"] == "session.status_idle" {
            assert_eq!(v["stop_reason"]["type"], "end_turn", "{v}");
            return (t, compacted);
        }
    }
}

/// Runs `turns` turns (after 10 warm-up turns) in one session and prints the rows.
pub async fn run(api: &Api, server: &Server, turns: usize) {
    let (agent, env) = api.setup(Agent::Plain).await;
    let sid = api.session(&agent, &env).await;
    let mut rx = api.stream(&sid).await;
    let filler = "lorem ipsum dolor sit amet ".repeat(68);
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let (mut with_cpu, mut without_cpu) = (0.0, 0.0);
    for i in 0..turns + 10 {
        let cpu = server.cpu_ms();
        let t0 = Instant::now();
        api.say(&sid, &format!("turn {i}: {filler}")).await;
        let (t1, compacted) = until_idle(&mut rx).await;
        let (ms, cpu) = ((t1 - t0).as_secs_f64() * 1000.0, server.cpu_ms() - cpu);
        if i < 10 {
            continue;
        }
        if compacted {
            with.push(ms);
            with_cpu += cpu;
        } else {
            without.push(ms);
            without_cpu += cpu;
        }
    }
    assert!(!with.is_empty(), "no turn compacted");
    let (nw, nwo) = (with.len(), without.len());
    row(
        &format!(
            "compaction: turn that compacts ({WINDOW}-token window, ~1.8 KB turns) vs one that does not, one session"
        ),
        format!(
            "p50 {:.2} ms vs {:.2} ms, p99 {:.2} ms vs {:.2} ms ({nw} and {nwo} turns)",
            pct(&mut with, 0.5),
            pct(&mut without, 0.5),
            pct(&mut with, 0.99),
            pct(&mut without, 0.99)
        ),
        "—",
    );
    row(
        "compaction: server CPU per turn that compacts vs one that does not",
        format!(
            "{:.2} ms vs {:.2} ms",
            with_cpu / nw as f64,
            without_cpu / nwo.max(1) as f64
        ),
        "—",
    );
}
