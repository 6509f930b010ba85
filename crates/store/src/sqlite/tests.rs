//! The SQLite store's own guarantees, beyond the shared suite: compatibility with databases
//! sqlx's migrator made, refusals, what an append writes, the durability setting, and the
//! writer's batches.

use std::borrow::Cow;
use std::path::Path;

use rusqlite::Connection;

use super::db::Db;
use super::{Synchronous, open};
use crate::{
    HealthStore, NewEvent, SessionRecord, SessionStore, SessionTransactions, StoreError,
    ThreadRecord, TxnOutput, Writer,
};
use mast_domain::clock::Clock;

fn session(id: &str) -> (SessionRecord, ThreadRecord) {
    let now = Clock::system().now();
    let s = SessionRecord {
        id: id.into(),
        workspace_id: "wrkspc_default".into(),
        agent_id: "agent_x".into(),
        agent_version: 1,
        environment_id: "env_x".into(),
        status: "idle".into(),
        body: r#"{"agent":{"system":"a long prompt"}}"#.into(),
        usage: "{}".into(),
        active_micros: 0,
        running_since: None,
        last_seq: 0,
        engine: "{}".into(),
        created_at: now,
        updated_at: now,
        archived_at: None,
        terminated_at: None,
        workflow_deadline_at: None,
        version: 0,
        lease_owner: None,
        lease_expires_at: None,
    };
    let t = ThreadRecord {
        id: format!("sthr_{id}"),
        session_id: id.into(),
        parent_thread_id: None,
        spawning_event_id: None,
        status: "idle".into(),
        body: "{}".into(),
        created_at: now,
        updated_at: now,
        archived_at: None,
    };
    (s, t)
}

fn event() -> NewEvent {
    NewEvent {
        id: mast_domain::ids::new_id("sevt"),
        thread_id: None,
        kind: "agent.message".into(),
        body: serde_json::json!({"content": []}),
        internal: None,
        answers: None,
        processed_at: Some(Clock::system().now()),
    }
}

fn file(dir: &Path) -> Connection {
    Connection::open(dir.join("mast.db")).unwrap()
}

#[tokio::test]
async fn a_database_sqlx_migrated_opens_and_sqlx_still_accepts_it() {
    use sqlx::Connection as _;
    let dir = tempfile::TempDir::new().unwrap();
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(dir.path().join("mast.db"))
        .create_if_missing(true);
    // What the sqlx-based binary made: migrations 1-5, and a session in the old layout.
    let all = sqlx::migrate!("migrations/sqlite");
    let old = sqlx::migrate::Migrator {
        migrations: Cow::Owned(all.iter().filter(|m| m.version <= 5).cloned().collect()),
        ..sqlx::migrate::Migrator::DEFAULT
    };
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    old.run(&mut conn).await.unwrap();
    sqlx::query(
        "INSERT INTO sessions (id, workspace_id, agent_id, agent_version, environment_id, status, body, \
         usage, engine, created_at, updated_at) VALUES ('sesn_old', 'wrkspc_default', 'a', 1, 'e', 'idle', \
         '{\"title\":\"kept\"}', '{}', '{}', 1, 1)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();

    let store = open(dir.path(), Synchronous::Full, Clock::system())
        .await
        .unwrap();
    let s = store.get_session_by_id("sesn_old").await.unwrap().unwrap();
    assert_eq!(&*s.body, r#"{"title":"kept"}"#);
    assert_eq!(store.readiness().await, None);
    drop(store);

    // Recorded as sqlx records: its migrator finds every migration applied, unchanged.
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    all.run(&mut conn).await.unwrap();
    let (success, time): (bool, i64) =
        sqlx::query_as("SELECT success, execution_time FROM _sqlx_migrations WHERE version = ?")
            .bind(super::latest_migration())
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert!(success && time >= 0, "{success} {time}");
}

#[tokio::test]
async fn a_changed_or_unknown_migration_is_refused() {
    let dir = tempfile::TempDir::new().unwrap();
    drop(
        open(dir.path(), Synchronous::Full, Clock::system())
            .await
            .unwrap(),
    );
    let db = file(dir.path());
    db.execute_batch("UPDATE _sqlx_migrations SET checksum = x'00' WHERE version = 1")
        .unwrap();
    let err = open(dir.path(), Synchronous::Full, Clock::system())
        .await
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("migration 1 was applied to this database but it has been modified"),
        "{err}"
    );

    let dir = tempfile::TempDir::new().unwrap();
    drop(
        open(dir.path(), Synchronous::Full, Clock::system())
            .await
            .unwrap(),
    );
    file(dir.path())
        .execute_batch(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
             VALUES (9999, 'future', TRUE, x'00', 1)",
        )
        .unwrap();
    let err = open(dir.path(), Synchronous::Full, Clock::system())
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("newer than this binary"), "{err}");
}

