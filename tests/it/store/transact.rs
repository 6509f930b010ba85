//! `SessionTransactions::transact`: one atomic step of a session — the row written back, events appended
//! with consecutive sequence numbers, queued input consumed or flushed, work ensured.

use mast::store::{StoreError, TxnOutput, WorkRecord, Writer};
use serde_json::json;

use super::{
    WS, append, assert_same_session, client_txn, event, open, output, queued, session, set_status,
};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    sequences_are_contiguous_under_concurrent_appends,
    the_row_is_written_back_as_the_decision_left_it,
    consumed_input_is_marked_at_the_log_position,
    flushing_discards_every_queued_event,
    ensure_work_queues_one_live_item_per_session,
    runners_write_only_while_they_hold_the_lease,
    failed_transactions_change_nothing,
    missing_sessions_give_none,
    any_text_is_written_as_it_was,
    every_element_of_a_batch_is_read_back_as_written,
);

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

async fn the_row_is_written_back_as_the_decision_left_it(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_w").await;
    client_txn(store.as_ref(), "sesn_w", append(vec![event("a")])).await;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen2 = seen.clone();
    let (rec, events) = client_txn(
        store.as_ref(),
        "sesn_w",
        Box::new(move |rec| {
            *seen2.lock().unwrap() = Some(rec.clone());
            rec.status = "running".into();
            rec.body = json!({"title": "new", "metadata": {"k": "v"}})
                .to_string()
                .into();
            rec.usage = json!({"input_tokens": 10}).to_string();
            rec.engine = json!({"pending": ["sevt_x"]}).to_string();
            rec.active_micros = 99;
            rec.running_since = Some(123);
            rec.updated_at += 1_000;
            rec.archived_at = Some(456);
            rec.terminated_at = Some(789);
            Ok(TxnOutput {
                events: vec![event("b"), event("c")],
                ..Default::default()
            })
        }),
    )
    .await;
    let before = seen.lock().unwrap().clone().unwrap();
    assert_eq!(before.last_seq, 1, "the decision sees the row as stored");
    assert_eq!(rec.last_seq, 3, "last_seq counts the appended events");
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3]);
    assert_eq!(events[0].kind, "b");
    assert_eq!(events[0].session_id, "sesn_w");
    assert_eq!(rec.status, "running");
    let stored = store.get_session_by_id("sesn_w").await.unwrap().unwrap();
    assert_same_session(&stored, &rec);
    // Events come back as appended, from every read path.
    for e in &events {
        assert_eq!(
            store.get_event("sesn_w", &e.id).await.unwrap().as_ref(),
            Some(e)
        );
    }
    assert_eq!(
        store.events_after("sesn_w", 1, &[], 10).await.unwrap(),
        events
    );

    // A decision that changes nothing and appends nothing leaves the row alone.
    let (same, none) = client_txn(store.as_ref(), "sesn_w", output(TxnOutput::default())).await;
    assert!(none.is_empty());
    assert_same_session(&same, &stored);
    assert_same_session(
        &store.get_session_by_id("sesn_w").await.unwrap().unwrap(),
        &stored,
    );
}

async fn consumed_input_is_marked_at_the_log_position(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_q").await;
    let q1 = queued("user.message");
    let q2 = queued("user.message");
    let done = event("agent.message");
    client_txn(
        store.as_ref(),
        "sesn_q",
        append(vec![q1.clone(), done.clone(), q2.clone()]),
    )
    .await;
    assert_eq!(
        store
            .get_event("sesn_q", &q1.id)
            .await
            .unwrap()
            .unwrap()
            .processed_at,
        None
    );
    let before = crate::support::now();
    let (rec, _) = client_txn(
        store.as_ref(),
        "sesn_q",
        output(TxnOutput {
            events: vec![event("session.status_running"), event("agent.message")],
            mark_processed: vec![q1.id.clone(), done.id.clone()],
            ..Default::default()
        }),
    )
    .await;
    assert_eq!(rec.last_seq, 5);
    let got = store.get_event("sesn_q", &q1.id).await.unwrap().unwrap();
    assert!(got.processed_at.is_some_and(|t| t >= before));
    assert_eq!(
        got.internal,
        Some(json!({"after_seq": 5})),
        "consumed after everything this transaction logged"
    );
    assert_eq!(got.seq, 1, "its place in the log does not move");
    let untouched = store.get_event("sesn_q", &done.id).await.unwrap().unwrap();
    assert_eq!(
        untouched.processed_at, done.processed_at,
        "processed events are not marked again"
    );
    assert_eq!(untouched.internal, None);
    let other = store.get_event("sesn_q", &q2.id).await.unwrap().unwrap();
    assert_eq!(other.processed_at, None, "only the named events");
}

