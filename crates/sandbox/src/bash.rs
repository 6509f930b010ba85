//! The `bash` tool: each call runs in a fresh sandboxed bash that restores the session's
//! shell state (working directory and exported variables) and saves it afterwards, so the
//! shell persists between calls while no process outlives a call.

use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::cgroup::Events;
use super::masks::{self, Masks};
use super::quota;
use super::sandbox::{Isolation, Limits, SandboxCommand};
use super::{Approval, SessionTools, ToolOutput};

/// Default and largest `timeout_ms`.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Largest `timeout_ms`.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Bytes of stdout and of stderr returned; the rest is cut with a note.
pub const MAX_OUTPUT_BYTES: usize = 30_000;

#[derive(Debug, Deserialize)]
struct Input {
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    restart: Option<bool>,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// Reads the command from stdin (never an argument or a variable of the environment, which
/// other users of the host can see), restores state, runs the command with `eval` (so `cd`
/// and `export` persist), and saves state on every exit path, keeping the command's exit
/// status. Commands get no stdin of their own. State is replaced only once written in full:
/// a write can fail (the workspace quota leaves no room), and a half-written state would lose
/// the working directory.
const READ_COMMAND: &str = r#"__cmd="$(cat)"; exec </dev/null"#;
const SCRIPT: &str = r#"__s="$MAST_STATE/shell"; mkdir -p "$__s"
[ -f "$__s/env" ] && . "$__s/env" 2>/dev/null
[ -f "$__s/cwd" ] && cd "$(cat "$__s/cwd")" 2>/dev/null
trap '__rc=$?; { pwd > "$__s/cwd.new" && mv -f "$__s/cwd.new" "$__s/cwd"; export -p | grep -v -e " MAST_STATE=" -e " OLDPWD" -e " PWD=" -e " SHLVL=" > "$__s/env.new" && mv -f "$__s/env.new" "$__s/env"; } 2>/dev/null; exit $__rc' EXIT
eval "$__cmd""#;

async fn read_capped(mut r: impl AsyncRead + Unpin) -> (Vec<u8>, usize) {
    let mut kept = Vec::new();
    let mut total = 0;
    let mut buf = [0u8; 8192];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        total += n;
        let room = MAX_OUTPUT_BYTES.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    (kept, total)
}

fn section(bytes: &[u8], total: usize, label: &str) -> String {
    let mut s = String::from_utf8_lossy(bytes).into_owned();
    if total > bytes.len() {
        s.push_str(&format!(
            "\n[{label} truncated: showing the first {} of {total} bytes]",
            bytes.len()
        ));
    }
    s
}

/// Runs one `bash` call.
pub async fn run(
    tools: &SessionTools,
    input: &serde_json::Value,
    approval: Approval,
) -> ToolOutput {
    let input: Input = match serde_json::from_value(input.clone()) {
        Ok(i) => i,
        Err(e) => {
            return ToolOutput::error(format!(
                "Invalid bash input ({e}). Send {{\"command\": \"...\"}}, optionally with \"timeout_ms\" (at most {MAX_TIMEOUT_MS}), or {{\"restart\": true}}."
            ));
        }
    };
    if input.restart == Some(true) {
        let _ = tokio::fs::remove_dir_all(tools.state_dir.join("shell")).await;
        if input.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
            return ToolOutput::text(
                "The shell was restarted: working directory and exported variables are reset.",
            );
        }
    }
    let Some(command) = input.command.filter(|c| !c.trim().is_empty()) else {
        return ToolOutput::error(
            "Invalid bash input: `command` is required (or send {\"restart\": true}).",
        );
    };
    let timeout_ms = input.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    if timeout_ms == 0 || timeout_ms > MAX_TIMEOUT_MS {
        return ToolOutput::error(format!(
            "`timeout_ms` must be between 1 and {MAX_TIMEOUT_MS}."
        ));
    }
    // The environment's packages, installed on first use (sessions of one environment share
    // one build); a failed install fails the call with the installer's reason.
    let layer = match &tools.packages {
        Some(p) => match p.layer().await {
            Ok(dir) => Some(dir),
            Err(why) => return ToolOutput::error(why),
        },
        None => None,
    };
    let hidden = match approval {
        Approval::Auto => match hidden_entries(tools).await {
            Ok(hidden) => hidden,
            Err(refusal) => return refusal,
        },
        Approval::Granted => Masks::default(),
    };
    let roots = quota::roots(tools);
    let start = quota::usage(roots.clone(), &tools.limits).await;
    let over_at_start = quota::over(start, &tools.limits, true);
    let (network, proxy) = match tools.network_for_command().await {
        Ok(n) => n,
        Err(e) => return ToolOutput::error(e),
    };
    let mut env = Vec::new();
    if layer.is_some() {
        env.extend(super::packages::session_env());
    }
    if let Some((_, name)) = &proxy {
        env.push(("MAST_PROXY_SOCKET".to_string(), name.clone()));
        env.extend(super::proxy::sandbox_env());
    }
    let limits = Limits {
        cpu_seconds: timeout_ms.div_ceil(1000).max(1),
        file_bytes: quota::file_cap(start, &tools.limits),
        ..tools.limits
    };
    let script = match &proxy {
        // The forwarder turns 127.0.0.1:3128 inside into the proxy's socket outside; the
        // command starts once it listens. Started from a subshell, it is no job of the
        // command's shell, so a bare `wait` in the command does not wait for it.
        Some(_) => format!(
            "{READ_COMMAND}\n(\n{}\n)\n{SCRIPT}",
            super::proxy::forwarder_command(&tools.helper)
        ),
        None => format!("{READ_COMMAND}\n{SCRIPT}"),
    };
    let sandboxed = SandboxCommand {
        isolation: &tools.isolation,
        workspace: &tools.workspace,
        state: &tools.state_dir,
        network: &network,
        limits,
        script,
        env,
        helper: &tools.helper,
        user: tools.user,
        accounts: &tools.accounts,
        mounts: &tools.mounts,
        packages: layer.as_deref().map(|dir| super::sandbox::PackageMount {
            dir,
            install: false,
        }),
        hidden: &hidden,
    };
    let cgroup =
        super::cgroup::host().command(&tools.session_id, limits.memory_bytes, limits.max_processes);
    let mut child = match sandboxed.spawn(cgroup.as_ref(), command) {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(e),
    };
    let pid = child.id().unwrap_or(0);
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let work = async {
        let (out, err) = tokio::join!(read_capped(stdout), read_capped(stderr));
        let status = child.wait().await;
        (out, err, status.ok().and_then(|s| s.code()))
    };
    tokio::pin!(work);
    let kill = || match &cgroup {
        Some(cg) => cg.kill_all(),
        None => super::sandbox::kill_group(pid),
    };
    let ended = tokio::select! {
        done = &mut work => Ended::Finished(done),
        () = tokio::time::sleep(Duration::from_millis(timeout_ms)) => {
            kill();
            Ended::TimedOut
        }
        why = quota::watch(roots.clone(), start, tools.limits) => {
            kill();
            // What it printed until then is worth showing.
            let done = tokio::time::timeout(Duration::from_secs(2), &mut work).await.ok();
            Ended::OverQuota(why, done)
        }
    };
    drop(proxy);
    let events = cgroup.as_ref().map(|cg| cg.events()).unwrap_or_default();
    if let Some(cg) = cgroup {
        cg.close().await;
    }
    let after = match &ended {
        Ended::Finished(_) => quota::over(
            quota::usage(roots, &tools.limits).await,
            &tools.limits,
            false,
        ),
        _ => None,
    };
    report(ended, events, &limits, timeout_ms, over_at_start, after)
}

