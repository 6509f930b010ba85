//! Webhooks: endpoints round-trip; the outbox is written in the transaction of the change it
//! reports, only for enabled endpoints that want the type; claims take only each endpoint's
//! oldest pending delivery, one sender at a time; attempts retry, deliver, fail; replays.

use mast::domain::time;
use mast::store::webhooks::{AttemptOutcome, AttemptRecord, EndpointRecord, WebhookEvent};
use mast::store::{Direction, Scan, Store};

use super::{WS, agent, append, client_txn, event, open, session, set_status};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    endpoints_round_trip_and_delete_with_their_deliveries,
    the_outbox_takes_only_wanted_types_of_enabled_endpoints_of_the_workspace,
    session_and_agent_changes_write_their_events_in_their_transaction,
    vault_and_credential_changes_write_their_events,
    one_delivery_in_flight_per_endpoint_in_order_and_one_sender_at_a_time,
    attempts_retry_deliver_and_fail,
    replay_queues_the_same_event_again,
    deployment_changes_and_runs_write_their_events,
    memory_store_changes_write_their_events,
);

fn endpoint(id: &str, types: &[&str], enabled: bool) -> EndpointRecord {
    let now = crate::support::now();
    EndpointRecord {
        id: id.into(),
        workspace_id: WS.into(),
        url: "https://example.com/hook".into(),
        event_types: types.iter().map(|t| t.to_string()).collect(),
        description: None,
        enabled,
        // Bytes outside UTF-8 on purpose: the column is binary.
        secret: vec![0xff, 0, 1],
        previous_secret: None,
        previous_until: None,
        created_at: now,
        updated_at: now,
    }
}

fn all() -> Scan<i64> {
    Scan {
        after: None,
        direction: Direction::Ascending,
        limit: 100,
    }
}

fn attempt(delivery_id: &str, status: Option<i64>) -> AttemptRecord {
    AttemptRecord {
        id: mast::domain::ids::new_id("what"),
        delivery_id: delivery_id.into(),
        attempted_at: crate::support::now(),
        status_code: status,
        latency_ms: 3,
        error: None,
        next_retry_at: None,
    }
}

async fn types_of(store: &dyn Store, endpoint_id: &str) -> Vec<String> {
    let rows = store
        .list_webhook_deliveries(endpoint_id, &all())
        .await
        .unwrap();
    rows.into_iter().map(|d| d.event_type).collect()
}

async fn endpoints_round_trip_and_delete_with_their_deliveries(b: Backend) {
    let (store, _d) = open(b).await;
    let mut e = endpoint("whep_1", &["agent.created"], true);
    store.insert_webhook_endpoint(&e).await.unwrap();
    assert_eq!(
        store.get_webhook_endpoint(WS, "whep_1").await.unwrap(),
        Some(e.clone())
    );
    assert_eq!(
        store
            .get_webhook_endpoint("wrkspc_other", "whep_1")
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store.webhook_endpoint_by_id("whep_1").await.unwrap(),
        Some(e.clone())
    );
    e.enabled = false;
    e.previous_secret = Some(vec![9]);
    e.previous_until = Some(42);
    e.description = Some("d".into());
    assert!(store.update_webhook_endpoint(&e).await.unwrap());
    assert_eq!(
        store.get_webhook_endpoint(WS, "whep_1").await.unwrap(),
        Some(e.clone())
    );
    store
        .insert_webhook_endpoint(&endpoint("whep_2", &["agent.created"], true))
        .await
        .unwrap();
    let listed = store
        .list_webhook_endpoints(WS, &super::scan(Direction::Descending, 10))
        .await
        .unwrap();
    assert_eq!(
        listed.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        ["whep_2", "whep_1"]
    );
    store
        .emit_webhook_events(&[WebhookEvent::new("agent.created", WS, "agent_1")])
        .await
        .unwrap();
    let d = &store
        .list_webhook_deliveries("whep_2", &all())
        .await
        .unwrap()[0];
    assert!(store.delete_webhook_endpoint(WS, "whep_2").await.unwrap());
    assert!(!store.delete_webhook_endpoint(WS, "whep_2").await.unwrap());
    assert_eq!(
        store.get_webhook_delivery("whep_2", &d.id).await.unwrap(),
        None
    );
    assert!(
        store
            .list_webhook_deliveries("whep_2", &all())
            .await
            .unwrap()
            .is_empty()
    );
}

