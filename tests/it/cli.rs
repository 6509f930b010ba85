//! The binary's commands: `keys create|list|revoke`, `migrate`, `completions`, and `serve`
//! refusing to expose an unauthenticated server.

use std::process::Command;

use serde_json::json;

use crate::support::{Backend, Client, Options, test_config};

fn mast(args: &[&str], data_dir: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mast"))
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("DATABASE_URL")
        .env("MAST_LOG", "error")
        .output()
        .expect("mast runs")
}

#[test]
fn keys_create_prints_a_key_once_and_migrate_runs() {
    let dir = tempfile::TempDir::new().unwrap();
    let out = mast(&["migrate"], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = mast(&["keys", "create", "--workspace", "team-a"], dir.path());
    assert!(out.status.success());
    let key = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(key.starts_with("mast_sk_") && key.len() > 40, "{key}");
    // Where it went is said on stderr; the store existed (migrate made it), so no warning.
    let err = String::from_utf8_lossy(&out.stderr);
    let db = std::path::absolute(dir.path()).unwrap().join("mast.db");
    assert!(
        err.contains("for workspace `team-a`")
            && err.contains(&format!("the SQLite store {}", db.display())),
        "{err}"
    );
    assert!(!err.contains("warning"), "{err}");
    let second = String::from_utf8(mast(&["keys", "create"], dir.path()).stdout).unwrap();
    assert_ne!(second.trim(), key);
    for file in ["mast.db", "mast.db-wal"] {
        let bytes = std::fs::read(dir.path().join(file)).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(&key),
            "the key is stored hashed only"
        );
    }
}

