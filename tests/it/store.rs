//! The shared store suite: the same cases against SQLite and Postgres through the `Store`
//! trait, for the guarantees the engine relies on.

use std::sync::Arc;

use mast::domain::time;
use mast::store::{NewEvent, SessionRecord, Store, StoreError, ThreadRecord, TxnOutput, Writer};
use serde_json::json;

use crate::backend_tests;
use crate::support::{Backend, Options, fresh_postgres_database, test_config};

backend_tests!(
    sequences_are_contiguous_under_concurrent_appends,
    leases_are_exclusive_and_fence_writes,
    answers_are_unique,
    agent_versions_conflict,
    failed_transactions_change_nothing
);

async fn open(b: Backend) -> (Arc<dyn Store>, tempfile::TempDir) {
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

async fn session(store: &dyn Store, id: &str) {
    let now = time::now();
    let rec = SessionRecord {
        id: id.into(),
        workspace_id: "wrkspc_default".into(),
        agent_id: "agent_x".into(),
        agent_version: 1,
        environment_id: "env_x".into(),
        status: "idle".into(),
        body: "{}".into(),
        usage: "{}".into(),
        active_micros: 0,
        running_since: None,
        last_seq: 0,
        engine: "{}".into(),
        created_at: now,
        updated_at: now,
        archived_at: None,
        terminated_at: None,
        lease_owner: None,
        lease_expires_at: None,
    };
    let thread = ThreadRecord {
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
    store
        .create_session(&rec, &thread, &[], None)
        .await
        .unwrap();
}

fn event(kind: &str) -> NewEvent {
    NewEvent {
        id: mast::domain::ids::new_id("sevt"),
        thread_id: None,
        kind: kind.into(),
        body: json!({}),
        internal: None,
        answers: None,
        processed_at: Some(time::now()),
    }
}

fn append(events: Vec<NewEvent>) -> mast::store::SessionTxn {
    Box::new(move |_| {
        Ok(TxnOutput {
            events,
            ..Default::default()
        })
    })
}

async fn sequences_are_contiguous_under_concurrent_appends(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_a").await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                store
                    .transact(
                        "sesn_a",
                        &Writer::Client,
                        append(vec![event("user.message"), event("session.status_running")]),
                    )
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let all = store.events_after("sesn_a", 0, &[], 1000).await.unwrap();
    let seqs: Vec<i64> = all.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=160).collect::<Vec<_>>());
    // Each transaction's pair stays adjacent.
    for pair in all.chunks(2) {
        assert_eq!(pair[0].kind, "user.message");
        assert_eq!(pair[1].kind, "session.status_running");
    }
    assert_eq!(
        store
            .get_session_by_id("sesn_a")
            .await
            .unwrap()
            .unwrap()
            .last_seq,
        160
    );
}

async fn leases_are_exclusive_and_fence_writes(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_l").await;
    let now = time::now();
    assert!(
        store
            .claim_lease("sesn_l", "one", now, now + 1_000_000)
            .await
            .unwrap()
    );
    assert!(
        !store
            .claim_lease("sesn_l", "two", now, now + 1_000_000)
            .await
            .unwrap()
    );
    assert!(
        store
            .claim_lease("sesn_l", "one", now, now + 2_000_000)
            .await
            .unwrap(),
        "re-claim by the holder"
    );
    let one = Writer::Runner {
        owner: "one".into(),
    };
    let two = Writer::Runner {
        owner: "two".into(),
    };
    store
        .transact("sesn_l", &one, append(vec![event("agent.message")]))
        .await
        .unwrap();
    let r = store
        .transact("sesn_l", &two, append(vec![event("agent.message")]))
        .await;
    assert!(
        matches!(r, Err(StoreError::Fenced(_))),
        "a runner without the lease cannot write"
    );
    // After expiry another owner takes over and the old one is fenced off.
    let later = now + 3_000_000;
    assert!(
        store
            .claim_lease("sesn_l", "two", later, later + 1_000_000)
            .await
            .unwrap()
    );
    assert!(matches!(
        store
            .transact("sesn_l", &one, append(vec![event("agent.message")]))
            .await,
        Err(StoreError::Fenced(_))
    ));
    assert!(!store.renew_lease("sesn_l", "one", later + 5).await.unwrap());
    assert!(store.renew_lease("sesn_l", "two", later + 5).await.unwrap());
    store.release_lease("sesn_l", "two").await.unwrap();
    assert!(
        store
            .claim_lease("sesn_l", "three", later, later + 1)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .events_after("sesn_l", 0, &["agent.message"], 100)
            .await
            .unwrap()
            .len(),
        1
    );
    // Active sessions without a live lease are found by the reaper query.
    let mark_running: mast::store::SessionTxn = Box::new(|rec| {
        rec.status = "running".into();
        Ok(TxnOutput::default())
    });
    store
        .transact("sesn_l", &Writer::Client, mark_running)
        .await
        .unwrap();
    assert!(
        store
            .sessions_needing_runner(later, 10)
            .await
            .unwrap()
            .is_empty(),
        "lease still live"
    );
    assert_eq!(
        store.sessions_needing_runner(later + 10, 10).await.unwrap(),
        vec!["sesn_l".to_string()]
    );
    assert_eq!(store.clear_foreign_leases("four").await.unwrap(), 1);
}