async fn the_outbox_takes_only_wanted_types_of_enabled_endpoints_of_the_workspace(b: Backend) {
    let (store, _d) = open(b).await;
    store
        .insert_webhook_endpoint(&endpoint(
            "whep_a",
            &["agent.created", "agent.archived"],
            true,
        ))
        .await
        .unwrap();
    store
        .insert_webhook_endpoint(&endpoint("whep_off", &["agent.created"], false))
        .await
        .unwrap();
    // A type that is a prefix of a wanted one is not wanted.
    store
        .insert_webhook_endpoint(&endpoint("whep_b", &["session.created"], true))
        .await
        .unwrap();
    let other = EndpointRecord {
        workspace_id: "wrkspc_other".into(),
        ..endpoint("whep_o", &["agent.created"], true)
    };
    store.insert_webhook_endpoint(&other).await.unwrap();
    let ev = WebhookEvent::new("agent.created", WS, "agent_1");
    store
        .emit_webhook_events(&[ev.clone(), WebhookEvent::new("session.created_x", WS, "s")])
        .await
        .unwrap();
    let got = store
        .list_webhook_deliveries("whep_a", &all())
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].event_id.as_str(), got[0].payload.as_str()),
        (ev.id.as_str(), ev.payload(got[0].created_at).as_str())
    );
    assert_eq!((got[0].state.as_str(), got[0].attempts), ("pending", 0));
    for id in ["whep_off", "whep_b", "whep_o"] {
        assert!(types_of(&*store, id).await.is_empty(), "{id}");
    }
}

async fn session_and_agent_changes_write_their_events_in_their_transaction(b: Backend) {
    let (store, _d) = open(b).await;
    let types = [
        "session.created",
        "session.status_run_started",
        "session.status_idled",
        "session.archived",
        "session.deleted",
        "agent.created",
        "agent.updated",
        "agent.archived",
    ];
    store
        .insert_webhook_endpoint(&endpoint("whep_1", &types, true))
        .await
        .unwrap();
    session(&*store, "sesn_1").await;
    client_txn(
        &*store,
        "sesn_1",
        append(vec![event("session.status_running")]),
    )
    .await;
    client_txn(
        &*store,
        "sesn_1",
        append(vec![event("agent.message"), event("session.status_idle")]),
    )
    .await;
    // A transaction that changes the row but logs nothing webhook-worthy writes nothing.
    client_txn(&*store, "sesn_1", set_status("idle")).await;
    client_txn(
        &*store,
        "sesn_1",
        Box::new(|rec| {
            rec.archived_at = Some(crate::support::now());
            Ok(Default::default())
        }),
    )
    .await;
    store.delete_session(WS, "sesn_1").await.unwrap();
    let a = agent("agent_1", 1, "a", crate::support::now());
    store.insert_agent(WS, &a).await.unwrap();
    let a2 = agent("agent_1", 2, "a", crate::support::now());
    store.append_agent_version(WS, &a2, 1).await.unwrap();
    // A lost compare-and-set changes nothing, so reports nothing.
    assert!(store.append_agent_version(WS, &a2, 1).await.is_err());
    store
        .archive_agent(WS, "agent_1", crate::support::now())
        .await
        .unwrap();
    store
        .archive_agent(WS, "agent_1", crate::support::now())
        .await
        .unwrap();
    assert_eq!(types_of(&*store, "whep_1").await, types);
    let d = store
        .list_webhook_deliveries("whep_1", &all())
        .await
        .unwrap();
    let body: serde_json::Value = serde_json::from_str(&d[1].payload).unwrap();
    assert_eq!(body["type"], "event");
    assert_eq!(body["data"]["id"], "sesn_1");
    assert_eq!(body["data"]["workspace_id"], WS);
}

