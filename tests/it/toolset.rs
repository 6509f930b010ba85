//! The built-in toolset in its sandbox, and permission policies enforced by the dispatcher.

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::sse::Stream;
use crate::support::{Backend, Options, TestServer, eventually};

backend_tests!(
    tools_do_real_work_and_explain_their_errors,
    the_shell_persists_and_limits_hold,
    sandbox_escapes_fail,
    file_tools_stay_in_the_workspace,
    limited_networking_allows_only_listed_hosts,
    internal_addresses_are_out_of_reach,
    permission_policies_are_enforced_in_code,
    auto_bash_runs_only_what_it_can_prove_safe,
    confirmations_out_of_order_and_interrupts,
    web_tools_follow_domain_lists_and_providers,
);

pub(crate) fn call(tool: &str, input: Value) -> String {
    format!("call {tool} {input}")
}

/// A script of one tool call per step, then the last result as the answer.
pub(crate) fn steps(calls: &[String]) -> String {
    let mut s = calls.join("\n---\n");
    s.push_str("\n---\nsay {{result}}");
    s
}

pub(crate) fn toolset(configs: Value, default_policy: &str) -> Value {
    json!([{"type": "agent_toolset_20260401", "default_config": {"permission_policy": {"type": default_policy}}, "configs": configs}])
}

pub(crate) struct Session {
    pub id: String,
    pub st: Stream,
}

pub(crate) async fn session(s: &TestServer, tools: Value, env: Option<Value>) -> Session {
    let agent = s
        .client
        .post(
            "/v1/agents",
            json!({"name": "worker", "model": "mast-scripted", "tools": tools}),
        )
        .await
        .ok();
    let env = match env {
        Some(config) => s.client.post("/v1/environments", json!({"name": format!("e-{}", mast::domain::ids::new_secret(6)), "config": config})).await.ok(),
        None => s.client.environment().await,
    };
    let id = s
        .client
        .post(
            "/v1/sessions",
            json!({"agent": agent["id"], "environment_id": env["id"]}),
        )
        .await
        .ok()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let st = Stream::open(
        &s.url,
        &format!("/v1/sessions/{id}/events/stream"),
        None,
        &[],
    )
    .await;
    Session { id, st }
}

/// Results of the turn, in order, as (text, is_error).
pub(crate) fn results(seen: &[Value]) -> Vec<(String, bool)> {
    seen.iter()
        .filter(|e| e["type"] == "agent.tool_result")
        .map(|e| {
            let text = e["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n");
            (text, e["is_error"] == true)
        })
        .collect()
}

pub(crate) async fn turn(s: &TestServer, sess: &mut Session, script: &str) -> Value {
    s.client.say(&sess.id, script).await;
    sess.st.until_idle(60).await
}

