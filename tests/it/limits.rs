//! What one session may take from the host: memory and processes (shared by all of its
//! commands), disk (a workspace quota), and nothing the host keeps to itself — a writable root,
//! command text in the host's process list, host paths, or kernel interfaces a sandbox has no
//! business calling (seccomp).

use serde_json::json;

use crate::backend_tests;
use crate::support::{Backend, Options, TestServer};
use crate::toolset::{call, results, session, steps, toolset, turn};

backend_tests!(
    memory_and_processes_are_limited_per_session,
    the_root_and_dev_are_read_only_and_every_tmpfs_is_sized,
    a_workspace_quota_stops_commands_and_refuses_writes,
    command_text_stays_out_of_the_host_process_list,
    no_host_path_reaches_the_sandbox,
    seccomp_denies_kernel_attack_surface_and_ordinary_work_still_runs,
);

/// A test server whose tool limits `tune` adjusts.
async fn server(b: Backend, tune: impl FnOnce(&mut mast::tools::sandbox::Limits)) -> TestServer {
    TestServer::start_tuned(b, Options::default(), |c| tune(&mut c.tools.limits)).await
}

async fn memory_and_processes_are_limited_per_session(b: Backend) {
    let s = server(b, |l| {
        l.memory_bytes = 128 << 20;
        l.max_processes = 64;
    })
    .await;
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    // Three processes of 60 MB each: each is well under the old per-process address-space
    // limit, together they are well over the session's 128 MB.
    let hog = "for i in 1 2 3; do python3 -c 'import time; x = bytearray(60 << 20); x[::4096] = b\"x\" * len(x[::4096]); time.sleep(2); print(\"held\")' & done; wait; echo done";
    let script = steps(&[
        call("bash", json!({ "command": hog })),
        call(
            "bash",
            json!({"command": "for i in $(seq 200); do sleep 10 & done; wait", "timeout_ms": 4000}),
        ),
        call("bash", json!({"command": "sleep 30", "timeout_ms": 500})),
        call("bash", json!({"command": "echo still alive"})),
    ]);
    turn(&s, &mut sess, &script).await;
    let r = results(&sess.st.seen);
    let cgroups = mast::tools::cgroup::host();
    if cgroups.memory().is_none() || cgroups.pids().is_none() {
        // An unprivileged run: per-process limits stand in, as the start-up report says.
        mast::tools::test_env::cannot_run_here(&format!(
            "no writable memory and pids cgroups here ({:?}, {:?})",
            cgroups.problem("memory"),
            cgroups.problem("pids")
        ));
        return;
    }
    assert!(
        r[0].0.contains("memory limit 128 MB")
            && r[0].0.lines().filter(|l| *l == "held").count() < 3
            && r[0].0.contains("done"),
        "the session's commands share one memory limit: {}",
        r[0].0
    );
    assert!(
        r[1].1 && r[1].0.contains("process limit 64 reached"),
        "a command stopped by the process limit says so: {}",
        r[1].0
    );
    assert!(
        r[2].1 && r[2].0.contains("timed out after 500 ms") && !r[2].0.contains("limit"),
        "{}",
        r[2].0
    );
    assert!(r[3].0.contains("still alive"), "{}", r[3].0);
}

async fn the_root_and_dev_are_read_only_and_every_tmpfs_is_sized(b: Backend) {
    let s = server(b, |_| {}).await;
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    let probe = r#"for p in /x /etc/x /dev/x /var/x /run/x /usr/x; do (echo y > $p) 2>/dev/null && echo "wrote $p"; done
mkdir /dev/d 2>/dev/null && echo "made /dev/d"
echo n > /dev/null && echo null-ok
for d in /tmp /var/tmp /dev/shm /workspace /run/mast; do echo t > $d/t && rm $d/t && echo "$d-ok"; done
head -c 40000000 /dev/zero > /dev/shm/fill; echo shm-rc=$?; rm -f /dev/shm/fill
df -k / /dev/shm /tmp | tail -n +2"#;
    turn(
        &s,
        &mut sess,
        &steps(&[call("bash", json!({ "command": probe }))]),
    )
    .await;
    let out = &results(&sess.st.seen)[0].0;
    assert!(!out.contains("wrote") && !out.contains("made"), "{out}");
    for ok in [
        "null-ok",
        "/tmp-ok",
        "/var/tmp-ok",
        "/dev/shm-ok",
        "/workspace-ok",
        "/run/mast-ok",
    ] {
        assert!(out.contains(ok), "{ok}: {out}");
    }
    assert!(
        !out.contains("shm-rc=0"),
        "/dev/shm is bounded like /tmp: {out}"
    );
    // Every tmpfs has a size well under the host's memory.
    for line in out.lines().filter(|l| l.starts_with("tmpfs")) {
        let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(kb <= 64 << 10, "an unbounded tmpfs: {line}");
    }
    assert!(
        out.lines().any(|l| l.ends_with(" /")),
        "the root is listed: {out}"
    );
}