async fn one_delivery_in_flight_per_endpoint_in_order_and_one_sender_at_a_time(b: Backend) {
    let (store, _d) = open(b).await;
    for id in ["whep_1", "whep_2"] {
        store
            .insert_webhook_endpoint(&endpoint(id, &["agent.created"], true))
            .await
            .unwrap();
    }
    let events: Vec<_> = (0..3)
        .map(|i| WebhookEvent::new("agent.created", WS, &format!("agent_{i}")))
        .collect();
    store.emit_webhook_events(&events).await.unwrap();
    let minute = 60_000_000;
    let first = store
        .claim_webhook_deliveries("a", minute, 10)
        .await
        .unwrap();
    // The oldest of each endpoint, and nothing more while they are leased.
    assert_eq!(first.len(), 2);
    assert!(first.iter().all(|d| d.event_id == events[0].id));
    assert!(
        store
            .claim_webhook_deliveries("b", minute, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // Delivered: the endpoint's next one is due, in order.
    let d1 = first.iter().find(|d| d.endpoint_id == "whep_1").unwrap();
    assert!(
        !store
            .finish_webhook_attempt("b", &attempt(&d1.id, Some(200)), AttemptOutcome::Delivered)
            .await
            .unwrap(),
        "only the lease holder records an attempt"
    );
    assert!(
        store
            .finish_webhook_attempt("a", &attempt(&d1.id, Some(200)), AttemptOutcome::Delivered)
            .await
            .unwrap()
    );
    // A lease that runs out (the sender died mid-delivery) is taken over, and the old
    // holder can no longer record its attempt.
    let next = store.claim_webhook_deliveries("b", 1, 10).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(
        (next[0].endpoint_id.as_str(), next[0].event_id.as_str()),
        ("whep_1", events[1].id.as_str())
    );
    // Delivery leases run on the database's clock, which no test clock moves: the
    // microsecond lease must really pass.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let taken = store
        .claim_webhook_deliveries("c", minute, 10)
        .await
        .unwrap();
    assert_eq!(
        taken.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        [next[0].id.as_str()]
    );
    assert!(
        !store
            .finish_webhook_attempt(
                "b",
                &attempt(&next[0].id, Some(200)),
                AttemptOutcome::Delivered
            )
            .await
            .unwrap()
    );
    assert!(
        store
            .finish_webhook_attempt(
                "c",
                &attempt(&next[0].id, Some(200)),
                AttemptOutcome::Delivered
            )
            .await
            .unwrap()
    );
    // A disabled endpoint's deliveries wait (its first is due again at once).
    let d2 = first.iter().find(|d| d.endpoint_id == "whep_2").unwrap();
    assert!(
        store
            .finish_webhook_attempt("a", &attempt(&d2.id, Some(503)), AttemptOutcome::RetryIn(0))
            .await
            .unwrap()
    );
    let mut e2 = store
        .get_webhook_endpoint(WS, "whep_2")
        .await
        .unwrap()
        .unwrap();
    e2.enabled = false;
    store.update_webhook_endpoint(&e2).await.unwrap();
    let only_1 = store
        .claim_webhook_deliveries("d", minute, 10)
        .await
        .unwrap();
    assert_eq!(
        only_1
            .iter()
            .map(|d| (d.endpoint_id.as_str(), d.event_id.as_str()))
            .collect::<Vec<_>>(),
        [("whep_1", events[2].id.as_str())]
    );
    e2.enabled = true;
    store.update_webhook_endpoint(&e2).await.unwrap();
    let again = store
        .claim_webhook_deliveries("d", minute, 10)
        .await
        .unwrap();
    assert_eq!(
        again
            .iter()
            .map(|d| (d.id.as_str(), d.attempts))
            .collect::<Vec<_>>(),
        [(d2.id.as_str(), 1)]
    );
}

async fn attempts_retry_deliver_and_fail(b: Backend) {
    let (store, _d) = open(b).await;
    store
        .insert_webhook_endpoint(&endpoint("whep_1", &["agent.created"], true))
        .await
        .unwrap();
    let events: Vec<_> = (0..2)
        .map(|i| WebhookEvent::new("agent.created", WS, &format!("agent_{i}")))
        .collect();
    store.emit_webhook_events(&events).await.unwrap();
    let hour = 3_600_000_000;
    let d = store
        .claim_webhook_deliveries("a", hour, 10)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(d.event_id, events[0].id);
    // Retried at once: the same delivery comes back before the endpoint's next event.
    let mut failed = attempt(&d.id, Some(500));
    failed.error = Some("HTTP 500".into());
    assert!(
        store
            .finish_webhook_attempt("a", &failed, AttemptOutcome::RetryIn(0))
            .await
            .unwrap()
    );
    let again = store.claim_webhook_deliveries("a", hour, 10).await.unwrap();
    assert_eq!(
        again.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        [d.id.as_str()]
    );
    assert_eq!(again[0].attempts, 1);
    // Retries ran out: failed, and the next event goes.
    assert!(
        store
            .finish_webhook_attempt("a", &attempt(&d.id, None), AttemptOutcome::Failed)
            .await
            .unwrap()
    );
    let row = store
        .get_webhook_delivery("whep_1", &d.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (row.state.as_str(), row.attempts, row.last_status),
        ("failed", 2, None)
    );
    let second = store
        .claim_webhook_deliveries("a", hour, 10)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(second.event_id, events[1].id);
    // Retried in an hour: not due before then.
    assert!(
        store
            .finish_webhook_attempt("a", &failed_for(&second.id), AttemptOutcome::RetryIn(hour))
            .await
            .unwrap()
    );
    assert!(
        store
            .claim_webhook_deliveries("a", hour, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let row = store
        .get_webhook_delivery("whep_1", &second.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (row.state.as_str(), row.attempts, row.last_status),
        ("pending", 1, Some(500))
    );
    assert!(row.next_attempt_at > crate::support::now() + hour / 2);
    let attempts = store.list_webhook_attempts(&d.id).await.unwrap();
    assert_eq!(
        attempts.iter().map(|a| a.status_code).collect::<Vec<_>>(),
        [Some(500), None]
    );
    assert!(attempts[0].next_retry_at.is_some());
    assert_eq!(attempts[1].next_retry_at, None);
    assert_eq!(attempts[0].error.as_deref(), Some("HTTP 500"));
    let later = store.list_webhook_attempts(&second.id).await.unwrap();
    assert!(
        later[0]
            .next_retry_at
            .is_some_and(|t| t > crate::support::now() + hour / 2)
    );
}

fn failed_for(delivery_id: &str) -> AttemptRecord {
    AttemptRecord {
        error: Some("HTTP 500".into()),
        ..attempt(delivery_id, Some(500))
    }
}

async fn replay_queues_the_same_event_again(b: Backend) {
    let (store, _d) = open(b).await;
    store
        .insert_webhook_endpoint(&endpoint("whep_1", &["agent.created"], true))
        .await
        .unwrap();
    let ev = WebhookEvent::new("agent.created", WS, "agent_1");
    store
        .emit_webhook_events(std::slice::from_ref(&ev))
        .await
        .unwrap();
    let d = store
        .claim_webhook_deliveries("a", 60_000_000, 10)
        .await
        .unwrap()
        .remove(0);
    assert!(
        store
            .finish_webhook_attempt("a", &attempt(&d.id, None), AttemptOutcome::Failed)
            .await
            .unwrap()
    );
    let failed = store
        .get_webhook_delivery("whep_1", &d.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((failed.state.as_str(), failed.attempts), ("failed", 1));
    let again = store
        .replay_webhook_delivery("whep_1", &d.id)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(again.id, d.id);
    assert_eq!(
        (
            again.event_id.as_str(),
            again.payload.as_str(),
            again.state.as_str()
        ),
        (ev.id.as_str(), ev.payload(d.created_at).as_str(), "pending")
    );
    assert!(
        store
            .replay_webhook_delivery("whep_1", "whdl_none")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .replay_webhook_delivery("whep_other", &d.id)
            .await
            .unwrap()
            .is_none()
    );
    let claimed = store
        .claim_webhook_deliveries("a", 60_000_000, 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, again.id);
    assert!(
        store
            .finish_webhook_attempt(
                "a",
                &attempt(&again.id, Some(204)),
                AttemptOutcome::Delivered
            )
            .await
            .unwrap()
    );
    let done = store
        .get_webhook_delivery("whep_1", &again.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (done.state.as_str(), done.last_status),
        ("delivered", Some(204))
    );
}

async fn vault_and_credential_changes_write_their_events(b: Backend) {
    use mast::domain::credential::{Credential, CredentialAuth, CredentialTag};
    use mast::domain::vault::{Vault, VaultTag};
    let (store, _d) = open(b).await;
    let types = [
        "vault.created",
        "vault_credential.created",
        "vault_credential.archived",
        "vault_credential.deleted",
        "vault.archived",
        "vault.deleted",
    ];
    store
        .insert_webhook_endpoint(&endpoint("whep_1", &types, true))
        .await
        .unwrap();
    let now = time::format(crate::support::now());
    let mut vault = Vault {
        tag: VaultTag::Tag,
        id: "vlt_1".into(),
        display_name: "v".into(),
        metadata: Default::default(),
        created_at: now.clone(),
        updated_at: now.clone(),
        archived_at: None,
    };
    store
        .insert_vault(WS, &vault, crate::support::now())
        .await
        .unwrap();
    let rec = mast::store::CredentialRecord {
        credential: Credential {
            tag: CredentialTag::Tag,
            id: "vcrd_1".into(),
            vault_id: "vlt_1".into(),
            display_name: None,
            auth: CredentialAuth::StaticBearer {
                mcp_server_url: "https://mcp.example.com/".into(),
            },
            metadata: Default::default(),
            created_at: now.clone(),
            updated_at: now.clone(),
            archived_at: None,
        },
        server_url: "https://mcp.example.com/".into(),
        sealed: vec![1, 2],
    };
    store
        .insert_credential(WS, &rec, crate::support::now())
        .await
        .unwrap();
    // A token refresh (no archive) reports nothing.
    assert!(
        store
            .update_credential(WS, &rec, crate::support::now(), false, None)
            .await
            .unwrap()
    );
    assert!(
        store
            .update_credential(WS, &rec, crate::support::now(), true, None)
            .await
            .unwrap()
    );
    assert!(
        store
            .delete_credential(WS, "vlt_1", "vcrd_1")
            .await
            .unwrap()
    );
    store
        .update_vault(WS, &vault, crate::support::now(), false)
        .await
        .unwrap();
    vault.archived_at = Some(now);
    store
        .update_vault(WS, &vault, crate::support::now(), true)
        .await
        .unwrap();
    assert!(store.delete_vault(WS, "vlt_1").await.unwrap());
    assert!(!store.delete_vault(WS, "vlt_1").await.unwrap());
    assert_eq!(types_of(&*store, "whep_1").await, types);
    let d = store
        .list_webhook_deliveries("whep_1", &all())
        .await
        .unwrap();
    let body: serde_json::Value = serde_json::from_str(&d[1].payload).unwrap();
    assert_eq!(body["data"]["vault_id"], "vlt_1");
    assert_eq!(body["data"]["id"], "vcrd_1");
}

async fn deployment_changes_and_runs_write_their_events(b: Backend) {
    use super::deployments::{dep, run};
    use mast::domain::deployment::pause_for;
    use mast::store::{DeploymentChange, NextFire};
    let (store, _d) = open(b).await;
    let types = [
        "deployment.created",
        "deployment.updated",
        "deployment.paused",
        "deployment.unpaused",
        "deployment.archived",
        "deployment_run.started",
        "deployment_run.succeeded",
        "deployment_run.failed",
    ];
    store
        .insert_webhook_endpoint(&endpoint("whep_1", &types, true))
        .await
        .unwrap();
    let d = dep("depl_1", "agent_a", 1_000, Some(10_000));
    store.insert_deployment(&d).await.unwrap();
    store
        .update_deployment(&d, NextFire::Keep, DeploymentChange::Updated)
        .await
        .unwrap();
    store
        .record_deployment_run(&run("drun_1", "depl_1", None, Some("sesn_1")), None)
        .await
        .unwrap();
    // A scheduled run that could not start pauses the deployment, in the same write.
    let pause = pause_for("vault_archived_error");
    store
        .record_deployment_run(&run("drun_2", "depl_1", Some(10_000), None), pause.as_ref())
        .await
        .unwrap();
    // A second refusal while paused pauses nothing more, and says nothing more of it.
    store
        .record_deployment_run(&run("drun_3", "depl_1", Some(20_000), None), pause.as_ref())
        .await
        .unwrap();
    store
        .update_deployment(&d, NextFire::Keep, DeploymentChange::Unpaused)
        .await
        .unwrap();
    store
        .update_deployment(&d, NextFire::Set(None), DeploymentChange::Archived)
        .await
        .unwrap();
    assert_eq!(
        types_of(&*store, "whep_1").await,
        [
            "deployment.created",
            "deployment.updated",
            "deployment_run.started",
            "deployment_run.succeeded",
            "deployment_run.started",
            "deployment_run.failed",
            "deployment.paused",
            "deployment_run.started",
            "deployment_run.failed",
            "deployment.unpaused",
            "deployment.archived",
        ]
    );
    let rows = store
        .list_webhook_deliveries("whep_1", &all())
        .await
        .unwrap();
    let data: serde_json::Value = serde_json::from_str(&rows[2].payload).unwrap();
    assert_eq!(data["data"]["id"], "drun_1", "a run's events name the run");
    let data: serde_json::Value = serde_json::from_str(&rows[6].payload).unwrap();
    assert_eq!(data["data"]["id"], "depl_1");
}

async fn memory_store_changes_write_their_events(b: Backend) {
    use mast::domain::memory::{MemoryStore, MemoryStoreTag};
    let (store, _d) = open(b).await;
    let types = [
        "memory_store.created",
        "memory_store.archived",
        "memory_store.deleted",
    ];
    store
        .insert_webhook_endpoint(&endpoint("whep_1", &types, true))
        .await
        .unwrap();
    let now = time::format(crate::support::now());
    let mut m = MemoryStore {
        tag: MemoryStoreTag::Tag,
        id: "memstore_1".into(),
        name: "notes".into(),
        description: String::new(),
        metadata: Default::default(),
        created_at: now.clone(),
        updated_at: now.clone(),
        archived_at: None,
    };
    store
        .insert_memory_store(WS, &m, crate::support::now())
        .await
        .unwrap();
    // A rename reports nothing; archiving does.
    m.name = "renamed".into();
    store
        .update_memory_store(WS, &m, crate::support::now(), false)
        .await
        .unwrap();
    m.archived_at = Some(now.clone());
    store
        .update_memory_store(WS, &m, crate::support::now(), true)
        .await
        .unwrap();
    assert!(store.delete_memory_store(WS, "memstore_1").await.unwrap());
    assert!(!store.delete_memory_store(WS, "memstore_1").await.unwrap());
    assert_eq!(types_of(&*store, "whep_1").await, types);
}