async fn tools_do_real_work_and_explain_their_errors(b: Backend) {
    let s = TestServer::start(b).await;
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    let script = steps(&[
        call(
            "write",
            json!({"file_path": "/workspace/app/hello.py", "content": "print('hello from python')\nprint(2 + 3)\n"}),
        ),
        call("bash", json!({"command": "python3 app/hello.py"})),
        call(
            "edit",
            json!({"file_path": "app/hello.py", "old_string": "2 + 3", "new_string": "6 * 7"}),
        ),
        call(
            "read",
            json!({"file_path": "/workspace/app/hello.py", "view_range": [2, 2]}),
        ),
        call("glob", json!({"pattern": "**/*.py"})),
        call(
            "grep",
            json!({"pattern": "hello", "path": "/workspace/app"}),
        ),
    ]);
    let idle = turn(&s, &mut sess, &script).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let r = results(&sess.st.seen);
    assert_eq!(r.len(), 6, "{r:?}");
    assert!(r.iter().all(|(_, err)| !err), "{r:?}");
    assert!(r[0].0.contains("Wrote") && r[0].0.contains("/workspace/app/hello.py"));
    assert!(
        r[1].0.contains("hello from python\n5") && r[1].0.contains("[exit code 0]"),
        "{}",
        r[1].0
    );
    assert!(r[2].0.contains("Replaced 1 occurrence"));
    assert_eq!(r[3].0, "     2\tprint(6 * 7)\n");
    assert_eq!(r[4].0, "/workspace/app/hello.py");
    assert_eq!(
        r[5].0,
        "/workspace/app/hello.py:1:print('hello from python')"
    );
    let uses: Vec<&Value> = sess
        .st
        .seen
        .iter()
        .filter(|e| e["type"] == "agent.tool_use")
        .collect();
    assert_eq!(uses[0]["evaluated_permission"], "allow");
    assert_eq!(uses[0]["evaluation"], json!({"type": "always_allow"}));

    // Errors say what would work.
    sess.st.seen.clear();
    let script = steps(&[
        call("read", json!({"file_path": "missing.txt"})),
        call(
            "edit",
            json!({"file_path": "app/hello.py", "old_string": "print", "new_string": "echo"}),
        ),
        call("write", json!({"file_path": "/etc/evil", "content": "x"})),
        call("read", json!({})),
        call("bash", json!({"command": "printf '\\x00\\x01' > bin.dat"})),
        call("read", json!({"file_path": "bin.dat"})),
        call("bash", json!({"command": "exit 3"})),
    ]);
    turn(&s, &mut sess, &script).await;
    let r = results(&sess.st.seen);
    assert!(r[0].1 && r[0].0.contains("does not exist"));
    assert!(r[1].1 && r[1].0.contains("occurs 2 times") && r[1].0.contains("replace_all"));
    assert!(r[2].1 && r[2].0.contains("outside /workspace"));
    assert!(r[3].1 && r[3].0.contains("Invalid read input") && r[3].0.contains("file_path"));
    assert!(r[5].1 && r[5].0.contains("binary"));
    assert!(
        !r[6].1 && r[6].0.contains("[exit code 3]"),
        "a failing command is a result, not a tool error"
    );
    // Deleting the session removes its workspace.
    let ws = s.data_dir.join("workspaces").join(&sess.id);
    assert!(ws.join("app/hello.py").exists());
    s.client
        .delete(&format!("/v1/sessions/{}", sess.id))
        .await
        .ok();
    assert!(!ws.exists());
}

async fn the_shell_persists_and_limits_hold(b: Backend) {
    let s = TestServer::start(b).await;
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    let script = steps(&[
        call(
            "bash",
            json!({"command": "mkdir -p deep/er && cd deep/er && export GREETING=hola && FOO=local"}),
        ),
        call(
            "bash",
            json!({"command": "pwd; echo \"$GREETING/${FOO:-unset}\""}),
        ),
    ]);
    turn(&s, &mut sess, &script).await;
    let r = results(&sess.st.seen);
    assert!(
        r[1].0.starts_with("/workspace/deep/er\nhola/unset"),
        "{}",
        r[1].0
    );
    // A new turn keeps the shell; restart resets it.
    sess.st.seen.clear();
    let script = steps(&[
        call("bash", json!({"command": "pwd"})),
        call(
            "bash",
            json!({"restart": true, "command": "pwd; echo \"${GREETING:-gone}\""}),
        ),
    ]);
    turn(&s, &mut sess, &script).await;
    let r = results(&sess.st.seen);
    assert!(r[0].0.starts_with("/workspace/deep/er"), "{}", r[0].0);
    assert!(r[1].0.starts_with("/workspace\ngone"), "{}", r[1].0);
    // Timeouts, truncation, and no process outliving its call.
    sess.st.seen.clear();
    let script = steps(&[
        call("bash", json!({"command": "sleep 30", "timeout_ms": 500})),
        call(
            "bash",
            json!({"command": "head -c 100000 /dev/zero | tr '\\\\0' 'a'"}),
        ),
        call(
            "bash",
            json!({"command": "(sleep 300 &) ; nohup sleep 301 >/dev/null 2>&1 & echo started"}),
        ),
        call(
            "bash",
            json!({"command": "ps -eo comm | grep -c '^sleep' || true"}),
        ),
        call(
            "bash",
            json!({"command": "x=0; f(){ f & f & }; f", "timeout_ms": 3000}),
        ),
        call("bash", json!({"command": "echo still alive"})),
        call("bash", json!({"timeout_ms": 999999999, "command": "true"})),
    ]);
    let started = std::time::Instant::now();
    turn(&s, &mut sess, &script).await;
    let r = results(&sess.st.seen);
    assert!(r[0].1 && r[0].0.contains("timed out after 500 ms"), "{r:?}");
    assert!(
        r[1].0
            .contains("[stdout truncated: showing the first 30000 of 100000 bytes]"),
        "{}",
        &r[1].0[r[1].0.len() - 120..]
    );
    assert!(
        r[3].0.starts_with("0\n"),
        "no process survives its call: {}",
        r[3].0
    );
    assert!(
        r[5].0.contains("still alive"),
        "the session survives a fork bomb: {r:?}"
    );
    assert!(r[6].1 && r[6].0.contains("timeout_ms"));
    assert!(
        started.elapsed().as_secs() < 30,
        "the runaway commands were cut short"
    );
}

