//! The shared store suite: every method of the `Store` trait, case by case, against SQLite and
//! Postgres, checking the contract its doc comment states (never the SQL behind it). A new
//! backend passes this suite or it is not a `Store`.

use std::sync::Arc;

use mast::domain::agent::{Agent, AgentCreate};
use mast::domain::environment::Environment;
use mast::domain::ids::new_id;
use mast::domain::time::{self, Micros};
use mast::store::{
    Direction, NewEvent, Scan, SessionRecord, SessionTxn, Store, ThreadRecord, TxnOutput,
    WorkRecord, WorkTxn, Writer,
};
use serde_json::{Value, json};

use crate::support::{Backend, Options, fresh_postgres_database, test_config};

mod agents;
mod bodies;
mod deployments;
mod environments;
mod events;
mod files;
// Hooks.
mod fork;
mod history;
mod hooks;
mod keys;
mod leases;
mod memory;
mod ops;
mod schema;
mod sessions;
mod skills;
mod threads;
mod transact;
mod transact_from;
mod vaults;
mod webhooks;
mod work;

/// The workspace most cases use.
pub const WS: &str = "wrkspc_store_suite";

/// A fresh, empty, migrated store of `b` (and the directory it lives in).
pub async fn open(b: Backend) -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::TempDir::new().unwrap();
    let url = match b {
        Backend::Sqlite => None,
        Backend::Postgres => Some(fresh_postgres_database().await),
    };
    let store = mast::open_store(&test_config(
        dir.path().to_path_buf(),
        url,
        &Options::default(),
    ))
    .await
    .unwrap();
    (store, dir)
}

/// Two stores on one fresh, empty, migrated database of `b`, as two processes (replicas)
/// open it (and the directory it lives in).
pub async fn open_twice(b: Backend) -> (Arc<dyn Store>, Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::TempDir::new().unwrap();
    let url = match b {
        Backend::Sqlite => None,
        Backend::Postgres => Some(fresh_postgres_database().await),
    };
    let config = test_config(dir.path().to_path_buf(), url, &Options::default());
    let first = mast::open_store(&config).await.unwrap();
    let second = mast::open_store(&config).await.unwrap();
    (first, second, dir)
}

/// An idle session row of `WS` created at `at`, using agent `agent_x` v1 and `env_x`.
pub fn session_rec(id: &str, at: Micros) -> SessionRecord {
    SessionRecord {
        id: id.into(),
        workspace_id: WS.into(),
        agent_id: "agent_x".into(),
        agent_version: 1,
        environment_id: "env_x".into(),
        status: "idle".into(),
        body: json!({"title": id, "metadata": {}}).to_string().into(),
        usage: json!({"input_tokens": 0}).to_string(),
        active_micros: 0,
        running_since: None,
        last_seq: 0,
        engine: json!({}).to_string(),
        created_at: at,
        updated_at: at,
        archived_at: None,
        terminated_at: None,
        workflow_deadline_at: None,
        version: 0,
        lease_owner: None,
        lease_expires_at: None,
    }
}

/// The primary thread of session `session_id`.
pub fn thread_rec(session_id: &str, id: &str, at: Micros) -> ThreadRecord {
    ThreadRecord {
        id: id.into(),
        session_id: session_id.into(),
        parent_thread_id: None,
        spawning_event_id: None,
        status: "idle".into(),
        body: json!({"agent_name": "x"}).to_string(),
        created_at: at,
        updated_at: at,
        archived_at: None,
    }
}

/// Creates `rec` with a primary thread `sthr_<id>` and no events.
pub async fn create(store: &dyn Store, rec: &SessionRecord) {
    let thread = thread_rec(&rec.id, &format!("sthr_{}", rec.id), rec.created_at);
    store.create_session(rec, &thread, &[], None).await.unwrap();
}

/// Creates an idle session `id` of `WS`, created now.
pub async fn session(store: &dyn Store, id: &str) {
    create(store, &session_rec(id, crate::support::now())).await;
}

