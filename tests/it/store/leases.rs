//! Session leases: one runner at a time, expiry, hand-over, and the reaper's queries.

use super::{client_txn, open, session, set_status};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    leases_are_exclusive_until_they_expire,
    renewing_and_releasing_need_the_lease,
    clear_foreign_leases_keeps_only_the_owners,
    sessions_needing_runner_are_active_and_unleased,
);

const SEC: i64 = 1_000_000;

async fn leases_are_exclusive_until_they_expire(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_l").await;
    let now = crate::support::now();
    assert!(
        !store
            .claim_lease("sesn_none", "one", now, now + SEC)
            .await
            .unwrap(),
        "no session, no lease"
    );
    assert!(
        store
            .claim_lease("sesn_l", "one", now, now + SEC)
            .await
            .unwrap()
    );
    let rec = store.get_session_by_id("sesn_l").await.unwrap().unwrap();
    assert_eq!(rec.lease_owner.as_deref(), Some("one"));
    assert_eq!(rec.lease_expires_at, Some(now + SEC));
    assert!(
        !store
            .claim_lease("sesn_l", "two", now, now + SEC)
            .await
            .unwrap()
    );
    assert!(
        !store
            .claim_lease("sesn_l", "two", now + SEC / 2, now + 2 * SEC)
            .await
            .unwrap(),
        "still live"
    );
    assert!(
        store
            .claim_lease("sesn_l", "one", now, now + 2 * SEC)
            .await
            .unwrap(),
        "re-claim by the holder extends it"
    );
    assert!(
        !store
            .claim_lease("sesn_l", "two", now + SEC + 1, now + 3 * SEC)
            .await
            .unwrap(),
        "the re-claim moved the expiry"
    );
    let later = now + 2 * SEC + 1;
    assert!(
        store
            .claim_lease("sesn_l", "two", later, later + SEC)
            .await
            .unwrap(),
        "an expired lease is free"
    );
    let rec = store.get_session_by_id("sesn_l").await.unwrap().unwrap();
    assert_eq!(rec.lease_owner.as_deref(), Some("two"));
    assert_eq!(rec.lease_expires_at, Some(later + SEC));
}

async fn renewing_and_releasing_need_the_lease(b: Backend) {
    let (store, _d) = open(b).await;
    session(store.as_ref(), "sesn_r").await;
    let now = crate::support::now();
    assert!(
        !store.renew_lease("sesn_r", "one", now + SEC).await.unwrap(),
        "nothing to renew"
    );
    assert!(
        store
            .claim_lease("sesn_r", "one", now, now + SEC)
            .await
            .unwrap()
    );
    assert!(
        store
            .renew_lease("sesn_r", "one", now + 5 * SEC)
            .await
            .unwrap()
    );
    assert!(
        !store
            .claim_lease("sesn_r", "two", now + 2 * SEC, now + 3 * SEC)
            .await
            .unwrap(),
        "renewed past the old expiry"
    );
    assert!(
        !store
            .renew_lease("sesn_r", "two", now + 9 * SEC)
            .await
            .unwrap()
    );
    // Releasing someone else's lease does nothing.
    store.release_lease("sesn_r", "two").await.unwrap();
    let rec = store.get_session_by_id("sesn_r").await.unwrap().unwrap();
    assert_eq!(rec.lease_owner.as_deref(), Some("one"));
    assert_eq!(rec.lease_expires_at, Some(now + 5 * SEC));
    store.release_lease("sesn_r", "one").await.unwrap();
    let rec = store.get_session_by_id("sesn_r").await.unwrap().unwrap();
    assert_eq!(rec.lease_owner, None);
    assert_eq!(rec.lease_expires_at, None);
    assert!(
        !store
            .renew_lease("sesn_r", "one", now + 6 * SEC)
            .await
            .unwrap(),
        "a released lease cannot be renewed"
    );
    assert!(
        store
            .claim_lease("sesn_r", "two", now, now + SEC)
            .await
            .unwrap(),
        "released: free at once"
    );
}

async fn clear_foreign_leases_keeps_only_the_owners(b: Backend) {
    let (store, _d) = open(b).await;
    let now = crate::support::now();
    for (id, owner) in [
        ("sesn_1", Some("me")),
        ("sesn_2", Some("old1")),
        ("sesn_3", Some("old2")),
        ("sesn_4", None),
    ] {
        session(store.as_ref(), id).await;
        if let Some(o) = owner {
            assert!(store.claim_lease(id, o, now, now + SEC).await.unwrap());
        }
    }
    assert_eq!(store.clear_foreign_leases("me").await.unwrap(), 2);
    let owner = |id: &'static str| {
        let store = store.clone();
        async move {
            store
                .get_session_by_id(id)
                .await
                .unwrap()
                .unwrap()
                .lease_owner
        }
    };
    assert_eq!(owner("sesn_1").await.as_deref(), Some("me"));
    assert_eq!(owner("sesn_2").await, None);
    assert_eq!(owner("sesn_3").await, None);
    assert!(
        store
            .claim_lease("sesn_2", "me", now, now + SEC)
            .await
            .unwrap()
    );
    assert_eq!(store.clear_foreign_leases("me").await.unwrap(), 0);
}

async fn sessions_needing_runner_are_active_and_unleased(b: Backend) {
    let (store, _d) = open(b).await;
    let now = crate::support::now();
    for (id, status) in [
        ("sesn_idle", "idle"),
        ("sesn_run", "running"),
        ("sesn_res", "rescheduling"),
        ("sesn_leased", "running"),
        ("sesn_term", "terminated"),
    ] {
        session(store.as_ref(), id).await;
        client_txn(store.as_ref(), id, set_status(status)).await;
    }
    assert!(
        store
            .claim_lease("sesn_leased", "one", now, now + SEC)
            .await
            .unwrap()
    );
    let mut got = store.sessions_needing_runner(now, 10).await.unwrap();
    got.sort();
    assert_eq!(got, ["sesn_res", "sesn_run"]);
    assert_eq!(
        store.sessions_needing_runner(now, 1).await.unwrap().len(),
        1
    );
    let mut got = store
        .sessions_needing_runner(now + 2 * SEC, 10)
        .await
        .unwrap();
    got.sort();
    assert_eq!(
        got,
        ["sesn_leased", "sesn_res", "sesn_run"],
        "an expired lease is no lease"
    );
    store
        .claim_lease("sesn_run", "two", now, now + SEC)
        .await
        .unwrap();
    let got = store.sessions_needing_runner(now, 10).await.unwrap();
    assert_eq!(got, ["sesn_res"]);
}
