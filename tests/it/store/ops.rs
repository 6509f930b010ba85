//! Operations: readiness and the counts behind `/metrics`.

use mast::store::WorkRecord;

use super::{WS, client_txn, open, output, session, set_status};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    a_fresh_store_is_ready,
    ops_counts_sessions_by_status_and_queued_work
);

async fn a_fresh_store_is_ready(b: Backend) {
    let (store, _d) = open(b).await;
    assert_eq!(store.readiness().await, None);
    let counts = store.ops_counts().await.unwrap();
    assert_eq!(counts.queued_work, 0);
    assert!(counts.sessions_by_status.iter().all(|(_, n)| *n == 0));
}

async fn ops_counts_sessions_by_status_and_queued_work(b: Backend) {
    let (store, _d) = open(b).await;
    for (id, status) in [
        ("sesn_1", "idle"),
        ("sesn_2", "idle"),
        ("sesn_3", "running"),
        ("sesn_4", "terminated"),
    ] {
        session(store.as_ref(), id).await;
        if status != "idle" {
            client_txn(store.as_ref(), id, set_status(status)).await;
        }
    }
    for (i, id) in ["sesn_1", "sesn_2"].iter().enumerate() {
        client_txn(
            store.as_ref(),
            id,
            output(mast::store::TxnOutput {
                ensure_work: Some(WorkRecord::queued(
                    format!("work_{i}"),
                    WS,
                    "env_a",
                    id,
                    crate::support::now(),
                )),
                ..Default::default()
            }),
        )
        .await;
    }
    let counts = store.ops_counts().await.unwrap();
    let mut by_status: Vec<_> = counts
        .sessions_by_status
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect();
    by_status.sort();
    assert_eq!(
        by_status,
        [
            ("idle".to_string(), 2),
            ("running".into(), 1),
            ("terminated".into(), 1)
        ]
    );
    assert_eq!(counts.queued_work, 2);
    // A polled item still waits for its worker to take it; a held one does not.
    store
        .poll_work("env_a", None, crate::support::now(), 0, "tok")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(store.ops_counts().await.unwrap().queued_work, 2);
    store
        .transact_work(
            "env_a",
            "work_0",
            super::work_txn(|w| w.state = "active".into()),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(store.ops_counts().await.unwrap().queued_work, 1);
}
