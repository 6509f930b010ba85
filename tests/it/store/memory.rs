//! Memory stores: CRUD and archive of stores, memory writes with their versions (path
//! conflicts, preconditions, renames, archived stores), listing by prefix, version filters,
//! redaction, and deleting a store with everything in it.

use mast::domain::memory::{Actor, MemoryStore, MemoryStoreTag, Operation};
use mast::domain::time;
use mast::store::memory::MemoryChange;
use mast::store::{
    Direction, MemoryStoreFilter, MemoryVersionFilter, MemoryWrite, MemoryWriteOutcome,
    RedactOutcome,
};

use super::{WS, ids, open, scan};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    memory_stores_round_trip_filter_and_archive,
    memory_writes_record_versions_and_refuse_conflicts,
    memories_list_by_whole_prefix_in_path_order,
    versions_filter_and_redact,
    deleting_a_store_takes_its_memories_and_versions,
    a_full_store_refuses_creates_but_not_changes,
);

fn mstore(id: &str, at: i64) -> MemoryStore {
    MemoryStore {
        tag: MemoryStoreTag::Tag,
        id: id.into(),
        name: format!("store {id}"),
        description: String::new(),
        metadata: Default::default(),
        created_at: time::format(at),
        updated_at: time::format(at),
        archived_at: None,
    }
}

fn write(store_id: &str, change: MemoryChange, expected: Option<&str>) -> MemoryWrite {
    MemoryWrite {
        store_id: store_id.into(),
        change,
        expected_sha256: expected.map(str::to_string),
        version_id: mast::domain::ids::new_id("memver"),
        actor: Some(Actor::ApiActor {
            api_key_id: "apikey_1".into(),
        }),
        at: crate::support::now(),
    }
}

fn create(id: &str, path: &str, content: &str) -> MemoryChange {
    MemoryChange::Create {
        id: id.into(),
        path: path.into(),
        content: content.into(),
    }
}

