//! The sandbox's own boundaries: a host user of its own per session (when the server runs as
//! root), no host network even for unrestricted environments, no nested user namespaces, only
//! the harmless part of `/etc`, bounded tmpfs, and no cgroups left behind.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use serde_json::json;

use crate::backend_tests;
use crate::support::{Backend, TestServer};
use crate::toolset::{call, results, session, steps, toolset, turn};

backend_tests!(
    sandboxes_are_their_own_users_without_host_network,
    the_sandbox_shows_nothing_of_the_host,
);

async fn sandboxes_are_their_own_users_without_host_network(b: Backend) {
    let s = TestServer::start(b).await;
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    let port = s.url.rsplit(':').next().unwrap().to_string();
    let script = steps(&[
        call(
            "bash",
            json!({"command": "id -u; cp /bin/bash rootsh && chmod 4755 rootsh && echo copied"}),
        ),
        call(
            "bash",
            json!({"command": "unshare -Ur id 2>&1; echo rc=$?"}),
        ),
        call(
            "bash",
            json!({"command": format!("(echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo reached || echo unreachable")}),
        ),
        call("bash", json!({"command": "cat /etc/passwd; ls /etc"})),
        call(
            "bash",
            json!({"command": "head -c 40000000 /dev/zero > /tmp/fill; echo rc=$?"}),
        ),
    ]);
    turn(&s, &mut sess, &script).await;
    let r = results(&sess.st.seen);
    assert!(r[0].0.starts_with("1000\ncopied"), "{}", r[0].0);
    let root = mast::tools::identity::running_as_root();
    let ws = s.data_dir.join("workspaces").join(&sess.id);
    if root {
        // The copy is setuid to the session's own user, which owns nothing else on the host.
        let meta = std::fs::metadata(ws.join("rootsh")).unwrap();
        assert_eq!(meta.uid(), mast::tools::identity::session_uid(&sess.id));
        assert_ne!(meta.uid(), 0);
        let mode = std::fs::metadata(&ws).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "only the session's user enters its workspace");
    }
    assert!(
        r[1].0.contains("rc=1") && !r[1].0.contains("uid=0"),
        "no nested user namespaces: {}",
        r[1].0
    );
    assert!(
        r[2].0.starts_with("unreachable"),
        "an unrestricted sandbox has no direct host network: {}",
        r[2].0
    );
    let etc = &r[3].0;
    assert!(etc.contains("sandbox:x:1000"), "{etc}");
    assert!(
        !etc.contains("postgres"),
        "host accounts and configs stay out: {etc}"
    );
    assert!(!etc.contains("shadow"), "{etc}");
    assert!(
        r[4].0.contains("No space left") && !r[4].0.contains("rc=0"),
        "tmpfs is bounded: {}",
        r[4].0
    );
    // Every command's cgroup, and the session's, was removed.
    let left = cgroups_named(std::path::Path::new("/sys/fs/cgroup"), &sess.id, 0);
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
}

/// What a command can see of the processes around it — the sandbox's pid 1 (bubblewrap), its
/// own — names no host path: not the data directory, not the server's binary.
async fn the_sandbox_shows_nothing_of_the_host(b: Backend) {
    let s = TestServer::start(b).await;
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    let look = "for f in /proc/1/cmdline /proc/1/environ /proc/self/cmdline /proc/$$/cmdline; do \
                echo \"== $f\"; tr '\\0' ' ' < $f; echo; done; \
                echo '== cwd'; readlink /proc/1/cwd; echo '== fds'; ls -l /proc/self/fd/ /proc/1/fd/ 2>&1";
    turn(
        &s,
        &mut sess,
        &steps(&[call("bash", json!({ "command": look }))]),
    )
    .await;
    let r = results(&sess.st.seen);
    let seen = &r[0].0;
    assert!(seen.contains("== /proc/1/cmdline\nbwrap"), "{seen}");
    let data_dir = s.data_dir.to_string_lossy();
    let binary = env!("CARGO_BIN_EXE_mast");
    assert!(
        !seen.contains(data_dir.as_ref()),
        "the data directory shows:\n{seen}"
    );
    assert!(!seen.contains(binary), "the server's binary shows:\n{seen}");
}

/// Cgroup directories below `dir` whose name starts with `name`.
fn cgroups_named(dir: &std::path::Path, name: &str, depth: usize) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    if depth > 8 {
        return found;
    }
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if entry.file_name().to_string_lossy().starts_with(name) {
            found.push(entry.path());
        }
        found.extend(cgroups_named(&entry.path(), name, depth + 1));
    }
    found
}
