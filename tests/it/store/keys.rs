//! Workspaces and credentials: API keys and environment keys.

use mast::store::{KeyKind, Revocation};

use super::{environment, open};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    workspaces_are_found_or_created_by_name,
    api_keys_authenticate_until_revoked,
    list_keys_shows_api_then_environment_keys_oldest_first,
    environment_keys_open_their_environment_until_deleted,
);

async fn workspaces_are_found_or_created_by_name(b: Backend) {
    let (store, _d) = open(b).await;
    let a = store.ensure_workspace("alpha").await.unwrap();
    assert_eq!(store.ensure_workspace("alpha").await.unwrap(), a);
    let b2 = store.ensure_workspace("beta").await.unwrap();
    assert_ne!(a, b2);
    assert!(matches!(store.backend(), "sqlite" | "postgres"));
    assert_eq!(
        store.backend(),
        match b {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    );
}

async fn api_keys_authenticate_until_revoked(b: Backend) {
    let (store, _d) = open(b).await;
    assert_eq!(store.count_api_keys().await.unwrap(), 0);
    let ws = store.ensure_workspace("w").await.unwrap();
    store
        .insert_api_key("apikey_1", &ws, "hash1")
        .await
        .unwrap();
    store
        .insert_api_key("apikey_2", &ws, "hash2")
        .await
        .unwrap();
    assert_eq!(
        store.workspace_for_key("hash1").await.unwrap(),
        Some(ws.clone())
    );
    assert_eq!(store.workspace_for_key("nohash").await.unwrap(), None);
    assert_eq!(store.count_api_keys().await.unwrap(), 2);

    let before = crate::support::now();
    assert_eq!(
        store.revoke_api_key("apikey_1").await.unwrap(),
        Revocation::Revoked
    );
    assert_eq!(store.workspace_for_key("hash1").await.unwrap(), None);
    assert_eq!(
        store.workspace_for_key("hash2").await.unwrap(),
        Some(ws.clone()),
        "only the revoked key stops working"
    );
    match store.revoke_api_key("apikey_1").await.unwrap() {
        Revocation::AlreadyRevoked(at) => assert!(at >= before, "revoked at {at}"),
        other => panic!("second revocation: {other:?}"),
    }
    assert_eq!(
        store.revoke_api_key("apikey_none").await.unwrap(),
        Revocation::NotFound
    );
    // Revoked keys still count: revoking the last key must not reopen the server.
    assert_eq!(store.count_api_keys().await.unwrap(), 2);
    store.revoke_api_key("apikey_2").await.unwrap();
    assert_eq!(store.count_api_keys().await.unwrap(), 2);
}

async fn list_keys_shows_api_then_environment_keys_oldest_first(b: Backend) {
    let (store, _d) = open(b).await;
    assert!(store.list_keys().await.unwrap().is_empty());
    let w1 = store.ensure_workspace("one").await.unwrap();
    let w2 = store.ensure_workspace("two").await.unwrap();
    store
        .insert_environment(&w1, &environment("env_a", "a"), 1)
        .await
        .unwrap();
    let ek = mast::domain::ids::new_id("envkey");
    store
        .insert_environment_key(&ek, &w1, "env_a", "ehash")
        .await
        .unwrap();
    let k1 = mast::domain::ids::new_id("apikey");
    store.insert_api_key(&k1, &w2, "h1").await.unwrap();
    let k2 = mast::domain::ids::new_id("apikey");
    store.insert_api_key(&k2, &w1, "h2").await.unwrap();
    store.revoke_api_key(&k1).await.unwrap();

    let keys = store.list_keys().await.unwrap();
    let got: Vec<_> = keys.iter().map(|k| k.id.clone()).collect();
    assert_eq!(got, vec![k1.clone(), k2.clone(), ek.clone()]);
    assert_eq!(keys[0].kind, KeyKind::Api);
    assert_eq!(keys[0].workspace_id, w2);
    assert_eq!(keys[0].workspace_name, "two");
    assert_eq!(keys[0].key_hash, "h1");
    assert!(keys[0].revoked_at.is_some());
    assert!(keys[0].created_at <= keys[1].created_at);
    assert_eq!(keys[1].workspace_name, "one");
    assert_eq!(keys[1].revoked_at, None);
    assert_eq!(
        keys[2].kind,
        KeyKind::Environment {
            environment_id: "env_a".into()
        }
    );
    assert_eq!(keys[2].key_hash, "ehash");
    assert_eq!(keys[2].workspace_id, w1);
    assert_eq!(keys[2].revoked_at, None);
}

async fn environment_keys_open_their_environment_until_deleted(b: Backend) {
    let (store, _d) = open(b).await;
    let ws = store.ensure_workspace("w").await.unwrap();
    store
        .insert_environment(&ws, &environment("env_a", "a"), 1)
        .await
        .unwrap();
    store
        .insert_environment(&ws, &environment("env_b", "b"), 1)
        .await
        .unwrap();
    let k1 = mast::domain::ids::new_id("envkey");
    let k2 = mast::domain::ids::new_id("envkey");
    let k3 = mast::domain::ids::new_id("envkey");
    store
        .insert_environment_key(&k1, &ws, "env_a", "h1")
        .await
        .unwrap();
    store
        .insert_environment_key(&k2, &ws, "env_a", "h2")
        .await
        .unwrap();
    store
        .insert_environment_key(&k3, &ws, "env_b", "h3")
        .await
        .unwrap();
    let listed = store.list_environment_keys("env_a").await.unwrap();
    assert_eq!(
        listed.iter().map(|k| k.0.clone()).collect::<Vec<_>>(),
        vec![k1.clone(), k2.clone()]
    );
    assert!(listed[0].1 <= listed[1].1, "oldest first");
    assert_eq!(
        store.environment_for_key("h1").await.unwrap(),
        Some((ws.clone(), "env_a".into()))
    );
    assert_eq!(store.environment_for_key("nope").await.unwrap(), None);

    assert!(
        !store.delete_environment_key("env_b", &k1).await.unwrap(),
        "a key is deleted only through its own environment"
    );
    assert!(store.delete_environment_key("env_a", &k1).await.unwrap());
    assert!(!store.delete_environment_key("env_a", &k1).await.unwrap());
    assert_eq!(store.environment_for_key("h1").await.unwrap(), None);
    assert_eq!(
        store.environment_for_key("h2").await.unwrap(),
        Some((ws.clone(), "env_a".into()))
    );
    assert_eq!(store.list_environment_keys("env_a").await.unwrap().len(), 1);
}
