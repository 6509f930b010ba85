//! Hooks: CRUD with their sealed secrets, workspace isolation, pages, and the
//! lookup the loop makes by event (oldest first).

use mast::domain::hook::{FailureMode, Hook, HookEvent, HookScope, HookTag};
use mast::domain::time;
use mast::store::{Direction, HookRecord};

use super::{WS, ids, open, scan, scan_after};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    hooks_round_trip_with_their_sealed_secrets,
    hooks_for_an_event_come_oldest_first_and_deletes_take_them,
);

fn hook(id: &str, event: &str) -> HookRecord {
    HookRecord {
        hook: Hook {
            tag: HookTag::Tag,
            id: id.into(),
            event: HookEvent::parse(event).expect("an event"),
            matcher: Some("write|edit".into()),
            scope: HookScope::Agent {
                agent_id: "agent_x".into(),
            },
            url: "https://hooks.example/h".into(),
            timeout_ms: 1500,
            failure_mode: FailureMode::Allow,
            created_at: time::format(crate::support::now()),
            signing_secret: None,
        },
        // Bytes outside UTF-8 on purpose: the column is binary.
        sealed_secret: format!("\x00\u{ff}{id}").into_bytes(),
    }
}

async fn hooks_round_trip_with_their_sealed_secrets(b: Backend) {
    let (store, _d) = open(b).await;
    let first = hook("hook_1", "pre_tool_use");
    store
        .insert_hook(WS, &first, crate::support::now())
        .await
        .unwrap();
    for id in ["hook_2", "hook_3"] {
        store
            .insert_hook(WS, &hook(id, "pre_tool_use"), crate::support::now())
            .await
            .unwrap();
    }
    assert_eq!(store.get_hook(WS, "hook_1").await.unwrap(), Some(first));
    assert_eq!(
        store.get_hook("wrkspc_other", "hook_1").await.unwrap(),
        None
    );
    assert_eq!(store.get_hook(WS, "hook_9").await.unwrap(), None);

    let page = store
        .list_hooks(WS, &scan(Direction::Descending, 2))
        .await
        .unwrap();
    assert_eq!(ids(&page, |h| &h.id), ["hook_3", "hook_2"]);
    let rest = store
        .list_hooks(
            WS,
            &scan_after("hook_2".to_string(), Direction::Descending, 2),
        )
        .await
        .unwrap();
    assert_eq!(ids(&rest, |h| &h.id), ["hook_1"]);
    assert!(
        store
            .list_hooks("wrkspc_other", &scan(Direction::Ascending, 10))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn hooks_for_an_event_come_oldest_first_and_deletes_take_them(b: Backend) {
    let (store, _d) = open(b).await;
    for (id, event) in [
        ("hook_3", "pre_tool_use"),
        ("hook_1", "pre_tool_use"),
        ("hook_2", "stop"),
    ] {
        store
            .insert_hook(WS, &hook(id, event), crate::support::now())
            .await
            .unwrap();
    }
    store
        .insert_hook(
            "wrkspc_other",
            &hook("hook_4", "pre_tool_use"),
            crate::support::now(),
        )
        .await
        .unwrap();
    let pre = store.hooks_for_event(WS, "pre_tool_use").await.unwrap();
    assert_eq!(ids(&pre, |r| &r.hook.id), ["hook_1", "hook_3"]);
    assert_eq!(pre[0], hook("hook_1", "pre_tool_use").with_time(&pre[0]));

    assert!(!store.delete_hook("wrkspc_other", "hook_1").await.unwrap());
    assert!(store.delete_hook(WS, "hook_1").await.unwrap());
    assert!(!store.delete_hook(WS, "hook_1").await.unwrap());
    let pre = store.hooks_for_event(WS, "pre_tool_use").await.unwrap();
    assert_eq!(ids(&pre, |r| &r.hook.id), ["hook_3"]);
}

/// The record with `stored`'s creation time (the rest must match exactly).
trait WithTime {
    fn with_time(self, stored: &HookRecord) -> HookRecord;
}

impl WithTime for HookRecord {
    fn with_time(mut self, stored: &HookRecord) -> HookRecord {
        self.hook.created_at = stored.hook.created_at.clone();
        self
    }
}
