//! Threads: created and changed by session transactions, listed and read per session.

use mast::store::{Direction, ThreadChange, TxnOutput};

use super::{assert_same_thread, client_txn, ids, open, output, scan, scan_after, thread_rec};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    threads_are_created_and_changed_in_session_transactions,
    threads_list_both_ways_within_their_session,
);

async fn threads_are_created_and_changed_in_session_transactions(b: Backend) {
    let (store, _d) = open(b).await;
    super::session(store.as_ref(), "sesn_t").await;
    super::session(store.as_ref(), "sesn_u").await;
    let now = crate::support::now();
    let mut child = thread_rec("sesn_t", "sthr_child", now);
    child.parent_thread_id = Some("sthr_sesn_t".into());
    child.spawning_event_id = Some("sevt_spawn".into());
    child.status = "running".into();
    client_txn(
        store.as_ref(),
        "sesn_t",
        output(TxnOutput {
            new_threads: vec![child.clone()],
            ..Default::default()
        }),
    )
    .await;
    assert_same_thread(
        &store
            .get_thread("sesn_t", "sthr_child")
            .await
            .unwrap()
            .unwrap(),
        &child,
    );
    assert_eq!(
        store.get_thread("sesn_u", "sthr_child").await.unwrap(),
        None,
        "threads are read within their session"
    );

    let change = ThreadChange {
        id: "sthr_child".into(),
        status: "archived".into(),
        updated_at: now + 5,
        archived_at: Some(now + 5),
    };
    // A change named in another session's transaction does not reach this thread.
    client_txn(
        store.as_ref(),
        "sesn_u",
        output(TxnOutput {
            thread_changes: vec![change.clone()],
            ..Default::default()
        }),
    )
    .await;
    assert_same_thread(
        &store
            .get_thread("sesn_t", "sthr_child")
            .await
            .unwrap()
            .unwrap(),
        &child,
    );
    client_txn(
        store.as_ref(),
        "sesn_t",
        output(TxnOutput {
            thread_changes: vec![change],
            ..Default::default()
        }),
    )
    .await;
    let mut want = child.clone();
    want.status = "archived".into();
    want.updated_at = now + 5;
    want.archived_at = Some(now + 5);
    assert_same_thread(
        &store
            .get_thread("sesn_t", "sthr_child")
            .await
            .unwrap()
            .unwrap(),
        &want,
    );
}

async fn threads_list_both_ways_within_their_session(b: Backend) {
    let (store, _d) = open(b).await;
    // Primary thread `sthr_sesn_l`; children before and after it in id order.
    super::session(store.as_ref(), "sesn_l").await;
    super::session(store.as_ref(), "sesn_m").await;
    let now = crate::support::now();
    let kids: Vec<_> = ["sthr_a", "sthr_b", "sthr_z"]
        .iter()
        .map(|id| thread_rec("sesn_l", id, now))
        .collect();
    client_txn(
        store.as_ref(),
        "sesn_l",
        output(TxnOutput {
            new_threads: kids,
            ..Default::default()
        }),
    )
    .await;
    let list = |s| {
        let store = store.clone();
        async move { ids(&store.list_threads("sesn_l", &s).await.unwrap(), |t| &t.id) }
    };
    assert_eq!(
        list(scan(Direction::Ascending, 10)).await,
        ["sthr_a", "sthr_b", "sthr_sesn_l", "sthr_z"]
    );
    assert_eq!(
        list(scan(Direction::Descending, 2)).await,
        ["sthr_z", "sthr_sesn_l"]
    );
    assert_eq!(
        list(scan_after(
            "sthr_sesn_l".to_string(),
            Direction::Descending,
            5
        ))
        .await,
        ["sthr_b", "sthr_a"]
    );
    assert_eq!(
        list(scan_after("sthr_a".to_string(), Direction::Ascending, 2)).await,
        ["sthr_b", "sthr_sesn_l"]
    );
    let other = store
        .list_threads("sesn_m", &scan(Direction::Ascending, 10))
        .await
        .unwrap();
    assert_eq!(ids(&other, |t| &t.id), ["sthr_sesn_m"]);
}
