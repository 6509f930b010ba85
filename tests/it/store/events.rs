//! Reading the log: `list_events` with every filter, `events_after`, `get_event`, answers.

use mast::store::{Direction, EventFilter, EventRecord, NewEvent, StoreError};
use serde_json::json;

use super::{append, client_txn, event, open, queued, scan, scan_after, session};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    list_events_applies_every_filter,
    list_events_scans_both_ways,
    events_after_reads_forward_by_kind,
    events_are_read_within_their_session,
    answers_are_unique,
);

/// An event of `kind` on `thread`, processed at `at` (queued when None).
fn ev(kind: &str, thread: Option<&str>, at: Option<i64>) -> NewEvent {
    NewEvent {
        thread_id: thread.map(String::from),
        processed_at: at,
        ..event(kind)
    }
}

/// A child thread's event cross-posted to the session's view (it names its thread).
fn crosspost(kind: &str, thread: &str, at: i64) -> NewEvent {
    let mut e = ev(kind, Some(thread), Some(at));
    e.body = json!({"session_thread_id": thread});
    e
}

fn seqs(events: &[EventRecord]) -> Vec<i64> {
    events.iter().map(|e| e.seq).collect()
}

/// The log used by the filter cases, seq by seq:
/// 1 user.message  primary  t=100
/// 2 agent.message primary  t=200
/// 3 agent.message child    t=300
/// 4 agent.message child    t=400, cross-posted
/// 5 user.message  primary  queued
/// 6 session.status_idle none t=600
async fn fixture(store: &dyn mast::store::Store) {
    session(store, "sesn_e").await;
    client_txn(
        store,
        "sesn_e",
        append(vec![
            ev("user.message", Some("sthr_p"), Some(100)),
            ev("agent.message", Some("sthr_p"), Some(200)),
            ev("agent.message", Some("sthr_c"), Some(300)),
            crosspost("agent.message", "sthr_c", 400),
            ev("user.message", Some("sthr_p"), None),
            ev("session.status_idle", None, Some(600)),
        ]),
    )
    .await;
}

async fn list_events_applies_every_filter(b: Backend) {
    let (store, _d) = open(b).await;
    fixture(store.as_ref()).await;
    let list = |f: EventFilter| {
        let store = store.clone();
        async move {
            seqs(
                &store
                    .list_events("sesn_e", &f, &scan(Direction::Ascending, 100))
                    .await
                    .unwrap(),
            )
        }
    };
    assert_eq!(list(EventFilter::default()).await, [1, 2, 3, 4, 5, 6]);
    assert_eq!(
        list(EventFilter {
            types: vec!["user.message".into()],
            ..Default::default()
        })
        .await,
        [1, 5]
    );
    assert_eq!(
        list(EventFilter {
            types: vec!["user.message".into(), "session.status_idle".into()],
            ..Default::default()
        })
        .await,
        [1, 5, 6]
    );
    assert_eq!(
        list(EventFilter {
            thread_id: Some("sthr_c".into()),
            ..Default::default()
        })
        .await,
        [3, 4]
    );
    assert_eq!(
        list(EventFilter {
            thread_id: Some("sthr_p".into()),
            ..Default::default()
        })
        .await,
        [1, 2, 5]
    );
    assert_eq!(
        list(EventFilter {
            thread_id: Some("sthr_p".into()),
            crossposts: true,
            ..Default::default()
        })
        .await,
        [1, 2, 4, 5],
        "the session's view with the child's cross-posted event"
    );
    assert_eq!(
        list(EventFilter {
            thread_id: Some("sthr_p".into()),
            crossposts: true,
            types: vec!["agent.message".into()],
            ..Default::default()
        })
        .await,
        [2, 4]
    );
    // Time bounds compare processed_at; queued events have none and never match them.
    assert_eq!(
        list(EventFilter {
            processed_gt: Some(200),
            ..Default::default()
        })
        .await,
        [3, 4, 6]
    );
    assert_eq!(
        list(EventFilter {
            processed_gte: Some(200),
            processed_lt: Some(400),
            ..Default::default()
        })
        .await,
        [2, 3]
    );
    assert_eq!(
        list(EventFilter {
            processed_lte: Some(300),
            ..Default::default()
        })
        .await,
        [1, 2, 3]
    );
    assert_eq!(
        list(EventFilter {
            processed_gt: Some(100),
            processed_lte: Some(400),
            thread_id: Some("sthr_c".into()),
            types: vec!["agent.message".into()],
            ..Default::default()
        })
        .await,
        [3, 4]
    );
    assert!(
        list(EventFilter {
            types: vec!["nothing".into()],
            ..Default::default()
        })
        .await
        .is_empty()
    );
}

