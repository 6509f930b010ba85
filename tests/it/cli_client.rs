//! The client commands through the real binary against real servers: `agents apply` and
//! `list`, `sessions create`, `list` and `answer`, `send`, and `sessions tail` resuming
//! without gap or duplicate after a dropped connection and after a server restart.

use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

use crate::backend_tests;
use crate::crash::{Reaped, free_port, spawn, wait_up};
use crate::support::{Backend, Client, Options, TestServer, fresh_postgres_database};

/// `mast ARGS` against the server at `url`, with `key` when given.
fn command(url: &str, key: Option<&str>, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mast"));
    cmd.args(args)
        .env("MAST_URL", url)
        .env_remove("MAST_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .kill_on_drop(true);
    if let Some(k) = key {
        cmd.env("MAST_API_KEY", k);
    }
    cmd
}

async fn run(url: &str, key: Option<&str>, args: &[&str]) -> Output {
    command(url, key, args).output().await.expect("mast runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// The agents on the server, by name.
async fn agent_named(c: &Client, name: &str) -> Value {
    let all = c.get("/v1/agents?limit=100").await.ok();
    all["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

async fn agents_apply_creates_updates_and_leaves_unchanged(b: Backend) {
    let s = TestServer::start(b).await;
    let dir = tempfile::TempDir::new().unwrap();
    let two = "- name: planner\n  model: mast-scripted\n  system: Plan first.\n\
               - name: coder\n  model: mast-scripted\n  metadata: {team: core, tier: gold}\n";
    let file = write(&dir, "agents.yaml", two);
    let out = run(&s.url, None, &["agents", "apply", &file]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<String> = stdout(&out).lines().map(String::from).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("created agent_") && lines[0].ends_with(" v1 (planner)"));
    assert!(lines[1].starts_with("created agent_") && lines[1].ends_with(" v1 (coder)"));

    // The same file again changes nothing.
    let out = run(&s.url, None, &["agents", "apply", &file]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    for (line, name) in stdout(&out).lines().zip(["planner", "coder"]) {
        assert!(
            line.starts_with("unchanged agent_") && line.ends_with(&format!(" v1 ({name})")),
            "{line}"
        );
    }

    // An edit makes a new version of that agent only; what the file drops is cleared.
    let edited = "- name: planner\n  model: mast-scripted\n  system: Plan first.\n\
                  - name: coder\n  model: mast-scripted\n  system: Write tests.\n  metadata: {team: core}\n";
    let file = write(&dir, "agents.yaml", edited);
    let out = run(&s.url, None, &["agents", "apply", &file]).await;
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("unchanged") && lines[0].ends_with(" v1 (planner)"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("updated") && lines[1].ends_with(" v2 (coder)"),
        "{text}"
    );
    let coder = agent_named(&s.client, "coder").await;
    assert_eq!(coder["version"], 2);
    assert_eq!(coder["system"], "Write tests.");
    assert_eq!(coder["metadata"], json!({"team": "core"}));
    let file = write(
        &dir,
        "coder.yml",
        "name: coder\nmodel: mast-scripted\nmetadata: {team: core}\n",
    );
    let out = run(&s.url, None, &["agents", "apply", &file]).await;
    assert!(stdout(&out).ends_with(" v3 (coder)\n"), "{}", stdout(&out));
    assert_eq!(agent_named(&s.client, "coder").await["system"], Value::Null);

    // JSON, matched by id: a rename is an update of the same agent.
    let id = coder["id"].as_str().unwrap();
    let file = write(
        &dir,
        "coder.json",
        &json!({"id": id, "name": "engineer", "model": "mast-scripted", "metadata": {"team": "core"}})
            .to_string(),
    );
    let out = run(&s.url, None, &["agents", "apply", &file]).await;
    assert_eq!(
        stdout(&out),
        format!("updated {id} v4 (engineer)\n"),
        "{}",
        stderr(&out)
    );

    // Several YAML documents in one file.
    let file = write(
        &dir,
        "docs.yaml",
        "name: planner\nmodel: mast-scripted\nsystem: Plan first.\n---\nname: reviewer\nmodel: mast-scripted\n",
    );
    let out = run(&s.url, None, &["agents", "apply", &file]).await;
    let text = stdout(&out);
    assert!(
        text.starts_with("unchanged")
            && text.contains("created")
            && text.ends_with(" v1 (reviewer)\n"),
        "{text}"
    );
}

async fn agents_apply_refuses_bad_files(b: Backend) {
    let s = TestServer::start(b).await;
    let dir = tempfile::TempDir::new().unwrap();
    let count = |c: Client| async move {
        c.get("/v1/agents?limit=100").await.ok()["data"]
            .as_array()
            .unwrap()
            .len()
    };

    // A typo is caught before anything is sent.
    let file = write(
        &dir,
        "typo.yaml",
        "- name: fine\n  model: mast-scripted\n- name: typo\n  model: mast-scripted\n  sytem: hi\n",
    );
    let out = run(&s.url, None, &["agents", "apply", &file]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("agent 2 (`typo`): unknown field `sytem` (did you mean `system`?)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(count(s.client.clone()).await, 0);
    let file = write(&dir, "broken.yaml", "name: [unclosed\n");
    let out = run(&s.url, None, &["agents", "apply", &file]).await;
    assert!(!out.status.success());
    assert!(stderr(&out).contains("not valid YAML"), "{}", stderr(&out));

    // An agent the server refuses stops the run there; those before it were applied.
    let file = write(
        &dir,
        "bad.yaml",
        "- name: good\n  model: mast-scripted\n- name: bad\n  model: no-such-model\n- name: never\n  model: mast-scripted\n",
    );
    let out = run(&s.url, None, &["agents", "apply", &file]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).starts_with("created agent_") && stdout(&out).lines().count() == 1);
    let err = stderr(&out);
    assert!(
        err.contains("agent 2 (`bad`)")
            && err.contains("the server answered 400")
            && err.contains("no-such-model"),
        "{err}"
    );
    assert_eq!(count(s.client.clone()).await, 1);

    // An id the server does not know.
    let file = write(
        &dir,
        "ghost.json",
        r#"{"id": "agent_ghost", "name": "ghost", "model": "mast-scripted"}"#,
    );
    let out = run(&s.url, None, &["agents", "apply", &file]).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("there is no agent `agent_ghost`"),
        "{}",
        stderr(&out)
    );
    let out = run(
        &s.url,
        None,
        &["agents", "apply", "/nonexistent/agents.yaml"],
    )
    .await;
    assert!(stderr(&out).contains("cannot read /nonexistent/agents.yaml"));
}

async fn send_waits_for_the_turn_and_says_what_is_wrong(b: Backend) {
    let s = TestServer::start_with(
        b,
        Options {
            api_key: Some("mast_sk_clienttestkey".into()),
            ..Default::default()
        },
    )
    .await;
    let key = Some("mast_sk_clienttestkey");
    let agent = s.client.agent(json!([])).await;
    let sid = s.client.session(&agent).await["id"]
        .as_str()
        .unwrap()
        .to_string();

    let out = run(&s.url, None, &["send", &sid, "say hello"]).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("refused the credentials") && stderr(&out).contains("MAST_API_KEY")
    );

    let out = run(&s.url, key, &["send", &sid, "say Hello there", "--wait"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.iter().any(|l| l.ends_with("  status    running")),
        "{text}"
    );
    assert!(
        lines.iter().any(|l| l.ends_with("  agent     Hello there")),
        "{text}"
    );
    assert!(
        lines
            .last()
            .unwrap()
            .ends_with("  status    idle (end_turn)"),
        "{text}"
    );
    assert!(
        !text.contains("user "),
        "starts after the message sent: {text}"
    );

    // Without --wait: the sent event's id, and it is in the log.
    let out = run(&s.url, key, &["send", &sid, "say again"]).await;
    let id = stdout(&out).trim().to_string();
    assert!(id.starts_with("sevt_"), "{id}");
    crate::support::eventually(10, "the message in the log", || async {
        s.client
            .all_events(&sid)
            .await
            .iter()
            .any(|e| e["id"] == id.as_str())
            .then_some(())
    })
    .await;

    // A session waiting on a custom tool's result takes the message up only after it: said.
    let agent = s
        .client
        .agent(json!([crate::support::http::weather_tool()]))
        .await;
    let waiting = s.client.session(&agent).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = run(
        &s.url,
        key,
        &[
            "send",
            &waiting,
            "call get_weather {\"city\": \"Oslo\"}",
            "--wait",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("idle (requires_action: sevt_"),
        "{}",
        stdout(&out)
    );
    let mut pending = command(&s.url, key, &["send", &waiting, "say later", "--wait"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(pending.stderr.take().unwrap()).lines();
    let said = tokio::time::timeout(Duration::from_secs(20), err.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        said.starts_with("mast: the session waits for answers to sevt_"),
        "{said}"
    );
    drop(pending);

    let out = run(&s.url, key, &["send", "sesn_nope", "hi"]).await;
    assert!(
        stderr(&out).contains("the server answered 404"),
        "{}",
        stderr(&out)
    );
    let out = run("http://127.0.0.1:9", key, &["send", &sid, "hi"]).await;
    assert!(stderr(&out).contains("cannot reach the Mast server at http://127.0.0.1:9"));
}

/// A running `mast sessions tail`, its output read line by line.
struct Tail {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    seen: Vec<Value>,
}

impl Tail {
    fn start(url: &str, args: &[&str]) -> Self {
        let mut child = command(url, None, args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Tail {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads events (`--json`) until `n` idles have been seen in all.
    async fn until_idles(&mut self, n: usize) {
        let idles = |seen: &[Value]| {
            seen.iter()
                .filter(|e| e["type"] == "session.status_idle")
                .count()
        };
        while idles(&self.seen) < n {
            let line = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
                .await
                .expect("the tail printed in time")
                .unwrap()
                .expect("the tail is still running");
            self.seen.push(serde_json::from_str(&line).expect(&line));
        }
    }

    fn ids(&self) -> Vec<Value> {
        self.seen.iter().map(|e| e["id"].clone()).collect()
    }

    /// Ctrl-C: the tail exits with 130.
    async fn interrupt(mut self) {
        let pid = self.child.id().unwrap().to_string();
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap();
        let status = tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("the tail stops on Ctrl-C")
            .unwrap();
        assert_eq!(status.code(), Some(130));
    }
}

fn log_ids(log: &[Value]) -> Vec<Value> {
    log.iter().map(|e| e["id"].clone()).collect()
}

async fn tail_resumes_after_a_server_restart(b: Backend) {
    let dir = tempfile::TempDir::new().unwrap();
    let db = match b {
        Backend::Sqlite => None,
        Backend::Postgres => Some(fresh_postgres_database().await),
    };
    let port = free_port();
    let mut server: Reaped = spawn(dir.path(), db.as_deref(), port);
    let url = format!("http://127.0.0.1:{port}");
    let c = Client::new(&url);
    wait_up(&c).await;
    let agent = c.agent(json!([])).await;
    let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();

    // From the start of an empty session, then live.
    // (No waiting for it to connect: whatever it misses live, it lists.)
    let mut tail = Tail::start(&url, &["sessions", "tail", &sid, "--from-start", "--json"]);
    c.say(&sid, "say one").await;
    tail.until_idles(1).await;

    // The server goes away mid-tail (killed), events are written while the tail is cut off,
    // and the tail catches up from where it was.
    let _ = server.kill();
    let _ = server.wait();
    server = spawn(dir.path(), db.as_deref(), port);
    wait_up(&c).await;
    for (turn, text) in [(2, "say two"), (3, "say three")] {
        c.say(&sid, text).await;
        crate::support::eventually(30, "the turn to end", || async {
            let log = c.all_events(&sid).await;
            (log.iter()
                .filter(|e| e["type"] == "session.status_idle")
                .count()
                >= turn)
                .then_some(())
        })
        .await;
    }
    tail.until_idles(3).await;
    assert_eq!(
        tail.ids(),
        log_ids(&c.all_events(&sid).await),
        "every event once, in order"
    );
    tail.interrupt().await;
    drop(server);
}

/// A TCP proxy whose connections can be cut, as a flaky network would.
struct Proxy {
    port: u16,
    conns: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn to(target: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let conns = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let held = conns.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                held.lock().unwrap().push(task);
            }
        });
        Proxy {
            port,
            conns,
            accept,
        }
    }

    fn cut(&self) {
        for t in self.conns.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}

async fn tail_resumes_after_a_dropped_connection(b: Backend) {
    let s = TestServer::start(b).await;
    let agent = s.client.agent(json!([])).await;
    let sid = s.client.session(&agent).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    s.client.say(&sid, "say before").await;
    crate::support::eventually(20, "the first turn to end", || async {
        let log = s.client.all_events(&sid).await;
        log.iter()
            .any(|e| e["type"] == "session.status_idle")
            .then_some(log.len())
    })
    .await;
    let before = s.client.all_events(&sid).await.len();
    let port: u16 = s.url.rsplit(':').next().unwrap().parse().unwrap();
    let proxy = Proxy::to(port).await;

    // A live tail starts after what is already there.
    let url = format!("http://127.0.0.1:{}", proxy.port);
    let mut tail = Tail::start(&url, &["sessions", "tail", &sid, "--json"]);
    crate::support::eventually(20, "the tail to subscribe", || async {
        (s.stream_topics() > 0).then_some(())
    })
    .await;
    s.client.say(&sid, "say one").await;
    tail.until_idles(1).await;
    proxy.cut();
    s.client.say(&sid, "say two").await;
    tail.until_idles(2).await;
    let log = log_ids(&s.client.all_events(&sid).await);
    assert_eq!(
        tail.ids(),
        log[before..].to_vec(),
        "every later event once, in order"
    );
    assert!(
        tail.seen[0]["type"] == "user.message",
        "starts at the next event: {}",
        tail.seen[0]
    );
    tail.interrupt().await;
}

backend_tests!(
    agents_apply_creates_updates_and_leaves_unchanged,
    agents_apply_refuses_bad_files,
    send_waits_for_the_turn_and_says_what_is_wrong,
    send_wait_fails_when_the_turn_runs_out_of_retries,
    health_says_whether_a_server_is_ready,
    tail_resumes_after_a_server_restart,
    tail_resumes_after_a_dropped_connection,
    webhooks_and_hooks_are_managed_from_the_command_line,
    a_session_is_created_listed_and_its_tool_call_answered,
    confirmations_are_denied_one_call_at_a_time,
    agents_and_environments_are_named_by_id_or_name,
);

/// `mast health` (the compose file's health check) passes on a ready server and says why
/// it fails elsewhere.
async fn health_says_whether_a_server_is_ready(b: Backend) {
    let s = TestServer::start(b).await;
    let out = run(&s.url, None, &["health", "--url", &s.url]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let dead = format!("http://127.0.0.1:{}", free_port());
    let out = run(&s.url, None, &["health", "--url", &dead]).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!("{dead}/readyz: nothing answers there")),
        "{}",
        stderr(&out)
    );
}

/// A turn that gave up on the model is not a success to a script waiting on it.
async fn send_wait_fails_when_the_turn_runs_out_of_retries(b: Backend) {
    use crate::support::mock_anthropic::{MockAnthropic, Reply};
    let mock = MockAnthropic::start().await;
    let mut s = TestServer::start_with(
        b,
        Options {
            anthropic_base_url: Some(mock.url.clone()),
            max_retries: 1,
            ..Default::default()
        },
    )
    .await;
    s.client.model = "claude-opus-4-7".into();
    let agent = s.client.agent(json!([])).await;
    let sid = s.client.session(&agent).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    mock.push([
        Reply::Status(429, "rate_limit_error"),
        Reply::Status(429, "rate_limit_error"),
    ]);
    let out = run(&s.url, None, &["send", &sid, "hi", "--wait"]).await;
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("the turn ended without an answer (retries_exhausted)"),
        "{}",
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("retries_exhausted"),
        "{}",
        stdout(&out)
    );
}

async fn webhooks_and_hooks_are_managed_from_the_command_line(b: Backend) {
    let s = TestServer::start(b).await;
    let url = "http://127.0.0.1:9/in";
    let made = run(
        &s.url,
        None,
        &[
            "webhooks",
            "create",
            "--endpoint-url",
            url,
            "--event-type",
            "session.idled",
            "--event-type",
            "agent.created",
        ],
    )
    .await;
    assert!(made.status.success(), "{}", stderr(&made));
    let endpoint: Value = serde_json::from_str(&stdout(&made)).unwrap();
    let id = endpoint["id"].as_str().unwrap().to_string();
    let first_secret = endpoint["signing_secret"].as_str().unwrap().to_string();
    assert!(first_secret.starts_with("whsec_"));
    let listed = stdout(&run(&s.url, None, &["webhooks", "list"]).await);
    assert_eq!(
        listed.trim(),
        format!("{id}\tenabled\t{url}\tsession.idled,agent.created")
    );
    assert!(
        run(&s.url, None, &["webhooks", "disable", &id])
            .await
            .status
            .success()
    );
    let shown = s
        .client
        .get(&format!("/v1/mast/webhook_endpoints/{id}"))
        .await
        .ok();
    assert_eq!(shown["enabled"], false);
    assert!(
        shown["signing_secret"].is_null(),
        "shown only when made: {shown}"
    );
    let rotated = run(&s.url, None, &["webhooks", "rotate-secret", &id]).await;
    let rotated: Value = serde_json::from_str(&stdout(&rotated)).unwrap();
    let second = rotated["signing_secret"].as_str().unwrap();
    assert!(second.starts_with("whsec_") && second != first_secret);
    let none = run(&s.url, None, &["webhooks", "deliveries", &id]).await;
    assert!(none.status.success() && stdout(&none).is_empty());
    // A bad event type is the server's 400, said on stderr.
    let bad = run(
        &s.url,
        None,
        &[
            "webhooks",
            "create",
            "--endpoint-url",
            url,
            "--event-type",
            "session.nope",
        ],
    )
    .await;
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("session.nope"), "{}", stderr(&bad));
    assert!(
        run(&s.url, None, &["webhooks", "delete", &id])
            .await
            .status
            .success()
    );
    let gone = run(&s.url, None, &["webhooks", "list"]).await;
    assert!(stdout(&gone).is_empty());
}

/// `mast ARGS` with `input` on its stdin.
async fn run_with_stdin(url: &str, args: &[&str], input: &str) -> Output {
    use tokio::io::AsyncWriteExt as _;
    let mut child = command(url, None, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    child.wait_with_output().await.unwrap()
}

/// The table row of `id` in a list's output.
fn row<'a>(table: &'a str, id: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_else(|| panic!("no row for {id} in:\n{table}"))
}

/// A session's whole life from the command line: create by names, list, a custom tool's
/// call, the list marking the session as waiting, the answer, the turn's end.
async fn a_session_is_created_listed_and_its_tool_call_answered(b: Backend) {
    let s = TestServer::start(b).await;
    let u = s.url.as_str();
    let agent = s
        .client
        .post(
            "/v1/agents",
            json!({"name": "forecaster", "model": "mast-scripted",
                   "tools": [crate::support::http::weather_tool()]}),
        )
        .await
        .ok();
    let agent_id = agent["id"].as_str().unwrap();
    let env = s.client.environment().await;
    let env_name = env["name"].as_str().unwrap();

    let out = run(u, None, &["agents", "list"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("ID "), "{text}");
    let line = row(&text, agent_id);
    assert!(
        line.contains(" forecaster ") && line.contains(" v1 ") && line.contains(" mast-scripted "),
        "{line}"
    );
    let out = run(u, None, &["agents", "list", "--json"]).await;
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(listed[0]["id"], agent_id);

    // By names, with a title; and by id with the environment left out (there is only one).
    let out = run(
        u,
        None,
        &[
            "sessions",
            "create",
            "--agent",
            "forecaster",
            "--environment",
            env_name,
            "--title",
            "Oslo weather",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let sid = stdout(&out).trim().to_string();
    assert!(sid.starts_with("sesn_") && !sid.contains('\n'), "{sid}");
    assert!(
        stderr(&out).contains(&format!(
            "created session {sid} of agent `forecaster` v1 in environment `{env_name}`"
        )),
        "{}",
        stderr(&out)
    );
    let out = run(
        u,
        None,
        &["sessions", "create", "--agent", agent_id, "--json"],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let other: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(other["environment_id"], env["id"]);
    let other = other["id"].as_str().unwrap().to_string();
    let session = s.client.get(&format!("/v1/sessions/{sid}")).await.ok();
    assert_eq!(session["title"], "Oslo weather");

    let script = "call get_weather {\"city\": \"Oslo\"}\n---\nsay It is {{result}} in Oslo.";
    let out = run(u, None, &["send", &sid, script, "--wait"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("idle (requires_action: sevt_"),
        "{}",
        stdout(&out)
    );

    // The waiting session is marked; the other has not run.
    let out = run(u, None, &["sessions", "list"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("ID "), "{text}");
    let line = row(&text, &sid);
    assert!(
        line.contains(" idle ")
            && line.contains(" WAITING ON YOU (1 call) ")
            && line.contains(" forecaster ")
            && line.contains(" Oslo weather "),
        "{line}"
    );
    assert!(row(&text, &other).contains(" idle    -  "), "{text}");
    assert!(
        stderr(&out).contains("1 session waits on you"),
        "{}",
        stderr(&out)
    );
    let out = run(
        u,
        None,
        &["sessions", "list", "--agent", "forecaster", "--json"],
    )
    .await;
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    let out = run(
        u,
        None,
        &["sessions", "list", "--status", "running", "--json"],
    )
    .await;
    assert_eq!(stdout(&out).trim(), "[]");
    let out = run(u, None, &["sessions", "list", "--limit", "1", "--json"]).await;
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");

    // The wrong kind of answer is refused, saying what the call needs.
    let out = run(u, None, &["sessions", "answer", &sid, "--allow"]).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("the session waits on sevt_")
            && stderr(&out)
                .contains("get_weather {\"city\":\"Oslo\"}; a custom tool's result: --result TEXT"),
        "{}",
        stderr(&out)
    );

    // The one waiting call, its result read from stdin; then the turn runs to its end.
    let out = run_with_stdin(
        u,
        &["sessions", "answer", &sid, "--result", "-", "--wait"],
        "sunny",
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("mast: answering sevt_"),
        "{}",
        stderr(&out)
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("  agent     It is sunny in Oslo.")),
        "{text}"
    );
    assert!(
        lines
            .last()
            .unwrap()
            .ends_with("  status    idle (end_turn)"),
        "{text}"
    );
    let log = s.client.all_events(&sid).await;
    let answered = log
        .iter()
        .find(|e| e["type"] == "user.custom_tool_result")
        .unwrap();
    assert_eq!(
        answered["content"],
        json!([{"type": "text", "text": "sunny"}])
    );
    let call = log
        .iter()
        .find(|e| e["type"] == "agent.custom_tool_use")
        .unwrap();
    assert_eq!(answered["custom_tool_use_id"], call["id"]);

    let out = run(u, None, &["sessions", "answer", &sid, "--result", "again"]).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("nothing waits for an answer: the session is idle (end_turn)"),
        "{}",
        stderr(&out)
    );
    let out = run(u, None, &["sessions", "list"]).await;
    assert!(
        row(&stdout(&out), &sid).contains(" end_turn "),
        "{}",
        stdout(&out)
    );
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

/// Two calls wait for permission: answering without naming one is refused; each is denied
/// with its own message, the second with `--wait`, which follows to the turn's end.
async fn confirmations_are_denied_one_call_at_a_time(b: Backend) {
    let s = TestServer::start(b).await;
    let u = s.url.as_str();
    let agent = s
        .client
        .agent(json!([{"type": "agent_toolset_20260401",
            "default_config": {"permission_policy": {"type": "always_ask"}}}]))
        .await;
    let sid = s.client.session(&agent).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let script = "call bash {\"command\": \"echo one\"}\ncall bash {\"command\": \"echo two\"}\n---\nsay {{result}}";
    let out = run(u, None, &["send", &sid, script, "--wait"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let log = s.client.all_events(&sid).await;
    let calls: Vec<String> = log
        .iter()
        .filter(|e| e["type"] == "agent.tool_use")
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(calls.len(), 2, "{log:?}");

    let out = run(u, None, &["sessions", "answer", &sid, "--deny"]).await;
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("the session waits on 2 calls")
            && err.contains(&calls[0])
            && err.contains(&calls[1])
            && err.contains("a confirmation: --allow or --deny"),
        "{err}"
    );
    let out = run(
        u,
        None,
        &["sessions", "answer", &sid, &calls[0], "--result", "x"],
    )
    .await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!(
            "{} waits for a confirmation: --allow or --deny",
            calls[0]
        )),
        "{}",
        stderr(&out)
    );

    let out = run(
        u,
        None,
        &[
            "sessions",
            "answer",
            &sid,
            &calls[0],
            "--deny",
            "--message",
            "not now",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).trim().starts_with("sevt_"), "{}", stdout(&out));
    // The other call is the only one left: it needs no id.
    let out = run(
        u,
        None,
        &[
            "sessions",
            "answer",
            &sid,
            "--deny",
            "--message",
            "nor this",
            "--wait",
            "--json",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let seen: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = seen.last().unwrap();
    assert_eq!(last["type"], "session.status_idle", "{seen:?}");
    assert_eq!(last["stop_reason"]["type"], "end_turn", "{seen:?}");
    let log = s.client.all_events(&sid).await;
    let denials: Vec<(Value, Value, Value)> = log
        .iter()
        .filter(|e| e["type"] == "user.tool_confirmation")
        .map(|e| {
            (
                e["tool_use_id"].clone(),
                e["result"].clone(),
                e["deny_message"].clone(),
            )
        })
        .collect();
    assert_eq!(
        denials,
        vec![
            (json!(calls[0]), json!("deny"), json!("not now")),
            (json!(calls[1]), json!("deny"), json!("nor this")),
        ]
    );
    // Neither call ran: each result is the denial, with its message, for the model.
    let results: Vec<(Value, Value)> = log
        .iter()
        .filter(|e| e["type"] == "agent.tool_result")
        .map(|e| (e["tool_use_id"].clone(), e["content"][0]["text"].clone()))
        .collect();
    assert_eq!(
        results,
        vec![
            (
                json!(calls[0]),
                json!("The user denied this tool call: not now")
            ),
            (
                json!(calls[1]),
                json!("The user denied this tool call: nor this")
            ),
        ]
    );
}

/// Ids and names resolve; a name that matches nothing or several things, and a missing
/// environment, are refused with what there is to choose from.
async fn agents_and_environments_are_named_by_id_or_name(b: Backend) {
    let s = TestServer::start(b).await;
    let u = s.url.as_str();
    let twin = |c: Client| async move {
        c.post(
            "/v1/agents",
            json!({"name": "twin", "model": "mast-scripted"}),
        )
        .await
        .ok()
    };
    let first = twin(s.client.clone()).await;
    let first_id = first["id"].as_str().unwrap();
    let refused = |args: Vec<String>| async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(u, None, &args).await;
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        stderr(&out)
    };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    let err = refused(args(&["sessions", "create", "--agent", "twin"])).await;
    assert!(
        err.contains("the server has no environment to run a session in"),
        "{err}"
    );
    let dev = s
        .client
        .post("/v1/environments", json!({"name": "dev"}))
        .await
        .ok();
    s.client
        .post("/v1/environments", json!({"name": "prod"}))
        .await
        .ok();
    let err = refused(args(&["sessions", "create", "--agent", "twin"])).await;
    assert!(
        err.contains("pass --environment: the server has 2 environments (dev, prod)"),
        "{err}"
    );
    let err = refused(args(&[
        "sessions",
        "create",
        "--agent",
        "twin",
        "--environment",
        "staging",
    ]))
    .await;
    assert!(
        err.contains("no environment has the id or name `staging` (environments: dev, prod)"),
        "{err}"
    );
    let out = run(
        u,
        None,
        &[
            "sessions",
            "create",
            "--agent",
            "twin",
            "--environment",
            dev["id"].as_str().unwrap(),
        ],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));

    let second = twin(s.client.clone()).await;
    let err = refused(args(&[
        "sessions",
        "create",
        "--agent",
        "twin",
        "--environment",
        "dev",
    ]))
    .await;
    assert!(
        err.contains(&format!(
            "2 agents are named `twin` ({first_id}, {}): give the id instead",
            second["id"].as_str().unwrap()
        )),
        "{err}"
    );
    for ghost in ["nobody", "agent_ghost"] {
        let err = refused(args(&["sessions", "list", "--agent", ghost])).await;
        assert!(
            err.contains(&format!(
                "no agent has the id or name `{ghost}` (agents: twin)"
            )),
            "{err}"
        );
    }
    let out = run(
        u,
        None,
        &["sessions", "list", "--agent", first_id, "--json"],
    )
    .await;
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let out = run(u, None, &["agents", "list", "--limit", "1", "--json"]).await;
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
}