#[tokio::test]
async fn keys_made_by_the_cli_authenticate_and_open_mode_ends() {
    let dir = tempfile::TempDir::new().unwrap();
    let key = String::from_utf8(mast(&["keys", "create"], dir.path()).stdout)
        .unwrap()
        .trim()
        .to_string();
    let s = crate::support::TestServer::boot(
        test_config(dir.path().to_path_buf(), None, &Options::default()),
        Backend::Sqlite,
    )
    .await;
    let anon = Client::new(&s.url);
    anon.get("/v1/agents").await.err(401);
    let c = anon.with_key(&key);
    c.post("/v1/agents", json!({"name": "a", "model": "mast-scripted"}))
        .await
        .ok();
    assert_eq!(
        c.get("/v1/agents").await.ok()["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn keys_create_makes_worker_keys_for_self_hosted_environments() {
    let dir = tempfile::TempDir::new().unwrap();
    let key = String::from_utf8(mast(&["keys", "create"], dir.path()).stdout)
        .unwrap()
        .trim()
        .to_string();
    let mut s = crate::support::TestServer::boot(
        test_config(dir.path().to_path_buf(), None, &Options::default()),
        Backend::Sqlite,
    )
    .await;
    let c = Client::new(&s.url).with_key(&key);
    let env = c
        .post(
            "/v1/environments",
            json!({"name": "workers", "config": {"type": "self_hosted"}}),
        )
        .await
        .ok();
    let cloud = c.environment().await;
    let env_id = env["id"].as_str().unwrap();
    s.stop().await;
    let out = mast(&["keys", "create", "--environment", env_id], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let worker_key = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(worker_key.starts_with("mast_ek_"), "{worker_key}");
    let out = mast(
        &[
            "keys",
            "create",
            "--environment",
            cloud["id"].as_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not self_hosted"));
    let out = mast(&["keys", "create", "--environment", "env_nope"], dir.path());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));

    let s = crate::support::TestServer::boot(
        test_config(dir.path().to_path_buf(), None, &Options::default()),
        Backend::Sqlite,
    )
    .await;
    let worker = Client::new(&s.url).with_key(&worker_key);
    assert_eq!(
        worker
            .get(&format!("/v1/environments/{env_id}/work/poll"))
            .await
            .ok(),
        serde_json::Value::Null
    );
}

#[tokio::test]
async fn refuses_unauthenticated_non_loopback_unless_allowed() {
    let dir = tempfile::TempDir::new().unwrap();
    let config = test_config(dir.path().to_path_buf(), None, &Options::default());
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let err = mast::start(config.clone(), listener)
        .await
        .err()
        .expect("refused without keys");
    assert!(err.to_string().contains("without API keys"), "{err}");
    let mut allowed = config;
    allowed.allow_unauthenticated = true;
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let running = mast::start(allowed, listener)
        .await
        .expect("explicitly allowed");
    running.stop().await;
}

#[tokio::test]
async fn one_server_per_sqlite_data_directory() {
    let dir = tempfile::TempDir::new().unwrap();
    let s = crate::support::TestServer::boot(
        test_config(dir.path().to_path_buf(), None, &Options::default()),
        Backend::Sqlite,
    )
    .await;
    let out = mast(&["serve", "--listen", "127.0.0.1:0"], dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a second server started: {err}");
    assert!(
        err.contains(&format!(
            "(pid {}) is already serving from",
            std::process::id()
        )),
        "{err}"
    );
    drop(s);
}

#[test]
fn openapi_survives_a_closed_pipe() {
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_mast"))
        .arg("openapi")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 64];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The read end is closed here, as `| head -c 64` would.
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn keys_create_warns_when_it_makes_a_new_store() {
    let dir = tempfile::TempDir::new().unwrap();
    let fresh = dir.path().join("typo-dir");
    let out = mast(&["keys", "create"], &fresh);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: there was no store at") && err.contains("--data-dir"),
        "{err}"
    );
    // stdout is the key alone, so `KEY=$(mast keys create)` keeps working.
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.starts_with("mast_sk_"));
}

#[tokio::test]
async fn keys_list_and_revoke_by_id_or_by_the_key_itself() {
    let dir = tempfile::TempDir::new().unwrap();
    let p = dir.path();
    // Listing or revoking in a store that does not exist is a mistake, not a new store.
    let out = mast(&["keys", "list"], p);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("there is no store at"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!p.join("mast.db").exists());

    let key_a = String::from_utf8(mast(&["keys", "create"], p).stdout).unwrap();
    let key_b =
        String::from_utf8(mast(&["keys", "create", "--workspace", "team-b"], p).stdout).unwrap();
    let s = crate::support::TestServer::boot(
        test_config(p.to_path_buf(), None, &Options::default()),
        Backend::Sqlite,
    )
    .await;
    let env = Client::new(&s.url)
        .with_key(key_a.trim())
        .post(
            "/v1/environments",
            json!({"name": "workers", "config": {"type": "self_hosted"}}),
        )
        .await
        .ok();
    let env_id = env["id"].as_str().unwrap();
    let worker =
        String::from_utf8(mast(&["keys", "create", "--environment", env_id], p).stdout).unwrap();

    let out = mast(&["keys", "list"], p);
    let table = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("WORKSPACE"),
        "{table}"
    );
    assert!(
        lines[1].starts_with("apikey_")
            && lines[1].contains("default")
            && lines[1].ends_with("active"),
        "{table}"
    );
    assert!(lines[2].contains("team-b"), "{table}");
    assert!(
        lines[3].starts_with("envkey_") && lines[3].contains(&format!("worker key of {env_id}")),
        "{table}"
    );
    for k in [&key_a, &key_b, &worker] {
        assert!(!table.contains(k.trim()), "keys are never listed");
    }
    let listed: serde_json::Value =
        serde_json::from_slice(&mast(&["keys", "list", "--json"], p).stdout).unwrap();
    let id_b = listed[1]["id"].as_str().unwrap().to_string();
    assert_eq!(listed[1]["workspace"], "team-b");
    assert_eq!(listed[2]["kind"], "environment_key");
    assert_eq!(listed[2]["environment_id"], env_id);

    // Unknown ids fail and change nothing.
    let out = mast(&["keys", "revoke", "apikey_nope"], p);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no key has the id `apikey_nope`") && err.contains("mast keys list"),
        "{err}"
    );
    let out = mast(&["keys", "revoke", "mast_sk_not_a_real_key"], p);
    assert!(!out.status.success());

    // By the key itself (a leaked key is what one has in hand), then by id twice.
    let out = mast(&["keys", "revoke", key_a.trim()], p);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("revoked API key apikey_") && err.contains("workspace `default`"),
        "{err}"
    );
    Client::new(&s.url)
        .with_key(key_a.trim())
        .get("/v1/agents")
        .await
        .err(401);
    let out = mast(&["keys", "revoke", &id_b], p);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("warning: no active API key remains"), "{err}");
    let out = mast(&["keys", "revoke", &id_b], p);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already revoked"));
    // No key works, and the server has not gone back to open mode.
    Client::new(&s.url)
        .with_key(key_b.trim())
        .get("/v1/agents")
        .await
        .err(401);
    Client::new(&s.url).get("/v1/agents").await.err(401);

    // A worker key is revoked (deleted) the same way; its worker is refused at once.
    let poll = format!("/v1/environments/{env_id}/work/poll");
    let w = Client::new(&s.url).with_key(worker.trim());
    w.get(&poll).await.ok();
    let worker_id = listed[2]["id"].as_str().unwrap();
    let out = mast(&["keys", "revoke", worker_id], p);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!(
        "revoked worker key {worker_id} of environment {env_id}"
    )));
    w.get(&poll).await.err(401);
    let listed: serde_json::Value =
        serde_json::from_slice(&mast(&["keys", "list", "--json"], p).stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2);
    assert!(listed[0]["revoked_at"].is_string() && listed[1]["revoked_at"].is_string());
    let table = String::from_utf8(mast(&["keys", "list"], p).stdout).unwrap();
    assert!(
        table.lines().nth(1).unwrap().contains("revoked 20"),
        "{table}"
    );
}

#[test]
fn completions_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef mast"),
        ("fish", "complete -c mast"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_mast"))
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success());
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("revoke"), "{shell} completes subcommands");
    }
    // A reader that stops early (`| head`) ends it quietly, without a panic.
    let mut child = Command::new(env!("CARGO_BIN_EXE_mast"))
        .args(["completions", "bash"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("panicked"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_mast"))
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}