async fn list_events_scans_both_ways(b: Backend) {
    let (store, _d) = open(b).await;
    fixture(store.as_ref()).await;
    let list = |f: EventFilter, s| {
        let store = store.clone();
        async move { seqs(&store.list_events("sesn_e", &f, &s).await.unwrap()) }
    };
    let all = EventFilter::default();
    assert_eq!(
        list(all.clone(), scan(Direction::Descending, 2)).await,
        [6, 5]
    );
    assert_eq!(
        list(all.clone(), scan_after(5, Direction::Descending, 3)).await,
        [4, 3, 2]
    );
    assert_eq!(
        list(all.clone(), scan_after(2, Direction::Ascending, 2)).await,
        [3, 4]
    );
    assert!(
        list(all.clone(), scan_after(6, Direction::Ascending, 2))
            .await
            .is_empty()
    );
    // Filtered pages are full pages of matching events.
    let users = EventFilter {
        types: vec!["agent.message".into()],
        ..Default::default()
    };
    assert_eq!(
        list(users.clone(), scan_after(2, Direction::Ascending, 2)).await,
        [3, 4]
    );
    assert_eq!(
        list(users, scan_after(4, Direction::Descending, 1)).await,
        [3]
    );
}

async fn events_after_reads_forward_by_kind(b: Backend) {
    let (store, _d) = open(b).await;
    fixture(store.as_ref()).await;
    let after = |seq, kinds: &'static [&'static str], limit| {
        let store = store.clone();
        async move {
            seqs(
                &store
                    .events_after("sesn_e", seq, kinds, limit)
                    .await
                    .unwrap(),
            )
        }
    };
    assert_eq!(after(0, &[], 100).await, [1, 2, 3, 4, 5, 6]);
    assert_eq!(after(2, &[], 100).await, [3, 4, 5, 6]);
    assert_eq!(after(2, &[], 2).await, [3, 4]);
    assert_eq!(after(0, &["user.message"], 100).await, [1, 5]);
    assert_eq!(
        after(1, &["user.message", "session.status_idle"], 100).await,
        [5, 6]
    );
    assert_eq!(after(0, &["agent.message"], 2).await, [2, 3]);
    assert!(after(6, &[], 100).await.is_empty());
    assert!(
        store
            .events_after("sesn_none", 0, &[], 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn events_are_read_within_their_session(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_a").await;
    session(store.as_ref(), "sesn_b").await;
    let mut e = queued("user.message");
    e.body = json!({"content": [{"type": "text", "text": "héllo \u{1f600}"}]});
    e.internal = Some(json!({"model": {"blocks": [1, 2]}}));
    e.thread_id = Some("sthr_x".into());
    let (_, written) = client_txn(store.as_ref(), "sesn_a", append(vec![e.clone()])).await;
    client_txn(store.as_ref(), "sesn_b", append(vec![event("x")])).await;
    let got = store.get_event("sesn_a", &e.id).await.unwrap().unwrap();
    assert_eq!(got, written[0]);
    assert_eq!(got.body, e.body);
    assert_eq!(got.internal, e.internal);
    assert_eq!(got.thread_id.as_deref(), Some("sthr_x"));
    assert_eq!(got.processed_at, None);
    assert_eq!(got.session_id, "sesn_a");
    assert_eq!(store.get_event("sesn_b", &e.id).await.unwrap(), None);
    assert_eq!(store.get_event("sesn_a", "sevt_none").await.unwrap(), None);
    let listed = store
        .list_events(
            "sesn_b",
            &EventFilter::default(),
            &scan(Direction::Ascending, 10),
        )
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "only the session's own events");
    assert_eq!(listed[0].seq, 1);
}

async fn answers_are_unique(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_u").await;
    let answer = |kind: &'static str| {
        let mut e = event("user.custom_tool_result");
        e.answers = Some(("sevt_tool".into(), kind));
        e
    };
    assert!(
        !store
            .has_answer("sesn_u", "sevt_tool", "result")
            .await
            .unwrap()
    );
    client_txn(store.as_ref(), "sesn_u", append(vec![answer("result")])).await;
    let r = store
        .transact(
            "sesn_u",
            &mast::store::Writer::Client,
            append(vec![answer("result")]),
        )
        .await;
    assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
    // Another kind of answer to the same event is a different answer.
    client_txn(
        store.as_ref(),
        "sesn_u",
        append(vec![answer("confirmation")]),
    )
    .await;
    assert!(
        store
            .has_answer("sesn_u", "sevt_tool", "result")
            .await
            .unwrap()
    );
    assert!(
        store
            .has_answer("sesn_u", "sevt_tool", "confirmation")
            .await
            .unwrap()
    );
    assert!(
        !store
            .has_answer("sesn_u", "sevt_other", "result")
            .await
            .unwrap()
    );
    assert!(
        !store
            .has_answer("sesn_w", "sevt_tool", "result")
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .get_session_by_id("sesn_u")
            .await
            .unwrap()
            .unwrap()
            .last_seq,
        2
    );
}
