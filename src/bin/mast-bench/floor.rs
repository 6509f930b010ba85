//! The store's floor, measured in the same run: single-row inserts of an event-sized JSON
//! body, one commit each, from as many connections as Mast's store uses — what any server
//! on this store could at best do per event.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::Connection;

/// An event body of the size Mast's turns write.
const BODY: &str = r#"{"type":"agent.message","id":"sevt_0123456789abcdefghij","content":[{"type":"text","text":"You said: hello"}],"processed_at":"2026-12-01T10:00:00.000000Z"}"#;

/// SQLite's `synchronous` mode of the server under test: `MAST_SQLITE_SYNCHRONOUS` (which the
/// server inherits from this process), `FULL` when unset, as Mast's store defaults to.
/// Parsed as the server parses it, so the floor never runs in a mode the server refuses.
pub fn sqlite_synchronous() -> &'static str {
    std::env::var("MAST_SQLITE_SYNCHRONOUS")
        .ok()
        .filter(|v| !v.is_empty())
        .map_or(Ok(mast::store::sqlite::Synchronous::default()), |v| {
            v.parse()
        })
        .unwrap_or_else(|e| panic!("MAST_SQLITE_SYNCHRONOUS: {e}"))
        .pragma()
}

/// Inserts per second into a scratch table of the Postgres database at `url`, from
/// `connections` connections for `seconds`.
pub async fn postgres(url: &str, connections: usize, seconds: u64) -> f64 {
    let mut admin = sqlx::PgConnection::connect(url).await.expect("connect");
    sqlx::query("CREATE TABLE mast_bench_floor (seq BIGSERIAL PRIMARY KEY, session_id TEXT NOT NULL, body JSONB NOT NULL)")
        .execute(&mut admin)
        .await
        .expect("create scratch table");
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for i in 0..connections {
        let (url, done) = (url.to_string(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = sqlx::PgConnection::connect(&url).await.expect("connect");
            let sid = format!("sesn_{i}");
            while Instant::now() < deadline {
                sqlx::query(
                    "INSERT INTO mast_bench_floor (session_id, body) VALUES ($1, $2::jsonb)",
                )
                .bind(&sid)
                .bind(BODY)
                .execute(&mut conn)
                .await
                .expect("insert");
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let started = Instant::now();
    for t in tasks {
        t.await.unwrap();
    }
    let rate = done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    let _ = sqlx::query("DROP TABLE mast_bench_floor")
        .execute(&mut admin)
        .await;
    rate
}

/// Inserts per second into a scratch SQLite file with Mast's pragmas (WAL, the server's
/// `synchronous`), from one connection
/// (Mast's store has one writer), for `seconds`.
pub async fn sqlite(dir: &std::path::Path, seconds: u64) -> f64 {
    std::fs::create_dir_all(dir).expect("scratch dir");
    let path = dir.join("floor.db");
    let pragmas = format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = {};",
        sqlite_synchronous()
    );
    // rusqlite, as Mast's store: the floor is SQLite's own commit rate, not a driver's.
    let rate = tokio::task::spawn_blocking(move || {
        let conn = rusqlite::Connection::open(&path).expect("open scratch file");
        conn.execute_batch(&pragmas).expect("pragmas");
        conn.execute_batch(
            "CREATE TABLE floor (seq INTEGER PRIMARY KEY, session_id TEXT NOT NULL, body TEXT NOT NULL)",
        )
        .expect("create scratch table");
        let mut insert = conn
            .prepare("INSERT INTO floor (session_id, body) VALUES (?1, ?2)")
            .expect("prepare insert");
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let started = Instant::now();
        let mut done = 0u64;
        while Instant::now() < deadline {
            insert.execute(("sesn_0", BODY)).expect("insert");
            done += 1;
        }
        done as f64 / started.elapsed().as_secs_f64()
    })
    .await
    .expect("floor thread");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.join(format!("floor.db{suffix}")));
    }
    rate
}