async fn sandbox_escapes_fail(b: Backend) {
    let s = TestServer::start(b).await;
    let mut other = session(&s, toolset(json!([]), "always_allow"), None).await;
    turn(
        &s,
        &mut other,
        &steps(&[call(
            "write",
            json!({"file_path": "secret.txt", "content": "other session's data"}),
        )]),
    )
    .await;
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    let data_dir = s.data_dir.canonicalize().unwrap().display().to_string();
    let other_ws = format!("{data_dir}/workspaces/{}", other.id);
    let script = steps(&[
        call(
            "bash",
            json!({"command": "echo pwned > /etc/mast-escape; echo pwned > /usr/mast-escape; touch /mast-escape; ls /"}),
        ),
        call(
            "bash",
            json!({"command": format!("cat {other_ws}/secret.txt; ls {data_dir}")}),
        ),
        call("bash", json!({"command": "env | sort"})),
        call(
            "bash",
            json!({"command": "id -u; cat /etc/shadow | head -c 20; ls /root 2>&1 | head -1"}),
        ),
        call(
            "read",
            json!({"file_path": format!("/workspace/../../{other_ws}/secret.txt")}),
        ),
        call(
            "bash",
            json!({"command": format!("ln -s {other_ws} peek && echo linked")}),
        ),
        call("read", json!({"file_path": "peek/secret.txt"})),
    ]);
    turn(&s, &mut sess, &script).await;
    let r = results(&sess.st.seen);
    assert!(
        r[0].0.contains("Read-only file system") || r[0].0.contains("Permission denied"),
        "{}",
        r[0].0
    );
    assert!(
        !std::path::Path::new("/etc/mast-escape").exists()
            && !std::path::Path::new("/usr/mast-escape").exists()
    );
    assert!(
        !r[1].0.contains("other session's data") && r[1].0.contains("No such file"),
        "{}",
        r[1].0
    );
    let env = &r[2].0;
    assert!(
        !env.contains("CARGO") && !env.contains("DATABASE_URL") && !env.contains("RUST"),
        "server environment leaked: {env}"
    );
    assert!(env.contains("HOME=/workspace"));
    assert!(
        r[3].0.starts_with("1000\n") && !r[3].0.contains("root:"),
        "{}",
        r[3].0
    );
    assert!(r[4].1, "the read tool stays in the workspace");
    assert!(
        r[6].1 && r[6].0.contains("outside"),
        "symlinks cannot lead out: {}",
        r[6].0
    );
}

