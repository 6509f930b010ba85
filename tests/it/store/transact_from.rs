//! `SessionTransactions::transact_from`: a decision taken on a row the writer already holds is written only
//! while the row is still at that version; otherwise nothing is written, and deciding again on
//! the current row (`transact`) gives what the locking path would have.

use std::sync::Arc;

use mast::store::{Attempt, SessionRecord, SessionTxn, Store, StoreError, TxnOutput, Writer};

use super::{append, client_txn, event, open, session, set_status};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    a_write_from_the_current_row_applies,
    a_write_from_a_moved_row_writes_nothing,
    a_runner_writes_from_its_row_only_while_it_holds_the_lease,
    concurrent_writers_from_copies_keep_the_log_contiguous,
);

/// Appends an event naming the status the decision saw.
fn note_status() -> SessionTxn {
    Box::new(|rec: &mut SessionRecord| {
        Ok(TxnOutput {
            events: vec![event(&format!("saw.{}", rec.status))],
            ..Default::default()
        })
    })
}

async fn row(store: &dyn Store, id: &str) -> SessionRecord {
    store.get_session_by_id(id).await.unwrap().unwrap()
}

async fn a_write_from_the_current_row_applies(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_c").await;
    let held = row(store.as_ref(), "sesn_c").await;
    let Attempt::Done(Some((rec, events))) = store
        .transact_from("sesn_c", &Writer::Client, &held, note_status())
        .await
        .unwrap()
    else {
        panic!("the row had not moved")
    };
    assert_eq!(events.len(), 1);
    assert_eq!((events[0].seq, events[0].kind.as_str()), (1, "saw.idle"));
    let now = row(store.as_ref(), "sesn_c").await;
    assert_eq!(now.last_seq, 1);
    assert_eq!(rec.last_seq, 1);
    assert_eq!(
        rec.version, now.version,
        "the row a write returns is the row's current version"
    );
    // So the writer can go on from what it was given.
    let Attempt::Done(Some((rec, _))) = store
        .transact_from("sesn_c", &Writer::Client, &rec, set_status("running"))
        .await
        .unwrap()
    else {
        panic!("the returned row was current")
    };
    assert_eq!(rec.status, "running");
    let now = row(store.as_ref(), "sesn_c").await;
    assert_eq!((now.status.as_str(), now.version), ("running", rec.version));
    // A session that is not there.
    let mut ghost = held.clone();
    ghost.id = "sesn_ghost".into();
    let attempt = store
        .transact_from("sesn_ghost", &Writer::Client, &ghost, note_status())
        .await
        .unwrap();
    match attempt {
        Attempt::Done(None) => {}
        Attempt::Stale => assert!(
            store
                .transact("sesn_ghost", &Writer::Client, note_status())
                .await
                .unwrap()
                .is_none()
        ),
        Attempt::Done(Some(_)) => panic!("wrote to a session that is not there"),
    }
}

async fn a_write_from_a_moved_row_writes_nothing(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_m").await;
    let held = row(store.as_ref(), "sesn_m").await;
    // Another writer moves the row on: the held copy still says idle.
    client_txn(store.as_ref(), "sesn_m", set_status("running")).await;
    let moved = row(store.as_ref(), "sesn_m").await;
    match b {
        // Every update of the row changes its version.
        Backend::Postgres => assert_ne!(moved.version, held.version),
        Backend::Sqlite => {}
    }
    let attempt = store
        .transact_from("sesn_m", &Writer::Client, &held, note_status())
        .await
        .unwrap();
    let events = match attempt {
        Attempt::Done(Some((_, events))) => {
            assert_eq!(
                b,
                Backend::Sqlite,
                "Postgres writes only from the current row"
            );
            events
        }
        Attempt::Stale => {
            let now = row(store.as_ref(), "sesn_m").await;
            assert_eq!(now.last_seq, 0, "a stale attempt wrote nothing");
            assert_eq!(now.version, moved.version);
            client_txn(store.as_ref(), "sesn_m", note_status()).await.1
        }
        Attempt::Done(None) => panic!("the session exists"),
    };
    let kinds: Vec<_> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["saw.running"], "decided on the current row");
    let log = store.events_after("sesn_m", 0, &[], 10).await.unwrap();
    assert_eq!(log.len(), 1);
    // A decision that fails on the copy writes nothing either.
    let held = row(store.as_ref(), "sesn_m").await;
    let failing: SessionTxn = Box::new(|_| Err(StoreError::Conflict("no".into())));
    let attempt = store
        .transact_from("sesn_m", &Writer::Client, &held, failing)
        .await;
    assert!(
        matches!(attempt, Ok(Attempt::Stale) | Err(StoreError::Conflict(_))),
        "{attempt:?}"
    );
    assert_eq!(row(store.as_ref(), "sesn_m").await.last_seq, 1);
}