/// The protected entries to mask from a command `auto` approved, or why it cannot run.
async fn hidden_entries(tools: &SessionTools) -> Result<Masks, ToolOutput> {
    let mut roots = vec![
        masks::Root {
            host: tools.workspace.clone(),
            sandbox: super::sandbox::WORKSPACE.into(),
        },
        masks::Root {
            host: tools.state_dir.clone(),
            sandbox: super::sandbox::STATE.into(),
        },
    ];
    roots.extend(tools.mounts.entries().iter().map(|m| masks::Root {
        host: m.host.clone(),
        sandbox: m.sandbox.clone().into(),
    }));
    let cap = tools.limits.workspace_files;
    let found = tokio::task::spawn_blocking(move || masks::find(&roots, cap))
        .await
        .unwrap_or_else(|_| Err("the check failed unexpectedly".into()));
    let hidden = found.map_err(|why| {
        ToolOutput::error(format!(
            "This command was approved by the `auto` permission policy, which hides protected files (keys and \
             credentials) from the commands it approves, but the session's files could not be checked for them: {why}. \
             The command did not run."
        ))
    })?;
    if tools.isolation == Isolation::Unsandboxed && !hidden.is_empty() {
        let some: Vec<String> = hidden
            .paths()
            .take(3)
            .map(|p| p.display().to_string())
            .collect();
        return Err(ToolOutput::error(format!(
            "This command was approved by the `auto` permission policy, which hides protected files (keys and \
             credentials, here {}) from the commands it approves. This server runs tools without a sandbox \
             (MAST_UNSAFE_UNSANDBOXED_TOOLS), where nothing can be hidden, so the command did not run. Tell the user: \
             with such files in the workspace, commands need their confirmation (`always_ask`) or `always_allow`.",
            some.join(", ")
        )));
    }
    Ok(hidden)
}