/// Whatever a command leaves in the workspace (links out, dangling or not, FIFOs, huge files),
/// the file tools neither touch the host nor hang nor balloon.
async fn file_tools_stay_in_the_workspace(b: Backend) {
    let s = TestServer::start(b).await;
    let outside = tempfile::tempdir().unwrap();
    let host = outside.path().display().to_string();
    std::fs::write(outside.path().join("secret.txt"), "host secret").unwrap();
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    let setup = format!(
        "ln -s {host}/ESCAPED evil && ln -s {host} dirlink && ln -s {host}/secret.txt secret && mkfifo pipe && truncate -s 60M big.txt && echo needle > mine.txt && echo ready"
    );
    let script = steps(&[
        call("bash", json!({ "command": setup })),
        call(
            "write",
            json!({"file_path": "/workspace/evil", "content": "x"}),
        ),
        call(
            "write",
            json!({"file_path": "dirlink/new.txt", "content": "x"}),
        ),
        call(
            "write",
            json!({"file_path": "dirlink/sub/new.txt", "content": "x"}),
        ),
        call("read", json!({"file_path": "secret"})),
        call(
            "edit",
            json!({"file_path": "secret", "old_string": "host", "new_string": "pwned"}),
        ),
        call("read", json!({"file_path": "pipe"})),
        call("write", json!({"file_path": "pipe", "content": "x"})),
        call(
            "edit",
            json!({"file_path": "pipe", "old_string": "a", "new_string": "b"}),
        ),
        call(
            "edit",
            json!({"file_path": "big.txt", "old_string": "a", "new_string": "b"}),
        ),
        call("grep", json!({"pattern": "needle|secret"})),
    ]);
    let idle = turn(&s, &mut sess, &script).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let r = results(&sess.st.seen);
    assert!(r[0].0.contains("ready"), "{}", r[0].0);
    for (i, res) in r.iter().enumerate().take(6).skip(1) {
        assert!(res.1 && res.0.contains("outside"), "call {i}: {res:?}");
    }
    assert!(!r[4].0.contains("host secret"));
    for (i, res) in r.iter().enumerate().take(9).skip(6) {
        assert!(res.1 && res.0.contains("named pipe"), "call {i}: {res:?}");
    }
    assert!(r[9].1 && r[9].0.contains("up to"), "{:?}", r[9]);
    assert!(
        !r[10].1
            && r[10].0.starts_with("/workspace/mine.txt:1:needle\n")
            && r[10].0.contains("skipped 1 file(s) over"),
        "grep skips the huge file and reads nothing through links: {}",
        r[10].0
    );
    let left: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["secret.txt"], "nothing was created on the host");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "host secret"
    );
}