async fn flushing_discards_every_queued_event(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_f").await;
    session(store.as_ref(), "sesn_g").await;
    let q1 = queued("user.message");
    let q2 = queued("user.custom_tool_result");
    let done = event("agent.message");
    client_txn(
        store.as_ref(),
        "sesn_f",
        append(vec![q1.clone(), done.clone(), q2.clone()]),
    )
    .await;
    let elsewhere = queued("user.message");
    client_txn(store.as_ref(), "sesn_g", append(vec![elsewhere.clone()])).await;
    client_txn(
        store.as_ref(),
        "sesn_f",
        output(TxnOutput {
            events: vec![event("session.error")],
            flush_queued: true,
            ..Default::default()
        }),
    )
    .await;
    for id in [&q1.id, &q2.id] {
        let e = store.get_event("sesn_f", id).await.unwrap().unwrap();
        assert!(e.processed_at.is_some());
        assert_eq!(e.internal, Some(json!({"discarded": true})));
    }
    let d = store.get_event("sesn_f", &done.id).await.unwrap().unwrap();
    assert_eq!(d.processed_at, done.processed_at);
    assert_eq!(d.internal, None);
    let e = store
        .get_event("sesn_g", &elsewhere.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e.processed_at, None, "other sessions keep their input");
}

async fn ensure_work_queues_one_live_item_per_session(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_e").await;
    let ensure = |id: &str| {
        output(TxnOutput {
            ensure_work: Some(WorkRecord::queued(
                id.into(),
                WS,
                "env_sh",
                "sesn_e",
                crate::support::now(),
            )),
            ..Default::default()
        })
    };
    client_txn(store.as_ref(), "sesn_e", ensure("work_1")).await;
    client_txn(store.as_ref(), "sesn_e", ensure("work_2")).await;
    assert!(store.get_work("env_sh", "work_1").await.unwrap().is_some());
    assert_eq!(
        store.get_work("env_sh", "work_2").await.unwrap(),
        None,
        "a live item exists already"
    );
    let polled = store
        .poll_work("env_sh", Some("w"), crate::support::now(), 0, "tok")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(polled.id, "work_1");
    client_txn(store.as_ref(), "sesn_e", ensure("work_3")).await;
    assert_eq!(
        store.get_work("env_sh", "work_3").await.unwrap(),
        None,
        "a polled item is still live"
    );
    store
        .stop_session_work("sesn_e", crate::support::now(), false)
        .await
        .unwrap();
    client_txn(store.as_ref(), "sesn_e", ensure("work_4")).await;
    let w = store.get_work("env_sh", "work_4").await.unwrap().unwrap();
    assert_eq!(w.state, "queued");
    assert_eq!(w.session_id, "sesn_e");
}

async fn runners_write_only_while_they_hold_the_lease(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_l").await;
    let now = crate::support::now();
    let one = Writer::Runner {
        owner: "one".into(),
    };
    assert!(
        matches!(
            store
                .transact("sesn_l", &one, append(vec![event("x")]))
                .await,
            Err(StoreError::Fenced(_))
        ),
        "no lease at all"
    );
    assert!(
        store
            .claim_lease("sesn_l", "one", now, now + 1_000_000)
            .await
            .unwrap()
    );
    store
        .transact("sesn_l", &one, append(vec![event("agent.message")]))
        .await
        .unwrap()
        .unwrap();
    // A client writes whoever holds the lease.
    client_txn(
        store.as_ref(),
        "sesn_l",
        append(vec![event("user.message")]),
    )
    .await;
    let later = now + 2_000_000;
    assert!(
        store
            .claim_lease("sesn_l", "two", later, later + 1_000_000)
            .await
            .unwrap()
    );
    let stale = store.transact("sesn_l", &one, set_status("running")).await;
    assert!(matches!(stale, Err(StoreError::Fenced(_))), "{stale:?}");
    let rec = store.get_session_by_id("sesn_l").await.unwrap().unwrap();
    assert_eq!(rec.status, "idle", "a fenced runner changed nothing");
    assert_eq!(rec.last_seq, 2);
    store
        .transact(
            "sesn_l",
            &Writer::Runner {
                owner: "two".into(),
            },
            append(vec![event("agent.message")]),
        )
        .await
        .unwrap()
        .unwrap();
}

