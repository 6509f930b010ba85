//! Several replicas on one Postgres: streams and interrupts reach the session whichever
//! replica serves the request, a replica SIGKILLed under load loses nothing, and a replica
//! whose clock is off neither takes a live lease nor keeps a dead one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use reqwest::Method;
use serde_json::{Value, json};

use crate::crash::{Reaped, check_log, free_port, spawn, wait_up};
use crate::support::http::weather_tool;
use crate::support::sse::Stream;
use crate::support::{Backend, Client, Options, TestServer, eventually, fresh_postgres_database};

const WEATHER: &str = "call get_weather {\"city\":\"Oslo\"}\n---\nsay Oslo: {{result}}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "Postgres: run with --include-ignored and MAST_TEST_DATABASE_URL"]
async fn streams_and_interrupts_cross_replicas() {
    // Checks the held rows too, so the caches are on even in the suite's caches-off pass.
    let a = TestServer::start_tuned(Backend::Postgres, Options::default(), |c| {
        c.engine.caches = true
    })
    .await;
    let b = TestServer::boot(a.config.clone(), Backend::Postgres).await;
    let agent = a.client.agent(json!([weather_tool()])).await;
    let sid = a.client.session(&agent).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/v1/sessions/{sid}/events/stream");
    let mut on_a = Stream::open(&a.url, &path, None, &[]).await;
    let mut on_b = Stream::open(&b.url, &path, None, &[]).await;

    // The turn runs on A (which took the message); B's subscriber sees all of it.
    a.client.say(&sid, WEATHER).await;
    let idle = on_b.until_idle(20).await;
    assert_eq!(idle["stop_reason"]["type"], "requires_action");
    let call = on_b
        .seen
        .iter()
        .find(|e| e["type"] == "agent.custom_tool_use")
        .expect("B saw A's tool call")["id"]
        .clone();
    assert_eq!(on_a.until_idle(20).await, idle, "both saw the same idle");

    // Answered on B, the turn now runs there; A's subscriber sees the rest, in order.
    b.client
        .send_events(
            &sid,
            json!([{"type": "user.custom_tool_result", "custom_tool_use_id": call,
                "content": [{"type": "text", "text": "snow"}]}]),
        )
        .await;
    let idle = on_a.until_idle(20).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let said: Vec<&Value> = on_a
        .seen
        .iter()
        .filter(|e| e["type"] == "agent.message")
        .collect();
    assert_eq!(said.len(), 1);
    assert_eq!(said[0]["content"][0]["text"], "Oslo: snow");
    on_b.until_idle(20).await;
    let seqs = |st: &Stream| st.seen.iter().map(|e| e["id"].clone()).collect::<Vec<_>>();
    assert_eq!(seqs(&on_a), seqs(&on_b), "same events, same order");
    let log = a.client.all_events(&sid).await;
    assert_eq!(
        seqs(&on_a),
        log.iter().map(|e| e["id"].clone()).collect::<Vec<_>>()
    );

    // A slow turn running on A is cut short by an interrupt sent to B. A still keeps the row
    // its runner left at `requires_action`, which B's turn moved past: A's write of the
    // message is refused on that copy and decided again on the current row.
    // (Were the copy written, its events would take sequence numbers B's turn used.)
    assert!(a.holds_row(&sid), "A kept the row its runner left");
    a.client.say(&sid, "sleep 20000\nsay too late").await;
    assert!(!a.holds_row(&sid), "the message's write took A's copy");
    on_b.until(20, |e| e["type"] == "span.model_request_start")
        .await;
    let started = std::time::Instant::now();
    b.client
        .send_events(&sid, json!([{"type": "user.interrupt"}]))
        .await;
    let idle = on_b.until_idle(20).await;
    assert!(
        started.elapsed().as_secs() < 10,
        "the interrupt reached the replica running the turn"
    );
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    assert!(
        !on_b
            .seen
            .iter()
            .any(|e| e["type"] == "agent.message" && e["content"][0]["text"] == "too late")
    );
    eventually(10, "both runners to exit", || async {
        (a.active_runners() + b.active_runners() == 0).then_some(())
    })
    .await;

    // A replica shut down mid-turn hands its session back; the other finishes the turn.
    let mut a = a;
    a.client.say(&sid, "sleep 1500\nsay handed over").await;
    on_b.until(20, |e| e["type"] == "span.model_request_start")
        .await;
    a.stop().await;
    let idle = on_b.until_idle(30).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    assert!(
        on_b.seen
            .iter()
            .any(|e| e["type"] == "agent.message" && e["content"][0]["text"] == "handed over"),
        "the turn was finished by the other replica"
    );
    check_log(&b.client.all_events(&sid).await);
}