async fn limited_networking_allows_only_listed_hosts(b: Backend) {
    // A web server on another loopback address stands in for an allowed remote host
    // (127.0.0.1 and localhost stay inside the sandbox, by NO_PROXY).
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(|| async { "hello through the proxy" }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    let url = format!("http://127.0.0.2:{port}/");
    let s = TestServer::start(b).await;
    let none = json!({"type": "cloud", "networking": {"type": "limited"}});
    let mut closed = session(&s, toolset(json!([]), "always_allow"), Some(none)).await;
    let script = steps(&[
        call(
            "bash",
            json!({"command": format!("curl -sS --max-time 3 {url} 2>&1; (echo > /dev/tcp/1.1.1.1/80) 2>&1 | head -1")}),
        ),
        call("web_fetch", json!({"url": url})),
    ]);
    turn(&s, &mut closed, &script).await;
    let r = results(&closed.st.seen);
    assert!(!r[0].0.contains("hello through the proxy"), "{}", r[0].0);
    assert!(
        r[1].1 && r[1].0.contains("not reachable"),
        "web_fetch obeys the same policy: {}",
        r[1].0
    );
    let listed =
        json!({"type": "cloud", "networking": {"type": "limited", "allowed_hosts": ["127.0.0.2"]}});
    let mut open = session(&s, toolset(json!([]), "always_allow"), Some(listed)).await;
    let script = steps(&[
        call(
            "bash",
            json!({"command": format!("curl -sS --max-time 5 {url}; echo; curl -sS --max-time 5 -o /dev/null -w '%{{http_code}}' http://127.0.0.3:{port}/")}),
        ),
        call("web_fetch", json!({"url": url})),
        // The forwarder's threads count against the session's process limit: it keeps to one.
        call(
            "bash",
            json!({"command": "for p in /proc/[0-9]*; do if [ \"$(cat $p/comm 2>/dev/null)\" = mast-helper ]; then echo threads=$(ls $p/task | wc -l); fi; done"}),
        ),
    ]);
    turn(&s, &mut open, &script).await;
    let r = results(&open.st.seen);
    assert!(
        r[2].0.starts_with("threads=1\n"),
        "one forwarder, on one thread: {}",
        r[2].0
    );
    assert!(
        r[0].0.contains("hello through the proxy"),
        "allowed host reachable: {}",
        r[0].0
    );
    assert!(
        r[0].0.contains("403"),
        "other hosts refused by the egress proxy: {}",
        r[0].0
    );
    assert!(
        !r[1].1 && r[1].0.contains("hello through the proxy"),
        "{}",
        r[1].0
    );
}

async fn internal_addresses_are_out_of_reach(b: Backend) {
    // A server on loopback stands in for this host's internal services (the database, the
    // cloud metadata endpoint); with private networking off, nothing reaches it, whatever
    // the environment's networking allows by name.
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "internal secret" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    let s = TestServer::start_with(
        b,
        Options {
            allow_private_network: false,
            ..Default::default()
        },
    )
    .await;
    let unrestricted = json!({"type": "cloud", "networking": {"type": "unrestricted"}});
    let listed = json!({"type": "cloud", "networking": {"type": "limited", "allowed_hosts": ["127.0.0.2", "localhost"]}});
    for (env, mapped_by_name) in [(unrestricted, false), (listed, true)] {
        let mut sess = session(&s, toolset(json!([]), "always_allow"), Some(env)).await;
        let script = steps(&[
            call(
                "bash",
                json!({"command": format!("curl -sS --max-time 5 http://127.0.0.2:{port}/ 2>&1; echo; curl -sS --max-time 5 -o /dev/null -w '%{{http_code}}' http://127.0.0.2:{port}/; echo; (echo > /dev/tcp/127.0.0.2/{port}) 2>&1 | head -1")}),
            ),
            call(
                "web_fetch",
                json!({"url": format!("http://127.0.0.2:{port}/")}),
            ),
            call(
                "web_fetch",
                json!({"url": format!("http://localhost:{port}/")}),
            ),
            call(
                "web_fetch",
                json!({"url": format!("http://[::ffff:127.0.0.2]:{port}/")}),
            ),
        ]);
        turn(&s, &mut sess, &script).await;
        let r = results(&sess.st.seen);
        assert!(!r[0].0.contains("internal secret"), "{}", r[0].0);
        assert!(r[0].0.contains("403"), "refused by the proxy: {}", r[0].0);
        for (i, (text, is_error)) in r.iter().enumerate().skip(1) {
            // The mapped address is not in the limited list, so it is refused by name first.
            let why = if i == 3 && mapped_by_name {
                "allowed_hosts"
            } else {
                "internal address"
            };
            assert!(
                *is_error && !text.contains("internal secret") && text.contains(why),
                "web_fetch refuses internal addresses: {text}"
            );
        }
    }
}

async fn permission_policies_are_enforced_in_code(b: Backend) {
    let s = TestServer::start(b).await;
    let configs = json!([
        {"name": "bash", "permission_policy": {"type": "always_ask"}},
        {"name": "write", "enabled": false},
        {"name": "edit", "permission_policy": {"type": "auto"}},
        {"name": "read", "permission_policy": {"type": "auto"}},
    ]);
    let mut sess = session(&s, toolset(configs, "always_allow"), None).await;
    // A disabled tool is refused before any policy; the model then works around it.
    let script = steps(&[
        call("write", json!({"file_path": "a.txt", "content": "x"})),
        call(
            "bash",
            json!({"command": "echo written-by-bash > a.txt && cat a.txt"}),
        ),
    ]);
    s.client.say(&sess.id, &script).await;
    let idle = sess.st.until_idle(30).await;
    let uses: Vec<Value> = sess
        .st
        .seen
        .iter()
        .filter(|e| e["type"] == "agent.tool_use")
        .cloned()
        .collect();
    assert_eq!(uses[0]["evaluated_permission"], "deny");
    assert!(
        uses[0].get("evaluation").is_none(),
        "no policy applied to a disabled tool"
    );
    assert!(results(&sess.st.seen)[0].0.contains("disabled"));
    assert_eq!(idle["stop_reason"]["type"], "requires_action");
    assert_eq!(uses[1]["evaluated_permission"], "ask");
    assert_eq!(uses[1]["evaluation"], json!({"type": "always_ask"}));
    assert!(
        !s.data_dir
            .join("workspaces")
            .join(&sess.id)
            .join("a.txt")
            .exists(),
        "nothing ran before the confirmation"
    );
    s.client
        .send_events(&sess.id, json!([{"type": "user.tool_confirmation", "tool_use_id": uses[1]["id"], "result": "allow"}]))
        .await;
    let idle = sess.st.until_idle(30).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    assert!(results(&sess.st.seen)[1].0.contains("written-by-bash"));
    // A denial carries the user's message to the model; the command never runs.
    sess.st.seen.clear();
    s.client
        .say(
            &sess.id,
            &steps(&[call("bash", json!({"command": "touch should-not-exist"}))]),
        )
        .await;
    let idle = sess.st.until_idle(30).await;
    let id = idle["stop_reason"]["event_ids"][0].clone();
    s.client
        .send_events(&sess.id, json!([{"type": "user.tool_confirmation", "tool_use_id": id, "result": "deny", "deny_message": "not in prod"}]))
        .await;
    let idle = sess.st.until_idle(30).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let last = sess
        .st
        .seen
        .iter()
        .rev()
        .find(|e| e["type"] == "agent.message")
        .unwrap();
    assert!(
        last["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("not in prod")
    );
    assert!(
        !s.data_dir
            .join("workspaces")
            .join(&sess.id)
            .join("should-not-exist")
            .exists()
    );
    // auto: safe calls run, risky ones are denied with a reason code.
    sess.st.seen.clear();
    let script = steps(&[
        call("read", json!({"file_path": "a.txt"})),
        call(
            "edit",
            json!({"file_path": "/etc/hosts", "old_string": "a", "new_string": "b"}),
        ),
    ]);
    turn(&s, &mut sess, &script).await;
    let uses: Vec<Value> = sess
        .st
        .seen
        .iter()
        .filter(|e| e["type"] == "agent.tool_use")
        .cloned()
        .collect();
    assert_eq!(
        uses[0]["evaluation"],
        json!({"type": "auto", "evaluated_permission": {"type": "allow"}})
    );
    assert_eq!(uses[1]["evaluated_permission"], "deny");
    assert_eq!(
        uses[1]["evaluation"],
        json!({"type": "auto", "evaluated_permission": {"type": "deny", "reason_code": "high_risk"}})
    );
    // Confirmations only answer asks.
    s.client
        .post(&format!("/v1/sessions/{}/events", sess.id), json!({"events": [{"type": "user.tool_confirmation", "tool_use_id": uses[0]["id"], "result": "allow"}]}))
        .await
        .err(400);
}

async fn auto_bash_runs_only_what_it_can_prove_safe(b: Backend) {
    let s = TestServer::start(b).await;
    let configs = json!([{"name": "bash", "permission_policy": {"type": "auto"}}]);
    let mut sess = session(&s, toolset(configs, "always_allow"), None).await;
    let ws = s.data_dir.join("workspaces").join(&sess.id);
    let tool_uses = |seen: &[Value]| -> Vec<Value> {
        seen.iter()
            .filter(|e| e["type"] == "agent.tool_use")
            .cloned()
            .collect()
    };
    // Literal workspace commands run; a redirection out of the workspace is refused however
    // it is spelled.
    let script = steps(&[
        call(
            "bash",
            json!({"command": "echo ok>note.txt && cat note.txt"}),
        ),
        call("bash", json!({"command": "echo hi 1>/etc/mast-x"})),
        call("bash", json!({"command": "echo hi>/etc/mast-x"})),
    ]);
    let idle = turn(&s, &mut sess, &script).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let uses = tool_uses(&sess.st.seen);
    assert_eq!(
        uses[0]["evaluation"],
        json!({"type": "auto", "evaluated_permission": {"type": "allow"}})
    );
    for denied in &uses[1..] {
        assert_eq!(
            denied["evaluation"],
            json!({"type": "auto", "evaluated_permission": {"type": "deny", "reason_code": "high_risk"}})
        );
    }
    let r = results(&sess.st.seen);
    assert!(!r[0].1 && r[0].0.contains("ok"), "{r:?}");
    assert!(r[1].1 && r[2].1, "{r:?}");
    // Commands that could run anything wait for the user, and nothing runs meanwhile.
    for command in [
        "echo $(touch pwned)",
        "echo \"`touch pwned`\"",
        "awk 'BEGIN{system(\"touch pwned\")}'",
        "sed -n '1e touch pwned' note.txt",
        "export PATH=/workspace/.b:$PATH",
    ] {
        sess.st.seen.clear();
        s.client
            .say(
                &sess.id,
                &steps(&[call("bash", json!({ "command": command }))]),
            )
            .await;
        let idle = sess.st.until_idle(30).await;
        assert_eq!(idle["stop_reason"]["type"], "requires_action", "{command}");
        let uses = tool_uses(&sess.st.seen);
        assert_eq!(
            uses[0]["evaluation"],
            json!({"type": "auto", "evaluated_permission": {"type": "ask", "reason_code": "indeterminate"}}),
            "{command}"
        );
        assert!(!ws.join("pwned").exists(), "{command} ran before an answer");
        s.client
            .send_events(&sess.id, json!([{"type": "user.tool_confirmation", "tool_use_id": uses[0]["id"], "result": "deny"}]))
            .await;
        let idle = sess.st.until_idle(30).await;
        assert_eq!(idle["stop_reason"]["type"], "end_turn", "{command}");
    }
    assert!(!ws.join("pwned").exists());
}

async fn confirmations_out_of_order_and_interrupts(b: Backend) {
    let s = TestServer::start(b).await;
    let mut sess = session(&s, toolset(json!([]), "always_ask"), None).await;
    let script = "call bash {\"command\": \"echo first > one.txt\"}\ncall bash {\"command\": \"echo second > two.txt\"}\n---\nsay {{result}}";
    s.client.say(&sess.id, script).await;
    let idle = sess.st.until_idle(30).await;
    let ids = idle["stop_reason"]["event_ids"].as_array().unwrap().clone();
    assert_eq!(ids.len(), 2);
    s.client
        .send_events(
            &sess.id,
            json!([{"type": "user.tool_confirmation", "tool_use_id": ids[1], "result": "allow"}]),
        )
        .await;
    let idle = sess.st.until_idle(30).await;
    assert_eq!(
        idle["stop_reason"]["event_ids"],
        json!([ids[0]]),
        "the remaining ask is re-announced"
    );
    s.client
        .send_events(
            &sess.id,
            json!([{"type": "user.tool_confirmation", "tool_use_id": ids[0], "result": "allow"}]),
        )
        .await;
    let idle = sess.st.until_idle(30).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let ws = s.data_dir.join("workspaces").join(&sess.id);
    assert!(ws.join("one.txt").exists() && ws.join("two.txt").exists());
    // Interrupt while asks are pending: both calls closed, nothing runs.
    sess.st.seen.clear();
    s.client
        .say(
            &sess.id,
            "call bash {\"command\": \"touch three\"}\ncall read {\"file_path\": \"one.txt\"}",
        )
        .await;
    let idle = sess.st.until_idle(30).await;
    assert_eq!(
        idle["stop_reason"]["event_ids"].as_array().unwrap().len(),
        2
    );
    s.client
        .send_events(&sess.id, json!([{"type": "user.interrupt"}]))
        .await;
    let idle = sess.st.until_idle(30).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let r = results(&sess.st.seen);
    assert_eq!(r.len(), 2);
    assert!(r.iter().all(|(t, e)| *e && t.contains("interrupted")));
    assert!(!ws.join("three").exists());
    // Interrupt while a tool runs: the command is killed and its call closed. Its `sleep`
    // carries a duration unique to this run, so the process can be found on this machine
    // (the sandbox's pid namespace is nested in ours) before and after the interrupt.
    sess.st.seen.clear();
    let mut allow = session(&s, toolset(json!([]), "always_allow"), None).await;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let marker = format!("20.{nanos:09}");
    s.client
        .say(
            &allow.id,
            &format!("call bash {{\"command\": \"sleep {marker}; touch late\"}}"),
        )
        .await;
    eventually(30, "the command to run", || {
        let running = !pids_with_arg(&marker).is_empty();
        async move { running.then_some(()) }
    })
    .await;
    s.client
        .send_events(&allow.id, json!([{"type": "user.interrupt"}]))
        .await;
    let idle = allow.st.until_idle(10).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let r = results(&allow.st.seen);
    assert!(r[0].1 && r[0].0.contains("interrupted"), "{r:?}");
    // Left alone it would sleep for 20 s more: gone within 5 s means it was killed.
    eventually(5, "the interrupted command to be killed", || {
        let gone = pids_with_arg(&marker).is_empty();
        async move { gone.then_some(()) }
    })
    .await;
    assert!(
        !s.data_dir
            .join("workspaces")
            .join(&allow.id)
            .join("late")
            .exists()
    );
}

/// Processes on this machine with `arg` as one of their command-line arguments.
fn pids_with_arg(arg: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        cmdline
            .split(|b| *b == 0)
            .any(|a| a == arg.as_bytes())
            .then_some(pid)
    })
    .collect()
}