/// How a command ended.
enum Ended {
    /// On its own: (stdout, its size), (stderr, its size), exit code (None: a signal).
    Finished(Output),
    TimedOut,
    /// Stopped by the quota watcher (why), with its output if it came in time.
    OverQuota(String, Option<Output>),
}

type Output = ((Vec<u8>, usize), (Vec<u8>, usize), Option<i32>);

/// Exit status of a process that SIGXCPU ended (128 + 24), as bash reports it.
const CPU_LIMIT_STATUS: i32 = 152;

/// The tool result: output, exit code, and which limit stopped the command, if one did.
fn report(
    ended: Ended,
    events: Events,
    limits: &Limits,
    timeout_ms: u64,
    over_at_start: Option<String>,
    after: Option<String>,
) -> ToolOutput {
    let mut notes = Vec::new();
    let mut failed = false;
    if events.oom_kills > 0 {
        failed = true;
        notes.push(format!(
            "[killed: memory limit {} reached — the session's running commands share it; {} process(es) were killed. \
             Use less memory at once (smaller inputs, fewer parallel jobs).]",
            quota::mb(limits.memory_bytes),
            events.oom_kills
        ));
    }
    if events.pids_max > 0 {
        notes.push(format!(
            "[process limit {} reached: starting more processes or threads failed — the session's running commands \
             share this limit. Run fewer processes at once (for example `make -j4`).]",
            limits.max_processes
        ));
    }
    if let Some(why) = &over_at_start {
        notes.push(format!(
            "[{why} before this command started: files could not grow during it, and changes to the shell's \
             directory and variables were not kept. {}]",
            quota::ADVICE
        ));
    }
    let output = match ended {
        Ended::TimedOut => {
            let mut text = notes.join("\n");
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!(
                "The command timed out after {timeout_ms} ms and was killed with everything it started; its effects are \
                 unknown and the shell state it may have changed was not saved. Retry with a larger `timeout_ms` (at most \
                 {MAX_TIMEOUT_MS}) or split the work into shorter commands."
            ));
            return ToolOutput::error(text);
        }
        Ended::OverQuota(why, output) => {
            failed = true;
            notes.insert(
                0,
                format!(
                    "[killed: {why}; the command and everything it started were stopped. {}]",
                    quota::ADVICE
                ),
            );
            output
        }
        Ended::Finished(output) => Some(output),
    };
    let mut text = String::new();
    if let Some(((out, out_total), (err, err_total), code)) = output {
        text = section(&out, out_total, "stdout");
        if err_total > 0 {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str("[stderr]\n");
            text.push_str(&section(&err, err_total, "stderr"));
        }
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        match code {
            Some(CPU_LIMIT_STATUS) => text.push_str(&format!(
                "[exit code {CPU_LIMIT_STATUS}: a process was stopped at its CPU time limit of {} s (SIGXCPU)]",
                limits.cpu_seconds
            )),
            Some(c) => text.push_str(&format!("[exit code {c}]")),
            None => text.push_str("[killed by a signal]"),
        }
    }
    if let Some(why) = after {
        failed = true;
        notes.push(format!(
            "[{why} after this command: nothing more can be written until files are deleted. {}]",
            quota::ADVICE
        ));
    }
    for note in notes {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&note);
    }
    if failed {
        ToolOutput::error(text)
    } else {
        ToolOutput::text(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::EgressPolicy;
    use crate::netguard::NetGuard;
    use crate::sandbox::Isolation;

    fn unsandboxed(dir: &std::path::Path, limits: Limits) -> SessionTools {
        let workspace = dir.join("ws");
        let state_dir = dir.join("state");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(&state_dir).unwrap();
        SessionTools {
            session_id: format!("sesn_bash{}", mast_domain::ids::new_secret(6)),
            workspace,
            state_dir,
            isolation: Isolation::Unsandboxed,
            limits,
            helper: "mast".into(),
            egress: EgressPolicy::Open,
            user: None,
            accounts: dir.join("etc"),
            netguard: NetGuard::default(),
            mounts: Default::default(),
            packages: None,
            configs: vec![],
            search_url: None,
            calls: Default::default(),
        }
    }

    async fn bash(tools: &SessionTools, command: &str) -> ToolOutput {
        run(
            tools,
            &serde_json::json!({"command": command, "timeout_ms": 20_000}),
            Approval::Granted,
        )
        .await
    }

    fn text(out: &ToolOutput) -> &str {
        out.content[0]["text"].as_str().unwrap()
    }

    /// Unsandboxed (`MAST_UNSAFE_UNSANDBOXED_TOOLS=1`), commands still get their text on
    /// stdin, keep their shell state, and stop at the workspace quota.
    #[tokio::test]
    async fn unsandboxed_commands_read_their_text_and_keep_to_the_quota() {
        let dir = tempfile::tempdir().unwrap();
        let tools = unsandboxed(
            dir.path(),
            Limits {
                workspace_bytes: 8 << 20,
                ..Limits::default()
            },
        );
        let out = bash(
            &tools,
            "mkdir -p sub && cd sub && export X='a b'; (sleep 0.1 &); wait; echo \"$X\"",
        )
        .await;
        assert_eq!(text(&out), "a b\n[exit code 0]", "{out:?}");
        let out = bash(&tools, "pwd; echo \"$X\"; cat").await;
        assert!(
            text(&out).starts_with(&format!("{}/sub\na b\n", tools.workspace.display())),
            "{out:?}"
        );
        let out = bash(
            &tools,
            "for i in $(seq 40); do head -c 1048576 /dev/zero > f$i; sleep 0.05; done; echo finished",
        )
        .await;
        assert!(
            out.is_error
                && text(&out).contains("workspace quota 8 MB exceeded")
                && !text(&out).contains("finished"),
            "{out:?}"
        );
        let used = quota::measure(&quota::roots(&tools)).bytes;
        assert!(used < 16 << 20, "stopped in time: {used}");
    }

    /// Without a sandbox nothing can be masked: a command `auto` approved does not run while
    /// the workspace holds a protected file, and runs as before when it holds none.
    #[tokio::test]
    async fn unsandboxed_auto_commands_do_not_run_beside_protected_files() {
        let dir = tempfile::tempdir().unwrap();
        let tools = unsandboxed(dir.path(), Limits::default());
        let auto = |command: &str| {
            let input = serde_json::json!({"command": command, "timeout_ms": 20_000});
            let tools = &tools;
            async move { run(tools, &input, Approval::Auto).await }
        };
        std::fs::write(tools.workspace.join("notes"), "plain").unwrap();
        let out = auto("cat notes").await;
        assert_eq!(text(&out), "plain\n[exit code 0]", "{out:?}");
        std::fs::create_dir_all(tools.workspace.join("deploy")).unwrap();
        std::fs::write(tools.workspace.join("deploy/id_ed25519"), "KEYMATERIAL").unwrap();
        let out = auto("cat deploy/*").await;
        assert!(out.is_error, "{out:?}");
        assert!(
            text(&out).contains("/workspace/deploy/id_ed25519")
                && text(&out).contains("MAST_UNSAFE_UNSANDBOXED_TOOLS")
                && !text(&out).contains("KEYMATERIAL"),
            "{out:?}"
        );
        let out = bash(&tools, "cat deploy/*").await;
        assert!(
            text(&out).contains("KEYMATERIAL"),
            "granted calls see it: {out:?}"
        );
    }

    #[test]
    fn results_name_the_limit_that_stopped_a_command() {
        let limits = Limits {
            cpu_seconds: 5,
            memory_bytes: 256 << 20,
            max_processes: 64,
            ..Limits::default()
        };
        let finished = |code| Ended::Finished(((b"out".to_vec(), 3), (vec![], 0), code));
        let cpu = report(
            finished(Some(152)),
            Events::default(),
            &limits,
            5000,
            None,
            None,
        );
        assert!(text(&cpu).contains("CPU time limit of 5 s"), "{cpu:?}");
        let oom = Events {
            oom_kills: 1,
            pids_max: 0,
        };
        let mem = report(finished(Some(137)), oom, &limits, 5000, None, None);
        assert!(mem.is_error && text(&mem).contains("killed: memory limit 256 MB"));
        let forks = Events {
            oom_kills: 0,
            pids_max: 3,
        };
        let pids = report(finished(Some(0)), forks, &limits, 5000, None, None);
        assert!(!pids.is_error && text(&pids).contains("process limit 64 reached"));
        let timed = report(Ended::TimedOut, forks, &limits, 5000, None, None);
        assert!(timed.is_error && text(&timed).starts_with("[process limit 64 reached"));
        let plain = report(
            Ended::TimedOut,
            Events::default(),
            &limits,
            5000,
            None,
            None,
        );
        assert!(text(&plain).starts_with("The command timed out after 5000 ms"));
    }
}
