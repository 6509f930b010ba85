//! Environments: CRUD, names unique per workspace, and deletion refused while in use.

use mast::domain::time;
use mast::store::{Direction, EnvironmentDeletion, StoreError, WorkRecord};

use super::{WS, create, environment, ids, open, scan, scan_after, session_rec};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    environments_round_trip_and_names_are_unique_per_workspace,
    environment_updates_replace_the_body_and_archive,
    environments_list_both_ways,
    environments_in_use_are_not_deleted,
    deleting_an_environment_takes_its_keys_and_stops_its_work,
);

async fn environments_round_trip_and_names_are_unique_per_workspace(b: Backend) {
    let (store, _d) = open(b).await;
    let e = environment("env_1", "prod");
    store.insert_environment(WS, &e, 10).await.unwrap();
    assert_eq!(store.get_environment(WS, "env_1").await.unwrap(), Some(e));
    assert_eq!(store.get_environment(WS, "env_2").await.unwrap(), None);
    assert_eq!(
        store
            .get_environment("wrkspc_other", "env_1")
            .await
            .unwrap(),
        None
    );
    assert!(matches!(
        store
            .insert_environment(WS, &environment("env_2", "prod"), 11)
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(store.get_environment(WS, "env_2").await.unwrap(), None);
    store
        .insert_environment("wrkspc_other", &environment("env_3", "prod"), 12)
        .await
        .expect("the same name in another workspace");
}

async fn environment_updates_replace_the_body_and_archive(b: Backend) {
    let (store, _d) = open(b).await;
    store
        .insert_environment(WS, &environment("env_1", "one"), 1)
        .await
        .unwrap();
    store
        .insert_environment(WS, &environment("env_2", "two"), 2)
        .await
        .unwrap();
    let mut e = environment("env_1", "uno");
    e.description = Some("renamed".into());
    store
        .update_environment(WS, &e, crate::support::now(), false)
        .await
        .unwrap();
    assert_eq!(
        store.get_environment(WS, "env_1").await.unwrap(),
        Some(e.clone())
    );
    // The old name is free again; a taken one conflicts and changes nothing.
    store
        .insert_environment(WS, &environment("env_3", "one"), 3)
        .await
        .unwrap();
    let clash = environment("env_1", "two");
    assert!(matches!(
        store
            .update_environment(WS, &clash, crate::support::now(), false)
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(store.get_environment(WS, "env_1").await.unwrap(), Some(e));

    let mut archived = environment("env_2", "two");
    archived.archived_at = Some(time::format(crate::support::now()));
    store
        .update_environment(WS, &archived, crate::support::now(), true)
        .await
        .unwrap();
    assert_eq!(
        store.get_environment(WS, "env_2").await.unwrap(),
        Some(archived)
    );
    let live = store
        .list_environments(WS, false, &scan(Direction::Ascending, 10))
        .await
        .unwrap();
    assert_eq!(ids(&live, |e| &e.id), ["env_1", "env_3"]);
    let all = store
        .list_environments(WS, true, &scan(Direction::Ascending, 10))
        .await
        .unwrap();
    assert_eq!(ids(&all, |e| &e.id), ["env_1", "env_2", "env_3"]);
}

async fn environments_list_both_ways(b: Backend) {
    let (store, _d) = open(b).await;
    for id in ["env_a", "env_b", "env_c", "env_d"] {
        store
            .insert_environment(WS, &environment(id, id), 1)
            .await
            .unwrap();
    }
    store
        .insert_environment("wrkspc_other", &environment("env_o", "o"), 1)
        .await
        .unwrap();
    let down = store
        .list_environments(WS, false, &scan(Direction::Descending, 3))
        .await
        .unwrap();
    assert_eq!(ids(&down, |e| &e.id), ["env_d", "env_c", "env_b"]);
    let down = store
        .list_environments(
            WS,
            false,
            &scan_after("env_b".to_string(), Direction::Descending, 3),
        )
        .await
        .unwrap();
    assert_eq!(ids(&down, |e| &e.id), ["env_a"]);
    let up = store
        .list_environments(
            WS,
            false,
            &scan_after("env_a".to_string(), Direction::Ascending, 2),
        )
        .await
        .unwrap();
    assert_eq!(ids(&up, |e| &e.id), ["env_b", "env_c"]);
}

async fn environments_in_use_are_not_deleted(b: Backend) {
    let (store, _d) = open(b).await;
    store
        .insert_environment(WS, &environment("env_x", "x"), 1)
        .await
        .unwrap();
    let users = ["sesn_1", "sesn_2", "sesn_3", "sesn_4"];
    for id in users {
        create(store.as_ref(), &session_rec(id, crate::support::now())).await;
    }
    let mut archived = session_rec("sesn_5", crate::support::now());
    archived.archived_at = Some(crate::support::now());
    create(store.as_ref(), &archived).await;
    match store.delete_environment(WS, "env_x").await.unwrap() {
        EnvironmentDeletion::InUse { sessions, total } => {
            assert_eq!(total, 4, "archived sessions do not count");
            assert!(!sessions.is_empty() && sessions.len() <= 4);
            assert!(sessions.iter().all(|s| users.contains(&s.as_str())));
        }
        other => panic!("deleted an environment in use: {other:?}"),
    }
    assert!(store.get_environment(WS, "env_x").await.unwrap().is_some());
    assert_eq!(
        store
            .delete_environment("wrkspc_other", "env_x")
            .await
            .unwrap(),
        EnvironmentDeletion::Missing
    );
    // Once every user is archived (or gone), it goes.
    for id in users {
        let r = store
            .transact(
                id,
                &mast::store::Writer::Client,
                Box::new(|rec| {
                    rec.archived_at = Some(crate::support::now());
                    Ok(Default::default())
                }),
            )
            .await
            .unwrap();
        assert!(r.is_some());
    }
    assert_eq!(
        store.delete_environment(WS, "env_x").await.unwrap(),
        EnvironmentDeletion::Deleted
    );
    assert_eq!(store.get_environment(WS, "env_x").await.unwrap(), None);
    assert_eq!(
        store.delete_environment(WS, "env_x").await.unwrap(),
        EnvironmentDeletion::Missing
    );
}

async fn deleting_an_environment_takes_its_keys_and_stops_its_work(b: Backend) {
    let (store, _d) = open(b).await;
    let ws = store.ensure_workspace("w").await.unwrap();
    store
        .insert_environment(&ws, &environment("env_x", "x"), 1)
        .await
        .unwrap();
    store
        .insert_environment_key("envkey_1", &ws, "env_x", "h1")
        .await
        .unwrap();
    let mut s = session_rec("sesn_w", crate::support::now());
    s.workspace_id = ws.clone();
    s.archived_at = Some(crate::support::now());
    let work = WorkRecord::queued(
        "work_1".into(),
        &ws,
        "env_x",
        "sesn_w",
        crate::support::now(),
    );
    let thread = super::thread_rec("sesn_w", "sthr_w", s.created_at);
    store
        .create_session(&s, &thread, &[], Some(&work))
        .await
        .unwrap();
    assert_eq!(
        store
            .work_stats("env_x", crate::support::now())
            .await
            .unwrap()
            .depth,
        1
    );
    assert_eq!(
        store.delete_environment(&ws, "env_x").await.unwrap(),
        EnvironmentDeletion::Deleted
    );
    assert_eq!(store.environment_for_key("h1").await.unwrap(), None);
    assert!(
        store
            .list_environment_keys("env_x")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .poll_work(
                "env_x",
                None,
                crate::support::now(),
                crate::support::now(),
                "tok"
            )
            .await
            .unwrap()
            .is_none(),
        "its queue is gone"
    );
    if let Some(w) = store.get_work("env_x", "work_1").await.unwrap() {
        assert_eq!(w.state, "stopped");
    }
    assert_eq!(store.ops_counts().await.unwrap().queued_work, 0);
}