async fn memory_stores_round_trip_filter_and_archive(b: Backend) {
    let (store, _dir) = open(b).await;
    let t0 = 1_000_000_000_000_000;
    for (i, id) in ["memstore_1", "memstore_2", "memstore_3"]
        .iter()
        .enumerate()
    {
        let at = t0 + i as i64 * 1_000_000;
        store
            .insert_memory_store(WS, &mstore(id, at), at)
            .await
            .unwrap();
    }
    let one = store
        .get_memory_store(WS, "memstore_1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(one, mstore("memstore_1", t0));
    assert_eq!(
        store
            .get_memory_store("wrkspc_other", "memstore_1")
            .await
            .unwrap(),
        None
    );

    let mut two = store
        .get_memory_store(WS, "memstore_2")
        .await
        .unwrap()
        .unwrap();
    two.archived_at = Some(time::format(t0 + 5));
    store
        .update_memory_store(WS, &two, t0 + 5, true)
        .await
        .unwrap();
    let all = |include_archived, gte, lte| MemoryStoreFilter {
        include_archived,
        created_gte: gte,
        created_lte: lte,
    };
    let list = |f: MemoryStoreFilter| {
        let store = store.clone();
        async move {
            ids(
                &store
                    .list_memory_stores(WS, &f, &scan(Direction::Descending, 10))
                    .await
                    .unwrap(),
                |s| &s.id,
            )
        }
    };
    assert_eq!(
        list(all(false, None, None)).await,
        ["memstore_3", "memstore_1"]
    );
    assert_eq!(
        list(all(true, None, None)).await,
        ["memstore_3", "memstore_2", "memstore_1"]
    );
    assert_eq!(
        list(all(true, Some(t0 + 1_000_000), Some(t0 + 1_000_000))).await,
        ["memstore_2"]
    );
}

async fn memory_writes_record_versions_and_refuse_conflicts(b: Backend) {
    let (store, _dir) = open(b).await;
    store
        .insert_memory_store(WS, &mstore("memstore_1", 1), 1)
        .await
        .unwrap();

    let MemoryWriteOutcome::Written { memory, version } = store
        .write_memory(
            WS,
            &write("memstore_1", create("mem_1", "/a/b.md", "hello"), None),
        )
        .await
        .unwrap()
    else {
        panic!("create refused")
    };
    let m = memory.unwrap();
    assert_eq!(version.operation, Operation::Created);
    assert_eq!(m.memory_version_id, version.id);
    assert_eq!(m.content_size_bytes, 5);
    assert_eq!(
        store.get_memory(WS, "memstore_1", "mem_1").await.unwrap(),
        Some(m.clone())
    );
    assert_eq!(
        store
            .get_memory("wrkspc_other", "memstore_1", "mem_1")
            .await
            .unwrap(),
        None
    );

    // A taken path names its holder; nothing is written.
    assert_eq!(
        store
            .write_memory(
                WS,
                &write("memstore_1", create("mem_2", "/a/b.md", "x"), None)
            )
            .await
            .unwrap(),
        MemoryWriteOutcome::PathTaken {
            memory_id: "mem_1".into()
        }
    );
    // A stale precondition reports the current hash.
    let update = |path: Option<&str>, content: Option<&str>| MemoryChange::Update {
        id: "mem_1".into(),
        path: path.map(str::to_string),
        content: content.map(str::to_string),
    };
    assert_eq!(
        store
            .write_memory(
                WS,
                &write(
                    "memstore_1",
                    update(None, Some("new")),
                    Some(&"0".repeat(64))
                )
            )
            .await
            .unwrap(),
        MemoryWriteOutcome::PreconditionFailed {
            current_sha256: m.content_sha256.clone()
        }
    );
    // A matching precondition applies; a rename keeps the id.
    let MemoryWriteOutcome::Written { memory, .. } = store
        .write_memory(
            WS,
            &write(
                "memstore_1",
                update(Some("/c.md"), Some("new")),
                Some(&m.content_sha256),
            ),
        )
        .await
        .unwrap()
    else {
        panic!("update refused")
    };
    let m2 = memory.unwrap();
    assert_eq!((m2.id.as_str(), m2.path.as_str()), ("mem_1", "/c.md"));
    assert_eq!(m2.content.as_deref(), Some("new"));
    assert!(matches!(
        store
            .write_memory(WS, &write("memstore_1", update(None, Some("new")), None))
            .await
            .unwrap(),
        MemoryWriteOutcome::Unchanged(_)
    ));
    // The old path is free again.
    assert!(matches!(
        store
            .write_memory(
                WS,
                &write("memstore_1", create("mem_2", "/a/b.md", ""), None)
            )
            .await
            .unwrap(),
        MemoryWriteOutcome::Written { .. }
    ));
    assert_eq!(
        store
            .write_memory(
                WS,
                &write("memstore_1", update(Some("/a/b.md"), None), None)
            )
            .await
            .unwrap(),
        MemoryWriteOutcome::PathTaken {
            memory_id: "mem_2".into()
        }
    );
    assert_eq!(
        store
            .write_memory(WS, &write("memstore_9", create("mem_3", "/z", ""), None))
            .await
            .unwrap(),
        MemoryWriteOutcome::StoreNotFound
    );

    // Archived: no creates or changes, deletes still go through.
    let mut s = store
        .get_memory_store(WS, "memstore_1")
        .await
        .unwrap()
        .unwrap();
    s.archived_at = Some(time::format(2));
    store.update_memory_store(WS, &s, 2, true).await.unwrap();
    assert_eq!(
        store
            .write_memory(WS, &write("memstore_1", create("mem_3", "/z", ""), None))
            .await
            .unwrap(),
        MemoryWriteOutcome::StoreArchived
    );
    let MemoryWriteOutcome::Written { memory, version } = store
        .write_memory(
            WS,
            &write(
                "memstore_1",
                MemoryChange::Delete { id: "mem_1".into() },
                None,
            ),
        )
        .await
        .unwrap()
    else {
        panic!("delete refused")
    };
    assert_eq!(memory, None);
    assert_eq!(version.operation, Operation::Deleted);
    assert_eq!(version.path.as_deref(), Some("/c.md"));
    assert_eq!(version.content, None);
    assert_eq!(
        store.get_memory(WS, "memstore_1", "mem_1").await.unwrap(),
        None
    );
    assert_eq!(
        store
            .write_memory(
                WS,
                &write(
                    "memstore_1",
                    MemoryChange::Delete { id: "mem_1".into() },
                    None
                )
            )
            .await
            .unwrap(),
        MemoryWriteOutcome::MemoryNotFound
    );
}

async fn memories_list_by_whole_prefix_in_path_order(b: Backend) {
    let (store, _dir) = open(b).await;
    store
        .insert_memory_store(WS, &mstore("memstore_1", 1), 1)
        .await
        .unwrap();
    for (i, p) in [
        "/notes/b",
        "/notes-archive/a",
        "/notes/a/x",
        "/notes/a",
        "/z",
    ]
    .iter()
    .enumerate()
    {
        store
            .write_memory(
                WS,
                &write("memstore_1", create(&format!("mem_{i}"), p, "c"), None),
            )
            .await
            .unwrap();
    }
    let paths = |prefix: &'static str, from: Option<&'static str>, limit| {
        let store = store.clone();
        async move {
            store
                .list_memories(WS, "memstore_1", prefix, from, limit)
                .await
                .unwrap()
                .into_iter()
                .map(|m| m.path)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        paths("/", None, 10).await,
        [
            "/notes-archive/a",
            "/notes/a",
            "/notes/a/x",
            "/notes/b",
            "/z"
        ]
    );
    assert_eq!(
        paths("/notes/", None, 10).await,
        ["/notes/a", "/notes/a/x", "/notes/b"]
    );
    assert_eq!(paths("/notes/", Some("/notes/a0"), 10).await, ["/notes/b"]);
    assert_eq!(paths("/notes/", None, 1).await, ["/notes/a"]);
    assert!(
        store
            .list_memories("wrkspc_other", "memstore_1", "/", None, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn versions_filter_and_redact(b: Backend) {
    let (store, _dir) = open(b).await;
    store
        .insert_memory_store(WS, &mstore("memstore_1", 1), 1)
        .await
        .unwrap();
    let mut w = write("memstore_1", create("mem_1", "/a", "one"), None);
    let t_created = w.at;
    let MemoryWriteOutcome::Written { version: v1, .. } = store.write_memory(WS, &w).await.unwrap()
    else {
        panic!()
    };
    w = write(
        "memstore_1",
        MemoryChange::Update {
            id: "mem_1".into(),
            path: None,
            content: Some("two".into()),
        },
        None,
    );
    w.actor = Some(Actor::SessionActor {
        session_id: "sesn_1".into(),
    });
    let MemoryWriteOutcome::Written { version: v2, .. } = store.write_memory(WS, &w).await.unwrap()
    else {
        panic!()
    };
    let list = |f: MemoryVersionFilter| {
        let store = store.clone();
        async move {
            ids(
                &store
                    .list_memory_versions(WS, "memstore_1", &f, &scan(Direction::Descending, 10))
                    .await
                    .unwrap(),
                |v| &v.id,
            )
        }
    };
    assert_eq!(
        list(Default::default()).await,
        [v2.id.clone(), v1.id.clone()]
    );
    let by_session = MemoryVersionFilter {
        session_id: Some("sesn_1".into()),
        ..Default::default()
    };
    assert_eq!(list(by_session).await, [v2.id.as_str()]);
    let by_key = MemoryVersionFilter {
        api_key_id: Some("apikey_1".into()),
        operation: Some(Operation::Created),
        ..Default::default()
    };
    assert_eq!(list(by_key).await, [v1.id.as_str()]);
    let modified = MemoryVersionFilter {
        operation: Some(Operation::Modified),
        memory_id: Some("mem_1".into()),
        created_gte: Some(t_created),
        ..Default::default()
    };
    assert_eq!(list(modified).await, [v2.id.as_str()]);
    let before = MemoryVersionFilter {
        created_lte: Some(t_created - 1),
        ..Default::default()
    };
    assert!(list(before).await.is_empty());

    // The current version of a live memory stays; an older one is redacted, once.
    let redactor = Actor::ApiActor {
        api_key_id: "apikey_2".into(),
    };
    assert_eq!(
        store
            .redact_memory_version(WS, "memstore_1", &v2.id, Some(&redactor), 5)
            .await
            .unwrap(),
        RedactOutcome::Current
    );
    let RedactOutcome::Redacted(r) = store
        .redact_memory_version(WS, "memstore_1", &v1.id, Some(&redactor), 5)
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        (r.path.clone(), r.content.clone(), r.content_sha256.clone()),
        (None, None, None)
    );
    assert_eq!(r.redacted_by, Some(redactor.clone()));
    assert_eq!(r.created_by, v1.created_by);
    let stored = store
        .get_memory_version(WS, "memstore_1", &v1.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored, *r);
    assert_eq!(
        store
            .redact_memory_version(WS, "memstore_1", &v1.id, None, 9)
            .await
            .unwrap(),
        RedactOutcome::Redacted(r)
    );
    assert_eq!(
        store
            .redact_memory_version(WS, "memstore_1", "memver_x", None, 9)
            .await
            .unwrap(),
        RedactOutcome::NotFound
    );
}

async fn deleting_a_store_takes_its_memories_and_versions(b: Backend) {
    let (store, _dir) = open(b).await;
    store
        .insert_memory_store(WS, &mstore("memstore_1", 1), 1)
        .await
        .unwrap();
    store
        .insert_memory_store(WS, &mstore("memstore_2", 1), 1)
        .await
        .unwrap();
    for s in ["memstore_1", "memstore_2"] {
        store
            .write_memory(WS, &write(s, create(&format!("mem_{s}"), "/a", "x"), None))
            .await
            .unwrap();
    }
    assert!(
        !store
            .delete_memory_store("wrkspc_other", "memstore_1")
            .await
            .unwrap()
    );
    assert!(store.delete_memory_store(WS, "memstore_1").await.unwrap());
    assert!(!store.delete_memory_store(WS, "memstore_1").await.unwrap());
    assert_eq!(
        store.get_memory_store(WS, "memstore_1").await.unwrap(),
        None
    );
    // A store made again with the same id starts empty.
    store
        .insert_memory_store(WS, &mstore("memstore_1", 1), 1)
        .await
        .unwrap();
    assert!(
        store
            .list_memories(WS, "memstore_1", "/", None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .list_memory_versions(
                WS,
                "memstore_1",
                &Default::default(),
                &scan(Direction::Descending, 10)
            )
            .await
            .unwrap()
            .is_empty()
    );
    // The other store keeps its own.
    assert_eq!(
        store
            .list_memories(WS, "memstore_2", "/", None, 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn a_full_store_refuses_creates_but_not_changes(b: Backend) {
    use mast::store::memory::MAX_MEMORIES_PER_STORE;
    let (store, _dir) = open(b).await;
    store
        .insert_memory_store(WS, &mstore("memstore_1", 1), 1)
        .await
        .unwrap();
    for i in 0..MAX_MEMORIES_PER_STORE {
        let w = write(
            "memstore_1",
            create(&format!("mem_{i}"), &format!("/m/{i}.md"), "x"),
            None,
        );
        let out = store.write_memory(WS, &w).await.unwrap();
        assert!(
            matches!(out, MemoryWriteOutcome::Written { .. }),
            "{i}: {out:?}"
        );
    }
    let over = write("memstore_1", create("mem_over", "/m/over.md", "x"), None);
    assert_eq!(
        store.write_memory(WS, &over).await.unwrap(),
        MemoryWriteOutcome::StoreFull
    );
    assert_eq!(
        store
            .get_memory(WS, "memstore_1", "mem_over")
            .await
            .unwrap(),
        None
    );
    // What the store holds can still change, and a delete makes room again.
    let change = MemoryChange::Update {
        id: "mem_0".into(),
        path: None,
        content: Some("y".into()),
    };
    let out = store
        .write_memory(WS, &write("memstore_1", change, None))
        .await
        .unwrap();
    assert!(matches!(out, MemoryWriteOutcome::Written { .. }), "{out:?}");
    let delete = MemoryChange::Delete { id: "mem_1".into() };
    store
        .write_memory(WS, &write("memstore_1", delete, None))
        .await
        .unwrap();
    let again = write("memstore_1", create("mem_over", "/m/over.md", "x"), None);
    let out = store.write_memory(WS, &again).await.unwrap();
    assert!(matches!(out, MemoryWriteOutcome::Written { .. }), "{out:?}");
}
