//! Agents and their versions.

use mast::domain::time;
use mast::store::{AgentFilter, Direction, StoreError};

use super::{WS, agent, ids, open, scan, scan_after};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    agents_round_trip_by_version_and_workspace,
    agent_versions_conflict,
    agents_list_latest_versions_with_filters_and_scans,
    agent_versions_list_both_ways,
    archiving_an_agent_is_idempotent_and_shows_on_every_version,
);

async fn agents_round_trip_by_version_and_workspace(b: Backend) {
    let (store, _d) = open(b).await;
    let v1 = agent("agent_r", 1, "r", 1_000_000);
    store.insert_agent(WS, &v1).await.unwrap();
    assert_eq!(
        store.get_agent(WS, "agent_r", None).await.unwrap(),
        Some(v1.clone())
    );
    assert_eq!(
        store.get_agent(WS, "agent_r", Some(1)).await.unwrap(),
        Some(v1.clone())
    );
    assert_eq!(store.get_agent(WS, "agent_r", Some(2)).await.unwrap(), None);
    assert_eq!(store.get_agent(WS, "agent_no", None).await.unwrap(), None);
    assert_eq!(
        store
            .get_agent("wrkspc_other", "agent_r", None)
            .await
            .unwrap(),
        None
    );
}

async fn agent_versions_conflict(b: Backend) {
    let (store, _d) = open(b).await;
    let v1 = agent("agent_v", 1, "a", crate::support::now());
    store.insert_agent(WS, &v1).await.unwrap();
    let mut v2 = v1.clone();
    v2.version = 2;
    v2.name = "b".into();
    store.append_agent_version(WS, &v2, 1).await.unwrap();
    let mut stale = v1.clone();
    stale.version = 2;
    assert!(matches!(
        store.append_agent_version(WS, &stale, 1).await,
        Err(StoreError::Conflict(_))
    ));
    let mut v3 = v2.clone();
    v3.version = 3;
    assert!(
        matches!(
            store.append_agent_version("wrkspc_other", &v3, 2).await,
            Err(StoreError::Conflict(_))
        ),
        "another workspace's agent is not there to append to"
    );
    assert_eq!(
        store.get_agent(WS, "agent_v", None).await.unwrap().unwrap(),
        v2
    );
    assert_eq!(
        store
            .get_agent(WS, "agent_v", Some(1))
            .await
            .unwrap()
            .unwrap(),
        v1
    );
    assert_eq!(store.get_agent(WS, "agent_v", Some(3)).await.unwrap(), None);
}

async fn agents_list_latest_versions_with_filters_and_scans(b: Backend) {
    let (store, _d) = open(b).await;
    let sec = 1_000_000;
    for (i, id) in ["agent_a", "agent_b", "agent_c", "agent_d"]
        .iter()
        .enumerate()
    {
        let at = 1_700_000_000 * sec + i as i64 * sec;
        store.insert_agent(WS, &agent(id, 1, id, at)).await.unwrap();
    }
    store
        .insert_agent("wrkspc_other", &agent("agent_o", 1, "o", 0))
        .await
        .unwrap();
    let mut b2 = store.get_agent(WS, "agent_b", None).await.unwrap().unwrap();
    b2.version = 2;
    b2.name = "b2".into();
    store.append_agent_version(WS, &b2, 1).await.unwrap();
    store
        .archive_agent(WS, "agent_c", crate::support::now())
        .await
        .unwrap();

    let all = AgentFilter::default();
    let list = store
        .list_agents(WS, &all, &scan(Direction::Ascending, 10))
        .await
        .unwrap();
    assert_eq!(
        ids(&list, |a| &a.id),
        ["agent_a", "agent_b", "agent_d"],
        "archived left out, other workspaces never"
    );
    assert_eq!(list[1].version, 2, "latest version");
    assert_eq!(list[1].name, "b2");

    let with_archived = AgentFilter {
        include_archived: true,
        ..Default::default()
    };
    let list = store
        .list_agents(WS, &with_archived, &scan(Direction::Descending, 10))
        .await
        .unwrap();
    assert_eq!(
        ids(&list, |a| &a.id),
        ["agent_d", "agent_c", "agent_b", "agent_a"]
    );
    assert!(list[1].archived_at.is_some());

    let page = store
        .list_agents(
            WS,
            &with_archived,
            &scan_after("agent_b".to_string(), Direction::Ascending, 1),
        )
        .await
        .unwrap();
    assert_eq!(ids(&page, |a| &a.id), ["agent_c"]);
    let page = store
        .list_agents(
            WS,
            &with_archived,
            &scan_after("agent_c".to_string(), Direction::Descending, 5),
        )
        .await
        .unwrap();
    assert_eq!(ids(&page, |a| &a.id), ["agent_b", "agent_a"]);

    // Creation-time bounds are inclusive and read the agent's creation, not its latest version.
    let t = |i: i64| 1_700_000_000 * sec + i * sec;
    let window = AgentFilter {
        include_archived: true,
        created_gte: Some(t(1)),
        created_lte: Some(t(2)),
    };
    let list = store
        .list_agents(WS, &window, &scan(Direction::Ascending, 10))
        .await
        .unwrap();
    assert_eq!(ids(&list, |a| &a.id), ["agent_b", "agent_c"]);
    let from = AgentFilter {
        created_gte: Some(t(3)),
        ..Default::default()
    };
    let list = store
        .list_agents(WS, &from, &scan(Direction::Ascending, 10))
        .await
        .unwrap();
    assert_eq!(ids(&list, |a| &a.id), ["agent_d"]);
}