async fn web_tools_follow_domain_lists_and_providers(b: Backend) {
    let app = axum::Router::new()
        .route("/page", axum::routing::get(|| async {
            axum::response::Html("<html><head><script>var x = 1;</script></head><body><h1>Title</h1><p>Some <b>bold</b> text.</p></body></html>")
        }))
        .route("/search", axum::routing::get(|| async {
            axum::Json(json!({"results": [
                {"url": "https://docs.rs/tokio", "title": "tokio docs", "content": "An async runtime"},
                {"url": "https://blocked.example/x", "title": "blocked", "content": "nope"}]}))
        }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    let s = TestServer::start_with(
        b,
        Options {
            web_search_url: Some(format!("{base}/search")),
            ..Default::default()
        },
    )
    .await;
    let configs = json!([{"name": "web_fetch", "blocked_domains": ["evil.example"]}, {"name": "web_search", "blocked_domains": ["blocked.example"]}]);
    let mut sess = session(&s, toolset(configs, "always_allow"), None).await;
    let script = steps(&[
        call("web_fetch", json!({"url": format!("{base}/page")})),
        call("web_fetch", json!({"url": "https://evil.example/"})),
        call("web_search", json!({"query": "tokio"})),
    ]);
    turn(&s, &mut sess, &script).await;
    let r = results(&sess.st.seen);
    assert!(
        !r[0].1 && r[0].0.contains("Title") && r[0].0.contains("bold") && !r[0].0.contains("var x"),
        "{}",
        r[0].0
    );
    assert!(r[1].1 && r[1].0.contains("blocked_domains"));
    let search = sess
        .st
        .seen
        .iter()
        .filter(|e| e["type"] == "agent.tool_result")
        .nth(2)
        .unwrap();
    assert_eq!(search["content"].as_array().unwrap().len(), 1);
    assert_eq!(search["content"][0]["type"], "search_result");
    assert_eq!(search["content"][0]["source"], "https://docs.rs/tokio");
    let usage = s
        .client
        .get(&format!("/v1/sessions/{}", sess.id))
        .await
        .ok()["usage"]["server_tool_use"]
        .clone();
    assert_eq!(
        usage,
        json!({"web_search_requests": 1, "web_fetch_requests": 2})
    );
    // Without a provider, web_search says so instead of inventing results.
    let bare = TestServer::start(b).await;
    let mut sess = session(&bare, toolset(json!([]), "always_allow"), None).await;
    turn(
        &bare,
        &mut sess,
        &steps(&[call("web_search", json!({"query": "x"}))]),
    )
    .await;
    let r = results(&sess.st.seen);
    assert!(r[0].1 && r[0].0.contains("no search provider"));
}
