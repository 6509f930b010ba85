//! The self-hosted work queue: polls, item transactions, counts, the reaper's requeues and
//! stops.

use mast::store::{Direction, ExpiredWork, StoppedWork, StoreError, WorkRecord};

use super::{WS, client_txn, ids, open, output, scan, scan_after, session, work_txn};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    polls_claim_the_oldest_unpolled_item_once,
    unacknowledged_polls_are_reclaimed_with_a_new_token,
    work_transactions_write_back_or_change_nothing,
    work_is_read_and_listed_per_environment,
    work_stats_count_the_queue_and_its_workers,
    expired_work_is_requeued_or_stopped,
    stopped_items_wait_for_a_requeue_check,
    stopping_a_sessions_work,
);

const SEC: i64 = 1_000_000;

/// Queues item `id` for a new session `sesn_<id>` in `env` at `at`.
async fn queue(store: &dyn mast::store::Store, env: &str, id: &str, at: i64) {
    let sid = format!("sesn_{id}");
    session(store, &sid).await;
    client_txn(
        store,
        &sid,
        output(mast::store::TxnOutput {
            ensure_work: Some(WorkRecord::queued(id.into(), WS, env, &sid, at)),
            ..Default::default()
        }),
    )
    .await;
}

/// Moves item `id` of `env` to `state`, polled by `w` and held until `until`.
async fn hold(
    store: &dyn mast::store::Store,
    env: &str,
    id: &str,
    state: &'static str,
    until: i64,
) {
    store
        .transact_work(
            env,
            id,
            work_txn(move |w| {
                w.state = state.into();
                w.polled_at = Some(until - 2 * SEC);
                w.polled_by = Some("w".into());
                w.acknowledged_at = Some(until - SEC);
                w.lease_expires_at = Some(until);
            }),
        )
        .await
        .unwrap()
        .unwrap();
}

async fn polls_claim_the_oldest_unpolled_item_once(b: Backend) {
    let (store, _d) = open(b).await;
    let now = crate::support::now();
    queue(store.as_ref(), "env_a", "work_new", now - 5 * SEC).await;
    queue(store.as_ref(), "env_a", "work_old", now - 10 * SEC).await;
    queue(store.as_ref(), "env_b", "work_0", now - 20 * SEC).await;
    let first = store
        .poll_work("env_a", Some("w1"), now, now - 60 * SEC, "tok1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        first.id, "work_old",
        "oldest first (not smallest id), only this environment's"
    );
    assert_eq!(first.state, "queued");
    assert_eq!(first.polled_at, Some(now));
    assert_eq!(first.polled_by.as_deref(), Some("w1"));
    assert_eq!(first.token_hash.as_deref(), Some("tok1"));
    assert_eq!(
        store.get_work("env_a", "work_old").await.unwrap().unwrap(),
        first
    );
    assert_eq!(
        store.work_for_token("tok1").await.unwrap().as_ref(),
        Some(&first)
    );
    let second = store
        .poll_work("env_a", None, now, now - 60 * SEC, "tok2")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.id, "work_new");
    assert_eq!(second.polled_by, None, "an anonymous worker");
    assert!(
        store
            .poll_work("env_a", Some("w1"), now, now - 60 * SEC, "tok3")
            .await
            .unwrap()
            .is_none(),
        "nothing left to claim"
    );
    assert_eq!(store.work_for_token("tok3").await.unwrap(), None);
    assert!(
        store
            .poll_work("env_none", Some("w1"), now, now, "tok4")
            .await
            .unwrap()
            .is_none()
    );
}

async fn unacknowledged_polls_are_reclaimed_with_a_new_token(b: Backend) {
    let (store, _d) = open(b).await;
    let now = crate::support::now();
    queue(store.as_ref(), "env_a", "work_1", now - 10 * SEC).await;
    queue(store.as_ref(), "env_a", "work_2", now - 5 * SEC).await;
    store
        .poll_work("env_a", Some("w1"), now, now - 60 * SEC, "tok1")
        .await
        .unwrap()
        .unwrap();
    store
        .poll_work("env_a", Some("w1"), now, now - 60 * SEC, "tok2")
        .await
        .unwrap()
        .unwrap();
    // work_2 is acknowledged (it left `queued`); work_1 never was.
    hold(
        store.as_ref(),
        "env_a",
        "work_2",
        "starting",
        now + 60 * SEC,
    )
    .await;
    let later = now + 30 * SEC;
    let again = store
        .poll_work("env_a", Some("w2"), later, later - 10 * SEC, "tok5")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.id, "work_1");
    assert_eq!(again.polled_by.as_deref(), Some("w2"));
    assert_eq!(again.polled_at, Some(later));
    assert_eq!(
        store.work_for_token("tok5").await.unwrap().map(|w| w.id),
        Some("work_1".into())
    );
    assert_eq!(
        store.work_for_token("tok1").await.unwrap(),
        None,
        "the next poll's token replaces the old one"
    );
    assert!(
        store
            .poll_work("env_a", Some("w2"), later, later - 10 * SEC, "tok6")
            .await
            .unwrap()
            .is_none(),
        "an acknowledged item is never reclaimed, a fresh poll not yet"
    );
}

