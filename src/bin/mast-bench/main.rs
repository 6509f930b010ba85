//! `mast-bench`: a benchmark harness. It starts a real `mast serve` (the binary next to this
//! one; SQLite, or Postgres when `DATABASE_URL` is set — a fresh database is created on that
//! server) and measures, with the scripted model:
//!
//! - `latency`: one session, `user.message` posted → `session.status_idle` seen on SSE, for a
//!   plain turn and for a whole custom-tool round trip;
//! - `throughput`: N sessions doing turns concurrently: turns/s and events/s;
//! - `idle`: server RSS with K sessions idle on `requires_action`;
//! - `fanout`: S subscribers on one session: delay from an event's `processed_at` to its arrival.
//!
//! Run: `cargo build --release && ulimit -n 65536 && target/release/mast-bench --scenario all`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::StreamExt;
use mast::models::sse::SseDecoder;
use serde_json::{Value, json};
use tokio::sync::mpsc;

#[derive(Debug, Parser)]
#[command(
    name = "mast-bench",
    about = "Benchmarks a real mast server with the scripted model"
)]
struct Args {
    /// latency | throughput | idle | fanout | all
    #[arg(long, default_value = "all")]
    scenario: String,
    /// Measured turns in the latency scenario (after 20 warm-up turns).
    #[arg(long, default_value_t = 300)]
    turns: usize,
    /// Turns per session in the latency scenario before starting a fresh session.
    #[arg(long, default_value_t = 10)]
    turns_per_session: usize,
    /// Concurrent sessions in the throughput scenario.
    #[arg(long, default_value_t = 50)]
    sessions: usize,
    /// Seconds the throughput scenario runs.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Sessions left idle on requires_action in the idle scenario.
    #[arg(long, default_value_t = 10_000)]
    idle_sessions: usize,
    /// Subscribers in the fan-out scenario.
    #[arg(long, default_value_t = 1000)]
    subscribers: usize,
    /// Server processes on one Postgres database (DATABASE_URL); the throughput scenario
    /// posts each session's messages to one replica and streams it from the next.
    #[arg(long, default_value_t = 1)]
    replicas: usize,
}

const TOOL: &str =
    r#"{"type":"custom","name":"get_weather","description":"d","input_schema":{"type":"object"}}"#;

struct Server {
    child: Child,
    base: String,
    backend: &'static str,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Server {
    fn rss_mb(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let kb: f64 = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        kb / 1024.0
    }
}

async fn fresh_database(url: &str) -> String {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .expect("connect to DATABASE_URL");
    let name = format!(
        "mast_bench_{}",
        mast::domain::ids::new_secret(8).to_lowercase()
    );
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("create database");
    format!(
        "{}/{name}",
        url.rsplit_once('/').map(|(b, _)| b).unwrap_or(url)
    )
}

/// The store servers use: a fresh Postgres database under DATABASE_URL, or None (SQLite).
async fn database() -> Option<String> {
    match std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty()) {
        Some(url) => Some(fresh_database(&url).await),
        None => None,
    }
}

async fn start_server(database: Option<&str>) -> Server {
    let bin: PathBuf = std::env::current_exe().unwrap().with_file_name("mast");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("mast-bench-{}", mast::domain::ids::new_secret(8)));
    let mut cmd = Command::new(&bin);
    cmd.args([
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--data-dir",
    ])
    .arg(&dir)
    .env("MAST_LOG", "warn")
    .stdout(Stdio::null())
    .stderr(Stdio::inherit());
    let backend = match database {
        Some(url) => {
            cmd.env("DATABASE_URL", url);
            "postgres"
        }
        None => {
            cmd.env_remove("DATABASE_URL");
            "sqlite"
        }
    };
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    // From here the child is owned by `Server`, whose Drop kills and reaps it.
    let server = Server {
        child,
        base: format!("http://127.0.0.1:{port}"),
        backend,
        dir,
    };
    for _ in 0..400 {
        if reqwest::get(format!("{}/healthz", server.base))
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return server;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("server did not start");
}

