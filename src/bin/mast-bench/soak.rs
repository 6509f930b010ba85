//! `soak`: does the server's memory settle under long sessions? N sessions each do custom-tool
//! round trips back to back for a set time, their logs growing by thousands of turns, while
//! the server's resident and private anonymous memory is sampled from `/proc`; then the load
//! stops and the server is watched at rest a while longer.
//!
//! What it reports: a table of the samples over time, the plateau (the highest RSS in the last
//! third of the load against the highest in the first third: a server whose caches are
//! bounded and whose allocator gives memory back levels off, a leak keeps climbing), the RSS
//! after the rest, and whether the highest RSS seen stayed under the ceiling — the run fails
//! (a non-zero exit) when it did not.
//!
//! A long session compacts its context: on a real model's window, once it passes the
//! threshold (`MAST_COMPACTION_THRESHOLD`, 0.8 of the window). The scripted model's default
//! window (200,000 tokens) would take well over a thousand round trips per session to fill, longer
//! than a soak runs, so the scenario's server gives it a [`WINDOW`]-token window: every
//! session compacts about every hundred round trips, and the memory measured is that of
//! sessions as long sessions are — compacting — rather than of logs no real context holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::api::{Agent, Api, Events, row};
use crate::server::Server;

/// The scripted model's context window on the scenario's server, in tokens: a session
/// compacts at 12,800 tokens (0.8 of it), about every 120 round trips once under way (the
/// newest quarter of the window stays verbatim).
pub const WINDOW: u64 = 16_000;

/// The server environment the scenario needs.
pub fn server_env() -> Vec<(&'static str, String)> {
    vec![(
        "MAST_CONTEXT_WINDOWS",
        format!("{{\"mast-scripted\": {WINDOW}}}"),
    )]
}

/// Reads events until the session idles: the idle event, and how many compaction boundaries
/// came before it.
async fn until_idle(rx: &mut Events) -> (serde_json::Value, u64) {
    let mut compactions = 0;
    loop {
        let (_, v) = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("idle in time")
            .expect("stream open");
        if v["type"] == "agent.thread_context_compacted" {
            compactions += 1;
        }
        if v["type"] == "session.status_idle" {
            return (v, compactions);
        }
    }
}

/// One custom-tool round trip (as `Api::tool_round_trip`); how many compactions it made.
async fn round_trip(api: &Api, sid: &str, rx: &mut Events) -> u64 {
    api.say(sid, "call get_weather {}\n---\nsay {{result}}")
        .await;
    let (idle, first) = until_idle(rx).await;
    api.answer(sid, idle["stop_reason"]["event_ids"][0].as_str().unwrap())
        .await;
    let (_, second) = until_idle(rx).await;
    first + second
}

/// What a soak run does and what it holds the server to.
pub struct Options {
    /// Sessions doing round trips at once.
    pub sessions: usize,
    /// How long the round trips go on.
    pub duration: Duration,
    /// Time between two samples of the server's memory.
    pub sample: Duration,
    /// How long the server is watched after the load stops.
    pub rest: Duration,
    /// The RSS, in MB, the server must stay under for the whole run.
    pub ceiling_mb: f64,
}

/// One reading of the server's memory.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Seconds since the load started.
    at: f64,
    /// Round trips completed so far, all sessions together.
    turns: u64,
    /// `VmRSS`, MB.
    rss: f64,
    /// `Anonymous` of `smaps_rollup`: heap and stacks, what the allocator holds; MB.
    anon: f64,
    /// `Private_Dirty` of `smaps_rollup`, MB.
    dirty: f64,
}

/// A `/proc` figure given in kB, as MB (0 when it cannot be read).
fn proc_mb(text: &str, field: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn read(pid: u32, at: f64, turns: u64) -> Sample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    Sample {
        at,
        turns,
        rss: proc_mb(&status, "VmRSS:"),
        anon: proc_mb(&rollup, "Anonymous:"),
        dirty: proc_mb(&rollup, "Private_Dirty:"),
    }
}

fn print_sample(s: &Sample, last_turns: u64, last_at: f64, phase: &str) {
    let rate = (s.turns - last_turns) as f64 / (s.at - last_at).max(1e-9);
    println!(
        "| {:.1} | {phase} | {} | {rate:.0} | {:.1} | {:.1} | {:.1} |",
        s.at / 60.0,
        s.turns,
        s.rss,
        s.anon,
        s.dirty
    );
}

/// The highest RSS among `samples`, MB.
fn max_rss(samples: &[Sample]) -> f64 {
    samples.iter().map(|s| s.rss).fold(0.0, f64::max)
}

