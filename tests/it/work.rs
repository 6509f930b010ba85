//! The self-hosted work queue over HTTP: credentials, the item state machine, lease expiry,
//! long-polling, and a session whose sandbox tools run on a (test-driven) worker.

use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::http::Client;
use crate::support::sse::Stream;
use crate::support::{Backend, Options, TestServer, eventually};

backend_tests!(
    credentials_are_scoped,
    items_move_through_their_states,
    expired_leases_go_back_to_the_queue,
    a_poll_wakes_when_work_arrives,
    sandbox_tools_run_on_the_worker,
    new_input_requeues_a_dormant_session,
    concurrent_polls_claim_each_item_once,
    worker_credentials_end_where_they_should,
    a_reaped_wind_down_requeues_a_waiting_session,
    a_stop_survives_a_crash_before_the_requeue,
    a_session_without_workers_says_so,
);

/// A self-hosted environment, its worker key, and an agent with the toolset.
struct Setup {
    env: String,
    key: String,
    agent: String,
}

async fn setup(s: &TestServer, policy: &str) -> Setup {
    let env = s
        .client
        .post(
            "/v1/environments",
            json!({"name": format!("workers-{}", mast::domain::ids::new_secret(6)), "config": {"type": "self_hosted"}}),
        )
        .await
        .ok();
    let env = env["id"].as_str().unwrap().to_string();
    let key = s
        .client
        .post(&format!("/v1/environments/{env}/keys"), json!({}))
        .await
        .ok();
    assert_eq!(key["type"], "environment_key");
    assert_eq!(key["environment_id"], env.as_str());
    let key = key["key"].as_str().unwrap().to_string();
    let agent = s
        .client
        .post(
            "/v1/agents",
            json!({"name": "w", "model": "mast-scripted", "tools": [{"type": "agent_toolset_20260401",
                "default_config": {"permission_policy": {"type": policy}}}]}),
        )
        .await
        .ok();
    Setup {
        env,
        key,
        agent: agent["id"].as_str().unwrap().to_string(),
    }
}

async fn session(s: &TestServer, st: &Setup) -> String {
    s.client
        .post(
            "/v1/sessions",
            json!({"agent": st.agent, "environment_id": st.env}),
        )
        .await
        .ok()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn token_of(item: &Value) -> String {
    let secret = item["secret"]
        .as_str()
        .expect("poll responses carry a secret");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(secret.trim_end_matches('='))
        .unwrap();
    let v: Value = serde_json::from_slice(&raw).unwrap();
    v["sessions_token"].as_str().unwrap().to_string()
}

async fn poll(worker: &Client, env: &str) -> Value {
    worker
        .get(&format!("/v1/environments/{env}/work/poll"))
        .await
        .ok()
}

async fn heartbeat(c: &Client, env: &str, work: &str, expected: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!(
            "{}/v1/environments/{env}/work/{work}/heartbeat",
            c.base
        ))
        .query(&[("expected_last_heartbeat", expected)])
        .header("x-api-key", c.key.clone().unwrap_or_default())
        .send()
        .await
        .unwrap()
}