#[derive(Clone)]
struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    async fn post(&self, path: &str, body: Value) -> Value {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .expect("request");
        let status = r.status();
        let v: Value = r.json().await.expect("json");
        assert!(status.is_success(), "{path}: {status} {v}");
        v
    }

    async fn session(&self, agent: &str, env: &str) -> String {
        self.post(
            "/v1/sessions",
            json!({"agent": agent, "environment_id": env}),
        )
        .await["id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    async fn say(&self, sid: &str, text: &str) {
        self.post(&format!("/v1/sessions/{sid}/events"), json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": text}]}]})).await;
    }

    async fn answer(&self, sid: &str, id: &str) {
        self.post(
            &format!("/v1/sessions/{sid}/events"),
            json!({"events": [{"type": "user.custom_tool_result", "custom_tool_use_id": id, "content": [{"type": "text", "text": "ok"}]}]}),
        )
        .await;
    }

    async fn setup(&self) -> (String, String) {
        let agent = self.post("/v1/agents", json!({"name": "bench", "model": "mast-scripted", "tools": [serde_json::from_str::<Value>(TOOL).unwrap()]})).await;
        let env = self
            .post(
                "/v1/environments",
                json!({"name": format!("bench-{}", mast::domain::ids::new_secret(6))}),
            )
            .await;
        (
            agent["id"].as_str().unwrap().to_string(),
            env["id"].as_str().unwrap().to_string(),
        )
    }

    /// Opens a session stream; events arrive on the returned channel with their arrival time.
    async fn stream(&self, sid: &str) -> mpsc::UnboundedReceiver<(Instant, Value)> {
        let resp = self
            .http
            .get(format!("{}/v1/sessions/{sid}/events/stream", self.base))
            .send()
            .await
            .expect("stream");
        assert!(resp.status().is_success());
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut dec = SseDecoder::default();
            let mut body = resp.bytes_stream();
            while let Some(Ok(chunk)) = body.next().await {
                let now = Instant::now();
                for ev in dec.feed(&chunk) {
                    if ev.event.as_deref().is_none_or(|e| e == "ping") {
                        continue;
                    }
                    let Ok(v) = serde_json::from_str::<Value>(&ev.data) else {
                        continue;
                    };
                    if tx.send((now, v)).is_err() {
                        return;
                    }
                }
            }
        });
        rx
    }
}

async fn until_idle(
    rx: &mut mpsc::UnboundedReceiver<(Instant, Value)>,
    events: &mut u64,
) -> (Instant, Value) {
    loop {
        let (t, v) = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("idle in time")
            .expect("stream open");
        *events += 1;
        if v["type"] == "session.status_idle" {
            return (t, v);
        }
    }
}

fn pct(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i]
}

/// Latency of turns in conversations of `per_session` turns each (a fresh session after that),
/// so the figure reflects ordinary conversations rather than one ever-growing history.
async fn latency(api: &Api, turns: usize, per_session: usize) {
    let (agent, env) = api.setup().await;
    let mut n = 0;
    let (mut plain, mut tool) = (Vec::new(), Vec::new());
    let mut sid = String::new();
    let mut rx = None;
    for i in 0..turns + 20 {
        if i % per_session == 0 {
            sid = api.session(&agent, &env).await;
            rx = Some(api.stream(&sid).await);
        }
        let rx = rx.as_mut().unwrap();
        let t0 = Instant::now();
        api.say(&sid, "hello").await;
        let (t1, _) = until_idle(rx, &mut n).await;
        if i >= 20 {
            plain.push((t1 - t0).as_secs_f64() * 1000.0);
        }
    }
    for i in 0..turns + 20 {
        if i % per_session == 0 {
            sid = api.session(&agent, &env).await;
            rx = Some(api.stream(&sid).await);
        }
        let rx = rx.as_mut().unwrap();
        let t0 = Instant::now();
        api.say(&sid, "call get_weather {}\n---\nsay {{result}}")
            .await;
        let (_, idle) = until_idle(rx, &mut n).await;
        api.answer(&sid, idle["stop_reason"]["event_ids"][0].as_str().unwrap())
            .await;
        let (t1, _) = until_idle(rx, &mut n).await;
        if i >= 20 {
            tool.push((t1 - t0).as_secs_f64() * 1000.0);
        }
    }
    println!(
        "| latency: plain turn (message posted → idle on SSE), {per_session}-turn sessions | p50 {:.2} ms, p99 {:.2} ms ({turns} turns) |",
        pct(&mut plain, 0.5),
        pct(&mut plain, 0.99)
    );
    println!(
        "| latency: custom-tool round trip (message → requires_action → result → end_turn), {per_session}-round-trip sessions | p50 {:.2} ms, p99 {:.2} ms ({turns} round trips) |",
        pct(&mut tool, 0.5),
        pct(&mut tool, 0.99)
    );
}

