//! `latency`: one session at a time, `user.message` posted → `session.status_idle` seen on
//! SSE, for plain turns and for custom-tool round trips, with the server's CPU time per turn
//! (read from `/proc/<pid>/stat` around each series), each beside the same series run
//! against the round trip's floor ([`crate::floor_server`]).

use crate::api::{Agent, Api, pct, row};
use crate::server::Server;

/// One server's figures over a latency series.
pub struct Figures {
    plain: Vec<f64>,
    tool: Vec<f64>,
    /// Server CPU per plain turn, ms.
    plain_cpu: f64,
    /// Server CPU per custom-tool round trip, ms.
    tool_cpu: f64,
    /// Of `tool_cpu`, the time spent in the kernel (system calls, loopback TCP, wake-ups).
    tool_system: f64,
}

/// Runs `turns` plain turns then `turns` custom-tool round trips (each after 20 warm-up
/// ones) in conversations of `per_session` turns each (a fresh session after that), so the
/// figure reflects ordinary conversations rather than one ever-growing history.
pub async fn measure(
    api: &Api,
    server: &Server,
    kind: Agent,
    turns: usize,
    per_session: usize,
) -> Figures {
    let (agent, env) = api.setup(kind).await;
    let mut n = 0;
    let (mut plain, mut tool) = (Vec::new(), Vec::new());
    let (mut plain_cpu, mut tool_cpu, mut tool_system) = (0.0, 0.0, 0.0);
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
        let (user, system) = server.cpu_split_ms();
        let ms = api.tool_round_trip(&sid, rx, &mut n).await;
        if i >= 20 {
            tool.push(ms);
            let (user_after, system_after) = server.cpu_split_ms();
            tool_cpu += user_after + system_after - user - system;
            tool_system += system_after - system;
        }
    }
    Figures {
        plain,
        tool,
        plain_cpu: plain_cpu / turns as f64,
        tool_cpu: tool_cpu / turns as f64,
        tool_system: tool_system / turns as f64,
    }
}

/// The floor's series: a floor server on the same store ([`crate::floor_server`]) started,
/// measured as Mast is, and stopped.
pub async fn floor(
    http: &reqwest::Client,
    database: Option<&str>,
    turns: usize,
    per_session: usize,
) -> Figures {
    let server = crate::server::start_floor_server(database).await;
    let api = Api::of(http, &server);
    measure(&api, &server, Agent::Plain, turns, per_session).await
}

/// Measures Mast's series and prints it beside the floor's.
pub async fn run(
    api: &Api,
    server: &Server,
    kind: Agent,
    turns: usize,
    per_session: usize,
    floor: &mut Figures,
) {
    let mut mast = measure(api, server, kind, turns, per_session).await;
    let label = match kind {
        Agent::Plain => "latency",
        Agent::Realistic => "realistic agent (20 KB system prompt, 10 tools)",
    };
    let target = if server.backend == "postgres" {
        "p50 ≤ 2.5 ms"
    } else {
        "p50 ≤ 1.5 ms"
    };
    let quantiles = |v: &mut Vec<f64>| (pct(v, 0.5), pct(v, 0.99));
    let (p50, p99) = quantiles(&mut mast.plain);
    let (floor50, _) = quantiles(&mut floor.plain);
    row(
        &format!("{label}: plain turn (message posted → idle on SSE), {per_session}-turn sessions"),
        format!("p50 {p50:.2} ms, p99 {p99:.2} ms ({turns} turns)"),
        &format!("{target} (floor p50 {floor50:.2} ms)"),
    );
    let (p50, p99) = quantiles(&mut mast.tool);
    let (floor50, _) = quantiles(&mut floor.tool);
    row(
        &format!(
            "{label}: custom-tool round trip (message → requires_action → result → end_turn), {per_session}-round-trip sessions"
        ),
        format!("p50 {p50:.2} ms, p99 {p99:.2} ms ({turns} round trips)"),
        &format!("— (floor p50 {floor50:.2} ms)"),
    );
    row(
        &format!("{label}: server CPU per plain turn"),
        format!("{:.2} ms", mast.plain_cpu),
        &format!("— (floor {:.2} ms)", floor.plain_cpu),
    );
    row(
        &format!("{label}: server CPU per custom-tool round trip (of it in the kernel)"),
        format!("{:.2} ms ({:.2} ms)", mast.tool_cpu, mast.tool_system),
        &format!(
            "≤ 1 ms (floor {:.2} ms ({:.2} ms))",
            floor.tool_cpu, floor.tool_system
        ),
    );
}