async fn credentials_are_scoped(b: Backend) {
    let s = TestServer::start(b).await;
    let st = setup(&s, "always_allow").await;
    let worker = s.client.with_key(&st.key);
    let mine = session(&s, &st).await;
    let cloud = s.client.environment().await;

    // Environment keys only work the queue of their own environment.
    s.client
        .get(&format!("/v1/environments/{}/work/poll", st.env))
        .await
        .err(403);
    worker.get("/v1/agents").await.err(403);
    worker
        .get(&format!("/v1/environments/{}/work/stats", st.env))
        .await
        .err(403);
    s.client
        .post(
            &format!("/v1/environments/{}/keys", cloud["id"].as_str().unwrap()),
            json!({}),
        )
        .await
        .err(400);
    worker
        .get("/v1/environments/env_011CZnotmine0000000000/work/poll")
        .await
        .err(403);
    s.client
        .with_key("mast_ek_forged")
        .get(&format!("/v1/environments/{}/work/poll", st.env))
        .await
        .err(401);
    for bad in ["0", "1000", "x"] {
        let m = worker
            .get(&format!(
                "/v1/environments/{}/work/poll?block_ms={bad}",
                st.env
            ))
            .await
            .err(400);
        assert!(m.contains("block_ms"), "{m}");
    }

    let item = poll(&worker, &st.env).await;
    assert_eq!(item["data"], json!({"type": "session", "id": mine}));
    let token = token_of(&item);
    let work = item["id"].as_str().unwrap();
    worker
        .post(
            &format!("/v1/environments/{}/work/{work}/ack", st.env),
            json!({}),
        )
        .await
        .ok();
    let holder = s.client.with_key(&token);

    // The token reaches its own session's endpoints, and nothing else.
    holder.get(&format!("/v1/sessions/{mine}")).await.ok();
    holder
        .get(&format!("/v1/sessions/{mine}/events"))
        .await
        .ok();
    let other = session(&s, &st).await;
    let m = holder.get(&format!("/v1/sessions/{other}")).await.err(403);
    assert!(m.contains("another session"), "{m}");
    holder
        .get(&format!("/v1/sessions/{other}/events"))
        .await
        .err(403);
    holder.get("/v1/sessions").await.err(403);
    holder
        .post(&format!("/v1/sessions/{mine}/archive"), json!({}))
        .await
        .err(403);
    holder
        .get(&format!("/v1/environments/{}/work/poll", st.env))
        .await
        .err(403);
    // The environment key reaches the environment's sessions, not others.
    worker.get(&format!("/v1/sessions/{other}")).await.ok();
    let elsewhere = s
        .client
        .post(
            "/v1/sessions",
            json!({"agent": st.agent, "environment_id": cloud["id"]}),
        )
        .await
        .ok();
    worker
        .get(&format!(
            "/v1/sessions/{}",
            elsewhere["id"].as_str().unwrap()
        ))
        .await
        .err(404);
    // List takes the environment key; retrieve takes an API key.
    worker
        .get(&format!("/v1/environments/{}/work", st.env))
        .await
        .ok();
    s.client
        .get(&format!("/v1/environments/{}/work", st.env))
        .await
        .err(403);
    s.client
        .get(&format!("/v1/environments/{}/work/{work}", st.env))
        .await
        .ok();
    worker
        .get(&format!("/v1/environments/{}/work/{work}", st.env))
        .await
        .err(403);

    // A stopped item's token stops working.
    holder
        .post(
            &format!("/v1/environments/{}/work/{work}/stop", st.env),
            json!({"force": true}),
        )
        .await
        .ok();
    holder.get(&format!("/v1/sessions/{mine}")).await.err(401);

    // Revoked keys stop working.
    let keys = s
        .client
        .get(&format!("/v1/environments/{}/keys", st.env))
        .await
        .ok();
    assert_eq!(keys["data"].as_array().unwrap().len(), 1);
    assert!(keys["data"][0].get("key").is_none(), "keys are shown once");
    let key_id = keys["data"][0]["id"].as_str().unwrap();
    s.client
        .delete(&format!("/v1/environments/{}/keys/{key_id}", st.env))
        .await
        .ok();
    worker
        .get(&format!("/v1/environments/{}/work/poll", st.env))
        .await
        .err(401);
}

