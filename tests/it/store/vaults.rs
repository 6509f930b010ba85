//! Vaults and credentials: CRUD, archive, one live credential per server in a vault, the
//! compare-and-set of refreshed secrets, and the lookup the MCP connector uses.

use mast::domain::credential::{Credential, CredentialAuth, CredentialTag};
use mast::domain::time;
use mast::domain::vault::{Vault, VaultTag};
use mast::store::{CredentialRecord, Direction, StoreError};

use super::{WS, ids, open, scan, scan_after};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    vaults_round_trip_update_archive_and_list,
    deleting_a_vault_takes_its_credentials,
    credentials_round_trip_with_their_sealed_secrets,
    one_live_credential_per_server_in_a_vault,
    credential_updates_can_compare_and_set,
    credentials_for_a_server_skip_archived_ones_and_other_vaults,
);

fn vault(id: &str) -> Vault {
    let now = time::format(crate::support::now());
    Vault {
        tag: VaultTag::Tag,
        id: id.into(),
        display_name: format!("vault {id}"),
        metadata: [("k".to_string(), "v".to_string())].into(),
        created_at: now.clone(),
        updated_at: now,
        archived_at: None,
    }
}

fn cred(vault_id: &str, id: &str, url: &str, sealed: &[u8]) -> CredentialRecord {
    let now = time::format(crate::support::now());
    CredentialRecord {
        credential: Credential {
            tag: CredentialTag::Tag,
            id: id.into(),
            vault_id: vault_id.into(),
            display_name: Some("c".into()),
            auth: CredentialAuth::StaticBearer {
                mcp_server_url: url.into(),
            },
            metadata: Default::default(),
            created_at: now.clone(),
            updated_at: now,
            archived_at: None,
        },
        server_url: url.into(),
        // Bytes outside UTF-8 on purpose: the column is binary.
        sealed: sealed.to_vec(),
    }
}

