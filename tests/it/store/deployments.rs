//! Deployments and their runs: round trip, the `next_fire_at` write modes, list filters, due
//! deployments, the one-winner claim, and a run recorded with the pause it causes.

use mast::domain::deployment::{DeploymentSpec, DeploymentState, manual_pause, pause_for};
use mast::domain::schedule::Schedule;
use mast::store::{
    DeploymentChange, DeploymentFilter, DeploymentRecord, DeploymentRunFilter, DeploymentRunRecord,
    Direction, NextFire, StoreError,
};
use serde_json::json;

use super::{WS, ids, open, scan, scan_after};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    deployments_round_trip_and_list_with_filters,
    due_deployments_and_exactly_one_claim,
    runs_record_with_their_effects_and_list_with_filters,
);

pub(super) fn dep(id: &str, agent: &str, at: i64, next: Option<i64>) -> DeploymentRecord {
    DeploymentRecord {
        id: id.into(),
        workspace_id: WS.into(),
        spec: DeploymentSpec {
            name: format!("deployment {id}"),
            description: None,
            agent_id: agent.into(),
            agent_version: 1,
            environment_id: "env_x".into(),
            initial_events: vec![json!({"type": "user.message", "content": []})],
            resources: vec![],
            vault_ids: vec!["vlt_1".into()],
            metadata: Default::default(),
            schedule: next.map(|_| Schedule {
                expression: "* * * * *".into(),
                timezone: "UTC".into(),
            }),
            budget: None,
        },
        state: DeploymentState {
            paused_reason: None,
            last_run_at: None,
            created_at: at,
            updated_at: at,
            archived_at: None,
        },
        next_fire_at: next,
    }
}

pub(super) fn run(
    id: &str,
    dep: &str,
    slot: Option<i64>,
    session: Option<&str>,
) -> DeploymentRunRecord {
    DeploymentRunRecord {
        id: id.into(),
        workspace_id: WS.into(),
        deployment_id: dep.into(),
        trigger_type: if slot.is_some() { "schedule" } else { "manual" }.into(),
        scheduled_at: slot,
        agent_id: "agent_a".into(),
        agent_version: 1,
        session_id: session.map(str::to_string),
        error: session
            .is_none()
            .then(|| json!({"type": "vault_archived_error", "message": "m"}).to_string()),
        created_at: slot.unwrap_or(5_000) + 1,
    }
}

async fn deployments_round_trip_and_list_with_filters(b: Backend) {
    let (store, _d) = open(b).await;
    for (id, agent, at) in [
        ("depl_1", "agent_a", 1_000),
        ("depl_2", "agent_b", 2_000),
        ("depl_3", "agent_a", 3_000),
    ] {
        store
            .insert_deployment(&dep(id, agent, at, Some(10_000)))
            .await
            .unwrap();
    }
    let first = dep("depl_1", "agent_a", 1_000, Some(10_000));
    assert_eq!(
        store.get_deployment(WS, "depl_1").await.unwrap(),
        Some(first)
    );
    assert_eq!(
        store
            .get_deployment("wrkspc_other", "depl_1")
            .await
            .unwrap(),
        None
    );

    // `Keep` leaves `next_fire_at` as stored; `Set` replaces it.
    let mut d2 = store.get_deployment(WS, "depl_2").await.unwrap().unwrap();
    d2.state.paused_reason = Some(manual_pause());
    d2.spec.name = "renamed".into();
    d2.next_fire_at = Some(1);
    store
        .update_deployment(&d2, NextFire::Keep, DeploymentChange::Paused)
        .await
        .unwrap();
    let got = store.get_deployment(WS, "depl_2").await.unwrap().unwrap();
    assert_eq!(
        (got.spec.name.as_str(), got.next_fire_at),
        ("renamed", Some(10_000))
    );
    assert_eq!(got.state.paused_reason, Some(manual_pause()));
    let mut d3 = store.get_deployment(WS, "depl_3").await.unwrap().unwrap();
    d3.state.archived_at = Some(4_000);
    store
        .update_deployment(&d3, NextFire::Set(None), DeploymentChange::Archived)
        .await
        .unwrap();
    let got = store.get_deployment(WS, "depl_3").await.unwrap().unwrap();
    assert_eq!(
        (got.next_fire_at, got.state.archived_at),
        (None, Some(4_000))
    );

    let list = |f: DeploymentFilter| {
        let store = store.clone();
        async move {
            let rows = store
                .list_deployments(WS, &f, &scan(Direction::Descending, 10))
                .await
                .unwrap();
            ids(&rows, |d| &d.id)
        }
    };
    assert_eq!(
        list(DeploymentFilter::default()).await,
        ["depl_2", "depl_1"]
    );
    let archived_too = DeploymentFilter {
        include_archived: true,
        ..Default::default()
    };
    assert_eq!(list(archived_too).await, ["depl_3", "depl_2", "depl_1"]);
    let by_agent = DeploymentFilter {
        agent_id: Some("agent_a".into()),
        include_archived: true,
        ..Default::default()
    };
    assert_eq!(list(by_agent).await, ["depl_3", "depl_1"]);
    let paused = DeploymentFilter {
        paused: Some(true),
        ..Default::default()
    };
    assert_eq!(list(paused).await, ["depl_2"]);
    let active = DeploymentFilter {
        paused: Some(false),
        ..Default::default()
    };
    assert_eq!(list(active).await, ["depl_1"]);
    let window = DeploymentFilter {
        include_archived: true,
        created_gte: Some(2_000),
        created_lte: Some(3_000),
        ..Default::default()
    };
    assert_eq!(list(window).await, ["depl_3", "depl_2"]);
    let page = store
        .list_deployments(
            WS,
            &DeploymentFilter::default(),
            &scan_after("depl_2".to_string(), Direction::Descending, 10),
        )
        .await
        .unwrap();
    assert_eq!(ids(&page, |d| &d.id), ["depl_1"]);
}

