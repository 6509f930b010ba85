//! The round trip's floor: a minimal server, run as a process of its own
//! (`mast-bench --floor-server ADDR`), that answers the same requests the latency scenario
//! sends with the same I/O a Mast turn does and nothing else — the same HTTP stack (axum over
//! hyper on tokio's multi-threaded runtime), the same events committed in the same number of
//! transactions through the same drivers, the same SSE frames — but no agent logic: no
//! validation, no context, no model, no permissions, no state beyond a counter.
//!
//! Per turn, as Mast does: the client's transaction appends the input,
//! `session.status_running` and `span.model_request_start` and updates the session's row;
//! a task spawned for the wake (as Mast's runner is) appends the answer,
//! `span.model_request_end`, `session.usage` and `session.status_idle` in a second one.
//! Each batch is published to the session's streams once committed. Its CPU per turn is what
//! any server on this stack and this machine pays for that I/O; the latency scenario prints
//! it beside Mast's own.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::{Stream, StreamExt};
use mast::domain::ids::new_id;
use serde_json::{Value, json};
use tokio::sync::{broadcast, oneshot};
use tokio_stream::wrappers::BroadcastStream;

/// One event: its type, id and wire JSON.
struct Frame {
    kind: &'static str,
    id: String,
    json: String,
}

/// A session: the sequence number of its last event and its streams' channel.
struct Session {
    last_seq: i64,
    tx: broadcast::Sender<Arc<Vec<Frame>>>,
}

/// Where events are committed.
enum Db {
    Postgres(sqlx::PgPool),
    /// A writer thread owning the one write connection, as Mast's SQLite store has.
    Sqlite(std::sync::mpsc::Sender<SqliteWrite>),
}

/// A batch for the SQLite writer, and where to say it is committed.
struct SqliteWrite {
    session_id: String,
    first_seq: i64,
    rows: Vec<(String, &'static str, String)>,
    done: oneshot::Sender<()>,
}

#[derive(Clone)]
struct Floor {
    db: Arc<Db>,
    sessions: Arc<Mutex<HashMap<String, Session>>>,
}

/// Serves the floor on `listen` until killed: Postgres at `DATABASE_URL` when set (tables of
/// its own in that database), else SQLite in `dir` with Mast's pragmas.
pub async fn serve(listen: &str, dir: &std::path::Path) {
    let db = match std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty()) {
        Some(url) => Db::Postgres(postgres(&url).await),
        None => Db::Sqlite(sqlite(dir)),
    };
    let floor = Floor {
        db: Arc::new(db),
        sessions: Arc::default(),
    };
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/v1/agents",
            post(|| async { Json(json!({"id": new_id("agent")})) }),
        )
        .route(
            "/v1/environments",
            post(|| async { Json(json!({"id": new_id("env")})) }),
        )
        .route("/v1/sessions", post(create))
        .route("/v1/sessions/{id}/events", post(accept))
        .route("/v1/sessions/{id}/events/stream", get(stream))
        .with_state(floor);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .expect("bind the floor server");
    axum::serve(listener, app).await.expect("floor server");
}

async fn postgres(url: &str) -> sqlx::PgPool {
    // As many connections as Mast's store opens by default, and no ping before each use
    // (sqlx's default), which would cost a round trip Mast's writes do not pay.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(16)
        .test_before_acquire(false)
        .connect(url)
        .await
        .expect("connect the floor server's store");
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS floor_sessions (id TEXT PRIMARY KEY, last_seq BIGINT NOT NULL, status TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS floor_events (session_id TEXT NOT NULL, seq BIGINT NOT NULL, id TEXT NOT NULL, type TEXT NOT NULL, body JSONB NOT NULL, PRIMARY KEY (session_id, seq))",
    )
    .execute(&pool)
    .await
    .expect("floor tables");
    pool
}

fn sqlite(dir: &std::path::Path) -> std::sync::mpsc::Sender<SqliteWrite> {
    std::fs::create_dir_all(dir).expect("floor data dir");
    let conn = rusqlite::Connection::open(dir.join("floor.db")).expect("open floor.db");
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = {};
         CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL, status TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (session_id, seq));",
        crate::floor::sqlite_synchronous()
    ))
    .expect("floor pragmas and tables");
    let (tx, rx) = std::sync::mpsc::channel::<SqliteWrite>();
    std::thread::spawn(move || {
        let mut conn = conn;
        for w in rx {
            let txn = conn.transaction().expect("begin");
            {
                let mut insert = txn
                    .prepare_cached("INSERT INTO events (session_id, seq, id, type, body) VALUES (?1, ?2, ?3, ?4, ?5)")
                    .expect("prepare");
                for (seq, (id, kind, body)) in (w.first_seq..).zip(&w.rows) {
                    insert
                        .execute((&w.session_id, seq, id, kind, body))
                        .expect("insert");
                }
                txn.prepare_cached("INSERT INTO sessions (id, last_seq, status) VALUES (?1, ?2, 'running') ON CONFLICT (id) DO UPDATE SET last_seq = excluded.last_seq")
                    .expect("prepare")
                    .execute((&w.session_id, w.first_seq + w.rows.len() as i64 - 1))
                    .expect("update session");
            }
            txn.commit().expect("commit");
            let _ = w.done.send(());
        }
    });
    tx
}