/// Runs the scenario against `server`; prints its table and rows and returns whether the
/// server's RSS stayed under the ceiling.
pub async fn run(api: &Api, server: &Server, o: &Options) -> bool {
    let (agent, env) = api.setup(Agent::Plain).await;
    let pid = server.pid();
    let start = read(pid, 0.0, 0);
    let turns = Arc::new(AtomicU64::new(0));
    let compactions = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let deadline = t0 + o.duration;
    let mut tasks = Vec::new();
    for _ in 0..o.sessions {
        let (api, agent, env) = (api.clone(), agent.clone(), env.clone());
        let (turns, compactions) = (turns.clone(), compactions.clone());
        tasks.push(tokio::spawn(async move {
            let sid = api.session(&agent, &env).await;
            let mut rx = api.stream(&sid).await;
            let mut mine = 0u64;
            while Instant::now() < deadline {
                let compacted = round_trip(&api, &sid, &mut rx).await;
                compactions.fetch_add(compacted, Ordering::Relaxed);
                turns.fetch_add(1, Ordering::Relaxed);
                mine += 1;
            }
            mine
        }));
    }
    println!(
        "\nsoak: {} sessions of custom-tool round trips for {:.1} min, memory sampled every {} s, \
         then {} s at rest (RSS at start {:.1} MB, anonymous {:.1} MB)\n",
        o.sessions,
        o.duration.as_secs_f64() / 60.0,
        o.sample.as_secs(),
        o.rest.as_secs(),
        start.rss,
        start.anon
    );
    println!(
        "| minute | phase | round trips | per s | RSS MB | anonymous MB | private dirty MB |\n|---|---|---|---|---|---|---|"
    );
    // About 30 rows over the load, every sample kept for the figures.
    let every = ((o.duration.as_secs_f64() / 30.0) / o.sample.as_secs_f64())
        .ceil()
        .max(1.0) as usize;
    let mut load = Vec::new();
    let (mut printed_turns, mut printed_at) = (0, 0.0);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + o.sample, o.sample);
    while Instant::now() < deadline {
        tick.tick().await;
        let s = read(
            pid,
            t0.elapsed().as_secs_f64(),
            turns.load(Ordering::Relaxed),
        );
        load.push(s);
        if load.len() % every == 0 {
            print_sample(&s, printed_turns, printed_at, "load");
            (printed_turns, printed_at) = (s.turns, s.at);
        }
    }
    let mut per_session = Vec::new();
    for t in tasks {
        per_session.push(t.await.expect("a soak session failed"));
    }
    let stopped = t0.elapsed().as_secs_f64();
    let total = turns.load(Ordering::Relaxed);
    let end_of_load = read(pid, stopped, total);
    load.push(end_of_load);
    print_sample(&end_of_load, printed_turns, printed_at, "load ends");
    let mut rest = Vec::new();
    let rest_end = Instant::now() + o.rest;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + o.sample, o.sample);
    while Instant::now() < rest_end {
        tick.tick().await;
        rest.push(read(pid, t0.elapsed().as_secs_f64(), total));
    }
    let after = rest.last().copied().unwrap_or(end_of_load);
    print_sample(&after, total, stopped, "at rest");

    let third = (load.len() / 3).max(1);
    let (first, last) = (
        max_rss(&load[..third]),
        max_rss(&load[load.len() - third..]),
    );
    let peak = max_rss(&load).max(max_rss(&rest));
    per_session.sort_unstable();
    println!("\n| scenario | result | target |\n|---|---|---|");
    row(
        &format!(
            "soak: {} sessions × {:.1} min of custom-tool round trips ({} server)",
            o.sessions,
            o.duration.as_secs_f64() / 60.0,
            server.backend
        ),
        format!(
            "{total} round trips, {:.0}/s; per session {}–{}; {} compactions",
            total as f64 / stopped,
            per_session.first().unwrap_or(&0),
            per_session.last().unwrap_or(&0),
            compactions.load(Ordering::Relaxed)
        ),
        "—",
    );
    row(
        "soak: RSS plateau, max of the load's last third vs its first third",
        format!(
            "{last:.1} MB vs {first:.1} MB: {:.2}× (start {:.1} MB)",
            last / first.max(1e-9),
            start.rss
        ),
        "≈ 1×: levels off",
    );
    row(
        &format!("soak: {} s after the load stopped", o.rest.as_secs()),
        format!(
            "RSS {:.1} MB, anonymous {:.1} MB, private dirty {:.1} MB",
            after.rss, after.anon, after.dirty
        ),
        "—",
    );
    let under = peak <= o.ceiling_mb;
    row(
        "soak: highest RSS of the run",
        format!("{peak:.1} MB"),
        &format!(
            "≤ {:.0} MB (--ceiling-mb): {}",
            o.ceiling_mb,
            if under { "met" } else { "NOT met" }
        ),
    );
    under
}