/// A processed event of `kind` with a fresh id.
pub fn event(kind: &str) -> NewEvent {
    NewEvent {
        id: new_id("sevt"),
        thread_id: None,
        kind: kind.into(),
        body: json!({"n": kind}),
        internal: None,
        answers: None,
        processed_at: Some(crate::support::now()),
    }
}

/// A queued (not yet processed) event of `kind`.
pub fn queued(kind: &str) -> NewEvent {
    NewEvent {
        processed_at: None,
        ..event(kind)
    }
}

/// A transaction that only appends `events`.
pub fn append(events: Vec<NewEvent>) -> SessionTxn {
    Box::new(move |_| {
        Ok(TxnOutput {
            events,
            ..Default::default()
        })
    })
}

/// A transaction returning `out` and changing nothing in the row.
pub fn output(out: TxnOutput) -> SessionTxn {
    Box::new(move |_| Ok(out))
}

/// A transaction that sets the session's status.
pub fn set_status(status: &'static str) -> SessionTxn {
    Box::new(move |rec| {
        rec.status = status.into();
        Ok(TxnOutput::default())
    })
}

/// Runs `f` as a client on `session_id`, which must exist.
pub async fn client_txn(
    store: &dyn Store,
    session_id: &str,
    f: SessionTxn,
) -> (SessionRecord, Vec<mast::store::EventRecord>) {
    store
        .transact(session_id, &Writer::Client, f)
        .await
        .unwrap()
        .expect("session exists")
}

/// A work-queue transaction that applies `f` and never fails.
pub fn work_txn(f: impl FnOnce(&mut WorkRecord) + Send + 'static) -> WorkTxn {
    Box::new(move |w| {
        f(w);
        Ok(())
    })
}

/// An agent `id` at `version` named `name`, created at `created`.
pub fn agent(id: &str, version: i64, name: &str, created: Micros) -> Agent {
    let spec: AgentCreate =
        serde_json::from_value(json!({"name": name, "model": "mast-scripted"})).unwrap();
    spec.into_spec().unwrap().into_agent(
        id,
        version,
        None,
        time::format(created),
        time::format(created),
    )
}

/// A cloud environment `id` named `name`.
pub fn environment(id: &str, name: &str) -> Environment {
    let now = time::format(crate::support::now());
    serde_json::from_value(json!({
        "type": "environment",
        "id": id,
        "name": name,
        "description": null,
        "config": mast::domain::environment::EnvironmentConfig::default_cloud(),
        "metadata": {"k": "v"},
        "scope": "organization",
        "created_at": now,
        "updated_at": now,
        "archived_at": null,
    }))
    .unwrap()
}

/// A scan from the start in `direction`.
pub fn scan<K>(direction: Direction, limit: i64) -> Scan<K> {
    Scan {
        after: None,
        direction,
        limit,
    }
}

/// A scan past `after` in `direction`.
pub fn scan_after<K>(after: K, direction: Direction, limit: i64) -> Scan<K> {
    Scan {
        after: Some(after),
        direction,
        limit,
    }
}

/// A stored JSON text as a value: backends may store JSON in any equivalent form.
pub fn js(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("stored JSON {text:?}: {e}"))
}

/// Asserts two session rows are the same, JSON columns compared as values.
pub fn assert_same_session(got: &SessionRecord, want: &SessionRecord) {
    let norm = |r: &SessionRecord| {
        let mut r = r.clone();
        r.body = js(&r.body).to_string().into();
        r.usage = js(&r.usage).to_string();
        r.engine = js(&r.engine).to_string();
        // The store's own token, which the `transact_from` cases check.
        r.version = 0;
        r
    };
    assert_eq!(norm(got), norm(want));
}

/// Asserts two thread rows are the same, the body compared as a value.
pub fn assert_same_thread(got: &ThreadRecord, want: &ThreadRecord) {
    let norm = |r: &ThreadRecord| {
        let mut r = r.clone();
        r.body = js(&r.body).to_string();
        r
    };
    assert_eq!(norm(got), norm(want));
}

/// The ids of `items`.
pub fn ids<T>(items: &[T], id: impl Fn(&T) -> &str) -> Vec<String> {
    items.iter().map(|t| id(t).to_string()).collect()
}