async fn items_move_through_their_states(b: Backend) {
    let s = TestServer::start(b).await;
    let st = setup(&s, "always_allow").await;
    let worker = s.client.with_key(&st.key);
    let env = &st.env;
    let sid = session(&s, &st).await;

    let stats = s
        .client
        .get(&format!("/v1/environments/{env}/work/stats"))
        .await
        .ok();
    assert_eq!(stats["type"], "work_queue_stats");
    assert_eq!(
        (stats["depth"].clone(), stats["pending"].clone()),
        (json!(1), json!(0))
    );
    assert!(stats["oldest_queued_at"].is_string());

    let item = worker
        .send(
            reqwest::Method::GET,
            &format!("/v1/environments/{env}/work/poll"),
            None,
        )
        .await
        .ok();
    assert_eq!(item["type"], "work");
    assert_eq!(item["state"], "queued");
    assert_eq!(item["environment_id"], env.as_str());
    let work = item["id"].as_str().unwrap().to_string();
    assert!(work.starts_with("work_"));
    // Claimed: nobody else gets it, and the queue says it is pending.
    assert_eq!(poll(&worker, env).await, Value::Null);
    let stats = s
        .client
        .get(&format!("/v1/environments/{env}/work/stats"))
        .await
        .ok();
    assert_eq!(
        (stats["depth"].clone(), stats["pending"].clone()),
        (json!(0), json!(1))
    );

    let acked = worker
        .post(
            &format!("/v1/environments/{env}/work/{work}/ack"),
            json!({}),
        )
        .await
        .ok();
    assert_eq!(acked["state"], "starting");
    assert!(acked["acknowledged_at"].is_string());
    assert!(acked["secret"].is_null(), "only polls carry the secret");
    let holder = s.client.with_key(&token_of(&item));

    // Heartbeats chain on the exact previous beat; a stale one is refused with the lease.
    let r = heartbeat(&holder, env, &work, "NO_HEARTBEAT").await;
    assert_eq!(r.status(), 200);
    let hb: Value = r.json().await.unwrap();
    assert_eq!(hb["type"], "work_heartbeat");
    assert_eq!(hb["state"], "active");
    assert_eq!(hb["lease_extended"], true);
    assert_eq!(hb["ttl_seconds"], 60);
    let last = hb["last_heartbeat"].as_str().unwrap().to_string();
    let r = heartbeat(&holder, env, &work, "NO_HEARTBEAT").await;
    assert_eq!(r.status(), 412);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["error"]["details"]["error_code"],
        "heartbeat_precondition_failed"
    );
    assert_eq!(
        body["error"]["details"]["current_state"],
        json!({"state": "active", "lease_extended": false, "ttl_seconds": 60, "last_heartbeat": last})
    );
    let r = heartbeat(&worker, env, &work, &last).await;
    assert_eq!(r.status(), 200, "the environment key may beat too");
    let hb: Value = r.json().await.unwrap();
    let last = hb["last_heartbeat"].as_str().unwrap().to_string();
    let r = heartbeat(&s.client, env, &work, &last).await;
    assert_eq!(r.status(), 403, "API keys do not hold leases");

    // Metadata patches.
    let updated = s
        .client
        .post(
            &format!("/v1/environments/{env}/work/{work}"),
            json!({"metadata": {"host": "box-1", "gone": null}}),
        )
        .await
        .ok();
    assert_eq!(updated["metadata"], json!({"host": "box-1"}));
    s.client
        .post(
            &format!("/v1/environments/{env}/work/{work}"),
            json!({"metadata": {"x": 1}}),
        )
        .await
        .err(400);

    // A graceful stop: the worker hears it on its next beat, then confirms.
    let stopping = s
        .client
        .post(
            &format!("/v1/environments/{env}/work/{work}/stop"),
            json!({}),
        )
        .await
        .ok();
    assert_eq!(stopping["state"], "stopping");
    assert!(stopping["stop_requested_at"].is_string());
    let r = heartbeat(&holder, env, &work, "anything").await;
    assert_eq!(r.status(), 200);
    let hb: Value = r.json().await.unwrap();
    assert_eq!(
        (hb["state"].clone(), hb["lease_extended"].clone()),
        (json!("stopping"), json!(false))
    );
    let stopped = holder
        .post(
            &format!("/v1/environments/{env}/work/{work}/stop"),
            json!({"force": true}),
        )
        .await
        .ok();
    assert_eq!(stopped["state"], "stopped");
    assert!(stopped["stopped_at"].is_string());
    let r = worker
        .post(
            &format!("/v1/environments/{env}/work/{work}/stop"),
            json!({"force": true}),
        )
        .await;
    assert_eq!(r.headers.get("x-should-retry").unwrap(), "false");
    r.err(409);

    let listed = worker
        .get(&format!("/v1/environments/{env}/work"))
        .await
        .ok();
    assert_eq!(listed["data"][0]["id"], work.as_str());
    assert_eq!(listed["data"][0]["data"]["id"], sid.as_str());
    s.client
        .get(&format!(
            "/v1/environments/{env}/work/work_011CZnope00000000000000"
        ))
        .await
        .err(404);
}