async fn work_transactions_write_back_or_change_nothing(b: Backend) {
    let (store, _d) = open(b).await;
    let now = crate::support::now();
    queue(store.as_ref(), "env_a", "work_1", now).await;
    let got = store
        .transact_work(
            "env_a",
            "work_1",
            work_txn(move |w| {
                w.state = "active".into();
                w.metadata = r#"{"k":"v"}"#.into();
                w.updated_at = now + 1;
                w.acknowledged_at = Some(now + 1);
                w.started_at = Some(now + 2);
                w.latest_heartbeat_at = Some(now + 3);
                w.lease_expires_at = Some(now + 4);
                w.ttl_seconds = 77;
                w.polled_by = Some("w9".into());
                w.token_hash = Some("tok".into());
            }),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.state, "active");
    let stored = store.get_work("env_a", "work_1").await.unwrap().unwrap();
    let norm = |w: &WorkRecord| {
        let mut w = w.clone();
        w.metadata = super::js(&w.metadata).to_string();
        w
    };
    assert_eq!(norm(&stored), norm(&got));
    assert_eq!(stored.ttl_seconds, 77);
    assert_eq!(
        store.work_for_token("tok").await.unwrap().map(|w| w.id),
        Some("work_1".into())
    );

    let r = store
        .transact_work(
            "env_a",
            "work_1",
            Box::new(|w| {
                w.state = "stopped".into();
                Err(StoreError::Conflict("no".into()))
            }),
        )
        .await;
    assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
    assert_eq!(
        norm(&store.get_work("env_a", "work_1").await.unwrap().unwrap()),
        norm(&stored)
    );
    assert_eq!(
        store
            .transact_work("env_b", "work_1", work_txn(|_| {}))
            .await
            .unwrap(),
        None,
        "an item is reached through its own environment"
    );
    assert_eq!(
        store
            .transact_work("env_a", "work_none", work_txn(|_| {}))
            .await
            .unwrap(),
        None
    );
}

async fn work_is_read_and_listed_per_environment(b: Backend) {
    let (store, _d) = open(b).await;
    let now = crate::support::now();
    for id in ["work_a", "work_b", "work_c"] {
        queue(store.as_ref(), "env_a", id, now).await;
    }
    queue(store.as_ref(), "env_b", "work_z", now).await;
    assert_eq!(store.get_work("env_b", "work_a").await.unwrap(), None);
    let w = store.get_work("env_a", "work_a").await.unwrap().unwrap();
    assert_eq!(w.environment_id, "env_a");
    assert_eq!(w.session_id, "sesn_work_a");
    assert_eq!(w.created_at, now);
    let list = |s| {
        let store = store.clone();
        async move { ids(&store.list_work("env_a", &s).await.unwrap(), |w| &w.id) }
    };
    assert_eq!(
        list(scan(Direction::Ascending, 10)).await,
        ["work_a", "work_b", "work_c"]
    );
    assert_eq!(
        list(scan(Direction::Descending, 2)).await,
        ["work_c", "work_b"]
    );
    assert_eq!(
        list(scan_after("work_b".to_string(), Direction::Descending, 2)).await,
        ["work_a"]
    );
    assert_eq!(
        list(scan_after("work_a".to_string(), Direction::Ascending, 1)).await,
        ["work_b"]
    );
}

