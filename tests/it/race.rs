//! A sandbox racing the server's own file work: two threads of one session run in parallel,
//! one swapping a workspace directory for a link to the host in a loop while the other writes
//! into that directory. Whatever the server creates must be handed to the sandbox's user
//! inside the workspace, never on the host. Meaningful when the server runs as root (the only
//! time it hands files to other users).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::{Backend, TestServer};
use crate::toolset::toolset;

backend_tests!(a_racing_sandbox_cannot_make_the_server_give_host_files_away);

/// Files the writer creates, one per write call; the host directory holds the same names.
/// Before writes were handed over through the walk's handles, the race was won within a few
/// hundred calls at most (usually tens).
const WRITES: usize = 400;

/// Swaps `d` and `link` (a link to the host directory) with one atomic exchange at a time,
/// until the writer leaves `stop` or 30 seconds pass.
const RACER: &str = r#"
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("d", exist_ok=True)
os.symlink(HOST, "link")
end, swaps = time.time() + 30, 0
while not os.path.exists("stop") and time.time() < end:
    for _ in range(1000):
        swaps += libc.renameat2(-100, b"d", -100, b"link", 2) == 0
print("swaps", swaps)
"#;

/// Creates an agent with `extra` fields; returns its id.
async fn agent(s: &TestServer, name: &str, extra: Value) -> String {
    let mut body = json!({"name": name, "model": "mast-scripted"});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    s.client.post("/v1/agents", body).await.ok()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Host entries under `dir` (itself included) that left root, or were added.
fn tampered(dir: &Path, expected: usize) -> Vec<String> {
    let mut bad = Vec::new();
    let mut entries = vec![dir.to_path_buf()];
    entries.extend(std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()));
    for p in &entries {
        let uid = std::fs::symlink_metadata(p).unwrap().uid();
        if uid != 0 {
            bad.push(format!("{} is now owned by {uid}", p.display()));
        }
    }
    if entries.len() != expected {
        bad.push(format!("{expected} host entries became {}", entries.len()));
    }
    bad
}

async fn a_racing_sandbox_cannot_make_the_server_give_host_files_away(b: Backend) {
    if !mast::tools::identity::running_as_root() {
        mast::tools::test_env::cannot_run_here(
            "the server hands files to sandbox users only when it runs as root",
        );
        return;
    }
    let s = TestServer::start(b).await;
    let host = tempfile::tempdir().unwrap();
    for i in 0..WRITES {
        std::fs::write(host.path().join(format!("t{i}")), "host").unwrap();
    }
    let tools = json!({"tools": toolset(json!([]), "always_allow")});
    let racer = agent(&s, "racer", tools.clone()).await;
    let writer = agent(&s, "writer", tools).await;
    let roster = json!({"multiagent": {"type": "coordinator", "agents": [racer, writer]}});
    let coordinator = agent(&s, "coordinator", roster).await;
    let env = s.client.environment().await;
    let session = json!({"agent": coordinator, "environment_id": env["id"]});
    let sid = s.client.post("/v1/sessions", session).await.ok()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let race = RACER.replace("HOST", &format!("{:?}", host.path().display().to_string()));
    let racing = format!(
        "call bash {}\n---\nsay {{{{result}}}}",
        json!({"command": format!("python3 -c '{race}'")})
    );
    // The writer starts once the racer does (the sandbox takes a moment to start).
    let wait = "for i in $(seq 200); do [ -L link ] || [ -L d ] && break; sleep 0.05; done";
    let mut writes = vec![format!("call bash {}", json!({"command": wait}))];
    writes.extend((0..WRITES).map(|i| {
        format!(
            "call write {}",
            json!({"file_path": format!("d/t{i}"), "content": "x"})
        )
    }));
    writes.push(format!(
        "call write {}",
        json!({"file_path": "stop", "content": ""})
    ));
    let writing = writes.join("\n") + "\n---\nsay wrote";
    let send = |agent: &str, message: &str| {
        format!(
            "call send_to_agent {}",
            json!({"agent": agent, "message": message})
        )
    };
    let script = format!(
        "{}\n{}\n---\nsay {{{{result}}}}",
        send("racer", &racing),
        send("writer", &writing)
    );
    let mut st = crate::support::sse::Stream::open(
        &s.url,
        &format!("/v1/sessions/{sid}/events/stream"),
        None,
        &[],
    )
    .await;
    s.client.say(&sid, &script).await;
    st.until_idle(120).await;
    let events = s.client.all_events(&sid).await;
    let replies: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "agent.thread_message_received")
        .filter_map(|e| e["content"][0]["text"].as_str())
        .collect();
    eprintln!("delegates replied: {replies:?}");
    let bad = tampered(host.path(), 1 + WRITES);
    assert!(
        bad.is_empty(),
        "{} host entries given away: {bad:?}",
        bad.len()
    );
    // The race did run: the racer swapped, and some writes got through.
    assert!(replies.iter().any(|r| r.contains("swaps")), "{replies:?}");
    let ws = s.data_dir.join("workspaces").join(&sid);
    let real = ["d", "link"]
        .iter()
        .map(|n| ws.join(n))
        .find(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .expect("the real directory");
    let written = std::fs::read_dir(&real).unwrap().count();
    assert!(written > 0, "no write got through");
    eprintln!("{written} of {WRITES} writes got through");
}