/// A client that fails over between replicas.
struct Replicas {
    clients: Vec<Client>,
    next: AtomicUsize,
}

impl Replicas {
    /// Sends to the next replica in turn, and to the others while one is down.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> crate::support::http::Resp {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len();
            match self.clients[i].try_send(method.clone(), path, body).await {
                Ok(r) if r.status.is_server_error() => {}
                Ok(r) => return r,
                Err(_) => {}
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no replica answered {path}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    async fn events(&self, sid: &str) -> Vec<Value> {
        let page = self
            .send(
                Method::GET,
                &format!("/v1/sessions/{sid}/events?limit=1000"),
                None,
            )
            .await;
        page.body["data"].as_array().cloned().unwrap_or_default()
    }
}

/// The primary thread's model request spans never overlap: one runner at a time.
fn one_runner_at_a_time(log: &[Value]) {
    let mut open = false;
    for e in log {
        match e["type"].as_str() {
            Some("span.model_request_start") => {
                assert!(!open, "two model requests at once: two runners");
                open = true;
            }
            Some("span.model_request_end") => open = false,
            _ => {}
        }
    }
}

async fn one_session(r: &Replicas, agent: &str, env: &str) -> String {
    let created = r
        .send(
            Method::POST,
            "/v1/sessions",
            Some(&json!({"agent": agent, "environment_id": env})),
        )
        .await;
    let sid = created.body["id"]
        .as_str()
        .expect("session created")
        .to_string();
    let msg = json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": WEATHER}]}]});
    let path = format!("/v1/sessions/{sid}/events");
    loop {
        let i = r.next.fetch_add(1, Ordering::Relaxed) % r.clients.len();
        match r.clients[i].try_send(Method::POST, &path, Some(&msg)).await {
            Ok(resp) if resp.status == 200 => return sid,
            Ok(resp) if !resp.status.is_server_error() => panic!("{}", resp.body),
            // The replica died with the request in flight: it may have been stored.
            _ => {
                if r.events(&sid)
                    .await
                    .iter()
                    .any(|e| e["type"] == "user.message")
                {
                    return sid;
                }
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn answer(r: &Replicas, sid: &str) {
    let call = loop {
        let log = r.events(sid).await;
        if let Some(c) = log.iter().find(|e| e["type"] == "agent.custom_tool_use")
            && log.iter().any(|e| {
                e["type"] == "session.status_idle" && e["stop_reason"]["type"] == "requires_action"
            })
        {
            break c["id"].clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let result = json!({"events": [{"type": "user.custom_tool_result", "custom_tool_use_id": call,
        "content": [{"type": "text", "text": "snow"}]}]});
    let resp = r
        .send(
            Method::POST,
            &format!("/v1/sessions/{sid}/events"),
            Some(&result),
        )
        .await;
    // A retry of an answer that did land is refused as already answered.
    assert!(
        resp.status == 200 || resp.body.to_string().contains("already answered"),
        "{}",
        resp.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "Postgres: run with --include-ignored and MAST_TEST_DATABASE_URL"]
async fn one_of_two_replicas_killed_under_load_loses_nothing() {
    killed_under_load(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "Postgres: run with --include-ignored and MAST_TEST_DATABASE_URL"]
async fn one_of_three_replicas_killed_under_load_loses_nothing() {
    killed_under_load(3).await;
}

async fn killed_under_load(replicas: usize) {
    const SESSIONS: usize = 300;
    let db = fresh_postgres_database().await;
    let dir = tempfile::TempDir::new().unwrap();
    let ports: Vec<u16> = (0..replicas).map(|_| free_port()).collect();
    let mut children: Vec<Reaped> = ports
        .iter()
        .map(|p| spawn(dir.path(), Some(&db), *p))
        .collect();
    let clients: Vec<Client> = ports
        .iter()
        .map(|p| Client::new(&format!("http://127.0.0.1:{p}")))
        .collect();
    for c in &clients {
        wait_up(c).await;
    }
    let r = Arc::new(Replicas {
        clients,
        next: AtomicUsize::new(0),
    });
    let env = r.clients[0].environment().await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let agent = r.clients[0].agent(json!([weather_tool()])).await["id"]
        .as_str()
        .unwrap()
        .to_string();

    // Every session: a message, a custom tool call answered over either replica, an answer.
    let answered = Arc::new(AtomicUsize::new(0));
    let killed = Arc::new(AtomicBool::new(false));
    let gate = Arc::new(tokio::sync::Semaphore::new(24));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..SESSIONS {
        let (r, agent, env, answered, gate) = (
            r.clone(),
            agent.clone(),
            env.clone(),
            answered.clone(),
            gate.clone(),
        );
        tasks.spawn(async move {
            let _slot = gate.acquire_owned().await.unwrap();
            let sid = one_session(&r, &agent, &env).await;
            answer(&r, &sid).await;
            answered.fetch_add(1, Ordering::Relaxed);
            sid
        });
    }
    // Half-way through, replica 0 dies with sessions running on it, and comes back later.
    eventually(120, "half the sessions to be answered", || async {
        (answered.load(Ordering::Relaxed) >= SESSIONS / 2).then_some(())
    })
    .await;
    children[0].kill().unwrap(); // SIGKILL
    children[0].wait().unwrap();
    killed.store(true, Ordering::Relaxed);
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    children[0] = spawn(dir.path(), Some(&db), ports[0]);
    wait_up(&r.clients[0]).await;
    let mut sids = Vec::new();
    while let Some(sid) = tasks.join_next().await {
        sids.push(sid.expect("session task"));
    }
    assert!(killed.load(Ordering::Relaxed));

    for sid in &sids {
        let log = eventually(60, "every session to end its turn", || async {
            let log = r.events(sid).await;
            log.iter()
                .any(|e| {
                    e["type"] == "session.status_idle" && e["stop_reason"]["type"] == "end_turn"
                })
                .then_some(log)
        })
        .await;
        check_log(&log);
        one_runner_at_a_time(&log);
        let kinds = |t: &str| log.iter().filter(|e| e["type"] == t).count();
        assert_eq!(kinds("user.message"), 1, "{sid}: one message");
        assert_eq!(kinds("agent.custom_tool_use"), 1, "{sid}: one tool call");
        assert_eq!(kinds("user.custom_tool_result"), 1, "{sid}: one answer");
        let said: Vec<&Value> = log
            .iter()
            .filter(|e| e["type"] == "agent.message")
            .collect();
        assert_eq!(said.len(), 1, "{sid}: one answer from the agent");
        assert_eq!(said[0]["content"][0]["text"], "Oslo: snow");
    }
    for c in &mut children {
        c.kill().ok();
        c.wait().ok();
    }
}

/// The real binary on `db`, its clock shifted by `skew_ms` (`MAST_CLOCK_SKEW_MS`), with the
/// short leases of the crash tests.
fn spawn_skewed(data_dir: &std::path::Path, db: &str, port: u16, skew_ms: i64) -> Reaped {
    use std::process::{Command, Stdio};
    let child = Command::new(env!("CARGO_BIN_EXE_mast"))
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(data_dir)
        .env("MAST_CLOCK_SKEW_MS", skew_ms.to_string())
        .env("MAST_LEASE_TTL_MS", "1500")
        .env("MAST_REAP_INTERVAL_MS", "200")
        .env("MAST_LOG", "warn")
        .env("MAST_DB_MAX_CONNECTIONS", "6")
        .env("DATABASE_URL", db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("mast binary starts");
    Reaped(child)
}

/// A session of `agent` created on `c`, with `script` sent to it there (so that replica's
/// runner takes the turn).
async fn session_running(c: &Client, agent: &Value, script: &str) -> String {
    let sid = c.session(agent).await["id"].as_str().unwrap().to_string();
    c.say(&sid, script).await;
    sid
}

/// The log once its turn ended (`end_turn`), read through `c`.
async fn ended(c: &Client, sid: &str, secs: u64) -> Vec<Value> {
    eventually(secs, "the turn to end", || async {
        let log = c.all_events(sid).await;
        log.iter()
            .any(|e| e["type"] == "session.status_idle" && e["stop_reason"]["type"] == "end_turn")
            .then_some(log)
    })
    .await
}

/// How many model requests a log started.
fn requests(log: &[Value]) -> usize {
    log.iter()
        .filter(|e| e["type"] == "span.model_request_start")
        .count()
}

/// Lease takeovers a replica counted (`/metrics`).
async fn takeovers(c: &Client) -> f64 {
    c.metric("mast_lease_takeovers_total").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "Postgres: run with --include-ignored and MAST_TEST_DATABASE_URL"]
async fn a_skewed_clock_neither_steals_a_live_lease_nor_keeps_a_dead_one() {
    const HOUR_MS: i64 = 3_600_000;
    let db = fresh_postgres_database().await;
    let dir = tempfile::TempDir::new().unwrap();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    // On time, an hour ahead, an hour behind.
    let skews = [0, HOUR_MS, -HOUR_MS];
    let mut replicas: Vec<Reaped> = ports
        .iter()
        .zip(skews)
        .map(|(p, skew)| spawn_skewed(dir.path(), &db, *p, skew))
        .collect();
    let clients: Vec<Client> = ports
        .iter()
        .map(|p| Client::new(&format!("http://127.0.0.1:{p}")))
        .collect();
    for c in &clients {
        wait_up(c).await;
    }
    let (on_time, ahead, behind) = (&clients[0], &clients[1], &clients[2]);
    let agent = on_time.agent(json!([])).await;

    // Live leases: a turn much longer than a lease runs on the replica behind (whose deadlines,
    // by its own clock, lie an hour in the past) and one on the replica on time (whose
    // deadlines the replica ahead would see as an hour gone). Each keeps its runner.
    let slow = "sleep 4000\nsay done";
    let on_behind = session_running(behind, &agent, slow).await;
    let on_on_time = session_running(on_time, &agent, slow).await;
    for sid in [&on_behind, &on_on_time] {
        let log = ended(on_time, sid, 30).await;
        check_log(&log);
        one_runner_at_a_time(&log);
        assert_eq!(
            requests(&log),
            1,
            "{sid}: the turn ran once, never taken over"
        );
        let said: Vec<&Value> = log
            .iter()
            .filter(|e| e["type"] == "agent.message")
            .collect();
        assert_eq!(said.len(), 1, "{sid}");
        assert_eq!(said[0]["content"][0]["text"], "done");
    }
    for c in &clients {
        assert_eq!(takeovers(c).await, 0.0, "no replica took a live lease");
    }

    // Dead leases: turns running on the replica ahead (whose deadlines, by its own clock, lie
    // an hour in the future) and on the replica on time (whose deadlines the replica behind
    // would see as an hour away) lose their runners; the replica behind finishes both.
    let slow = "sleep 3000\nsay handed over";
    let on_ahead = session_running(ahead, &agent, slow).await;
    let on_on_time = session_running(on_time, &agent, slow).await;
    for sid in [&on_ahead, &on_on_time] {
        eventually(20, "the turn to start", || async {
            (requests(&behind.all_events(sid).await) >= 1).then_some(())
        })
        .await;
    }
    for r in &mut replicas[..2] {
        r.kill().unwrap(); // SIGKILL
        r.wait().unwrap();
    }
    for sid in [&on_ahead, &on_on_time] {
        // A lease lasts 1.5 s: far less than the hour a clock could make it.
        let log = ended(behind, sid, 30).await;
        check_log(&log);
        one_runner_at_a_time(&log);
        assert!(
            log.iter()
                .any(|e| e["type"] == "agent.message" && e["content"][0]["text"] == "handed over"),
            "{sid}: the replica behind finished the turn"
        );
    }
    assert!(
        takeovers(behind).await >= 2.0,
        "the replica behind took both dead leases"
    );
}
