//! `latency`: one session at a time, `user.message` posted → `session.status_idle` seen on
//! SSE, for plain turns and for custom-tool round trips, with the server's CPU time per turn
//! (read from `/proc/<pid>/stat` around each series).

use crate::api::{Agent, Api, pct, row};
use crate::server::Server;

/// Latency of turns in conversations of `per_session` turns each (a fresh session after that),
/// so the figure reflects ordinary conversations rather than one ever-growing history.
pub async fn run(api: &Api, server: &Server, kind: Agent, turns: usize, per_session: usize) {
    let (agent, env) = api.setup(kind).await;
    let label = match kind {
        Agent::Plain => "latency",
        Agent::Realistic => "realistic agent (20 KB system prompt, 10 tools)",
    };
    let mut n = 0;
    let (mut plain, mut tool) = (Vec::new(), Vec::new());
    let (mut plain_cpu, mut tool_cpu) = (0.0, 0.0);
    let mut sid = String::new();
    let mut rx = None;
    for i in 0..turns + 20 {
        if i % per_session == 0 {
            sid = api.session(&agent, &env).await;
            rx = Some(api.stream(&sid).await);
        }
        let rx = rx.as_mut().unwrap();
        let cpu = server.cpu_ms();
        let ms = api.plain_turn(&sid, rx, &mut n).await;
        if i >= 20 {
            plain.push(ms);
            plain_cpu += server.cpu_ms() - cpu;
        }
    }
    for i in 0..turns + 20 {
        if i % per_session == 0 {
            sid = api.session(&agent, &env).await;
            rx = Some(api.stream(&sid).await);
        }
        let rx = rx.as_mut().unwrap();
        let cpu = server.cpu_ms();
        let ms = api.tool_round_trip(&sid, rx, &mut n).await;
        if i >= 20 {
            tool.push(ms);
            tool_cpu += server.cpu_ms() - cpu;
        }
    }
    let target = if server.backend == "postgres" {
        "p50 ≤ 2.5 ms"
    } else {
        "p50 ≤ 1.5 ms"
    };
    row(
        &format!("{label}: plain turn (message posted → idle on SSE), {per_session}-turn sessions"),
        format!(
            "p50 {:.2} ms, p99 {:.2} ms ({turns} turns)",
            pct(&mut plain, 0.5),
            pct(&mut plain, 0.99)
        ),
        target,
    );
    row(
        &format!(
            "{label}: custom-tool round trip (message → requires_action → result → end_turn), {per_session}-round-trip sessions"
        ),
        format!(
            "p50 {:.2} ms, p99 {:.2} ms ({turns} round trips)",
            pct(&mut tool, 0.5),
            pct(&mut tool, 0.99)
        ),
        "—",
    );
    row(
        &format!("{label}: server CPU per plain turn"),
        format!("{:.2} ms", plain_cpu / turns as f64),
        "—",
    );
    row(
        &format!("{label}: server CPU per custom-tool round trip"),
        format!("{:.2} ms", tool_cpu / turns as f64),
        "≤ 1 ms",
    );
}