#[tokio::test]
async fn an_append_writes_only_what_changed() {
    let dir = tempfile::TempDir::new().unwrap();
    let store = open(dir.path(), Synchronous::Full, Clock::system())
        .await
        .unwrap();
    let (s, t) = session("sesn_1");
    store.create_session(&s, &t, &[], None).await.unwrap();
    // Triggers log every write the store makes to the body and to the columns left alone.
    file(dir.path())
        .execute_batch(
            "CREATE TABLE touched (what TEXT);
             CREATE TRIGGER body_written AFTER UPDATE ON session_bodies BEGIN INSERT INTO touched VALUES ('body'); END;
             CREATE TRIGGER status_written AFTER UPDATE OF status, engine, usage ON sessions
                 BEGIN INSERT INTO touched VALUES ('columns'); END;",
        )
        .unwrap();
    let touched = |dir: &Path| -> Vec<String> {
        let c = file(dir);
        let mut stmt = c.prepare("SELECT what FROM touched").unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let (rec, events) = store
        .transact(
            "sesn_1",
            &Writer::Client,
            Box::new(|rec| {
                rec.updated_at += 1;
                Ok(TxnOutput {
                    events: vec![event()],
                    ..Default::default()
                })
            }),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!((rec.last_seq, events.len()), (1, 1));
    assert_eq!(touched(dir.path()), Vec::<String>::new());
    store
        .transact(
            "sesn_1",
            &Writer::Client,
            Box::new(|rec| {
                rec.body = r#"{"title":"new"}"#.into();
                rec.status = "running".into();
                Ok(TxnOutput::default())
            }),
        )
        .await
        .unwrap();
    assert_eq!(touched(dir.path()), ["columns", "body"]);
    let s = store.get_session_by_id("sesn_1").await.unwrap().unwrap();
    assert_eq!(
        (&*s.body, s.status.as_str(), s.last_seq),
        (r#"{"title":"new"}"#, "running", 1)
    );
}

#[tokio::test]
async fn synchronous_is_full_unless_normal_is_asked_for() {
    for (mode, level) in [(Synchronous::Full, 2), (Synchronous::Normal, 1)] {
        let dir = tempfile::TempDir::new().unwrap();
        let store = open(dir.path(), mode, Clock::system()).await.unwrap();
        let read =
            |c: &Connection| Ok(c.query_row("PRAGMA synchronous", [], |r| r.get::<_, i64>(0))?);
        assert_eq!(store.db.write(read).await.unwrap(), level, "{mode:?}");
        assert_eq!(store.db.read(read).await.unwrap(), level, "{mode:?}");
    }
    assert_eq!(
        "NORMAL".parse::<Synchronous>().unwrap(),
        Synchronous::Normal
    );
    assert!("off".parse::<Synchronous>().is_err());
}

/// A store's threads over a scratch table `t`, with the writer held busy until the returned
/// sender is dropped (so the jobs sent meanwhile wait, and run as one batch).
async fn busy_writer(dir: &Path) -> (Db, std::sync::mpsc::Sender<()>, tokio::task::JoinHandle<()>) {
    let path = dir.join("t.db");
    let writer = Connection::open(&path).unwrap();
    writer
        .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (v INTEGER)")
        .unwrap();
    let db = Db::start(writer, vec![Connection::open(&path).unwrap()]).unwrap();
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (started, running) = tokio::sync::oneshot::channel();
    let blocker = {
        let db = db.clone();
        tokio::spawn(async move {
            db.write(move |_| {
                let _ = started.send(());
                let _ = held.recv();
                Ok(())
            })
            .await
            .unwrap();
        })
    };
    running.await.unwrap();
    (db, release, blocker)
}

fn insert(v: i64) -> impl FnOnce(&Connection) -> crate::StoreResult<()> + Send + 'static {
    move |c| {
        c.execute("INSERT INTO t (v) VALUES (?1)", [v])?;
        Ok(())
    }
}

fn values(c: &Connection) -> crate::StoreResult<Vec<i64>> {
    let mut stmt = c.prepare("SELECT v FROM t ORDER BY v")?;
    Ok(stmt
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?)
}

/// Polls `fut` once, so its job is queued, and hands it back to be awaited later.
async fn queued<F: std::future::Future>(fut: F) -> std::pin::Pin<Box<F>> {
    let mut fut = Box::pin(fut);
    tokio::select! {
        biased;
        _ = &mut fut => unreachable!("the writer is busy"),
        _ = std::future::ready(()) => {}
    }
    fut
}

#[tokio::test]
async fn a_failed_job_leaves_its_batch_alone() {
    let dir = tempfile::TempDir::new().unwrap();
    let (db, release, blocker) = busy_writer(dir.path()).await;
    // All three wait behind the busy writer, so they run as one transaction.
    let a = queued(db.write(insert(1))).await;
    let b = queued(db.write(|c| {
        insert(2)(c)?;
        Err::<(), _>(StoreError::Conflict("no".into()))
    }))
    .await;
    let c = queued(db.write(insert(3))).await;
    drop(release);
    blocker.await.unwrap();
    a.await.unwrap();
    assert!(matches!(b.await, Err(StoreError::Conflict(_))));
    c.await.unwrap();
    assert_eq!(db.read(values).await.unwrap(), [1, 3]);
}

#[tokio::test]
async fn a_job_whose_caller_left_before_it_started_is_skipped() {
    let dir = tempfile::TempDir::new().unwrap();
    let (db, release, blocker) = busy_writer(dir.path()).await;
    // Queued, then dropped: its caller has gone before the writer got to it.
    drop(queued(db.write(insert(1))).await);
    drop(release);
    blocker.await.unwrap();
    db.write(insert(2)).await.unwrap();
    assert_eq!(db.read(values).await.unwrap(), [2]);
}