async fn expired_leases_go_back_to_the_queue(b: Backend) {
    let s = TestServer::start_with(
        b,
        Options {
            work_ttl_seconds: Some(1),
            ..Default::default()
        },
    )
    .await;
    let st = setup(&s, "always_allow").await;
    let worker = s.client.with_key(&st.key);
    let env = &st.env;
    session(&s, &st).await;
    let item = poll(&worker, env).await;
    let work = item["id"].as_str().unwrap().to_string();
    worker
        .post(
            &format!("/v1/environments/{env}/work/{work}/ack"),
            json!({}),
        )
        .await
        .ok();
    let first = s.client.with_key(&token_of(&item));
    let r = heartbeat(&first, env, &work, "NO_HEARTBEAT").await;
    let hb: Value = r.json().await.unwrap();
    assert_eq!(hb["ttl_seconds"], 1);
    let last = hb["last_heartbeat"].as_str().unwrap().to_string();

    // The worker goes silent; the reaper hands the item back to the queue.
    let again = eventually(10, "the item to be re-queued", || {
        let worker = worker.clone();
        async move {
            let v = poll(&worker, env).await;
            (!v.is_null()).then_some(v)
        }
    })
    .await;
    assert_eq!(again["id"], work.as_str(), "the same item, re-queued");
    assert!(again["latest_heartbeat_at"].is_null());
    let second = s.client.with_key(&token_of(&again));
    // The old holder's token was replaced by the new poll's.
    let r = heartbeat(&first, env, &work, &last).await;
    assert_eq!(r.status(), 401);
    worker
        .post(
            &format!("/v1/environments/{env}/work/{work}/ack"),
            json!({}),
        )
        .await
        .ok();
    let r = heartbeat(&second, env, &work, "NO_HEARTBEAT").await;
    assert_eq!(r.status(), 200);

    // An un-acked poll is reclaimable after `reclaim_older_than_ms`.
    session(&s, &st).await;
    let claimed = poll(&worker, env).await;
    assert!(!claimed.is_null());
    // Poll times are kept on the database's clock (replicas' clocks drift), which no test
    // clock moves: the 10 ms must really pass.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let reclaimed = worker
        .get(&format!(
            "/v1/environments/{env}/work/poll?reclaim_older_than_ms=10"
        ))
        .await
        .ok();
    assert_eq!(reclaimed["id"], claimed["id"]);
    assert_ne!(token_of(&reclaimed), token_of(&claimed));
}

async fn a_poll_wakes_when_work_arrives(b: Backend) {
    let s = TestServer::start(b).await;
    let st = setup(&s, "always_allow").await;
    let worker = s.client.with_key(&st.key);
    let env = st.env.clone();
    assert_eq!(
        worker
            .get(&format!("/v1/environments/{env}/work/poll?block_ms=50"))
            .await
            .ok(),
        Value::Null
    );
    let polling = || {
        let client = s.client.clone();
        let env = env.clone();
        async move {
            client
                .get(&format!("/v1/environments/{env}/work/stats"))
                .await
                .ok()["workers_polling"]
                .as_i64()
                .unwrap()
        }
    };
    let before = polling().await;
    let waiting = tokio::spawn({
        let url = format!("{}/v1/environments/{env}/work/poll?block_ms=999", s.url);
        let key = st.key.clone();
        async move {
            let r = reqwest::Client::new()
                .get(url)
                .header("x-api-key", key)
                .header("anthropic-worker-id", "waiting-worker")
                .send()
                .await
                .unwrap();
            r.json::<Value>().await.unwrap()
        }
    });
    // A poll registers its waiter before its first claim, and the claim counts its worker:
    // once the stats count this worker, the poll is waiting (its first claim found nothing).
    eventually(10, "the long poll to be waiting", || {
        let polling = polling();
        async move { (polling.await > before).then_some(()) }
    })
    .await;
    let sid = session(&s, &st).await;
    // The poll only claims at its start and when woken, so an item here proves the wake-up.
    let item = waiting.await.unwrap();
    assert_eq!(item["data"]["id"], sid.as_str());
}

/// Drives a worker by hand: runs each sandbox `agent.tool_use` through `answer`.
async fn serve(
    holder: &Client,
    sid: &str,
    stream: &mut Stream,
    answer: impl Fn(&Value) -> String,
) -> Value {
    loop {
        let ev = stream.next_event(30).await;
        if ev["type"] == "agent.tool_use" {
            let text = answer(&ev);
            holder
                .post(
                    &format!("/v1/sessions/{sid}/events"),
                    json!({"events": [{"type": "user.tool_result", "tool_use_id": ev["id"],
                        "content": [{"type": "text", "text": text}]}]}),
                )
                .await
                .ok();
        }
        if ev["type"] == "session.status_idle" && ev["stop_reason"]["type"] != "requires_action" {
            return ev;
        }
    }
}

