//! The real binary, killed with SIGKILL mid-turn and while waiting on a custom tool, then
//! restarted on the same store: every turn completes with no lost or duplicated event.

use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::http::weather_tool;
use crate::support::{Backend, Client, eventually, fresh_postgres_database};

backend_tests!(sigkill_mid_turn_and_mid_tool_wait);

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server process that is killed when its owner goes away, a failed test included (a
/// panicking test must not leave servers running against the test cluster).
pub(crate) struct Reaped(pub Child);

impl std::ops::Deref for Reaped {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn spawn(data_dir: &std::path::Path, database_url: Option<&str>, port: u16) -> Reaped {
    spawn_with(data_dir, database_url, port, &[])
}

/// [`spawn`], with more of the server's environment.
pub(crate) fn spawn_with(
    data_dir: &std::path::Path,
    database_url: Option<&str>,
    port: u16,
    env: &[(&str, &str)],
) -> Reaped {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mast"));
    cmd.envs(env.iter().copied());
    cmd.args([
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--data-dir",
    ])
    .arg(data_dir)
    .env("MAST_LEASE_TTL_MS", "1500")
    .env("MAST_REAP_INTERVAL_MS", "200")
    .env("MAST_LOG", "warn")
    // The suite's servers share one Postgres and its connection limit.
    .env("MAST_DB_MAX_CONNECTIONS", "6")
    .env_remove("DATABASE_URL")
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if let Some(url) = database_url {
        cmd.env("DATABASE_URL", url);
    }
    Reaped(cmd.spawn().expect("mast binary starts"))
}

pub(crate) async fn wait_up(c: &Client) {
    eventually(30, "the server to accept requests", || async {
        reqwest::get(format!("{}/healthz", c.base))
            .await
            .ok()
            .filter(|r| r.status().is_success())
            .map(|_| ())
    })
    .await;
}

pub(crate) fn check_log(log: &[Value]) {
    let ids: std::collections::HashSet<&str> =
        log.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), log.len(), "no duplicated event");
    let starts = log
        .iter()
        .filter(|e| e["type"] == "span.model_request_start")
        .count();
    let ends = log
        .iter()
        .filter(|e| e["type"] == "span.model_request_end")
        .count();
    assert_eq!(starts, ends, "every model request span is closed");
}

async fn sigkill_mid_turn_and_mid_tool_wait(b: Backend) {
    let dir = tempfile::TempDir::new().unwrap();
    let db = match b {
        Backend::Sqlite => None,
        Backend::Postgres => Some(fresh_postgres_database().await),
    };
    let port = free_port();
    let mut child = spawn(dir.path(), db.as_deref(), port);
    let c = Client::new(&format!("http://127.0.0.1:{port}"));
    wait_up(&c).await;
    let agent = c.agent(json!([weather_tool()])).await;
    let busy = c.session(&agent).await["id"].as_str().unwrap().to_string();
    let waiting = c.session(&agent).await["id"].as_str().unwrap().to_string();
    c.say(
        &waiting,
        "call get_weather {\"city\":\"Oslo\"}\n---\nsay Oslo: {{result}}",
    )
    .await;
    eventually(10, "requires_action", || async {
        c.all_events(&waiting)
            .await
            .iter()
            .any(|e| e["type"] == "session.status_idle")
            .then_some(())
    })
    .await;
    c.say(&busy, "sleep 4000\nsay survived").await;
    eventually(10, "the model request to start", || async {
        c.all_events(&busy)
            .await
            .iter()
            .any(|e| e["type"] == "span.model_request_start")
            .then_some(())
    })
    .await;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let port = free_port();
    let mut child = spawn(dir.path(), db.as_deref(), port);
    let c = Client::new(&format!("http://127.0.0.1:{port}"));
    wait_up(&c).await;
    let log = eventually(30, "the interrupted turn to finish", || async {
        let log = c.all_events(&busy).await;
        log.iter()
            .any(|e| e["type"] == "session.status_idle")
            .then_some(log)
    })
    .await;
    check_log(&log);
    let msgs: Vec<&Value> = log
        .iter()
        .filter(|e| e["type"] == "agent.message")
        .collect();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["content"][0]["text"], "survived");
    let failed_first = log
        .iter()
        .find(|e| e["type"] == "span.model_request_end")
        .unwrap();
    assert_eq!(
        failed_first["is_error"], true,
        "the request cut by the crash is closed as failed, then re-issued"
    );

    // The session that waited on a custom tool across the crash continues when answered.
    let pending = c
        .all_events(&waiting)
        .await
        .iter()
        .find(|e| e["type"] == "agent.custom_tool_use")
        .unwrap()["id"]
        .clone();
    c.send_events(&waiting, json!([{"type": "user.custom_tool_result", "custom_tool_use_id": pending, "content": [{"type": "text", "text": "snow"}]}])).await;
    let log = eventually(20, "the tool round trip to finish", || async {
        let log = c.all_events(&waiting).await;
        log.iter()
            .any(|e| e["type"] == "session.status_idle" && e["stop_reason"]["type"] == "end_turn")
            .then_some(log)
    })
    .await;
    check_log(&log);
    assert_eq!(
        log.iter()
            .rev()
            .find(|e| e["type"] == "agent.message")
            .unwrap()["content"][0]["text"],
        "Oslo: snow"
    );
    assert_eq!(
        c.get(&format!("/v1/sessions/{busy}")).await.ok()["status"],
        "idle"
    );
    child.kill().ok();
    child.wait().ok();
}

mod tool_calls {
    //! A built-in tool call running when the process dies is closed, never run twice.

    use serde_json::json;