async fn due_deployments_and_exactly_one_claim(b: Backend) {
    let (store, _d) = open(b).await;
    store
        .insert_deployment(&dep("depl_due", "a", 1, Some(100)))
        .await
        .unwrap();
    store
        .insert_deployment(&dep("depl_later", "a", 1, Some(900)))
        .await
        .unwrap();
    store
        .insert_deployment(&dep("depl_manual", "a", 1, None))
        .await
        .unwrap();
    let mut paused = dep("depl_paused", "a", 1, Some(50));
    paused.state.paused_reason = Some(manual_pause());
    store.insert_deployment(&paused).await.unwrap();
    let due = store.due_deployments(500, 10).await.unwrap();
    assert_eq!(ids(&due, |d| &d.id), ["depl_due"]);

    // Many claimers of one slot: exactly one wins, and the slot moves on.
    let claims = (0..8).map(|_| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .claim_deployment_fire("depl_due", 100, Some(700))
                .await
        })
    });
    let won = futures_util::future::join_all(claims)
        .await
        .into_iter()
        .filter(|r| *r.as_ref().unwrap().as_ref().unwrap())
        .count();
    assert_eq!(won, 1);
    let d = store.get_deployment(WS, "depl_due").await.unwrap().unwrap();
    assert_eq!(d.next_fire_at, Some(700));
    assert!(store.due_deployments(500, 10).await.unwrap().is_empty());
    // A paused deployment's slot cannot be claimed.
    assert!(
        !store
            .claim_deployment_fire("depl_paused", 50, Some(60))
            .await
            .unwrap()
    );
}

async fn runs_record_with_their_effects_and_list_with_filters(b: Backend) {
    let (store, _d) = open(b).await;
    store
        .insert_deployment(&dep("depl_1", "agent_a", 1, Some(100)))
        .await
        .unwrap();
    store
        .record_deployment_run(&run("drun_1", "depl_1", Some(100), Some("sesn_1")), None)
        .await
        .unwrap();
    let d = store.get_deployment(WS, "depl_1").await.unwrap().unwrap();
    assert_eq!(
        d.state.last_run_at,
        Some(101),
        "a scheduled session sets last_run_at"
    );
    // A slot has one run at most.
    let twice = store
        .record_deployment_run(&run("drun_x", "depl_1", Some(100), Some("sesn_x")), None)
        .await;
    assert!(matches!(twice, Err(StoreError::Conflict(_))), "{twice:?}");
    assert_eq!(store.get_deployment_run(WS, "drun_x").await.unwrap(), None);
    // A manual run leaves last_run_at; a failed scheduled run pauses in the same write.
    store
        .record_deployment_run(&run("drun_2", "depl_1", None, Some("sesn_2")), None)
        .await
        .unwrap();
    let reason = pause_for("vault_archived_error").unwrap();
    store
        .record_deployment_run(&run("drun_3", "depl_1", Some(200), None), Some(&reason))
        .await
        .unwrap();
    let d = store.get_deployment(WS, "depl_1").await.unwrap().unwrap();
    assert_eq!(d.state.last_run_at, Some(101));
    assert_eq!(d.state.paused_reason, Some(reason));
    assert_eq!(
        store.get_deployment_run(WS, "drun_3").await.unwrap(),
        Some(run("drun_3", "depl_1", Some(200), None))
    );
    assert_eq!(
        store
            .get_deployment_run("wrkspc_other", "drun_3")
            .await
            .unwrap(),
        None
    );

    let list = |f: DeploymentRunFilter| {
        let store = store.clone();
        async move {
            let rows = store
                .list_deployment_runs(WS, &f, &scan(Direction::Descending, 10))
                .await
                .unwrap();
            ids(&rows, |r| &r.id)
        }
    };
    assert_eq!(
        list(DeploymentRunFilter::default()).await,
        ["drun_3", "drun_2", "drun_1"]
    );
    let errors = DeploymentRunFilter {
        has_error: Some(true),
        ..Default::default()
    };
    assert_eq!(list(errors).await, ["drun_3"]);
    let sessions = DeploymentRunFilter {
        has_error: Some(false),
        ..Default::default()
    };
    assert_eq!(list(sessions).await, ["drun_2", "drun_1"]);
    let manual = DeploymentRunFilter {
        trigger_type: Some("manual".into()),
        ..Default::default()
    };
    assert_eq!(list(manual).await, ["drun_2"]);
    let other = DeploymentRunFilter {
        deployment_id: Some("depl_nope".into()),
        ..Default::default()
    };
    assert!(list(other).await.is_empty());
    let window = DeploymentRunFilter {
        created_gt: Some(101),
        created_lt: Some(5_001),
        ..Default::default()
    };
    assert_eq!(list(window).await, ["drun_3"]);
    let inclusive = DeploymentRunFilter {
        created_gte: Some(101),
        created_lte: Some(5_001),
        ..Default::default()
    };
    assert_eq!(list(inclusive).await, ["drun_3", "drun_2", "drun_1"]);
}