async fn sandbox_tools_run_on_the_worker(b: Backend) {
    let s = TestServer::start(b).await;
    let st = setup(&s, "always_allow").await;
    let worker = s.client.with_key(&st.key);
    let sid = session(&s, &st).await;
    let item = poll(&worker, &st.env).await;
    let work = item["id"].as_str().unwrap().to_string();
    worker
        .post(
            &format!("/v1/environments/{}/work/{work}/ack", st.env),
            json!({}),
        )
        .await
        .ok();
    let token = token_of(&item);
    let holder = s.client.with_key(&token);
    let mut stream = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        Some(&token),
        &[],
    )
    .await;
    // The API key's user starts the turn; the worker answers the sandbox call.
    s.client
        .say(
            &sid,
            "call bash {\"command\": \"uname\"}\n---\nsay {{result}}",
        )
        .await;
    let idle = serve(&holder, &sid, &mut stream, |ev| {
        assert_eq!(ev["name"], "bash");
        assert_eq!(ev["evaluated_permission"], "allow");
        "Linux-on-the-worker".into()
    })
    .await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let events = s.client.all_events(&sid).await;
    let said = events
        .iter()
        .rfind(|e| e["type"] == "agent.message")
        .unwrap();
    assert_eq!(said["content"][0]["text"], "Linux-on-the-worker");
    assert!(
        !events.iter().any(|e| e["type"] == "agent.tool_result"),
        "nothing ran on the server"
    );

    // The worker lets go while a call is outstanding: the session is queued again.
    s.client
        .say(&sid, "call write {\"file_path\": \"/workspace/a.txt\", \"content\": \"hi\"}\n---\nsay {{result}}")
        .await;
    stream.until(30, |e| e["type"] == "agent.tool_use").await;
    holder
        .post(
            &format!("/v1/environments/{}/work/{work}/stop", st.env),
            json!({"force": true}),
        )
        .await
        .ok();
    let next = poll(&worker, &st.env).await;
    assert_eq!(next["data"]["id"], sid.as_str());
    assert_ne!(next["id"], work.as_str(), "a fresh item");
}

async fn new_input_requeues_a_dormant_session(b: Backend) {
    let s = TestServer::start(b).await;
    let st = setup(&s, "always_allow").await;
    let worker = s.client.with_key(&st.key);
    let sid = session(&s, &st).await;
    let item = poll(&worker, &st.env).await;
    let work = item["id"].as_str().unwrap();
    worker
        .post(
            &format!("/v1/environments/{}/work/{work}/ack", st.env),
            json!({}),
        )
        .await
        .ok();
    // While a worker holds the session, input queues nothing new.
    s.client.say(&sid, "hello").await;
    assert_eq!(poll(&worker, &st.env).await, Value::Null);
    worker
        .post(
            &format!("/v1/environments/{}/work/{work}/stop", st.env),
            json!({"force": true}),
        )
        .await
        .ok();
    assert_eq!(
        poll(&worker, &st.env).await,
        Value::Null,
        "idle sessions need no worker"
    );
    s.client.say(&sid, "hello again").await;
    let next = poll(&worker, &st.env).await;
    assert_eq!(next["data"]["id"], sid.as_str());
    // Archiving ends the session's work: a queued item stops.
    eventually(30, "the turn to end", || {
        let c = s.client.clone();
        let sid = sid.clone();
        async move {
            (c.get(&format!("/v1/sessions/{sid}")).await.ok()["status"] == "idle").then_some(())
        }
    })
    .await;
    s.client
        .post(&format!("/v1/sessions/{sid}/archive"), json!({}))
        .await
        .ok();
    let got = s
        .client
        .get(&format!(
            "/v1/environments/{}/work/{}",
            st.env,
            next["id"].as_str().unwrap()
        ))
        .await
        .ok();
    assert_eq!(got["state"], "stopped");
}

async fn concurrent_polls_claim_each_item_once(b: Backend) {
    let s = TestServer::start(b).await;
    let st = setup(&s, "always_allow").await;
    let mut sessions = Vec::new();
    for _ in 0..12 {
        sessions.push(session(&s, &st).await);
    }
    let worker = s.client.with_key(&st.key);
    let pollers: Vec<_> = (0..6)
        .map(|_| {
            let worker = worker.clone();
            let env = st.env.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                loop {
                    let v = poll(&worker, &env).await;
                    if v.is_null() {
                        return got;
                    }
                    got.push(v["data"]["id"].as_str().unwrap().to_string());
                }
            })
        })
        .collect();
    let mut claimed = Vec::new();
    for p in pollers {
        claimed.extend(p.await.unwrap());
    }
    claimed.sort();
    sessions.sort();
    assert_eq!(claimed, sessions, "every session claimed exactly once");
}