async fn a_workspace_quota_stops_commands_and_refuses_writes(b: Backend) {
    let s = server(b, |l| {
        l.workspace_bytes = 20 << 20;
        l.workspace_files = 500;
    })
    .await;
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    let script = steps(&[
        // One file cannot outgrow the room left.
        call(
            "bash",
            json!({"command": "head -c 50000000 /dev/zero > big; echo rc=$?; stat -c %s big; rm big"}),
        ),
        // Many files outgrow it together, until the watcher stops them.
        call(
            "bash",
            json!({"command": "for i in $(seq 100); do head -c 1048576 /dev/urandom > f$i; sleep 0.05; done; echo finished"}),
        ),
        call("write", json!({"file_path": "note.txt", "content": "x"})),
        call(
            "bash",
            json!({"command": "echo more > more.txt; echo rc=$?"}),
        ),
        call(
            "bash",
            json!({"command": "rm -f f* more.txt; echo cleaned"}),
        ),
        call("write", json!({"file_path": "note.txt", "content": "x"})),
        // Empty files take no room but count.
        call(
            "bash",
            json!({"command": "mkdir many && for i in $(seq 600); do : > many/$i; done; echo made"}),
        ),
        call(
            "edit",
            json!({"file_path": "note.txt", "old_string": "x", "new_string": "y"}),
        ),
        call("bash", json!({"command": "rm -r many; echo cleaned"})),
        call(
            "edit",
            json!({"file_path": "note.txt", "old_string": "x", "new_string": "y"}),
        ),
    ]);
    turn(&s, &mut sess, &script).await;
    let r = results(&sess.st.seen);
    let big = &r[0].0;
    let size: u64 = big
        .lines()
        .find_map(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("{big}"));
    assert!(
        !big.contains("rc=0") && size <= 20 << 20,
        "a file stops at the room left: {big}"
    );
    assert!(
        r[1].1 && r[1].0.contains("workspace quota 20 MB exceeded") && !r[1].0.contains("finished"),
        "{}",
        r[1].0
    );
    let used = crate::support::dir_bytes(&s.data_dir.join("workspaces").join(&sess.id));
    assert!(
        used < 40 << 20,
        "the command was stopped in time: {used} bytes"
    );
    assert!(
        r[2].1 && r[2].0.contains("quota") && r[2].0.contains("20 MB"),
        "{:?}",
        r[2]
    );
    assert!(
        !r[3].0.contains("rc=0") && r[3].0.contains("quota"),
        "nothing grows while over quota: {}",
        r[3].0
    );
    assert!(
        !r[4].1 && r[4].0.contains("cleaned") && !r[4].0.contains("error"),
        "{}",
        r[4].0
    );
    assert!(!r[5].1, "writes work again after cleaning up: {:?}", r[5]);
    assert!(
        r[6].1 && r[6].0.contains("500 files"),
        "the file count is capped too: {}",
        r[6].0
    );
    assert!(r[7].1 && r[7].0.contains("500 files"), "{:?}", r[7]);
    assert!(
        !r[9].1,
        "an edit after cleaning up works: {:?}; the clean-up said {:?}",
        r[9], r[8]
    );
}

async fn command_text_stays_out_of_the_host_process_list(b: Backend) {
    let s = server(b, |_| {}).await;
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    let token = format!("tok{}", mast::domain::ids::new_secret(16));
    let script = steps(&[call(
        "bash",
        json!({"command": format!("sleep 4; echo {token} | wc -c")}),
    )]);
    s.client.say(&sess.id, &script).await;
    // While the command sleeps, no host process shows the token, in its arguments or its
    // environment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(4);
    let mut scans = 0;
    let mut saw_sleep = false;
    while std::time::Instant::now() < deadline {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            for file in ["cmdline", "environ"] {
                let Ok(bytes) = std::fs::read(entry.path().join(file)) else {
                    continue;
                };
                let text = String::from_utf8_lossy(&bytes);
                assert!(
                    !text.contains(&token),
                    "/proc/{}/{file} shows the command: {}",
                    entry.file_name().to_string_lossy(),
                    text.replace('\0', " ")
                );
                saw_sleep |= file == "cmdline" && text == "sleep\x004\0";
            }
        }
        scans += 1;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    sess.st.until_idle(60).await;
    assert!(scans > 5 && saw_sleep, "the scan ran while the command did");
    assert!(results(&sess.st.seen)[0].0.contains("20"));
}

