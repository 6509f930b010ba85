//! The host's own addresses are out of tools' reach even when they are public. A network
//! namespace of the test's own stands for a host with a public address: the real binary runs
//! in it, listening on `0.0.0.0` (so `/metrics` answers on that public address too), and a
//! session's `web_fetch` and sandboxed `curl` try to reach it there.

use std::process::{Command, Stdio};

use serde_json::json;

use crate::crash::{Reaped, free_port, wait_up};
use crate::support::Client;
use crate::support::sse::Stream;
use crate::toolset::{Session, call, results, steps, toolset};

/// A public address, bound inside the namespace only (nothing outside it is touched).
const PUBLIC: &str = "93.184.215.14";

/// A network namespace joined to the host by a veth pair; removed (with its links) on drop.
struct Namespace {
    name: String,
    /// The namespace's end of the veth pair, reachable from the host.
    inner: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip runs");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Namespace {
    fn create() -> Self {
        let tag = std::process::id() % 10_000;
        let subnet = 1 + std::process::id() % 250;
        let name = format!("mast-t{tag}");
        let (host_end, ns_end) = (format!("mvh{tag}"), format!("mvn{tag}"));
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        ip(&["netns", "add", &name]);
        let ns = Namespace {
            name: name.clone(),
            inner: format!("10.231.{subnet}.2"),
        };
        let in_ns = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &name, "ip"];
            all.extend_from_slice(args);
            ip(&all);
        };
        ip(&[
            "link", "add", &host_end, "type", "veth", "peer", "name", &ns_end,
        ]);
        ip(&["link", "set", &ns_end, "netns", &name]);
        ip(&[
            "addr",
            "add",
            &format!("10.231.{subnet}.1/30"),
            "dev",
            &host_end,
        ]);
        ip(&["link", "set", &host_end, "up"]);
        in_ns(&["addr", "add", &format!("{}/30", ns.inner), "dev", &ns_end]);
        in_ns(&["link", "set", &ns_end, "up"]);
        in_ns(&["link", "set", "lo", "up"]);
        // On the namespace's loopback interface: not every kernel has dummy interfaces.
        in_ns(&["addr", "add", &format!("{PUBLIC}/32"), "dev", "lo"]);
        ns
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // Deleting the namespace deletes its veth end, and with it the host's.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

fn can_make_namespaces() -> bool {
    mast::tools::identity::running_as_root()
        && Command::new("ip")
            .arg("-V")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

#[tokio::test]
async fn the_hosts_own_public_address_is_out_of_reach() {
    if !can_make_namespaces() {
        mast::tools::test_env::cannot_run_here(
            "needs root and iproute2 to make a network namespace",
        );
        return;
    }
    let ns = Namespace::create();
    let dir = tempfile::TempDir::new().unwrap();
    let port = free_port();
    let key = format!("sk-mast-{}", mast::domain::ids::new_secret(24));
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns.name, env!("CARGO_BIN_EXE_mast")])
        .args([
            "serve",
            "--listen",
            &format!("0.0.0.0:{port}"),
            "--data-dir",
        ])
        .arg(dir.path())
        .env("MAST_BOOTSTRAP_API_KEY", &key)
        .env("MAST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .env_remove("MAST_ALLOW_PRIVATE_NETWORK")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _server = Reaped(cmd.spawn().expect("mast starts in the namespace"));
    let base = format!("http://{}:{port}", ns.inner);
    let c = Client::new(&base).with_key(&key);
    wait_up(&c).await;

    // What the attack is after: the metrics page answers on the public address.
    let metrics = format!("http://{PUBLIC}:{port}/metrics");
    let agent = c
        .post(
            "/v1/agents",
            json!({"name": "w", "model": "mast-scripted", "tools": toolset(json!([]), "always_allow")}),
        )
        .await
        .ok();
    let env = c
        .post(
            "/v1/environments",
            json!({"name": "open", "config": {"type": "cloud", "networking": {"type": "unrestricted"}}}),
        )
        .await
        .ok();
    let id = c
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
        &base,
        &format!("/v1/sessions/{id}/events/stream"),
        Some(&key),
        &[],
    )
    .await;
    let mut sess = Session { id, st };
    let script = steps(&[
        call("web_fetch", json!({"url": metrics})),
        call(
            "web_fetch",
            json!({"url": format!("http://[::ffff:{PUBLIC}]:{port}/metrics")}),
        ),
        call(
            "bash",
            json!({"command": format!("curl -sS --max-time 5 {metrics} 2>&1 | head -c 300; echo; curl -sS --max-time 5 -o /dev/null -w '%{{http_code}}' {metrics}")}),
        ),
    ]);
    c.say(&sess.id, &script).await;
    sess.st.until_idle(60).await;
    let r = results(&sess.st.seen);
    assert_eq!(r.len(), 3, "{r:?}");
    for (text, is_error) in &r[..2] {
        assert!(
            *is_error && text.contains("own host") && !text.contains("mast_"),
            "web_fetch refuses the host's own address: {text}"
        );
    }
    assert!(
        !r[2].0.contains("mast_") && r[2].0.contains("403"),
        "the egress proxy refuses the host's own address: {}",
        r[2].0
    );
}