async fn a_runner_writes_from_its_row_only_while_it_holds_the_lease(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_r").await;
    let now = crate::support::now();
    let one = Writer::Runner {
        owner: "one".into(),
    };
    assert!(
        store
            .claim_lease("sesn_r", "one", now, now + 10_000_000)
            .await
            .unwrap()
    );
    let held = row(store.as_ref(), "sesn_r").await;
    let Attempt::Done(Some((held, _))) = store
        .transact_from("sesn_r", &one, &held, append(vec![event("agent.message")]))
        .await
        .unwrap()
    else {
        panic!("the runner holds the lease and the row")
    };
    assert_eq!(held.lease_owner.as_deref(), Some("one"));
    // The lease moves on to another runner (it ran out).
    let later = now + 20_000_000;
    assert!(
        store
            .claim_lease("sesn_r", "two", later, later + 10_000_000)
            .await
            .unwrap()
    );
    let fenced = |attempt: Result<Attempt, StoreError>| {
        assert!(
            matches!(attempt, Ok(Attempt::Stale) | Err(StoreError::Fenced(_))),
            "{attempt:?}"
        );
    };
    fenced(
        store
            .transact_from("sesn_r", &one, &held, set_status("running"))
            .await,
    );
    let fallback = store.transact("sesn_r", &one, set_status("running")).await;
    assert!(
        matches!(fallback, Err(StoreError::Fenced(_))),
        "{fallback:?}"
    );
    // A copy that does not name the writer as the holder is never written from.
    let current = row(store.as_ref(), "sesn_r").await;
    fenced(
        store
            .transact_from("sesn_r", &one, &current, set_status("running"))
            .await,
    );
    let rec = row(store.as_ref(), "sesn_r").await;
    assert_eq!(
        (rec.status.as_str(), rec.last_seq),
        ("idle", 1),
        "a fenced runner changed nothing"
    );
}

async fn concurrent_writers_from_copies_keep_the_log_contiguous(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_k").await;
    let store: Arc<dyn Store> = store;
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut held = row(store.as_ref(), "sesn_k").await;
            let mut stale = 0;
            for i in 0..10 {
                let two = || append(vec![event(&format!("first.{i}")), event("second")]);
                let written = match store
                    .transact_from("sesn_k", &Writer::Client, &held, two())
                    .await
                    .unwrap()
                {
                    Attempt::Done(written) => written,
                    Attempt::Stale => {
                        stale += 1;
                        store
                            .transact("sesn_k", &Writer::Client, two())
                            .await
                            .unwrap()
                    }
                };
                held = written.expect("the session exists").0;
            }
            stale
        }));
    }
    let mut stale = 0;
    for t in tasks {
        stale += t.await.unwrap();
    }
    let all = store.events_after("sesn_k", 0, &[], 1000).await.unwrap();
    let seqs: Vec<i64> = all.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=120).collect::<Vec<_>>(),
        "no event lost or doubled"
    );
    for pair in all.chunks(2) {
        assert!(pair[0].kind.starts_with("first."), "{}", pair[0].kind);
        assert_eq!(pair[1].kind, "second", "each write's events stay adjacent");
    }
    assert_eq!(row(store.as_ref(), "sesn_k").await.last_seq, 120);
    if b == Backend::Postgres {
        assert!(stale > 0, "six writers raced and none found its copy moved");
    }
}
