//! A server on a manual clock: everything it stamps and every schedule it keeps reads the
//! clock it was given, and moving that clock is how a test makes time pass.

use std::time::Duration;

use mast::domain::clock::Clock;
use mast::domain::time;
use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::{Backend, Options, TestServer, eventually};

backend_tests!(a_server_stamps_and_schedules_on_the_clock_it_is_given);

async fn a_server_stamps_and_schedules_on_the_clock_it_is_given(b: Backend) {
    let start = time::parse("2030-01-01T00:30:00Z").unwrap();
    let clock = Clock::manual(start);
    let s = TestServer::start_tuned(b, Options::default(), {
        let clock = clock.clone();
        move |c| c.clock = clock
    })
    .await;
    let c = &s.client;
    let agent = c.agent(json!([])).await;
    assert_eq!(agent["created_at"], "2030-01-01T00:30:00Z");
    let env = c.environment().await;
    let created = c
        .post(
            "/v1/deployments",
            json!({
                "name": "hourly",
                "agent": agent["id"],
                "environment_id": env["id"],
                "initial_events": [{"type": "user.message",
                                    "content": [{"type": "text", "text": "say tick"}]}],
                "schedule": {"type": "cron", "expression": "0 * * * *", "timezone": "UTC"},
            }),
        )
        .await
        .ok();
    let id = created["id"].as_str().unwrap().to_string();
    assert_eq!(created["created_at"], "2030-01-01T00:30:00Z");
    assert_eq!(
        created["schedule"]["upcoming_runs_at"][0], "2030-01-01T01:00:00Z",
        "the next slot is computed from the server's clock: {created}"
    );

    // Nothing fires while the clock stands still, however long the scheduler runs.
    let runs = |c: crate::support::Client, id: String| async move {
        c.get(&format!("/v1/deployment_runs?deployment_id={id}"))
            .await
            .ok()["data"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    assert!(runs(c.clone(), id.clone()).await.is_empty());

    // Half an hour later the slot is due: the scheduler fires it once.
    clock.advance(Duration::from_secs(30 * 60));
    let fired: Vec<Value> = eventually(30, "the hourly slot to fire", || {
        let (c, id) = (c.clone(), id.clone());
        async move {
            let r = runs(c, id).await;
            (!r.is_empty()).then_some(r)
        }
    })
    .await;
    assert_eq!(fired.len(), 1, "{fired:?}");
    let dep = c.get(&format!("/v1/deployments/{id}")).await.ok();
    assert_eq!(
        dep["schedule"]["last_run_at"], "2030-01-01T01:00:00Z",
        "{dep}"
    );
    assert_eq!(
        dep["schedule"]["upcoming_runs_at"][0],
        "2030-01-01T02:00:00Z"
    );
}
