//! A session's body (the agent snapshot) as every reader sees it: a store may keep bodies it
//! read and leave an unchanged one out of later reads, but a body changed by any writer —
//! this process or another on the same database — is what every later read returns, beside
//! the row's other columns as they are now.

use mast::store::{Direction, SessionRecord, SessionTxn, Store, TxnOutput};
use serde_json::json;

use super::{client_txn, open_twice, scan, session, set_status};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(a_changed_body_is_read_by_every_process);

/// A body naming `title`.
fn body(title: &str) -> String {
    json!({"title": title, "metadata": {"k": title}}).to_string()
}

/// A transaction that sets the session's body to `body(title)`.
fn set_body(title: &str) -> SessionTxn {
    let text = body(title);
    Box::new(move |rec: &mut SessionRecord| {
        rec.body = text.into();
        Ok(TxnOutput::default())
    })
}

/// The session's row as `store` reads it (by id, within the workspace, and in a list), each
/// read twice, all of which must agree; the body and the status.
async fn seen(store: &dyn Store, id: &str) -> (String, String) {
    let mut seen = Vec::new();
    for _ in 0..2 {
        let by_id = store.get_session_by_id(id).await.unwrap().unwrap();
        let in_ws = store.get_session(super::WS, id).await.unwrap().unwrap();
        let listed = store
            .list_sessions(
                super::WS,
                &Default::default(),
                &scan(Direction::Ascending, 100),
            )
            .await
            .unwrap()
            .into_iter()
            .find(|s| s.id == id)
            .unwrap();
        for rec in [by_id, in_ws, listed] {
            seen.push((rec.body.to_string(), rec.status));
        }
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
    seen.swap_remove(0)
}

async fn a_changed_body_is_read_by_every_process(b: Backend) {
    let (one, two, _d) = open_twice(b).await;
    let (one, two) = (one.as_ref(), two.as_ref());
    session(one, "sesn_b").await;
    let (original, _) = seen(one, "sesn_b").await;
    assert_eq!(seen(two, "sesn_b").await.0, original);

    // Another process changes the body: this one reads the new body, and so does its locking
    // read (the row a decision is taken on).
    client_txn(two, "sesn_b", set_body("two")).await;
    assert_eq!(seen(one, "sesn_b").await.0, body("two"));
    let (rec, _) = client_txn(one, "sesn_b", set_status("running")).await;
    assert_eq!(
        (&*rec.body, rec.status.as_str()),
        (&*body("two"), "running")
    );

    // Other columns change while the body stays: the body a read left out is the kept one,
    // the rest is the row's now.
    client_txn(two, "sesn_b", set_status("idle")).await;
    assert_eq!(seen(one, "sesn_b").await, (body("two"), "idle".into()));

    // This process changes the body in turn; both read it, and again after the other one
    // changes it back to text this process read before.
    client_txn(one, "sesn_b", set_body("three")).await;
    assert_eq!(seen(one, "sesn_b").await.0, body("three"));
    assert_eq!(seen(two, "sesn_b").await.0, body("three"));
    client_txn(two, "sesn_b", set_body("two")).await;
    assert_eq!(seen(one, "sesn_b").await.0, body("two"));
    let (rec, _) = client_txn(one, "sesn_b", set_body("four")).await;
    assert_eq!(&*rec.body, &*body("four"));
    assert_eq!(seen(two, "sesn_b").await.0, body("four"));
    assert_eq!(seen(one, "sesn_b").await.0, body("four"));
}
