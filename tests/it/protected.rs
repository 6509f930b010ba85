//! Under `auto`, the calls the policy approves cannot read protected paths (keys and
//! credentials) however they go about it — recursive readers, archives, links planted by
//! earlier calls, the server-side file tools — while a person's confirmation or
//! `always_allow` still reaches them.

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::{Backend, TestServer};
use crate::toolset::{call, results, session, steps, toolset, turn};

backend_tests!(auto_approved_calls_cannot_read_protected_files);

/// What every protected file holds, followed by its name: no result may show it.
const MARKER: &str = "KEYMATERIAL-";

/// Protected files (and one plain file) put in the workspace by a call that may write them.
fn plant() -> Vec<String> {
    [
        (".ssh/id_rsa", "KEYMATERIAL-ssh"),
        ("deploy/id_ed25519", "KEYMATERIAL-deploy"),
        (".netrc", "machine example.com password KEYMATERIAL-netrc"),
        (
            "p/.docker/config.json",
            "{\"auth\": \"KEYMATERIAL-docker\"}",
        ),
        ("notes.txt", "plain notes"),
        // A script the policy cannot read: running it asks.
        ("r.sh", "cat .ssh/id_rsa deploy/id_ed25519"),
    ]
    .iter()
    .map(|(path, content)| {
        call(
            "write",
            json!({"file_path": format!("/workspace/{path}"), "content": format!("{content}\n")}),
        )
    })
    .collect()
}

fn tool_uses(seen: &[Value]) -> Vec<Value> {
    seen.iter()
        .filter(|e| e["type"] == "agent.tool_use")
        .cloned()
        .collect()
}

async fn auto_approved_calls_cannot_read_protected_files(b: Backend) {
    let s = TestServer::start(b).await;
    // Everything that reads is `auto`; `write` may plant the files.
    let configs = json!(
        ["bash", "read", "edit", "grep", "glob"]
            .iter()
            .map(|name| json!({"name": name, "permission_policy": {"type": "auto"}}))
            .collect::<Vec<_>>()
    );
    let mut sess = session(&s, toolset(configs, "always_allow"), None).await;
    turn(&s, &mut sess, &steps(&plant())).await;
    assert!(results(&sess.st.seen).iter().all(|(_, err)| !err));

    // Each of these is approved by `auto` without asking, and none may show a key.
    let attacks = [
        call("bash", json!({"command": "grep -R KEYMATERIAL ."})),
        call("bash", json!({"command": "ls -laR"})),
        call("bash", json!({"command": "du -a"})),
        call("bash", json!({"command": "find . -type f"})),
        call("bash", json!({"command": "cat deploy/*"})),
        call("bash", json!({"command": "head -c 200 ./*/*"})),
        // A hidden entry's parent renamed, so its name would no longer match.
        call("bash", json!({"command": "mv p/.docker p/dock"})),
        // Links to the keys under innocent names, for the server-side tools to follow.
        call(
            "bash",
            json!({"command": "cp -rs /workspace/deploy /workspace/d2"}),
        ),
        call("bash", json!({"command": "mv d2/* /workspace/x"})),
        call("bash", json!({"command": "cat x"})),
        call("bash", json!({"command": "grep -R KEYMATERIAL ."})),
        call(
            "grep",
            json!({"pattern": "KEYMATERIAL", "path": "/workspace"}),
        ),
        call("grep", json!({"pattern": "KEYMATERIAL", "path": "x"})),
        call("read", json!({"file_path": "/workspace/x"})),
        call(
            "edit",
            json!({"file_path": "x", "old_string": "KEYMATERIAL-deploy", "new_string": "guessed"}),
        ),
    ];
    sess.st.seen.clear();
    let idle = turn(&s, &mut sess, &steps(&attacks)).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    for u in tool_uses(&sess.st.seen) {
        assert_eq!(
            u["evaluation"],
            json!({"type": "auto", "evaluated_permission": {"type": "allow"}}),
            "{u}"
        );
    }
    let r = results(&sess.st.seen);
    assert_eq!(r.len(), attacks.len(), "{r:?}");
    for ((text, _), attack) in r.iter().zip(&attacks) {
        assert!(!text.contains(MARKER), "{attack} showed a key:\n{text}");
    }
    // Names may show; contents may not. The masked entries refuse reads and moves.
    assert!(r[0].0.contains("Permission denied"), "{}", r[0].0);
    assert!(r[4].0.contains("Permission denied"), "{}", r[4].0);
    assert!(
        r[6].0.contains("busy") || r[6].0.contains("denied"),
        "{}",
        r[6].0
    );
    for i in [13, 14] {
        assert!(r[i].1 && r[i].0.contains("protected"), "{}", r[i].0);
    }
    let ws = s.data_dir.join("workspaces").join(&sess.id);
    let key = std::fs::read_to_string(ws.join("deploy/id_ed25519")).unwrap();
    assert_eq!(key, "KEYMATERIAL-deploy\n", "the edit left the key alone");

    // What `auto` cannot read from its text asks; a person's yes runs it with nothing hidden.
    for command in ["find . -type f -exec cat {} +", "tar cf - . | strings"] {
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
        s.client
            .send_events(&sess.id, json!([{"type": "user.tool_confirmation", "tool_use_id": uses[0]["id"], "result": "deny"}]))
            .await;
        sess.st.until_idle(30).await;
    }
    sess.st.seen.clear();
    s.client
        .say(
            &sess.id,
            &steps(&[call("bash", json!({"command": "sh r.sh"}))]),
        )
        .await;
    let idle = sess.st.until_idle(30).await;
    assert_eq!(idle["stop_reason"]["type"], "requires_action");
    let uses = tool_uses(&sess.st.seen);
    s.client
        .send_events(&sess.id, json!([{"type": "user.tool_confirmation", "tool_use_id": uses[0]["id"], "result": "allow"}]))
        .await;
    let idle = sess.st.until_idle(30).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn");
    let r = results(&sess.st.seen);
    assert!(
        r[0].0.contains("KEYMATERIAL-ssh") && r[0].0.contains("KEYMATERIAL-deploy"),
        "a confirmed call reads what it was allowed to: {}",
        r[0].0
    );

    // Under `always_allow` nothing is hidden.
    let mut open = session(&s, toolset(json!([]), "always_allow"), None).await;
    turn(&s, &mut open, &steps(&plant())).await;
    open.st.seen.clear();
    let read = [
        call("bash", json!({"command": "grep -R KEYMATERIAL ."})),
        call("read", json!({"file_path": "deploy/id_ed25519"})),
    ];
    turn(&s, &mut open, &steps(&read)).await;
    let r = results(&open.st.seen);
    for key in ["ssh", "deploy", "netrc", "docker"] {
        assert!(r[0].0.contains(&format!("{MARKER}{key}")), "{}", r[0].0);
    }
    assert!(r[1].0.contains("KEYMATERIAL-deploy"), "{}", r[1].0);
}