async fn agent_versions_list_both_ways(b: Backend) {
    let (store, _d) = open(b).await;
    let mut a = agent("agent_h", 1, "v1", crate::support::now());
    store.insert_agent(WS, &a).await.unwrap();
    for v in 2..=4 {
        a.version = v;
        a.name = format!("v{v}");
        store.append_agent_version(WS, &a, v - 1).await.unwrap();
    }
    let names = |list: &[mast::domain::agent::Agent]| {
        list.iter()
            .map(|a| (a.version, a.name.clone()))
            .collect::<Vec<_>>()
    };
    let up = store
        .list_agent_versions(WS, "agent_h", &scan(Direction::Ascending, 10))
        .await
        .unwrap();
    assert_eq!(
        names(&up),
        [
            (1, "v1".to_string()),
            (2, "v2".into()),
            (3, "v3".into()),
            (4, "v4".into())
        ]
    );
    let down = store
        .list_agent_versions(WS, "agent_h", &scan_after(4, Direction::Descending, 2))
        .await
        .unwrap();
    assert_eq!(names(&down), [(3, "v3".to_string()), (2, "v2".into())]);
    let up = store
        .list_agent_versions(WS, "agent_h", &scan_after(3, Direction::Ascending, 2))
        .await
        .unwrap();
    assert_eq!(names(&up), [(4, "v4".to_string())]);
    assert!(
        store
            .list_agent_versions("wrkspc_other", "agent_h", &scan(Direction::Ascending, 10))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .list_agent_versions(WS, "agent_none", &scan(Direction::Ascending, 10))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn archiving_an_agent_is_idempotent_and_shows_on_every_version(b: Backend) {
    let (store, _d) = open(b).await;
    let mut a = agent("agent_z", 1, "one", crate::support::now());
    store.insert_agent(WS, &a).await.unwrap();
    a.version = 2;
    a.name = "two".into();
    store.append_agent_version(WS, &a, 1).await.unwrap();
    assert_eq!(
        store
            .archive_agent(WS, "agent_none", crate::support::now())
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .archive_agent("wrkspc_other", "agent_z", crate::support::now())
            .await
            .unwrap(),
        None
    );
    let at = 1_800_000_000_000_000;
    let archived = store
        .archive_agent(WS, "agent_z", at)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(archived.version, 2, "the latest version comes back");
    assert_eq!(archived.archived_at, Some(time::format(at)));
    let again = store
        .archive_agent(WS, "agent_z", at + 5_000_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        again.archived_at,
        Some(time::format(at)),
        "archiving twice keeps the first time"
    );
    for v in [None, Some(1), Some(2)] {
        let got = store.get_agent(WS, "agent_z", v).await.unwrap().unwrap();
        assert_eq!(got.archived_at, Some(time::format(at)), "version {v:?}");
    }
    let versions = store
        .list_agent_versions(WS, "agent_z", &scan(Direction::Ascending, 10))
        .await
        .unwrap();
    assert!(
        versions
            .iter()
            .all(|v| v.archived_at == Some(time::format(at)))
    );
}