async fn throughput(apis: &[Api], sessions: usize, seconds: u64) {
    let (agent, env) = apis[0].setup().await;
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
    println!(
        "| throughput: {sessions} concurrent sessions, {seconds} s | {:.0} turns/s, {:.0} events/s |",
        t / secs,
        e / secs
    );
}

async fn idle(api: &Api, server: &Server, count: usize) {
    let (agent, env) = api.setup().await;
    let before = server.rss_mb();
    let made = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    let per = count.div_ceil(64);
    for w in 0..64 {
        let (api, agent, env, made) = (api.clone(), agent.clone(), env.clone(), made.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..per {
                if made.fetch_add(1, Ordering::Relaxed) >= count as u64 {
                    return;
                }
                let sid = api.session(&agent, &env).await;
                api.say(&sid, "call get_weather {}").await;
                let _ = w;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // Wait until every session reached requires_action.
    loop {
        let r: Value = api
            .http
            .get(format!(
                "{}/v1/sessions?statuses%5B%5D=running&statuses%5B%5D=rescheduling&limit=1",
                api.base
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if r["data"].as_array().is_some_and(|a| a.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "| idle: server RSS with {count} sessions idle on requires_action | {:.1} MB (empty server: {before:.1} MB) |",
        server.rss_mb()
    );
}

async fn fanout(api: &Api, subscribers: usize) {
    let (agent, env) = api.setup().await;
    let sid = api.session(&agent, &env).await;
    let mut streams = Vec::new();
    for _ in 0..subscribers {
        streams.push(api.stream(&sid).await);
    }
    let wall = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as i64
    };
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
                    delays.push((wall() - t) as f64 / 1000.0);
                }
                if v["type"] == "session.status_idle" {
                    break;
                }
            }
        }
    }
    // Arrival is stamped when this reader drains the channel, so these are upper bounds.
    println!(
        "| fan-out: {subscribers} subscribers on one session, delay from `processed_at` to receipt | p50 {:.1} ms, p99 {:.1} ms ({} deliveries) |",
        pct(&mut delays, 0.5),
        pct(&mut delays, 0.99),
        delays.len()
    );
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let all = args.scenario == "all";
    let run = |name: &str| all || args.scenario == name;
    let db = database().await;
    if args.replicas > 1 && db.is_none() {
        panic!("--replicas needs DATABASE_URL: replicas share one Postgres");
    }
    let mut servers = Vec::new();
    for _ in 0..args.replicas.max(1) {
        servers.push(start_server(db.as_deref()).await);
    }
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .unwrap();
    let apis: Vec<Api> = servers
        .iter()
        .map(|s| Api {
            http: http.clone(),
            base: s.base.clone(),
        })
        .collect();
    let (server, api) = (&servers[0], &apis[0]);
    println!(
        "| scenario ({} store, {} replica{}) | result |\n|---|---|",
        server.backend,
        servers.len(),
        if servers.len() == 1 { "" } else { "s" }
    );
    if run("latency") {
        latency(api, args.turns, args.turns_per_session).await;
    }
    if run("throughput") {
        throughput(&apis, args.sessions, args.seconds).await;
    }
    if run("fanout") {
        fanout(api, args.subscribers).await;
    }
    if run("idle") {
        idle(api, server, args.idle_sessions).await;
    }
    drop(apis);
    drop(servers);
    if let (Some(db), Ok(admin)) = (db, std::env::var("DATABASE_URL")) {
        drop_database(&admin, &db).await;
    }
}

/// Drops the database the run created.
async fn drop_database(admin: &str, db: &str) {
    use sqlx::Connection;
    let Some((_, name)) = db.rsplit_once('/') else {
        return;
    };
    if let Ok(mut conn) = sqlx::PgConnection::connect(admin).await {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&mut conn)
            .await;
    }
}