async fn failed_transactions_change_nothing(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_f").await;
    let failing: mast::store::SessionTxn = Box::new(|rec| {
        rec.status = "running".into();
        Err(StoreError::Conflict("no".into()))
    });
    let r = store.transact("sesn_f", &Writer::Client, failing).await;
    assert!(
        matches!(r, Err(StoreError::Conflict(ref m)) if m == "no"),
        "the decision's error comes back: {r:?}"
    );
    let rec = store.get_session_by_id("sesn_f").await.unwrap().unwrap();
    assert_eq!(rec.status, "idle");
    assert_eq!(rec.last_seq, 0);

    // A write that fails half-way (a second answer to the same event) rolls back the rest.
    let answer = || {
        let mut e = event("user.custom_tool_result");
        e.answers = Some(("sevt_tool".into(), "result"));
        e
    };
    let q = queued("user.message");
    client_txn(store.as_ref(), "sesn_f", append(vec![answer(), q.clone()])).await;
    let r = store
        .transact(
            "sesn_f",
            &Writer::Client,
            Box::new(move |rec| {
                rec.status = "running".into();
                Ok(TxnOutput {
                    events: vec![event("agent.message"), answer()],
                    mark_processed: vec![q.id.clone()],
                    new_threads: vec![super::thread_rec("sesn_f", "sthr_new", 1)],
                    ..Default::default()
                })
            }),
        )
        .await;
    assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
    let rec = store.get_session_by_id("sesn_f").await.unwrap().unwrap();
    assert_eq!(rec.status, "idle");
    assert_eq!(rec.last_seq, 2);
    assert_eq!(
        store
            .events_after("sesn_f", 0, &[], 10)
            .await
            .unwrap()
            .len(),
        2
    );
    assert_eq!(store.get_thread("sesn_f", "sthr_new").await.unwrap(), None);
    let events = store.events_after("sesn_f", 0, &[], 10).await.unwrap();
    assert_eq!(events[1].processed_at, None, "still queued");
    // And the session goes on from where it was.
    let (_, ev) = client_txn(store.as_ref(), "sesn_f", append(vec![event("x")])).await;
    assert_eq!(ev[0].seq, 3);
}

async fn missing_sessions_give_none(b: Backend) {
    let (store, _d) = open(b).await;
    assert!(
        store
            .transact("sesn_missing", &Writer::Client, append(vec![event("x")]))
            .await
            .unwrap()
            .is_none()
    );
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ran2 = ran.clone();
    let r = store
        .transact(
            "sesn_missing",
            &Writer::Runner {
                owner: "one".into(),
            },
            Box::new(move |_| {
                ran2.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok(TxnOutput::default())
            }),
        )
        .await
        .unwrap();
    assert!(r.is_none());
    assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
    assert!(
        store
            .events_after("sesn_missing", 0, &[], 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Whatever a body holds — quotes, backslashes, escapes of control characters, any script,
/// and sizes past what goes as a literal on Postgres (`store/postgres/transact.rs`) — it is
/// read back exactly, in events, the row's columns and consumed input alike.
async fn any_text_is_written_as_it_was(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_t").await;
    let awkward =
        "it's \\ \"quoted\" \\n \u{0}-free but \u{1} and \u{7f} and naïve ✓ 🚢 $1 E'' ;COMMIT";
    let big = "x'\\".repeat(120_000);
    let q = queued("user.message");
    client_txn(store.as_ref(), "sesn_t", append(vec![q.clone()])).await;
    for text in [awkward.to_string(), big] {
        let mut e = event("agent.message");
        e.body = json!({ "content": [{ "type": "text", "text": text }], "nul": "a\u{0}b" });
        e.internal = Some(json!({ "text": text }));
        let body = e.body.clone();
        let usage = json!({ "note": text }).to_string();
        let (t, u) = (text.clone(), usage.clone());
        let q = q.clone();
        let (rec, appended) = client_txn(
            store.as_ref(),
            "sesn_t",
            Box::new(move |rec| {
                rec.usage = u;
                rec.status = format!("idle{}", &t[..1]);
                Ok(TxnOutput {
                    events: vec![e],
                    mark_processed: vec![q.id.clone()],
                    ..Default::default()
                })
            }),
        )
        .await;
        let read = store
            .events_after("sesn_t", rec.last_seq - 1, &[], 10)
            .await
            .unwrap();
        assert_eq!(read[0].body, body);
        assert_eq!(read[0].body, appended[0].body);
        assert_eq!(read[0].internal, Some(json!({ "text": text })));
        let row = store.get_session_by_id("sesn_t").await.unwrap().unwrap();
        assert_eq!(row.usage, usage);
        assert_eq!(row.status, format!("idle{}", &text[..1]));
    }
    let first = store.events_after("sesn_t", 0, &[], 1).await.unwrap();
    assert!(
        first[0].processed_at.is_some(),
        "the queued input was consumed"
    );
}

/// Values that an array literal could misread (on Postgres a batch's columns go as one array
/// literal each): `NULL` as text, the empty string, spaces, commas and braces, quotes and
/// backslashes — each is read back as it was, and an absent value stays absent.
async fn every_element_of_a_batch_is_read_back_as_written(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_t").await;
    let awkward = ["NULL", "", " a,{b} ", r#"x"y\z'"#, r"\", "naïve ✓ 🚢"];
    let events: Vec<_> = awkward
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let mut e = event(text);
            e.thread_id = (i % 2 == 0).then(|| text.to_string());
            e.body = json!({ "text": text });
            e
        })
        .collect();
    let sent = events.clone();
    client_txn(store.as_ref(), "sesn_t", append(events)).await;
    let read = store.events_after("sesn_t", 0, &[], 100).await.unwrap();
    assert_eq!(read.len(), sent.len());
    for (r, e) in read.iter().zip(&sent) {
        assert_eq!(
            (&r.id, &r.kind, &r.thread_id, &r.body),
            (&e.id, &e.kind, &e.thread_id, &e.body)
        );
    }
}
