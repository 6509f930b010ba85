//! The binary's commands: `keys create`, `migrate`, and `serve` refusing to expose an
//! unauthenticated server.

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