async fn work_stats_count_the_queue_and_its_workers(b: Backend) {
    let (store, _d) = open(b).await;
    let now = crate::support::now();
    assert_eq!(
        store.work_stats("env_a", now).await.unwrap(),
        Default::default()
    );
    queue(store.as_ref(), "env_a", "work_1", now - 30 * SEC).await;
    queue(store.as_ref(), "env_a", "work_2", now - 20 * SEC).await;
    queue(store.as_ref(), "env_a", "work_3", now - 10 * SEC).await;
    queue(store.as_ref(), "env_b", "work_9", now - 90 * SEC).await;
    let s = store.work_stats("env_a", now).await.unwrap();
    assert_eq!((s.depth, s.pending, s.workers_polling), (3, 0, 0));
    assert_eq!(s.oldest_queued_at, Some(now - 30 * SEC));

    // A poll moves an item from the depth to pending and makes its worker count.
    store
        .poll_work("env_a", Some("w1"), now, now - 60 * SEC, "t1")
        .await
        .unwrap()
        .unwrap();
    let s = store.work_stats("env_a", now).await.unwrap();
    assert_eq!((s.depth, s.pending, s.workers_polling), (2, 1, 1));
    assert_eq!(
        s.oldest_queued_at,
        Some(now - 30 * SEC),
        "pending is still queued"
    );
    // Anonymous workers count as one; a worker polling again is still one.
    store
        .poll_work("env_a", None, now, now - 60 * SEC, "t2")
        .await
        .unwrap();
    store
        .poll_work("env_a", Some("w1"), now, now - 60 * SEC, "t3")
        .await
        .unwrap();
    let s = store.work_stats("env_a", now).await.unwrap();
    assert_eq!((s.depth, s.pending, s.workers_polling), (0, 3, 2));
    // Held items leave the queue's counts.
    hold(store.as_ref(), "env_a", "work_1", "active", now + 60 * SEC).await;
    let s = store.work_stats("env_a", now).await.unwrap();
    assert_eq!((s.depth, s.pending), (0, 2));
    assert_eq!(s.oldest_queued_at, Some(now - 20 * SEC));
    // Polls of an empty queue still show a worker is there.
    store
        .poll_work("env_c", Some("w7"), now, now, "t4")
        .await
        .unwrap();
    let s = store.work_stats("env_c", now).await.unwrap();
    assert_eq!((s.depth, s.pending, s.workers_polling), (0, 0, 1));
    assert_eq!(s.oldest_queued_at, None);
    let s = store.work_stats("env_b", now).await.unwrap();
    assert_eq!((s.depth, s.workers_polling), (1, 0));
    assert_eq!(store.ops_counts().await.unwrap().queued_work, 3);
}

async fn expired_work_is_requeued_or_stopped(b: Backend) {
    let (store, _d) = open(b).await;
    let now = crate::support::now();
    for (env, id) in [
        ("env_a", "work_s"),
        ("env_a", "work_a"),
        ("env_b", "work_b"),
        ("env_a", "work_live"),
        ("env_a", "work_q"),
        ("env_c", "work_stop"),
    ] {
        queue(store.as_ref(), env, id, now - 60 * SEC).await;
    }
    hold(store.as_ref(), "env_a", "work_s", "starting", now - SEC).await;
    hold(store.as_ref(), "env_a", "work_a", "active", now - SEC).await;
    hold(store.as_ref(), "env_b", "work_b", "active", now - SEC).await;
    hold(
        store.as_ref(),
        "env_a",
        "work_live",
        "active",
        now + 60 * SEC,
    )
    .await;
    hold(store.as_ref(), "env_c", "work_stop", "stopping", now - SEC).await;
    assert_eq!(
        store.requeue_expired_work(now - 2 * SEC).await.unwrap(),
        ExpiredWork::default(),
        "nothing expired yet"
    );
    let out = store.requeue_expired_work(now).await.unwrap();
    assert_eq!(
        out.requeued_in,
        ["env_a", "env_b"],
        "each environment once, in order"
    );
    for (env, id) in [
        ("env_a", "work_s"),
        ("env_a", "work_a"),
        ("env_b", "work_b"),
    ] {
        let w = store.get_work(env, id).await.unwrap().unwrap();
        assert_eq!(w.state, "queued", "{id}");
        assert_eq!(w.polled_at, None, "{id} can be polled again");
        assert_eq!(w.polled_by, None, "{id}");
        assert_eq!(w.lease_expires_at, None, "{id}");
    }
    let again = store
        .poll_work("env_b", Some("w2"), now, 0, "tok_b")
        .await
        .unwrap()
        .map(|w| w.id);
    assert_eq!(
        again.as_deref(),
        Some("work_b"),
        "claimable as never polled"
    );
    let live = store.get_work("env_a", "work_live").await.unwrap().unwrap();
    assert_eq!(live.state, "active");
    let q = store.get_work("env_a", "work_q").await.unwrap().unwrap();
    assert_eq!(q.state, "queued");
    let stopped = store.get_work("env_c", "work_stop").await.unwrap().unwrap();
    assert_eq!(stopped.state, "stopped");
    assert!(stopped.stopped_at.is_some());
    let s = store.work_stats("env_a", now).await.unwrap();
    assert_eq!(s.depth, 3, "requeued items are waiting for a poll again");
    assert_eq!(
        store.requeue_expired_work(now).await.unwrap(),
        ExpiredWork::default(),
        "a second pass finds nothing"
    );
}

