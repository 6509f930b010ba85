//! Session fork: a new session with its threads and copied events, written in one
//! transaction, each copy remembering the event it copies.

use mast::domain::ids::new_id;
use mast::store::{Direction, ForkedEvent, SessionFork, Writer};
use serde_json::json;

use super::{append, client_txn, event, open, session, session_rec, thread_rec};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    a_fork_is_written_whole_and_its_copies_name_their_originals,
    a_fork_that_fails_writes_nothing,
);

/// A fork of `original`'s events as `fork_id`, each copy with a fresh id.
fn fork_of(fork_id: &str, original: &[mast::store::EventRecord]) -> SessionFork {
    let now = crate::support::now();
    let primary = thread_rec(fork_id, &format!("sthr_{fork_id}"), now);
    let mut child = thread_rec(fork_id, &format!("sthr_{fork_id}_child"), now);
    child.parent_thread_id = Some(primary.id.clone());
    SessionFork {
        session: session_rec(fork_id, now),
        threads: vec![primary.clone(), child],
        events: original
            .iter()
            .map(|e| ForkedEvent {
                event: mast::store::NewEvent {
                    id: new_id("sevt"),
                    thread_id: Some(primary.id.clone()),
                    kind: e.kind.clone(),
                    body: e.body.clone(),
                    internal: e.internal.clone(),
                    answers: None,
                    processed_at: e.processed_at,
                },
                forked_from: e.id.clone(),
            })
            .collect(),
    }
}

async fn a_fork_is_written_whole_and_its_copies_name_their_originals(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_orig").await;
    let mut with_internal = event("span.model_request_end");
    with_internal.internal = Some(json!({"content": [], "stop_reason": "end_turn"}));
    let (_, original) = client_txn(
        store.as_ref(),
        "sesn_orig",
        append(vec![
            event("user.message"),
            with_internal,
            event("session.status_idle"),
        ]),
    )
    .await;
    let fork = fork_of("sesn_fork", &original[..2]);
    store.insert_fork(&fork).await.unwrap();

    let rec = store
        .get_session(super::WS, "sesn_fork")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.last_seq, 2, "the fork's log holds the copies");
    assert_eq!(rec.status, "idle");
    assert_eq!(rec.lease_owner, None);
    assert_eq!(super::js(&rec.body), super::js(&fork.session.body));
    let threads = store
        .list_threads("sesn_fork", &super::scan(Direction::Ascending, 10))
        .await
        .unwrap();
    assert_eq!(threads.len(), 2);
    let copies = store.events_after("sesn_fork", 0, &[], 100).await.unwrap();
    assert_eq!(copies.len(), 2);
    for ((copy, orig), planned) in copies.iter().zip(&original).zip(&fork.events) {
        assert_eq!(
            copy.seq, orig.seq,
            "a fork keeps the original's sequence numbers"
        );
        assert_eq!(copy.id, planned.event.id);
        assert_eq!(
            (&copy.kind, &copy.body, &copy.internal),
            (&orig.kind, &orig.body, &orig.internal)
        );
        assert_eq!(copy.processed_at, orig.processed_at);
        assert_eq!(
            store
                .event_forked_from("sesn_fork", &copy.id)
                .await
                .unwrap(),
            Some(orig.id.clone())
        );
    }
    // Events not copied by a fork name nothing; nor does an event of another session.
    assert_eq!(
        store
            .event_forked_from("sesn_orig", &original[0].id)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .event_forked_from("sesn_orig", &copies[0].id)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .event_forked_from("sesn_fork", "sevt_none")
            .await
            .unwrap(),
        None
    );
    // The original is untouched, and the fork's log goes on after its copies.
    assert_eq!(
        store.events_after("sesn_orig", 0, &[], 100).await.unwrap(),
        original
    );
    let (_, next) = store
        .transact(
            "sesn_fork",
            &Writer::Client,
            append(vec![event("user.message")]),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next[0].seq, 3);
}

async fn a_fork_that_fails_writes_nothing(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_orig").await;
    let (_, original) = client_txn(
        store.as_ref(),
        "sesn_orig",
        append(vec![event("user.message"), event("session.status_idle")]),
    )
    .await;
    let mut fork = fork_of("sesn_fork", &original);
    // The last copy reuses an id that exists: the whole fork fails.
    fork.events[1].event.id = original[0].id.clone();
    assert!(store.insert_fork(&fork).await.is_err());
    assert_eq!(
        store.get_session(super::WS, "sesn_fork").await.unwrap(),
        None
    );
    assert!(
        store
            .list_threads("sesn_fork", &super::scan(Direction::Ascending, 10))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .events_after("sesn_fork", 0, &[], 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .get_thread("sesn_fork", "sthr_sesn_fork")
            .await
            .unwrap(),
        None
    );
}
