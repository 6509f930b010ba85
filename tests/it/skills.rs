//! Anthropic skills installed by the operator (`mast skills install-anthropic`): agents may
//! name them by their short id once installed, and are refused them before.

use std::process::Command;

use serde_json::json;

use crate::support::{Backend, Client, Options, TestServer, test_config};

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

#[tokio::test]
async fn operators_install_anthropic_skills_that_agents_then_name() {
    let dir = tempfile::TempDir::new().unwrap();
    let bundle = tempfile::TempDir::new().unwrap();
    let xlsx = bundle.path().join("xlsx");
    std::fs::create_dir_all(xlsx.join("scripts")).unwrap();
    std::fs::write(
        xlsx.join("SKILL.md"),
        "---\nname: xlsx\ndescription: Spreadsheets.\n---\n# xlsx\n",
    )
    .unwrap();
    std::fs::write(xlsx.join("scripts/recalc.py"), "#!/usr/bin/env python3\n").unwrap();
    assert!(mast(&["migrate"], dir.path()).status.success());
    let out = mast(
        &["skills", "install-anthropic", xlsx.to_str().unwrap()],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    let (id, version) = printed.trim().split_once(' ').unwrap();
    assert_eq!(id, "xlsx");
    // A custom skill's id is not an Anthropic one.
    let out = mast(
        &[
            "skills",
            "install-anthropic",
            xlsx.to_str().unwrap(),
            "--id",
            "skill_x",
        ],
        dir.path(),
    );
    assert!(!out.status.success());

    let s = TestServer::boot(
        test_config(dir.path().to_path_buf(), None, &Options::default()),
        Backend::Sqlite,
    )
    .await;
    let c = Client::new(&s.url);
    let listed = c.get("/v1/skills?source=anthropic").await.ok();
    assert_eq!(listed["data"][0]["id"], "xlsx");
    assert_eq!(listed["data"][0]["source"], json!({"type": "anthropic"}));
    assert_eq!(listed["data"][0]["latest_version_id"], version);
    let tools = json!([{"type": "agent_toolset_20260401"}]);
    let agent = c
        .post(
            "/v1/agents",
            json!({"name": "a", "model": "mast-scripted", "tools": tools,
                "skills": [{"type": "anthropic", "skill_id": "xlsx"}]}),
        )
        .await
        .ok();
    assert_eq!(
        agent["skills"],
        json!([{"type": "anthropic", "skill_id": "xlsx", "version": "latest"}])
    );
    let session = c.session(&agent).await;
    assert_eq!(session["agent"]["skills"][0]["version"], version);
    // Not installed: refused, saying how to install it; nor may a custom reference name it.
    let r = c
        .post(
            "/v1/agents",
            json!({"name": "a", "model": "mast-scripted", "tools": tools,
                "skills": [{"type": "anthropic", "skill_id": "pdf"}]}),
        )
        .await;
    assert_eq!(r.body["error"]["details"]["field"], "skills[0].type");
    assert!(r.err(400).contains("mast skills install-anthropic"));
    let r = c
        .post(
            "/v1/agents",
            json!({"name": "a", "model": "mast-scripted", "tools": tools,
                "skills": [{"type": "custom", "skill_id": "xlsx"}]}),
        )
        .await;
    assert!(r.err(400).contains("skill `xlsx` not found"));
}