async fn vaults_round_trip_update_archive_and_list(b: Backend) {
    let (store, _d) = open(b).await;
    let first = vault("vlt_1");
    store
        .insert_vault(WS, &first, crate::support::now())
        .await
        .unwrap();
    for id in ["vlt_2", "vlt_3"] {
        store
            .insert_vault(WS, &vault(id), crate::support::now())
            .await
            .unwrap();
    }
    assert_eq!(store.get_vault(WS, "vlt_1").await.unwrap(), Some(first));
    assert_eq!(
        store.get_vault("wrkspc_other", "vlt_1").await.unwrap(),
        None
    );
    assert_eq!(store.get_vault(WS, "vlt_9").await.unwrap(), None);

    let mut v = store.get_vault(WS, "vlt_2").await.unwrap().unwrap();
    v.display_name = "renamed".into();
    store
        .update_vault(WS, &v, crate::support::now(), false)
        .await
        .unwrap();
    assert_eq!(store.get_vault(WS, "vlt_2").await.unwrap(), Some(v.clone()));
    v.archived_at = Some(time::format(crate::support::now()));
    store
        .update_vault(WS, &v, crate::support::now(), true)
        .await
        .unwrap();

    let live = store
        .list_vaults(WS, false, &scan(Direction::Descending, 10))
        .await
        .unwrap();
    assert_eq!(ids(&live, |v| &v.id), ["vlt_3", "vlt_1"]);
    let all = store
        .list_vaults(WS, true, &scan(Direction::Descending, 2))
        .await
        .unwrap();
    assert_eq!(ids(&all, |v| &v.id), ["vlt_3", "vlt_2"]);
    let rest = store
        .list_vaults(
            WS,
            true,
            &scan_after("vlt_2".to_string(), Direction::Descending, 2),
        )
        .await
        .unwrap();
    assert_eq!(ids(&rest, |v| &v.id), ["vlt_1"]);
    assert!(
        store
            .list_vaults("wrkspc_other", true, &scan(Direction::Ascending, 10))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn deleting_a_vault_takes_its_credentials(b: Backend) {
    let (store, _d) = open(b).await;
    store.insert_vault(WS, &vault("vlt_1"), 1).await.unwrap();
    store.insert_vault(WS, &vault("vlt_2"), 2).await.unwrap();
    store
        .insert_credential(WS, &cred("vlt_1", "vcrd_1", "https://a", b"\x00\xff1"), 3)
        .await
        .unwrap();
    store
        .insert_credential(WS, &cred("vlt_2", "vcrd_2", "https://a", b"\x00\xff2"), 4)
        .await
        .unwrap();
    assert!(!store.delete_vault("wrkspc_other", "vlt_1").await.unwrap());
    assert!(store.delete_vault(WS, "vlt_1").await.unwrap());
    assert!(!store.delete_vault(WS, "vlt_1").await.unwrap());
    assert_eq!(store.get_vault(WS, "vlt_1").await.unwrap(), None);
    assert_eq!(
        store.get_credential(WS, "vlt_1", "vcrd_1").await.unwrap(),
        None
    );
    assert!(
        store
            .get_credential(WS, "vlt_2", "vcrd_2")
            .await
            .unwrap()
            .is_some()
    );
}

async fn credentials_round_trip_with_their_sealed_secrets(b: Backend) {
    let (store, _d) = open(b).await;
    store.insert_vault(WS, &vault("vlt_1"), 1).await.unwrap();
    let c1 = cred("vlt_1", "vcrd_1", "https://a", b"\x00\x01\xfe\xff");
    let c2 = cred("vlt_1", "vcrd_2", "https://b", b"sealed-2");
    store.insert_credential(WS, &c1, 2).await.unwrap();
    store.insert_credential(WS, &c2, 3).await.unwrap();
    assert_eq!(
        store.get_credential(WS, "vlt_1", "vcrd_1").await.unwrap(),
        Some(c1.clone())
    );
    assert_eq!(
        store.get_credential(WS, "vlt_2", "vcrd_1").await.unwrap(),
        None,
        "another vault"
    );
    assert_eq!(
        store
            .get_credential("wrkspc_other", "vlt_1", "vcrd_1")
            .await
            .unwrap(),
        None
    );

    let mut archived = c2.clone();
    archived.credential.archived_at = Some(time::format(crate::support::now()));
    assert!(
        store
            .update_credential(WS, &archived, 4, true, None)
            .await
            .unwrap()
    );
    let live = store
        .list_credentials(WS, "vlt_1", false, &scan(Direction::Descending, 10))
        .await
        .unwrap();
    assert_eq!(live, vec![c1.clone()]);
    let all = store
        .list_credentials(WS, "vlt_1", true, &scan(Direction::Ascending, 10))
        .await
        .unwrap();
    assert_eq!(all, vec![c1, archived]);

    assert!(
        !store
            .delete_credential(WS, "vlt_2", "vcrd_1")
            .await
            .unwrap()
    );
    assert!(
        store
            .delete_credential(WS, "vlt_1", "vcrd_1")
            .await
            .unwrap()
    );
    assert!(
        !store
            .delete_credential(WS, "vlt_1", "vcrd_1")
            .await
            .unwrap()
    );
    assert_eq!(
        store.get_credential(WS, "vlt_1", "vcrd_1").await.unwrap(),
        None
    );
}

async fn one_live_credential_per_server_in_a_vault(b: Backend) {
    let (store, _d) = open(b).await;
    store.insert_vault(WS, &vault("vlt_1"), 1).await.unwrap();
    store.insert_vault(WS, &vault("vlt_2"), 1).await.unwrap();
    let c1 = cred("vlt_1", "vcrd_1", "https://a", b"1");
    store.insert_credential(WS, &c1, 2).await.unwrap();
    assert!(matches!(
        store
            .insert_credential(WS, &cred("vlt_1", "vcrd_2", "https://a", b"2"), 3)
            .await,
        Err(StoreError::Conflict(_))
    ));
    store
        .insert_credential(WS, &cred("vlt_2", "vcrd_3", "https://a", b"3"), 3)
        .await
        .expect("the same server in another vault");
    // Archiving frees the server for a new credential.
    let mut archived = c1.clone();
    archived.credential.archived_at = Some(time::format(crate::support::now()));
    store
        .update_credential(WS, &archived, 4, true, None)
        .await
        .unwrap();
    store
        .insert_credential(WS, &cred("vlt_1", "vcrd_4", "https://a", b"4"), 5)
        .await
        .unwrap();
}

async fn credential_updates_can_compare_and_set(b: Backend) {
    let (store, _d) = open(b).await;
    store.insert_vault(WS, &vault("vlt_1"), 1).await.unwrap();
    let c = cred("vlt_1", "vcrd_1", "https://a", b"old\x00");
    store.insert_credential(WS, &c, 2).await.unwrap();
    let mut first = c.clone();
    first.sealed = b"first".to_vec();
    let mut second = c.clone();
    second.sealed = b"second".to_vec();
    assert!(
        store
            .update_credential(WS, &first, 3, false, Some(b"old\x00"))
            .await
            .unwrap()
    );
    assert!(
        !store
            .update_credential(WS, &second, 4, false, Some(b"old\x00"))
            .await
            .unwrap(),
        "the stored secrets changed since they were read"
    );
    assert_eq!(
        store.get_credential(WS, "vlt_1", "vcrd_1").await.unwrap(),
        Some(first)
    );
    assert!(
        store
            .update_credential(WS, &second, 5, false, None)
            .await
            .unwrap()
    );
    assert!(
        !store
            .update_credential("wrkspc_other", &second, 5, false, None)
            .await
            .unwrap()
    );
}

async fn credentials_for_a_server_skip_archived_ones_and_other_vaults(b: Backend) {
    let (store, _d) = open(b).await;
    for v in ["vlt_1", "vlt_2", "vlt_3"] {
        store.insert_vault(WS, &vault(v), 1).await.unwrap();
    }
    store
        .insert_vault("wrkspc_other", &vault("vlt_9"), 1)
        .await
        .unwrap();
    let a1 = cred("vlt_1", "vcrd_1", "https://a", b"1");
    let a2 = cred("vlt_2", "vcrd_2", "https://a", b"2");
    let b1 = cred("vlt_1", "vcrd_3", "https://b", b"3");
    let a3 = cred("vlt_3", "vcrd_4", "https://a", b"4");
    for c in [&a1, &a2, &b1, &a3] {
        store.insert_credential(WS, c, 2).await.unwrap();
    }
    store
        .insert_credential(
            "wrkspc_other",
            &cred("vlt_9", "vcrd_9", "https://a", b"9"),
            2,
        )
        .await
        .unwrap();
    let find = |vaults: &[&str]| {
        let store = store.clone();
        let vaults: Vec<String> = vaults.iter().map(|s| s.to_string()).collect();
        async move {
            let mut found = store
                .credentials_for_server(WS, &vaults, "https://a")
                .await
                .unwrap();
            found.sort_by(|x, y| x.credential.id.cmp(&y.credential.id));
            found
                .into_iter()
                .map(|c| c.credential.id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        find(&["vlt_2", "vlt_1", "vlt_9"]).await,
        ["vcrd_1", "vcrd_2"]
    );
    assert!(find(&[]).await.is_empty());
    // An archived credential, and every credential of an archived vault, is skipped.
    let mut archived = a1.clone();
    archived.credential.archived_at = Some(time::format(crate::support::now()));
    store
        .update_credential(WS, &archived, 3, true, None)
        .await
        .unwrap();
    let mut v3 = store.get_vault(WS, "vlt_3").await.unwrap().unwrap();
    v3.archived_at = Some(time::format(crate::support::now()));
    store.update_vault(WS, &v3, 3, true).await.unwrap();
    assert_eq!(find(&["vlt_1", "vlt_2", "vlt_3"]).await, ["vcrd_2"]);
}