/// Polls, acks and returns (item, its holder's client).
async fn claim(s: &TestServer, st: &Setup) -> (Value, Client) {
    let worker = s.client.with_key(&st.key);
    let item = poll(&worker, &st.env).await;
    assert!(!item.is_null(), "an item to claim");
    worker
        .post(
            &format!(
                "/v1/environments/{}/work/{}/ack",
                st.env,
                item["id"].as_str().unwrap()
            ),
            json!({}),
        )
        .await
        .ok();
    let holder = s.client.with_key(&token_of(&item));
    (item, holder)
}

async fn worker_credentials_end_where_they_should(b: Backend) {
    let s = TestServer::start_with(
        b,
        Options {
            work_ttl_seconds: Some(1),
            ..Default::default()
        },
    )
    .await;
    let st = setup(&s, "always_allow").await;
    let env = &st.env;
    let sid = session(&s, &st).await;
    let (item, holder) = claim(&s, &st).await;
    let work = item["id"].as_str().unwrap();

    // Workers answer tool calls; they do not prompt, interrupt or confirm.
    for ev in [
        json!({"type": "user.message", "content": [{"type": "text", "text": "hi"}]}),
        json!({"type": "user.interrupt"}),
        json!({"type": "user.tool_confirmation", "tool_use_id": "sevt_x", "result": "allow"}),
    ] {
        for who in [&holder, &s.client.with_key(&st.key)] {
            let m = who
                .post(
                    &format!("/v1/sessions/{sid}/events"),
                    json!({"events": [ev.clone()]}),
                )
                .await
                .err(403);
            assert!(m.contains("only send"), "{m}");
        }
    }
    // Unconditional beats are allowed.
    let r = reqwest::Client::new()
        .post(format!(
            "{}/v1/environments/{env}/work/{work}/heartbeat",
            s.url
        ))
        .header("x-api-key", token_of(&item))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // A stream opened with the token ends once the item stops; the holder can still hear
    // `stopped` on a heartbeat and gets 409 for a second stop.
    let mut stream = Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        Some(&token_of(&item)),
        &[],
    )
    .await;
    s.client
        .post(
            &format!("/v1/environments/{env}/work/{work}/stop"),
            json!({"force": true}),
        )
        .await
        .ok();
    let ended = tokio::time::timeout(Duration::from_secs(15), async {
        while stream.next_frame(60).await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the stream closed after the item stopped");
    let r = heartbeat(&holder, env, work, "whatever").await;
    assert_eq!(r.status(), 200);
    let hb: Value = r.json().await.unwrap();
    assert_eq!(
        (hb["state"].clone(), hb["lease_extended"].clone()),
        (json!("stopped"), json!(false))
    );
    holder
        .post(
            &format!("/v1/environments/{env}/work/{work}/stop"),
            json!({"force": true}),
        )
        .await
        .err(409);
    holder.get(&format!("/v1/sessions/{sid}")).await.err(401);

    // A lease that ran out: the old holder may not stop what goes back to the queue.
    s.client.say(&sid, "hello").await;
    let (item, holder) = claim(&s, &st).await;
    let work = item["id"].as_str().unwrap().to_string();
    eventually(10, "the lease to run out", || {
        let c = s.client.clone();
        let url = format!("/v1/environments/{env}/work/{work}");
        async move { (c.get(&url).await.ok()["state"] == "queued").then_some(()) }
    })
    .await;
    holder
        .post(
            &format!("/v1/environments/{env}/work/{work}/stop"),
            json!({"force": true}),
        )
        .await
        .err(403);

    // Deleting the environment (once its session is archived) takes its keys and items with
    // it.
    s.client
        .post(&format!("/v1/sessions/{sid}/archive"), json!({}))
        .await
        .ok();
    s.client
        .delete(&format!("/v1/environments/{env}"))
        .await
        .ok();
    s.client
        .with_key(&st.key)
        .get(&format!("/v1/sessions/{sid}"))
        .await
        .err(401);
    s.client
        .with_key(&st.key)
        .get(&format!("/v1/environments/{env}/work/poll"))
        .await
        .err(401);
}

async fn a_reaped_wind_down_requeues_a_waiting_session(b: Backend) {
    let s = TestServer::start_with(
        b,
        Options {
            work_ttl_seconds: Some(1),
            ..Default::default()
        },
    )
    .await;
    let st = setup(&s, "always_allow").await;
    let env = &st.env;
    let sid = session(&s, &st).await;
    let (item, holder) = claim(&s, &st).await;
    let work = item["id"].as_str().unwrap().to_string();
    let r = heartbeat(&holder, env, &work, "NO_HEARTBEAT").await;
    assert_eq!(r.status(), 200);
    s.client
        .say(&sid, "call bash {\"command\": \"true\"}\n---\nsay done")
        .await;
    eventually(30, "the call to wait on the worker", || {
        let c = s.client.clone();
        let sid = sid.clone();
        async move {
            let s = c.get(&format!("/v1/sessions/{sid}")).await.ok();
            (s["status"] == "idle").then_some(())
        }
    })
    .await;
    // A graceful stop the (dead) worker never confirms.
    s.client
        .post(
            &format!("/v1/environments/{env}/work/{work}/stop"),
            json!({}),
        )
        .await
        .ok();
    let next = eventually(10, "a fresh item for the waiting session", || {
        let worker = s.client.with_key(&st.key);
        async move {
            let v = poll(&worker, env).await;
            (!v.is_null()).then_some(v)
        }
    })
    .await;
    assert_eq!(next["data"]["id"], sid.as_str());
    assert_ne!(next["id"], work.as_str());
}

async fn a_stop_survives_a_crash_before_the_requeue(b: Backend) {
    let s = TestServer::start(b).await;
    let st = setup(&s, "always_allow").await;
    let env = st.env.clone();
    let sid = session(&s, &st).await;
    let (item, _holder) = claim(&s, &st).await;
    let work = item["id"].as_str().unwrap().to_string();
    s.client
        .say(&sid, "call bash {\"command\": \"true\"}\n---\nsay done")
        .await;
    eventually(30, "the call to wait on the worker", || {
        let c = s.client.clone();
        let sid = sid.clone();
        async move {
            let s = c.get(&format!("/v1/sessions/{sid}")).await.ok();
            (s["status"] == "idle").then_some(())
        }
    })
    .await;
    // What a stop request commits, written straight to the store: the state a process that
    // died right after committing the stop (before queueing the session again) leaves.
    let store = mast::open_store(&s.config).await.unwrap();
    let stopped = store
        .transact_work(
            &env,
            &work,
            Box::new(|w| {
                mast::engine::work::stop(w, true, crate::support::now())
                    .map_err(|r| mast::store::StoreError::Internal(anyhow::anyhow!("{r:?}")))
            }),
        )
        .await
        .unwrap()
        .unwrap();
    assert!(stopped.stopped_at.is_some());
    // Any replica's reaper finishes the follow-up.
    let next = eventually(10, "a fresh item for the waiting session", || {
        let worker = s.client.with_key(&st.key);
        let env = env.clone();
        async move {
            let v = poll(&worker, &env).await;
            (!v.is_null()).then_some(v)
        }
    })
    .await;
    assert_eq!(next["data"]["id"], sid.as_str());
    assert_ne!(next["id"], work.as_str());
}

async fn a_session_without_workers_says_so(b: Backend) {
    let s = TestServer::start(b).await;
    let st = setup(&s, "always_allow").await;
    let sid = session(&s, &st).await;
    s.client
        .say(&sid, "call bash {\"command\": \"true\"}\n---\nsay done")
        .await;
    let waiting = eventually(30, "the call to wait on a worker", || {
        let c = s.client.clone();
        let sid = sid.clone();
        async move {
            let v = c.get(&format!("/v1/sessions/{sid}")).await.ok();
            (v["status"] == "idle" && !v["stats"]["waiting_for_worker"].is_null()).then_some(v)
        }
    })
    .await;
    let why = &waiting["stats"]["waiting_for_worker"];
    assert_eq!(why["workers_polling"], 0);
    assert!(why["message"].as_str().unwrap().contains(&st.env), "{why}");
    // Once a worker polls, the session is simply waiting for it.
    let worker = s.client.with_key(&st.key);
    poll(&worker, &st.env).await;
    let v = s.client.get(&format!("/v1/sessions/{sid}")).await.ok();
    assert!(v["stats"].get("waiting_for_worker").is_none(), "{v}");
}