    use super::{check_log, free_port, spawn, wait_up};
    use crate::backend_tests;
    use crate::support::{Backend, Client, eventually, fresh_postgres_database};

    backend_tests!(a_tool_running_at_a_crash_is_closed_not_rerun);

    async fn a_tool_running_at_a_crash_is_closed_not_rerun(b: Backend) {
        let dir = tempfile::TempDir::new().unwrap();
        let db = match b {
            Backend::Sqlite => None,
            Backend::Postgres => Some(fresh_postgres_database().await),
        };
        let port = free_port();
        let mut child = spawn(dir.path(), db.as_deref(), port);
        let c = Client::new(&format!("http://127.0.0.1:{port}"));
        wait_up(&c).await;
        let agent = c
            .post("/v1/agents", json!({"name": "t", "model": "mast-scripted", "tools": [{"type": "agent_toolset_20260401"}]}))
            .await
            .ok();
        let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
        c.say(
            &sid,
            "call bash {\"command\": \"echo run >> runs.log; sleep 30\"}\n---\nsay {{result}}",
        )
        .await;
        eventually(20, "the tool to start", || async {
            let log = dir.path().join("workspaces").join(&sid).join("runs.log");
            log.exists().then_some(())
        })
        .await;
        child.kill().unwrap();
        child.wait().unwrap();
        let port = free_port();
        let mut child = spawn(dir.path(), db.as_deref(), port);
        let c = Client::new(&format!("http://127.0.0.1:{port}"));
        wait_up(&c).await;
        let log = eventually(30, "the turn to finish", || async {
            let log = c.all_events(&sid).await;
            log.iter()
                .any(|e| e["type"] == "session.status_idle")
                .then_some(log)
        })
        .await;
        check_log(&log);
        let result = log
            .iter()
            .find(|e| e["type"] == "agent.tool_result")
            .unwrap();
        assert_eq!(result["is_error"], true);
        assert!(
            result["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("stopped while this tool call was running")
        );
        let runs =
            std::fs::read_to_string(dir.path().join("workspaces").join(&sid).join("runs.log"))
                .unwrap();
        assert_eq!(runs, "run\n", "the command ran exactly once");
        child.kill().ok();
        child.wait().ok();
    }
}

mod delegates {
    //! A coordinator session survives SIGKILL while two delegates work.

    use serde_json::{Value, json};

    use super::{check_log, free_port, spawn, wait_up};
    use crate::backend_tests;
    use crate::support::{Backend, Client, eventually, fresh_postgres_database};

    backend_tests!(sigkill_while_two_delegates_run);

    async fn sigkill_while_two_delegates_run(b: Backend) {
        let dir = tempfile::TempDir::new().unwrap();
        let db = match b {
            Backend::Sqlite => None,
            Backend::Postgres => Some(fresh_postgres_database().await),
        };
        let port = free_port();
        let mut child = spawn(dir.path(), db.as_deref(), port);
        let c = Client::new(&format!("http://127.0.0.1:{port}"));
        wait_up(&c).await;
        let mut ids = Vec::new();
        for name in ["north", "south"] {
            let a = c
                .post(
                    "/v1/agents",
                    json!({"name": name, "model": "mast-scripted"}),
                )
                .await
                .ok();
            ids.push(a["id"].clone());
        }
        let coord = c
            .post(
                "/v1/agents",
                json!({"name": "coord", "model": "mast-scripted",
                "multiagent": {"type": "coordinator", "agents": ids}}),
            )
            .await
            .ok();
        let sid = c.session(&coord).await["id"].as_str().unwrap().to_string();
        let send = |agent: &str, text: &str| {
            format!(
                "call send_to_agent {}",
                json!({"agent": agent, "message": text})
            )
        };
        c.say(
            &sid,
            &format!(
                "{}\n{}\n---\nsay both: {{{{result}}}}",
                send("north", "sleep 3000\nsay north done"),
                send("south", "sleep 3000\nsay south done")
            ),
        )
        .await;
        eventually(20, "both delegates to start their requests", || async {
            let resp = reqwest::get(format!("{}/v1/sessions/{sid}/transcript", c.base))
                .await
                .ok()?;
            let text = resp.text().await.ok()?;
            let starts = text
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|l| {
                    l["type"] == "span.model_request_start" && l["parent_thread_id"].is_string()
                })
                .count();
            (starts == 2).then_some(())
        })
        .await;
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        let port = free_port();
        let mut child = spawn(dir.path(), db.as_deref(), port);
        let c = Client::new(&format!("http://127.0.0.1:{port}"));
        wait_up(&c).await;
        let log = eventually(
            40,
            "the coordinator to finish after the restart",
            || async {
                let log = c.all_events(&sid).await;
                log.iter()
                    .any(|e| e["type"] == "session.status_idle")
                    .then_some(log)
            },
        )
        .await;
        check_log(&log);
        let text = log
            .iter()
            .rev()
            .find(|e| e["type"] == "agent.message")
            .unwrap()["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            text.contains("north done") && text.contains("south done"),
            "{text}"
        );
        // Every thread's log: no duplicated event, every request span closed.
        let threads = c.get(&format!("/v1/sessions/{sid}/threads")).await.ok();
        for t in threads["data"].as_array().unwrap().iter().skip(1) {
            let own = c
                .get(&format!(
                    "/v1/sessions/{sid}/threads/{}/events",
                    t["id"].as_str().unwrap()
                ))
                .await
                .ok();
            check_log(own["data"].as_array().unwrap());
            assert_eq!(t["status"], "idle");
        }
        child.kill().ok();
        child.wait().ok();
    }
}