async fn create(State(f): State<Floor>) -> Json<Value> {
    let id = new_id("sesn");
    let (tx, _) = broadcast::channel(64);
    f.sessions
        .lock()
        .unwrap()
        .insert(id.clone(), Session { last_seq: 0, tx });
    Json(json!({"id": id}))
}

async fn stream(
    State(f): State<Floor>,
    Path(id): Path<String>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = f.sessions.lock().unwrap()[&id].tx.subscribe();
    // A lagging stream skips what it missed: the latency scenario never lags.
    let events = BroadcastStream::new(rx).flat_map(|batch| {
        let frames: Vec<Result<Event, Infallible>> = batch
            .iter()
            .flat_map(|b| b.iter())
            .map(|f| Ok(Event::default().event(f.kind).id(&f.id).data(&f.json)))
            .collect();
        futures_util::stream::iter(frames)
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}

/// A client's events: the input's transaction, its frames published, the answer; the wake
/// handed to a task of its own.
async fn accept(
    State(f): State<Floor>,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let input = &body["events"][0];
    let kind = if input["type"] == "user.custom_tool_result" {
        "user.custom_tool_result"
    } else {
        "user.message"
    };
    let calls = input["content"][0]["text"]
        .as_str()
        .is_some_and(|t| t.starts_with("call "));
    let mut echo = input.clone();
    let batch = vec![
        event(kind, echo.take()),
        event("session.status_running", json!({})),
        event("span.model_request_start", json!({})),
    ];
    let echoed = batch[0].clone();
    commit(&f, &id, batch).await;
    let task = f.clone();
    tokio::spawn(async move {
        let (answer, stop) = if calls {
            let call = event(
                "agent.custom_tool_use",
                json!({"name": "get_weather", "input": {}}),
            );
            let stop = json!({"type": "requires_action", "event_ids": [call.0]});
            (call, stop)
        } else {
            let text = json!({"content": [{"type": "text", "text": "ok"}]});
            (event("agent.message", text), json!({"type": "end_turn"}))
        };
        let usage = json!({"input_tokens": 10, "output_tokens": 2});
        let batch = vec![
            answer,
            event(
                "span.model_request_end",
                json!({"model_usage": usage.clone(), "is_error": false}),
            ),
            event("session.usage", json!({"usage": usage})),
            event("session.status_idle", json!({"stop_reason": stop})),
        ];
        commit(&task, &id, batch).await;
    });
    Json(json!({"data": [serde_json::from_str::<Value>(&echoed.2).unwrap()]}))
}

/// A new event: its id, type and wire JSON.
fn event(kind: &'static str, mut body: Value) -> (String, &'static str, String) {
    let id = new_id("sevt");
    body["type"] = json!(kind);
    body["id"] = json!(id);
    body["processed_at"] = json!(mast::domain::time::format(
        mast::domain::clock::Clock::system().now()
    ));
    let json = body.to_string();
    (id, kind, json)
}

/// Appends `rows` to session `id`'s log in one transaction and publishes them.
async fn commit(f: &Floor, id: &str, rows: Vec<(String, &'static str, String)>) {
    let first_seq = {
        let mut sessions = f.sessions.lock().unwrap();
        let s = sessions.get_mut(id).expect("a session this server made");
        let first = s.last_seq + 1;
        s.last_seq += rows.len() as i64;
        first
    };
    let frames: Vec<Frame> = rows
        .iter()
        .map(|(id, kind, json)| Frame {
            kind,
            id: id.clone(),
            json: json.clone(),
        })
        .collect();
    match &*f.db {
        Db::Postgres(pool) => {
            let n = rows.len() as i64;
            let seqs: Vec<i64> = (first_seq..first_seq + n).collect();
            let (ids, kinds, bodies): (Vec<_>, Vec<_>, Vec<_>) = rows
                .into_iter()
                .map(|(id, kind, json)| (id, kind.to_string(), json))
                .fold((vec![], vec![], vec![]), |mut acc, (a, b, c)| {
                    acc.0.push(a);
                    acc.1.push(b);
                    acc.2.push(c);
                    acc
                });
            sqlx::query(
                "WITH e AS (INSERT INTO floor_events (session_id, seq, id, type, body) \
                 SELECT $1, * FROM UNNEST($2::bigint[], $3::text[], $4::text[], $5::jsonb[])) \
                 INSERT INTO floor_sessions (id, last_seq, status) VALUES ($1, $6, 'running') \
                 ON CONFLICT (id) DO UPDATE SET last_seq = excluded.last_seq",
            )
            .bind(id)
            .bind(seqs)
            .bind(ids)
            .bind(kinds)
            .bind(bodies)
            .bind(first_seq + n - 1)
            .execute(pool)
            .await
            .expect("floor write");
        }
        Db::Sqlite(writer) => {
            let (done, committed) = oneshot::channel();
            writer
                .send(SqliteWrite {
                    session_id: id.to_string(),
                    first_seq,
                    rows,
                    done,
                })
                .expect("writer thread");
            committed.await.expect("floor write");
        }
    }
    let tx = f.sessions.lock().unwrap()[id].tx.clone();
    let _ = tx.send(Arc::new(frames));
}
