//! Sessions: creation with their first events and work, reads, lists and deletion.

use mast::store::{Deleted, Direction, SessionFilter, SessionRecord, WorkRecord};

use super::{
    WS, assert_same_session, assert_same_thread, client_txn, create, event, ids, open, scan,
    scan_after, session_rec, set_status, thread_rec,
};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    create_session_writes_row_thread_events_and_work_at_once,
    sessions_are_read_within_their_workspace,
    last_seqs_leave_out_missing_sessions,
    list_sessions_applies_every_filter,
    list_sessions_scans_both_ways,
    running_sessions_are_not_deleted,
);

async fn create_session_writes_row_thread_events_and_work_at_once(b: Backend) {
    let (store, _d) = open(b).await;
    let now = crate::support::now();
    let mut rec = session_rec("sesn_c", now);
    rec.environment_id = "env_sh".into();
    let thread = thread_rec("sesn_c", "sthr_c", now);
    let events = vec![event("session.status_idle"), event("user.message")];
    let work = WorkRecord::queued("work_c".into(), WS, "env_sh", "sesn_c", now);
    let out = store
        .create_session(&rec, &thread, &events, Some(&work))
        .await
        .unwrap();
    assert_eq!(out.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(out[1].id, events[1].id);
    assert_eq!(out[1].kind, "user.message");
    assert_eq!(out[1].body, events[1].body);
    assert_eq!(out[1].session_id, "sesn_c");

    let got = store.get_session(WS, "sesn_c").await.unwrap().unwrap();
    let mut want = rec.clone();
    want.last_seq = 2;
    assert_same_session(&got, &want);
    assert_same_thread(
        &store.get_thread("sesn_c", "sthr_c").await.unwrap().unwrap(),
        &thread,
    );
    let stored = store.events_after("sesn_c", 0, &[], 10).await.unwrap();
    assert_eq!(stored, out);
    let w = store.get_work("env_sh", "work_c").await.unwrap().unwrap();
    assert_eq!(w.state, "queued");
    assert_eq!(w.session_id, "sesn_c");
    assert_eq!(w.workspace_id, WS);

    // A second session with the same id fails whole: no stray thread or work.
    let thread2 = thread_rec("sesn_c", "sthr_c2", now);
    let work2 = WorkRecord::queued("work_c2".into(), WS, "env_sh", "sesn_c", now);
    assert!(
        store
            .create_session(&rec, &thread2, &[], Some(&work2))
            .await
            .is_err()
    );
    assert_eq!(store.get_thread("sesn_c", "sthr_c2").await.unwrap(), None);
    assert_eq!(store.get_work("env_sh", "work_c2").await.unwrap(), None);
}

async fn sessions_are_read_within_their_workspace(b: Backend) {
    let (store, _d) = open(b).await;
    let mut rec = session_rec("sesn_r", crate::support::now());
    rec.status = "terminated".into();
    rec.active_micros = 42;
    rec.running_since = Some(7);
    rec.terminated_at = Some(8);
    rec.engine = r#"{"pending": ["sevt_1"]}"#.into();
    rec.usage = r#"{"input_tokens": 3, "output_tokens": 4}"#.into();
    create(store.as_ref(), &rec).await;
    assert_same_session(
        &store.get_session(WS, "sesn_r").await.unwrap().unwrap(),
        &rec,
    );
    assert_same_session(
        &store.get_session_by_id("sesn_r").await.unwrap().unwrap(),
        &rec,
    );
    assert_eq!(
        store.get_session("wrkspc_other", "sesn_r").await.unwrap(),
        None
    );
    assert_eq!(store.get_session(WS, "sesn_none").await.unwrap(), None);
    assert_eq!(store.get_session_by_id("sesn_none").await.unwrap(), None);
}

async fn last_seqs_leave_out_missing_sessions(b: Backend) {
    let (store, _d) = open(b).await;
    super::session(store.as_ref(), "sesn_a").await;
    super::session(store.as_ref(), "sesn_b").await;
    client_txn(
        store.as_ref(),
        "sesn_a",
        super::append(vec![event("x"), event("y"), event("z")]),
    )
    .await;
    let mut got = store
        .last_seqs(&["sesn_a".into(), "sesn_b".into(), "sesn_none".into()])
        .await
        .unwrap();
    got.sort();
    assert_eq!(got, [("sesn_a".to_string(), 3), ("sesn_b".into(), 0)]);
    assert!(store.last_seqs(&[]).await.unwrap().is_empty());
}

/// Sessions for the filter cases: (id, agent, version, status, archived, created second).
async fn filter_fixture(store: &dyn mast::store::Store) -> Vec<SessionRecord> {
    let base = 1_700_000_000_000_000;
    let rows = [
        ("sesn_1", "agent_a", 1, "idle", false, 1),
        ("sesn_2", "agent_a", 2, "running", false, 2),
        ("sesn_3", "agent_b", 1, "terminated", false, 3),
        ("sesn_4", "agent_a", 1, "rescheduling", true, 4),
        ("sesn_5", "agent_b", 2, "idle", false, 5),
    ];
    let mut out = Vec::new();
    for (id, agent, version, status, archived, sec) in rows {
        let mut r = session_rec(id, base + sec * 1_000_000);
        r.agent_id = agent.into();
        r.agent_version = version;
        r.status = status.into();
        r.archived_at = archived.then_some(base + 10_000_000);
        // Sessions 2 and 4 attached memory store `memstore_m` (5 another one).
        let attached = match id {
            "sesn_2" | "sesn_4" => vec!["memstore_m"],
            "sesn_5" => vec!["memstore_other"],
            _ => vec![],
        };
        let resources: Vec<serde_json::Value> = attached
            .iter()
            .map(|m| serde_json::json!({"type": "memory_store", "memory_store_id": m}))
            .chain([serde_json::json!({"type": "file", "file_id": "memstore_m"})])
            .collect();
        r.body = serde_json::json!({"title": id, "metadata": {}, "resources": resources})
            .to_string()
            .into();
        create(store, &r).await;
        out.push(r);
    }
    let mut other = session_rec("sesn_0", base);
    other.workspace_id = "wrkspc_other".into();
    create(store, &other).await;
    out
}

async fn list_sessions_applies_every_filter(b: Backend) {
    let (store, _d) = open(b).await;
    let rows = filter_fixture(store.as_ref()).await;
    let at = |i: usize| rows[i - 1].created_at;
    let list = |f: SessionFilter| {
        let store = store.clone();
        async move {
            let got = store
                .list_sessions(WS, &f, &scan(Direction::Ascending, 100))
                .await
                .unwrap();
            ids(&got, |s| &s.id)
        }
    };
    assert_eq!(
        list(SessionFilter::default()).await,
        ["sesn_1", "sesn_2", "sesn_3", "sesn_5"],
        "archived and other workspaces left out"
    );
    let all = SessionFilter {
        include_archived: true,
        ..Default::default()
    };
    assert_eq!(
        list(all.clone()).await,
        ["sesn_1", "sesn_2", "sesn_3", "sesn_4", "sesn_5"]
    );
    assert_eq!(
        list(SessionFilter {
            agent_id: Some("agent_a".into()),
            ..all.clone()
        })
        .await,
        ["sesn_1", "sesn_2", "sesn_4"]
    );
    assert_eq!(
        list(SessionFilter {
            agent_id: Some("agent_a".into()),
            agent_version: Some(1),
            ..all.clone()
        })
        .await,
        ["sesn_1", "sesn_4"]
    );
    assert_eq!(
        list(SessionFilter {
            agent_version: Some(2),
            ..Default::default()
        })
        .await,
        ["sesn_2", "sesn_5"]
    );
    assert_eq!(
        list(SessionFilter {
            statuses: vec!["idle".into(), "rescheduling".into()],
            ..all.clone()
        })
        .await,
        ["sesn_1", "sesn_4", "sesn_5"]
    );
    assert_eq!(
        list(SessionFilter {
            statuses: vec!["running".into()],
            ..Default::default()
        })
        .await,
        ["sesn_2"]
    );
    assert_eq!(
        list(SessionFilter {
            created_gt: Some(at(2)),
            created_lt: Some(at(5)),
            ..all.clone()
        })
        .await,
        ["sesn_3", "sesn_4"]
    );
    assert_eq!(
        list(SessionFilter {
            created_gte: Some(at(2)),
            created_lte: Some(at(4)),
            ..all.clone()
        })
        .await,
        ["sesn_2", "sesn_3", "sesn_4"]
    );
    assert_eq!(
        list(SessionFilter {
            memory_store_id: Some("memstore_m".into()),
            ..all.clone()
        })
        .await,
        ["sesn_2", "sesn_4"],
        "only sessions that attached the store, not a file resource naming the same id"
    );
    assert_eq!(
        list(SessionFilter {
            memory_store_id: Some("memstore_m".into()),
            ..Default::default()
        })
        .await,
        ["sesn_2"]
    );
    assert_eq!(
        list(SessionFilter {
            agent_id: Some("agent_b".into()),
            statuses: vec!["idle".into()],
            created_gte: Some(at(3)),
            ..Default::default()
        })
        .await,
        ["sesn_5"]
    );
    assert!(
        list(SessionFilter {
            agent_id: Some("agent_none".into()),
            ..all
        })
        .await
        .is_empty()
    );
}

async fn list_sessions_scans_both_ways(b: Backend) {
    let (store, _d) = open(b).await;
    filter_fixture(store.as_ref()).await;
    let f = SessionFilter::default();
    let page = |s| {
        let store = store.clone();
        let f = f.clone();
        async move { ids(&store.list_sessions(WS, &f, &s).await.unwrap(), |s| &s.id) }
    };
    assert_eq!(
        page(scan(Direction::Descending, 2)).await,
        ["sesn_5", "sesn_3"]
    );
    // Keyset pages skip rows the filter leaves out and are never short before the end.
    assert_eq!(
        page(scan_after("sesn_3".to_string(), Direction::Descending, 2)).await,
        ["sesn_2", "sesn_1"]
    );
    assert_eq!(
        page(scan_after("sesn_3".to_string(), Direction::Ascending, 2)).await,
        ["sesn_5"]
    );
    assert_eq!(
        page(scan_after("sesn_1".to_string(), Direction::Ascending, 2)).await,
        ["sesn_2", "sesn_3"]
    );
    assert!(
        page(scan_after("sesn_5".to_string(), Direction::Ascending, 2))
            .await
            .is_empty()
    );
}

async fn running_sessions_are_not_deleted(b: Backend) {
    let (store, _d) = open(b).await;
    for id in ["sesn_run", "sesn_res", "sesn_idle", "sesn_term"] {
        super::session(store.as_ref(), id).await;
        client_txn(store.as_ref(), id, super::append(vec![event("x")])).await;
    }
    client_txn(store.as_ref(), "sesn_run", set_status("running")).await;
    client_txn(store.as_ref(), "sesn_res", set_status("rescheduling")).await;
    client_txn(store.as_ref(), "sesn_term", set_status("terminated")).await;
    for id in ["sesn_run", "sesn_res"] {
        assert_eq!(
            store.delete_session(WS, id).await.unwrap(),
            Deleted::Busy,
            "{id}"
        );
        assert!(store.get_session(WS, id).await.unwrap().is_some());
        assert_eq!(store.events_after(id, 0, &[], 10).await.unwrap().len(), 1);
    }
    assert_eq!(
        store
            .delete_session("wrkspc_other", "sesn_idle")
            .await
            .unwrap(),
        Deleted::Missing
    );
    for id in ["sesn_idle", "sesn_term"] {
        assert_eq!(store.delete_session(WS, id).await.unwrap(), Deleted::Yes);
        assert_eq!(store.get_session(WS, id).await.unwrap(), None);
        assert!(store.events_after(id, 0, &[], 10).await.unwrap().is_empty());
        assert!(
            store
                .list_threads(id, &scan(Direction::Ascending, 10))
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            store.delete_session(WS, id).await.unwrap(),
            Deleted::Missing
        );
    }
    // A deleted session's id is free again, with a fresh log.
    super::session(store.as_ref(), "sesn_idle").await;
    let (_, ev) = client_txn(store.as_ref(), "sesn_idle", super::append(vec![event("y")])).await;
    assert_eq!(ev[0].seq, 1);
}