async fn answers_are_unique(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_u").await;
    let answer = |kind: &'static str| {
        let mut e = event("user.custom_tool_result");
        e.answers = Some(("sevt_tool".into(), kind));
        e
    };
    store
        .transact("sesn_u", &Writer::Client, append(vec![answer("result")]))
        .await
        .unwrap();
    let r = store
        .transact("sesn_u", &Writer::Client, append(vec![answer("result")]))
        .await;
    assert!(matches!(r, Err(StoreError::Conflict(_))));
    store
        .transact(
            "sesn_u",
            &Writer::Client,
            append(vec![answer("confirmation")]),
        )
        .await
        .unwrap();
    assert!(
        store
            .has_answer("sesn_u", "sevt_tool", "result")
            .await
            .unwrap()
    );
    assert!(
        !store
            .has_answer("sesn_u", "sevt_other", "result")
            .await
            .unwrap()
    );
}

async fn agent_versions_conflict(b: Backend) {
    let (store, _d) = open(b).await;
    let spec: mast::domain::agent::AgentCreate =
        serde_json::from_value(json!({"name": "a", "model": "mast-scripted"})).unwrap();
    let now = time::format(time::now());
    let v1 = spec
        .into_spec()
        .unwrap()
        .into_agent("agent_v", 1, None, now.clone(), now.clone());
    store.insert_agent("wrkspc_default", &v1).await.unwrap();
    let mut v2 = v1.clone();
    v2.version = 2;
    v2.name = "b".into();
    store
        .append_agent_version("wrkspc_default", &v2, 1)
        .await
        .unwrap();
    let mut stale = v1.clone();
    stale.version = 2;
    assert!(matches!(
        store
            .append_agent_version("wrkspc_default", &stale, 1)
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(
        store
            .get_agent("wrkspc_default", "agent_v", None)
            .await
            .unwrap()
            .unwrap()
            .name,
        "b"
    );
    assert_eq!(
        store
            .get_agent("wrkspc_default", "agent_v", Some(1))
            .await
            .unwrap()
            .unwrap()
            .name,
        "a"
    );
    assert!(
        store
            .get_agent("other_ws", "agent_v", None)
            .await
            .unwrap()
            .is_none()
    );
}

async fn failed_transactions_change_nothing(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_f").await;
    let failing: mast::store::SessionTxn = Box::new(|rec| {
        rec.status = "running".into();
        Err(StoreError::Conflict("no".into()))
    });
    assert!(
        store
            .transact("sesn_f", &Writer::Client, failing)
            .await
            .is_err()
    );
    let rec = store.get_session_by_id("sesn_f").await.unwrap().unwrap();
    assert_eq!(rec.status, "idle");
    assert_eq!(rec.last_seq, 0);
    assert!(
        store
            .transact("sesn_missing", &Writer::Client, append(vec![event("x")]))
            .await
            .unwrap()
            .is_none()
    );
}