async fn stopped_items_wait_for_a_requeue_check(b: Backend) {
    let (store, _d) = open(b).await;
    let now = crate::support::now();
    for id in ["work_1", "work_2", "work_3"] {
        queue(store.as_ref(), "env_a", id, now).await;
    }
    assert!(
        store
            .work_needing_requeue_check(10)
            .await
            .unwrap()
            .is_empty()
    );
    // Stopped through a work transaction (a stop request).
    store
        .transact_work(
            "env_a",
            "work_1",
            work_txn(move |w| {
                w.state = "stopped".into();
                w.stop_requested_at = Some(now);
                w.stopped_at = Some(now);
            }),
        )
        .await
        .unwrap();
    // Stopped by the reaper when a wind-down's lease ran out.
    hold(store.as_ref(), "env_a", "work_2", "stopping", now - SEC).await;
    store.requeue_expired_work(now).await.unwrap();
    // A transaction that does not stop the item marks nothing.
    hold(store.as_ref(), "env_a", "work_3", "active", now + SEC).await;
    let mut got = store.work_needing_requeue_check(10).await.unwrap();
    got.sort_by(|a, b| a.work_id.cmp(&b.work_id));
    assert_eq!(
        got,
        [
            StoppedWork {
                work_id: "work_1".into(),
                session_id: "sesn_work_1".into()
            },
            StoppedWork {
                work_id: "work_2".into(),
                session_id: "sesn_work_2".into()
            },
        ]
    );
    assert_eq!(store.work_needing_requeue_check(1).await.unwrap().len(), 1);
    store.clear_requeue_check("work_1").await.unwrap();
    let got = store.work_needing_requeue_check(10).await.unwrap();
    assert_eq!(ids(&got, |w| &w.work_id), ["work_2"]);
    // Touching a stopped item again does not ask for a second check.
    store
        .transact_work("env_a", "work_1", work_txn(|w| w.metadata = "{}".into()))
        .await
        .unwrap();
    store.clear_requeue_check("work_2").await.unwrap();
    assert!(
        store
            .work_needing_requeue_check(10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn stopping_a_sessions_work(b: Backend) {
    let (store, _d) = open(b).await;
    let now = crate::support::now();
    // Graceful (archived): queued items stop, held ones wind down.
    queue(store.as_ref(), "env_a", "work_q", now).await;
    store
        .stop_session_work("sesn_work_q", now, true)
        .await
        .unwrap();
    let q = store.get_work("env_a", "work_q").await.unwrap().unwrap();
    assert_eq!(q.state, "stopped");
    assert!(q.stopped_at.is_some());
    assert_eq!(store.work_stats("env_a", now).await.unwrap().depth, 0);

    queue(store.as_ref(), "env_a", "work_h", now).await;
    hold(store.as_ref(), "env_a", "work_h", "active", now + 60 * SEC).await;
    store
        .stop_session_work("sesn_work_h", now, true)
        .await
        .unwrap();
    let h = store.get_work("env_a", "work_h").await.unwrap().unwrap();
    assert_eq!(h.state, "stopping");
    assert!(h.stop_requested_at.is_some());
    assert_eq!(h.stopped_at, None);

    // At once (deleted): everything live stops, held items included.
    queue(store.as_ref(), "env_a", "work_d", now).await;
    hold(
        store.as_ref(),
        "env_a",
        "work_d",
        "starting",
        now + 60 * SEC,
    )
    .await;
    store
        .stop_session_work("sesn_work_d", now, false)
        .await
        .unwrap();
    let d = store.get_work("env_a", "work_d").await.unwrap().unwrap();
    assert_eq!(d.state, "stopped");
    assert!(d.stopped_at.is_some());
    store
        .stop_session_work("sesn_work_h", now, false)
        .await
        .unwrap();
    assert_eq!(
        store
            .get_work("env_a", "work_h")
            .await
            .unwrap()
            .unwrap()
            .state,
        "stopped"
    );
    // Stopped items are never requeued by the reaper.
    store.requeue_expired_work(now + 120 * SEC).await.unwrap();
    for id in ["work_q", "work_h", "work_d"] {
        assert_eq!(
            store.get_work("env_a", id).await.unwrap().unwrap().state,
            "stopped"
        );
    }
    assert_eq!(store.ops_counts().await.unwrap().queued_work, 0);
}
