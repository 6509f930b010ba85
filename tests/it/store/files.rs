//! Files: metadata round trip, workspace scoping, list filters and pages, expiry, deletion.

use mast::domain::ids::new_id;
use mast::store::{Direction, FileFilter, FileRecord};

use super::{WS, open, scan, scan_after};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    files_round_trip_per_workspace,
    files_list_filters_and_pages,
    expired_files_are_hidden_and_listed_for_the_sweep,
    deleting_a_file_removes_only_it,
    existing_file_ids_names_only_stored_ones,
);

fn file(ws: &str, name: &str, created_at: i64) -> FileRecord {
    FileRecord {
        id: new_id("file"),
        workspace_id: ws.into(),
        filename: name.into(),
        mime_type: "text/plain; charset=utf-8".into(),
        size_bytes: 12,
        downloadable: true,
        scope_id: None,
        created_at,
        expires_at: None,
    }
}

fn live(at: i64) -> FileFilter {
    FileFilter {
        live_at: at,
        ..Default::default()
    }
}

async fn files_round_trip_per_workspace(b: Backend) {
    let (store, _d) = open(b).await;
    let mut f = file(WS, "résumé.md", 1_000);
    f.scope_id = Some("sesn_x".into());
    f.expires_at = Some(9_000_000_000);
    f.downloadable = false;
    store.insert_file(&f).await.unwrap();
    assert_eq!(store.get_file(WS, &f.id).await.unwrap(), Some(f.clone()));
    assert_eq!(store.get_file("wrkspc_other", &f.id).await.unwrap(), None);
    assert_eq!(store.get_file(WS, "file_missing").await.unwrap(), None);
    assert!(store.insert_file(&f).await.is_err(), "an id is stored once");
}

async fn files_list_filters_and_pages(b: Backend) {
    let (store, _d) = open(b).await;
    let a = file(WS, "a", 1);
    let mut s = file(WS, "s", 2);
    s.scope_id = Some("sesn_1".into());
    let c = file(WS, "c", 3);
    let other = file("wrkspc_other", "o", 4);
    for f in [&a, &s, &c, &other] {
        store.insert_file(f).await.unwrap();
    }
    let ids = |v: Vec<FileRecord>| v.into_iter().map(|f| f.id).collect::<Vec<_>>();
    let all = store
        .list_files(WS, &live(0), &scan(Direction::Descending, 10))
        .await
        .unwrap();
    assert_eq!(ids(all), vec![c.id.clone(), s.id.clone(), a.id.clone()]);
    let page = store
        .list_files(
            WS,
            &live(0),
            &scan_after(c.id.clone(), Direction::Descending, 1),
        )
        .await
        .unwrap();
    assert_eq!(ids(page), vec![s.id.clone()]);
    let scoped = FileFilter {
        scope_id: Some("sesn_1".into()),
        ..live(0)
    };
    let got = store
        .list_files(WS, &scoped, &scan(Direction::Descending, 10))
        .await
        .unwrap();
    assert_eq!(got, vec![s.clone()]);
    let picked = FileFilter {
        ids: vec![a.id.clone(), other.id.clone(), "file_nope".into()],
        ..live(0)
    };
    let got = store
        .list_files(WS, &picked, &scan(Direction::Descending, 10))
        .await
        .unwrap();
    assert_eq!(
        ids(got),
        vec![a.id.clone()],
        "other workspaces' ids are not seen"
    );
}

async fn expired_files_are_hidden_and_listed_for_the_sweep(b: Backend) {
    let (store, _d) = open(b).await;
    let mut soon = file(WS, "soon", 1);
    soon.expires_at = Some(100);
    let mut later = file("wrkspc_other", "later", 2);
    later.expires_at = Some(200);
    let forever = file(WS, "forever", 3);
    for f in [&soon, &later, &forever] {
        store.insert_file(f).await.unwrap();
    }
    let listed = store
        .list_files(WS, &live(100), &scan(Direction::Descending, 10))
        .await
        .unwrap();
    assert_eq!(
        listed,
        vec![forever.clone()],
        "expired at 100 is gone at 100"
    );
    let listed = store
        .list_files(WS, &live(99), &scan(Direction::Descending, 10))
        .await
        .unwrap();
    assert_eq!(listed.len(), 2, "still live just before");
    assert_eq!(
        store.get_file(WS, &soon.id).await.unwrap(),
        Some(soon.clone()),
        "get returns expired rows; the caller decides"
    );
    assert_eq!(store.expired_files(99, 10).await.unwrap(), vec![]);
    assert_eq!(
        store.expired_files(500, 10).await.unwrap(),
        vec![soon.clone(), later.clone()],
        "every workspace, oldest expiry first"
    );
    assert_eq!(store.expired_files(500, 1).await.unwrap(), vec![soon]);
}

async fn deleting_a_file_removes_only_it(b: Backend) {
    let (store, _d) = open(b).await;
    let a = file(WS, "a", 1);
    let c = file(WS, "c", 2);
    store.insert_file(&a).await.unwrap();
    store.insert_file(&c).await.unwrap();
    assert!(!store.delete_file("wrkspc_other", &a.id).await.unwrap());
    assert!(store.delete_file(WS, &a.id).await.unwrap());
    assert!(!store.delete_file(WS, &a.id).await.unwrap(), "once");
    assert_eq!(store.get_file(WS, &a.id).await.unwrap(), None);
    assert_eq!(store.get_file(WS, &c.id).await.unwrap(), Some(c));
}

async fn existing_file_ids_names_only_stored_ones(b: Backend) {
    let (store, _d) = open(b).await;
    let a = file(WS, "a", 1);
    let o = file("wrkspc_other", "o", 2);
    store.insert_file(&a).await.unwrap();
    store.insert_file(&o).await.unwrap();
    let mut got = store
        .existing_file_ids(&[a.id.clone(), "file_gone".into(), o.id.clone()])
        .await
        .unwrap();
    got.sort();
    let mut want = vec![a.id, o.id];
    want.sort();
    assert_eq!(got, want);
    assert_eq!(
        store.existing_file_ids(&[]).await.unwrap(),
        Vec::<String>::new()
    );
}
