//! Outcomes survive a crash: the real binary, killed with SIGKILL while the grader grades,
//! restarted on the same store, grades the same iteration again and finishes the outcome —
//! one start span, one end, nothing duplicated.

use serde_json::json;

use crate::backend_tests;
use crate::crash::{check_log, free_port, spawn, wait_up};
use crate::support::{Backend, Client, eventually, fresh_postgres_database};

backend_tests!(sigkill_while_grading_resumes_the_evaluation);

async fn sigkill_while_grading_resumes_the_evaluation(b: Backend) {
    let dir = tempfile::TempDir::new().unwrap();
    let db = match b {
        Backend::Sqlite => None,
        Backend::Postgres => Some(fresh_postgres_database().await),
    };
    let port = free_port();
    let mut child = spawn(dir.path(), db.as_deref(), port);
    let c = Client::new(&format!("http://127.0.0.1:{port}"));
    wait_up(&c).await;
    let agent = c.agent(json!([])).await;
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
    // The scripted grader takes 4 s over iteration 0 (`grade sleep`), time to kill it.
    let echo = c
        .send_events(
            &sid,
            json!([{"type": "user.define_outcome", "description": "say Report written.",
                "rubric": {"type": "text", "content": "grade sleep 4000\ngrade satisfied Complete."}}]),
        )
        .await;
    let outcome_id = echo["data"][0]["outcome_id"].as_str().unwrap().to_string();
    eventually(10, "grading to start", || async {
        c.all_events(&sid)
            .await
            .iter()
            .any(|e| e["type"] == "span.outcome_evaluation_start")
            .then_some(())
    })
    .await;
    let during = c.get(&format!("/v1/sessions/{sid}")).await.ok();
    assert_eq!(during["outcome_evaluations"][0]["result"], "evaluating");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let port = free_port();
    let mut child = spawn(dir.path(), db.as_deref(), port);
    let c = Client::new(&format!("http://127.0.0.1:{port}"));
    wait_up(&c).await;
    let log = eventually(30, "the evaluation to finish after the restart", || async {
        let log = c.all_events(&sid).await;
        log.iter()
            .any(|e| e["type"] == "session.status_idle")
            .then_some(log)
    })
    .await;
    check_log(&log);
    let of = |t: &str| log.iter().filter(|e| e["type"] == t).collect::<Vec<_>>();
    let starts = of("span.outcome_evaluation_start");
    let ends = of("span.outcome_evaluation_end");
    assert_eq!(
        starts.len(),
        1,
        "the evaluation is resumed, not begun again"
    );
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["result"], "satisfied");
    assert_eq!(ends[0]["outcome_evaluation_start_id"], starts[0]["id"]);
    assert_eq!(ends[0]["outcome_id"], outcome_id.as_str());
    assert_eq!(
        of("agent.message").len(),
        1,
        "the agent's work is not redone"
    );
    let after = c.get(&format!("/v1/sessions/{sid}")).await.ok();
    assert_eq!(after["status"], "idle");
    assert_eq!(after["outcome_evaluations"][0]["result"], "satisfied");
    assert_eq!(after["outcome_evaluations"][0]["explanation"], "Complete.");
    child.kill().ok();
    child.wait().ok();
}