async fn no_host_path_reaches_the_sandbox(b: Backend) {
    let s = server(b, |_| {}).await;
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    // The sandbox's first process (bubblewrap's init), the shell as it was started, and the
    // shell now.
    let probe = "tr '\\0' '\\n' < /proc/1/environ; echo ---; tr '\\0' '\\n' < /proc/$$/environ; echo ---; readlink /proc/1/cwd /proc/$$/cwd; env; pwd";
    turn(
        &s,
        &mut sess,
        &steps(&[call("bash", json!({ "command": probe }))]),
    )
    .await;
    let out = &results(&sess.st.seen)[0].0;
    let data_dir = s.data_dir.display().to_string();
    let real = s.data_dir.canonicalize().unwrap().display().to_string();
    assert!(
        !out.contains(&data_dir) && !out.contains(&real) && !out.contains("workspaces/"),
        "a host path leaked: {out}"
    );
    assert!(out.contains("PWD=/workspace"), "{out}");
    assert!(
        !out.contains("MAST_CMD"),
        "the command is not in the environment: {out}"
    );
}

async fn seccomp_denies_kernel_attack_surface_and_ordinary_work_still_runs(b: Backend) {
    let s = server(b, |_| {}).await;
    let mut sess = session(&s, toolset(json!([]), "always_allow"), None).await;
    let syscalls = r#"python3 - <<'EOF'
import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": {"ptrace": 101, "keyctl": 250, "bpf": 321, "perf_event_open": 298, "mount": 165, "setns": 308},
      "aarch64": {"ptrace": 117, "keyctl": 219, "bpf": 280, "perf_event_open": 241, "mount": 40, "setns": 268}}[platform.machine()]
def call(name, *args):
    r = libc.syscall(ctypes.c_long(nr[name]), *[ctypes.c_long(a) for a in args])
    print(name, "ok" if r >= 0 else os.strerror(ctypes.get_errno()))
call("ptrace", 0, 0, 0, 0)
call("keyctl", 0, -3, 0)
call("bpf", 0, 0, 0)
call("perf_event_open", 0, 0, -1, -1, 0)
call("mount", 0, 0, 0, 0, 0)
call("setns", 0, 0)
EOF
grep Seccomp: /proc/self/status
unshare -r true 2>&1; unshare -m true 2>&1; unshare -n true 2>&1"#;
    let work = r#"set -e
git init -q repo && cd repo && git config user.email a@example.com && git config user.name a
echo hi > f && git add f && git commit -qm init && git log --oneline | wc -l && cd ..
python3 -c 'import threading, multiprocessing as m; t = threading.Thread(target=print, args=("thread-ok",)); t.start(); t.join(); p = m.Pool(2); print(sum(p.map(abs, [-1, -2])), "pool-ok")'
printf 'int main(void) { return 0; }\n' > a.c && gcc a.c -o a && ./a && echo gcc-ok
tar czf r.tgz repo && tar tzf r.tgz | grep -q repo/f && echo tar-ok
if command -v node >/dev/null; then node -e 'require("child_process").execSync("true"); console.log("node-ok")'; else echo node-ok; fi
if command -v java >/dev/null; then java -version 2>&1 | grep -qi version && echo java-ok; else echo java-ok; fi"#;
    let script = steps(&[
        call("bash", json!({ "command": syscalls })),
        call("bash", json!({ "command": work, "timeout_ms": 120000 })),
    ]);
    turn(&s, &mut sess, &script).await;
    let r = results(&sess.st.seen);
    let out = &r[0].0;
    for name in [
        "ptrace",
        "keyctl",
        "bpf",
        "perf_event_open",
        "mount",
        "setns",
    ] {
        assert!(
            out.contains(&format!("{name} Operation not permitted")),
            "{name}: {out}"
        );
    }
    assert!(out.contains("Seccomp:\t2"), "{out}");
    assert_eq!(
        out.matches("Operation not permitted").count(),
        9,
        "no new namespaces either: {out}"
    );
    let work = &r[1].0;
    for ok in [
        "thread-ok",
        "3 pool-ok",
        "gcc-ok",
        "tar-ok",
        "node-ok",
        "java-ok",
        "[exit code 0]",
    ] {
        assert!(work.contains(ok), "{ok}: {work}");
    }
}
